"""Hinged doors (LIBERO's microwave): close one by pushing it round its hinge, open one by
pulling its handle part of the way and pushing its inner face the rest (motion plans over
the executor).

The door comes from the ``view_fixtures`` tool as a hinge part: ``pos`` (the door body's
origin, on its vertical hinge axis), ``axis`` (world, +/-z), ``range`` (rad), ``qpos``, the
world box of its visible geoms (``min``/``max``, the handle included) and its ``footprint`` (the
corners, seen from above, of the box of those geoms in the door's own frame, which turns with it).
Conventions, measured on
LIBERO's ``microwave`` (``microwave.xml``, :class:`libero...Microwave`):

* the closed end of the range is the one nearer 0 (range [-2.094, 0]: shut at 0, and LIBERO
  counts it closed above -0.005 rad and open below -1.3 rad; these thresholds are not used
  here: a close pushes until the joint reads within :data:`DOOR_CLOSED` of its closed end, an
  open until it stands :data:`DOOR_OPEN_FRACTION` of its range from it);
* the door is a 0.259 m long, 0.024 m thick panel; its handle, a vertical bar 2 cm thick and
  13 cm long, stands 5.4 cm out from the hinge line on the outer face, 2.2 cm in from the free
  edge (:data:`HANDLE_INSET`), with a 3 cm stand-off at each end (the top one 6.5 cm above
  the door's mid-height).

Geometry (pure, unit-tested): :func:`door_line` fits the door's line (hinge -> free edge) to
points of it seen from above; :func:`door_frame` reads that line, its outer side (the handle's)
and its length from the part; :func:`push_start` places the
hand beside a face; :func:`handle_grip` places the grip on the handle bar's top.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.fixtures import _result, _runner
from rpent.robots.libero.skills.grasp import HAND_HALF_THICKNESS
from rpent.robots.libero.skills.motion import Executor

__all__ = ["DOOR_CLOSED", "DOOR_OPEN_FRACTION", "HANDLE_INSET", "door_line", "door_frame", "door_angle", "push_start",
           "handle_grip", "close_door", "open_door"]

#: a door counts as closed within this many rad of its range's closed end.
DOOR_CLOSED = 0.003
#: a door counts as open once it stands this fraction of its range from the closed end (LIBERO's
#: microwave: 0.7 x 2.094 = 1.47 rad).
DOOR_OPEN_FRACTION = 0.7
#: distance (m) of the handle bar's axis from the door's free edge (``microwave.xml``: the bar at
#: 0.2375 m of the 0.259 m door).
HANDLE_INSET = 0.022
#: radius (m) of the handle bar (``microwave.xml`` capsule).
HANDLE_RADIUS = 0.01
#: height (m) of the grip site above the door's mid-height on the handle bar: the top stand-off
#: reaches 0.075 m above it, and the hand's underside is 0.024 m above the grip site.
HANDLE_GRIP_RISE = 0.058
#: fraction of the door's length at which a push presses on it (the handle stands at ~0.92).
PUSH_RADIUS = 0.72
#: free gap (m) between the hand and the door's box where a push comes down.
PUSH_GAP = 0.015
#: angle (rad) ahead of the hand's own angle about the hinge that each short push aims at.
PUSH_LEAD = 0.3
#: pushes in a row without the joint moving :data:`PUSH_STALL` rad toward the goal that end an attempt.
PUSH_STALL_PUSHES = 6
PUSH_STALL = 0.01
#: how far (rad) a pull on the handle goes before the inner face is pushed instead: from there
#: the gap between the door and the cabinet front is wide enough for the hand (at 0.19 m from the
#: hinge: 0.19 sin(0.9) = 0.15 m).
PULL_TO = 0.9
#: smallest opening (rad) from which the inner face is pushed (a narrower gap is pulled again).
PUSH_MIN_OPEN = 0.55
#: the door's points spread at least this many times as much along their principal axis as across
#: it (variance; 4: the corners of a box at least twice as long as wide) for that axis to be the
#: door's line; a squarer spread is read along its centre's direction from the hinge instead.
#: LIBERO's microwave door with its handle: 0.259 x 0.062 m, a ratio of 17.
LINE_SPREAD = 4.0


def door_line(points: Any, hinge: Any) -> float:
    """The direction (rad about world z) of a door's line, hinge -> free edge, fitted to points of
    it seen from above (pure; world frame).

    The door is a thin panel turning about a hinge at one of its ends: its line is the points'
    principal axis (the eigenvector of their covariance with the largest eigenvalue, the
    least-squares line through their centroid), pointed from the hinge toward their centroid. For
    the corners of a box (the door's ``footprint``, or its world ``min``/``max`` box when that is
    all there is) this is the box's long side. When the points spread less than
    :data:`LINE_SPREAD` times as much along that axis as across it (a door seen through a
    near-square box: its world box when it stands diagonally), the line is the direction of the
    centroid from the hinge.

    Args:
        points: ``float[N, 2]`` (or ``[N, 3]``, z ignored) world points of the door (m), N >= 2.
        hinge: the hinge's world (x, y) (m; a longer sequence is cut to its first two values).
    Returns:
        the angle in (-pi, pi].
    """
    p = np.asarray(points, dtype=np.float64).reshape(len(points), -1)[:, :2]
    c = np.asarray(hinge, dtype=np.float64)[:2]
    to_mid = p.mean(axis=0) - c
    vals, vecs = np.linalg.eigh(np.cov((p - p.mean(axis=0)).T, bias=True))
    if vals[1] < LINE_SPREAD * max(float(vals[0]), 0.0) or vals[1] <= 0.0:
        return math.atan2(float(to_mid[1]), float(to_mid[0]))
    u = vecs[:, 1] if float(vecs[:, 1] @ to_mid) >= 0.0 else -vecs[:, 1]
    u = np.where(np.abs(u) < 1e-12, 0.0, u)  # a door along a world axis reads exactly that axis
    return math.atan2(float(u[1]), float(u[0]))


def door_frame(part: Mapping[str, Any]) -> dict:
    """The door's geometry now (pure; world frame, m, rad).

    Args:
        part: the hinge part (``view_fixtures``: ``pos``, ``axis``, ``range``, ``qpos``, ``min``/``max``
            and, where given, ``footprint``).
    Returns:
        ``{"c": (2,) hinge xy, "s": +1 / -1 (hinge axis along +z / -z), "q": qpos, "q_closed",
        "q_open": the range's ends (closed: the one nearer 0), "phi": the door's line now (angle of
        hinge -> free edge about world z), "length": hinge to free edge, "out": +1 / -1 (the side
        of the line the handle stands on: +1 is the left of the line, +90 degrees from it), "out_extent":
        how far the box reaches out that side, "in_extent": the other side, "z_mid", "z_top"}``.
        The line is :func:`door_line` of the ``footprint``'s corners (a box in the door's own frame:
        its long side is the door's line at any angle), or, for a part without one, of the world
        box's corners in the horizontal plane (its long side: a world axis; the door's line only
        when the door stands along one). Length and extents are those of the same corners, measured
        from the hinge along and across the line.

    Raises:
        ValueError: the hinge is not vertical or the part has no box.
    """
    ax = np.asarray(part["axis"], dtype=np.float64)
    if abs(float(ax[2])) < 0.9:
        raise ValueError("the door's hinge is not vertical; the door skill turns doors about world z")
    if not part.get("min") or not part.get("max"):
        raise ValueError("the door part has no box")
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    c = np.asarray(part["pos"], dtype=np.float64)[:2]
    foot = part.get("footprint")
    if foot is not None and len(foot) >= 2:
        corners = np.asarray(foot, dtype=np.float64).reshape(len(foot), -1)[:, :2]
    else:
        corners = np.array([[x, y] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])])
    phi = door_line(corners, c)
    u = np.array([math.cos(phi), math.sin(phi)])
    n = np.array([-u[1], u[0]])
    along, across = (corners - c) @ u, (corners - c) @ n
    out = 1.0 if float(across.max()) >= float(-across.min()) else -1.0
    lo_q, hi_q = (float(v) for v in part["range"])
    q_closed, q_open = (lo_q, hi_q) if abs(lo_q) < abs(hi_q) else (hi_q, lo_q)
    return {"c": c, "s": 1.0 if ax[2] > 0 else -1.0, "q": float(part["qpos"]), "q_closed": q_closed, "q_open": q_open,
            "phi": phi, "length": float(along.max()), "out": out,
            "out_extent": float(max(0.0, (out * across).max())), "in_extent": float(max(0.0, (-out * across).max())),
            "z_mid": float(lo[2] + hi[2]) / 2.0, "z_top": float(hi[2])}


def door_angle(frame: Mapping[str, Any], q: float) -> float:
    """The door's line (rad about world z) at joint position ``q``, from ``frame`` (:func:`door_frame`)."""
    return float(frame["phi"] + frame["s"] * (q - frame["q"]))


def _motion_sign(frame: Mapping[str, Any], goal_q: float, q: float) -> float:
    """+1 when turning the joint from ``q`` to ``goal_q`` turns the door counter-clockwise seen
    from above, -1 clockwise."""
    return float(frame["s"] * (1.0 if goal_q >= q else -1.0))


def push_start(frame: Mapping[str, Any], q: float, goal_q: float, radius: float) -> tuple[np.ndarray, float]:
    """Where the hand (pointing down, its long side along the door) comes down to push the door
    from ``q`` toward ``goal_q``: beside the face the door moves away from, ``radius`` m along the
    door from the hinge, its centre :data:`~rpent.robots.libero.skills.grasp.HAND_HALF_THICKNESS`
    + :data:`PUSH_GAP` past the box on that side. Returns ``(xy (2,), hand angle about the hinge)``."""
    phi = door_angle(frame, q)
    w = _motion_sign(frame, goal_q, q)
    u = np.array([math.cos(phi), math.sin(phi)])
    t = w * np.array([-u[1], u[0]])  # the door's free edge moves along t
    side = frame["out"] * float(t @ np.array([-u[1], u[0]]))  # +1: t points to the handle's side
    extent = frame["in_extent"] if side > 0 else frame["out_extent"]  # the face opposite to t
    p = frame["c"] + radius * u - t * (extent + HAND_HALF_THICKNESS + PUSH_GAP)
    return p, math.atan2(float(p[1] - frame["c"][1]), float(p[0] - frame["c"][0]))


def handle_grip(frame: Mapping[str, Any]) -> tuple[np.ndarray, float]:
    """Where a top-down grasp takes the handle bar (its top, below the stand-off): ``(xyz (3,),
    yaw)``, the fingers closing along the door's line (a bar 2 cm thick between them) and the
    grip :data:`HANDLE_RADIUS` / 2 outward of the bar's axis (the hand clear of the door's top edge)."""
    phi = frame["phi"]
    u = np.array([math.cos(phi), math.sin(phi)])
    n = frame["out"] * np.array([-u[1], u[0]])
    bar = frame["c"] + u * (frame["length"] - HANDLE_INSET) + n * (frame["out_extent"] - HANDLE_RADIUS * 0.5)
    yaw = phi - math.pi / 2  # closing line (-sin yaw, cos yaw) along u
    return np.array([bar[0], bar[1], frame["z_mid"] + HANDLE_GRIP_RISE]), float(yaw)


def _fold_near(yaw: float, current: float) -> float:
    """``yaw`` or ``yaw`` +/- pi (the gripper is symmetric), whichever is nearest ``current``."""
    return float(current + (yaw - current + math.pi / 2) % math.pi - math.pi / 2)


def _reached(q: float, goal_q: float, start_q: float, tol: float) -> bool:
    return (goal_q - q) * (1.0 if goal_q >= start_q else -1.0) <= tol


def _arc_push(run, travel, ex: Executor, frame: Mapping[str, Any], read_part, goal_q: float, tol: float,
              phase: str, attempts: int = 2, max_pushes: int = 40) -> tuple[bool, float]:
    """Push the door toward ``goal_q`` round its hinge with the closed gripper: come down beside
    the face it moves away from (:func:`push_start`), then short pushes aimed :data:`PUSH_LEAD`
    rad ahead along the hand's own circle about the hinge, the hand's long side kept along the
    radius, re-reading the joint after each; a push that stalls comes down again from where the
    door is now. ``frame`` is the door as first read (:func:`door_frame`; its handle side and
    extents hold at any angle, its line now follows from the joint). Returns ``(reached, qpos)``."""
    q = frame["q"]
    for attempt in range(attempts):
        now = read_part()
        q = float(now["qpos"]) if now else q
        if _reached(q, goal_q, q, tol):
            return True, q
        w = _motion_sign(frame, goal_q, q)
        radius = PUSH_RADIUS * frame["length"]
        xy, ang = push_start(frame, q, goal_q, radius)
        z_push = frame["z_mid"] - 0.01
        above = [float(xy[0]), float(xy[1]), frame["z_top"] + 0.05]
        cur_yaw = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
        yaw = _fold_near(ang - math.pi / 2, cur_yaw)
        if not travel(phase, above, control.GRIPPER_CLOSE, max_steps=120, target_yaw=yaw):
            return False, q
        run(phase, "move_to", xyz=above, gripper=control.GRIPPER_CLOSE, target_yaw=yaw, max_steps=40)
        run(phase, "move_to", xyz=[above[0], above[1], z_push], gripper=control.GRIPPER_CLOSE, step_clip=0.015,
            max_steps=60)
        if control.episode_over(ex.current_state()):
            return bool(ex.current_state().get("success")), q
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        if float(pos[2]) > z_push + 0.03:  # came down on the door or the cabinet: not beside the face
            run.phases.append({"phase": phase, "blocked_descent": [float(v) for v in pos]})
            run(phase, "move_to", xyz=above, gripper=control.GRIPPER_CLOSE, max_steps=40)
            continue
        start_q, best, since = q, q, 0
        for _ in range(max_pushes):
            pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
            d = pos[:2] - frame["c"]
            rh, th = float(np.hypot(*d)), math.atan2(float(d[1]), float(d[0]))
            aim = frame["c"] + rh * np.array([math.cos(th + w * PUSH_LEAD), math.sin(th + w * PUSH_LEAD)])
            cur_yaw = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
            r = run(phase, "move_to", xyz=[float(aim[0]), float(aim[1]), z_push], gripper=control.GRIPPER_CLOSE,
                    step_clip=0.02, max_steps=10, target_yaw=_fold_near(th + w * PUSH_LEAD / 2 - math.pi / 2, cur_yaw))
            if "error" in r or control.episode_over(ex.current_state()):
                break
            now = read_part()
            q = float(now["qpos"]) if now else q
            if _reached(q, goal_q, start_q, tol):
                break
            if (q - best) * (1.0 if goal_q >= start_q else -1.0) > PUSH_STALL:
                best, since = q, 0
            else:
                since += 1
                if since >= PUSH_STALL_PUSHES:
                    run.phases.append({"phase": phase, "stalled": round(q, 4)})
                    break
        if control.episode_over(ex.current_state()):
            return bool(ex.current_state().get("success")) or _reached(q, goal_q, start_q, tol), q
        # back off the door (against the push) and up
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        d = pos[:2] - frame["c"]
        th = math.atan2(float(d[1]), float(d[0]))
        back = pos[:2] - 0.05 * w * np.array([-math.sin(th), math.cos(th)])
        run(phase + " retreat", "move_to", xyz=[float(back[0]), float(back[1]), float(pos[2])],
            gripper=control.GRIPPER_CLOSE, max_steps=30)
        run(phase + " retreat", "move_to", xyz=[float(back[0]), float(back[1]), frame["z_top"] + 0.06],
            gripper=control.GRIPPER_CLOSE, max_steps=60)
        now = read_part()
        q = float(now["qpos"]) if now else q
        if _reached(q, goal_q, start_q, tol):
            return True, q
    return _reached(q, goal_q, frame["q"], tol), q


def close_door(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None]) -> dict:
    """Push an open door shut round its hinge (:func:`_arc_push` toward the closed end of its
    range, until the joint reads within :data:`DOOR_CLOSED` of it).

    Returns:
        ``{"success": env predicate, "done", "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    try:
        frame = door_frame(part)
    except ValueError as exc:
        return _result(ex, phases, "door check", False, str(exc))
    goal = frame["q_closed"]
    ok, q = _arc_push(run, travel, ex, frame, read_part, goal, DOOR_CLOSED, "door push")
    ok = ok or bool(ex.current_state().get("success"))
    return {**_result(ex, phases, "door push", ok, None if ok else f"door joint at {q:.3f} rad after the pushes "
                      f"(closed at {goal:.3f})"), "qpos": q}


def _pull_handle(run, travel, ex: Executor, frame0: Mapping[str, Any], read_part, goal_q: float) -> float:
    """Grip the handle bar's top from above and pull it round the hinge toward ``goal_q`` in
    0.15 rad legs (the wrist turning with the door), re-reading the joint; let go and rise.
    ``frame0``: the door as first read (:func:`door_frame`). Returns the joint position reached."""
    now = read_part()
    q0 = float(now["qpos"]) if now else frame0["q"]
    frame = {**frame0, "phi": door_angle(frame0, q0), "q": q0}
    w = _motion_sign(frame, goal_q, q0)
    grip, yaw = handle_grip(frame)
    cur_yaw = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
    yaw = _fold_near(yaw, cur_yaw)
    above = [float(grip[0]), float(grip[1]), frame["z_top"] + 0.06]
    if not travel("door handle approach", above, control.GRIPPER_OPEN, max_steps=120, target_yaw=yaw):
        return q0
    run("door handle approach", "move_to", xyz=above, gripper=control.GRIPPER_OPEN, target_yaw=yaw, max_steps=60)
    run("door handle descend", "move_to", xyz=[float(v) for v in grip], gripper=control.GRIPPER_OPEN, step_clip=0.012,
        max_steps=60, target_yaw=yaw)
    run("door handle grip", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=15)
    c = frame["c"]
    d = grip[:2] - c
    rho, th0 = float(np.hypot(*d)), math.atan2(float(d[1]), float(d[0]))
    q = q0
    for k in range(1, 16):
        th = th0 + w * 0.15 * k
        aim = c + rho * np.array([math.cos(th), math.sin(th)])
        r = run("door handle pull", "move_to", xyz=[float(aim[0]), float(aim[1]), float(grip[2])],
                gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=25, target_yaw=yaw + w * 0.15 * k)
        if "error" in r or control.episode_over(ex.current_state()):
            break
        now = read_part()
        q = float(now["qpos"]) if now else q
        turned = abs(q - q0)
        if _reached(q, goal_q, q0, 0.0):
            break
        if 0.15 * k - turned > 0.35:  # the hand ran ahead of the door: it lost the handle
            run.phases.append({"phase": "door handle pull", "slipped": round(q, 4)})
            break
    if not control.episode_over(ex.current_state()):
        run("door handle release", "release")
        pos = control.robot_state(ex.current_state())["eef_pos"]
        run("door handle retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), frame["z_top"] + 0.06],
            gripper=control.GRIPPER_OPEN, max_steps=60)
    now = read_part()
    return float(now["qpos"]) if now else q


def open_door(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
              pulls: int = 2) -> dict:
    """Open a closed door: pull its handle (:func:`handle_grip`) round the hinge to
    :data:`PULL_TO` rad (up to ``pulls`` tries while it stands less than :data:`PUSH_MIN_OPEN`
    open), then push its inner face (:func:`_arc_push`) until it stands
    :data:`DOOR_OPEN_FRACTION` of its range open. The pull alone would carry the hand round to the
    far side of the hinge, out of the arm's easy reach (LIBERO's microwave faces the table's
    centre from one side: its hinge is 0.83 m from the robot's base).

    Returns:
        ``{"success", "done", "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    try:
        frame = door_frame(part)
    except ValueError as exc:
        return _result(ex, phases, "door check", False, str(exc))
    qc, qo = frame["q_closed"], frame["q_open"]
    goal = qc + DOOR_OPEN_FRACTION * (qo - qc)
    sign = 1.0 if qo >= qc else -1.0
    q = frame["q"]
    if _reached(q, goal, qc, 0.0):
        return {**_result(ex, phases, "door check", True), "qpos": q}
    for _ in range(pulls):
        if (q - qc) * sign >= PUSH_MIN_OPEN or control.episode_over(ex.current_state()):
            break
        q = _pull_handle(run, travel, ex, frame, read_part, qc + sign * PULL_TO)
    stage = "door handle pull"
    if (q - qc) * sign >= PUSH_MIN_OPEN and not control.episode_over(ex.current_state()) \
            and not _reached(q, goal, qc, 0.0):
        stage = "door push"
        _, q = _arc_push(run, travel, ex, frame, read_part, goal, 0.0, "door push")
    ok = _reached(q, goal, qc, 0.0) or bool(ex.current_state().get("success"))
    reason = None if ok else f"door joint at {q:.3f} rad (the goal was {goal:.3f}, closed at {qc:.3f})"
    return {**_result(ex, phases, stage, ok, reason), "qpos": q}
