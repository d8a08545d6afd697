"""Names, paths and constants of the trajectory record (schema_version 1).

One place for every file name and field vocabulary, so the recorder
(:mod:`rpent.recording.recorder`), the reader (:mod:`rpent.recording.reader`) and the
flywheel export (:mod:`rpent.flywheel`) cannot drift apart. The layout is ours (product
document (the flywheel's run record): ``task.json``, ``planners.jsonl``, ``actions.jsonl``,
``predictions.jsonl``, ``artifacts/``); see the package docstring for the field lists.
"""

from __future__ import annotations

import re
from pathlib import Path

SCHEMA_VERSION = 1
"""Version of the record layout written into ``task.json``; bump on incompatible change."""

TRAJECTORIES_DIRNAME = "trajectories"
TASK_JSON = "task.json"
PLANNERS_JSONL = "planners.jsonl"
ACTIONS_JSONL = "actions.jsonl"
PREDICTIONS_JSONL = "predictions.jsonl"
ARTIFACTS_DIRNAME = "artifacts"
RECORD_FILES = (TASK_JSON, PLANNERS_JSONL, ACTIONS_JSONL, PREDICTIONS_JSONL)

STATUS_RUNNING = "running"
STATUS_FINISHED = "finished"
STATUS_ERROR = "error"
STATUS_INTERRUPTED = "interrupted"
FINAL_STATUSES = (STATUS_FINISHED, STATUS_ERROR, STATUS_INTERRUPTED)
ALL_STATUSES = (STATUS_RUNNING, *FINAL_STATUSES)

SOURCE_VLA = "vla"
SOURCE_SCRIPTED = "scripted"
ACTION_SOURCES = (SOURCE_VLA, SOURCE_SCRIPTED)

CAPTURE_FULL = "full"
CAPTURE_TOOL_CALLS_ONLY = "tool_calls_only"
CAPTURE_UNAVAILABLE = "unavailable"
PLANNER_CAPTURE_MODES = (CAPTURE_FULL, CAPTURE_TOOL_CALLS_ONLY)
ACTION_CAPTURE_MODES = (CAPTURE_FULL, CAPTURE_UNAVAILABLE)

OBSERVATIONS_VLA = "vla"
OBSERVATIONS_ALL = "all"
OBSERVATION_MODES = (OBSERVATIONS_VLA, OBSERVATIONS_ALL)
"""Which actions carry their policy images (``capture.observations`` in ``task.json``): ``vla`` =
VLA actions only (scripted actions are recorded with their 8-D state); ``all`` = every executed
action (needed by the flywheel's rule set v2, which exports scripted actions too)."""

ACTION_DIM = 7
"""LIBERO OSC_POSE delta action ``[dx, dy, dz, rx, ry, rz, gripper]`` (rpent_reference §3.2)."""
STATE_DIM = 8
"""Policy state: eef pos (3, m, world frame) + axis-angle orientation (3, rad) + gripper qpos (2, m)."""
ROBOT_SPACES: dict[str, tuple[int, int]] = {"libero": (STATE_DIM, ACTION_DIM), "metaworld": (4, 4)}
"""Robot package -> ``(state_dim, action_dim)`` of its records. Meta-World (Sawyer): state = hand
xyz (m, world) + finger opening, action = ``[dx, dy, dz, grip]`` in [-1, 1]
(:mod:`rpent.robots.metaworld.sim`)."""
ROBOT_FPS: dict[str, int] = {"libero": 20, "metaworld": 80}
"""Robot package -> env steps per second (LIBERO 20 Hz control; Meta-World 12.5 ms steps = 80 Hz)."""


def robot_spaces(robot: str | None) -> tuple[int, int]:
    """``(state_dim, action_dim)`` of ``robot``'s records; LIBERO's for None (records before the
    ``robot`` field) and for robots without an entry."""
    return ROBOT_SPACES.get(robot or "libero", (STATE_DIM, ACTION_DIM))


def robot_fps(robot: str | None) -> int:
    """Env steps per second of ``robot`` (the LeRobot dataset fps); LIBERO's 20 by default."""
    return ROBOT_FPS.get(robot or "libero", 20)


CAMERAS = ("main", "wrist")
"""Policy cameras recorded per frame: ``main`` (agentview) and ``wrist`` (eye-in-hand), VLA orientation."""

_TASK_ID_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


def make_task_id(suite: str, task: int, seed: int) -> str:
    """Return the record's task id ``<suite>_t<task>_s<seed>`` (e.g. ``libero_goal_t0_s0``).

    Raises:
        ValueError: ``suite`` is empty or holds characters other than letters, digits,
            ``_``, ``.``, ``-`` (it becomes a directory name), or ``task``/``seed`` is negative.
    """
    if not suite or not _TASK_ID_PART.match(suite):
        raise ValueError(
            f"suite {suite!r} cannot be used in a record directory name; "
            "use letters, digits, '_', '.' or '-' only (e.g. 'libero_goal')"
        )
    if int(task) < 0 or int(seed) < 0:
        raise ValueError(f"task ({task}) and seed ({seed}) must be >= 0")
    return f"{suite}_t{int(task)}_s{int(seed)}"


def artifact_relpath(camera: str, frame: int) -> str:
    """Return the record-relative path of a camera image, e.g. ``artifacts/main/000012.png``.

    ``frame`` is the action's ``seq`` (0-based line index in ``actions.jsonl``): the image is
    the observation *before* that action.

    Raises:
        ValueError: unknown ``camera`` (use one of :data:`CAMERAS`) or negative ``frame``.
    """
    if camera not in CAMERAS:
        raise ValueError(f"unknown camera {camera!r}; use one of {CAMERAS}")
    if frame < 0:
        raise ValueError(f"frame index must be >= 0, got {frame}")
    return f"{ARTIFACTS_DIRNAME}/{camera}/{frame:06d}.png"


def resolve_artifact(record_dir: Path, relpath: str) -> Path:
    """Resolve a record-relative artifact reference safely inside ``record_dir``.

    Raises:
        ValueError: the reference is absolute or escapes the record directory (``..``).
    """
    p = Path(relpath)
    if p.is_absolute() or ".." in p.parts or not relpath:
        raise ValueError(f"artifact reference {relpath!r} must be a relative path inside the record")
    return record_dir / p
