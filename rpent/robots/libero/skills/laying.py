"""Laying a tall object down in an open drawer: set it upright at one end of the drawer's width,
then push its top over toward the other end (world frame, m, rad).

A drawer's free height is its box's height less its floor (``view_fixtures``: LIBERO's white
cabinet's bottom drawer is a 7.1 cm box, 5.9 cm free under the drawer above); an object taller
than that (a wine bottle, 16 cm) stands up out of it and jams the drawer as it is pushed shut
(libero_10_task t3, seed 0: the drawer stopped at -0.060 m). Lying along the drawer's width
(across its opening direction: 20 cm inside) it fits. The object is set down upright with its
side :data:`END_GAP` from the box's end along the width, :data:`FRONT_GAP` behind the drawer
front's inner face, then the closed fingers push its upper part toward the other end, the
hand's long (closing) axis along the push and its narrow side across it, clear of the cabinet's
face. Measured in LIBERO (libero_10_task t3 s0, the 4.4 cm x 16 cm bottle): set down 2.6-3.0 cm
from the box's end it tipped flat (86-90 degrees) and the drawer then closed with it; 3.5-4.0 cm
from the end it tipped onto the far wall (74 degrees) and the drawer stopped 3 cm short.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.fixtures import DRAWER_FRONT_DEPTH, open_amount, open_direction
from rpent.robots.libero.skills.motion import Executor

__all__ = ["free_height", "needs_laying", "lay_spot", "tip_over", "END_GAP", "FRONT_GAP"]

#: height (m) of a drawer's floor above its box's bottom (LIBERO cabinets; as ``scene.DRAWER_FLOOR``).
FLOOR = 0.012
#: gap (m) between the object's side and the end of the drawer's box along its width.
END_GAP = 0.004
#: gap (m) between the object's side and the inner face of the drawer's front.
FRONT_GAP = 0.005
#: smallest radius (m) taken for the object's body: an estimate's footprint comes from its top
#: band, which for a bottle is its cap (1.2 x 1.1 cm seen on libero_10_task t3's 4.4 cm bottle).
MIN_RADIUS = 0.025
#: the push starts this far (m) from the object's centre along the width, the hand's half
#: length (robosuite's Panda: 0.105 m along its closing axis) plus a margin, and ends this far
#: past it.
PUSH_START = 0.13
PUSH_END = 0.10
#: the fingertips meet the object this far (m) below its top and push on down by ``PUSH_DROP``.
PUSH_BELOW_TOP = 0.03
PUSH_DROP = 0.05


def free_height(part: Mapping[str, Any]) -> float:
    """Free height (m) inside a drawer: its box's height less its floor."""
    return float(part["max"][2]) - float(part["min"][2]) - FLOOR


def needs_laying(obj: ObjectEstimate, part: Mapping[str, Any]) -> bool:
    """True when ``obj`` stands taller than the drawer's free height (less 5 mm)."""
    return obj.height > free_height(part) - 0.005


def _axes(part: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(opening direction, width direction) as unit xy vectors; the width direction points from
    the box's end nearer the robot base's side (the smaller world x, or y for a drawer opening
    along x) to the other."""
    d = np.asarray(open_direction(part), dtype=np.float64)[:2]
    d = d / max(float(np.linalg.norm(d)), 1e-9)
    w = np.array([-d[1], d[0]])
    if (abs(w[0]) >= abs(w[1]) and w[0] < 0) or (abs(w[0]) < abs(w[1]) and w[1] < 0):
        w = -w
    return d, w


def lay_spot(part: Mapping[str, Any], obj: ObjectEstimate) -> tuple[ObjectEstimate, tuple[float, float]] | None:
    """Where to set ``obj`` down upright before tipping it, and the push direction.

    Args:
        part: the open drawer (``view_fixtures`` slide part: ``min``/``max`` box, ``axis``,
            ``range``, ``qpos``); obj: the object's estimate (its ``height`` is its length lying).
    Returns:
        ``(target, (wx, wy))``: a target estimate whose centre is the spot (its ``support`` the
        drawer's floor there) and the unit xy push direction along the drawer's width; None when
        the object is longer than the drawer is wide, or the exposed part of the drawer is too
        short for it to stand in.
    """
    d, w = _axes(part)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    corners = np.array([[x, y] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])])
    w_lo, w_hi = float((corners @ w).min()), float((corners @ w).max())
    d_front = float((corners @ d).max())  # the drawer front's outer face (its handle)
    r = max(min(obj.major_extent, obj.minor_extent) / 2.0, MIN_RADIUS)
    if obj.height + 2 * r > (w_hi - w_lo):
        return None
    along = d_front - DRAWER_FRONT_DEPTH - FRONT_GAP - r  # just behind the front's inner face
    if open_amount(part) < DRAWER_FRONT_DEPTH + FRONT_GAP + 2 * r:
        return None
    across = w_lo + END_GAP + r
    xy = d * along + w * across
    floor = float(lo[2]) + FLOOR
    target = ObjectEstimate(center=(float(xy[0]), float(xy[1]), float((lo[2] + hi[2]) / 2.0)), top_z=float(hi[2]),
                            bottom_z=float(lo[2]), major_extent=2 * r, minor_extent=2 * r, source="drawer_lay_spot",
                            support=(float(xy[0]), float(xy[1]), floor))
    return target, (float(w[0]), float(w[1]))


def tip_over(ex: Executor, xy: tuple[float, float], top_z: float, push: tuple[float, float]) -> dict:
    """Push an upright object at ``xy`` (m) whose top is at ``top_z`` over along ``push`` (unit xy):
    the closed fingers come down :data:`PUSH_START` behind it, :data:`PUSH_BELOW_TOP` under its
    top, the hand's closing axis along the push, and move to :data:`PUSH_END` past it while
    descending :data:`PUSH_DROP`, then rise. Returns ``{"stage", "reached", "phases"}``
    (``stage``: ``"tip"``; ``"error"`` in ``phases`` when a move failed)."""
    phases: list[dict] = []
    yaw = math.atan2(push[1], push[0]) - math.pi / 2  # closing axis (-sin yaw, cos yaw) along the push
    yaw = (yaw + math.pi / 2) % math.pi - math.pi / 2
    z = float(top_z) - PUSH_BELOW_TOP
    start = [xy[0] - push[0] * PUSH_START, xy[1] - push[1] * PUSH_START]
    end = [xy[0] + push[0] * PUSH_END, xy[1] + push[1] * PUSH_END]
    steps = [
        ("tip approach", dict(xyz=[*start, z + 0.06], gripper=control.GRIPPER_CLOSE, target_yaw=yaw, max_steps=120)),
        ("tip descend", dict(xyz=[*start, z], gripper=control.GRIPPER_CLOSE, target_yaw=yaw, step_clip=0.015,
                             max_steps=60)),
        ("tip push", dict(xyz=[*end, z - PUSH_DROP], gripper=control.GRIPPER_CLOSE, target_yaw=yaw, step_clip=0.01,
                          max_steps=100)),
    ]
    reached = True
    for phase, args in steps:
        r = ex.run("move_to", args)
        phases.append({"phase": phase, **{k: v for k, v in r.items() if k not in ("_images", "state_after")}})
        if "error" in r or control.episode_over(ex.current_state()):
            return {"stage": phase, "reached": False, "phases": phases}
        reached = bool(r.get("reached"))
    pos = control.robot_state(ex.current_state())["eef_pos"]
    back = [float(pos[0]) - push[0] * 0.05, float(pos[1]) - push[1] * 0.05, float(top_z) + 0.08]
    r = ex.run("move_to", {"xyz": back, "gripper": control.GRIPPER_OPEN, "max_steps": 80})
    phases.append({"phase": "tip retreat", **{k: v for k, v in r.items() if k not in ("_images", "state_after")}})
    return {"stage": "tip", "reached": reached, "phases": phases}
