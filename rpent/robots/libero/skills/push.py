"""Pushing an object across the table to a spot beside a reference ("push the plate to the front of the stove").

A flat object such as LIBERO's plate (16 cm across, 2 cm tall) cannot be gripped from above;
it is moved instead in short legs, each followed by a new look at the object (``relook``) that
re-aims the rest of the move from where it really is. A plate is dragged: the open gripper comes
down inside its rim, :data:`DRAG_BACK` behind its centre, its fingers spread across the direction
of travel (two contacts 8 cm apart on the rim's far inner wall keep it from turning off a point),
and moves along that direction (:func:`leg_points`). Anything else is pushed from behind, the
fingers coming down beyond its edge on the side away from where it must go.

Side convention for "the front of X": the side of X facing the agentview camera, world +x
(LIBERO's libero_goal "push the plate to the front of the stove": the task's
``stove_front_region`` lies 0.36 m +x of the stove's origin, just past its +x edge). "back" is
-x, "left" -y and "right" +y as the camera sees the table
(:mod:`rpent.robots.libero.skills.spatial`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.fixtures import _result, _runner
from rpent.robots.libero.skills.layout import extent_along
from rpent.robots.libero.skills.motion import Executor

__all__ = ["PUSH_SIDES", "PUSH_GAP", "push_goal", "push_object", "look_pose", "partial_view", "reference_box",
           "push_route", "needs_push", "FLAT_HEIGHT", "PUSH_STRADDLE", "push_gripper"]

#: height (m) under which an object wider than the gripper opens is pushed, not gripped, when it
#: must go beside something (LIBERO's plate: 1.7 cm tall, 10-16 cm across; a bowl's rim grasp
#: needs 2 cm of wall, :func:`~rpent.robots.libero.skills.grasp.needs_rim_grasp`)
FLAT_HEIGHT = 0.03

#: unit xy direction of each side of a reference, for pushing (see the module docstring).
PUSH_SIDES = {"front": (1.0, 0.0), "back": (-1.0, 0.0), "left": (0.0, -1.0), "right": (0.0, 1.0)}
#: free gap (m) between the reference's footprint and the pushed object's at the goal.
PUSH_GAP = 0.04
#: eef height (m) above the object's bottom while pushing (finger pads reach ~1.3 cm lower).
PUSH_HEIGHT = 0.022
#: how far (m) behind the object's estimated edge the fingers come down: a plate's estimate is
#: ~5 cm narrower than the plate (its raised rim hides the far part of the floor: 0.106 m
#: seen of a 0.163 m plate), and fingers set down 3 cm behind that edge landed inside the rim
#: (goal_swap t5: each push then moved the plate 3-4 cm of 8).
PUSH_BACKOFF = 0.055
#: ...but at least this much (m), and no farther back than :data:`PUSH_REACH` from the robot's
#: base: on libero_goal t5 the point 5.5 cm behind the plate lay 0.77 m from the base and the
#: fingers stalled 4 cm short of it, on the plate's rim (the same task passed at 3 cm, 0.75 m).
PUSH_BACKOFF_MIN = 0.03
#: farthest horizontal distance (m) from the robot's base (``grasp.ROBOT_BASE_XY``) at which the
#: fingers come down to push.
PUSH_REACH = 0.755
#: longest push leg (m) before the object is looked at again (a plate pushed in 0.12 m legs
#: needed more than 5 legs for 0.3 m: each leg moved it 3-6 cm).
PUSH_LEG = 0.2
#: half size (m) of a reference's flat top taken as its footprint when the reference has a
#: support surface (a stove: its burner plate; LIBERO's ``flat_stove`` cook region is a 0.15 m
#: square), measured from that surface's centre: a stove's segment estimate covers only its
#: tallest part (6 x 2 cm round the knob on libero_goal t5), its burner lies 17 cm away.
SUPPORT_HALF = 0.075
#: the push ends when the object's centre is this close (m) to its goal.
PUSH_TOL = 0.02
#: eef height (m) above the object's top while moving between legs (at 8 cm the approach to a
#: start point 0.75 m from the robot's base stalled 7 cm short in 100 steps on goal t5; the
#: finger pads reach ~1.3 cm below the eef, so 5 cm clears the object by ~3.5 cm).
PUSH_ABOVE = 0.05
#: before each new look the eef moves this far (m) past the object's edge on the robot's side
#: (world -x) and :data:`PUSH_LOOK_RISE` up: hovering above the plate after a leg the hand hid
#: it from the agentview camera (world +x, looking down toward -x), whose estimate then
#: shrank to a 4 x 1 cm sliver 7 cm off (goal t5, seed 0) and aimed the next legs wrong.
PUSH_LOOK_BACK = 0.12
PUSH_LOOK_RISE = 0.10
#: a new look whose footprint is smaller than this fraction of the first look's (on either
#: axis) is taken as partly hidden: its centre is not used (dead reckoning is kept).
PUSH_PARTIAL = 0.7
#: legs at most, and the push gives up earlier when the last two legs each brought the object
#: less than :data:`PUSH_MIN_PROGRESS` (m) closer to its goal (stuck against something).
PUSH_MAX_LEGS = 7
PUSH_MIN_PROGRESS = 0.01
#: a descent to the push height that stops more than this (m) above it met something standing
#: where the fingers come down (goal_swap t5 seed 1: 3.3-4 cm high, three legs in a row, the
#: plate never moved); the push is then turned by the next of :data:`PUSH_TURNS` (rad, about
#: world z, off the straight line to the goal) and tried again from the new side.
PUSH_BLOCKED = 0.02
#: ...or that ends this far (m, horizontally) from the start point (goal_swap t5 seed 1: a tall
#: neighbour stopped the hand 18 cm short, and the leg then pushed from there; a start at full
#: reach on goal t5 ended up to 3.7 cm off and pushed well).
PUSH_BLOCKED_XY = 0.05
PUSH_TURNS = (0.0, 0.6, -0.6, 1.0, -1.0)
#: the pushed object's footprint is kept this far (m) beyond its estimated radius from the
#: reference's box (:func:`reference_box`) while it is pushed round it: a plate's estimate is
#: ~5 cm narrower than the plate (see :data:`PUSH_BACKOFF`), so its radius is ~2.5 cm short.
#: goal_swap t5 seed 0: pushed straight at its goal, the plate (starting behind-left of the
#: stove's front edge) ran into the stove's front corner and stuck there 0.18 m short.
PUSH_ROUTE_MARGIN = 0.03
#: a detour's corner point counts as reached within this distance (m) (or when the push there
#: stalls): what matters is that the object's footprint clears the reference's box on the next
#: leg, which the margin above already leaves room for.
PUSH_VIA_TOL = 0.03
#: extra legs (beyond :data:`PUSH_MAX_LEGS`) allowed per corner of a detour (goal_swap t5 seed 0:
#: two legs to the corner, then 4-5 on to the goal).
PUSH_VIA_LEGS = 2
#: a push whose object was last seen with its top this much (m) higher than at the start, and
#: that did not satisfy the task, says so: the object rides on something (a plate's top rose
#: 3.3-4.3 cm where it lay tilted on the cream cheese, goal_swap t5 seed 1).
PUSH_RIDE_UP = 0.012
#: an object narrower than this (m) across the push passes between the open fingers, whose pads
#: stand ~8 cm apart (``grasp.GRIPPER_MAX_OPENING``, 0.079 m), and is pushed with them closed
#: instead (libero_goal_task t5 seed 4: a cream cheese 6.5 x 3.4 cm, 7.3 cm across the push,
#: stayed where it was while the open fingers swept past either side of it, twice). LIBERO's
#: plates are seen at least 10 cm across.
PUSH_STRADDLE = 0.09


#: a flat object wider than the gripper opens (:func:`needs_push`: a plate) is moved by the open
#: fingers set down inside its rim this far (m) behind its centre: they meet the rim's inner wall
#: on the far side and drag the plate along. From behind its outer edge the fingers had to reach
#: 0.75 m from the robot's base for a plate at the far side of the table (libero_goal t5), where
#: the arm stalls 3-4 cm short and the fingers came down on the rim or slid over it.
DRAG_BACK = 0.02


def drags(obj: ObjectEstimate) -> bool:
    """True when ``obj`` is moved from inside its rim (:data:`DRAG_BACK`) rather than pushed from
    behind its edge: flat and wider than the gripper opens (:func:`needs_push`)."""
    return needs_push(obj)


def push_gripper(obj: ObjectEstimate, u: Sequence[float]) -> float:
    """Gripper command for pushing ``obj`` along the unit xy direction ``u``: open (the fingers
    spread across the push: two contacts keep a round object from sliding off a point pusher)
    when it is at least :data:`PUSH_STRADDLE` across the push, else closed (one contact at its
    middle)."""
    across = extent_along(obj, (-float(u[1]), float(u[0])))
    return control.GRIPPER_OPEN if across >= PUSH_STRADDLE else control.GRIPPER_CLOSE


def needs_push(obj: ObjectEstimate) -> bool:
    """True for an object that is pushed rather than carried when it must go beside something:
    lower than :data:`FLAT_HEIGHT` and wider across its narrow side than the gripper opens (a
    plate: gripped by its low lip it is carried at all, and the push aims from the reference's
    largest flat surface, :func:`push_goal`, where a spot beside its front-camera footprint fell
    short: libero_goal_lan t5 set the plate down 0.11 m from the stove's knob, outside the
    region in front of it)."""
    from rpent.robots.libero.skills.grasp import GRIPPER_MAX_OPENING

    return obj.height < FLAT_HEIGHT and obj.minor_extent > GRIPPER_MAX_OPENING


def push_goal(ref: ObjectEstimate, obj: ObjectEstimate, side: str) -> tuple[float, float]:
    """World xy (m) for the object's centre beside ``ref`` on ``side`` (:data:`PUSH_SIDES`):
    half the reference's and half the object's extent along that direction plus :data:`PUSH_GAP`
    from the reference's centre; a reference with a ``support`` surface is measured from that
    surface's centre, at least :data:`SUPPORT_HALF` from its edge (libero_goal t5: the plate
    then ends 0.195 m +x of the burner, the middle of LIBERO's stove_front_region).

    Raises:
        ValueError: unknown side.
    """
    if side not in PUSH_SIDES:
        raise ValueError(f"side must be one of {sorted(PUSH_SIDES)}, got {side!r}")
    d = PUSH_SIDES[side]
    if ref.support is not None:  # from its largest flat surface (a stove's burner), see SUPPORT_HALF
        cx, cy, half = ref.support[0], ref.support[1], max(SUPPORT_HALF, extent_along(ref, d) / 2.0)
    else:
        cx, cy, half = ref.center[0], ref.center[1], extent_along(ref, d) / 2.0
    dist = half + extent_along(obj, d) / 2.0 + PUSH_GAP
    return float(cx + d[0] * dist), float(cy + d[1] * dist)


def reference_box(ref: ObjectEstimate) -> tuple[float, float, float, float]:
    """The reference's footprint ``(x_min, x_max, y_min, y_max)`` (world, m) that the pushed
    object must not be pushed into: a square of half size :data:`SUPPORT_HALF` (or half its
    extent along x / y, whichever is larger) about its support surface's centre when it has
    one (a stove: its burner; its segment estimate covers only the knob end), else its
    estimated extent along x and y about its centre (:func:`~rpent.robots.libero.skills.layout.extent_along`)."""
    hx, hy = extent_along(ref, (1.0, 0.0)) / 2.0, extent_along(ref, (0.0, 1.0)) / 2.0
    if ref.support is not None:
        cx, cy = ref.support[0], ref.support[1]
        hx, hy = max(hx, SUPPORT_HALF), max(hy, SUPPORT_HALF)
    else:
        cx, cy = ref.center[0], ref.center[1]
    return float(cx - hx), float(cx + hx), float(cy - hy), float(cy + hy)


def _box_distance(box: tuple[float, float, float, float], x: float, y: float) -> float:
    """Distance (m) from (x, y) to the axis-aligned ``box`` (0 inside)."""
    dx = max(box[0] - x, 0.0, x - box[1])
    dy = max(box[2] - y, 0.0, y - box[3])
    return math.hypot(dx, dy)


def _leg_clear(box, a, b, clearance: float, step: float = 0.01) -> bool:
    """True when every point of the segment ``a`` -> ``b`` (xy, m; sampled every ``step``) is
    more than ``clearance`` m from ``box``."""
    n = max(2, int(math.ceil(math.hypot(b[0] - a[0], b[1] - a[1]) / step)) + 1)
    return all(_box_distance(box, a[0] + (b[0] - a[0]) * i / (n - 1), a[1] + (b[1] - a[1]) * i / (n - 1)) > clearance
               for i in range(n))


def push_route(center: Any, goal: Any, radius: float, box: tuple[float, float, float, float], side: str,
               margin: float = PUSH_ROUTE_MARGIN) -> list[tuple[float, float]]:
    """Waypoints (world xy, m) for the pushed object's centre from ``center`` to ``goal`` that keep
    its footprint (``radius`` + ``margin``) off the reference's ``box`` (:func:`reference_box`).

    The straight push when it stays clear; else an L-shaped detour with one corner: first along
    the side's direction to the goal's level (for "front": to the goal's x, clear of the
    reference's front face, then across to the goal, parallel to that face), or else first
    across, then along; a corner is used only when both its legs stay clear. Where none does
    (the object stands where every route crosses the reference), the straight push is kept.

    Args:
        center, goal: (2,) world xy (m); radius: the object's footprint radius (m).
        box: ``(x_min, x_max, y_min, y_max)``; side: a key of :data:`PUSH_SIDES`.
    Returns:
        ``[goal]`` or ``[corner, goal]`` as float tuples.
    Raises:
        ValueError: unknown side.
    """
    if side not in PUSH_SIDES:
        raise ValueError(f"side must be one of {sorted(PUSH_SIDES)}, got {side!r}")
    c = (float(center[0]), float(center[1]))
    g = (float(goal[0]), float(goal[1]))
    clearance = float(radius) + float(margin)
    if _leg_clear(box, c, g, clearance):
        return [g]
    d = PUSH_SIDES[side]
    along = (g[0] - c[0]) * d[0] + (g[1] - c[1]) * d[1]
    first = (c[0] + d[0] * along, c[1] + d[1] * along)  # along the side's direction first
    second = (g[0] - d[0] * along, g[1] - d[1] * along)  # across first
    for corner in (first, second):
        if _leg_clear(box, c, corner, clearance) and _leg_clear(box, corner, g, clearance):
            return [(float(corner[0]), float(corner[1])), g]
    return [g]


def look_pose(c: Any, radius: float, top_z: float) -> list[float]:
    """Eef position (world, m) from which the agentview camera sees the whole object of centre
    ``c`` (xy) and footprint ``radius``: :data:`PUSH_LOOK_BACK` past its edge on the robot's
    side (-x; the camera looks from +x, so nothing there stands between it and the object) and
    :data:`PUSH_LOOK_RISE` above ``top_z``."""
    return [float(c[0]) - float(radius) - PUSH_LOOK_BACK, float(c[1]), float(top_z) + PUSH_LOOK_RISE]


def partial_view(seen: ObjectEstimate, first: ObjectEstimate, frac: float = PUSH_PARTIAL) -> bool:
    """True when ``seen``'s footprint (major, minor extent) is smaller than ``frac`` of
    ``first``'s on either axis: part of the object was hidden, its centre is biased."""
    a = sorted((seen.major_extent, seen.minor_extent))
    b = sorted((first.major_extent, first.minor_extent))
    return a[0] < frac * b[0] or a[1] < frac * b[1]


def push_object(ex: Executor, obj: ObjectEstimate, goal_xy: tuple[float, float],
                relook: Callable[[tuple[float, float]], ObjectEstimate | None] | None = None,
                max_legs: int = PUSH_MAX_LEGS, via: Sequence[tuple[float, float]] = ()) -> dict:
    """Push ``obj`` until its centre is within :data:`PUSH_TOL` of ``goal_xy`` (world, m), by way
    of the corner points ``via`` (world xy, m; :func:`push_route`) first: each counts as passed
    within :data:`PUSH_VIA_TOL` or when the push toward it stalls (two legs each less than
    :data:`PUSH_MIN_PROGRESS` closer); the legs of all of them count against ``max_legs``.

    Closed loop, each leg: rise to :data:`PUSH_ABOVE` above the object's top, go above the
    leg's start (:func:`leg_points`: inside a plate's rim, :data:`DRAG_BACK` behind its centre;
    else a point :data:`PUSH_BACKOFF` behind its edge, opposite the remaining push), come down (open, or
    closed for an object narrower across the push than the open fingers, :func:`push_gripper`
    of its first look) to
    :data:`PUSH_HEIGHT` above its bottom with the fingers' closing line across the push, push at
    most :data:`PUSH_LEG` m (the object's centre moves that far; the fingers go the backoff
    more), rise, move clear of the camera's view (:func:`look_pose`) and ``relook()`` (a new
    estimate, or None to trust dead reckoning; a partly hidden one, :func:`partial_view`, is
    not trusted either). The next leg is aimed from the object's new position. Where the
    descent stops more than :data:`PUSH_BLOCKED` above the push height or
    :data:`PUSH_BLOCKED_XY` from its start (something stands behind the object), the leg is turned by the next of :data:`PUSH_TURNS` and tried from there. It stops when
    the centre is within tolerance, after ``max_legs`` legs, or when two legs in a row each
    brought it less than :data:`PUSH_MIN_PROGRESS` closer. A push that did not satisfy the task
    and last saw the object more than :data:`PUSH_RIDE_UP` higher than at the start says so.

    Returns:
        ``{"success": env predicate, "done": centre within tolerance, "stage", "phases",
        "reason"?, "center": [x, y] last estimate}``.
    """
    phases: list[dict] = []
    run, _travel = _runner(ex, phases)

    def over() -> bool:
        return control.episode_over(ex.current_state())

    last_top = [float(obj.top_z)]  # the top of the object as last seen (m)

    def result(stage: str, done: bool, reason: str | None = None) -> dict:
        rise = last_top[0] - float(obj.top_z)
        if reason is None and not ex.current_state().get("success") and rise > PUSH_RIDE_UP:
            # (goal_swap t5 seed 1: the plate ended at its goal propped on the cream cheese standing there)
            reason = (f"the object ends {rise:.3f} m higher than it started (tilted on something standing at "
                      "its goal, or on top of it)")
        return {**_result(ex, phases, stage, done, reason), "center": [float(c[0]), float(c[1])]}

    c = np.asarray(obj.center[:2], dtype=np.float64)
    goal = np.asarray(goal_xy, dtype=np.float64)
    radius = max(obj.major_extent, obj.minor_extent) / 2.0
    z_push = float(obj.bottom_z + PUSH_HEIGHT)
    z_above = float(obj.top_z + PUSH_ABOVE)
    inside = drags(obj)
    stuck = 0
    targets = [np.asarray(v, dtype=np.float64) for v in via] + [goal]
    for leg in range(max_legs):
        while len(targets) > 1 and float(np.linalg.norm(targets[0] - c)) <= PUSH_VIA_TOL:
            targets.pop(0)  # corner reached: on toward the next point
            stuck = 0
        aim, tol = targets[0], (PUSH_TOL if len(targets) == 1 else PUSH_VIA_TOL)
        rest = aim - c
        dist = float(np.linalg.norm(rest))
        if dist <= tol:
            return result("push", True)
        u0 = rest / dist

        def turned(off: float) -> np.ndarray:
            return np.array([math.cos(off) * u0[0] - math.sin(off) * u0[1], math.sin(off) * u0[0] + math.cos(off) * u0[1]])

        for k, off in enumerate(PUSH_TURNS):
            # the straight push first; where the fingers cannot come down behind the object (a
            # neighbour stands there) the push is turned, still gaining cos(turn) per metre
            u = turned(off)
            grip = push_gripper(obj, u)
            yaw = math.atan2(float(u[1]), float(u[0]))  # closing line (-sin, cos) across the push
            cur = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
            yaw = float(cur + (yaw - cur + math.pi / 2) % math.pi - math.pi / 2)
            step = min(PUSH_LEG, dist * math.cos(off))
            start, end, backoff = leg_points(c, u, radius, step, inside)
            pos = control.robot_state(ex.current_state())["eef_pos"]
            if float(pos[2]) < z_above - 0.01:
                run("push rise", "move_to", xyz=[float(pos[0]), float(pos[1]), z_above], gripper=grip,
                    max_steps=60)
            for wp in _legs(control.robot_state(ex.current_state())["eef_pos"], [start[0], start[1], z_above]):
                r = run("push approach", "move_to", xyz=wp, gripper=grip, target_yaw=yaw, max_steps=100)
                if "error" in r or over():
                    return result("push approach", False, str(r.get("error", "episode over")))
            run("push align", "rotate_wrist", target_yaw=yaw, gripper=grip, tol=0.03)
            r = run("push descend", "move_to", xyz=[float(start[0]), float(start[1]), z_push],
                    gripper=grip, target_yaw=yaw, step_clip=0.015, tol=0.008, max_steps=80)
            if "error" in r or over():
                return result("push descend", bool(ex.current_state().get("success")), str(r.get("error", "")) or None)
            now = control.robot_state(ex.current_state())["eef_pos"]
            z_now, off_xy = float(now[2]), float(np.hypot(now[0] - start[0], now[1] - start[1]))
            if z_now <= z_push + PUSH_BLOCKED and off_xy <= PUSH_BLOCKED_XY:
                break
            phases.append({"phase": "push start blocked", "leg": leg, "turn": float(off), "eef_z": z_now, "z_push": z_push,
                           "off_start_xy": off_xy})
            pos = control.robot_state(ex.current_state())["eef_pos"]
            run("push rise", "move_to", xyz=[float(pos[0]), float(pos[1]), max(z_above, z_now) + 0.03],
                gripper=grip, max_steps=60)
            if k == len(PUSH_TURNS) - 1:
                return result("push descend", bool(ex.current_state().get("success")),
                              f"the fingers could not come down {'inside' if inside else 'behind'} the object (the last try "
                              f"stopped {z_now - z_push:.3f} m "
                              f"high, {off_xy:.3f} m from its start; {len(PUSH_TURNS)} push directions tried)")
        r = run("push", "move_to", xyz=[float(end[0]), float(end[1]), z_push], gripper=grip,
                target_yaw=yaw, step_clip=0.015, tol=0.008, max_steps=int(30 + (step + max(backoff, PUSH_BACKOFF)) / 0.005))
        if "error" in r or over():
            return result("push", bool(ex.current_state().get("success")), str(r.get("error", "")) or None)
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        moved = float((pos[:2] - start) @ u)  # how far the fingers went along the push
        c = c + u * max(0.0, moved - backoff)  # dead reckoning: the object moved with the fingers
        run("push lift", "move_to", xyz=[float(pos[0]), float(pos[1]), z_above], gripper=grip,
            max_steps=60)
        if over():
            return result("push lift", bool(ex.current_state().get("success")))
        seen, used = None, False
        if relook is not None:
            look = look_pose(c, radius, obj.top_z)
            for wp in _legs(control.robot_state(ex.current_state())["eef_pos"], look):
                run("push look", "move_to", xyz=wp, gripper=grip, max_steps=60)
                if over():
                    return result("push look", bool(ex.current_state().get("success")))
            seen = relook((float(c[0]), float(c[1])))
            if seen is not None:  # (its top even from a partial view: a plate tilted on something looks thin)
                last_top[0] = float(seen.top_z)
            if seen is not None and not partial_view(seen, obj):
                c, used = np.asarray(seen.center[:2], dtype=np.float64), True
        phases.append({"phase": "push relook", "leg": leg, "center": [float(c[0]), float(c[1])],
                       "seen": seen is not None, "used": used,
                       **({"seen_extent": [float(seen.major_extent), float(seen.minor_extent)]} if seen is not None else {})})
        stuck = stuck + 1 if dist - float(np.linalg.norm(aim - c)) < PUSH_MIN_PROGRESS else 0
        if stuck >= 2 and len(targets) > 1:
            phases.append({"phase": "push corner stalled", "leg": leg, "corner": [float(aim[0]), float(aim[1])],
                           "off": float(np.linalg.norm(aim - c))})
            targets.pop(0)  # the push toward the corner stalled short of it: on toward the next point
            stuck = 0
        elif stuck >= 2:
            dist = float(np.linalg.norm(goal - c))
            return result("push", dist <= PUSH_TOL, f"object {dist:.3f} m from its goal: the last two legs "
                          f"moved it less than {PUSH_MIN_PROGRESS} m closer each")
    dist = float(np.linalg.norm(goal - c))
    return result("push", dist <= PUSH_TOL, None if dist <= PUSH_TOL else f"object {dist:.3f} m from its goal after {max_legs} legs")


def leg_points(c: Any, u: Any, radius: float, step: float, inside: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """Where the fingers come down and where they stop for one leg moving the object (centre
    ``c``, footprint ``radius``, world xy, m) ``step`` m along the unit xy direction ``u``, and
    how far they travel before they meet it (``backoff``, m). ``inside`` (:func:`drags`): down
    :data:`DRAG_BACK` behind the centre, inside the rim, meeting the far inner wall after
    ``DRAG_BACK + radius``; else behind the edge by :func:`_backoff`.

    Returns:
        ``(start, end, backoff)``: float64[2] world xy (m), float64[2], float (m).
    """
    c, u = np.asarray(c, dtype=np.float64)[:2], np.asarray(u, dtype=np.float64)[:2]
    if inside:
        return c - u * DRAG_BACK, c + u * (step + radius), DRAG_BACK + radius
    backoff = _backoff(c, u, radius)
    return c - u * (radius + backoff), c + u * step - u * radius, backoff


def _backoff(c: np.ndarray, u: np.ndarray, radius: float) -> float:
    """:data:`PUSH_BACKOFF`, shortened (not below :data:`PUSH_BACKOFF_MIN`) so the point where
    the fingers come down lies within :data:`PUSH_REACH` of the robot's base."""
    from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY

    base = np.asarray(ROBOT_BASE_XY, dtype=np.float64)
    b = PUSH_BACKOFF
    while b > PUSH_BACKOFF_MIN and float(np.linalg.norm(c - u * (radius + b) - base)) > PUSH_REACH:
        b = max(PUSH_BACKOFF_MIN, b - 0.005)
    return b


def _legs(start: Any, goal: Any, max_xy: float = 0.25) -> list[list[float]]:
    from rpent.robots.libero.skills.motion import xy_waypoints

    return [[float(v) for v in wp] for wp in xy_waypoints(start, goal, max_xy)]
