"""Placing an object into a cavity behind a hinged front door (LIBERO's microwave): the object is
taken by its handle from above (its fingers across the handle's vertical outer bar), turned so the
handle points out of the front, carried to the front (over the fixture's body when that stands in
the way: :func:`carry_height`), carried in horizontally through the open door at a height that
clears the cavity's floor and ceiling, set down on the floor, and the hand withdraws the way it
came (motion plans over the executor).

The hand cannot go in: LIBERO's microwave cavity is 0.144 m tall, and the Panda hand pointing
down stands ~0.1 m above its grip site over a mug ~0.1 m tall. So the object goes in ahead of
the hand: gripped at the outer end of its handle, the hand's inner face stays
:data:`FRONT_GAP` outside the front plane while the body sits inside. The handle still sticks
out of the front then; the door, pushed shut afterwards (:func:`~rpent.robots.libero.skills.doors.close_door`),
sweeps it in (the mug slides on the cavity's floor).

Geometry, from the door part of ``view_fixtures`` (:func:`~rpent.robots.libero.skills.doors.door_frame`)
and LIBERO's ``microwave.xml`` (``articulated_objects/microwave.xml``), in a frame at the door's
hinge: ``u`` along the shut door (hinge -> free edge), ``n`` out of the front (the side the door's
handle faces when shut), heights from the hinge's:

* the front plane (the front edges of the floor and ceiling boxes) is the hinge line (n = 0);
* the cavity spans u :data:`CAVITY_U` (the hinge-side wall's inner face at x -0.1435, the control
  block's at 0.0635, the hinge at -0.1725), :data:`CAVITY_DEPTH` deep (the back wall's inner face at
  y 0.0805, the hinge at y -0.088), its floor :data:`FLOOR_BELOW_HINGE` below the hinge and its
  ceiling :data:`CEILING_ABOVE_HINGE` above it (floor box top 0.024, ceiling box bottom 0.168, the
  hinge at 0.096);
* the control block's front stands 0.0225 m out of the front plane from u :data:`PANEL_U` on;
* LIBERO's ``heating_region`` site (``In``: the object's body origin inside a 0.24 x 0.167 x 0.16 m
  box centred 0.098 m in) begins :data:`REGION_FROM` in from the front plane.

Pure pieces (unit-tested): :func:`cavity_frame`, :func:`find_handle` (the handle from a point cloud
of the object), :func:`handle_grasp`, :func:`insertion_plan`, :func:`carry_height`, :func:`approach_height`;
:func:`place_through_door` moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.geometry import quat_xyzw_to_matrix
from rpent.robots.libero.skills.articulated import phase_result, phase_runner
from rpent.robots.libero.skills.doors import door_angle, door_frame
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import (HAND_HALF_LENGTH, HAND_HALF_THICKNESS, RIM_DEPTH, ROBOT_BASE_XY,
                                              StrategyParams, wrist_angle, WRIST_LIMIT)
from rpent.robots.libero.skills.motion import Executor

__all__ = ["Handle", "cavity_frame", "find_handle", "handle_grasp", "insertion_plan", "place_through_door",
           "door_open_enough", "crosses_body", "crosses_door", "carry_height", "approach_height", "carried_extent",
           "tilted_in_heights", "retry_in_heights", "CAVITY_U", "CAVITY_DEPTH", "FRONT_GAP", "MIN_DOOR_OPEN"]

#: the cavity's extent along the shut door from the hinge (m), ``microwave.xml``
CAVITY_U = (0.029, 0.236)
#: the cavity's depth behind the front plane (m)
CAVITY_DEPTH = 0.1685
#: the cavity's floor below / ceiling above the hinge's height (m)
FLOOR_BELOW_HINGE = 0.072
CEILING_ABOVE_HINGE = 0.072
#: from here along u (m) the control block's front stands 0.0225 m out of the front plane
PANEL_U = 0.26
#: the ``heating_region`` site begins this far (m) behind the front plane
REGION_FROM = 0.0145
#: the hand's inner face stays this far (m) outside the front plane while the object is inside
FRONT_GAP = 0.008
#: where the object's axis goes along u (m from the hinge): the hand (``HAND_HALF_LENGTH`` each
#: way along u) then ends 1.5 cm short of the control block and 3.5 cm past the hinge
AXIS_U = 0.14
#: the object's bottom above the cavity's floor while it is carried in / when it is let go (m)
IN_LIFT = 0.014
RELEASE_LIFT = 0.005
#: the object's top stays at least this far (m) below the ceiling
CEILING_GAP = 0.004
#: the object's axis at least this far (m) behind the front plane when let go: its weight rests on
#: the floor (the door, pushed shut, then sweeps the rest of it in)
AXIS_MIN_DEPTH = 0.02
#: the carried object stands this far (m) out of the front plane before it goes in
STAGE_GAP = 0.035
#: the fixture's body, from the hinge (``microwave.xml``: its boxes span x -0.1725..0.1725,
#: y -0.1105..0.1105 and z 0..0.187 about the hinge at (-0.1725, -0.088, 0.096)): this far (m)
#: along u, from :data:`BODY_BACK_N` to :data:`BODY_FRONT_N` along n, its top this far above the
#: hinge
BODY_U = 0.345
BODY_BACK_N = -0.1985
BODY_FRONT_N = 0.0225
BODY_TOP_ABOVE_HINGE = 0.091
#: a carried object passing over the fixture's body keeps its bottom this far (m) above its top
OVER_BODY_GAP = 0.03
#: the fingertips reach this far (m) below the grip site (the eef position)
FINGER_BELOW_EEF = 0.013
#: an open hand passing over the door or the fixture's body keeps its fingertips this far (m)
#: above their top
OVER_DOOR_GAP = 0.03
#: the hand's footprint seen from above, turning as it goes: within this distance (m) of its
#: centre (:data:`~rpent.robots.libero.skills.grasp.HAND_HALF_LENGTH` and 1.5 cm)
HAND_REACH = 0.12
#: the door must stand at least this far (rad) from shut: its inner face then stays clear of the
#: hand 0.2 m out of the front (0.2 x tan(0.12) = 2.4 cm < the hand's 3.5 cm past the hinge)
MIN_DOOR_OPEN = 1.45
#: a handle reaches at least this far (m) past the body's radius (LIBERO's mugs: 3.6-4.0 cm)
HANDLE_MIN_REACH = 0.02
#: the grip sits this far (m) in from the handle's outer end (its outer bar is ~8 mm thick)
HANDLE_GRIP_INSET = 0.005
#: the handle's reach at the grip height is read from its points within this height (m) of it
HANDLE_BAND = 0.01
#: the handle's outer part: its points within this distance (m) of its reach (LIBERO's mugs' outer
#: bars are 7.5-8.3 mm thick radially: ``porcelain_mug.xml`` box half size 0.00376,
#: ``white_yellow_mug.xml`` 0.00412)
HANDLE_OUTER = 0.006
#: the grip sits this far (m) below the top of the handle's outer part: the finger pads then wrap
#: the outer bar's upper end, not the piece slanting in to the rim above it
HANDLE_GRIP_BELOW_OUTER = 0.006
#: angular bins of the point cloud about the body's axis; bins within this angle (rad) of the
#: handle's direction are the handle's, the others the body's wall
HANDLE_BINS = 24
HANDLE_SECTOR = math.radians(40.0)


@dataclass(frozen=True)
class Handle:
    """An object's body and handle seen from above (world frame, m).

    Attributes:
        axis: (x, y) of the body's vertical axis; radius: the body's outer radius;
        direction: unit (x, y) from the axis toward the handle; reach: how far the handle's outer
        end lies from the axis along ``direction``.
    """

    axis: tuple[float, float]
    radius: float
    direction: tuple[float, float]
    reach: float


def cavity_frame(part: Mapping[str, Any]) -> dict:
    """The cavity behind a hinged door, from its ``view_fixtures`` part (pure; world frame, m).

    Returns:
        ``{"c": (2,) hinge xy, "u": (2,) along the shut door, "n": (2,) out of the front,
        "floor_z", "ceiling_z", "open": how far (rad) the door stands from shut now, "frame": the
        door's :func:`~rpent.robots.libero.skills.doors.door_frame`}``.
    Raises:
        ValueError: as :func:`door_frame`.
    """
    f = door_frame(part)
    phi = door_angle(f, f["q_closed"])
    u = np.array([math.cos(phi), math.sin(phi)])
    n = f["out"] * np.array([-u[1], u[0]])  # the handle's side of the shut door: the outside
    z = float(part["pos"][2])
    return {"c": np.asarray(f["c"], dtype=np.float64), "u": u, "n": n, "floor_z": z - FLOOR_BELOW_HINGE,
            "ceiling_z": z + CEILING_ABOVE_HINGE, "open": abs(f["q"] - f["q_closed"]), "frame": f}


def door_open_enough(cav: Mapping[str, Any]) -> bool:
    """True when the door stands :data:`MIN_DOOR_OPEN` or more from shut."""
    return float(cav["open"]) >= MIN_DOOR_OPEN


def _circle(pts: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares circle through (N, 2) points (Kasa): ``(centre, radius)``."""
    a = np.column_stack([2.0 * pts[:, 0], 2.0 * pts[:, 1], np.ones(len(pts))])
    b = (pts ** 2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(a, b, rcond=None)
    c = sol[:2]
    return c, float(math.sqrt(max(sol[2] + c @ c, 0.0)))


def find_handle(points: np.ndarray, centre_xy: Sequence[float]) -> Handle | None:
    """The body and handle of a mug-like object from its seen points (pure).

    The points about ``centre_xy`` (a first guess of the body's axis) are binned by angle
    (:data:`HANDLE_BINS`); the bin reaching farthest holds the handle. A circle through the
    outermost points of the bins outside :data:`HANDLE_SECTOR` of it is the body's wall (its
    centre the axis; refitted once about the new axis). Returns None when no bin reaches
    :data:`HANDLE_MIN_REACH` past the body's radius (no handle), or when too few bins saw the wall.

    Args:
        points: ``float[N, 3]`` or ``[N, 2]`` world points of the object (table points removed).
        centre_xy: a first guess of the axis (the estimate's centre).
    """
    pts = np.asarray(points, dtype=np.float64).reshape(len(points), -1)[:, :2]
    if len(pts) < 30:
        return None
    c = np.asarray(centre_xy, dtype=np.float64)[:2]
    radius, h, wall = 0.0, None, None
    for _ in range(3):
        d = pts - c
        r, th = np.hypot(d[:, 0], d[:, 1]), np.arctan2(d[:, 1], d[:, 0])
        k = ((th + math.pi) / (2 * math.pi) * HANDLE_BINS).astype(int) % HANDLE_BINS
        far = np.full(HANDLE_BINS, -1.0)
        for b in range(HANDLE_BINS):
            if (k == b).any():
                far[b] = float(np.percentile(r[k == b], 98))
        hb = int(np.argmax(far))
        h_ang = (hb + 0.5) / HANDLE_BINS * 2 * math.pi - math.pi
        sector = np.abs((th - h_ang + math.pi) % (2 * math.pi) - math.pi) <= HANDLE_SECTOR
        wall = []
        for b in range(HANDLE_BINS):
            m = (k == b) & ~sector
            if m.sum() >= 3:
                wall.append(pts[m][r[m] >= far[b] - 0.004])
        if len(wall) < HANDLE_BINS // 3:
            return None
        c, radius = _circle(np.concatenate(wall))
    d = pts - c
    r, th = np.hypot(d[:, 0], d[:, 1]), np.arctan2(d[:, 1], d[:, 0])
    out = r > radius + 0.01
    if out.sum() < 3:
        return None
    v = d[out].mean(axis=0)
    h = v / max(float(np.linalg.norm(v)), 1e-9)
    along = d @ h
    in_sector = np.abs((th - math.atan2(h[1], h[0]) + math.pi) % (2 * math.pi) - math.pi) <= HANDLE_SECTOR
    reach = float(np.percentile(along[in_sector], 99)) if in_sector.any() else 0.0
    if reach - radius < HANDLE_MIN_REACH:
        return None
    return Handle((float(c[0]), float(c[1])), radius, (float(h[0]), float(h[1])), reach)


def handle_grasp(obj: ObjectEstimate, handle: Handle, points: np.ndarray | None = None) -> dict:
    """Where a top-down grasp takes the handle: ``{"xyz", "yaw" (the gripper's x axis along the
    handle: the fingers close across it), "grip_r" (m from the axis), "approach_z"}``.

    The fingers close across the handle's outer (vertical) bar, where it reaches farthest: a
    handle narrows into slanting pieces toward the rim, and pads closed on a slanting piece slide
    up off it on the lift (LIBERO's ``porcelain_mug.xml``: the outer bar spans 3.6-7.6 cm up the
    body, 7.6 cm from the axis; above it a piece slants in to the wall at 9.5 cm, under the rim at
    10.8 cm; a grip at the rim's height less 2 cm closed on that piece and came up empty on
    libero_10_task t9, 1.5-2 cm lower it lifts the mug). So with ``points`` (the object's seen
    points) the grip sits :data:`HANDLE_GRIP_BELOW_OUTER` below the top of the handle's outer part
    (its points within :data:`HANDLE_OUTER` of ``handle.reach``), never higher than
    :data:`~rpent.robots.libero.skills.grasp.RIM_DEPTH` below the top (the hand's underside then
    clears the rim), and :data:`HANDLE_GRIP_INSET` in from the handle's outer end at that height
    (the 95th percentile of how far its points within :data:`HANDLE_BAND` of it reach). Without
    points: ``RIM_DEPTH`` below the top, inset from ``handle.reach``."""
    z = obj.top_z - RIM_DEPTH
    reach = handle.reach
    if points is not None and len(points):
        pts = np.asarray(points, dtype=np.float64).reshape(len(points), -1)
        d = pts[:, :2] - np.asarray(handle.axis)
        along = d @ np.asarray(handle.direction)
        across = np.abs(d @ np.array([-handle.direction[1], handle.direction[0]]))
        hp = (across <= 0.02) & (along > handle.radius)
        outer = hp & (along >= handle.reach - HANDLE_OUTER)
        if outer.sum() >= 3:
            z = min(z, float(np.percentile(pts[outer, 2], 95)) - HANDLE_GRIP_BELOW_OUTER)
        z = max(obj.bottom_z + 0.03, z)
        band = hp & (np.abs(pts[:, 2] - z) <= HANDLE_BAND)
        if band.sum() >= 3:
            reach = min(reach, float(np.percentile(along[band], 95)))
    z = max(obj.bottom_z + 0.03, z)
    grip_r = max(reach - HANDLE_GRIP_INSET, handle.radius + 0.005)
    hx, hy = handle.direction
    x, y = handle.axis[0] + hx * grip_r, handle.axis[1] + hy * grip_r
    return {"xyz": [x, y, z], "yaw": math.atan2(hy, hx), "grip_r": grip_r, "approach_z": obj.top_z + 0.08}


def insertion_plan(cav: Mapping[str, Any], obj: ObjectEstimate, handle: Handle, grasp: Mapping[str, Any]) -> dict:
    """Where the hand goes to put the object in (pure): the handle pointing out along ``n``, the
    object's axis at :data:`AXIS_U` along the opening, the hand's inner face :data:`FRONT_GAP`
    out of the front plane.

    Returns:
        ``{"stage": eef xyz out in front (the object wholly out of the front), "final": eef xyz
        inside at the carry-in height, "release_z", "yaw": the carried gripper's yaw (handle along
        n), "axis_depth": how far (m) the axis ends behind the front plane}``, or ``{"error": why}``
        when the object does not fit.
    """
    c, u, n = cav["c"], cav["u"], cav["n"]
    hang = float(grasp["xyz"][2]) - obj.bottom_z
    if obj.bottom_z + (cav["floor_z"] + IN_LIFT - obj.bottom_z) + obj.height + CEILING_GAP > cav["ceiling_z"]:
        return {"error": f"the object ({obj.height:.3f} m tall) does not fit under the cavity's ceiling "
                         f"({cav['ceiling_z'] - cav['floor_z']:.3f} m above its floor)"}
    if 2 * handle.radius > CAVITY_U[1] - CAVITY_U[0] - 0.02:
        return {"error": f"the object ({2 * handle.radius:.3f} m across) does not fit the door opening"}
    eef_n = HAND_HALF_THICKNESS + FRONT_GAP
    axis_n = eef_n - grasp["grip_r"]
    if handle.reach + handle.radius > CAVITY_DEPTH - 0.005:
        return {"error": f"the object ({handle.reach + handle.radius:.3f} m from its handle's end to its far side) "
                         f"does not fit the cavity's depth ({CAVITY_DEPTH:.3f} m) behind the shut door"}
    if axis_n > -AXIS_MIN_DEPTH:
        return {"error": f"the handle is too short: held by it, the object's axis would stand {-axis_n:.3f} m behind "
                         f"the front (at least {AXIS_MIN_DEPTH:.3f} m needed for it to rest on the floor)"}
    if AXIS_U + HAND_HALF_LENGTH > PANEL_U or AXIS_U - handle.radius < CAVITY_U[0]:
        return {"error": "the hand does not fit in front of the opening"}
    stage_n = grasp["grip_r"] + handle.radius + STAGE_GAP
    in_z = cav["floor_z"] + IN_LIFT + hang
    stage = c + u * AXIS_U + n * stage_n
    final = c + u * AXIS_U + n * eef_n
    return {"stage": [float(stage[0]), float(stage[1]), in_z], "final": [float(final[0]), float(final[1]), in_z],
            "release_z": cav["floor_z"] + RELEASE_LIFT + hang, "yaw": math.atan2(n[1], n[0]), "axis_depth": -axis_n}


def _path_near_box(start_xy: Sequence[float], end_xy: Sequence[float], c: Any, u: Any, n: Any,
                   u_range: tuple[float, float], n_range: tuple[float, float], margin: float) -> bool:
    """True when the straight path between two (x, y) points passes within ``margin`` (m) of the
    box ``u_range`` x ``n_range`` (m) in the frame with origin ``c`` and unit axes ``u``, ``n``
    (xy; the path sampled at 41 points; pure)."""
    c, u, n = (np.asarray(v, dtype=np.float64)[:2] for v in (c, u, n))
    a, b = np.asarray(start_xy, dtype=np.float64)[:2], np.asarray(end_xy, dtype=np.float64)[:2]
    for t in np.linspace(0.0, 1.0, 41):
        p = a + (b - a) * t - c
        pu, pn = float(p @ u), float(p @ n)
        if u_range[0] - margin <= pu <= u_range[1] + margin and n_range[0] - margin <= pn <= n_range[1] + margin:
            return True
    return False


def crosses_body(cav: Mapping[str, Any], start_xy: Sequence[float], end_xy: Sequence[float], margin: float) -> bool:
    """True when the straight path between two (x, y) points passes within ``margin`` (m) of the
    fixture's body seen from above (:data:`BODY_U`, :data:`BODY_BACK_N`, :data:`BODY_FRONT_N`;
    pure)."""
    return _path_near_box(start_xy, end_xy, cav["c"], cav["u"], cav["n"], (0.0, BODY_U), (BODY_BACK_N, BODY_FRONT_N),
                          margin)


def _body_top(cav: Mapping[str, Any]) -> float:
    """World z (m) of the fixture body's top (:data:`BODY_TOP_ABOVE_HINGE` above the hinge)."""
    return float(cav["ceiling_z"]) - CEILING_ABOVE_HINGE + BODY_TOP_ABOVE_HINGE


def carry_height(cav: Mapping[str, Any], start_xy: Sequence[float], stage_xy: Sequence[float], hang: float,
                 span: float, low: float) -> float:
    """The hand's height (m) for the carry from the grasp to the stage point (pure): ``low``, or
    higher where the path crosses the fixture's body (:func:`crosses_body`, ``span``: how far the
    carried object reaches from the hand), so that the object's bottom, ``hang`` below the hand,
    stays :data:`OVER_BODY_GAP` above the body's top (:data:`BODY_TOP_ABOVE_HINGE`). On
    libero_10_swap t9 the microwave stands between the mug and its open front: carried at the
    cavity's ceiling height, the mug dragged over the microwave's top and fell out."""
    if not crosses_body(cav, start_xy, stage_xy, span):
        return low
    return max(low, _body_top(cav) + OVER_BODY_GAP + hang)


def crosses_door(cav: Mapping[str, Any], start_xy: Sequence[float], end_xy: Sequence[float], margin: float) -> bool:
    """True when the straight path between two (x, y) points passes within ``margin`` (m) of the
    open door seen from above (pure): the box of the door's :func:`~rpent.robots.libero.skills.doors.door_frame`
    (``cav["frame"]``: from the hinge to ``length`` along its line now, ``out_extent`` /
    ``in_extent`` to either side of it)."""
    f = cav["frame"]
    u = np.array([math.cos(f["phi"]), math.sin(f["phi"])])
    n = f["out"] * np.array([-u[1], u[0]])
    return _path_near_box(start_xy, end_xy, f["c"], u, n, (0.0, f["length"]), (-f["in_extent"], f["out_extent"]),
                          margin)


def approach_height(cav: Mapping[str, Any], start_xy: Sequence[float], grip_xy: Sequence[float], low: float) -> float:
    """The hand's height (m, eef) on its way from ``start_xy`` to above the grip (pure): ``low``,
    or, where the straight path passes within :data:`HAND_REACH` of the open door
    (:func:`crosses_door`) or the fixture's body (:func:`crosses_body`), high enough that the open
    fingertips (:data:`FINGER_BELOW_EEF` below the eef) stay :data:`OVER_DOOR_GAP` above the
    higher of the door's top and the body's top. On libero_10_task t9 (seeds 2 and 7) the door,
    pushed open to ~1.6 rad, left its free edge under the arm's start; the hand, coming down
    toward the mug on the straight line, caught that edge 0.22 m from the grip."""
    if not (crosses_door(cav, start_xy, grip_xy, HAND_REACH) or crosses_body(cav, start_xy, grip_xy, HAND_REACH)):
        return low
    top = max(float(cav["frame"]["z_top"]), _body_top(cav))
    return max(low, top + FINGER_BELOW_EEF + OVER_DOOR_GAP)


def carried_extent(obj: ObjectEstimate, handle: Handle, grasp: Mapping[str, Any], rel_rot: Any,
                   samples: int = 48) -> tuple[float, float]:
    """How far (m) the held object's lowest point lies below the eef and its highest above it,
    the object turned with the hand since the grasp (pure; world frame).

    The object is its body's cylinder (``handle.axis``, ``handle.radius``, ``obj.bottom_z`` to
    ``obj.top_z``; its rims sampled at ``samples`` angles), fixed in the hand from the grasp at
    ``grasp["xyz"]`` on, and turned about the eef by ``rel_rot`` (3x3: the hand's rotation now
    times the transpose of its rotation when the fingers closed). The identity gives
    ``(grip z - bottom, top - grip z)``.
    """
    g = np.asarray(grasp["xyz"], dtype=np.float64)
    a = np.linspace(0.0, 2.0 * math.pi, samples, endpoint=False)
    ring = np.column_stack([handle.axis[0] + handle.radius * np.cos(a), handle.axis[1] + handle.radius * np.sin(a)])
    pts = np.concatenate([np.column_stack([ring, np.full(samples, z)]) for z in (obj.bottom_z, obj.top_z)]) - g
    z = pts @ np.asarray(rel_rot, dtype=np.float64).reshape(3, 3)[2]
    return float(-z.min()), float(z.max())


def tilted_in_heights(cav: Mapping[str, Any], below: float, above: float) -> tuple[float, float]:
    """The eef's carry-in and release heights (m) for an object reaching ``below`` / ``above`` the
    eef (:func:`carried_extent`; pure): its lowest point :data:`IN_LIFT` over the cavity's floor,
    or, when its highest point would then come closer than :data:`CEILING_GAP` to the ceiling,
    midway between floor and ceiling; let go with its lowest point :data:`RELEASE_LIFT` over the
    floor (never higher than the carry-in)."""
    floor, ceiling = float(cav["floor_z"]), float(cav["ceiling_z"])
    in_z = floor + IN_LIFT + below
    if in_z + above > ceiling - CEILING_GAP:
        in_z = (floor + below + ceiling - above) / 2.0
    return in_z, min(in_z, floor + RELEASE_LIFT + below)


#: the hand's height at a stalled insert differing this much (m) from the commanded one tells which
#: edge of the opening the object met (pushed up: the floor's; pushed down: the ceiling's)
STALL_RISE = 0.003


def retry_in_heights(cav: Mapping[str, Any], below: float, above: float, in_z: float, rise: float) -> tuple[float, float]:
    """The eef's carry-in and release heights (m) for a second try after the object stopped short
    of its place (pure). ``below`` / ``above``: the object's reach below / above the eef turned
    with the hand (:func:`carried_extent`); ``in_z``: the first try's carry-in height; ``rise``:
    how far the hand stood above ``in_z`` where it stopped.

    Pushed up (``rise`` > :data:`STALL_RISE`): the object's bottom met the floor's front edge (it
    sags in the grip about the handle, its far side down: libero_10_swap t9 seed 1, the hand
    pushed up 8 mm): as high as its highest point allows (:data:`CEILING_GAP` under the ceiling),
    released :data:`RELEASE_LIFT` over the floor. Otherwise (its top met the ceiling's front edge:
    on libero_10_task t9 seeds 3 and 6 the hand, tilted 18 degrees with the mug's far side up,
    was pushed down 5 mm) :func:`tilted_in_heights`."""
    floor, ceiling = float(cav["floor_z"]), float(cav["ceiling_z"])
    if rise > STALL_RISE:
        z = max(in_z, ceiling - CEILING_GAP - above)
        return z, min(z, floor + RELEASE_LIFT + below)
    return tilted_in_heights(cav, below, above)


def _wrist_margin(yaw: float, points: Sequence[Sequence[float]], base_xy: Sequence[float]) -> float:
    return min(WRIST_LIMIT - abs(wrist_angle(yaw, p, base_xy)) for p in points)


def place_through_door(ex: Executor, obj: ObjectEstimate, handle: Handle, cav: Mapping[str, Any],
                       params: StrategyParams = StrategyParams(), base_xy: Sequence[float] | None = None,
                       carry_z: float | None = None, points: np.ndarray | None = None) -> dict:
    """Take the object by its handle, carry it in through the open door and set it down inside
    (:func:`handle_grasp` on the object's seen ``points``, :func:`insertion_plan`): approach above the grip (over the
    door and the fixture's body where the way there passes them: :func:`approach_height`), come down, close,
    lift to ``carry_z`` (default: 8 cm above the object's top, or the cavity's ceiling if higher, or
    over the fixture's body where the way to the front crosses it: :func:`carry_height`),
    turn the wrist so the handle points out of the front, travel out in front of the opening,
    come down to the carry-in height, move in horizontally (when the object stops short of its place:
    back out and once more at the height of :func:`retry_in_heights` for the object turned with
    the hand since the grasp, :func:`carried_extent`), lower onto the floor, let go, and
    withdraw horizontally to the stage point, then rise.

    Of the two wrist angles that hold the handle (the fingers are symmetric) the one nearer the
    gripper's yaw now is taken, unless only the other keeps the last joint inside its limits
    (:func:`~rpent.robots.libero.skills.grasp.wrist_angle`) at the grasp and inside (on libero_10 t9 the grasp at yaw +1.59 rad stalled the arm 15 cm short, -1.55 got there).

    Returns:
        ``{"success", "done", "stage", "phases", "reason"?, "axis_depth"?}``; ``stage`` is
        ``plan``, ``approach``, ``descend``, ``close``, ``lift``, ``turn``, ``carry``, ``insert``,
        ``release`` or ``withdraw`` (``done``: it got through the withdrawal).
    """
    phases: list[dict] = []
    run, travel = phase_runner(ex, phases)
    base = ROBOT_BASE_XY if base_xy is None else base_xy
    grasp = handle_grasp(obj, handle, points)
    plan = insertion_plan(cav, obj, handle, grasp)
    if "error" in plan:
        return phase_result(ex, phases, "plan", False, plan["error"])
    gx, gy, gz = (float(v) for v in grasp["xyz"])
    turn = float(control.wrap_angle(plan["yaw"] - grasp["yaw"]))
    # the grasp yaw or the same grip turned by pi: the one keeping the wrist farther from its limits
    cands = [grasp["yaw"], grasp["yaw"] + math.pi]
    cur = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
    ok = [y for y in cands if min(_wrist_margin(y, [(gx, gy)], base),
                                  _wrist_margin(y + turn, [plan["final"][:2]], base)) > 0.0]
    yaw = min(ok or cands, key=lambda y: abs(control.wrap_angle(y - cur)))
    yaw = float(control.wrap_angle(yaw))
    carried_yaw = float(control.wrap_angle(yaw + turn))
    phases.append({"phase": "plan", "grip": [gx, gy, gz], "grip_yaw": yaw, "carried_yaw": carried_yaw,
                   "stage": plan["stage"], "final": plan["final"], "axis_depth": plan["axis_depth"],
                   "handle": {"axis": list(handle.axis), "radius": handle.radius, "direction": list(handle.direction),
                              "reach": handle.reach}})

    def over() -> bool:
        return control.episode_over(ex.current_state())

    def fail(stage: str, why: str | None = None) -> dict:
        s = ex.current_state()
        reason = why or ("episode truncated (max_episode_steps reached)" if s.get("truncated") else
                         str(phases[-1].get("error")) if phases and "error" in phases[-1] else "the move did not finish")
        return phase_result(ex, phases, stage, bool(s.get("success")), None if s.get("success") else reason)

    pos = control.robot_state(ex.current_state())["eef_pos"]
    approach_z = float(grasp["approach_z"])
    if carry_z is None:
        carry_z = carry_height(cav, (gx, gy), plan["stage"][:2], gz - obj.bottom_z, grasp["grip_r"] + handle.radius,
                               max(approach_z, cav["ceiling_z"] + 0.03))
    # over the door / the fixture's body where the way to the grip passes them
    approach_z = approach_height(cav, (float(pos[0]), float(pos[1])), (gx, gy), approach_z)
    if float(pos[2]) < approach_z - 0.02:
        if not travel("approach", [float(pos[0]), float(pos[1]), approach_z], control.GRIPPER_OPEN):
            return fail("approach")
    if not travel("approach", [gx, gy, approach_z], control.GRIPPER_OPEN, target_yaw=yaw, max_steps=120):
        return fail("approach")
    r = run("approach", "rotate_wrist", target_yaw=yaw, gripper=control.GRIPPER_OPEN, tol=0.03)
    if "error" in r or over():
        return fail("approach")
    r = run("descend", "move_to", xyz=[gx, gy, gz], gripper=control.GRIPPER_OPEN, step_clip=0.015, tol=0.006,
            max_steps=100, target_yaw=yaw)
    if "error" in r or over():
        return fail("descend")
    now = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
    off = float(np.hypot(now[0] - gx, now[1] - gy))
    if off > 0.015 or float(now[2]) > gz + 0.02:
        return phase_result(ex, phases, "descend", False, f"the hand stopped {off:.3f} m beside and "
                            f"{float(now[2]) - gz:.3f} m above the handle's grip")
    r = run("close", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=params.close_steps)
    if "error" in r or over():
        return fail("close")
    grip_rot = quat_xyzw_to_matrix(control.robot_state(ex.current_state())["eef_quat"])
    if not travel("lift", [gx, gy, carry_z], control.GRIPPER_CLOSE, step_clip=0.01, max_steps=160):
        return fail("lift")
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < params.grasped_min_opening or opening > params.grasped_max_opening:
        return phase_result(ex, phases, "lift", False, f"the handle grasp came up empty (gripper opening {opening:.4f} m)")
    r = run("turn", "rotate_wrist", target_yaw=carried_yaw, gripper=control.GRIPPER_CLOSE, tol=0.03, max_steps=120)
    if "error" in r or over():
        return fail("turn")
    sx, sy, sz = plan["stage"]
    if not travel("carry", [sx, sy, carry_z], control.GRIPPER_CLOSE, target_yaw=carried_yaw, max_steps=120):
        return fail("carry")
    r = run("carry", "move_to", xyz=[sx, sy, sz], gripper=control.GRIPPER_CLOSE, step_clip=0.015, tol=0.006,
            max_steps=120, target_yaw=carried_yaw)
    if "error" in r or over():
        return fail("carry")
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < params.grasped_min_opening:
        return phase_result(ex, phases, "carry", False,
                            f"the object slipped out of the gripper on the way (gripper opening {opening:.4f} m)")
    fx, fy, fz = plan["final"]
    release_z = float(plan["release_z"])

    def insert_at(z_in: float, z_back: float) -> tuple[bool, float, np.ndarray | None]:
        """Carry in to the place inside at height ``z_in``; stopped more than 2 cm out in front (the
        object met the front), back out to the stage at ``z_back``. Returns (failed, how far short (m)
        along the cavity's normal, the eef position where the carry stopped)."""
        r = run("insert", "move_to", xyz=[fx, fy, z_in], gripper=control.GRIPPER_CLOSE, step_clip=0.01, tol=0.005,
                max_steps=150, target_yaw=carried_yaw)
        if "error" in r or over():
            return True, 0.0, None
        now = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        short = float((now[:2] - np.array([fx, fy])) @ cav["n"])
        if short > 0.02:
            run.phases.append({"phase": "insert", "stopped_short": short})
            run("withdraw", "move_to", xyz=[sx, sy, z_back], gripper=control.GRIPPER_CLOSE, step_clip=0.015,
                max_steps=80)
        return False, short, now

    failed, short, now = insert_at(fz, sz)
    if failed:
        return fail("insert")
    if short > 0.02:
        # once more, higher or lower by which edge of the opening the object met (retry_in_heights)
        rel = quat_xyzw_to_matrix(control.robot_state(ex.current_state())["eef_quat"]) @ grip_rot.T
        in_z, rz = retry_in_heights(cav, *carried_extent(obj, handle, grasp, rel), fz, float(now[2]) - fz)
        if abs(in_z - fz) > 0.003 and not over():
            run.phases.append({"phase": "insert", "tilted_in_z": in_z, "tilted_release_z": rz})
            run("insert", "move_to", xyz=[sx, sy, in_z], gripper=control.GRIPPER_CLOSE, step_clip=0.01, tol=0.005,
                max_steps=60, target_yaw=carried_yaw)
            fz, sz, release_z = in_z, in_z, rz
            failed, short, now = insert_at(fz, sz)
            if failed:
                return fail("insert")
        if short > 0.02:
            return phase_result(ex, phases, "insert", False, f"the carried object stopped {short:.3f} m short of "
                                "its place inside (it met the cavity's front)")
    r = run("release", "move_to", xyz=[fx, fy, release_z], gripper=control.GRIPPER_CLOSE,
            step_clip=0.01, tol=0.005, max_steps=60, target_yaw=carried_yaw)
    if "error" in r or over():
        return fail("release")
    r = run("release", "release")
    if "error" in r or over():
        return fail("release")
    pos = control.robot_state(ex.current_state())["eef_pos"]
    r = run("withdraw", "move_to", xyz=[sx, sy, float(pos[2])], gripper=control.GRIPPER_OPEN, step_clip=0.015,
            max_steps=100)
    if "error" in r or over():
        return fail("withdraw")
    run("withdraw", "move_to", xyz=[sx, sy, carry_z], gripper=control.GRIPPER_OPEN, max_steps=80)
    return {**phase_result(ex, phases, "withdraw", True), "axis_depth": plan["axis_depth"]}
