"""Shared services of one arm: the VLA and SAM3 servers are started once per arm through
:class:`rpent.services.Supervisor` (or attached by endpoint) and handed to every run of the arm
as ``--vla-endpoint`` / ``--sam3-endpoint``. The supervisor lives on a background thread that
runs its own trio loop, so the (synchronous) batch runner can use it.

The service specs are the run layer's own (``rpent.run.runner.vla_service_spec`` /
``sam3_service_spec``): an arm's ``vla_checkpoint`` (else ``$PI05_CHECKPOINT_PATH``, exactly as
``rpent`` does) spawns the Pi0.5 server; ``vla_endpoint`` attaches a running one. Runs are
started with ``PI05_CHECKPOINT_PATH`` and ``SAM3_CHECKPOINT_PATH`` emptied, so no run spawns a
private copy of a model.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import trio

from rpent.batch.matrix import Arm

__all__ = ["ArmServices", "SharedServiceError"]


class SharedServiceError(RuntimeError):
    """A shared service of an arm could not be started (the message names it and its log)."""


class ArmServices:
    """Start (or attach) an arm's shared services and keep them up while its cells run.

    Args:
        arm: the arm. log_dir: where ``vla_server.log`` / ``sam3_server.log`` go.
        cuda_device: forwarded to spawned servers. transport: ``socket`` (default) or ``http``.
    Usage::

        with ArmServices(arm, root.services_dir(arm.name)) as svc:
            svc.endpoints            # {"vla": "socket://127.0.0.1:PORT"} (only configured ones)
            svc.revive()             # restart a spawned service that died; returns what it did
    """

    def __init__(self, arm: Arm, log_dir: str | Path, *, cuda_device: int | None = None,
                 transport: str = "socket") -> None:
        from rpent.run.config import RunConfig
        from rpent.run.runner import sam3_service_spec, vla_service_spec

        cfg = RunConfig(suite="-", task=0, vla_endpoint=arm.vla_endpoint, sam3_endpoint=arm.sam3_endpoint,
                        vla_model_path=arm.vla_checkpoint, sam3_checkpoint=arm.sam3_checkpoint,
                        cuda_device=cuda_device, transport=transport)
        self.specs = {k: s for k, s in (("vla", vla_service_spec(cfg)), ("sam3", sam3_service_spec(cfg))) if s}
        self.vla_checkpoint = None if arm.vla_endpoint else cfg.resolved_vla_model_path()
        self.sam3_checkpoint = None if arm.sam3_endpoint else cfg.resolved_sam3_checkpoint()
        self.log_dir = Path(log_dir)
        self.endpoints: dict[str, str] = {}
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._sup = None
        self._ready: queue.Queue = queue.Queue()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> dict[str, str]:
        """Start/attach every configured service; returns ``{"vla"|"sam3": endpoint}``.

        Raises:
            SharedServiceError: a service failed to start (it and the ones started are stopped).
        """
        if not self.specs:
            return {}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name="batch-services", daemon=True)
        self._thread.start()
        ok, value = self._ready.get()
        if not ok:
            self._thread.join(timeout=60)
            raise SharedServiceError(value)
        self.endpoints = value
        return value

    async def _main(self) -> None:
        from rpent.services import Supervisor

        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        try:
            async with Supervisor(log_dir=self.log_dir) as sup:
                self._sup = sup
                eps = {}
                try:
                    for key, spec in self.specs.items():
                        svc = await sup.start(spec)
                        eps[key] = str(svc.endpoint)
                except Exception as exc:  # noqa: BLE001 — reported to the caller as one line
                    self._ready.put((False, f"shared {key} service of the arm failed to start: "
                                            f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
                    return
                self._ready.put((True, eps))
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 — never leave start() waiting
            self._ready.put((False, f"shared services failed: {type(exc).__name__}: {exc}"))
            raise

    def revive(self) -> list[str]:
        """Restart every spawned service that has exited (through ``Supervisor.restart``);
        returns one line per restart (empty when all are alive). The new endpoint replaces the
        old one in :attr:`endpoints`.

        Raises:
            SharedServiceError: a restart failed.
        """
        if self._sup is None or self._token is None:
            return []
        notes = []
        for key, spec in self.specs.items():
            svc = self._sup.get(spec.name)
            if svc.external or svc.returncode is None:
                continue
            code = svc.returncode
            try:
                new = trio.from_thread.run(self._sup.restart, spec.name, trio_token=self._token)
            except Exception as exc:  # noqa: BLE001
                raise SharedServiceError(f"shared {key} service exited with code {code} and could not be "
                                         f"restarted: {exc}") from None
            self.endpoints[key] = str(new.endpoint)
            notes.append(f"shared {key} service exited with code {code}; restarted at {new.endpoint}")
        return notes

    def stop(self) -> None:
        """Stop the services (reverse order; idempotent)."""
        if self._thread is None:
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout=120)
        self._thread = None

    def __enter__(self) -> "ArmServices":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
