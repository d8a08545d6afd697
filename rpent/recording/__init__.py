"""Trajectory recording (``--record-trajectory``): the record layout, schema_version 1.

A run with ``--record-trajectory --output-dir <run>`` writes ``<run>/trajectories/<task_id>/``
(``task_id = <suite>_t<task>_s<seed>``; a second record of the same task in the same output
directory gets ``<task_id>-r2``, ``-r3``, ... so nothing is overwritten). Layout from the
product document (the flywheel's run record); field design ours.

``task.json`` (written atomically, tmp + rename, at start and again at close)
    ``schema_version`` (1), ``task_id``, ``robot``, ``suite``, ``task``, ``seed``,
    ``task_language``, ``planner``, ``model``, ``reasoning_effort``, ``policy_mode``,
    ``versions`` {rpent, python, mujoco, libero}, ``started_at``/``ended_at`` (ISO 8601 UTC),
    ``status`` (``running`` while the run lives; ``finished`` | ``error`` | ``interrupted`` at
    close — a killed run stays ``running``), ``environment_success`` (``true``/``false`` from the
    env's own success predicate, ``null`` = unknown; never the planner's finish claim),
    ``environment_success_unknown`` (why it is null), ``label`` (``succeeded`` | ``failed`` |
    ``aborted`` | ``cancelled`` | ``error``; null while running), ``verdict_required``,
    ``operator_verdict`` (the operator's last final verdict record, or null),
    ``operator_verdicts`` (every verdict answer), ``disagreement`` (see
    :mod:`rpent.recording.outcome`), ``provenance`` (how the run was made:
    :mod:`rpent.recording.provenance`),
    ``capture`` {``planner_messages``: ``full`` | ``tool_calls_only``, ``actions``: ``full`` |
    ``unavailable``, ``observations``: ``vla`` (only VLA actions carry images) | ``all`` (every
    action does; ``--record-observations all``), ``note``: which parts are unavailable}, ``counts`` (at close), ``error``.

``planners.jsonl`` — one line per planner event, in order, ``seq`` 0,1,2,... and ``t`` (unix s)
    planner events ``{"seq","t","kind","data"}`` (kind: request, reply, text, thinking, usage, ...;
    full model messages only with ``capture.planner_messages == "full"``), tool calls
    ``{"seq","t","kind":"tool_call","call_id","tool","args"}`` and tool results
    ``{"seq","t","kind":"tool_result","call_id","tool","result","error","elapsed_s","n_actions","steps"}``
    (image bytes replaced by labels).

``actions.jsonl`` — one line per executed env action, in execution order
    ``{"seq","step","t","action"[7],"source":"vla"|"scripted","call_id","tool","pred_id",
    "index_in_chunk","reward","terminated","truncated","obs":{"main","wrist","state"[8]}}``.
    ``seq`` is the 0-based line index; ``step`` the env step within the episode. ``pred_id`` and
    ``index_in_chunk`` are ``null`` for scripted actions. ``obs`` is the policy observation BEFORE
    the action: ``main``/``wrist`` are record-relative PNG paths ``artifacts/<cam>/<seq:06d>.png``
    (uint8 RGB, VLA orientation, 256x256 for LIBERO; always present for VLA actions and, with
    ``capture.observations == "all"``, for every action; ``null`` for scripted actions recorded
    without images), ``state`` is inline (8 float32 values:
    eef pos m + axis-angle rad + gripper qpos m). Vectors are float32 values written as exact
    decimals, so reading them back with ``np.float32`` is lossless.

``predictions.jsonl`` — one line per VLA query, written when its chunk's execution ends
    ``{"pred_id","instruction","call_id","tool","created_step","chunk_length","n_executed",
    "actions"[n_executed][7],"t_start","t_end"}``; ``actions`` holds ONLY the executed rows
    (``chunk[:n_executed]``), never the unexecuted tail.

``artifacts/`` — ``main/NNNNNN.png``, ``wrist/NNNNNN.png`` (observation images named by ``seq``).

Crash safety: JSONL files are append-only, each line written with one write + flush, so a
killed run leaves complete lines plus at most one truncated last line. All writes go through
one ordered background thread and an action's PNGs are renamed into place before its line is
appended: every line on disk references images that are complete on disk. A killed run loses
only writes still queued (bounded) and leaves ``task.json`` with ``status: "running"``.
"""

from rpent.recording.layout import SCHEMA_VERSION, make_task_id
from rpent.recording.reader import TrajectoryRecord, find_record_dirs, load_observation, load_record
from rpent.recording.recorder import TaskInfo, TrajectoryRecorder, default_action_capture, default_planner_capture
from rpent.recording.writer import RecordWriteError

__all__ = [
    "SCHEMA_VERSION",
    "RecordWriteError",
    "TaskInfo",
    "TrajectoryRecord",
    "TrajectoryRecorder",
    "default_action_capture",
    "default_planner_capture",
    "find_record_dirs",
    "load_observation",
    "load_record",
    "make_task_id",
]
