"""Opening a drawer whose handle the hand cannot grip: drag the handle bar out with the closed
fingertips hooked over its inner top edge.

A low drawer's handle (libero_goal_task t0: the cabinet's bottom drawer, its bar 4.2 cm above
the table) cannot be gripped: pointing at the drawer with its fingers closing vertically, the
Panda hand (0.21 m along its closing line) meets the table before the fingers reach the bar,
and from above the drawer over it (its own bar 7 cm higher, at the same depth) covers it.
The closed fingers fit in beside the upper bar when the hand is turned so they close along the
drawer's front (yaw :data:`HOOK_YAW`) and pitched :data:`HOOK_PITCH` rad about world x, the
fingertips leaning into the drawer: the hand stands out in front of the cabinet and the
fingertips come in along the tool axis, under the upper bar, to just behind the lower bar's
inner face (:func:`hook_point`). Pressed down and out from there (:data:`HOOK_LEG` legs along the
opening direction and as much down), the fingers' underside bears on the bar's inner top edge
and drags the drawer open; the joint is re-read after each leg (:func:`~rpent.robots.libero.
skills.drawers.pull_verdict`), and a hand that slipped off the bar is set on it again.
Measured on libero_goal_task t0 seed 0 (``wooden_cabinet`` bottom drawer, opening toward +y):
pitched 0.95 or 1.05 rad, one placement dragged it from 0 to -0.140 m in 22 legs; pitched
0.8 rad, the hand met the upper drawer's bar on the way in.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.articulated import open_direction
from rpent.robots.libero.skills.motion import Executor

__all__ = ["HOOK_PITCH", "HOOK_YAW", "HOOK_PAST_BAR", "HOOK_ABOVE_BAR", "HOOK_LEG", "hook_point", "hook_pose",
           "front_hook_pull"]

#: pitch (rad) of the tool axis from pointing down, about world x, the fingertips leaning into
#: the drawer (signed by :func:`hook_pose`).
HOOK_PITCH = 0.95
#: hand yaw (rad): the fingers' closing line (-sin yaw, cos yaw) along world x, i.e. along the
#: front of a drawer that opens along world y.
HOOK_YAW = math.pi / 2
#: how far (m) behind the handle's outer face (the part box's extreme along the opening
#: direction) the grip site aims: past the bar (~1.6 cm deep) into the ~1.5 cm gap before the front.
HOOK_PAST_BAR = 0.026
#: grip-site height (m) above the handle's centre: the closed fingers' underside (~0.8 cm below
#: the pads' centre) on the bar's top (~0.8 cm above its centre).
HOOK_ABOVE_BAR = 0.016
#: one drag leg (m) along the opening direction (and as much down, pressing on the bar).
HOOK_LEG = 0.012
#: the fingertips come in along the tool axis from this far (m) back along it.
HOOK_APPROACH = 0.07
#: drag legs per placement, and placements (a hand that slipped off is set on the bar again).
HOOK_LEGS = 24
HOOK_PLACEMENTS = 3


def hook_pose(part: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(pitch, yaw)`` (rad) of the hand for a front hook on ``part`` (a slide part from
    ``view_fixtures``), or None when it does not open along world y (the pitch turns about
    world x only). The fingertips lean against the opening direction: pitch ``-HOOK_PITCH`` for
    a drawer opening toward +y, ``+HOOK_PITCH`` toward -y."""
    d_open = open_direction(part)
    if abs(float(d_open[1])) < 0.9:
        return None
    return (-HOOK_PITCH if d_open[1] > 0 else HOOK_PITCH), HOOK_YAW


def hook_point(part: Mapping[str, Any]) -> np.ndarray:
    """Where the grip site goes for a front hook (pure geometry, world frame, m): above the
    handle's centre line, :data:`HOOK_PAST_BAR` behind the handle's outer face (the part box's
    extreme along the opening direction) and :data:`HOOK_ABOVE_BAR` above the handle's centre."""
    d_open = open_direction(part)
    h = np.asarray(part["handle"], dtype=np.float64)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    front = float(max(lo @ d_open, hi @ d_open))
    p = h + d_open * (front - HOOK_PAST_BAR - float(h @ d_open))
    p[2] = float(h[2]) + HOOK_ABOVE_BAR
    return p


def _tool_axis(ex: Executor) -> np.ndarray:
    """The hand's pointing direction (world, unit) now: the eef frame's z axis."""
    quat = np.asarray(control.robot_state(ex.current_state())["eef_quat"], dtype=np.float64)
    return control.quat_xyzw_to_matrix(quat)[:, 2]


def front_hook_pull(run, travel, ex: Executor, part: Mapping[str, Any],
                    read_part: Callable[[], Mapping[str, Any] | None], goal: float) -> tuple[str, float]:
    """Turn the closed hand to :func:`hook_pose` where it stands, bring the fingertips in
    along the tool axis to :func:`hook_point` of the drawer as it stands now and drag it open
    (see the module docstring); returns ``(verdict, opening)`` like the other pulls of
    :func:`~rpent.robots.libero.skills.drawers.open_drawer` (``"error"`` when the pose could
    not be taken). The hand backs out along the tool axis and turns back to pointing down."""
    from rpent.robots.libero.skills.drawers import _pull_legs, open_amount

    pose = hook_pose(part)
    if pose is None:
        return "error", open_amount(part)
    pitch, yaw = pose
    g = control.GRIPPER_CLOSE
    run("drawer hook turn", "rotate_wrist", target_yaw=yaw, gripper=g, tol=0.02)
    here = [float(v) for v in control.robot_state(ex.current_state())["eef_pos"]]
    r = run("drawer hook turn", "move_pose", xyz=here, target_pitch=pitch, target_yaw=yaw, gripper=g, max_steps=100)
    if "error" in r or control.episode_over(ex.current_state()):
        return "error", open_amount(part)
    d_open = open_direction(part)
    verdict, opening, now = "stalled", open_amount(part), part
    for _ in range(HOOK_PLACEMENTS):
        now = read_part() or now
        p = hook_point(now)
        pre = p - _tool_axis(ex) * HOOK_APPROACH
        for target, kw in ((pre, dict(max_steps=150)), (p, dict(step_clip=0.01, tol=0.004, max_steps=80))):
            for _ in range(2):  # a second pass takes up what the first left (the tool tilts as it goes)
                r = run("drawer hook reach", "move_pose", xyz=[float(v) for v in target], target_pitch=pitch,
                        target_yaw=yaw, gripper=g, **kw)
                if "error" in r or control.episode_over(ex.current_state()) or r.get("reached"):
                    break
        if control.episode_over(ex.current_state()):
            break
        verdict, opening = _pull_legs(run, ex, read_part, now, d_open, goal, "drawer hook drag", max_legs=HOOK_LEGS,
                                      target_pitch=pitch, target_yaw=yaw, step_clip=0.006,
                                      down=HOOK_LEG)
        if verdict != "slipped":
            break
    if not control.episode_over(ex.current_state()):
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        back = pos - _tool_axis(ex) * 0.06
        run("drawer hook retreat", "move_pose", xyz=[float(v) for v in back], target_pitch=pitch, target_yaw=yaw,
            gripper=g, max_steps=60)
        run("drawer hook retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(back[2]) + 0.10],
            target_pitch=0.0, target_yaw=yaw, gripper=g, max_steps=150)
    return verdict, opening
