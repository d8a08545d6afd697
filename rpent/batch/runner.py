"""The batch runner: run every cell of a matrix as a normal ``rpent`` run through an
:class:`~rpent.batch.executor.Executor`, arm after arm on the arm's shared services, resume what
is missing, retry infrastructure errors, and write the report.

Per invocation, for each arm (optional arms only when enabled: ``run_arms``):

1. read every cell's attempts from the results root (``rpent.batch.records``): cells with a valid
   success/failure record are skipped (never run or counted twice); cells never run, interrupted
   or with an invalid record are queued; cells that ended in an infrastructure error are queued
   again (a new invocation retries them);
2. an arm with ``flash_from`` first gets its flash plans from the source arm's solved runs
   (``rpent.batch.flash_plans``): cells of a task without a plan are decided as failures
   without a run, cells whose source is not decided yet wait for a later invocation;
3. start the arm's shared services once (``rpent.batch.services``), unless every cell is done;
4. keep ``executor.slots`` jobs going (a job is one cell's run, or for an arm with ``share_env`` one
   ``rpent-flash replay`` of a task's cells, each episode still its own attempt); each attempt gets its own run directory
   ``runs/<arm>/<cell>/attempt-<N>`` and a "start" / "end" line in ``attempts.jsonl``; an attempt
   that ends in an infrastructure error is queued again until it has had ``1 + max_retries``
   attempts in this invocation; before each start, a shared service that died is restarted;
5. after all arms (or on interruption): write ``report.json`` / ``report.md``.

Progress (cells done/total, each arm's k/N with its Wilson interval, ETA, per-node load) is shown
and written to ``progress.json`` by :class:`rpent.batch.progress.Progress`.
"""

from __future__ import annotations

import collections
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rpent.batch.executor import CellJob, Executor
from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.progress import Progress
from rpent.batch.records import CellState, ResultsRoot, classify_attempt
from rpent.batch.report import build_report, write_report
from rpent.batch.services import ArmServices, SharedServiceError

__all__ = ["BatchOptions", "BatchRunner", "run_argv", "EXIT_COMPLETE", "EXIT_INCOMPLETE", "EXIT_USAGE"]

#: ``rpent-batch`` exit codes: every cell has a task outcome / some cells have none (infra errors
#: after the retries, interrupted, a shared service failed: re-run the same command to resume) /
#: bad input, or the results root is locked by another runner
EXIT_COMPLETE, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2


@dataclass
class BatchOptions:
    """How to run a matrix.

    Attributes:
        max_retries: extra attempts per cell after an infrastructure error, per invocation (>= 0).
        cell_timeout_s: wall-clock limit of one run (s); None: none (the run's own limits apply).
        cuda_device, transport: forwarded to the shared services.
        progress: show the progress bar (tqdm, on stderr).
        confidence: Wilson interval coverage of the report.
        env: extra environment variables of every run.
    """

    max_retries: int = 2
    cell_timeout_s: float | None = None
    cuda_device: int | None = None
    transport: str = "socket"
    progress: bool = True
    confidence: float = 0.95
    env: dict[str, str] = field(default_factory=dict)


def run_argv(matrix: Matrix, arm: Arm, cell: Cell, run_dir: Path, endpoints: dict[str, str],
             flash_dir: Path | None = None) -> list[str]:
    """The ``rpent`` command line of one attempt: the cell's episode, the arm's planner, model,
    policy mode and flags after the matrix's common flags, the shared endpoints, the arm's flash
    plan directory (``--flash-dir``, arms with ``flash_from``), ``--output-dir``."""
    argv = [sys.executable, "-m", "rpent.cli.main", "--suite", cell.suite, "--task", str(cell.task),
            "--seed", str(cell.seed), "--planner", arm.planner]
    if arm.model:
        argv += ["--model", arm.model]
    if arm.policy_mode != "tools":
        argv += ["--policy-mode", arm.policy_mode]
    if arm.code_file:
        argv += ["--code-file", arm.code_file]
    argv += list(matrix.flags) + list(arm.flags)
    if "vla" in endpoints:
        argv += ["--vla-endpoint", endpoints["vla"]]
    if "sam3" in endpoints:
        argv += ["--sam3-endpoint", endpoints["sam3"]]
    if flash_dir is not None:
        argv += ["--flash-dir", str(flash_dir)]
    return argv + ["--output-dir", str(run_dir)]


def _prefetch_stats() -> None:
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        pass


class BatchRunner:
    """Runs a matrix in a results root (see the module docstring).

    Args:
        matrix: the matrix (must equal the root's ``matrix.json`` when it exists; the CLI checks).
        root: the results root.
        executor: the executor (entered by :meth:`run`; its ``slots`` is the parallelism).
        options: :class:`BatchOptions`.
        on_event: optional callback receiving ``{"kind": "attempt_started"|"attempt_ended"|
            "arm_started"|"arm_ended"|"note", ...}`` dicts (from the runner's thread; must not block).
        run_arms: names of the arms to run in this invocation (None: every arm); the others'
            cells are left as they are (and reported).
    """

    def __init__(self, matrix: Matrix, root: ResultsRoot, executor: Executor, options: BatchOptions,
                 on_event: Callable[[dict], None] | None = None, run_arms: set[str] | None = None) -> None:
        self.matrix = matrix
        self.run_arms = run_arms
        self.root = root
        self.executor = executor
        self.opts = options
        self.on_event = on_event or (lambda e: None)
        self.attempts_started = 0
        self.checkpoints: dict[str, Any] = {}
        self.interrupted_by: str | None = None  # "received SIGTERM" when a SIGTERM stopped run()

    def states(self) -> dict[str, CellState]:
        """Every cell's current state, from the records."""
        return self.root.cell_states(self.matrix.cells())

    def run(self) -> tuple[int, dict[str, Any]]:
        """Run (or resume) the whole matrix.

        Returns:
            ``(exit_code, report)``: :data:`EXIT_COMPLETE` when every cell has a task outcome,
            else :data:`EXIT_INCOMPLETE`; the report was written to ``report.json``/``report.md``.
        Raises:
            KeyboardInterrupt: after stopping the running cells and writing the report (SIGINT;
                SIGTERM is turned into the same).
        """
        # the report needs scipy.stats (a second or more to import): import it while the runs go
        threading.Thread(target=_prefetch_stats, name="batch-prefetch", daemon=True).start()
        states = self.states()
        counts = {a.name: [0, 0, 0] for a in self.matrix.arms}
        for st in states.values():
            self._count(counts, st, +1)
        running_arms = [a for a in self.matrix.arms if self.run_arms is None or a.name in self.run_arms]
        todo = sum(1 for a in running_arms for c in self.matrix.cells(a.name) if states[c.key].decided is None)
        undecided = sum(1 for st in states.values() if st.decided is None)
        progress = Progress(self.root.root, {a.name: len(self.matrix.cells(a.name)) for a in self.matrix.arms}, counts,
                            len(states) - undecided, todo, slots=self.executor.slots,
                            executor=getattr(self.executor, "name", "?"), bar=self.opts.progress,
                            confidence=self.opts.confidence)
        for arm in self.matrix.arms:
            if arm not in running_arms:
                left = sum(1 for c in self.matrix.cells(arm.name) if states[c.key].decided is None)
                if left:
                    progress.line(f"rpent-batch: arm {arm.name} is not enabled in this invocation; its {left} cells "
                                  f"without a task outcome wait (add --enable-arm {arm.name} to run them)")
        previous = self._install_sigterm()
        try:
            with self.executor:
                for arm in running_arms:
                    self._run_arm(arm, states, counts, progress)
        finally:
            progress.close()
            self._restore_sigterm(previous)
            report = build_report(self.matrix, self.states(), results_root=self.root.root,
                                  confidence=self.opts.confidence)
            write_report(self.root.root, report)
        complete = all(c["status"] in ("success", "failure") for c in report["cells"])
        return (EXIT_COMPLETE if complete else EXIT_INCOMPLETE), report

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _count(counts: dict[str, list[int]], st: CellState, sign: int) -> None:
        c = counts[st.cell.arm]
        if st.status == "success":
            c[0] += sign
        if st.status in ("success", "failure"):
            c[1] += sign
        if st.status == "infra":
            c[2] += sign

    def _install_sigterm(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_term(signum, frame):
            self.interrupted_by = f"received {signal.Signals(signum).name}"  # kept: a library may re-raise
            raise KeyboardInterrupt(self.interrupted_by)                    # a bare KeyboardInterrupt

        return signal.signal(signal.SIGTERM, on_term)

    def _restore_sigterm(self, previous) -> None:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)

    def _run_arm(self, arm: Arm, states: dict[str, CellState], counts, progress: Progress) -> None:
        cells = [c for c in self.matrix.cells(arm.name) if states[c.key].decided is None]
        if not cells:
            return
        flash_dir = None
        if arm.flash_from:
            cells, flash_dir = self._prepare_flash(arm, cells, states, counts, progress)
            if not cells:
                return
        for c in cells:
            last = states[c.key].attempts[-1] if states[c.key].attempts else None
            if last is not None and last.status == "invalid":
                progress.line(f"rpent-batch: re-running {c.key}: the record of attempt {last.attempt} is unreadable "
                              f"({last.reason})")
        queue = collections.deque(self._units(arm, cells))
        tries: dict[str, int] = collections.Counter()
        next_attempt = {c.key: states[c.key].next_attempt() for c in cells}
        services = ArmServices(arm, self.root.services_dir(arm.name), cuda_device=self.opts.cuda_device,
                               transport=self.opts.transport)
        self.checkpoints[arm.name] = {"vla": services.vla_checkpoint, "sam3": services.sam3_checkpoint}
        try:
            endpoints = services.start()
        except SharedServiceError as exc:
            self.root.append_ledger({"event": "arm_error", "key": arm.name, "attempt": 0, "error": str(exc)})
            progress.line(f"rpent-batch: arm {arm.name}: {exc}; its {len(cells)} remaining cells stay pending "
                          f"(logs in {self.root.services_dir(arm.name)})")
            self.on_event({"kind": "note", "arm": arm.name, "text": str(exc)})
            return
        self.on_event({"kind": "arm_started", "arm": arm.name, "endpoints": endpoints, "cells": len(cells)})
        running: dict[str, tuple[list[tuple[Cell, int]], Path | None]] = {}  # job key -> its cells, replay dir
        try:
            while queue or running:
                submitted = bool(queue) and len(running) < self.executor.slots
                while queue and len(running) < self.executor.slots:
                    for note in services.revive():
                        self.root.append_ledger({"event": "service_restart", "key": arm.name, "attempt": 0,
                                                 "note": note})
                        progress.line(f"rpent-batch: arm {arm.name}: {note}")
                    members = []
                    for cell in queue.popleft():
                        n = next_attempt[cell.key]
                        next_attempt[cell.key] = n + 1
                        tries[cell.key] += 1
                        members.append((cell, n))
                    job, group = self._unit_job(arm, members, services.endpoints, flash_dir)
                    for cell, n in members:
                        run_dir = str(self.root.run_dir(cell, n))
                        self.root.append_ledger({"event": "start", "key": cell.key, "attempt": n, "run_dir": run_dir,
                                                 "argv": job.argv, **({"group": str(group)} if group else {})})
                        self.attempts_started += 1
                        progress.attempt_started(cell.key, n)
                        self.on_event({"kind": "attempt_started", "key": cell.key, "attempt": n, "run_dir": run_dir})
                    self.executor.submit(job)
                    running[job.key] = (members, group)
                if submitted:
                    progress.write()
                retry_cells: list[Cell] = []
                for out in self.executor.wait(timeout=1.0):
                    members, group = running.pop(out.key)
                    walls: dict[int, float] = {}
                    if group is not None:
                        from rpent.batch.flash_plans import replay_walls

                        walls = replay_walls(group)
                        self.root.append_ledger({"event": "replay_group", "key": out.key, "attempt": 0,
                                                 "group": str(group), "exit_code": out.exit_code,
                                                 "infra_error": out.infra_error, "wall_s": out.wall_s,
                                                 "where": out.where, "cells": [c.key for c, _ in members]})
                    for cell, n in members:
                        if self._end_attempt(arm, cell, n, out, group, walls, states, counts, progress,
                                             tries[cell.key]):
                            retry_cells.append(cell)
                queue.extend(self._units(arm, retry_cells))
        finally:
            if running:  # interrupted: stop the runs before the services they use
                self.executor.shutdown(cancel=True)
            services.stop()
            self.on_event({"kind": "arm_ended", "arm": arm.name})

    def _end_attempt(self, arm: Arm, cell: Cell, n: int, out, group: Path | None, walls: dict[int, float],
                     states: dict[str, CellState], counts, progress: Progress, tries: int) -> bool:
        """Record how attempt ``n`` of ``cell`` ended (its job's outcome, its run record); True when
        the cell is to be retried in this invocation."""
        from rpent.run.record import run_tag

        run_dir = self.root.run_dir(cell, n)
        infra, wall, log = out.infra_error, out.wall_s, self.root.log_path(cell, n)
        if group is not None:  # one episode of a shared-env replay: its own record decides it
            log = group.parent / f"{group.name}.log"
            wall = walls.get(cell.seed)
            if (run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json").exists():
                infra = None
            elif infra is None:
                infra = (f"the replay process exited with code {out.exit_code} before this seed's episode wrote its "
                         f"record; see {log}")
        end = {"event": "end", "key": cell.key, "attempt": n, "exit_code": out.exit_code, "infra_error": infra,
               "wall_s": wall, "where": out.where}
        if group is not None:
            end["group"] = str(group)
        if out.node_load:
            end["node_load"] = out.node_load
        res = classify_attempt(cell, n, run_dir, end, log)
        end["status"], end["reason"] = res.status, res.reason
        self.root.append_ledger(end)
        st = states[cell.key]
        self._count(counts, st, -1)
        st.attempts.append(res)
        self._count(counts, st, +1)
        progress.attempt_ended(cell.key, wall, out.node_load, out.where)
        retry = st.decided is None and tries <= self.opts.max_retries
        what = res.status + (f" ({res.reason})" if res.reason and res.status != "success" else "")
        if res.status in ("success", "failure"):
            progress.advance()
        elif retry:
            what += f"; retrying ({tries}/{self.opts.max_retries} retries used)"
        else:
            progress.advance()
            what += "; no retries left (re-run the command to try again)"
        shown = "-" if wall is None else f"{wall:.1f}"
        progress.line(f"{cell.key} attempt {n}: {what} [{shown} s] · {progress.summary()}")
        progress.refresh()
        self.on_event({"kind": "attempt_ended", "key": cell.key, "attempt": n, "status": res.status,
                       "reason": res.reason, "retry": retry})
        return retry

    @staticmethod
    def _units(arm: Arm, cells: list[Cell]) -> list[list[Cell]]:
        """What runs as one job: each cell alone, or (``share_env``) the cells of one task and repeat."""
        if not arm.share_env:
            return [[c] for c in cells]
        groups: dict[tuple[str, int, int], list[Cell]] = {}
        for c in cells:
            groups.setdefault((c.suite, c.task, c.repeat), []).append(c)
        return list(groups.values())

    def _unit_job(self, arm: Arm, members: list[tuple[Cell, int]], endpoints: dict[str, str],
                  flash_dir: Path | None) -> tuple[CellJob, Path | None]:
        """The job of one unit: an ``rpent`` run of one cell, or (``share_env``) one ``rpent-flash replay``
        of a task's cells (its own files in a new ``runs/<arm>/_replay/<suite>_t<task>_r<repeat>/replay-<K>/``)."""
        if not arm.share_env:
            cell, n = members[0]
            return self._job(arm, cell, n, endpoints, flash_dir), None
        import re

        from rpent.batch.flash_plans import replay_argv

        first = members[0][0]
        base = self.root.root / "runs" / arm.name / "_replay" / f"{first.suite}_t{first.task}_r{first.repeat}"
        used = [int(m.group(1)) for p in (base.iterdir() if base.is_dir() else ())
                if (m := re.fullmatch(r"replay-(\d+)(?:\.log)?", p.name))]
        k = max(used, default=0) + 1
        group = base / f"replay-{k}"
        base.mkdir(parents=True, exist_ok=True)
        argv = replay_argv(arm, list(self.matrix.flags) + list(arm.flags), first.suite, first.task,
                           {c.seed: self.root.run_dir(c, n) for c, n in members}, group, flash_dir)
        limit = None if self.opts.cell_timeout_s is None else self.opts.cell_timeout_s * len(members)
        env = {**self.opts.env, "PI05_CHECKPOINT_PATH": "", "SAM3_CHECKPOINT_PATH": ""}
        job = CellJob(key=f"{arm.name}/{first.suite}/t{first.task}/r{first.repeat}/replay-{k}", argv=argv,
                      run_dir=str(group), env=env, log_path=str(base / f"replay-{k}.log"), attempt=k, arm=arm.name,
                      timeout_s=limit)
        return job, group

    def _prepare_flash(self, arm: Arm, cells: list[Cell], states: dict[str, CellState], counts,
                       progress: Progress) -> tuple[list[Cell], Path]:
        """Make the arm's flash plans (``rpent.batch.flash_plans``); decide the cells of tasks without
        a plan as failures without a run; keep back the cells whose source is undecided. Returns the
        cells to run and the plan directory."""
        from rpent.batch.flash_plans import NO_PLAN, prepare_flash_arm

        prep = prepare_flash_arm(self.root, self.matrix, arm, states)
        for tp in prep.tasks.values():
            if tp.generated:
                self.root.append_ledger({"event": "flash_plan", "key": f"{arm.name}/{tp.suite}/t{tp.task}",
                                         "attempt": 0, "source_key": tp.source_key, "source_run": tp.source_run,
                                         "plan": tp.plan})
                progress.line(f"rpent-batch: arm {arm.name}: flash plan of {tp.suite} task {tp.task} from "
                              f"{tp.source_key} -> {tp.plan}")
        run, waiting = [], []
        for cell in cells:
            tp = prep.of(cell)
            if tp.state == "plan":
                run.append(cell)
            elif tp.state == "waiting":
                waiting.append(cell)
            else:
                st = states[cell.key]
                n = st.next_attempt()
                run_dir = self.root.run_dir(cell, n)
                self.root.append_ledger({"event": "start", "key": cell.key, "attempt": n, "run_dir": str(run_dir),
                                         "not_run": True})
                self.root.write_not_run(cell, n, NO_PLAN, tp.detail, tp.source_run)
                res = classify_attempt(cell, n, run_dir, None)
                self.root.append_ledger({"event": "end", "key": cell.key, "attempt": n, "exit_code": None,
                                         "infra_error": None, "wall_s": None, "where": "", "not_run": True,
                                         "status": res.status, "reason": res.reason})
                self._count(counts, st, -1)
                st.attempts.append(res)
                self._count(counts, st, +1)
                progress.advance()
                progress.line(f"{cell.key} attempt {n}: {res.status} ({res.reason}) [not run] · {progress.summary()}")
        if waiting:
            keys = sorted({prep.of(c).source_key for c in waiting})
            progress.line(f"rpent-batch: arm {arm.name}: {len(waiting)} cells wait for their flash plan: the source "
                          f"cells {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''} have no task outcome yet; "
                          "re-run the command once they have one")
            progress.to_run -= len(waiting)
        progress.refresh()
        return run, prep.flash_dir

    def _job(self, arm: Arm, cell: Cell, attempt: int, endpoints: dict[str, str],
             flash_dir: Path | None = None) -> CellJob:
        run_dir = self.root.run_dir(cell, attempt)
        env = {**self.opts.env, "PI05_CHECKPOINT_PATH": "", "SAM3_CHECKPOINT_PATH": ""}
        return CellJob(key=cell.key, argv=run_argv(self.matrix, arm, cell, run_dir, endpoints, flash_dir),
                       run_dir=str(run_dir),
                       env=env, log_path=str(self.root.log_path(cell, attempt)), attempt=attempt, arm=arm.name,
                       timeout_s=self.opts.cell_timeout_s)

