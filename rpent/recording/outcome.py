"""A run's outcome: one reading of it for every consumer of run records.

A run's outcome has four parts, recorded side by side and never substituted for one another:

1. **Environment predicate** — ``environment_success``: ``true`` / ``false`` from the
   environment's own success check at the end of the run; ``null`` when it was never read or
   could not be read, with ``environment_success_unknown`` saying why in one line (the run was
   cancelled or failed before the environment was read, a service could not start, the env
   server died). The planner's ``finish`` claim is never this field.
2. **Operator verdicts** — ``operator_verdicts``: every answer the operator gave (``success``,
   ``failure``, ``abort``, ``continue``), in order; ``operator_verdict``: the last *final* one
   (``success`` / ``failure`` / ``abort``) or ``null``; ``verdict_required``: the run needed one
   (``--require-operator-verdict``).
3. **Label** — ``label``: ``succeeded`` | ``failed`` | ``aborted`` | ``cancelled`` | ``error``
   (:func:`run_label`). With a required verdict the operator decides; without, the predicate.
4. **How it ended** — ``stop_reason``, ``error``, ``error_kind`` (the class of the error the
   planner reported, e.g. :data:`POLICY_CODE_ERROR` when a ``--code-file`` policy's own code
   raised), ``stopped_during`` (what the run was doing when it stopped early: ``starting
   env_server``, ``running the planner``, ...).

``disagreement`` is a one-line note when the operator's final verdict and the predicate disagree.
``environment_unstable`` says where the simulation blew up during the episode (MuJoCo found a NaN or
huge value and reset the state: the scene the predicate was read from is not the init state's), or
``null``.

Label policy of everything built from runs (flywheel exports, recipes, flash plans, memory
task pairs, exploration merges): only runs labelled ``succeeded`` whose environment predicate
held (:func:`label_exclusion`). Each excluded run gets a named reason: ``operator_rejected``,
``aborted``, ``cancelled``, ``run_error``, ``no_operator_verdict``, ``not_successful``,
``disagreement``, ``sim_unstable``, ``label_unknown``. A study of disagreements may include the runs the operator
rejected although the predicate held (``include_disagreements=True``, never the default).

Readers: :func:`read_run_outcome` (a run directory: its transcript, else the TUI's
``taskrun.json``), :func:`trajectory_outcome` (a trajectory record: ``task.json``, else the
transcript of the run around it) and :func:`outcome_from_doc` (any of these documents).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RUN_LABELS", "FINAL_VERDICTS", "Outcome", "run_label", "verdict_disagreement", "outcome_from_doc",
    "read_run_outcome", "trajectory_outcome", "label_exclusion", "OutcomeReadError", "EXCLUSION_TEXT",
    "LABEL_POLICY", "LABEL_POLICY_WITH_DISAGREEMENTS", "label_policy_text", "OPERATOR_REJECTED", "ABORTED",
    "TASK_OUTCOME_FIELDS", "record_outcome_fields",
    "CANCELLED", "RUN_ERROR", "NO_OPERATOR_VERDICT", "NOT_SUCCESSFUL", "DISAGREEMENT", "LABEL_UNKNOWN",
    "POLICY_CODE_ERROR",
]

#: A run's label (``label`` in ``transcript_<tag>.json``, ``task.json``; ``state`` in ``taskrun.json``).
RUN_LABELS = ("succeeded", "failed", "aborted", "cancelled", "error")
#: Operator answers that end the operator's judgement (``continue`` does not).
FINAL_VERDICTS = ("success", "failure", "abort")
#: ``error_kind`` of a run whose ``--code-file`` policy raised: its own code failed, not a
#: service and not a limit (``stop_reason`` ``error``, label ``error`` unless the predicate held).
POLICY_CODE_ERROR = "policy_code"

# Exclusion reasons of the label policy (machine-readable names; EXCLUSION_TEXT explains each).
OPERATOR_REJECTED = "operator_rejected"
ABORTED = "aborted"
CANCELLED = "cancelled"
RUN_ERROR = "run_error"
NO_OPERATOR_VERDICT = "no_operator_verdict"
NOT_SUCCESSFUL = "not_successful"
DISAGREEMENT = "disagreement"
LABEL_UNKNOWN = "label_unknown"
SIM_UNSTABLE = "sim_unstable"

EXCLUSION_TEXT = {
    OPERATOR_REJECTED: "the operator's verdict was failure (label failed)",
    ABORTED: "the operator aborted the run (label aborted)",
    CANCELLED: "the run was cancelled (label cancelled)",
    RUN_ERROR: "the run ended in an error (label error)",
    NO_OPERATOR_VERDICT: "a verdict was required but the operator gave no final one (label failed)",
    NOT_SUCCESSFUL: "the environment's success predicate did not hold (label failed)",
    DISAGREEMENT: "the operator said success but the environment predicate was not satisfied",
    LABEL_UNKNOWN: "the record has no label and none can be derived",
    SIM_UNSTABLE: "the simulation blew up during the episode (MuJoCo reset its state): not a demonstration",
}

#: Label policy names written into export reports and dataset cards.
LABEL_POLICY = "succeeded"
LABEL_POLICY_WITH_DISAGREEMENTS = "succeeded+disagreements"


def label_policy_text(include_disagreements: bool) -> str:
    """One sentence naming the label policy (dataset cards, reports)."""
    base = ("only runs labelled `succeeded` whose environment success predicate held; runs the operator "
            "rejected, aborted, cancelled or that ended in an error are excluded with their reason")
    if include_disagreements:
        return (base.replace("are excluded", "are excluded, except") +
                " runs the operator rejected although the environment predicate held (disagreements, included "
                "for study and flagged per run in report.json)")
    return base


def run_label(*, environment_success: bool | None, verdict: str | None, verdict_required: bool, stop_reason: str | None,
              error: str | None) -> str:
    """The run's label.

    * ``stop_reason == "cancelled"`` (Ctrl-C, SIGTERM, a TUI task switch): ``cancelled``.
    * With a required verdict (``--require-operator-verdict``, the real-robot rule): ``succeeded``
      only when the operator's final verdict is ``success``; ``failure`` -> ``failed``; ``abort``
      -> ``aborted``; no final verdict -> ``cancelled`` (operator stop/``/quit``), ``error`` or
      ``failed``. The environment predicate is recorded next to it, never substituted.
    * Without: the environment's predicate decides (``succeeded``); else an operator ``abort``
      -> ``aborted``; an operator stop -> ``cancelled``; a planner/service error, or an unknown
      predicate (``None``) with an error -> ``error``; otherwise ``failed``.

    Args:
        environment_success: the env's success predicate at the end; None = unknown (never read).
        verdict: the operator's last final answer (``success|failure|abort``) or None.
        verdict_required: whether ``finish`` needed an operator verdict.
        stop_reason: the planner's stop reason, or ``cancelled`` / ``error`` from the run layer.
        error: the run's one-line error, or None.
    Returns:
        one of :data:`RUN_LABELS`.
    """
    if stop_reason == "cancelled":
        return "cancelled"
    if verdict_required:
        if verdict == "success":
            return "succeeded"
    elif environment_success:
        return "succeeded"
    if verdict == "abort":
        return "aborted"
    if verdict == "failure":
        return "failed"
    if stop_reason == "interrupted":
        return "cancelled"
    if error and (stop_reason in ("error", "service_error") or environment_success is None):
        return "error"
    return "failed"


def verdict_disagreement(environment_success: bool | None, verdict: str | None) -> str | None:
    """A one-line note when the operator's final verdict (``success``/``failure``) and the env
    predicate disagree, else None (also when the predicate is unknown, None)."""
    if environment_success is None:
        return None
    if verdict == "success" and not environment_success:
        return "operator said success; environment predicate: not satisfied"
    if verdict == "failure" and environment_success:
        return "operator said failure; environment predicate: satisfied"
    return None


#: The outcome fields a trajectory record's ``task.json`` carries (next to ``environment_success``).
TASK_OUTCOME_FIELDS = ("label", "operator_verdict", "operator_verdicts", "verdict_required", "disagreement",
                       "environment_success_unknown", "environment_unstable")


def record_outcome_fields(outcome: dict | None, *, success: bool | None, status: str, error: str | None) -> dict:
    """The :data:`TASK_OUTCOME_FIELDS` a closing trajectory record writes: those given in ``outcome``
    (the run layer's), the label derived by :func:`run_label` when none is given (a recorder used
    without the run layer saw no operator: no verdict; ``status`` ``interrupted`` -> cancelled,
    ``error`` -> error), ``operator_verdicts`` [] and ``verdict_required`` False by default.

    Raises:
        ValueError: a label that is not one of :data:`RUN_LABELS`.
    """
    fields = {k: v for k, v in (outcome or {}).items() if k in TASK_OUTCOME_FIELDS}
    if fields.get("label") is None:
        stop = {"interrupted": "cancelled", "error": "error"}.get(status, "finished")
        fields["label"] = run_label(environment_success=success, verdict=None, verdict_required=False,
                                    stop_reason=stop, error=error)
    if fields["label"] not in RUN_LABELS:
        raise ValueError(f"outcome label must be one of {RUN_LABELS}, got {fields['label']!r}")
    fields.setdefault("operator_verdicts", [])
    fields.setdefault("verdict_required", False)
    return fields


class OutcomeReadError(ValueError):
    """A run's outcome document exists but cannot be read; the message names the file."""


@dataclass
class Outcome:
    """A run's outcome as read from its record (module docstring).

    Attributes:
        environment_success: True / False / None (unknown).
        environment_success_unknown: why the predicate is unknown (one line), or None.
        label: one of :data:`RUN_LABELS`, or None when neither recorded nor derivable.
        label_source: ``"record"`` (written by the run) or ``"derived"`` (an older record without a
            label: derived by :func:`run_label` from its predicate, verdict and stop reason).
        verdict_required: the run needed an operator verdict.
        operator_verdict: the last final verdict record ``{"answer", "notes", ...}`` or None.
        operator_verdicts: every verdict answer record, in order.
        disagreement: :func:`verdict_disagreement` note, or None.
        stop_reason, error: how the run ended.
        stopped_during: what the run was doing when it stopped early, or None.
        environment_unstable: where the simulation blew up during the episode (``env_step``,
            ``warning``, ``joint``, ``body``, ``detail``), or None.
        source: the file this was read from (``""`` for a document given directly).
    """

    environment_success: bool | None = None
    environment_success_unknown: str | None = None
    label: str | None = None
    label_source: str = "record"
    verdict_required: bool = False
    operator_verdict: dict | None = None
    operator_verdicts: list[dict] = field(default_factory=list)
    disagreement: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    stopped_during: str | None = None
    environment_unstable: dict | None = None
    source: str = ""

    @property
    def verdict(self) -> str | None:
        """The operator's last final answer (``success`` / ``failure`` / ``abort``) or None."""
        answer = (self.operator_verdict or {}).get("answer")
        return answer if answer in FINAL_VERDICTS else None

    @property
    def label_success(self) -> bool | None:
        """``label == "succeeded"``; None when the label is unknown."""
        return None if self.label is None else self.label == "succeeded"

    @property
    def cancelled(self) -> bool:
        """The run was cancelled (label ``cancelled`` or stop reason ``cancelled``)."""
        return self.label == "cancelled" or self.stop_reason == "cancelled"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (with ``verdict``, the final answer)."""
        return {**asdict(self), "verdict": self.verdict}


_STATUS_STOP = {"interrupted": "cancelled", "error": "error", "finished": "finished", "running": None}


def _bool_or_none(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def outcome_from_doc(doc: dict, source: str = "") -> Outcome:
    """The :class:`Outcome` of a run document: a ``transcript_<tag>.json``, a trajectory
    ``task.json`` or a TUI ``taskrun.json`` (its ``outcome`` object is read when present).

    A document without a valid ``label`` (records made before labels were written) gets one
    derived with :func:`run_label` from its own fields (``label_source`` ``"derived"``); a
    ``task.json``'s ``status`` stands in for the stop reason (``interrupted`` -> cancelled).
    A document that says nothing of the predicate (no ``environment_success`` key) and has no
    label gets label None.
    """
    if not isinstance(doc, dict):
        raise OutcomeReadError(f"{source or 'outcome document'}: not a JSON object")
    inner = doc.get("outcome") if isinstance(doc.get("outcome"), dict) else {}

    def get(key: str) -> Any:
        return doc[key] if doc.get(key) is not None else inner.get(key)

    verdict = get("operator_verdict")
    verdicts = get("operator_verdicts")
    stop_reason = get("stop_reason")
    if not isinstance(stop_reason, str):
        stop_reason = _STATUS_STOP.get(doc.get("status")) if isinstance(doc.get("status"), str) else None
    out = Outcome(
        environment_success=_bool_or_none(get("environment_success")),
        environment_success_unknown=get("environment_success_unknown"),
        verdict_required=bool(get("verdict_required")),
        operator_verdict=verdict if isinstance(verdict, dict) else None,
        operator_verdicts=[v for v in verdicts if isinstance(v, dict)] if isinstance(verdicts, list) else [],
        disagreement=get("disagreement"),
        stop_reason=stop_reason,
        error=get("error") if isinstance(get("error"), str) else None,
        stopped_during=get("stopped_during") if isinstance(get("stopped_during"), str) else None,
        environment_unstable=get("environment_unstable") if isinstance(get("environment_unstable"), dict) else None,
        source=source,
    )
    label = get("label")
    if label in RUN_LABELS:
        out.label = label
    elif "environment_success" in doc or "environment_success" in inner or out.verdict is not None:
        out.label = run_label(environment_success=out.environment_success, verdict=out.verdict,
                              verdict_required=out.verdict_required, stop_reason=stop_reason, error=out.error)
        out.label_source = "derived"
        if out.disagreement is None:
            out.disagreement = verdict_disagreement(out.environment_success, out.verdict)
    else:
        out.label_source = "derived"
    return out


def _load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OutcomeReadError(f"{path}: not readable JSON ({exc}); the outcome is unknown") from None
    if not isinstance(doc, dict):
        raise OutcomeReadError(f"{path}: holds a JSON {type(doc).__name__}, not an object")
    return doc


def _transcript_of(run_dir: Path, tag: str | None = None) -> Path | None:
    if tag is not None:
        p = run_dir / f"transcript_{tag}.json"
        return p if p.is_file() else None
    found = sorted(run_dir.glob("transcript_*.json"))
    return found[0] if len(found) == 1 else None


def read_run_outcome(run_dir: str | Path) -> Outcome | None:
    """The outcome of the run in ``run_dir``: its ``transcript_<tag>.json`` (written by the run
    layer at the end of every run, also on errors and cancellation), else its ``taskrun.json``
    (a TUI TaskRun that left no transcript), else None (no record: nothing is known).

    This is the reader for screens and reports (the TUI's Trajectories list, rpent-batch).

    Raises:
        OutcomeReadError: the document exists but is not a readable JSON object.
        OSError: it cannot be read.
    """
    run_dir = Path(run_dir)
    path = _transcript_of(run_dir)
    if path is None:
        path = run_dir / "taskrun.json"
        if not path.is_file():
            return None
        doc = _load(path)
        out = outcome_from_doc(doc, str(path))
        if out.label is None and doc.get("state") in RUN_LABELS:
            out.label = doc["state"]
        return out
    return outcome_from_doc(_load(path), str(path))


def trajectory_outcome(record_dir: str | Path, task: dict | None) -> Outcome:
    """The outcome of the run a trajectory record belongs to.

    ``task.json`` carries the label, verdicts and disagreement; for a record written before it
    did (no ``label`` key), the transcript of the run directory around it
    (``<run>/trajectories/<task_id>/``) is read, since it may hold a verdict that ``task.json``
    lacks; without one the label is derived from ``task.json`` (:func:`outcome_from_doc`).

    Args:
        record_dir: the record directory.
        task: its parsed ``task.json`` (None when unreadable: label unknown).
    Raises:
        nothing: an unreadable transcript leaves the outcome derived from ``task.json``.
    """
    record_dir = Path(record_dir)
    if not isinstance(task, dict):
        return Outcome(label=None, label_source="derived", source=str(record_dir / "task.json"))
    if task.get("label") in RUN_LABELS:
        return outcome_from_doc(task, str(record_dir / "task.json"))
    if record_dir.parent.name == "trajectories":
        tag = None
        if isinstance(task.get("suite"), str) and isinstance(task.get("task"), int) and isinstance(task.get("seed"), int):
            short = task["suite"][len("libero_"):] if task["suite"].startswith("libero_") else task["suite"]
            tag = f"{short}_t{task['task']}_s{task['seed']}"
        path = _transcript_of(record_dir.parent.parent, tag)
        if path is not None:
            try:
                out = outcome_from_doc(_load(path), str(path))
            except (OutcomeReadError, OSError):
                out = None
            if out is not None and out.label is not None:
                return out
    return outcome_from_doc(task, str(record_dir / "task.json"))


def label_exclusion(outcome: Outcome, *, include_disagreements: bool = False) -> tuple[str, str] | None:
    """Why the label policy excludes a run from data built from runs, or None when it may be used.

    Order: label ``cancelled`` -> ``cancelled``; ``aborted`` -> ``aborted``; ``error`` ->
    ``run_error``; ``failed`` with the operator's verdict ``failure`` -> ``operator_rejected``
    (with ``include_disagreements``, a rejected run whose predicate held is let through);
    ``failed`` with a required verdict never given -> ``no_operator_verdict``; other ``failed``
    -> ``not_successful``; ``succeeded`` with a predicate that did not hold -> ``disagreement``;
    ``succeeded`` in an episode whose simulation blew up -> ``sim_unstable``; no label ->
    ``label_unknown``. A run passing this still needs ``environment_success`` true
    wherever data is built from its actions (the caller checks it).

    Returns:
        ``(reason, detail)`` with ``reason`` one of the module's exclusion names, or None.
    """
    label, verdict = outcome.label, outcome.verdict
    notes = (outcome.operator_verdict or {}).get("notes")
    said = f"operator verdict {verdict!r}" + (f" ({notes})" if notes else "")
    env = f"environment_success={outcome.environment_success!r}"
    if label is None:
        return LABEL_UNKNOWN, f"no label in {outcome.source or 'the record'}"
    if label == "cancelled":
        return CANCELLED, f"label cancelled; {outcome.error or 'run cancelled'}"
    if label == "aborted":
        return ABORTED, f"label aborted; {said}; {env}"
    if label == "error":
        return RUN_ERROR, f"label error; {outcome.error or outcome.environment_success_unknown or 'no error text'}"
    if label == "failed":
        if verdict == "failure":
            if include_disagreements and outcome.environment_success is True:
                return None
            return OPERATOR_REJECTED, f"label failed; {said}; {env}"
        if outcome.verdict_required and verdict is None:
            return NO_OPERATOR_VERDICT, f"label failed; no final operator verdict; {env}"
        return NOT_SUCCESSFUL, f"label failed; {env}"
    if label == "succeeded" and outcome.environment_success is False:
        if include_disagreements:
            return None
        return DISAGREEMENT, f"label succeeded by {said}; {env}"
    if outcome.environment_unstable:
        return SIM_UNSTABLE, f"label {label}; {outcome.environment_unstable.get('detail') or 'simulation unstable'}"
    return None
