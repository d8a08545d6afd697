"""Run code-policy cells: :class:`CodePolicyRunner` (parent side of code mode).

A cell is Python source that drives the robot through ``robo.<tool>(...)``. It runs in a
separate worker process (:mod:`rpent.policy.worker`) that holds no secrets, has resource
limits and its own process group (:mod:`rpent.policy.sandbox`). Every robot call travels
to this process as a msgpack frame (:mod:`rpent.policy.frames`); the runner executes it
with ``toolkit.execute`` and owns what policy code must not be able to change:

* the call budget: ``max_calls`` robot-tool calls per cell (``--code-max-calls``,
  default 100); call ``max_calls + 1`` is refused, raising ``CallBudgetExhausted`` inside
  the cell, and the result says ``budget_exhausted``. ``finish`` is not counted. A cell
  that catches that and calls again is ended there (its worker is killed: the call after
  a budget refusal, or any refusal past :data:`MAX_REFUSALS`, ends the cell), so a
  looping cell cannot grow its record or this process;
* the wall-time limit ``timeout_s`` per cell (``--code-timeout-s``, default 120 s): when
  it expires the runner sets the toolkit's cancel flag (the running primitive stops at
  its next env-step boundary), then signals the worker (``CellTimeout`` is raised in the
  cell); a cell that does not end within ``grace_s`` after that is killed with its
  process group, and the next cell starts a fresh worker (its result says
  ``worker_restarted``: variables from earlier cells are gone);
* the finish: after an accepted ``finish`` every later robot call of the run is refused
  (``EpisodeFinished`` again).

A cell that hangs, loops, allocates without bound, calls ``os._exit`` or kills its own
process ends as a failed cell (``ok: False``); the runner keeps going. Every cell's
source is saved before it runs and its result after (:mod:`rpent.policy.record`).

Records stay small whatever a cell does: stdout and stderr keep
:data:`~rpent.policy.bounded.MAX_STREAM_CHARS` characters each, a call's arguments and results
are cut, and so is an exception's text (:mod:`rpent.policy.bounded`; a looping cell's
``cell_NNN.json`` stays under 1 MB).

The worker is sandboxed in layers (:mod:`rpent.policy.isolation`); a layer the machine
does not allow is logged once per worker start (``run.log``: "code-policy sandbox: ...
is OFF") and recorded in every cell result under ``sandbox``. Known limit: a toolkit call
that ignores the cancel flag (a long read-only call) delays the kill until it returns.

The worker runs the cell's code, so the runner believes nothing it says about the robot:
``finished`` comes only from a ``finish`` call the toolkit accepted, and a frame that breaks
the protocol (:mod:`rpent.policy.frames`: too large, malformed, a type the worker may not
send, a ``done`` claiming a finish the toolkit never accepted or naming another cell, a
worker that stops reading its replies) ends the cell: its worker is killed and the result
says ``protocol_violation`` (exception ``ProtocolViolation``). Frames the worker sends after
a cell's ``done`` (a forged early ``done``) are found before the next cell starts; that
cell then runs in a fresh worker and its result names the violation. After the last cell they
are looked for when the runner closes (for up to :data:`CLOSE_DRAIN_S` seconds): the last cell's
record is then rewritten with ``ok: false`` and the violation, since its value came from the
forged ``done``.

Without a mount namespace the scratch directory is not a size-limited tmpfs; the runner then
measures it every :data:`SCRATCH_POLL_S` seconds while a cell runs and ends the cell (exception
``ScratchQuotaExceeded``) once it holds more than ``WorkerLimits.scratch_bytes``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from rpent.policy.bounded import (MAX_EXCEPTION_CHARS, MAX_STREAM_CHARS, TextSink, cap_exception, cut, record_args,
                                  record_result)
from rpent.policy.cell import (ENV_STEP_KEYS, CellException, CellResult, RobotCall, env_steps_of,  # noqa: F401
                               spec_to_dict)
from rpent.policy.record import CellRecorder
from rpent.policy.robo import OPERATOR_TOOLS
from rpent.policy.sandbox import WorkerLimits, worker_env
from rpent.policy.scratch import disk_usage, empty_dir
from rpent.policy.worker_process import WorkerProcess, WorkerStartError

log = logging.getLogger(__name__)

#: Refused calls a cell may make before it is ended (a budget refusal allows no further call).
MAX_REFUSALS = 20
#: Seconds between the runner's measurements of the scratch directory (only without a tmpfs quota).
SCRATCH_POLL_S = 0.5
#: Seconds :meth:`CodePolicyRunner.close` waits for frames the worker sends after the last cell's
#: ``done`` (an honest worker sends none; a forged ``done`` is followed by the cell's own frames).
CLOSE_DRAIN_S = 0.3
class _CellState:
    """Mutable bookkeeping of the cell being run (shared with the timer thread)."""

    def __init__(self, index: int):
        self.index = index
        self.stop: str | None = None          # "timeout" | "interrupt"
        self.stop_at: float | None = None
        self.calls: list[RobotCall] = []
        self.calls_made = 0
        self.env_steps = 0
        self.moved = False
        self.budget_exhausted = False
        self.finished: dict | None = None
        self.images: list[dict] | None = None
        self.stdout = TextSink(MAX_STREAM_CHARS)
        self.stderr = TextSink(MAX_STREAM_CHARS)
        self.value: str | None = None
        self.exception: CellException | None = None
        self.worker_lost = False
        self.worker_exit: str | None = None
        self.refusals = 0
        self.processes_ended = 0
        self.ended: str | None = None         # why the runner ended the cell (a refusal loop)
        self.protocol_violation: str | None = None


class CodePolicyRunner:
    """Runs code-policy cells against a toolkit (see the module docstring).

    Args:
        toolkit: object with the toolkit contract of docs/interfaces.md: ``specs()``,
            ``execute(name, args, call_id) -> dict`` (never raises), ``cancel()``,
            ``clear_cancel()``.
        output_dir: the run's output directory (readable by the worker); the record goes
            to ``<output_dir>/code_policy/``, and ``code_policy/scratch/`` is the worker's
            cwd, ``HOME`` and ``TMPDIR``, the only directory it can write.
        timeout_s: wall-time limit per cell, seconds (> 0).
        max_calls: robot-tool calls allowed per cell (>= 0; ``finish`` not counted).
        images: attach the toolkit's latest images to a cell's result after motion.
        grace_s: seconds a signalled cell gets to end before its worker is killed.
        limits: worker resource limits (:class:`~rpent.policy.sandbox.WorkerLimits`).
        extra_env: extra variables for the worker (names that look like credentials are
            refused with ``ValueError``).
        python: interpreter for the worker (default: the current one).
        namespaces: isolate the worker in user, mount, PID, network and IPC namespaces
            where the kernel allows (no network, a read-only filesystem but for its
            scratch directory, only its own processes visible, all of them killed with
            it); see :mod:`rpent.policy.isolation`. The other layers apply either way.

    Use as a context manager, or call :meth:`close`, to end the worker.

    Raises:
        ValueError: a bad limit (the message names it and the valid range).
    """

    def __init__(self, toolkit: Any, output_dir: str | os.PathLike, timeout_s: float = 120.0,
                 max_calls: int = 100, images: bool = True, *, grace_s: float = 3.0,
                 limits: WorkerLimits | None = None, extra_env: Mapping[str, str] | None = None,
                 python: str | None = None, namespaces: bool = True):
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not timeout_s > 0:
            raise ValueError(f"timeout_s (--code-timeout-s) must be a positive number of seconds, got {timeout_s!r}")
        if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 0:
            raise ValueError(f"max_calls (--code-max-calls) must be an int >= 0, got {max_calls!r}")
        if not isinstance(grace_s, (int, float)) or grace_s < 0:
            raise ValueError(f"grace_s must be >= 0 seconds, got {grace_s!r}")
        self.toolkit = toolkit
        self.output_dir = Path(output_dir).resolve()
        self.timeout_s = float(timeout_s)
        self.max_calls = max_calls
        self.images = bool(images)
        self.grace_s = float(grace_s)
        self.limits = limits or WorkerLimits()
        self.python = python or sys.executable
        self.namespaces = bool(namespaces)
        self.recorder = CellRecorder(self.output_dir)
        #: the one directory policy code can write (cwd, HOME and TMPDIR of the worker)
        self.scratch_dir = self.recorder.code_dir / "scratch"
        self._last_result: CellResult | None = None
        self._env = worker_env(self.scratch_dir, extra_env)
        self._specs = [spec_to_dict(s) for s in toolkit.specs()]
        self._readonly = {s["name"]: s["readonly"] for s in self._specs}
        self._operator = sorted(OPERATOR_TOOLS)
        self._worker: WorkerProcess | None = None
        self._last_worker: WorkerProcess | None = None
        self._worker_lost = False
        self._episode_finished: dict | None = None
        self._cumulative_env_steps: int | None = None
        self._run_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._state: _CellState | None = None

    # -- public API ------------------------------------------------------------------
    @property
    def specs(self) -> list[dict[str, Any]]:
        """The toolkit's tool specs as plain dicts (what ``robo`` is built from)."""
        return [dict(s) for s in self._specs]

    @property
    def episode_finished(self) -> dict | None:
        """``{status, summary}`` of the accepted finish of this run, or None."""
        return self._episode_finished

    def run_cell(self, source: str) -> CellResult:
        """Run one cell in the run's worker; blocks until the cell ends.

        Args:
            source: Python source. Its last statement, if an expression, is echoed.

        Returns:
            :class:`CellResult` (also saved as ``code_policy/cell_NNN.json``).

        Raises:
            TypeError: ``source`` is not a str.
            RuntimeError: another cell of this runner is still running (cells of one
                run are sequential).
        """
        if not isinstance(source, str):
            raise TypeError(f"a cell's source must be a str of Python code, got {type(source).__name__}")
        if not self._run_lock.acquire(blocking=False):
            raise RuntimeError("another cell of this run is still running; cells run one at a time")
        try:
            return self._run_cell_locked(source)
        finally:
            self._run_lock.release()

    def interrupt(self) -> bool:
        """Stop the running cell now (thread-safe; e.g. the operator's Esc or the
        planner's own timeout): cancel the current primitive at its next env-step
        boundary and raise ``CellInterrupted`` in the cell (killed after ``grace_s`` if
        it does not end). Returns False when no cell is running."""
        return self._stop("interrupt")

    def close(self) -> None:
        """End the worker process (and anything it forked). Idempotent.

        Before that, frames the worker sent after the last cell's ``done`` are looked for (a
        forged ``done`` lets the cell run on): if there are any, the last cell's record is
        rewritten with ``ok: false``, ``protocol_violation`` and a ``ProtocolViolation`` exception."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        last, self._last_result = self._last_result, None
        if last is not None and worker.alive:
            try:
                self._flag_forged_last_cell(worker, last)
            except Exception:  # noqa: BLE001 - closing must not fail; the record stays as written
                log.exception("code-policy worker: checking the last cell's frames failed")
        worker.close()

    def _flag_forged_last_cell(self, worker: WorkerProcess, last: CellResult) -> None:
        deadline = time.monotonic() + CLOSE_DRAIN_S
        found: str | None = None
        while found is None:
            message = worker.get(deadline - time.monotonic())
            if message is None:
                return
            found = self._frame_after_done(message, last["cell"], None, None)
        last["ok"] = False
        last["protocol_violation"] = found
        last["exception"] = {"type": "ProtocolViolation", "traceback": "",
                             "message": f"the worker broke the frame protocol: {found}"}
        log.warning("code-policy worker: %s", found)
        self.recorder.write_result(int(last["cell"]), last)

    def __enter__(self) -> "CodePolicyRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- cell lifecycle ----------------------------------------------------------------
    def _run_cell_locked(self, source: str) -> CellResult:
        index = self.recorder.next_index()
        source_path = self.recorder.write_source(index, source)   # saved before anything runs
        started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.monotonic()
        state = _CellState(index)
        self._clear_cancel()
        self._check_between_cells(state)
        try:
            restarted = self._ensure_worker()
        except WorkerStartError as exc:
            restarted, self._worker_lost = False, True
            state.exception = {"type": "WorkerStartError", "message": str(exc), "traceback": ""}
            state.worker_lost = True
        else:
            self._drive_cell(state, source)
        self._clear_cancel()

        if self.images and state.moved and state.images is None:
            state.images = self._latest_images()
        timed_out = state.stop == "timeout"
        interrupted = state.stop == "interrupt"
        if state.exception is None and timed_out:
            state.exception = {"type": "CellTimeout",
                               "message": f"the cell ran past its wall-time limit of {self.timeout_s:g}s",
                               "traceback": ""}
        elif state.exception is None and interrupted:
            state.exception = {"type": "CellInterrupted", "message": "the cell was interrupted by the operator",
                               "traceback": ""}
        result: CellResult = {
            "cell": index,
            "source_path": str(source_path.relative_to(self.output_dir)),
            "result_path": str(self.recorder.result_path(index).relative_to(self.output_dir)),
            "started_at": started_at,
            "ok": state.exception is None and not state.worker_lost,
            "stdout": state.stdout.text(),
            "stderr": state.stderr.text(),
            "output_dropped_chars": state.stdout.dropped + state.stderr.dropped,
            "exception": state.exception,
            "value": state.value,
            "robot_calls": state.calls,
            "calls_made": state.calls_made,
            "max_calls": self.max_calls,
            "timeout_s": self.timeout_s,
            "env_steps": state.env_steps,
            "moved": state.moved,
            "finished": state.finished,
            "timed_out": timed_out,
            "interrupted": interrupted,
            "budget_exhausted": state.budget_exhausted,
            "worker_restarted": restarted,
            "worker_lost": state.worker_lost,
            "worker_exit": state.worker_exit,
            "elapsed_s": round(time.monotonic() - t0, 4),
            "processes_ended": state.processes_ended,
            "protocol_violation": state.protocol_violation,
            "sandbox": self._sandbox_info(),
            "images": (state.images or []) if self.images else [],
        }
        self.recorder.write_result(index, result)
        self._last_result = result
        return result

    def _ensure_worker(self) -> bool:
        """Start a worker if there is none alive; True when this replaces a lost one
        (the namespace of earlier cells is gone). Raises WorkerStartError."""
        if self._worker is not None and self._worker.alive:
            return False
        restarted = self._worker_lost or self._worker is not None
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        self._worker = self._start_worker()
        self._worker_lost = False
        return restarted

    def _check_between_cells(self, state: _CellState) -> None:
        """Before a cell: what the worker sent after the previous cell's ``done`` (nothing, for
        an honest worker, but output of a thread the cell left running). A ``done`` or a robot
        call there means the previous ``done`` was forged: the worker is killed (the cell then
        starts a fresh one) and the violation is recorded in this cell."""
        worker = self._worker
        if worker is None or not worker.alive:
            return
        for message in worker.pending():
            found = self._frame_after_done(message, state.index - 1, state.stdout, state.stderr)
            if found is None:
                continue
            state.protocol_violation = f"{found}; the worker was replaced"
            log.warning("code-policy worker: %s", state.protocol_violation)
            worker.kill()
            self._worker_lost = True
            return

    @staticmethod
    def _frame_after_done(message: dict[str, Any], cell: int, stdout, stderr) -> str | None:
        """What a frame the worker sent after cell ``cell``'s ``done`` says: None for output (kept in
        ``stdout``/``stderr`` when given) and the end of a dead worker; else the violation."""
        kind = message.get("t")
        if kind == "out":
            sink = stderr if message.get("stream") == "stderr" else stdout
            if sink is not None:
                sink.add(str(message.get("text", "")))
            return None
        if (kind == "_error" and not message.get("violation")) or kind == "_eof":
            return None  # the worker died between cells; the restart says so
        what = (f"a {kind!r} frame" if kind != "_error" else str(message.get("message")))
        return f"after cell {cell} had ended, the worker sent {what} (an earlier 'done' was forged)"

    def _violation(self, worker: WorkerProcess, state: _CellState, problem: str) -> None:
        """End the cell for a protocol violation: kill its worker, record why."""
        state.protocol_violation = problem
        code = worker.kill()
        state.worker_lost = True
        state.worker_exit = f"killed by the runner for a protocol violation; {worker.describe_exit(code)}"
        state.exception = {"type": "ProtocolViolation", "traceback": "",
                           "message": f"the worker broke the frame protocol, so it was killed: {problem}"}
        log.warning("code-policy worker: protocol violation in cell %d: %s", state.index, problem)

    def _done_problem(self, state: _CellState, message: dict[str, Any]) -> str | None:
        if message.get("cell") != state.index:
            return (f"a 'done' frame for cell {message.get('cell')!r} while cell {state.index} runs "
                    "(an earlier 'done' was forged, or this one is)")
        claimed = message.get("finished")
        if claimed is not None and state.finished is None:
            return (f"the worker reported an accepted finish ({cut(claimed, 200)}) but the toolkit accepted no "
                    "finish call in this cell: a cell cannot decide its own result")
        return None

    def _scratch_quota_ended(self, worker: WorkerProcess, state: _CellState) -> bool:
        """Where the parent watches the scratch directory (no tmpfs quota): when it holds more
        than ``scratch_bytes``, kill the worker, empty the directory and fail the cell with
        ``ScratchQuotaExceeded``. True when it did."""
        if worker.isolation.get("layers", {}).get("scratch_quota", {}).get("on"):
            return False
        used = disk_usage(self.scratch_dir, self.limits.scratch_bytes)
        if used <= self.limits.scratch_bytes:
            return False
        code = worker.kill()
        empty_dir(self.scratch_dir)
        state.worker_lost = True
        state.worker_exit = f"killed by the runner: scratch quota exceeded; {worker.describe_exit(code)}"
        state.exception = {
            "type": "ScratchQuotaExceeded", "traceback": "",
            "message": (f"the cell's scratch directory held more than {used} bytes, over its quota of "
                        f"{self.limits.scratch_bytes} (WorkerLimits.scratch_bytes): the cell was ended and the "
                        "directory emptied"),
        }
        return True

    def _drive_cell(self, state: _CellState, source: str) -> None:
        """Send the cell to the worker and serve it (output, robot calls) until it is
        done, the worker dies, or a stopped cell outlives its grace period."""
        worker = self._worker
        assert worker is not None
        with self._state_lock:
            self._state = state
        timer = threading.Timer(self.timeout_s, self._stop, args=("timeout",))
        timer.daemon = True
        timer.start()
        next_scratch_check = time.monotonic() + SCRATCH_POLL_S
        try:
            # a failed send means the worker died: its reader reports "_eof" below
            worker.send({"t": "run", "cell": state.index, "source": source, "filename": f"<cell {state.index}>"})
            while True:
                wait = 0.25
                if state.stop_at is not None:
                    wait = max(0.0, min(wait, state.stop_at + self.grace_s - time.monotonic()))
                message = worker.get(wait)
                if time.monotonic() >= next_scratch_check:
                    next_scratch_check = time.monotonic() + SCRATCH_POLL_S
                    if self._scratch_quota_ended(worker, state):
                        break
                if message is None:
                    if state.stop_at is not None and time.monotonic() >= state.stop_at + self.grace_s:
                        code = worker.kill()
                        state.worker_lost = True
                        state.worker_exit = (f"killed by the runner: the cell did not end within {self.grace_s:g}s "
                                             f"after its {state.stop}; {worker.describe_exit(code)}")
                        break
                    continue
                kind = message.get("t")
                if kind == "out":
                    sink = state.stderr if message.get("stream") == "stderr" else state.stdout
                    sink.add(str(message.get("text", "")))
                elif kind == "call":
                    self._handle_call(worker, state, message)
                    if state.ended is not None or state.worker_lost:
                        break
                elif kind == "done":
                    problem = self._done_problem(state, message)
                    if problem is not None:
                        self._violation(worker, state, problem)
                        break
                    with self._state_lock:
                        self._state = None             # a timer firing now no longer counts
                    value = message.get("value")
                    state.value = cut(value, MAX_EXCEPTION_CHARS) if value is not None else None
                    state.exception = cap_exception(message.get("exception"))
                    ended = message.get("killed_processes")
                    state.processes_ended = ended if isinstance(ended, int) and not isinstance(ended, bool) else 0
                    self._scratch_quota_ended(worker, state)
                    break
                elif kind == "_error" and message.get("violation"):
                    self._violation(worker, state, str(message.get("message", "")).removeprefix("protocol violation: "))
                    break
                elif kind in ("_eof", "_error"):
                    code = worker.wait_exit(2.0)
                    worker.kill()
                    state.worker_lost = True
                    prefix = f"broken frame from the worker ({message.get('message')}); " if kind == "_error" else ""
                    state.worker_exit = f"{prefix}worker process ended: {worker.describe_exit(code)}"
                    break
        finally:
            timer.cancel()
            with self._state_lock:
                self._state = None
        if state.worker_lost:
            self._worker_lost = True
            self._worker = None
            if state.exception is None:
                state.exception = {
                    "type": "WorkerLost",
                    "message": (f"the cell's worker process is gone ({state.worker_exit}); its variables are "
                                "lost and the next cell starts in a fresh worker"),
                    "traceback": "",
                }

    def _sandbox_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"limits": {}, "isolation": {}}
        worker = self._worker or self._last_worker
        if worker is not None:
            info["limits"] = dict(worker.applied_limits)
            info["limits"]["max_processes"] = worker.limits.max_processes
            info["limits"]["total_memory_bytes"] = worker.limits.total_memory_bytes
            info["limits"]["cpu_cores"] = worker.limits.cpu_cores
            info["limits"]["scratch_bytes"] = worker.limits.scratch_bytes
            info["isolation"] = dict(worker.isolation)
        return info

    def _start_worker(self) -> WorkerProcess:
        worker = WorkerProcess(
            cwd=self.scratch_dir, log_path=self.recorder.code_dir / "worker.log", env=self._env,
            limits=self.limits, specs=self._specs, operator_tools=self._operator, python=self.python,
            namespaces=self.namespaces,
        )
        worker.start()
        self._last_worker = worker
        for note in worker.isolation.get("notes", []):
            layer, _, why = str(note).partition(": off: ")
            log.warning("code-policy sandbox: protection %r is OFF: %s", layer, why or note)
        return worker

    def _stop(self, kind: str) -> bool:
        with self._state_lock:
            state = self._state
            if state is None or state.stop is not None:
                return False
            state.stop = kind
            state.stop_at = time.monotonic()
            worker = self._worker
        try:
            self.toolkit.cancel()
        except Exception:
            pass
        if worker is not None:
            worker.signal(signal.SIGUSR1 if kind == "timeout" else signal.SIGINT)
        return True

    def _clear_cancel(self) -> None:
        try:
            self.toolkit.clear_cancel()
        except Exception:
            pass

    # -- robot calls -------------------------------------------------------------------
    def _handle_call(self, worker: WorkerProcess, state: _CellState, message: dict[str, Any]) -> None:
        call_number = len(state.calls) + 1
        tool = str(message.get("tool", ""))
        args = message.get("args") if isinstance(message.get("args"), dict) else {}
        tool = cut(tool, 200)
        record: RobotCall = {"index": call_number, "tool": tool, "args": record_args(args), "ok": False}
        previous_budget = state.budget_exhausted
        refusal = self._refusal(state, tool)
        if refusal is not None:
            state.refusals += 1
            record["refused"] = refusal["kind"]
            record["result"] = {"error": refusal["message"]}
            state.calls.append(record)
            if (refusal["kind"] == "budget" and previous_budget) or state.refusals > MAX_REFUSALS:
                self._end_cell(worker, state, refusal)
                return
            self._reply(worker, state, {"t": "result", "id": message.get("id"), "refused": refusal})
            return
        state.calls.append(record)

        if tool != "finish":
            state.calls_made += 1
        call_id = f"code{state.index:03d}_{call_number:03d}"
        record["call_id"] = call_id
        t0 = time.monotonic()
        try:
            result = self.toolkit.execute(tool, args, call_id)
        except Exception as exc:  # the contract says never; keep the run alive anyway
            result = {"error": f"toolkit.execute raised {type(exc).__name__}: {exc}"}
        if not isinstance(result, dict):
            result = {"error": f"toolkit.execute returned {type(result).__name__}, expected a dict"}
        record["elapsed_s"] = round(time.monotonic() - t0, 4)
        stateful = not self._readonly.get(tool, False)
        steps, self._cumulative_env_steps = env_steps_of(result, not stateful, self._cumulative_env_steps)
        record["env_steps"] = steps
        record["result"] = record_result(result)
        record["ok"] = "error" not in result
        state.env_steps += steps
        if steps > 0 or (stateful and record["ok"] and tool != "finish"):
            state.moved = True
            if stateful and result.get("_images"):
                state.images = list(result["_images"])
        if result.get("_finish"):
            state.finished = {"status": str(result.get("status", "")), "summary": str(result.get("summary", ""))}
            self._episode_finished = dict(state.finished)

        if state.stop is not None:  # the limit expired while the tool ran
            refusal = self._refusal(state, tool)
            assert refusal is not None
            record["refused"] = refusal["kind"]
            record["ok"] = False
            self._reply(worker, state, {"t": "result", "id": message.get("id"), "refused": refusal})
            return
        self._reply(worker, state, {"t": "result", "id": message.get("id"), "result": result})

    def _reply(self, worker: WorkerProcess, state: _CellState, message: dict[str, Any]) -> None:
        """Send a call's reply; a worker that leaves its replies unread (its pipe stays full)
        breaks the protocol and is killed. A worker that is gone reports itself (``_eof``)."""
        if worker.send(message) or not worker.alive:
            return
        self._violation(worker, state, "the worker did not read its replies (its pipe stayed full for "
                                       "10 s): a cell that writes call frames itself")

    def _end_cell(self, worker: WorkerProcess, state: _CellState, refusal: dict[str, Any]) -> None:
        """End a cell that keeps calling after a refusal: kill its worker (the cell cannot
        catch that), so neither its record nor this process grows."""
        if refusal["kind"] == "budget":
            why = (f"the cell called the robot again after its call budget ({self.max_calls}, --code-max-calls) "
                   "was refused, so it was ended; its variables are lost and the next cell starts in a fresh worker")
        else:
            why = (f"the cell made more than {MAX_REFUSALS} refused robot calls (last: {refusal['kind']}), "
                   "so it was ended; its variables are lost and the next cell starts in a fresh worker")
        state.ended = refusal["kind"]
        code = worker.kill()
        state.worker_lost = True
        state.worker_exit = f"killed by the runner after a refused call; {worker.describe_exit(code)}"
        state.exception = {"type": "CallBudgetExhausted" if refusal["kind"] == "budget" else "CallRefused",
                           "message": why, "traceback": ""}

    def _refusal(self, state: _CellState, tool: str) -> dict[str, Any] | None:
        if state.stop == "timeout":
            return {"kind": "timeout",
                    "message": f"the cell ran past its wall-time limit of {self.timeout_s:g}s (--code-timeout-s)"}
        if state.stop == "interrupt":
            return {"kind": "interrupt", "message": "the cell was interrupted by the operator"}
        if self._episode_finished is not None:
            return {"kind": "finished", "message": "the episode already finished; no more robot calls",
                    **self._episode_finished}
        if tool in OPERATOR_TOOLS:
            return {"kind": "operator",
                    "message": f"{tool} is an operator tool: call it as a tool outside Python"}
        if tool != "finish" and state.calls_made >= self.max_calls:
            state.budget_exhausted = True
            return {"kind": "budget",
                    "message": (f"robot call budget exhausted: this cell already made {self.max_calls} robot-tool "
                                f"calls (--code-max-calls {self.max_calls}); end this cell and continue in a new "
                                "one, or call robo.finish(status, summary)")}
        return None

    def _latest_images(self) -> list[dict] | None:
        if "view_env_state" not in self._readonly:
            return None
        try:
            result = self.toolkit.execute("view_env_state", {}, None)
        except Exception:
            return None
        images = result.get("_images") if isinstance(result, dict) else None
        return list(images) if images else None


