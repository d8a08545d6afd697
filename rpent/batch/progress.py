"""Progress of a batch: what the runner shows while it runs and writes to ``progress.json``, and
``rpent-batch status ROOT``, which answers from the results root's files while it runs.

The runner (:class:`Progress`) keeps, per arm, the cells with a task outcome and their successes
(k/N with its Wilson interval), the cells still to run in this invocation and the estimated time
to finish them (cells finished per hour since this invocation's first run started), the attempts
running now, and per node the load it reported with each finished attempt (1/5/15-minute load
averages and CPU count, :func:`rpent.batch.executor.node_load`), how many attempts ended there and
their median wall time. It shows that on a tqdm bar (stderr), in the line printed per finished
attempt and, every :data:`NODE_LINE_S` seconds, in a line per node; and writes it atomically to
``<root>/progress.json`` after every attempt.

:func:`read_status` rebuilds the counts from the run records, read and checked as
``rpent-batch report`` reads them (:meth:`rpent.batch.records.ResultsRoot.cell_states`, one
transcript and ``states.json`` per attempt), so the two never count a cell differently. The
ledger's "end" lines carry each attempt's status as the runner classified it when the attempt
ended; an attempt whose record now says otherwise (a record edited or broken since) is counted as
its record says and listed as disagreeing with the ledger. It adds the runner's ``progress.json``
(ETA, nodes) when the runner holding the root's lock is alive.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rpent.batch.matrix import Cell, Matrix
from rpent.batch.records import TASK_STATUSES, ResultsRoot
from rpent.batch.stats import wilson_interval

__all__ = ["Progress", "read_status", "render_status", "PROGRESS_FILE", "NODE_LINE_S", "format_duration"]

PROGRESS_FILE = "progress.json"
PROGRESS_SCHEMA = "rpent.batch.progress/1"
#: seconds between two per-node load lines of the runner
NODE_LINE_S = 60.0


def _iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def format_duration(seconds: float | None) -> str:
    """``3 h 05 min`` / ``12 min`` / ``40 s``; ``-`` for None."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    if s >= 60:
        return f"{round(s / 60)} min"
    return f"{s} s"


def _rate_text(k: int, n: int, confidence: float) -> str:
    if not n:
        return f"{k}/{n}"
    lo, hi = wilson_interval(k, n, confidence)
    return f"{k}/{n} {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _arm_row(name: str, c: list[int], planned: int, confidence: float) -> dict[str, Any]:
    k, n, infra = c
    ci = wilson_interval(k, n, confidence) if n else None
    return {"arm": name, "planned": planned, "k": k, "n": n, "infra": infra, "pending": planned - n - infra,
            "rate": round(k / n, 6) if n else None, "wilson_low": round(ci[0], 6) if ci else None,
            "wilson_high": round(ci[1], 6) if ci else None}


class Progress:
    """The runner's live progress (see the module docstring).

    Args:
        root: the results root (``progress.json`` goes there; None: not written).
        planned: arm -> number of its cells. counts: arm -> ``[k, n, infra]`` (the runner's, updated
            in place). decided: cells already decided or given up when the invocation starts.
        to_run: cells queued in this invocation. slots: the executor's parallelism.
        executor: executor name. bar: show the tqdm bar (stderr). confidence: Wilson coverage.
    """

    def __init__(self, root: Path | None, planned: dict[str, int], counts: dict[str, list[int]], decided: int,
                 to_run: int, *, slots: int = 1, executor: str = "local", bar: bool = True,
                 confidence: float = 0.95) -> None:
        self.root = root
        self.planned = planned
        self.counts = counts
        self.total = sum(planned.values())
        self.done = decided
        self.to_run = to_run
        self.finished_here = 0
        self.slots = slots
        self.executor = executor
        self.confidence = confidence
        self.started = time.time()
        self.first_start: float | None = None
        self.running: dict[str, tuple[int, float]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self._last_node_line = time.monotonic()
        self.bar = None
        if bar:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=decided, unit="cell", file=sys.stderr, dynamic_ncols=True,
                            smoothing=0.1, desc="rpent-batch")
        self._postfix()
        self.write()

    # ------------------------------------------------------------------ figures
    def eta_s(self) -> float | None:
        """Seconds to finish this invocation's remaining cells at the pace so far (None: no cell finished)."""
        if not self.finished_here or self.first_start is None:
            return None
        pace = (time.time() - self.first_start) / self.finished_here
        return max(0.0, (self.to_run - self.finished_here) * pace)

    def summary(self) -> str:
        """One line: cells done/total, each arm's success so far with its interval, the ETA."""
        arms = "  ".join(f"{a} {_rate_text(k, n, self.confidence)}" + (f" infra {i}" if i else "")
                         for a, (k, n, i) in self.counts.items() if n or i)
        eta = self.eta_s()
        return (f"{self.done}/{self.total} cells" + (f"  {arms}" if arms else "") +
                (f"  ETA {format_duration(eta)}" if eta is not None else ""))

    def node_lines(self) -> list[str]:
        """One line per node: its last reported load, CPUs, attempts ended there, median wall."""
        out = []
        for name, n in sorted(self.nodes.items()):
            load = "/".join(f"{x:.1f}" for x in n["load"]) if n.get("load") else "?"
            med = f", median {n['median_wall_s']:.0f} s" if n.get("median_wall_s") is not None else ""
            out.append(f"node {name}: load {load} ({n.get('cpus') or '?'} CPUs), {n['attempts']} attempts ended{med}")
        return out

    def snapshot(self) -> dict[str, Any]:
        """The ``progress.json`` document."""
        arms = [_arm_row(a, c, self.planned.get(a, 0), self.confidence) for a, c in self.counts.items()]
        eta = self.eta_s()
        return {"schema": PROGRESS_SCHEMA, "pid": os.getpid(), "host": os.uname().nodename,
                "started": _iso(self.started), "updated": _iso(), "executor": self.executor, "parallel": self.slots,
                "total": self.total, "done": self.done, "to_run": self.to_run, "finished_here": self.finished_here,
                "confidence": self.confidence, "arms": arms,
                "running": [{"key": k, "attempt": a, "since": _iso(t)} for k, (a, t) in self.running.items()],
                "eta_s": None if eta is None else round(eta, 1),
                "eta_at": None if eta is None else _iso(time.time() + eta),
                "nodes": [{"node": k, **{f: v for f, v in n.items() if f != "walls"}} for k, n in sorted(self.nodes.items())]}

    # ------------------------------------------------------------------ events
    def attempt_started(self, key: str, attempt: int) -> None:
        now = time.time()
        self.first_start = self.first_start or now
        self.running[key] = (attempt, now)

    def attempt_ended(self, key: str, wall_s: float | None, load: dict[str, Any] | None, where: str = "") -> None:
        self.running.pop(key, None)
        name = (load or {}).get("host") or (where.split()[0] if where else "?")
        n = self.nodes.setdefault(name, {"load": None, "cpus": None, "attempts": 0, "median_wall_s": None,
                                         "last_seen": None, "walls": []})
        n["attempts"] += 1
        n["last_seen"] = _iso()
        if load:
            n["load"], n["cpus"] = load.get("load"), load.get("cpus")
        if wall_s is not None:
            n["walls"].append(float(wall_s))
            n["median_wall_s"] = round(statistics.median(n["walls"]), 1)

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def advance(self) -> None:
        """A cell of this invocation is finished (decided, or out of retries)."""
        self.done += 1
        self.finished_here += 1
        if self.bar is not None:
            self.bar.update(1)
        self._postfix()

    def refresh(self) -> None:
        """Update the bar, print the node lines when due, write ``progress.json``."""
        self._postfix()
        if self.nodes and time.monotonic() - self._last_node_line >= NODE_LINE_S:
            self._last_node_line = time.monotonic()
            for text in self.node_lines():
                self.line(text)
        self.write()

    def write(self) -> None:
        if self.root is None:
            return
        from rpent.recording.atomic import write_bytes_atomic

        try:
            write_bytes_atomic(self.root / PROGRESS_FILE,
                               (json.dumps(self.snapshot(), indent=1) + "\n").encode("utf-8"))
        except OSError as exc:  # progress is a view; the records and the ledger are what count
            self.line(f"rpent-batch: could not write {self.root / PROGRESS_FILE}: {exc}")

    def close(self) -> None:
        self.write()
        if self.bar is not None:
            self.bar.close()

    def _postfix(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str("  ".join(f"{a} {_rate_text(k, n, self.confidence)}" + (f" infra {i}" if i else "")
                                               for a, (k, n, i) in self.counts.items() if n or i))


# ---------------------------------------------------------------------------------------- status
#: disagreements between the ledger and the records listed in the text of ``rpent-batch status``
MISMATCH_LINES = 20


def read_status(root: str | Path, confidence: float = 0.95) -> dict[str, Any]:
    """The status of a results root from its files (see the module docstring).

    Returns:
        ``{"root", "runner": {"pid", "host", "started"} | None, "total", "decided", "counts":
        {status: n}, "arms": [{"arm", "planned", "k", "n", "infra", "pending", "rate", "wilson_low",
        "wilson_high", "running"}], "running": [{"key", "attempt", "since"}], "progress": the
        runner's progress.json | None, "median_wall_s", "ledger_mismatch": [{"key", "attempt",
        "ledger", "record", "reason"}] (attempts whose record's status differs from the status of
        their ledger "end" line; the record's counts)}``.
    Raises:
        ValueError: ``root`` has no readable ``matrix.json``.
    """
    from rpent.batch.lock import lock_holder

    rr = ResultsRoot(root)
    try:
        matrix = Matrix.from_dict(json.loads(rr.matrix_path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ValueError(f"{rr.root} is not an rpent-batch results root (no matrix.json)") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{rr.matrix_path} is unreadable ({type(exc).__name__}: {exc})") from None
    ledger = rr.read_ledger()
    ends: dict[str, dict[int, dict]] = {}
    starts: dict[str, dict[int, dict]] = {}
    for e in ledger:
        if e.get("event") == "end":
            ends.setdefault(e["key"], {})[int(e["attempt"])] = e
        elif e.get("event") == "start":
            starts.setdefault(e["key"], {})[int(e["attempt"])] = e
    holder = lock_holder(rr.lock_path)
    running = []
    if holder:
        for key, by_n in starts.items():
            for n, e in by_n.items():
                if n not in ends.get(key, {}):
                    running.append({"key": key, "attempt": n, "since": _iso(e.get("t"))})
    running_keys = {r["key"] for r in running}
    counts = {s: 0 for s in ("success", "failure", "infra", "running", "pending")}
    arms, walls, mismatch = [], [], []
    still_running: set[str] = set()
    states = rr.cell_states(matrix.cells(), ledger)
    for arm in matrix.arms:
        c = [0, 0, 0]
        n_running = 0
        cells = matrix.cells(arm.name)
        for cell in cells:
            st = states[cell.key]
            status = st.status
            wall = st.decided.wall_s if st.decided is not None else None
            for a in st.attempts:
                said = ends.get(cell.key, {}).get(a.attempt, {}).get("status")
                if said is not None and said != a.status:
                    mismatch.append({"key": cell.key, "attempt": a.attempt, "ledger": said, "record": a.status,
                                     "reason": a.reason})
            if status in TASK_STATUSES:
                c[0] += status == "success"
                c[1] += 1
                if wall is not None:
                    walls.append(float(wall))
            elif status == "infra":
                c[2] += 1
            if status not in TASK_STATUSES and cell.key in running_keys:
                n_running += 1
                status = "running"
                still_running.add(cell.key)
            counts[status] += 1
        arms.append({**_arm_row(arm.name, c, len(cells), confidence), "running": n_running})
    # a cell whose record is complete is decided even before its attempt's end line (a shared-env
    # replay writes each episode's record as it ends): it is not listed as running
    running = [r for r in running if r["key"] in still_running]
    progress = None
    if holder:
        try:
            doc = json.loads((rr.root / PROGRESS_FILE).read_text(encoding="utf-8"))
            progress = doc if isinstance(doc, dict) and doc.get("schema") == PROGRESS_SCHEMA else None
        except (OSError, ValueError):
            progress = None
    return {"root": str(rr.root), "runner": holder, "total": len(matrix.cells()),
            "decided": counts["success"] + counts["failure"], "counts": counts, "arms": arms, "running": running,
            "progress": progress, "confidence": confidence,
            "median_wall_s": round(statistics.median(walls), 1) if walls else None, "ledger_mismatch": mismatch}


def render_status(st: dict[str, Any]) -> str:
    """The text ``rpent-batch status`` prints."""
    conf = int(round(100 * st.get("confidence", 0.95)))
    runner = st["runner"]
    lines = [f"results root {st['root']}",
             (f"runner: pid {runner.get('pid')} on {runner.get('host')} since {runner.get('started')}" if runner
              else "runner: none (no rpent-batch holds this root; re-run its command to resume)"),
             f"cells: {st['decided']}/{st['total']} with a task outcome · " +
             " · ".join(f"{k} {v}" for k, v in st["counts"].items() if v)]
    for a in st["arms"]:
        ci = (f" [{100 * a['wilson_low']:.1f}, {100 * a['wilson_high']:.1f}] Wilson {conf}%"
              if a["wilson_low"] is not None else "")
        rate = f" = {100 * a['rate']:.1f}%" if a["rate"] is not None else ""
        extra = "".join(f", {a[k]} {k}" for k in ("infra", "running") if a[k])
        lines.append(f"  {a['arm']}: {a['k']}/{a['n']}{rate}{ci}; {a['n']}/{a['planned']} cells decided{extra}, "
                     f"{a['pending'] - a['running']} not started")
    p = st.get("progress")
    if p:
        lines.append(f"progress (runner, {p.get('updated')}): {p.get('finished_here')}/{p.get('to_run')} cells of this "
                     f"invocation finished, ETA {format_duration(p.get('eta_s'))}"
                     + (f" (about {p['eta_at']})" if p.get("eta_at") else "") + f", parallel {p.get('parallel')}")
        for n in p.get("nodes") or []:
            load = "/".join(f"{x:.1f}" for x in n["load"]) if n.get("load") else "?"
            med = f", median wall {n['median_wall_s']:.0f} s" if n.get("median_wall_s") is not None else ""
            lines.append(f"  node {n['node']}: load {load} ({n.get('cpus') or '?'} CPUs), "
                         f"{n['attempts']} attempts ended{med}, last at {n.get('last_seen')}")
    for r in st["running"]:
        lines.append(f"  running: {r['key']} attempt {r['attempt']} since {r['since']}")
    mismatch = st.get("ledger_mismatch") or []
    if mismatch:
        lines.append(f"{len(mismatch)} attempt(s) whose run record disagrees with the ledger's end line "
                     "(counted as the record says, as rpent-batch report does):")
    for d in mismatch[:MISMATCH_LINES]:
        lines.append(f"  record disagrees with the ledger: {d['key']} attempt {d['attempt']}: ledger {d['ledger']}, "
                     f"record {d['record']}" + (f" ({d['reason']})" if d.get("reason") else ""))
    if len(mismatch) > MISMATCH_LINES:
        lines.append(f"  ... and {len(mismatch) - MISMATCH_LINES} more (--json lists them all)")
    return "\n".join(lines) + "\n"
