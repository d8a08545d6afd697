"""Grasp choice from the object's shape: a top-down centre grasp, or a rim grasp for wide round objects.

The Panda gripper opens ~0.079 m (``|qpos[0]| + |qpos[1]|`` fully open, measured); its
fingers close along the gripper's y axis, which is world y at yaw 0 (measured: at yaw 0 the
finger tips sit at y = +/-0.047 m of the eef), i.e. along ``(-sin yaw, cos yaw)``. A bowl
or a mug wider than the opening cannot be closed on from the centre: the fingers meet over
its middle and close on nothing (issue #16: the LIBERO akita black bowl is ~0.09-0.10 m).
The rim grasp puts the finger gap on the wall instead: the eef sits ``RIM_INSET`` inside
the rim on the side with the most free space, the fingers close radially (one inside,
one outside the wall), ``RIM_DEPTH`` below the top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from rpent.robots.libero.skills.estimate import ObjectEstimate

__all__ = ["StrategyParams", "plan_grasp", "needs_rim_grasp", "GRIPPER_MAX_OPENING", "RIM_INSET", "RIM_DEPTH"]

#: Full opening of the Panda gripper (m), measured in LIBERO (``gripper_opening`` fully open).
GRIPPER_MAX_OPENING = 0.079
#: eef distance inside the outer rim for a rim grasp (m): wall ~5 mm + finger pad half-width.
RIM_INSET = 0.012
#: eef depth below the object's top for a rim grasp (m); the pads reach ~0.013 m lower.
RIM_DEPTH = 0.02
#: tallest object (m) that a partly seen wide footprint sends to a rim grasp (bowls ~0.05 m; moka pot 0.14 m).
RIM_PARTIAL_MAX_HEIGHT = 0.08


@dataclass(frozen=True)
class StrategyParams:
    """Tunable heights and gains of :func:`~rpent.robots.libero.skills.motion.pick_and_place`
    (meters, radians, env steps).

    The Panda finger pads reach ~0.013 m below the eef point (``robot0_eef_pos``, the grip
    site) and the palm starts ~0.023 m above it (measured from the gripper geoms).
    """

    approach_clearance: float = 0.08  #: eef above the object top before descending
    grasp_depth: float = 0.025  #: eef below the object top for tall objects
    min_grasp_height: float = 0.012  #: eef above the object bottom (fingertips clear the table)
    carry_clearance: float = 0.06  #: object bottom above the target top while carrying
    min_carry_z: float = 0.25  #: lowest eef height for transport moves
    release_clearance_in: float = 0.03  #: object bottom above the container rim at release
    release_clearance_on: float = 0.015  #: object bottom above the support top at release
    retreat_height: float = 0.10  #: eef rise after releasing
    close_steps: int = 15  #: env steps to close the gripper
    grasped_min_opening: float = 0.004  #: opening (m) below which the grasp is considered empty
    #: the same for a rim grasp, whose fingers close on a bowl's thin wall (observed on the akita
    #: bowl: 0.0079 m right after closing, 0.0035 m after the lift; empty grips read 0.0010-0.0014 m;
    #: whether 0.0035 m still held the bowl was not verified)
    grasped_min_opening_rim: float = 0.0022
    #: opening (m) above which the fingers did not close at all (the widest grasp, a rim, is < 0.066 m;
    #: observed 0.0755 m after a close that met nothing at a descent that stopped 9 cm high)
    grasped_max_opening: float = 0.072
    max_xy_travel: float = 0.25  #: per move_to (the hard limit is 0.30 m, RPent reference §9)
    round_ratio: float = 1.25  #: major/minor extent ratio below which the yaw is left as is
    rim_min_width: float = 0.066  #: narrow side (m) from which a round object gets a rim grasp
    #: a centre-grasp descent that stops this far (m) above the grasp height came down on something else
    blocked_descent: float = 0.03
    #: longest object (m) a blocked centre grasp retries across its other side (the gripper opens 0.079 m)
    turn_max_extent: float = 0.072


def needs_rim_grasp(obj: ObjectEstimate, params: StrategyParams = StrategyParams()) -> bool:
    """True for an object whose narrow side is at least ``rim_min_width`` (too wide to close on
    across, with margin) and that is not flat (height >= 2 cm): bowls, ramekins, mugs (a mug's
    handle makes its footprint oblong, its body stays round); also for one at least 9 cm
    long, 4.5 cm across and 3 cm tall (a bowl partly hidden by the arm was measured 0.101 x
    0.062 m)."""
    if obj.minor_extent <= 1e-6 or obj.height < 0.02:
        return False
    if obj.minor_extent >= params.rim_min_width:
        return True
    # a wide, low object seen partly hidden (e.g. a bowl behind the arm): its long side still tells;
    # not a tall one (a moka pot, 0.10 x 0.057 x 0.14 m, gripped at its rim swung ~10 cm in the grip
    # and was set down off the stove, libero_10 t8)
    return obj.major_extent >= 0.09 and obj.minor_extent >= 0.045 and 0.03 <= obj.height <= RIM_PARTIAL_MAX_HEIGHT


def _fold(yaw: float, current: float) -> float:
    while yaw - current > math.pi / 2:
        yaw -= math.pi
    while yaw - current < -math.pi / 2:
        yaw += math.pi
    return yaw


def _rim_side(obj: ObjectEstimate, radius: float, obstacles: Sequence[ObjectEstimate]) -> float:
    """Direction (rad) from the centre to the rim point to grasp: the one of +y, -y, -x, +x
    whose outer finger (``radius + 0.03`` m out) is farthest from the obstacles' footprints
    (centre distance minus half their major extent); ties favour the order given (no wrist
    turn for +/-y; -x faces the robot)."""
    best, best_score = math.pi / 2, -math.inf
    for k, phi in enumerate((math.pi / 2, -math.pi / 2, math.pi, 0.0)):
        fx = obj.center[0] + math.cos(phi) * (radius + 0.03)
        fy = obj.center[1] + math.sin(phi) * (radius + 0.03)
        clear = 0.2
        for o in obstacles:
            d = math.hypot(o.center[0] - fx, o.center[1] - fy) - o.major_extent / 2.0
            clear = min(clear, d)
        score = min(clear, 0.06) - 0.002 * k  # beyond 6 cm of clearance, prefer the order
        if score > best_score:
            best, best_score = phi, score
    return best


def plan_grasp(obj: ObjectEstimate, current_yaw: float, params: StrategyParams = StrategyParams(),
               obstacles: Sequence[ObjectEstimate] = ()) -> dict:
    """Grasp pose for an object, chosen from its shape.

    * Centre grasp (default): eef above the centre, ``grasp_depth`` below the top (at least
      ``min_grasp_height`` above the bottom). To close across the narrow side the yaw is the
      major-axis direction (mod pi); for a ridge-topped object the fingers close along the
      ridge (yaw = ridge direction - pi/2). Nearly round footprints keep the current yaw.
    * Rim grasp (:func:`needs_rim_grasp`: bowls, wide mugs): eef ``RIM_INSET`` inside the
      rim (radius: mean half extent of a round footprint, half the narrow side of an oblong
      one, e.g. a mug with its handle) on the freest side (:func:`_rim_side`, away from ``obstacles``), ``RIM_DEPTH`` below
      the top, fingers closing radially (yaw = side direction - pi/2).

    The yaw is folded to the equivalent angle nearest ``current_yaw``.

    Args:
        obj: the object; current_yaw: eef yaw now (rad); obstacles: other objects nearby.
    Returns:
        ``{"xyz": [x, y, z_grasp], "approach_z": float, "yaw": float, "kind": "centre" |
        "rim", "offset": [dx, dy]}`` (m, rad; ``offset`` = grasp xy minus object centre xy,
        kept while carrying so the object's centre lands on the target's).
    """
    height = obj.height
    if needs_rim_grasp(obj, params):
        round_ = obj.major_extent / obj.minor_extent < params.round_ratio
        radius = (obj.major_extent + obj.minor_extent) / 4.0 if round_ else obj.minor_extent / 2.0  # mug: body, not handle
        phi = _rim_side(obj, radius, obstacles)
        off = radius - RIM_INSET
        dx, dy = math.cos(phi) * off, math.sin(phi) * off
        grasp_z = max(obj.bottom_z + params.min_grasp_height, obj.top_z - RIM_DEPTH)
        return {
            "xyz": [obj.center[0] + dx, obj.center[1] + dy, grasp_z],
            "approach_z": obj.top_z + params.approach_clearance,
            "yaw": _fold(phi - math.pi / 2, current_yaw),
            "kind": "rim",
            "offset": [dx, dy],
        }
    grasp_z = max(obj.bottom_z + params.min_grasp_height, obj.top_z - min(params.grasp_depth, height / 2.0))
    yaw = current_yaw
    if obj.ridge_yaw is not None or (obj.minor_extent > 1e-6 and obj.major_extent / obj.minor_extent >= params.round_ratio):
        yaw = _fold(obj.ridge_yaw - math.pi / 2 if obj.ridge_yaw is not None else obj.major_yaw, current_yaw)
    return {
        "xyz": [obj.center[0], obj.center[1], grasp_z],
        "approach_z": obj.top_z + params.approach_clearance,
        "yaw": yaw,
        "kind": "centre",
        "offset": [0.0, 0.0],
    }
