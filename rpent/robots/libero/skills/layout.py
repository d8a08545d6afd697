"""Where on a target an object goes: side-by-side slots for several objects on one target,
and a spot on the table beside a reference object (world frame, m).

Pure geometry on :class:`~rpent.robots.libero.skills.estimate.ObjectEstimate` (no simulator).
Conventions: world +y is "right" as LIBERO's agentview camera sees the table, +x "front"
(toward the camera, away from the robot) (see :mod:`rpent.robots.libero.skills.spatial`).
"""

from __future__ import annotations

import dataclasses
import math

from rpent.robots.libero.skills.estimate import ObjectEstimate

__all__ = ["SLOT_MAX_OFFSET", "SLOT_MAX_OFFSET_IN", "SLOT_SIDE_OFFSET", "SLOT_SIDE_MIN_GRASP", "handle_offset", "BESIDE_GAP", "BESIDE_MIN_OFFSET", "SIDE_DIRS", "extent_along", "slot_axis", "slot_offset",
           "slot_target", "beside_target", "is_rack", "rack_cradle", "RACK_CRADLE_DEPTH", "RACK_CRADLE_INSET",
           "RACK_CARRY_CLEARANCE", "COMPARTMENT_SIDES", "compartment_target", "compartment_turn"]

#: largest distance (m) of a slot from the target's centre. LIBERO's stove "cook region" is a
#: 0.15 m square on the burner (``flat_stove.xml`` site ``cook_region``, half size 0.075): two
#: moka pots at +/-0.035 m both stay on it with 2-3 cm of error (libero_10 t8: the burner's
#: estimate was 2 cm off toward +x, and a pot set down 4 cm beyond it ended 7.3 cm from the centre).
#: 0.042 (was 0.035): a moka pot's body is 0.08 m wide across its handle axis (collision geoms),
#: so pots 7 cm apart pushed each other off their spots.
SLOT_MAX_OFFSET = 0.042
#: the same for objects put *in* a container: LIBERO's basket counts what lies within +/-0.061 m
#: of its centre (``basket.xml`` site ``contain_region``); libero_10 t0's tomato sauce set 3.5 cm
#: off a basket centre estimated 1-3 cm off was not counted in.
SLOT_MAX_OFFSET_IN = 0.02
#: two objects gripped off their centre go this far (m) at most to either side across their slot
#: axis (:func:`slot_offset`), when the grasp point lies at least ``SLOT_SIDE_MIN_GRASP`` (m) to one side.
SLOT_SIDE_OFFSET = 0.035
SLOT_SIDE_MIN_GRASP = 0.02
#: free gap (m) between a reference object's footprint and an object placed beside it.
BESIDE_GAP = 0.02
#: smallest centre distance (m) of a spot beside a reference (a small or partly seen reference).
BESIDE_MIN_OFFSET = 0.08
#: unit xy directions of "left of / right of / in front of / behind" (as the agentview camera sees the table).
SIDE_DIRS = {"left": (0.0, -1.0), "right": (0.0, 1.0), "front": (1.0, 0.0), "back": (-1.0, 0.0)}


def extent_along(est: ObjectEstimate, direction: tuple[float, float]) -> float:
    """Full extent (m) of ``est``'s footprint box along the unit xy ``direction``."""
    ux, uy = math.cos(est.major_yaw), math.sin(est.major_yaw)
    along_major = abs(direction[0] * ux + direction[1] * uy)
    along_minor = abs(-direction[0] * uy + direction[1] * ux)
    return est.major_extent * along_major + est.minor_extent * along_minor


def slot_axis(obj: ObjectEstimate) -> tuple[float, float]:
    """The world axis (unit xy) along which objects like ``obj`` go side by side: x or y,
    whichever ``obj`` is narrower along (two moka pots, 0.105 m long along y and 0.05 m
    across, fit side by side along x on a stove's 0.15 m cook region; boxes lying along x,
    along y)."""
    return (1.0, 0.0) if extent_along(obj, (1.0, 0.0)) < extent_along(obj, (0.0, 1.0)) else (0.0, 1.0)


def slot_offset(target: ObjectEstimate, obj: ObjectEstimate, slot: int, count: int,
                max_offset: float = SLOT_MAX_OFFSET, grasp_offset: tuple[float, float] | None = None
                ) -> tuple[float, float]:
    """xy offset (m) from the target's centre of slot ``slot`` (0-based) of ``count`` objects
    side by side on or in ``target`` along :func:`slot_axis` (from +x to -x, i.e. the far side
    first, so a later object is not carried past an earlier one; from -y to +y).

    The target's extent along that axis is cut into ``count`` equal parts; slot ``i`` is the
    middle of part ``i``, pulled in so the object (its extent along the axis) stays inside,
    and at most ``max_offset`` from the centre (:data:`SLOT_MAX_OFFSET` on a support,
    :data:`SLOT_MAX_OFFSET_IN` in a container). A target seen narrower than the
    object along the axis (a stove whose front camera view is mostly its knob) is not
    trusted: its part is taken as the object's extent plus 3 cm. ``count`` 1 gives (0, 0).

    Two objects held off their centre (``grasp_offset``, m: grasp point minus the object's
    centre, e.g. a moka pot by its handle) by :data:`SLOT_SIDE_MIN_GRASP` or more across the
    axis are also set apart across it, each by up to :data:`SLOT_SIDE_OFFSET` (the room the
    target leaves there), the second on the side its grasp point lies: the hand that sets it
    down then stays off the first one, and their centres lie ~0.10 m apart (~0.084 m along the axis alone:
    two moka pots 8.5 cm apart along x touched while the second was lowered, libero_10_swap t8).

    Raises:
        ValueError: ``slot`` outside ``0..count-1``.
    """
    if not 0 <= slot < count:
        raise ValueError(f"slot {slot} outside 0..{count - 1}")
    if count == 1:
        return 0.0, 0.0
    axis = slot_axis(obj)
    size = extent_along(obj, axis)
    width = extent_along(target, axis)
    if width < size:
        width = count * (size + 0.03)
    i = count - 1 - slot if axis[0] else slot
    raw = -width / 2.0 + width / count * (i + 0.5)
    room = max(0.0, width / 2.0 - size / 2.0)
    lim = min(max_offset, room)
    off = float(max(-lim, min(lim, raw)))
    dx, dy = axis[0] * off, axis[1] * off
    if count == 2 and grasp_offset is not None:
        across = (axis[1], axis[0])
        side = grasp_offset[0] * across[0] + grasp_offset[1] * across[1]
        if abs(side) >= SLOT_SIDE_MIN_GRASP:
            room = max(0.0, extent_along(target, across) / 2.0 - extent_along(obj, across) / 2.0)
            a = min(SLOT_SIDE_OFFSET, room) * (1.0 if side > 0 else -1.0) * (1.0 if slot == 1 else -1.0)
            dx, dy = dx + across[0] * a, dy + across[1] * a
    return dx, dy


def handle_offset(obj: ObjectEstimate) -> tuple[float, float] | None:
    """Grasp point minus the carried centre (m, xy) of an object held by its handle (a moka pot,
    :func:`~rpent.robots.libero.skills.grasp.handle_point`; a pan,
    :func:`~rpent.robots.libero.skills.grasp.pan_handle`); None for any other object."""
    from rpent.robots.libero.skills.grasp import handle_point, pan_handle

    pan = pan_handle(obj)
    if pan is not None:
        (hx, hy), (bx, by) = pan
        return hx - bx, hy - by
    h = handle_point(obj)
    if h is None or obj.support is None:
        return None
    return h[0] - obj.support[0], h[1] - obj.support[1]


def slot_target(target: ObjectEstimate, obj: ObjectEstimate, slot: int, count: int,
                max_offset: float = SLOT_MAX_OFFSET, grasp_offset: tuple[float, float] | None = None) -> ObjectEstimate:
    """``target`` with its centre (and ``support`` centre) moved to slot ``slot`` of ``count``
    (:func:`slot_offset`)."""
    dx, dy = slot_offset(target, obj, slot, count, max_offset, grasp_offset)
    c = target.center
    sup = target.support
    return dataclasses.replace(target, center=(c[0] + dx, c[1] + dy, c[2]),
                               support=None if sup is None else (sup[0] + dx, sup[1] + dy, sup[2]),
                               source=f"{target.source}+slot{slot + 1}/{count}")


def beside_target(ref: ObjectEstimate, obj: ObjectEstimate, side: str) -> ObjectEstimate:
    """A spot on the surface ``ref`` stands on, beside ``ref`` on ``side`` (``left``, ``right``,
    ``front``, ``back``): the centre ``max(BESIDE_MIN_OFFSET, half the reference's extent + half
    the object's + BESIDE_GAP)`` m from the reference's centre along that direction; its top is
    the reference's bottom (the table), so the object is set down there.

    Raises:
        ValueError: unknown side.
    """
    if side not in SIDE_DIRS:
        raise ValueError(f"side must be one of {sorted(SIDE_DIRS)}, got {side!r}")
    d = SIDE_DIRS[side]
    dist = max(BESIDE_MIN_OFFSET, extent_along(ref, d) / 2.0 + extent_along(obj, d) / 2.0 + BESIDE_GAP)
    cx, cy = ref.center[0] + d[0] * dist, ref.center[1] + d[1] * dist
    return ObjectEstimate(center=(float(cx), float(cy), float(ref.bottom_z)), top_z=float(ref.bottom_z),
                          bottom_z=float(ref.bottom_z), major_yaw=0.0, major_extent=0.0, minor_extent=0.0,
                          source=f"beside({side}) {ref.source}")


# ---------------------------------------------------------------------- compartments
#: unit xy directions of a container's compartments as the agentview camera sees the table: the
#: back is the side away from the camera (world -x, toward the robot; the push skill's "front"
#: is +x, facing the camera), left is -y.
COMPARTMENT_SIDES = {"back": (-1.0, 0.0), "front": (1.0, 0.0), "left": (0.0, -1.0), "right": (0.0, 1.0)}


def compartment_target(container: ObjectEstimate, side: str) -> ObjectEstimate:
    """Where an object goes "in the ``side`` compartment of" a desk caddy: a zero-size target
    on the container's narrow axis a quarter of its narrow extent from the centre toward
    ``side`` (``back``/``front``: a caddy is split lengthwise into a back and a front row), or
    on its long axis a third of its long extent from the centre (``left``/``right``: the end
    compartments), its ``major_yaw`` the container's long axis (the long side of the back and
    front rows; an end compartment is about square, and across the caddy the object would have
    only ~7 mm to spare at each wall while the caddy's estimated centre lies ~2 cm toward its
    tall back: a book lowered across the right compartment stopped on its rim, libero_90 t75,
    t80, t83), its top the container's top and its ``support`` the container's
    bottom (the object is lowered until it stops, :func:`~rpent.robots.libero.skills.motion.pick_and_place`
    ``release_top``). Measured on LIBERO's ``desk_caddy`` (``desk_caddy.xml`` sites): 0.134 m
    across, 0.43 m long; the back compartment 3.4 cm from the centre across (0.134/4), 5.5
    cm wide and 12.4 cm long; the end compartments 14.4 cm from the centre along (0.43/3).

    Raises:
        ValueError: unknown side.
    """
    if side not in COMPARTMENT_SIDES:
        raise ValueError(f"side must be one of {sorted(COMPARTMENT_SIDES)}, got {side!r}")
    d = COMPARTMENT_SIDES[side]
    major = (math.cos(container.major_yaw), math.sin(container.major_yaw))
    minor = (-major[1], major[0])
    if side in ("back", "front"):
        axis, dist, yaw = minor, container.minor_extent / 4.0, container.major_yaw
    else:
        axis, dist, yaw = major, container.major_extent / 3.0, container.major_yaw
    sgn = 1.0 if d[0] * axis[0] + d[1] * axis[1] >= 0 else -1.0
    cx = container.center[0] + sgn * axis[0] * dist
    cy = container.center[1] + sgn * axis[1] * dist
    return ObjectEstimate(center=(float(cx), float(cy), float(container.center[2])), top_z=float(container.top_z),
                          bottom_z=float(container.bottom_z), major_yaw=float(yaw), major_extent=0.0, minor_extent=0.0,
                          source=f"compartment({side}) {container.source}",
                          support=(float(cx), float(cy), float(container.bottom_z)))


def compartment_turn(obj: ObjectEstimate, compartment: ObjectEstimate) -> float:
    """Turn (rad about world z, in [-pi/2, pi/2]) that lays ``obj``'s long side (``major_yaw``,
    e.g. a book's width) along the compartment's long side (:func:`compartment_target`): an
    upright book 11 cm wide goes into the caddy's 5.5 cm x 12.4 cm back compartment only so."""
    d = (compartment.major_yaw - obj.major_yaw + math.pi / 2) % math.pi - math.pi / 2
    return float(d)


# ---------------------------------------------------------------------- racks
#: how far (m) below a rack's top its bottle cradle lies. LIBERO's wine rack (``wine_rack.xml``,
#: libero_goal t9 and its ``_swap``): two slanted boards, the upper one rising from a stopper
#: at ~1.15 m to the rack's top at 1.21-1.22 m; a bottle set down upright on the upper board
#: next to the stopper rests with its base 6-8 cm below the top (the ``top_region`` the task
#: checks lies 1.12-1.20 m there, a slab ~7 cm deep across the rack at 1.15 m).
RACK_CRADLE_DEPTH = 0.07
#: offset (m) of the cradle from the rack's centre along its narrow axis, toward the table's
#: centre (the side the rack is loaded from: its boards slant up away from it; measured
#: 3.5 cm inside the stopper on both scenes, whose stopper stood 6.5-7 cm from the rack's centre estimate).
RACK_CRADLE_INSET = 0.035
#: carried object's bottom above the cradle while carrying it there (m; the default 6 cm put the
#: eef 1.39 m high over LIBERO's rack 0.7 m from the robot's base, where it stalled; a bottle
#: held by its neck hangs 13 cm under the eef: the Panda hand's underside, 2.4 cm above the grip
#: site, stops on the bottle's top when gripped lower, goal_swap t9)
RACK_CARRY_CLEARANCE = 0.025


def is_rack(phrase: str) -> bool:
    """True for a target phrase naming a rack ("rack", "wine rack")."""
    return "rack" in phrase.lower().split()


def rack_cradle(rack: ObjectEstimate, table_center: tuple[float, float] = (0.0, 0.0)) -> ObjectEstimate:
    """Where a bottle goes into a rack: a zero-size target ``RACK_CRADLE_DEPTH`` below the
    rack's top, ``RACK_CRADLE_INSET`` from its centre along its narrow axis, on the side facing
    ``table_center`` (world xy, m; LIBERO's table centre is the world origin), its centre at the
    rack's centre along the long axis. The object is set down upright there (its base on the
    upper board, against the stopper) rather than dropped on the rack's top."""
    ux, uy = -math.sin(rack.major_yaw), math.cos(rack.major_yaw)  # narrow axis
    to_c = (table_center[0] - rack.center[0]) * ux + (table_center[1] - rack.center[1]) * uy
    sign = 1.0 if to_c >= 0 else -1.0
    cx = rack.center[0] + sign * ux * RACK_CRADLE_INSET
    cy = rack.center[1] + sign * uy * RACK_CRADLE_INSET
    z = rack.top_z - RACK_CRADLE_DEPTH
    return ObjectEstimate(center=(float(cx), float(cy), float(z)), top_z=float(z), bottom_z=float(z), major_yaw=rack.major_yaw,
                          major_extent=0.0, minor_extent=0.0, source=f"rack_cradle {rack.source}")
