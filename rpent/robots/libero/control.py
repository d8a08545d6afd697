"""LIBERO action convention and the scripted motion primitives as "state -> action -> step" loops.

Action convention (RPent reference §3.2; robosuite ``OSC_POSE`` controller with
``control_delta=True``, input range [-1, 1], output range 0.05 m / 0.5 rad, 20 Hz):

* ``action = [dx, dy, dz, rx, ry, rz, gripper]``, each in [-1, 1], world frame.
* Translation: ``action[:3] = clip(clip(target - eef, +/-step_clip) / action_scale, +/-1)`` with
  ``action_scale = 0.05`` m (an action of 1.0 asks for about 5 cm in one step).
* Rotation: ``action[3]`` (about world x, "pitch") and ``action[5]`` (about world z, "yaw") are
  the wrapped angle error clipped to ``+/-step_clip`` and divided by ``ROTATION_GAIN = 0.10`` rad.
* Yaw = ``atan2(R[1,0], R[0,0])`` and pitch = ``atan2(R[1,2], -R[2,2])`` of the eef rotation
  ``R`` (see :mod:`rpent.robots.libero.geometry`); pitch 0 = gripper pointing down.
* Gripper: -1 = open, +1 = close; opening = ``|qpos[0]| + |qpos[1]|`` (~0.08 m open, ~0 closed).

The loops (:func:`move_to`, :func:`move_pose`, :func:`rotate_wrist`, :func:`rotate_pitch`,
:func:`set_gripper`, :func:`release`) take ``step_fn(action) -> step result`` (in-process
:meth:`LiberoSim.step <rpent.robots.libero.sim.LiberoSim.step>` or an RPC-backed ``env.step``),
the current ``state`` and a ``cancelled()`` callable checked before every env step. A state /
step result is a dict with either an ``"obs"`` sub-dict or flat keys ``robot0_eef_pos``,
``robot0_eef_quat`` (xyzw), ``robot0_gripper_qpos``, plus optional ``terminated``,
``truncated``, ``success``. They return the §3.3 result dicts (JSON-able: lists and floats).
A loop never steps an episode that has ended; it stops as soon as a step reports
``terminated`` or ``truncated``. Bad arguments raise :class:`MotionArgumentError`.

Use :class:`StateTracker` to chain loops: it wraps ``step_fn`` and remembers the last state.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero.geometry import pitch_from_matrix, quat_xyzw_to_matrix, wrap_angle, yaw_from_matrix

__all__ = [
    "PANDA_JOINT_LIMITS",
    "joints_at_limit",
    "ACTION_SCALE",
    "ROTATION_GAIN",
    "GRIPPER_OPEN",
    "GRIPPER_CLOSE",
    "MAX_XY_TRAVEL",
    "MotionArgumentError",
    "StateTracker",
    "robot_state",
    "eef_yaw",
    "eef_pitch",
    "gripper_opening",
    "position_action",
    "angle_action",
    "servo_action",
    "position_reached",
    "angle_reached",
    "episode_over",
    "move_to",
    "move_pose",
    "rotate_wrist",
    "rotate_pitch",
    "set_gripper",
    "release",
]

ACTION_SCALE = 0.05  #: m per unit translation action (robosuite OSC_POSE output_max 0.05)
ROTATION_GAIN = 0.10  #: rad of angle error per unit rotation action (RPent reference §3.2)
GRIPPER_OPEN = -1.0
GRIPPER_CLOSE = 1.0
MAX_XY_TRAVEL = 0.30  #: m; larger single move_to calls make the OSC IK flip (RPent reference §9)

StepFn = Callable[[np.ndarray], Mapping[str, Any]]
CancelFn = Callable[[], bool]


class MotionArgumentError(ValueError):
    """A motion primitive got an argument it cannot use; the message names it and the fix."""


# ---------------------------------------------------------------------- state access
def robot_state(state: Mapping[str, Any]) -> dict:
    """Normalise a state / step result to ``{"eef_pos", "eef_quat", "gripper_qpos",
    "terminated", "truncated", "success"}`` (float64 arrays, bools).

    Raises:
        MotionArgumentError: required keys missing.
    """
    obs = state.get("obs", state)
    try:
        pos = np.asarray(obs["robot0_eef_pos"], dtype=np.float64).reshape(3)
        quat = np.asarray(obs["robot0_eef_quat"], dtype=np.float64).reshape(4)
        grip = np.asarray(obs["robot0_gripper_qpos"], dtype=np.float64).reshape(2)
    except KeyError as exc:
        raise MotionArgumentError(
            f"state lacks {exc.args[0]!r}; pass a step result or robot_obs() dict with robot0_eef_pos, "
            "robot0_eef_quat (xyzw) and robot0_gripper_qpos"
        ) from None
    return {
        "eef_pos": pos,
        "eef_quat": quat,
        "gripper_qpos": grip,
        "terminated": bool(state.get("terminated", False)),
        "truncated": bool(state.get("truncated", False)),
        "success": bool(state.get("success", state.get("terminated", False))),
    }


def eef_yaw(quat_xyzw: np.ndarray) -> float:
    """Gripper yaw (rad) from the eef quaternion (xyzw): ``atan2(R[1,0], R[0,0])``."""
    return yaw_from_matrix(quat_xyzw_to_matrix(quat_xyzw))


def eef_pitch(quat_xyzw: np.ndarray) -> float:
    """Gripper pitch (rad) from the eef quaternion (xyzw): ``atan2(R[1,2], -R[2,2])``."""
    return pitch_from_matrix(quat_xyzw_to_matrix(quat_xyzw))


#: the Panda arm's joint ranges (rad, joints 1-7; robosuite's ``panda/robot.xml``)
PANDA_JOINT_LIMITS = ((-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698),
                      (-2.8973, 2.8973), (-0.0175, 3.7525), (-2.8973, 2.8973))


def joints_at_limit(state: Mapping[str, Any], margin: float = 0.03) -> list[tuple[int, float]]:
    """``[(joint number 1-7, angle rad)]`` of the arm's joints within ``margin`` (rad) of an end of
    :data:`PANDA_JOINT_LIMITS`, from ``state["robot0_joint_pos"]``; ``[]`` when the state has no
    joint angles (a record or server without them)."""
    q = state.get("robot0_joint_pos")
    if q is None or len(q) != len(PANDA_JOINT_LIMITS):
        return []
    return [(i + 1, float(v)) for i, (v, (lo, hi)) in enumerate(zip(q, PANDA_JOINT_LIMITS))
            if float(v) <= lo + margin or float(v) >= hi - margin]


def gripper_opening(gripper_qpos: np.ndarray) -> float:
    """Finger opening (m) = ``|qpos[0]| + |qpos[1]|`` (~0.08 open, ~0 closed on nothing)."""
    q = np.asarray(gripper_qpos, dtype=np.float64).reshape(2)
    return float(abs(q[0]) + abs(q[1]))


def episode_over(state: Mapping[str, Any]) -> bool:
    """True when the state reports ``terminated`` or ``truncated``."""
    return bool(state.get("terminated", False)) or bool(state.get("truncated", False))


# ---------------------------------------------------------------------- pure servo laws
def position_action(eef_pos: np.ndarray, target: np.ndarray, step_clip: float, action_scale: float = ACTION_SCALE) -> np.ndarray:
    """Translation part of the action toward ``target``.

    ``clip(clip(target - eef, +/-step_clip) / action_scale, +/-1)`` per axis.

    Args:
        eef_pos, target: (3,) world positions (m).
        step_clip: max commanded displacement per step per axis (m).
        action_scale: m per unit action (0.05).
    Returns:
        float64 (3,) in [-1, 1].
    """
    err = np.asarray(target, dtype=np.float64) - np.asarray(eef_pos, dtype=np.float64)
    return np.clip(np.clip(err, -step_clip, step_clip) / action_scale, -1.0, 1.0)


def angle_action(current: float, target: float, step_clip: float, gain: float = ROTATION_GAIN) -> float:
    """Rotation action for one axis: ``clip(wrap(target - current), +/-step_clip) / gain``, clipped to [-1, 1]."""
    err = wrap_angle(target - current)
    return float(np.clip(np.clip(err, -step_clip, step_clip) / gain, -1.0, 1.0))


def servo_action(
    state: Mapping[str, Any],
    target_xyz: np.ndarray | None = None,
    target_yaw: float | None = None,
    target_pitch: float | None = None,
    gripper: float = GRIPPER_OPEN,
    step_clip: float = 0.025,
    yaw_step_clip: float = 0.10,
    pitch_step_clip: float = 0.10,
    action_scale: float = ACTION_SCALE,
) -> np.ndarray:
    """One 7-D action toward a (partial) target pose; axes without a target get 0.

    Args:
        state: current state (see module docstring).
        target_xyz: (3,) world target of the eef (m) or None (no translation).
        target_yaw, target_pitch: rad or None (no rotation about that axis).
        gripper: -1 open .. +1 close.
        step_clip, yaw_step_clip, pitch_step_clip: per-step clips (m, rad).
        action_scale: m per unit translation action.
    Returns:
        float64 (7,) action.
    """
    s = robot_state(state)
    action = np.zeros(7)
    if target_xyz is not None:
        action[:3] = position_action(s["eef_pos"], target_xyz, step_clip, action_scale)
    if target_pitch is not None:
        action[3] = angle_action(eef_pitch(s["eef_quat"]), target_pitch, pitch_step_clip)
    if target_yaw is not None:
        action[5] = angle_action(eef_yaw(s["eef_quat"]), target_yaw, yaw_step_clip)
    action[6] = float(np.clip(gripper, -1.0, 1.0))
    return action


def position_reached(eef_pos: np.ndarray, target: np.ndarray, tol: float) -> bool:
    """True when ``||target - eef|| <= tol`` (m)."""
    return float(np.linalg.norm(np.asarray(target, dtype=np.float64) - np.asarray(eef_pos, dtype=np.float64))) <= tol


def angle_reached(current: float, target: float, tol: float) -> bool:
    """True when the wrapped angle error is within ``tol`` (rad)."""
    return abs(wrap_angle(target - current)) <= tol


# ---------------------------------------------------------------------- argument checks
def _xyz(value: Any, label: str = "xyz") -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise MotionArgumentError(f"{label} must be a JSON array of three numbers (meters, world frame), got {value!r}")
    return arr


def _positive(value: Any, label: str, integer: bool = False) -> Any:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise MotionArgumentError(f"{label} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


def _angle(value: Any, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(float(value)):
        raise MotionArgumentError(f"{label} must be a number in radians, got {value!r}")
    return float(value)


def _gripper(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not -1.0 <= float(value) <= 1.0:
        raise MotionArgumentError(f"gripper must be a number in [-1, 1] (-1 open, +1 close), got {value!r}")
    return float(value)


def _never() -> bool:
    return False


def _cancelled_result(tool: str, partial: dict) -> dict:
    out = {
        "error": f"{tool} cancelled between env steps",
        "code": "tool_cancelled",
        "interrupted": True,
    }
    out.update(partial)
    return out


def _vec(a: np.ndarray) -> list[float]:
    return [float(x) for x in a]


class StateTracker:
    """Wraps a ``step_fn`` and remembers the latest state, so loops can be chained.

    Args:
        step_fn: ``step_fn(action[7]) -> step result``.
        state: the current state before any step.

    Attributes:
        state: the latest state (the initial one or the last step result).
        steps: env steps taken through this tracker.
    """

    def __init__(self, step_fn: StepFn, state: Mapping[str, Any]) -> None:
        self._step_fn = step_fn
        self.state: Mapping[str, Any] = state
        self.steps = 0

    def step(self, action: np.ndarray) -> Mapping[str, Any]:
        """Take one env step and remember its result."""
        self.state = self._step_fn(np.asarray(action, dtype=np.float64))
        self.steps += 1
        return self.state


def _run(
    tool: str,
    step_fn: StepFn,
    state: Mapping[str, Any],
    max_steps: int,
    cancelled: CancelFn,
    make_action: Callable[[Mapping[str, Any]], np.ndarray],
    done: Callable[[Mapping[str, Any]], bool],
) -> tuple[Mapping[str, Any], int, bool]:
    """Shared loop: returns (last state, steps used, was_cancelled)."""
    steps = 0
    while steps < max_steps and not episode_over(state) and not done(state):
        if cancelled():
            return state, steps, True
        state = step_fn(make_action(state))
        steps += 1
    return state, steps, False


def _flags(state: Mapping[str, Any]) -> dict:
    return {"terminated": bool(state.get("terminated", False)), "truncated": bool(state.get("truncated", False))}


# ---------------------------------------------------------------------- primitives
def move_to(
    step_fn: StepFn,
    state: Mapping[str, Any],
    xyz: Any,
    gripper: float = GRIPPER_OPEN,
    tol: float = 0.012,
    step_clip: float = 0.025,
    max_steps: int = 80,
    action_scale: float = ACTION_SCALE,
    target_yaw: float | None = None,
    yaw_step_clip: float = 0.10,
    cancelled: CancelFn = _never,
) -> dict:
    """Servo the eef to ``xyz`` (m, world), holding orientation (or turning to ``target_yaw``).

    Stops when within ``tol`` (and the yaw within 0.02 rad when ``target_yaw`` is given),
    after ``max_steps`` env steps, or when the episode ends. Keep ``|dxy| <= 0.30`` m per call
    (RPent reference §9); a longer move still runs but the result carries a ``warning``.

    Returns:
        ``{target_xyz, final_eef_pos, final_dist_m, steps_used, reached, terminated, truncated}``
        (+ ``target_yaw``, ``final_yaw``; + ``warning``), or the ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: bad xyz / numbers.
    """
    target = _xyz(xyz)
    g = _gripper(gripper)
    tol = _positive(tol, "tol")
    step_clip = _positive(step_clip, "step_clip")
    max_steps = _positive(max_steps, "max_steps", integer=True)
    action_scale = _positive(action_scale, "action_scale")
    yaw = _angle(target_yaw, "target_yaw")
    yaw_step_clip = _positive(yaw_step_clip, "yaw_step_clip")
    start = robot_state(state)["eef_pos"]

    def reached(s: Mapping[str, Any]) -> bool:
        rs = robot_state(s)
        ok = position_reached(rs["eef_pos"], target, tol)
        if yaw is not None:
            ok = ok and angle_reached(eef_yaw(rs["eef_quat"]), yaw, 0.02)
        return ok

    last, used, was_cancelled = _run(
        "move_to", step_fn, state, max_steps, cancelled,
        lambda s: servo_action(s, target, yaw, None, g, step_clip, yaw_step_clip, 0.10, action_scale),
        reached,
    )
    rs = robot_state(last)
    out = {
        "target_xyz": _vec(target),
        "final_eef_pos": _vec(rs["eef_pos"]),
        "final_dist_m": float(np.linalg.norm(target - rs["eef_pos"])),
        "steps_used": used,
        "reached": reached(last),
        **_flags(last),
    }
    if yaw is not None:
        out["target_yaw"] = yaw
        out["final_yaw"] = eef_yaw(rs["eef_quat"])
    dxy = float(np.linalg.norm(target[:2] - start[:2]))
    if dxy > MAX_XY_TRAVEL:
        out["warning"] = f"|dxy| = {dxy:.3f} m exceeds {MAX_XY_TRAVEL} m; split long moves into waypoints"
    return _cancelled_result("move_to", out) if was_cancelled else out


def move_pose(
    step_fn: StepFn,
    state: Mapping[str, Any],
    xyz: Any,
    target_pitch: float | None = None,
    target_yaw: float | None = None,
    gripper: float = GRIPPER_OPEN,
    step_clip: float = 0.02,
    pitch_step: float = 0.08,
    yaw_step: float = 0.08,
    tol: float = 0.012,
    ori_tol: float = 0.05,
    action_scale: float = ACTION_SCALE,
    max_steps: int = 150,
    cancelled: CancelFn = _never,
) -> dict:
    """Servo position and orientation (pitch about world x, yaw about world z) together.

    Returns:
        ``{target_xyz, final_eef_pos, final_dist_m, final_pitch, final_yaw, steps_used, reached,
        terminated, truncated}`` (+ ``target_pitch``/``target_yaw`` when given) or the
        ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: bad arguments.
    """
    target = _xyz(xyz)
    pitch = _angle(target_pitch, "target_pitch")
    yaw = _angle(target_yaw, "target_yaw")
    g = _gripper(gripper)
    step_clip = _positive(step_clip, "step_clip")
    pitch_step = _positive(pitch_step, "pitch_step")
    yaw_step = _positive(yaw_step, "yaw_step")
    tol = _positive(tol, "tol")
    ori_tol = _positive(ori_tol, "ori_tol")
    action_scale = _positive(action_scale, "action_scale")
    max_steps = _positive(max_steps, "max_steps", integer=True)

    def reached(s: Mapping[str, Any]) -> bool:
        rs = robot_state(s)
        ok = position_reached(rs["eef_pos"], target, tol)
        if pitch is not None:
            ok = ok and angle_reached(eef_pitch(rs["eef_quat"]), pitch, ori_tol)
        if yaw is not None:
            ok = ok and angle_reached(eef_yaw(rs["eef_quat"]), yaw, ori_tol)
        return ok

    last, used, was_cancelled = _run(
        "move_pose", step_fn, state, max_steps, cancelled,
        lambda s: servo_action(s, target, yaw, pitch, g, step_clip, yaw_step, pitch_step, action_scale),
        reached,
    )
    rs = robot_state(last)
    out = {
        "target_xyz": _vec(target),
        "final_eef_pos": _vec(rs["eef_pos"]),
        "final_dist_m": float(np.linalg.norm(target - rs["eef_pos"])),
        "final_pitch": eef_pitch(rs["eef_quat"]),
        "final_yaw": eef_yaw(rs["eef_quat"]),
        "steps_used": used,
        "reached": reached(last),
        **_flags(last),
    }
    if pitch is not None:
        out["target_pitch"] = pitch
    if yaw is not None:
        out["target_yaw"] = yaw
    return _cancelled_result("move_pose", out) if was_cancelled else out


def _rotate(
    tool: str,
    axis: str,
    step_fn: StepFn,
    state: Mapping[str, Any],
    target: Any,
    delta: Any,
    gripper: float,
    max_steps: int,
    tol: float,
    step_clip: float,
    cancelled: CancelFn,
) -> dict:
    target = _angle(target, f"target_{axis}")
    delta = _angle(delta, f"delta_{axis}")
    if target is None and delta is None:
        raise MotionArgumentError(f"need target_{axis} or delta_{axis}")
    if target is not None and delta is not None:
        raise MotionArgumentError(f"give only one of target_{axis} or delta_{axis}")
    g = _gripper(gripper)
    max_steps = _positive(max_steps, "max_steps", integer=True)
    tol = _positive(tol, "tol")
    step_clip = _positive(step_clip, "step_clip")
    read = eef_yaw if axis == "yaw" else eef_pitch
    s0 = robot_state(state)
    hold = s0["eef_pos"].copy()
    start = read(s0["eef_quat"])
    goal = wrap_angle(start + delta) if target is None else wrap_angle(target)

    def make(s: Mapping[str, Any]) -> np.ndarray:
        if axis == "yaw":
            return servo_action(s, hold, goal, None, g, 0.025, step_clip, 0.10)
        return servo_action(s, hold, None, goal, g, 0.025, 0.10, step_clip)

    last, used, was_cancelled = _run(
        tool, step_fn, state, max_steps, cancelled, make,
        lambda s: angle_reached(read(robot_state(s)["eef_quat"]), goal, tol),
    )
    final = read(robot_state(last)["eef_quat"])
    out = {
        f"start_{axis}": start,
        f"target_{axis}": goal,
        f"final_{axis}": final,
        "final_err": abs(wrap_angle(goal - final)),
        "steps_used": used,
        **_flags(last),
    }
    return _cancelled_result(tool, out) if was_cancelled else out


def rotate_wrist(
    step_fn: StepFn,
    state: Mapping[str, Any],
    target_yaw: float | None = None,
    delta_yaw: float | None = None,
    gripper: float = GRIPPER_CLOSE,
    max_steps: int = 40,
    tol: float = 0.02,
    step_clip: float = 0.10,
    cancelled: CancelFn = _never,
) -> dict:
    """Turn the gripper about world z to ``target_yaw`` (or by ``delta_yaw``), holding xyz.

    Returns:
        ``{start_yaw, target_yaw, final_yaw, final_err, steps_used, terminated, truncated}``
        (rad) or the ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: neither or both angles given ("need target_yaw or delta_yaw"), bad numbers.
    """
    return _rotate("rotate_wrist", "yaw", step_fn, state, target_yaw, delta_yaw, gripper, max_steps, tol, step_clip, cancelled)


def rotate_pitch(
    step_fn: StepFn,
    state: Mapping[str, Any],
    target_pitch: float | None = None,
    delta_pitch: float | None = None,
    gripper: float = GRIPPER_CLOSE,
    max_steps: int = 40,
    tol: float = 0.02,
    step_clip: float = 0.10,
    cancelled: CancelFn = _never,
) -> dict:
    """Tilt the gripper about world x to ``target_pitch`` (or by ``delta_pitch``), holding xyz.

    Returns:
        ``{start_pitch, target_pitch, final_pitch, final_err, steps_used, terminated, truncated}``
        or the ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: neither or both angles given, bad numbers.
    """
    return _rotate("rotate_pitch", "pitch", step_fn, state, target_pitch, delta_pitch, gripper, max_steps, tol, step_clip, cancelled)


def set_gripper(
    step_fn: StepFn,
    state: Mapping[str, Any],
    gripper: float = GRIPPER_OPEN,
    steps: int = 5,
    cancelled: CancelFn = _never,
) -> dict:
    """Drive the gripper for ``steps`` env steps while holding the eef position.

    Returns:
        ``{gripper, steps, gripper_opening, terminated, truncated}`` (``steps`` = env steps
        taken; fewer when the episode ends) or the ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: bad gripper / steps.
    """
    g = _gripper(gripper)
    n = _positive(steps, "steps", integer=True)
    hold = robot_state(state)["eef_pos"].copy()
    last, used, was_cancelled = _run(
        "set_gripper", step_fn, state, n, cancelled,
        lambda s: servo_action(s, hold, None, None, g, 0.025),
        lambda s: False,
    )
    out = {
        "gripper": g,
        "steps": used,
        "gripper_opening": gripper_opening(robot_state(last)["gripper_qpos"]),
        **_flags(last),
    }
    return _cancelled_result("set_gripper", out) if was_cancelled else out


def release(
    step_fn: StepFn,
    state: Mapping[str, Any],
    max_steps: int = 20,
    cancelled: CancelFn = _never,
) -> dict:
    """Open the gripper in place (holding xyz) until it is fully open or stops opening.

    Opening in place can trigger LIBERO's On/In success predicate. Stops early once the
    opening exceeds 0.075 m or has not grown by 0.5 mm for 3 steps after 5 steps.

    Returns:
        ``{steps_used, start_gripper_opening, peak_gripper_opening, final_gripper_opening,
        terminated, truncated}`` (m) or the ``tool_cancelled`` error dict.
    Raises:
        MotionArgumentError: bad max_steps.
    """
    max_steps = _positive(max_steps, "max_steps", integer=True)
    s0 = robot_state(state)
    hold = s0["eef_pos"].copy()
    start = gripper_opening(s0["gripper_qpos"])
    history = [start]

    def done(s: Mapping[str, Any]) -> bool:
        if s is state:
            return False
        o = gripper_opening(robot_state(s)["gripper_qpos"])
        history.append(o)
        if o >= 0.075:
            return True
        return len(history) > 6 and max(history[-3:]) - history[-4] < 0.0005

    last, used, was_cancelled = _run(
        "release", step_fn, state, max_steps, cancelled,
        lambda s: servo_action(s, hold, None, None, GRIPPER_OPEN, 0.025),
        done,
    )
    final = gripper_opening(robot_state(last)["gripper_qpos"])
    out = {
        "steps_used": used,
        "start_gripper_opening": start,
        "peak_gripper_opening": max(history + [final]),
        "final_gripper_opening": final,
        **_flags(last),
    }
    return _cancelled_result("release", out) if was_cancelled else out
