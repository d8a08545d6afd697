"""The Ray executor of ``rpent-batch`` (``--ray-address`` / ``--executor ray`` / a ``ray:`` YAML section).

A second implementation of :class:`rpent.batch.executor.Executor`: each :class:`CellJob` runs as
one Ray task, placed by the resources of ``ray.cell`` (CPUs, custom resources that pin cells to a
node group), which starts the job's ``rpent`` command as a child process on its node exactly as
the local executor does (own process group, stdout/stderr to the job's log, SIGTERM when the task
dies, the job's time limit, the driver's stop request). The runner, its ledger, lock, manifest, retries and report are
unchanged: the executor only reports exit codes and infrastructure errors.

Results land under the driver's results root:

* ``results: shared`` -- every node mounts the results root at the same path (NFS, a cluster
  filesystem); the run writes its directory in place;
* ``results: copy`` -- the run writes to node-local scratch; its directory and log come back to
  the driver as one ``tar`` archive with the task's result and are unpacked into the job's
  ``run_dir`` (which no other attempt uses);
* ``results: auto`` (default) -- ``shared`` on a node that sees a marker file the driver wrote in
  the results root, else ``copy``.

Faults: Ray never re-runs a cell by itself (``max_retries=0``, a re-run must get a new run
directory). A task whose worker or node died ends as an outcome with ``infra_error`` ("lost its
Ray node"), so the runner retries the cell (a new attempt, a new run directory, placed wherever
Ray finds room) and the report counts it once. When no live node offers the cell's resources any
more (the only node of a node group died), Ray would queue the cells forever: after
``ray.preflight_wait_s`` seconds without such a node every pending cell ends with an
``infra_error`` naming the resources and the live nodes, so the batch ends (cells without an
outcome stay "infra"; re-running the command resumes them) instead of hanging. ``shutdown(cancel=True)``
(SIGTERM/SIGINT to ``rpent-batch``) sets a stop request that every cell task polls: each SIGTERMs its
run (which writes a cancelled record), waits, then SIGKILLs (see :meth:`RayExecutor.shutdown`).

With ``ray.replicas.vla`` / ``ray.replicas.sam3`` the executor starts replica pools on GPU nodes
when entered and adds ``--vla-endpoint`` / ``--sam3-endpoint`` (the least-loaded replica) to each
job that does not name one. A cell that ends without a task outcome (an exit code other than 0/1,
or an infra error) has its replicas checked (:meth:`ReplicaPool.report_failure`): a dead one is
restarted or dropped from the pool, logged with its reason and kept in :attr:`RayExecutor.replica_events`,
so later cells get a live endpoint. When a role has no replica left, the cells submitted after
that end at once with an ``infra_error`` naming it (they stay resumable).
"""

from __future__ import annotations

import functools
import io
import logging
import os
import secrets
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from rpent.batch.executor import CellJob, CellOutcome, _die_with_parent, node_load, register_executor, \
    stop_process_group
from rpent.cluster.errors import ClusterConfigError, ClusterError
from rpent.cluster.settings import RaySettings, parse_ray_section

log = logging.getLogger("rpent.batch.ray")

RESULTS_MODES = ("auto", "shared", "copy")
MARKER_PREFIX = ".rpent_ray_visible_"
NODE_CHECK_S = 5.0
"""Seconds between checks that some live node still offers the cells' resources (while cells run; a
``ray.nodes()`` query to the GCS each: 2 s before, 5 s since the busy-machine measurement of docs/results/ray.md)."""
CANCEL_POLL_S = 1.0
"""Seconds between a cell task's checks of the driver's stop request (a GCS key-value read)."""
RUN_POLL_S = 0.5
"""Seconds between a cell task's checks whether its run ended (``Popen.poll``)."""
CANCEL_NAMESPACE = "rpent_batch"
"""Namespace of the stop-request keys in Ray's GCS key-value store."""


def _restore_keyboard_interrupt() -> None:
    """Make ``ray.cancel(force=False)`` (a SIGINT to the worker, raised as KeyboardInterrupt) reach
    the task even when the node was started with SIGINT ignored: a shell starts background jobs
    (``ray start ... &``, ``nohup``) with SIGINT set to SIG_IGN, its children inherit that, and
    Python then installs no KeyboardInterrupt handler, so a cancelled run would be SIGKILLed after
    the grace period instead of writing its cancelled record. Only possible on the main thread."""
    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: leave it
        pass


def _cancel_requested(cancel_key: str | None) -> bool:
    """Whether the driver set ``cancel_key`` in Ray's GCS key-value store (its stop request)."""
    if not cancel_key:
        return False
    try:
        from ray.experimental.internal_kv import _internal_kv_get

        return _internal_kv_get(cancel_key, namespace=CANCEL_NAMESPACE) is not None
    except Exception:  # noqa: BLE001 - GCS briefly unreachable: ask again at the next poll
        return False


def run_cell_on_node(job: dict[str, Any], marker: str | None, results: str, stop_grace_s: float,
                     cancel_key: str | None = None) -> dict[str, Any]:
    """Body of the Ray task: run one job's command on this node (see the module docstring).

    Args:
        job: :meth:`CellJob.to_dict`.
        marker: path of the driver's marker file (``results: auto``), or None.
        results: ``shared``, ``copy`` or ``auto``.
        stop_grace_s: seconds between SIGTERM and SIGKILL when the job is stopped.
        cancel_key: key in Ray's GCS key-value store that the driver sets to stop every cell
            (polled every :data:`CANCEL_POLL_S` s); None: only ``ray.cancel`` stops it.

    Returns:
        ``{"exit_code", "infra_error", "wall_s", "where", "node_load" (:func:`rpent.batch.executor.node_load`),
        "archive"?: bytes (tar of run_dir + log)}``;
        a cancelled run ends with ``infra_error`` "cancelled: ..." (its record says cancelled).
    """
    import ray

    _restore_keyboard_interrupt()
    where = f"{os.uname().nodename} {ray.util.get_node_ip_address()} node {ray.get_runtime_context().get_node_id()[:8]}"
    copy = results == "copy" or (results == "auto" and not (marker and os.path.exists(marker)))
    argv, run_dir, log_path = list(job["argv"]), job["run_dir"], job.get("log_path")
    scratch = None
    if copy:
        scratch = tempfile.mkdtemp(prefix="rpent_cell_")
        local_run = os.path.join(scratch, "run")
        argv = [local_run if a == run_dir else a for a in argv]
        log_path = os.path.join(scratch, "run.log") if log_path else None
        where += " (results copied back)"
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    t0 = time.monotonic()
    infra = None
    try:
        proc = subprocess.Popen(argv, env={**os.environ, **job.get("env", {})}, cwd=job.get("cwd"),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=functools.partial(_child_setup, job.get("nice")))
    except OSError as exc:
        return {"exit_code": None, "infra_error": f"could not start the run on {where}: {exc}", "wall_s": 0.0,
                "where": where}
    finally:
        if out is not subprocess.DEVNULL:
            out.close()
    try:
        run_nice = os.getpriority(os.PRIO_PROCESS, proc.pid)
    except OSError:
        run_nice = "?"
    limit = job.get("timeout_s")
    last_cancel_check = time.monotonic()
    try:
        # poll in short sleeps, not one blocking wait: ray.cancel raises KeyboardInterrupt in this thread
        # only between Python bytecodes
        while proc.poll() is None:
            if limit is not None and time.monotonic() - t0 > limit:
                stop_process_group(proc, stop_grace_s)
                infra = f"run exceeded its time limit of {limit:g} s and was stopped"
                break
            if time.monotonic() - last_cancel_check >= CANCEL_POLL_S:
                last_cancel_check = time.monotonic()
                if _cancel_requested(cancel_key):
                    stop_process_group(proc, stop_grace_s)
                    infra = "cancelled: the batch was stopped (the run got SIGTERM)"
                    break
            time.sleep(RUN_POLL_S)
    except BaseException:  # ray.cancel (KeyboardInterrupt) or the worker exiting: stop the run, keep its record
        stop_process_group(proc, stop_grace_s)
        raise
    rc = proc.returncode
    if infra is None and rc is not None and rc < 0:
        infra = f"run process killed by signal {signal.Signals(-rc).name}"
    result: dict[str, Any] = {"exit_code": rc, "infra_error": infra, "wall_s": round(time.monotonic() - t0, 3),
                              "where": f"{where}, nice {run_nice}", "node_load": node_load()}
    if scratch is not None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            if os.path.isdir(os.path.join(scratch, "run")):
                tar.add(os.path.join(scratch, "run"), arcname="run")
            if log_path and os.path.exists(log_path):
                tar.add(log_path, arcname="run.log")
        result["archive"] = buf.getvalue()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _child_setup(nice: int | None) -> None:  # runs in the child between fork and exec
    """An empty signal mask, PDEATHSIG (see :func:`rpent.batch.executor._die_with_parent`), then the
    driver's niceness.

    The mask: a Ray worker runs its task with SIGINT blocked (seen with Ray 2.60: ``SigBlk`` 0x2 in
    ``/proc/<pid>/status``), and a blocked mask survives ``exec``: without this the run and its env
    server would never receive SIGINT, unlike under the local executor. The niceness: Ray starts its
    workers at +15 over the raylet (``RAY_worker_niceness``), which would deprioritise the run against
    other work on the node; raising the priority back needs the privilege to do so (root /
    CAP_SYS_NICE), else the run keeps the worker's niceness (reported in ``where``)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    _die_with_parent()
    if nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, int(nice))
        except OSError:
            pass


def warm_up() -> str:
    """Body of the warm-up task: nothing but what :func:`run_cell_on_node` imports (the worker process
    that runs it is kept by Ray and reused for the cells)."""
    from rpent.batch.executor import _die_with_parent  # noqa: F401 - imported for its cost

    return os.uname().nodename


def _unpack(archive: bytes, job: CellJob) -> None:
    """Unpack a copied-back run into ``job.run_dir`` / ``job.log_path`` (tar ``data`` filter: no
    absolute paths, links or ``..``)."""
    run_dir = Path(job.run_dir)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        staging = Path(tempfile.mkdtemp(prefix=".unpack_", dir=run_dir.parent if run_dir.parent.exists() else None))
        tar.extractall(staging, filter="data")
    src = staging / "run"
    if src.is_dir():
        run_dir.mkdir(parents=True, exist_ok=True)
        for item in src.iterdir():
            target = run_dir / item.name
            if target.exists():  # never overwrite: keep both, the copied one marked
                target = run_dir / f"{item.name}.copied"
            os.replace(item, target)
    if job.log_path and (staging / "run.log").exists():
        Path(job.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(job.log_path, "ab") as f:
            f.write((staging / "run.log").read_bytes())
    import shutil

    shutil.rmtree(staging, ignore_errors=True)


class RayExecutor:
    """Runs cells as Ray tasks (see the module docstring).

    Args:
        slots: cells at once (``--parallel``); refused when the cluster cannot hold that many.
        settings: the validated ``ray`` section (address, ``cell`` resources, replicas).
        results_root: the driver's results root (for the ``auto`` marker).
        results: ``auto`` | ``shared`` | ``copy``.
        stop_grace_s: seconds between SIGTERM and SIGKILL of a stopped run.
        warm_up_workers: submit ``slots`` no-op tasks with the cells' resources at construction, so
            the Ray worker processes (reused by the cell tasks) start while the driver prepares.

    Raises:
        ClusterConfigError (a ValueError): no node offers the cell's resources, ``slots`` above what
            the nodes hold, replicas above the GPUs; ClusterBusyError (a ClusterConfigError): they
            would fit but other jobs hold the resources (after ``ray.preflight_wait_s``);
            ClusterConnectError: no cluster answered.
    """

    name = "ray"

    def __init__(self, slots: int, *, settings: RaySettings, results_root: str | Path | None = None,
                 results: str = "auto", stop_grace_s: float = 20.0, warm_up_workers: bool = True):
        from rpent.cluster.connect import connect, import_ray
        from rpent.cluster.preflight import Demand, preflight

        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if results not in RESULTS_MODES:
            raise ClusterConfigError(f"results mode {results!r} unknown; choose one of {', '.join(RESULTS_MODES)}")
        self.slots = slots
        self.settings = settings
        self.results = results
        self.stop_grace_s = stop_grace_s
        self._owns_connection = not import_ray().is_initialized()
        self.ray = connect(settings.address, settings.connect_timeout_s)
        demands = [Demand("cells (--parallel)", settings.cell, slots)]
        demands += [Demand(f"ray.replicas.{role}.count", rep.request, rep.count, " (one replica per GPU)")
                    for role, rep in settings.replicas.items()]
        try:
            preflight(self.ray, demands, wait_s=settings.preflight_wait_s)
        except BaseException:
            if self._owns_connection:
                from rpent.cluster.connect import disconnect

                disconnect()
            raise
        self.marker: str | None = None
        self._results_root = Path(results_root) if results_root is not None and results == "auto" else None
        self._task = self.ray.remote(max_retries=0)(run_cell_on_node)
        # start the Ray worker processes the first cells will run in now (a Python + Ray start-up each,
        # seconds on a loaded node) instead of when the first cells are submitted
        warm = self.ray.remote(max_retries=0)(warm_up)
        self._warm_refs = [warm.options(**settings.cell.ray_options()).remote() for _ in range(slots if warm_up_workers
                                                                                                 else 0)]
        self._refs: dict[Any, tuple[CellJob, float]] = {}
        self._pools: dict[str, Any] = {}
        self.lost: list[dict[str, Any]] = []
        self._no_node_since: float | None = None
        self._last_node_check = 0.0
        self._done: list[CellOutcome] = []
        self._closed_events: list[dict[str, Any]] = []
        self._used: dict[str, dict[str, str]] = {}  # cell key -> role -> replica endpoint it was given
        self._cancel_key = f"cancel-{secrets.token_hex(8)}"

    # -- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> RayExecutor:
        from rpent.cluster.replicas import ReplicaPool

        for role, rep in self.settings.replicas.items():
            pool = ReplicaPool(rep, extra_env={"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
            pool.start()
            self._pools[role] = pool
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(cancel=True)

    # -- protocol -------------------------------------------------------------------------------------
    def submit(self, job: CellJob) -> None:
        """Start ``job`` as a Ray task (see :class:`rpent.batch.executor.Executor`).

        Raises:
            RuntimeError: all slots busy, or a job with the same key is running.
        """
        if len(self._refs) >= self.slots:
            raise RuntimeError(f"all {self.slots} slots are busy; wait() first")
        if any(j.key == job.key for j, _ in self._refs.values()):
            raise RuntimeError(f"cell {job.key} is already running")
        from rpent.cluster.errors import ClusterError

        argv = list(job.argv)
        used: dict[str, str] = {}
        for role, flag in (("vla", "--vla-endpoint"), ("sam3", "--sam3-endpoint")):
            pool = self._pools.get(role)
            if pool is not None and flag not in argv:
                try:
                    used[role] = pool.endpoint_for(job.key)
                except ClusterError as exc:  # no replica left: the cell cannot run; resumable later
                    for p in self._pools.values():
                        p.release(job.key)
                    self._done.append(CellOutcome(job.key, None, job.run_dir, f"not started: {exc}", 0.0, job.attempt,
                                                  job.arm, "ray"))
                    return
                argv += [flag, used[role]]
        self._used[job.key] = used
        if self._results_root is not None and self.marker is None:
            self._results_root.mkdir(parents=True, exist_ok=True)
            self.marker = str(self._results_root / f"{MARKER_PREFIX}{secrets.token_hex(8)}")
            Path(self.marker).write_text("rpent-batch driver marker: nodes that see this file share the results root\n")
        payload = {**job.to_dict(), "argv": argv, "nice": os.getpriority(os.PRIO_PROCESS, 0)}
        ref = self._task.options(**self.settings.cell.ray_options()).remote(
            payload, self.marker, self.results, self.stop_grace_s, self._cancel_key)
        self._refs[ref] = (job, time.monotonic())

    def running(self) -> list[str]:
        """Keys of the jobs still running."""
        return [job.key for job, _ in self._refs.values()]

    @property
    def replica_events(self) -> list[dict[str, Any]]:
        """Restart / drop decisions of every replica pool (``ReplicaPool.events``), oldest first."""
        live = [e for pool in self._pools.values() for e in pool.events]
        return sorted([*self._closed_events, *live], key=lambda e: e["time"])

    def _check_replicas(self, out: CellOutcome) -> None:
        """After a cell ended without a task outcome, check the replicas it used (restart or drop a dead one)."""
        from rpent.cluster.errors import ClusterError

        used = self._used.pop(out.key, {})
        if out.exit_code in (0, 1) and out.infra_error is None:
            return
        for role, endpoint in used.items():
            try:
                self._pools[role].report_failure(
                    endpoint, f"cell {out.key} attempt {out.attempt} ended with exit code {out.exit_code}"
                              + (f" ({out.infra_error})" if out.infra_error else ""))
            except ClusterError as exc:
                log.warning("%s", exc)

    def _outcome(self, ref: Any) -> CellOutcome:
        from ray.exceptions import RayTaskError, TaskCancelledError

        job, t0 = self._refs.pop(ref)
        for pool in self._pools.values():
            pool.release(job.key)
        wall = round(time.monotonic() - t0, 3)
        try:
            res = self.ray.get(ref, timeout=60.0)
        except TaskCancelledError:
            return CellOutcome(job.key, None, job.run_dir, "run cancelled on its Ray node", wall, job.attempt, job.arm,
                               "ray")
        except RayTaskError as exc:
            first = str(exc).strip().splitlines()[-1][:300]
            return CellOutcome(job.key, None, job.run_dir, f"the cell's Ray task failed: {first}", wall, job.attempt,
                               job.arm, "ray")
        except Exception as exc:  # noqa: BLE001 - WorkerCrashedError, NodeDiedError, ObjectLostError, timeouts
            reason = f"lost its Ray node or worker ({type(exc).__name__}); retried elsewhere as a new attempt"
            self.lost.append({"key": job.key, "attempt": job.attempt, "error": f"{type(exc).__name__}: {exc}"[:500]})
            log.warning("cell %s attempt %d: %s", job.key, job.attempt, reason)
            return CellOutcome(job.key, None, job.run_dir, reason, wall, job.attempt, job.arm, "ray")
        archive = res.pop("archive", None)
        if archive is not None:
            _unpack(archive, job)
        return CellOutcome(job.key, res["exit_code"], job.run_dir, res["infra_error"], res["wall_s"], job.attempt,
                           job.arm, res["where"], res.get("node_load"))

    def wait(self, timeout: float | None = None) -> list[CellOutcome]:
        """Block until >= 1 job ended or ``timeout`` s passed; the ended jobs' outcomes, each once.

        With ``timeout=None`` it still returns when no live node offers the cells' resources any more
        (those jobs end with an ``infra_error``; see the module docstring)."""
        if self._done:
            done, self._done = self._done, []
            return done
        if not self._refs:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = NODE_CHECK_S if deadline is None else max(0.0, min(NODE_CHECK_S, deadline - time.monotonic()))
            ready, rest = self.ray.wait(list(self._refs), num_returns=1, timeout=step)
            if ready:
                if rest:
                    more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                outs = [self._outcome(ref) for ref in ready]
                for out in outs:
                    self._check_replicas(out)
                return outs
            stranded = self._stranded()
            if stranded or (deadline is not None and time.monotonic() >= deadline):
                return stranded

    def _request_cancel(self) -> bool:
        """Set this executor's stop request (see :meth:`shutdown`); False when it could not be written."""
        try:
            from ray.experimental.internal_kv import _internal_kv_initialized, _internal_kv_put

            if not _internal_kv_initialized():
                return False
            _internal_kv_put(self._cancel_key, b"1", overwrite=True, namespace=CANCEL_NAMESPACE)
            return True
        except Exception as exc:  # noqa: BLE001 - Ray Client, or the GCS unreachable
            log.warning("could not write the stop request to Ray's key-value store (%s: %s); using ray.cancel",
                        type(exc).__name__, exc)
            return False

    def _clear_cancel(self) -> None:
        try:
            from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_initialized

            if _internal_kv_initialized():
                _internal_kv_del(self._cancel_key, namespace=CANCEL_NAMESPACE)
        except Exception:  # noqa: BLE001 - disconnected already
            pass
        self._cancel_key = None

    def _stranded(self) -> list[CellOutcome]:
        """Outcomes of every running job once no live node has offered ``ray.cell``'s resources for
        ``ray.preflight_wait_s`` seconds (checked every :data:`NODE_CHECK_S` s); else []."""
        from rpent.cluster.preflight import live_nodes, node_capacity

        now = time.monotonic()
        if now - self._last_node_check < NODE_CHECK_S:
            return []
        self._last_node_check = now
        nodes = live_nodes(self.ray, with_available=False)
        if any(node_capacity(n.resources, self.settings.cell) > 0 for n in nodes):
            self._no_node_since = None
            return []
        listing = "; ".join(n.describe() for n in nodes) or "none"
        if self._no_node_since is None:
            self._no_node_since = now
            log.warning("no live Ray node offers %s (live nodes: %s); waiting up to %.0f s for one",
                        self.settings.cell.describe(), listing, self.settings.preflight_wait_s)
        waited = now - self._no_node_since
        if waited < self.settings.preflight_wait_s:
            return []
        reason = (f"no live Ray node offers the cell's {self.settings.cell.describe()} any more (live nodes: {listing}); "
                  f"gave up after {waited:.0f} s (ray.preflight_wait_s); add such a node and re-run to resume")
        outs = []
        for ref in list(self._refs):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already failed with its node
                pass
            job, t0 = self._refs.pop(ref)
            for pool in self._pools.values():
                pool.release(job.key)
            self.lost.append({"key": job.key, "attempt": job.attempt, "error": reason})
            log.warning("cell %s attempt %d: %s", job.key, job.attempt, reason)
            outs.append(CellOutcome(job.key, None, job.run_dir, reason, round(now - t0, 3), job.attempt, job.arm,
                                    "ray"))
        return outs

    def shutdown(self, cancel: bool = True) -> None:
        """Stop (``cancel``) or wait for the running jobs, stop the replica pools, remove the marker,
        disconnect if this executor connected. Idempotent.

        Cancelling sets this executor's stop request in Ray's GCS key-value store: every cell task sees
        it within :data:`CANCEL_POLL_S` s and stops its run (SIGTERM, ``stop_grace_s``, SIGKILL), so the
        run writes its record marked cancelled; a copied-back run's directory still comes back. Where the
        store cannot be written (Ray Client) ``ray.cancel`` asks instead. A task still running after
        ``stop_grace_s + 15`` s is force-cancelled: its worker exits and the run gets SIGTERM from the
        kernel (``PR_SET_PDEATHSIG``). (``ray.cancel`` without ``force`` on running tasks is not used by
        default: with Ray 2.60 the driver could abort with "Tried to complete task that was not pending"
        when the task's reply crossed the cancellation.)"""
        refs = list(self._refs)
        if refs:
            if cancel and not self._request_cancel():
                for ref in refs:
                    try:
                        self.ray.cancel(ref, force=False)
                    except Exception:  # noqa: BLE001 - already finished
                        pass
            ready, rest = self.ray.wait(refs, num_returns=len(refs),
                                        timeout=self.stop_grace_s + 15.0 if cancel else None)
            for ref in ready:  # the stopped runs' records (copy mode: their directories come back)
                job, _ = self._refs[ref]
                try:
                    res = self.ray.get(ref, timeout=30.0)
                    if res.get("archive") is not None:
                        _unpack(res["archive"], job)
                except Exception as exc:  # noqa: BLE001 - lost with its node, or cancelled by ray.cancel
                    log.debug("cell %s: no result at shutdown (%s)", job.key, type(exc).__name__)
            if cancel:
                for ref in rest:
                    try:
                        self.ray.cancel(ref, force=True)
                    except Exception:  # noqa: BLE001 - already finished
                        pass
        if self._cancel_key is not None:
            self._clear_cancel()
        self._refs.clear()
        self._warm_refs = []
        for pool in self._pools.values():
            self._closed_events += pool.events
            pool.close()
        self._pools = {}
        if self.marker:
            Path(self.marker).unlink(missing_ok=True)
            self.marker = None
        if self._owns_connection:
            from rpent.cluster.connect import disconnect

            disconnect()
            self._owns_connection = False


def ray_section_of_matrix_file(path: str | Path | None) -> dict[str, Any] | None:
    """The ``ray`` section of a matrix YAML file (None when absent or no file)."""
    if not path:
        return None
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # the matrix loader reports unreadable files
    section = doc.get("ray") if isinstance(doc, dict) else None
    return section if section is not None else None


def _factory(*, slots: int, settings: RaySettings | None = None, address: str | None = None,
             results_root: str | Path | None = None, results: str | None = None, **options: Any) -> RayExecutor:
    """``create_executor("ray", slots=N, settings=... | address=...)``; connection problems become ValueError
    (the CLI's one "rpent-batch: error: ..." line, exit 2)."""
    try:
        if settings is None:
            settings = parse_ray_section({}, address or "auto")
        assert settings is not None
        return RayExecutor(slots, settings=settings, results_root=results_root, results=results or settings.results, **options)
    except ClusterConfigError:
        raise
    except ClusterError as exc:
        raise ValueError(str(exc)) from None


register_executor("ray", _factory)
