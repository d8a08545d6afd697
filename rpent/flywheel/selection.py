"""Which recorded actions become training frames: the export rules of the product document.

Rules (the product document's "导出训练数据" section), applied per record:

0. Label (both rule sets): the run must be labelled ``succeeded`` (:mod:`rpent.recording.outcome`,
   :func:`~rpent.recording.outcome.label_exclusion`): a run the operator rejected
   (``operator_rejected``), aborted (``aborted``), that was cancelled (``cancelled``), ended in an
   error (``run_error``), lacked a required verdict (``no_operator_verdict``) or whose operator
   said success while the predicate did not hold (``disagreement``) is excluded with that reason.
   The label is ``task.json``'s; a record written before labels were recorded takes its run's
   transcript, else a label derived from its predicate. ``include_disagreements`` (never the
   default) lets through the runs the operator rejected although the predicate held, flagged
   ``disagreement`` in the report, for studies of operator/predicate disagreement.
1. Run: ``task.json`` must exist and ``environment_success`` must be exactly ``true``
   (``false``, ``null``, missing or non-boolean → excluded; the planner's finish claim never counts).
2. Action: only actions that were executed (every ``actions.jsonl`` line is one) with
   ``source == "vla"`` that link uniquely, via ``(pred_id, index_in_chunk)``, to a valid VLA
   prediction: the prediction exists once in ``predictions.jsonl``, has a non-empty instruction,
   belongs to the same tool call (``call_id``) as the action, and lists the row as executed
   (``index_in_chunk < n_executed``); no other action claims the same ``(pred_id, index)``.
3. Episodes: each contiguous run of qualifying actions (consecutive lines of ``actions.jsonl``
   whose env ``step`` increases by exactly 1 — a reset or any excluded action ends the run)
   becomes its own LeRobot episode; one frame per action: the observation before it, the
   action, and the prediction's instruction as the frame's task.

A record whose files are damaged (truncated/corrupt JSONL line, line missing fields, image
missing, undecodable, not RGB, or of another size than the run's other images) is excluded whole:
its links and contiguity cannot be trusted. Images are square RGB of any one size per run (256 px
by default, or the ``--policy-image-size`` the run was recorded with); a dataset holds one size,
and runs recorded at another size than the dataset's are excluded as ``image_size_mismatch``.

These are rule set **v1** (:data:`RULES_V1`, the default). Rule set **v2** (:data:`RULES_V2`,
upstream RPent's later rules, rpent_reference §5.1) keeps every executed action, scripted and
VLA, of a successful run:

1. Run: as v1 (``environment_success`` exactly ``true``; failed runs stay raw and are never
   exported), plus: some action has ``terminated == true`` (the env step that achieved success).
2. Episode: the attempt that reached the first success: from the last reset before it (env
   ``step`` not continuing the previous line's) up to and including the first action with
   ``terminated == true``. Earlier attempts are reported as ``failed_attempt``, actions after
   the first success as ``after_success``; neither is exported.
3. Frames: every action of that episode (``source`` scripted or vla) with the observation before
   it; each needs both images (record with ``--record-observations all``), else the run is
   excluded as ``observations_missing``. The frame's task is ``task.json``'s ``task_language``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from rpent.flywheel import runcheck
from rpent.recording import layout
from rpent.recording import outcome as _outcome
from rpent.recording.reader import TrajectoryRecord

IMAGE_SHAPE = (256, 256, 3)
"""Default observation image shape (LIBERO policy cameras; product document 004); a run recorded with
``--policy-image-size S`` carries (S, S, 3)."""

RULES_V1 = "v1"
RULES_V2 = "v2"
RULE_SETS = (RULES_V1, RULES_V2)
"""Export rule sets (see the module docstring); chosen with ``--rules`` and written into report.json."""

ROBOT_TYPES = {"libero": "panda", "metaworld": "sawyer"}
"""rpent robot package -> LeRobot ``robot_type`` (LIBERO's arm is a Franka Panda)."""

# Run-level exclusion reasons.
NO_TASK_JSON = "no_task_json"
INVALID_TASK_JSON = "invalid_task_json"
UNSUPPORTED_SCHEMA = "unsupported_schema"
NOT_SUCCESSFUL = "not_successful"
SUCCESS_UNKNOWN = "success_unknown"
ACTIONS_UNAVAILABLE = "actions_unavailable"
UNSUPPORTED_ROBOT = "unsupported_robot"
CORRUPT_ACTIONS_LINE = "corrupt_actions_line"
CORRUPT_PREDICTIONS_LINE = "corrupt_predictions_line"
INVALID_ACTION_LINE = "invalid_action_line"
INVALID_PREDICTION_LINE = "invalid_prediction_line"
BAD_OBSERVATION = "bad_observation"
NO_QUALIFYING_ACTIONS = "no_qualifying_actions"
NO_SUCCESS_STEP = "no_success_step"
OBSERVATIONS_MISSING = "observations_missing"
NO_TASK_LANGUAGE = "no_task_language"
IMAGE_SIZE_MISMATCH = "image_size_mismatch"
RUN_RECORD_PROBLEM = "run_record_problem"
# Action-level exclusion reasons.
NOT_VLA = "not_vla"
MISSING_LINK = "missing_link"
MISSING_PREDICTION = "missing_prediction"
AMBIGUOUS_PREDICTION = "ambiguous_prediction"
OTHER_TOOL_CALL = "prediction_from_other_tool_call"
EMPTY_INSTRUCTION = "empty_instruction"
NOT_EXECUTED = "prediction_row_not_executed"
DUPLICATE_LINK = "duplicate_link"
FAILED_ATTEMPT = "failed_attempt"
AFTER_SUCCESS = "after_success"

# Label-policy exclusion reasons (rpent.recording.outcome).
OPERATOR_REJECTED = _outcome.OPERATOR_REJECTED
ABORTED = _outcome.ABORTED
CANCELLED = _outcome.CANCELLED
RUN_ERROR = _outcome.RUN_ERROR
NO_OPERATOR_VERDICT = _outcome.NO_OPERATOR_VERDICT
DISAGREEMENT = _outcome.DISAGREEMENT
LABEL_UNKNOWN = _outcome.LABEL_UNKNOWN
SIM_UNSTABLE = _outcome.SIM_UNSTABLE
LABEL_REASONS = (OPERATOR_REJECTED, ABORTED, CANCELLED, RUN_ERROR, NO_OPERATOR_VERDICT, DISAGREEMENT, LABEL_UNKNOWN,
                 SIM_UNSTABLE)

REASON_TEXT = {
    **{r: _outcome.EXCLUSION_TEXT[r] for r in LABEL_REASONS},
    NO_TASK_JSON: "task.json is missing: the run's outcome is unknown",
    INVALID_TASK_JSON: "task.json cannot be read",
    UNSUPPORTED_SCHEMA: "task.json has an unsupported schema_version",
    NOT_SUCCESSFUL: "environment_success is false",
    SUCCESS_UNKNOWN: "environment_success is not true (missing, null or not a boolean)",
    ACTIONS_UNAVAILABLE: "the record has no action capture",
    UNSUPPORTED_ROBOT: "no LeRobot export mapping for this robot",
    CORRUPT_ACTIONS_LINE: "actions.jsonl has a truncated or corrupt line",
    CORRUPT_PREDICTIONS_LINE: "predictions.jsonl has a truncated or corrupt line",
    INVALID_ACTION_LINE: "actions.jsonl has a line with missing or malformed fields",
    INVALID_PREDICTION_LINE: "predictions.jsonl has a line with missing or malformed fields",
    BAD_OBSERVATION: "an observation image is missing, unreadable, not RGB or not the size of the run's other images",
    IMAGE_SIZE_MISMATCH: "the run's observation images are of another size than the dataset's (one size per dataset)",
    NO_SUCCESS_STEP: "environment_success is true but no action has terminated=true (the success step is unknown)",
    OBSERVATIONS_MISSING: "an action to export has no images (record with --record-observations all)",
    NO_TASK_LANGUAGE: "task.json has no task_language (the frames' task string)",
    RUN_RECORD_PROBLEM: "the run record around the trajectory (transcript, states.json) is unreadable or "
                        "contradicts task.json (rpent-flywheel validate names the problem)",
    NO_QUALIFYING_ACTIONS: "successful run, but no action links to a valid VLA prediction",
    NOT_VLA: "not a VLA action (scripted or other source)",
    MISSING_LINK: "VLA action without pred_id/index_in_chunk",
    MISSING_PREDICTION: "links to a prediction that is not in predictions.jsonl",
    AMBIGUOUS_PREDICTION: "links to a pred_id that appears more than once in predictions.jsonl",
    OTHER_TOOL_CALL: "links to a prediction from another tool call",
    EMPTY_INSTRUCTION: "links to a prediction with an empty instruction",
    NOT_EXECUTED: "links to a chunk row the prediction does not list as executed",
    DUPLICATE_LINK: "another action claims the same (pred_id, index_in_chunk)",
    FAILED_ATTEMPT: "an attempt before the reset that preceded the first success (not exported)",
    AFTER_SUCCESS: "executed after the first success (not exported)",
}


@dataclass
class Frame:
    """One training frame: the observation before an executed action, the action, the task string.

    Attributes:
        seq: the action's line index in ``actions.jsonl``.
        main, wrist: record-relative PNG paths (uint8 [S,S,3], VLA orientation; S = the run's
            image size, :attr:`RunSelection.image_shape`).
        state: float32 [8] (eef pos m, axis-angle rad, gripper qpos m).
        action: float32 [7], environment units.
        task: the VLA instruction (v1) or the task language (v2); non-empty.
        source: the action's ``source`` (``vla`` or ``scripted``).
    """

    seq: int
    main: str
    wrist: str
    state: np.ndarray
    action: np.ndarray
    task: str
    source: str = layout.SOURCE_VLA


@dataclass
class RunSelection:
    """What the rules keep of one record.

    Attributes:
        record_dir: the record directory.
        robot: ``task.json``'s robot (``None`` without a readable task.json).
        task_id: ``task.json``'s task_id (or the directory name).
        episodes: lists of frames; each list is one LeRobot episode.
        exclusions: report entries ``{"scope": "run"|"actions", "reason", "detail", ...}``.
        n_actions: lines in ``actions.jsonl`` that parsed.
        outcome: the run's outcome as the rules read it: ``{"label", "label_source",
            "environment_success", "verdict", "disagreement", "source"}`` (None without task.json).
        disagreement_included: exported although the operator rejected it (``include_disagreements``).
        image_shape: (H, W, 3) of every kept frame's images (None when nothing is kept).
    """

    record_dir: Path
    robot: str | None
    task_id: str
    episodes: list[list[Frame]] = field(default_factory=list)
    exclusions: list[dict] = field(default_factory=list)
    n_actions: int = 0
    outcome: dict | None = None
    disagreement_included: bool = False
    image_shape: tuple[int, int, int] | None = None

    @property
    def exported(self) -> bool:
        """Whether the run contributes at least one frame."""
        return bool(self.episodes)

    def exclude_run(self, reason: str, detail: str) -> RunSelection:
        """Drop every episode and record a run-level exclusion; returns ``self``."""
        self.episodes = []
        self.exclusions.append({"scope": "run", "reason": reason, "detail": f"{REASON_TEXT[reason]}: {detail}"})
        return self


def _ranges(seqs: list[int]) -> list[list[int]]:
    """Compress sorted ints into inclusive ``[first, last]`` ranges."""
    out: list[list[int]] = []
    for s in sorted(seqs):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _vector(v, dim: int) -> np.ndarray | None:
    if not isinstance(v, list) or len(v) != dim:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
        return None
    return np.asarray(v, dtype=np.float32)


def check_action_line(i: int, a: dict, robot: str | None = None) -> str | None:
    """Problem of ``actions.jsonl`` line ``i`` (0-based) as one line, or None when its fields are sound
    (vector lengths: ``robot``'s, :func:`rpent.recording.layout.robot_spaces`)."""
    state_dim, action_dim = layout.robot_spaces(robot)
    if a.get("seq") != i:
        return f"line {i + 1}: seq is {a.get('seq')!r}, expected {i}"
    if not _is_int(a.get("step")):
        return f"line {i + 1}: step must be an integer"
    if _vector(a.get("action"), action_dim) is None:
        return f"line {i + 1}: action must be {action_dim} finite numbers"
    if not isinstance(a.get("source"), str) or not isinstance(a.get("call_id"), str):
        return f"line {i + 1}: source and call_id must be strings"
    obs = a.get("obs")
    if not isinstance(obs, dict) or not all(isinstance(obs.get(c), (str, type(None))) for c in layout.CAMERAS):
        return f"line {i + 1}: obs must hold main and wrist image paths (or null)"
    if _vector(obs.get("state"), state_dim) is None:
        return f"line {i + 1}: obs.state must be {state_dim} finite numbers"
    if a.get("pred_id") is not None and not isinstance(a.get("pred_id"), str):
        return f"line {i + 1}: pred_id must be a string or null"
    if a.get("index_in_chunk") is not None and not _is_int(a.get("index_in_chunk")):
        return f"line {i + 1}: index_in_chunk must be an integer or null"
    return None


def check_prediction_line(i: int, p: dict) -> str | None:
    """Problem of ``predictions.jsonl`` line ``i`` (0-based) as one line, or None when its fields are sound."""
    if not isinstance(p.get("pred_id"), str) or not p["pred_id"]:
        return f"line {i + 1}: pred_id must be a non-empty string"
    if not isinstance(p.get("instruction"), str):
        return f"line {i + 1}: instruction must be a string"
    if not isinstance(p.get("call_id"), str):
        return f"line {i + 1}: call_id must be a string"
    acts = p.get("actions")
    if not _is_int(p.get("n_executed")) or not isinstance(acts, list) or len(acts) != p["n_executed"]:
        return f"line {i + 1}: n_executed must be an integer equal to the number of actions"
    return None


def image_shape_problem(record_dir: Path, rel: str | None,
                        expected: tuple[int, int, int] | None = None) -> tuple[str | None, tuple[int, int, int] | None]:
    """Decode the record-relative image ``rel`` fully and check it.

    Args:
        expected: the (H, W, 3) it must have (the run's other images); None accepts any square RGB size.

    Returns:
        ``(problem, shape)``: ``problem`` is None for a square RGB PNG of the expected shape;
        ``shape`` is its (H, W, channels) when the header could be read, else None.
    """
    if rel is None:
        return "no image recorded (null reference)", None
    size = None
    try:
        path = layout.resolve_artifact(record_dir, rel)
        with Image.open(path) as im:
            size = (im.height, im.width, len(im.getbands()))
            if im.format != "PNG":
                return f"{rel} is {im.format}, not PNG", size
            if im.mode != "RGB" or im.height != im.width:
                return f"{rel} is {im.mode} {size}, expected square RGB (S, S, 3)", size
            if expected is not None and size != tuple(expected):
                return f"{rel} is {size}, but the run's other images are {tuple(expected)}", size
            im.load()  # decode it all: a truncated or corrupt PNG fails here, not in the middle of the write
    except (OSError, ValueError, SyntaxError) as e:
        return f"{rel}: {e}", size
    return None, size


def image_problem(record_dir: Path, rel: str | None, expected: tuple[int, int, int] | None = None) -> str | None:
    """Why the record-relative image ``rel`` cannot be a training frame (see :func:`image_shape_problem`), or None."""
    return image_shape_problem(record_dir, rel, expected)[0]


def select_run(record: TrajectoryRecord, rules: str = RULES_V1, *, include_disagreements: bool = False) -> RunSelection:
    """Apply the export rules ``rules`` (``"v1"`` or ``"v2"``, module docstring) to one record.

    Read-only. Every image of a kept frame is decoded once to check it (an unreadable one
    excludes the run as ``bad_observation``).

    Args:
        record: the record.
        rules: the rule set.
        include_disagreements: also export runs the operator rejected although the environment
            predicate held (rule 0; for studies, never the default).
    Returns:
        the :class:`RunSelection`: episodes of frames to export and every exclusion with its reason.

    Raises:
        ValueError: unknown ``rules``.
    """
    if rules not in RULE_SETS:
        raise ValueError(f"unknown rule set {rules!r}; use one of {RULE_SETS}")
    rd = record.record_dir
    task = record.task
    sel = RunSelection(rd, (task or {}).get("robot"), str((task or {}).get("task_id") or rd.name))
    sel.n_actions = len(record.actions.records)
    if _label_level(record, sel, include_disagreements) is not None:
        return sel
    if _run_level(record, sel) is not None:
        return sel
    if rules == RULES_V2:
        return _select_v2(record, sel)
    return _select_v1(record, sel)


def _label_level(record: TrajectoryRecord, sel: RunSelection, include_disagreements: bool) -> RunSelection | None:
    """Rule 0 (the label policy): ``sel`` (run excluded, reason recorded) or None (passed).
    Records without a readable task.json or of another schema are left to :func:`_run_level`."""
    task = record.task
    if task is None or task.get("schema_version") != layout.SCHEMA_VERSION:
        return None
    out = _outcome.trajectory_outcome(record.record_dir, task)
    sel.outcome = {"label": out.label, "label_source": out.label_source,
                   "environment_success": out.environment_success, "verdict": out.verdict,
                   "disagreement": out.disagreement, "source": out.source}
    if out.label_source == "derived" and out.verdict is None:
        return None  # an older record without a label or verdict: the predicate rules decide, as before
    excluded = _outcome.label_exclusion(out, include_disagreements=include_disagreements)
    if excluded is not None and excluded[0] != NOT_SUCCESSFUL:  # that one: rule 1 names the predicate's state
        return sel.exclude_run(*excluded)
    sel.disagreement_included = bool(out.disagreement) and out.label != "succeeded"
    return None


def _run_level(record: TrajectoryRecord, sel: RunSelection) -> RunSelection | None:
    """The run-level rules shared by v1 and v2: ``sel`` (run excluded, reason recorded) or None (passed)."""
    rd, task = record.record_dir, record.task
    if task is None:
        if record.task_problem == "missing":
            return sel.exclude_run(NO_TASK_JSON, f"{rd / layout.TASK_JSON} does not exist")
        return sel.exclude_run(INVALID_TASK_JSON, str(record.task_problem))
    if task.get("schema_version") != layout.SCHEMA_VERSION:
        return sel.exclude_run(UNSUPPORTED_SCHEMA, f"schema_version {task.get('schema_version')!r}, this exporter reads 1")
    success = task.get("environment_success")
    if success is False:
        return sel.exclude_run(NOT_SUCCESSFUL, f"status {task.get('status')!r}")
    if success is not True:
        return sel.exclude_run(SUCCESS_UNKNOWN, f"environment_success={success!r}, status {task.get('status')!r}")
    run_dir = runcheck.run_dir_of(rd)
    if run_dir is not None:  # the run record around the trajectory must agree with it, as validate requires
        try:
            found = runcheck.check_run_record(run_dir, task, [a for a in record.actions.records if isinstance(a, dict)])
        except OSError as exc:
            found = [("run_record", f"cannot be read: {exc}")]
        if found:
            return sel.exclude_run(RUN_RECORD_PROBLEM, "; ".join(f"{c}: {d}" for c, d in found[:3]))
    if (task.get("capture") or {}).get("actions") != layout.CAPTURE_FULL:
        return sel.exclude_run(ACTIONS_UNAVAILABLE, f"capture.actions={(task.get('capture') or {}).get('actions')!r}")
    if sel.robot not in ROBOT_TYPES:
        return sel.exclude_run(UNSUPPORTED_ROBOT, f"robot {sel.robot!r}; supported: {sorted(ROBOT_TYPES)}")
    if record.actions.problems:
        p = record.actions.problems[0]
        return sel.exclude_run(CORRUPT_ACTIONS_LINE, f"{p.detail} ({len(record.actions.problems)} bad line(s))")
    if record.predictions.problems:
        p = record.predictions.problems[0]
        return sel.exclude_run(CORRUPT_PREDICTIONS_LINE, f"{p.detail} ({len(record.predictions.problems)} bad line(s))")
    actions = record.actions.records
    for i, a in enumerate(actions):
        problem = check_action_line(i, a, sel.robot)
        if problem:
            return sel.exclude_run(INVALID_ACTION_LINE, problem)
    preds = record.predictions.records
    for i, p in enumerate(preds):
        problem = check_prediction_line(i, p)
        if problem:
            return sel.exclude_run(INVALID_PREDICTION_LINE, problem)
    return None


def _check_images(rd: Path, sel: RunSelection, episodes: list[list[Frame]]) -> bool:
    shape = None
    for ep in episodes:
        for fr in ep:
            for rel in (fr.main, fr.wrist):
                problem, seen = image_shape_problem(rd, rel, shape)
                if problem:
                    sel.exclude_run(BAD_OBSERVATION, f"action seq {fr.seq}: {problem}")
                    return False
                shape = shape or seen
    sel.image_shape = shape
    return True


def _select_v2(record: TrajectoryRecord, sel: RunSelection) -> RunSelection:
    rd, actions = record.record_dir, record.actions.records
    language = (record.task or {}).get("task_language")
    if not isinstance(language, str) or not language.strip():
        return sel.exclude_run(NO_TASK_LANGUAGE, f"task_language={language!r}")
    first = next((i for i, a in enumerate(actions) if a.get("terminated") is True), None)
    if first is None:
        return sel.exclude_run(NO_SUCCESS_STEP, f"{len(actions)} action(s), none with terminated=true")
    start = first
    while start > 0 and actions[start]["step"] == actions[start - 1]["step"] + 1:
        start -= 1
    for a in actions[start : first + 1]:
        if a["obs"].get("main") is None or a["obs"].get("wrist") is None:
            return sel.exclude_run(
                OBSERVATIONS_MISSING,
                f"action seq {a['seq']} ({a['source']}) was recorded without images "
                f"(capture.observations={((record.task or {}).get('capture') or {}).get('observations', 'vla')!r})",
            )
    if start > 0:
        sel.exclusions.append({"scope": "actions", "reason": FAILED_ATTEMPT, "detail": REASON_TEXT[FAILED_ATTEMPT],
                               "count": start, "seqs": [[0, start - 1]]})
    if first + 1 < len(actions):
        sel.exclusions.append({"scope": "actions", "reason": AFTER_SUCCESS, "detail": REASON_TEXT[AFTER_SUCCESS],
                               "count": len(actions) - first - 1, "seqs": [[first + 1, len(actions) - 1]]})
    episode = [
        Frame(seq=a["seq"], main=a["obs"]["main"], wrist=a["obs"]["wrist"],
              state=np.asarray(a["obs"]["state"], dtype=np.float32), action=np.asarray(a["action"], dtype=np.float32),
              task=language, source=a["source"])
        for a in actions[start : first + 1]
    ]
    if not _check_images(rd, sel, [episode]):
        return sel
    sel.episodes = [episode]
    return sel


def _select_v1(record: TrajectoryRecord, sel: RunSelection) -> RunSelection:
    rd, actions, preds = record.record_dir, record.actions.records, record.predictions.records
    # ---- action-level rules
    pred_count = Counter(p["pred_id"] for p in preds)
    pred_by_id = {p["pred_id"]: p for p in preds}
    claims = Counter(
        (a["pred_id"], a["index_in_chunk"])
        for a in actions
        if a["source"] == layout.SOURCE_VLA and a.get("pred_id") is not None and a.get("index_in_chunk") is not None
    )
    excluded: dict[str, list[int]] = defaultdict(list)
    keep: list[tuple[dict, str]] = []  # (action line, instruction) or None placeholders
    qualifies: list[bool] = []
    for a in actions:
        reason = None
        pid, idx = a.get("pred_id"), a.get("index_in_chunk")
        if a["source"] != layout.SOURCE_VLA:
            reason = NOT_VLA
        elif pid is None or idx is None:
            reason = MISSING_LINK
        elif pred_count[pid] == 0:
            reason = MISSING_PREDICTION
        elif pred_count[pid] > 1:
            reason = AMBIGUOUS_PREDICTION
        else:
            pred = pred_by_id[pid]
            if pred["call_id"] != a["call_id"]:
                reason = OTHER_TOOL_CALL
            elif not pred["instruction"].strip():
                reason = EMPTY_INSTRUCTION
            elif not 0 <= idx < pred["n_executed"]:
                reason = NOT_EXECUTED
            elif claims[(pid, idx)] > 1:
                reason = DUPLICATE_LINK
        if reason is None:
            keep.append((a, pred_by_id[pid]["instruction"]))
            qualifies.append(True)
        else:
            excluded[reason].append(a["seq"])
            keep.append((a, ""))
            qualifies.append(False)
    for reason, seqs in excluded.items():
        sel.exclusions.append(
            {"scope": "actions", "reason": reason, "detail": REASON_TEXT[reason], "count": len(seqs), "seqs": _ranges(seqs)}
        )

    # ---- episodes: contiguous runs of qualifying actions
    episodes: list[list[Frame]] = []
    prev_step: int | None = None
    current: list[Frame] | None = None
    for (a, instruction), ok in zip(keep, qualifies):
        if not ok:
            current, prev_step = None, None
            continue
        if current is None or prev_step is None or a["step"] != prev_step + 1:
            current = []
            episodes.append(current)
        obs = a["obs"]
        current.append(
            Frame(
                seq=a["seq"],
                main=obs["main"],
                wrist=obs["wrist"],
                state=np.asarray(obs["state"], dtype=np.float32),
                action=np.asarray(a["action"], dtype=np.float32),
                task=instruction,
            )
        )
        prev_step = a["step"]
    if not _check_images(rd, sel, episodes):
        return sel
    if not episodes:
        return sel.exclude_run(NO_QUALIFYING_ACTIONS, f"{len(actions)} action(s), {len(preds)} prediction(s)")
    sel.episodes = episodes
    return sel
