"""Launching ``rpent-flywheel`` (LeRobot export of recorded trajectories) as a supervised subprocess.

Command line from the product documents ("导出训练数据"):
``rpent-flywheel --input-root ROOT [--input-root ROOT ...] --output-dir OUT [--rules v1|v2] [--image-writer-threads N]``, where ROOT is one run
(or trajectory) directory or a parent of many runs; ``--output-dir`` must not exist yet; the exporter writes ``OUT/report.json`` (exported episodes
and frames, exclusions with reasons) and the dataset under ``OUT/train/``. The child runs through
``supervised.run_supervised`` (own process group, SIGTERM -> grace -> SIGKILL on cancel); its output
is logged to ``<session>/flywheel_<stamp>.log`` and streamed to the UI in batches.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from .batching import Batcher
from .supervised import ProcessResult, run_supervised
from rpent.recording.run_readers import RecordError, read_report

__all__ = ["FlywheelJob", "FlywheelJobError", "FlywheelOutput", "FlywheelState", "FlywheelRunner", "flywheel_argv"]

_PROGRESS_RE = re.compile(r"(?<![\d.])(\d+)\s*/\s*(\d+)(?![\d.])")


class FlywheelJobError(ValueError):
    """The export cannot be launched with these choices (message says which field and how to fix it)."""


@dataclass(frozen=True)
class FlywheelJob:
    """An export request: ``input_roots`` (run dirs, or a parent of the runs), a new ``output_dir``,
    ``threads`` image writers (>= 0), the picked ``runs`` (for display) and the flywheel's rule set
    ``rules`` (``v1``: VLA actions linked to a prediction; ``v2``: every executed action up to the first
    success, which needs runs recorded with ``--record-observations all``)."""

    input_roots: tuple[Path, ...]
    output_dir: Path
    threads: int = 0
    runs: tuple[Path, ...] = ()
    rules: str = "v1"

    @property
    def input_root(self) -> Path:
        """The first input root (the only one when a single run or the whole logs dir is exported)."""
        return self.input_roots[0]

    @classmethod
    def from_selection(cls, picked: Sequence[Path], listed: Sequence[Path], logs_dir: Path, output_dir: Path,
                       threads: int, rules: str = "v1") -> "FlywheelJob":
        """The job for runs ``picked`` among ``listed`` (all runs under ``logs_dir``): every listed run
        picked passes ``logs_dir`` as the one input root; otherwise each picked run is its own
        ``--input-root``.

        Raises:
            FlywheelJobError: nothing picked (the message says how to pick).
        """
        picked = tuple(Path(p) for p in picked)
        if not picked:
            raise FlywheelJobError("pick at least one run to export: space picks the highlighted run (picked runs "
                                   "show [x]), ctrl+a picks all")
        if len(picked) > 1 and set(picked) == {Path(p) for p in listed}:
            return cls((Path(logs_dir),), output_dir, threads, picked, rules)
        return cls(picked, output_dir, threads, picked, rules)

    def validate(self) -> None:
        """Raises ``FlywheelJobError`` for a missing input, an existing output dir or negative threads."""
        for root in self.input_roots:
            if not Path(root).exists():
                raise FlywheelJobError(f"input {root} does not exist; press ctrl+u to reload the run list")
        if Path(self.output_dir).exists():
            raise FlywheelJobError(f"output directory {self.output_dir} already exists; rpent-flywheel needs a new directory")
        if self.rules not in ("v1", "v2"):
            raise FlywheelJobError(f"rules must be v1 or v2, got {self.rules!r}")
        if self.threads < 0:
            raise FlywheelJobError(f"image writer threads must be >= 0 (0 = write images one by one), got {self.threads}")


def flywheel_argv(job: FlywheelJob, program: Sequence[str] | None = None) -> list[str]:
    """The command line for ``job`` (one ``--input-root`` per root). ``program`` defaults to
    ``python -m rpent.cli.flywheel`` (the ``rpent-flywheel`` entry point, independent of PATH)."""
    argv = list(program) if program is not None else [sys.executable, "-m", "rpent.cli.flywheel"]
    for root in job.input_roots:
        argv += ["--input-root", str(root)]
    return argv + ["--output-dir", str(job.output_dir), "--rules", job.rules, "--image-writer-threads", str(job.threads)]


@dataclass(frozen=True)
class FlywheelOutput:
    """UI event: new output ``lines``, ``progress`` (done, total) if a line showed one, and the runner's state."""

    lines: list[str]
    progress: tuple[int, int] | None
    state: str


@dataclass
class FlywheelState:
    """What the Flywheel screen shows: ``state`` (idle, running, succeeded, failed, cancelled), pid, progress, report."""

    state: str = "idle"
    pid: int | None = None
    progress: tuple[int, int] | None = None
    returncode: int | None = None
    report: dict[str, Any] | None = None
    error: str | None = None
    log_path: Path | None = None
    job: FlywheelJob | None = None
    lines: list[str] = field(default_factory=list)


class FlywheelRunner:
    """Runs one export at a time and reports to ``sink`` (thread-safe) with ``FlywheelOutput`` events.

    Args:
        sink: receives ``FlywheelOutput`` batches (at most one per ``interval_s``).
        log_dir: where ``flywheel_<stamp>.log`` files go.
        program: the command prefix (default ``python -m rpent.cli.flywheel``).
        grace_s: SIGTERM -> SIGKILL delay when cancelled (s).
    """

    def __init__(self, sink: Callable[[Any], None], log_dir: Path, program: Sequence[str] | None = None,
                 grace_s: float = 3.0, interval_s: float = 0.1) -> None:
        self._sink = sink
        self.log_dir = Path(log_dir)
        self.program = list(program) if program is not None else None
        self.grace_s = grace_s
        self.interval_s = interval_s
        self.status = FlywheelState()
        self._scope: trio.CancelScope | None = None

    @property
    def running(self) -> bool:
        """True while an export runs."""
        return self.status.state == "running"

    def cancel(self) -> bool:
        """Stop the running export (its process group gets SIGTERM, then SIGKILL). Returns False if idle."""
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    def _post(self, lines: list[str]) -> None:
        for line in lines:
            for m in _PROGRESS_RE.finditer(line):
                done, total = int(m[1]), int(m[2])
                if 0 <= done <= total and total > 0:
                    self.status.progress = (done, total)
        self.status.lines.extend(lines)
        del self.status.lines[:-2000]
        self._sink(FlywheelOutput(lines, self.status.progress, self.status.state))

    async def run(self, job: FlywheelJob) -> FlywheelState:
        """Validate and run ``job`` to the end; return the final state (report read from ``report.json``).

        Raises:
            FlywheelJobError: invalid job (nothing is started), or an export already running.
        """
        if self.running:
            raise FlywheelJobError("an export is already running; wait for it or stop it with x")
        job.validate()
        log_path = self.log_dir / f"flywheel_{time.strftime('%Y%m%dT%H%M%S')}.log"
        self.status = FlywheelState(state="running", log_path=log_path, job=job)
        batcher: Batcher[str] = Batcher(self._post, interval_s=self.interval_s)
        result: ProcessResult | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(batcher.run)
                with trio.CancelScope() as scope:
                    self._scope = scope
                    try:
                        result = await run_supervised(flywheel_argv(job, self.program), on_lines=batcher.put_many,
                                                      log_path=log_path, grace_s=self.grace_s,
                                                      on_started=lambda pid: setattr(self.status, "pid", pid))
                    except OSError as exc:
                        self.status.error = str(exc)
                nursery.cancel_scope.cancel()
        finally:
            self._scope = None
            if result is None:
                self.status.state = "failed" if self.status.error else "cancelled"
            else:
                self.status.returncode = result.returncode
                self.status.state = "succeeded" if result.returncode == 0 else "failed"
                if result.returncode == 3:  # rpent.cli.flywheel.EXIT_NOTHING_EXPORTED
                    self.status.error = "nothing exported: no episode qualified (see report.json for why)"
                elif result.returncode != 0:
                    self.status.error = f"rpent-flywheel exited with status {result.returncode}"
            try:
                self.status.report = read_report(job.output_dir)
            except RecordError as exc:
                self.status.error = str(exc)
            self._sink(FlywheelOutput([], self.status.progress, self.status.state))
        return self.status
