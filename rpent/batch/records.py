"""The results root on disk, the attempts ledger, and what each attempt's run record says.

Layout of a results root::

    ROOT/
      .batch.lock                 held (flock) by the runner working on ROOT
      matrix.json                 the frozen matrix (rpent.batch.matrix.Matrix.to_dict)
      manifest.json               provenance (rpent.batch.manifest)
      attempts.jsonl              append-only ledger: one "start" and one "end" line per attempt
      runs/<arm>/<suite>_t<task>_s<seed>_r<repeat>/attempt-<N>/    a normal rpent run directory
      runs/<arm>/<suite>_t<task>_s<seed>_r<repeat>/attempt-<N>.log the run process's stdout/stderr
      flash/<arm>/                flash plans of an arm with ``flash_from`` (rpent.batch.flash_plans)
      services/<arm>/             logs of the arm's shared VLA / SAM3 servers
      report.json, report.md      written after every invocation (rpent.batch.report)

Each attempt has its own run directory, so nothing overwrites another attempt's files. An
attempt's status comes from its run record (``transcript_<tag>.json`` and ``states.json``, both
checked, not just present) together with the ledger:

=============  ======================================================================
success        the record is valid and the environment's success predicate held
failure        valid record, task not solved (exit code 1: gave up, max turns, timeout),
               or a ``--code-file`` policy whose own code raised (exit code 2, label
               ``error``, ``error_kind`` ``policy_code``: a retry would raise again)
infra          infrastructure error: the run's error with exit code 2 (service died,
               planner crash; ``environment_success`` null: the environment was never
               read or the env server died before its predicate could be read), the
               process died without a record, or the executor killed it (time limit,
               signal); retried up to ``--max-retries`` times
interrupted    stopped with the runner (cancelled record, also one cancelled while its
               services started, or no record and no "end" line in the ledger): re-run
               on resume, not counted, not an infra error
invalid        a record that is present but unreadable or inconsistent: re-run
=============  ======================================================================

A cell the runner decides without starting a run has ``not_run.json`` in its attempt directory
instead of a run record (``{"schema": "rpent.batch.not_run/1", "key", "status": "failure",
"reason", "detail", "source_run"}``): a flash arm's cell whose task has no plan because the source
arm's run of that task was not solved. It counts as a failure with that reason, never as a run.

A cell's outcome is that of its first success/failure attempt; a cell is never counted twice.
The run's label and operator verdict (where the record has them) are read by
:func:`rpent.recording.outcome.outcome_from_doc`, the one place that reads them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rpent.batch.matrix import Cell
from rpent.recording.outcome import POLICY_CODE_ERROR, outcome_from_doc
from rpent.run.record import run_tag

__all__ = ["ResultsRoot", "AttemptResult", "CellState", "classify_attempt", "TASK_STATUSES",
           "LEDGER", "NOT_RUN", "NOT_RUN_SCHEMA"]

LEDGER = "attempts.jsonl"
#: file of an attempt the runner decided without a run (see the module docstring)
NOT_RUN = "not_run.json"
NOT_RUN_SCHEMA = "rpent.batch.not_run/1"
#: statuses that decide a cell (counted once in the report)
TASK_STATUSES = ("success", "failure")


@dataclass
class AttemptResult:
    """What one attempt's record says.

    Attributes:
        key: cell key. attempt: 1-based attempt number. run_dir: its run directory.
        status: ``success`` | ``failure`` | ``infra`` | ``interrupted`` | ``invalid``.
        reason: one line (the run's error, why the record is invalid, ...) or None.
        exit_code: the process's exit code from the ledger (None when unknown).
        wall_s: process wall time (s) from the ledger, or the record's elapsed_s.
        elapsed_s: the run's own elapsed time (s) from the transcript.
        env_steps: env steps executed. turns, tool_calls: planner counters.
        tokens_in, tokens_out: planner input / output tokens (uncached input + cache reads +
            cache writes count as input).
        cost_usd: cost reported by the planner backend (claude_code), else None.
        stop_reason, finish_status: from the transcript.
        environment_success: the record's predicate (True / False / None = unknown or no record).
        label: the run's label (:mod:`rpent.recording.outcome`; derived for older records), or None.
        verdict: the operator's final verdict (``success`` / ``failure`` / ``abort``) or None.
        disagreement: the record's verdict/predicate disagreement note, or None.
        unstable: where the simulation blew up in the episode (the record's
            ``environment_unstable`` detail: MuJoCo reset its state), or None.
        not_run: decided by the runner without a run (``not_run.json``).
    """

    key: str
    attempt: int
    run_dir: str
    status: str
    reason: str | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    elapsed_s: float | None = None
    env_steps: int | None = None
    turns: int | None = None
    tool_calls: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None
    finish_status: str | None = None
    environment_success: bool | None = None
    label: str | None = None
    verdict: str | None = None
    disagreement: str | None = None
    unstable: str | None = None
    not_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return asdict(self)


@dataclass
class CellState:
    """A cell's attempts and its decided outcome.

    Attributes:
        cell: the cell. attempts: every attempt found, in order.
        decided: the attempt that decides the cell (first success/failure), or None.
    """

    cell: Cell
    attempts: list[AttemptResult] = field(default_factory=list)

    @property
    def decided(self) -> AttemptResult | None:
        """First attempt with a task outcome (success/failure)."""
        for a in self.attempts:
            if a.status in TASK_STATUSES:
                return a
        return None

    @property
    def status(self) -> str:
        """``success`` | ``failure`` (decided), ``infra`` (last attempt an infra error),
        ``pending`` (never run, or only interrupted/invalid attempts)."""
        d = self.decided
        if d is not None:
            return d.status
        if any(a.status == "infra" for a in self.attempts):
            return "infra"
        return "pending"

    def infra_attempts(self) -> list[AttemptResult]:
        """Attempts that ended in an infrastructure error."""
        return [a for a in self.attempts if a.status == "infra"]

    def next_attempt(self) -> int:
        """Number of the next attempt (one more than the highest attempt directory or ledger entry)."""
        return max((a.attempt for a in self.attempts), default=0) + 1


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def classify_attempt(cell: Cell, attempt: int, run_dir: Path, end: dict | None,
                     log_path: Path | None = None) -> AttemptResult:
    """Read one attempt's run record and decide its status (see the module docstring).

    Args:
        cell: the attempt's cell (the record must name the same suite/task/seed).
        attempt: attempt number. run_dir: its run directory.
        end: the ledger's "end" line of this attempt (None: none written, the runner died).
        log_path: the process log, quoted in the reason of a run that left no record.
    Returns:
        :class:`AttemptResult` (never raises for bad records: they are ``invalid``).
    """
    res = AttemptResult(cell.key, attempt, str(run_dir), "interrupted")
    if end is not None:
        res.exit_code = end.get("exit_code")
        res.wall_s = end.get("wall_s")
    transcript = run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json"
    executor_error = end.get("infra_error") if end else None
    if not transcript.exists() and (run_dir / NOT_RUN).exists():
        return _classify_not_run(cell, res, run_dir / NOT_RUN)
    if not transcript.exists():
        if end is None:
            res.reason = "no run record and no end in the ledger: stopped with the runner"
            return res
        res.status = "infra"
        res.reason = executor_error or (f"run process exited with code {res.exit_code} without writing its record"
                                        f"{f'; see {log_path}' if log_path else ''}")
        return res
    reading = transcript
    try:
        doc = _read_json(transcript)
        reading = run_dir / "states.json"
        states = _read_json(reading) if reading.exists() else None
    except (OSError, ValueError) as exc:
        res.status, res.reason = "invalid", f"unreadable record {reading}: {type(exc).__name__}: {exc}"
        return res
    problem = _record_problem(cell, doc, states)
    if problem:
        res.status, res.reason = "invalid", problem
        return res
    stats = doc.get("stats") or {}
    res.elapsed_s = doc.get("elapsed_s")
    res.wall_s = res.wall_s if res.wall_s is not None else res.elapsed_s
    res.env_steps = _int(doc.get("env_steps"))
    res.turns, res.tool_calls = _int(stats.get("turns_used")), _int(stats.get("tool_calls"))
    tin = [_int(stats.get(k)) for k in ("total_input_tokens", "cache_read_tokens", "cache_write_tokens")]
    res.tokens_in = sum(t for t in tin if t is not None) if any(t is not None for t in tin) else None
    res.tokens_out = _int(stats.get("total_output_tokens"))
    res.cost_usd = stats.get("cost_usd") if isinstance(stats.get("cost_usd"), (int, float)) else None
    res.stop_reason = doc.get("stop_reason")
    res.finish_status = (doc.get("finish") or {}).get("status") if isinstance(doc.get("finish"), dict) else None
    outcome = outcome_from_doc(doc, str(transcript))
    res.environment_success, res.label, res.verdict = outcome.environment_success, outcome.label, outcome.verdict
    res.disagreement = outcome.disagreement
    if outcome.environment_unstable:
        res.unstable = str(outcome.environment_unstable.get("detail") or "simulation unstable")
    error = doc.get("error")
    if doc.get("environment_success") is True:
        res.status = "success"
    elif executor_error:
        res.status, res.reason = "infra", executor_error
    elif doc.get("stop_reason") == "cancelled":  # also when cancelled before the environment was read
        res.status, res.reason = "interrupted", error or "run cancelled"
    elif doc.get("environment_success") is None:  # unknown: never read, or the env server died
        res.status, res.reason = "infra", str(error).splitlines()[0][:500]
    elif error and doc.get("error_kind") == POLICY_CODE_ERROR:  # the policy's own code raised: it would again
        res.status, res.reason = "failure", str(error).splitlines()[0][:500]
    elif error and doc.get("stop_reason") in ("error", "service_error"):
        res.status, res.reason = "infra", str(error).splitlines()[0][:500]
    else:
        res.status = "failure"
        res.reason = res.finish_status or doc.get("stop_reason")
    return res


def _classify_not_run(cell: Cell, res: AttemptResult, path: Path) -> AttemptResult:
    """An attempt the runner decided without a run: a failure with the file's reason, or invalid."""
    try:
        doc = _read_json(path)
    except (OSError, ValueError) as exc:
        res.status, res.reason = "invalid", f"unreadable {path}: {type(exc).__name__}: {exc}"
        return res
    if not isinstance(doc, dict) or doc.get("schema") != NOT_RUN_SCHEMA or doc.get("key") != cell.key \
            or doc.get("status") != "failure" or not isinstance(doc.get("reason"), str):
        res.status, res.reason = "invalid", f"{path} is not a {NOT_RUN_SCHEMA} record of {cell.key}"
        return res
    res.status, res.not_run = "failure", True
    res.reason = doc["reason"] + (f": {doc['detail']}" if doc.get("detail") else "")
    return res


def _record_problem(cell: Cell, doc: Any, states: Any) -> str | None:
    """Why a transcript/states pair is not a complete record of ``cell`` (None when it is)."""
    if not isinstance(doc, dict):
        return "transcript is not a JSON object"
    for key, want in (("suite", cell.suite), ("task", cell.task), ("seed", cell.seed)):
        if doc.get(key) != want:
            return f"transcript names {key}={doc.get(key)!r}, the cell is {key}={want!r}"
    if not isinstance(doc.get("environment_success"), bool) and not (
            "environment_success" in doc and doc["environment_success"] is None and doc.get("error")):
        # null is a complete record only with the error saying why it is unknown (the env server died)
        return "transcript has no boolean environment_success"
    if not isinstance(doc.get("stop_reason"), str):
        return "transcript has no stop_reason"
    if _int(doc.get("env_steps")) is None or not isinstance(doc.get("elapsed_s"), (int, float)):
        return "transcript lacks env_steps or elapsed_s"
    if states is None:
        # a run that failed or was cancelled before its first observation (e.g. its env server
        # died while starting) has a transcript with the error and no states.json
        return None if doc.get("error") and not doc["environment_success"] else "states.json is missing"
    if not isinstance(states, dict) or not isinstance(states.get("steps"), list) or not states["steps"]:
        return "states.json has no steps"
    last = states["steps"][-1]
    if doc["environment_success"] and not (isinstance(last, dict) and any(s.get("success") for s in states["steps"]
                                                                         if isinstance(s, dict))):
        return "transcript claims success but no step in states.json records it"
    return None


class ResultsRoot:
    """Paths and the ledger of one results root (see the module docstring).

    Args:
        root: the results root directory (created by :meth:`ensure`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    # ------------------------------------------------------------------ paths
    @property
    def matrix_path(self) -> Path:
        return self.root / "matrix.json"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def ledger_path(self) -> Path:
        return self.root / LEDGER

    @property
    def lock_path(self) -> Path:
        return self.root / ".batch.lock"

    def cell_dir(self, cell: Cell) -> Path:
        """``runs/<arm>/<suite>_t<task>_s<seed>_r<repeat>``."""
        return self.root / "runs" / cell.arm / cell.dir_name

    def run_dir(self, cell: Cell, attempt: int) -> Path:
        """``<cell dir>/attempt-<N>`` (the rpent run directory of that attempt)."""
        return self.cell_dir(cell) / f"attempt-{attempt}"

    def log_path(self, cell: Cell, attempt: int) -> Path:
        """``<cell dir>/attempt-<N>.log``."""
        return self.cell_dir(cell) / f"attempt-{attempt}.log"

    def services_dir(self, arm: str) -> Path:
        return self.root / "services" / arm

    def flash_dir(self, arm: str) -> Path:
        """``flash/<arm>``: the flash plans of an arm with ``flash_from``."""
        return self.root / "flash" / arm

    def write_not_run(self, cell: Cell, attempt: int, reason: str, detail: str | None = None,
                      source_run: str | None = None) -> Path:
        """Decide ``cell`` as a failure without a run: write ``not_run.json`` (atomically) into
        the attempt's directory and return that directory (see the module docstring)."""
        from rpent.recording.atomic import write_bytes_atomic

        run_dir = self.run_dir(cell, attempt)
        run_dir.mkdir(parents=True, exist_ok=False)
        doc = {"schema": NOT_RUN_SCHEMA, "key": cell.key, "status": "failure", "reason": reason, "detail": detail,
               "source_run": source_run, "t": round(time.time(), 3)}
        write_bytes_atomic(run_dir / NOT_RUN, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
        return run_dir

    def ensure(self) -> None:
        """Create the root directory."""
        self.root.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ ledger
    def append_ledger(self, entry: dict[str, Any]) -> None:
        """Append one JSON line (``O_APPEND``, one write, flushed; a torn last line is skipped on read)."""
        line = (json.dumps({**entry, "t": round(time.time(), 3)}, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.ledger_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def read_ledger(self) -> list[dict[str, Any]]:
        """Every complete ledger line (a torn or foreign line is skipped)."""
        if not self.ledger_path.exists():
            return []
        out = []
        for line in self.ledger_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "key" in entry and "attempt" in entry:
                out.append(entry)
        return out

    # ------------------------------------------------------------------ state
    def cell_states(self, cells: list[Cell], ledger: list[dict[str, Any]] | None = None) -> dict[str, CellState]:
        """Every cell's attempts, read from the run directories and the ledger (``ledger``: the
        lines of :meth:`read_ledger` when the caller has them already)."""
        ends: dict[tuple[str, int], dict] = {}
        started: dict[str, set[int]] = {}
        for e in self.read_ledger() if ledger is None else ledger:
            if e.get("event") == "end":
                ends[(e["key"], int(e["attempt"]))] = e
            started.setdefault(e["key"], set()).add(int(e["attempt"]))
        out: dict[str, CellState] = {}
        for cell in cells:
            st = CellState(cell)
            numbers = set(started.get(cell.key, ()))
            cdir = self.cell_dir(cell)
            if cdir.is_dir():
                for p in cdir.iterdir():
                    if p.is_dir() and p.name.startswith("attempt-") and p.name[8:].isdigit():
                        numbers.add(int(p.name[8:]))
            for n in sorted(numbers):
                st.attempts.append(classify_attempt(cell, n, self.run_dir(cell, n), ends.get((cell.key, n)),
                                                    self.log_path(cell, n)))
            out[cell.key] = st
        return out
