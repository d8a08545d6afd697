"""Room for the hand where an object is set down: the Panda hand is 0.21 m long along its
closing axis, so lowering a small object beside (or next to) something tall can bring the
hand down on that neighbour even though the object itself clears it.

:func:`hand_top` reads the highest clutter point under the hand's footprint at a pose;
:func:`release_plan` chooses, for the set-down pose, a wrist turn of a quarter turn (for an
object that may be turned: the hand's long side then lies along the other axis) and, where
neither yaw leaves the hand clear, how much higher to let go. :func:`hover_z` is the lowest
height from which the open hand may turn and come down onto an object without touching a
neighbour (a fingertip that grazed a can beside a flat box pushed the can against the box).

Frames: world, m, rad. Points are ``float64[N, 3]`` (the clutter cloud of
:func:`rpent.robots.libero.skills.clutter.clutter_points`). The hand's closing axis at yaw
``y`` is ``(-sin y, cos y)`` (:mod:`rpent.robots.libero.skills.grasp`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rpent.robots.libero.skills.grasp import HAND_BOTTOM, HAND_HALF_LENGTH, HAND_HALF_THICKNESS

__all__ = ["HAND_ROOM_MARGIN", "HAND_ROOM_RISE", "MAX_RELEASE_RISE", "FINGER_REACH", "FINGER_BELOW", "ReleasePlan", "hand_top",
           "release_plan", "hover_z"]

#: free distance (m, xy) kept between the hand's footprint and clutter points.
HAND_ROOM_MARGIN = 0.01
#: height (m) the hand's underside keeps above clutter it is lowered next to.
HAND_ROOM_RISE = 0.01
#: most (m) a release is raised to keep the hand off a neighbour: the object then drops this
#: far at most (a box or a pot set down 4-6 cm high lands upright on a flat support).
MAX_RELEASE_RISE = 0.06


@dataclass(frozen=True)
class ReleasePlan:
    """How to set an object down with the hand clear of its neighbours.

    Attributes:
        turn: wrist turn (rad, 0 or +/- pi/2) to apply while carrying.
        rise: how much (m, >= 0) higher than planned to let go.
        top: highest clutter point (m) under the hand's footprint at the chosen yaw (``-inf``
            when none).
    """

    turn: float
    rise: float
    top: float


def hand_top(points: np.ndarray, xy: Sequence[float], yaw: float, margin: float = HAND_ROOM_MARGIN) -> float:
    """Highest z (m) of ``points`` inside the hand's footprint (a rectangle
    ``HAND_HALF_LENGTH + margin`` along the closing axis and ``HAND_HALF_THICKNESS + margin``
    across it, centred on the eef's ``xy``, the hand at ``yaw``); ``-inf`` when none is."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        return -math.inf
    ax, ay = -math.sin(yaw), math.cos(yaw)
    dx, dy = p[:, 0] - float(xy[0]), p[:, 1] - float(xy[1])
    along = np.abs(dx * ax + dy * ay)
    across = np.abs(-dx * ay + dy * ax)
    inside = (along <= HAND_HALF_LENGTH + margin) & (across <= HAND_HALF_THICKNESS + margin)
    return float(p[inside, 2].max()) if inside.any() else -math.inf


def release_plan(points: np.ndarray, xy: Sequence[float], yaw: float, release_z: float, may_turn: bool,
                 margin: float = HAND_ROOM_MARGIN, rise: float = HAND_ROOM_RISE,
                 max_rise: float = MAX_RELEASE_RISE) -> ReleasePlan:
    """Where the eef lets go at ``xy``, ``release_z`` (m) with the hand at ``yaw``: its underside
    (:data:`~rpent.robots.libero.skills.grasp.HAND_BOTTOM` above the eef) must pass ``rise``
    above every clutter point under its footprint (:func:`hand_top`).

    Clear as planned: no turn, no rise. Else, when ``may_turn`` (the object's orientation on
    the target does not matter and its grasp is at its centre), a quarter turn where that
    leaves the hand clear. Else the yaw (of the two) with the lower neighbour, and the release
    raised until the hand clears it, by at most ``max_rise``."""
    bottom = float(release_z) + HAND_BOTTOM - rise

    def top(y: float) -> float:
        return hand_top(points, xy, y, margin)

    t0 = top(yaw)
    if t0 <= bottom:
        return ReleasePlan(0.0, 0.0, t0)
    turn, t = 0.0, t0
    if may_turn:
        t1 = top(yaw + math.pi / 2)
        if t1 <= bottom:
            return ReleasePlan(math.pi / 2, 0.0, t1)
        if t1 < t0:
            turn, t = math.pi / 2, t1
    return ReleasePlan(turn, float(min(max_rise, t - bottom)), t)


#: radius (m, xy) round the eef within which the open fingertips pass while the wrist turns
#: (the tips sit 0.047 m either side of it at any yaw, plus their half width).
FINGER_REACH = 0.06
#: depth (m) of the fingertips below the eef point, and height of the hand's underside above it.
FINGER_BELOW = 0.013


def hover_z(points: np.ndarray, xy: Sequence[float], margin: float = HAND_ROOM_RISE + 0.005) -> float:
    """Lowest eef height (m) at ``xy`` from which the hand may turn about the vertical and come
    down onto the object without touching a neighbour: the fingertips (:data:`FINGER_BELOW`
    under the eef, within :data:`FINGER_REACH`) and the hand's underside
    (:data:`~rpent.robots.libero.skills.grasp.HAND_BOTTOM` over it, within
    ``HAND_HALF_LENGTH``) each ``margin`` above every clutter point under them; ``-inf``
    when none is near."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        return -math.inf
    d = np.hypot(p[:, 0] - float(xy[0]), p[:, 1] - float(xy[1]))
    z = -math.inf
    tips = p[d <= FINGER_REACH + HAND_ROOM_MARGIN]
    if len(tips):
        z = max(z, float(tips[:, 2].max()) + FINGER_BELOW + margin)
    hand = p[d <= HAND_HALF_LENGTH + HAND_ROOM_MARGIN]
    if len(hand):
        z = max(z, float(hand[:, 2].max()) - HAND_BOTTOM + margin)
    return z
