"""Replay one flash plan on many seeds of its task in one process, on one env server.

``rpent-flash replay --flash-dir D --suite S --task T --seeds 1 2 3 --output-root R``:

1. start one :mod:`rpent.flash.env_server` (the LIBERO env server plus ``env.select_seed``) on
   the first seed, under a :class:`~rpent.services.Supervisor` whose log is ``R/env_server.log``;
2. for each seed: move the server to that seed (``env.select_seed``; not for the first), then run
   :func:`rpent.run.runner.run_task` with ``--planner flash`` attached to the server
   (``env_endpoint``): a complete, separate run record in ``R/<tag>/`` (or the seed's ``--run-dir``;
   ``states.json``,
   transcript, recipe when solved, ``flash_replay.json`` naming the shared server's pid and how
   often it switched seed), exactly what ``rpent --planner flash`` writes;
3. append one line per episode to ``R/replay.jsonl`` (and print it): seed, run directory,
   success, finish, error, env steps, wall time (s) of the run and CPU time (s, user + sys) of
   this process and of the env server during it (``cpu_s``; split into ``cpu_client_s`` and
   ``cpu_server_s``), the 1-min load average; a first line (``"kind":
   "env_server_start"``) gives the server start's wall and CPU time, which the episodes share; a
   stop by a signal between episodes adds a ``"kind": "stopped"`` line with the reason and the
   seeds that never started.

With ``fresh_env=True`` (``--fresh-env-per-seed``) every seed gets its own plain LIBERO env server,
like a plain ``rpent`` run (for comparison; ``flash_replay.json`` then says ``shared: false``). A server that died is restarted before the next seed
(the dead one's failure is in that run's record). The compiled model is kept across seeds;
:meth:`rpent.robots.libero.sim.LiberoSim.reset` makes a seed's episode independent of what ran
before, so sharing changes the cost, not the episode.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rpent.paths import file_blocker

__all__ = ["ReplayOptions", "replay_seeds", "ENV_SERVER_MODULE"]

ENV_SERVER_MODULE = "rpent.flash.env_server"
log = logging.getLogger("rpent.flash")


@dataclass
class ReplayOptions:
    """What to replay and where.

    Attributes:
        flash_dir: directory of ``<cell>_plan.json`` / ``<cell>_anchors.json``.
        suite, task: the task; seeds: replay seeds (>= 0, each once).
        output_root: run directories go to ``<output_root>/<tag>/``.
        libero_type, max_episode_steps, transport, cuda_device: as for ``rpent``.
        timeout_s: per-episode planner limit (s); None = the ``rpent`` default chain.
        fresh_env: one env server per seed instead of one shared server.
        run_dirs: seed -> the run directory of its episode (absolute; new or empty), instead of
            ``<output_root>/<tag>/`` (``rpent-batch`` puts each episode in its cell's attempt directory).
    """

    flash_dir: str
    suite: str
    task: int
    seeds: list[int]
    output_root: str
    libero_type: str | None = None
    max_episode_steps: int = 10000
    transport: str = "socket"
    cuda_device: int | None = None
    timeout_s: float | None = None
    fresh_env: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    run_dirs: dict[int, str] | None = None

    def run_dir(self, seed: int) -> Path:
        """Where the episode of ``seed`` writes its record."""
        from rpent.run.record import run_tag

        if self.run_dirs:
            return Path(self.run_dirs[seed])
        return Path(self.output_root) / run_tag(self.suite, self.task, seed)


def _proc_cpu_s(pid: int | None) -> float | None:
    """user + sys CPU seconds of a live process from ``/proc/<pid>/stat``; None if unreadable."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _server_spec(opts: ReplayOptions, seed: int, name: str):
    from rpent.services import ServiceSpec

    module = "rpent.robots.libero.env_server" if opts.fresh_env else ENV_SERVER_MODULE
    argv = [sys.executable, "-m", module, "--suite", opts.suite, "--task", str(opts.task),
            "--seed", str(seed), "--max-episode-steps", str(opts.max_episode_steps)]
    if opts.libero_type:
        argv += ["--libero-type", opts.libero_type]
    if opts.cuda_device is not None:
        argv += ["--cuda-device", str(opts.cuda_device)]
    return ServiceSpec(name=name, argv=argv, transport=opts.transport,
                       env={"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", **opts.extra_env}, ready_timeout_s=300.0)


def check_options(opts: ReplayOptions) -> None:
    """Refuse bad input before anything starts.

    Raises:
        ValueError: no seeds, a negative or repeated seed, a step limit < 1, a planner timeout
            <= 0 s, a negative EGL device, an output root that is a file or already holds files,
            an unknown suite/task, a flash directory that is a file, has no plan for the task or a malformed one
            (one line naming it and the fix).
    """
    from rpent.flash.files import FlashFileError, find_plan, load_flash
    from rpent.robots.libero import suites

    if not opts.seeds:
        raise ValueError("--seeds: give at least one seed")
    if any(s < 0 for s in opts.seeds) or len(set(opts.seeds)) != len(opts.seeds):
        raise ValueError(f"--seeds must be distinct integers >= 0, got {opts.seeds}")
    from rpent.run.config import check_max_episode_steps, check_seed

    for s in opts.seeds:
        check_seed(s, "--seeds")
    check_max_episode_steps(opts.max_episode_steps)
    if opts.timeout_s is not None and not opts.timeout_s > 0:
        raise ValueError(f"--planner-timeout-s must be > 0 seconds, got {opts.timeout_s}")
    if opts.cuda_device is not None and opts.cuda_device < 0:
        raise ValueError(f"--cuda-device must be an EGL device index >= 0, got {opts.cuda_device}")
    root = Path(opts.output_root)
    blocker = file_blocker(root.absolute())
    if blocker == root.absolute():
        raise ValueError(f"--output-root {root} is a file, not a directory; choose a new directory")
    if blocker is not None:
        raise ValueError(f"--output-root {root} cannot be a directory ({blocker} is a file); choose a new directory")
    if root.is_dir() and any(root.iterdir()):
        raise ValueError(f"--output-root {root} already holds files (an earlier replay?); a replay never "
                         "writes into another's records: choose a new --output-root")
    if opts.run_dirs is not None:
        missing = [s for s in opts.seeds if s not in opts.run_dirs]
        if missing or set(opts.run_dirs) - set(opts.seeds):
            raise ValueError(f"--run-dir: give one SEED=DIR for every seed of --seeds and no other (seeds {opts.seeds}, "
                             f"run dirs for {sorted(opts.run_dirs)})")
        dirs = [Path(d) for d in opts.run_dirs.values()]
        if len({d.resolve() for d in dirs}) != len(dirs):
            raise ValueError("--run-dir: every seed needs its own directory")
        for d in dirs:
            if d.exists() and (not d.is_dir() or any(d.iterdir())):
                raise ValueError(f"--run-dir {d} already holds files or is a file; a replay never writes into "
                                 "another run's record: give a new directory")
    flash_dir = Path(opts.flash_dir)
    if flash_dir.exists() and not flash_dir.is_dir():
        raise ValueError(f"--flash-dir {flash_dir} is a file; give the directory that holds <cell>_plan.json")
    suites.task_info(opts.suite, opts.task, suites.check_libero_type(opts.libero_type))
    cell = find_plan(flash_dir, opts.suite, opts.task)  # FlashFileError is a ValueError
    try:  # a malformed plan or anchors file is refused here, before an env server starts
        load_flash(flash_dir, cell)
    except FlashFileError as exc:
        hint = f"`rpent-flash generate --audit A --recipe R --destination {flash_dir}`"
        text = str(exc)  # one hint with the full command, not a second "regenerate"
        raise ValueError(f"{text} ({hint})" if "regenerate" in text
                         else f"{text}; regenerate the plan with {hint}") from None


async def replay_seeds(opts: ReplayOptions, *, on_row=None) -> list[dict]:
    """Replay the task's flash plan on every seed of ``opts`` (module doc); returns the rows
    written to ``replay.jsonl``. Errors of a run are in its record and row, never raised.

    Raises:
        ValueError: see :func:`check_options`.
    """
    import trio

    from rpent.planners.base import resolve_timeout_s

    check_options(opts)
    root = Path(opts.output_root)
    root.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    ledger = root / "replay.jsonl"
    timeout = resolve_timeout_s("flash", opts.timeout_s)

    def emit(row: dict) -> None:
        rows.append(row)
        with open(ledger, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if on_row is not None:
            on_row(row)

    stop: dict = {"why": None, "scope": None, "steering": None}

    async def watch_signals(task_status=trio.TASK_STATUS_IGNORED) -> None:
        # SIGTERM/SIGINT/SIGHUP: stop the running episode as `rpent` does (its record says
        # cancelled and names the signal), write its row, start no further seed
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                stop["why"] = f"received {signal.Signals(signum).name}"
                log.warning("%s; stopping the replay after this episode's record", stop["why"])
                if stop["steering"] is not None:
                    stop["steering"].interrupt(stop=True, reason=stop["why"])
                if stop["scope"] is not None:
                    stop["scope"].cancel()

    async with trio.open_nursery() as watcher:
        if threading.current_thread() is threading.main_thread():
            await watcher.start(watch_signals)
        try:
            await _replay_all(opts, root, timeout, emit, stop)
        finally:
            watcher.cancel_scope.cancel()
    return rows


async def _replay_all(opts: ReplayOptions, root: Path, timeout: float | None, emit, stop: dict) -> None:
    """The seeds of :func:`replay_seeds` one after another; ``stop`` carries a signal's reason and the
    running episode's cancel scope and steering (set while it runs)."""
    import trio

    from rpent.planners.base import PlannerConfig
    from rpent.planners.steering import Steering
    from rpent.rpc import RpcClient
    from rpent.run import run_task
    from rpent.run.config import RunConfig
    from rpent.services import Supervisor

    async with Supervisor(log_dir=root) as sup:
        svc = None
        n_servers = 0

        async def start_server(seed: int):
            nonlocal n_servers
            n_servers += 1
            name = "env_server" if n_servers == 1 else f"env_server_{n_servers}"
            w, c = time.monotonic(), _self_cpu_s()
            s = await sup.start(_server_spec(opts, seed, name))
            emit({"kind": "env_server_start", "suite": opts.suite, "task": opts.task, "seed": seed,
                  "server": name, "pid": s.pid, "log": str(s.log_path), "wall_s": round(time.monotonic() - w, 2),
                  "cpu_s": _round(_add(_proc_cpu_s(s.pid), _self_cpu_s() - c)),
                  "load": round(os.getloadavg()[0], 2)})
            return s

        for i, seed in enumerate(opts.seeds):
            if stop["why"]:
                # the ledger says the replay was stopped and which seeds never started (a reader must
                # not take the rows above it for the whole replay)
                emit({"kind": "stopped", "suite": opts.suite, "task": opts.task, "reason": stop["why"],
                      "seeds_not_started": list(opts.seeds[i:])})
                break
            out = opts.run_dir(seed)
            w0, c0 = time.monotonic(), _self_cpu_s()
            switch_error = None
            if svc is None or opts.fresh_env or svc.returncode is not None:
                if svc is not None and (opts.fresh_env or svc.returncode is not None):
                    await sup.stop(svc.name)
                svc = await start_server(seed)
                w0, c0 = time.monotonic(), _self_cpu_s()
            else:
                def switch() -> None:
                    client = RpcClient(svc.endpoint, timeout=120.0)
                    try:
                        client.call("env.select_seed", seed)
                    finally:
                        client.close()
                try:
                    await trio.to_thread.run_sync(switch)
                except Exception as exc:  # noqa: BLE001 — a dead server: start a new one for this seed
                    switch_error = f"{type(exc).__name__}: {exc}"
                    log.warning("env.select_seed(%d) failed (%s); starting a new env server", seed, switch_error)
                    svc = await start_server(seed)
                    w0, c0 = time.monotonic(), _self_cpu_s()
            s0 = _proc_cpu_s(svc.pid)
            cfg = RunConfig(suite=opts.suite, task=opts.task, seed=seed, libero_type=opts.libero_type,
                            max_episode_steps=opts.max_episode_steps, planner="flash",
                            planner_config=PlannerConfig(timeout_s=timeout, flash_dir=str(opts.flash_dir)),
                            output_dir=str(out), env_endpoint=str(svc.endpoint), transport=opts.transport,
                            video=False)
            row = {"kind": "episode", "suite": opts.suite, "task": opts.task, "seed": seed, "run_dir": str(out),
                   "env_server_pid": svc.pid, "shared_env": not opts.fresh_env, "load": round(os.getloadavg()[0], 2)}
            if switch_error:
                row["env_server_restarted"] = switch_error
            if stop["why"]:  # a signal while the env server started or switched seed
                break
            outcome = None
            try:
                with trio.CancelScope() as scope:
                    stop["scope"], stop["steering"] = scope, Steering()
                    async with Supervisor(log_dir=out) as run_sup:
                        outcome = await run_task(cfg, run_sup, steering=stop["steering"])
            except FileExistsError as exc:
                row.update(success=False, label="error", finish=None, error=str(exc), env_steps=0)
            finally:
                stop["scope"] = stop["steering"] = None
            if outcome is not None:
                row.update(success=outcome.environment_success, label=outcome.label, finish=outcome.finish,
                           error=outcome.error, env_steps=outcome.env_steps)
            elif "label" not in row:  # stopped by a signal: the run's own record says cancelled
                row.update(_stopped_row(out, stop["why"]))
            row["wall_s"] = round(time.monotonic() - w0, 2)
            server_cpu = _delta(_proc_cpu_s(svc.pid), s0)
            row["cpu_s"] = _round(_add(server_cpu, _self_cpu_s() - c0))
            row["cpu_server_s"], row["cpu_client_s"] = _round(server_cpu), _round(_self_cpu_s() - c0)
            emit(row)


def _stopped_row(run_dir: Path, why: str | None) -> dict:
    """Ledger fields of an episode stopped by a signal, taken from the run's own record
    (``transcript_*.json``: label, error, env steps done before the stop) so that the ledger and the
    record agree; ``env_steps`` None and label ``cancelled`` only when the run wrote no readable record."""
    row = {"success": None, "label": "cancelled", "finish": None, "error": why, "env_steps": None}
    found = sorted(Path(run_dir).glob("transcript_*.json"))
    try:
        doc = json.loads(found[0].read_text(encoding="utf-8")) if len(found) == 1 else None
    except (OSError, UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict):
        row.update(success=doc.get("environment_success"), label=doc.get("label") or "cancelled",
                   finish=doc.get("finish"), error=doc.get("error") or why, env_steps=doc.get("env_steps"))
    return row


def _add(a: float | None, b: float) -> float | None:
    return None if a is None else a + b


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)
