"""A run's outcome as its record states it: the final label, the environment's predicate, the operator's
verdict and any disagreement between them, each kept apart (never one derived from another here).

Sources, first found wins per field: ``taskrun.json`` (a TaskRun of a session: ``label``, ``state``,
``environment_success``, ``operator_verdict``, ``disagreement``), then the run's
``transcript_<tag>.json`` (written by ``rpent.run`` for every run: the same fields), then the first
trajectory's ``task.json`` (when it carries them). No Textual imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunOutcomeView", "read_outcome"]

#: Fields read from each source (all optional).
_FIELDS = ("label", "state", "environment_success", "environment_success_unknown", "operator_verdict", "disagreement")


@dataclass(frozen=True)
class RunOutcomeView:
    """What a run's record says about how it ended.

    Attributes:
        label: ``succeeded``, ``failed``, ``aborted``, ``cancelled``, ``error`` (the record's final label; a
            session TaskRun's ``state`` when no label was written, e.g. ``running``), or None.
        environment_success: the environment's own predicate (True, False, or None: unknown or not recorded).
        environment_unknown: why the predicate is unknown (one line), or None.
        verdict: the operator's final answer (``success``, ``failure``, ``abort`` ...), or None without a verdict.
        notes: the operator's notes on that verdict ('' without).
        disagreement: the record's note when verdict and predicate disagree, or None.
    """

    label: str | None = None
    environment_success: bool | None = None
    environment_unknown: str | None = None
    verdict: str | None = None
    notes: str = ""
    disagreement: str | None = None

    def verdict_cell(self) -> str:
        """Short table cell: the verdict, ``≠`` appended when it disagrees with the predicate, ``-`` without one."""
        if self.verdict is None:
            return "≠ env" if self.disagreement else "-"
        return f"{self.verdict} ≠ env" if self.disagreement else self.verdict

    def line(self) -> str:
        """One line for a detail pane: label, environment, verdict with notes, disagreement."""
        env = {True: "env solved", False: "env not solved"}.get(self.environment_success,  # type: ignore[arg-type]
                                                                 f"env unknown ({self.environment_unknown})"
                                                                 if self.environment_unknown else "env unknown")
        parts = [f"label {self.label or '-'}", env,
                 f"operator {self.verdict}" + (f" ({self.notes})" if self.notes else "") if self.verdict
                 else "no operator verdict"]
        if self.disagreement:
            parts.append(f"disagreement: {self.disagreement}")
        return " · ".join(parts)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_outcome(run_dir: str | Path) -> RunOutcomeView:
    """The outcome fields of the run in ``run_dir`` (see the module docstring); absent fields are None."""
    root = Path(run_dir)

    def sources():  # read lazily: a transcript (all planner messages) only when taskrun.json lacks a label
        yield _read(root / "taskrun.json")
        for path in sorted(root.glob("transcript_*.json"))[:1]:
            yield _read(path)
        for path in sorted((root / "trajectories").glob("*/task.json"))[:1]:
            yield _read(path)

    found: dict[str, Any] = {}
    for data in sources():
        if not data:
            continue
        for key in _FIELDS:
            if found.get(key) is None and data.get(key) is not None:
                found[key] = data[key]
        if found.get("label") is not None:
            break
    verdict = found.get("operator_verdict")
    answer = verdict.get("answer") if isinstance(verdict, dict) else (verdict if isinstance(verdict, str) else None)
    notes = str(verdict.get("notes") or "").strip() if isinstance(verdict, dict) else ""
    env = found.get("environment_success")
    return RunOutcomeView(label=found.get("label") or found.get("state"),
                          environment_success=env if isinstance(env, bool) else None,
                          environment_unknown=found.get("environment_success_unknown"),
                          verdict=answer, notes=notes, disagreement=found.get("disagreement") or None)
