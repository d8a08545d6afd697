"""Batch screen service (no Textual): launch ``rpent-batch`` as a supervised subprocess and read
a results root's matrix, cell states and live report from its files.

The batch runs as its own process (``python -m rpent.cli.batch``, own process group; stopping it
sends SIGTERM to the group, and ``rpent-batch`` then stops its runs, which write cancelled records,
and writes its report), so the TUI never holds the results root's lock itself and a batch started
here resumes from the command line and vice versa.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BatchJobError", "batch_argv", "BatchOutput", "BatchLauncher", "MatrixSnapshot", "read_snapshot",
           "CELL_STATES"]

#: cell states shown in the matrix, in legend order
CELL_STATES = ("success", "failure", "infra", "running", "pending")


class BatchJobError(ValueError):
    """The batch form is not usable (the message names the fix)."""


def batch_argv(flags_text: str, results_root: str | Path, program: Sequence[str] | None = None) -> list[str]:
    """The ``rpent-batch`` command line from the form: the flags typed (shell syntax) plus
    ``--results-root`` and ``--no-progress``.

    Raises:
        BatchJobError: unbalanced quotes, an empty results root, or ``--results-root`` typed in the flags.
    """
    try:
        flags = shlex.split(flags_text)
    except ValueError as exc:
        raise BatchJobError(f"cannot read the batch flags: {exc}") from None
    if any(f.split("=", 1)[0] == "--results-root" for f in flags):
        raise BatchJobError("set the results root in its own field, not in the flags")
    if not str(results_root).strip():
        raise BatchJobError("give a results root directory")
    prog = list(program) if program else [sys.executable, "-m", "rpent.cli.batch"]
    return [*prog, *flags, "--results-root", str(Path(str(results_root)).expanduser()), "--no-progress"]


@dataclass
class BatchOutput:
    """A service event: new output lines of the running batch and its state.

    Attributes:
        lines: output lines. state: ``running`` | ``succeeded`` (exit 0) | ``incomplete`` (exit 1) |
            ``failed`` (other exit codes) | ``cancelled``. returncode: when ended.
    """

    lines: list[str] = field(default_factory=list)
    state: str = "running"
    returncode: int | None = None


class BatchLauncher:
    """Runs one ``rpent-batch`` at a time and reports through ``sink`` (thread-safe) as :class:`BatchOutput`.

    Args:
        sink: the app's event sink. log_dir: where ``batch_NNN.log`` files go.
    """

    def __init__(self, sink: Callable[[Any], None], log_dir: Path) -> None:
        self.sink = sink
        self.log_dir = Path(log_dir)
        self.state = "idle"
        self.pid: int | None = None
        self.root: Path | None = None
        self._cancel = None

    @property
    def running(self) -> bool:
        """True while a batch process runs."""
        return self.state == "running"

    def cancel(self) -> bool:
        """Stop the running batch (SIGTERM to its group, then SIGKILL); False when none runs."""
        if self._cancel is None:
            return False
        self._cancel.cancel()
        return True

    async def run(self, argv: list[str], root: Path) -> str:
        """Run the batch to its end (trio); returns the final state."""
        import trio

        from rpent.session.supervised import run_supervised

        self.state, self.root = "running", Path(root)
        n = 1
        while (self.log_dir / f"batch_{n:03d}.log").exists():
            n += 1
        with trio.CancelScope() as scope:
            self._cancel = scope
            try:
                result = await run_supervised(argv, on_lines=lambda lines: self.sink(BatchOutput(lines)),
                                              log_path=self.log_dir / f"batch_{n:03d}.log", grace_s=60.0,
                                              on_started=lambda pid: setattr(self, "pid", pid))
            except OSError as exc:
                self.state = "failed"
                self.sink(BatchOutput([f"cannot start rpent-batch: {exc}"], "failed"))
                return self.state
            finally:
                self._cancel = None
        if scope.cancelled_caught:
            self.state = "cancelled"
            self.sink(BatchOutput(["batch stopped; re-launch the same batch to resume"], "cancelled"))
            return self.state
        self.state = {0: "succeeded", 1: "incomplete"}.get(result.returncode, "failed")
        self.sink(BatchOutput([], self.state, result.returncode))
        return self.state


@dataclass
class MatrixSnapshot:
    """What a results root holds now.

    Attributes:
        columns: column labels (``s<seed>`` or ``s<seed>r<repeat>``).
        rows: ``(arm, suite, task, [state per column])`` with states from :data:`CELL_STATES`.
        counts: state -> number of cells.
        report: the report document built from the records (rpent.batch.report.build_report).
    """

    columns: list[str]
    rows: list[tuple[str, str, int, list[str]]]
    counts: dict[str, int]
    report: dict[str, Any]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        """Cells with a task outcome or out of retries."""
        return self.counts.get("success", 0) + self.counts.get("failure", 0) + self.counts.get("infra", 0)


def read_snapshot(root: str | Path) -> MatrixSnapshot | None:
    """Read a results root (None when it has no ``matrix.json`` yet). Reads files only."""
    from rpent.batch.lock import lock_holder
    from rpent.batch.matrix import Matrix
    from rpent.batch.records import ResultsRoot
    from rpent.batch.report import build_report

    rr = ResultsRoot(root)
    try:
        matrix = Matrix.from_dict(json.loads(rr.matrix_path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError):
        return None
    cells = matrix.cells()
    states = rr.cell_states(cells)
    open_attempts = set()
    for e in rr.read_ledger():
        if e.get("event") == "start":
            open_attempts.add((e["key"], e["attempt"]))
        elif e.get("event") == "end":
            open_attempts.discard((e["key"], e["attempt"]))
    running = {k for k, _ in open_attempts} if lock_holder(rr.lock_path) else set()
    columns = [f"s{s}" if matrix.repeats == 1 else f"s{s}r{r}" for s in matrix.seeds for r in range(matrix.repeats)]
    rows, counts = [], {s: 0 for s in CELL_STATES}
    for arm in matrix.arms:
        for suite in matrix.suites:
            for task in matrix.tasks:
                line = []
                for seed in matrix.seeds:
                    for r in range(matrix.repeats):
                        key = f"{arm.name}/{suite}/t{task}/s{seed}/r{r}"
                        if key not in states:  # a seed this arm does not run (its own subset of the seeds)
                            line.append("absent")
                            continue
                        st = states[key].status
                        if st in ("pending", "infra") and key in running:
                            st = "running"
                        counts[st] += 1
                        line.append(st)
                rows.append((arm.name, suite, task, line))
    return MatrixSnapshot(columns, rows, counts, build_report(matrix, states, results_root=rr.root))
