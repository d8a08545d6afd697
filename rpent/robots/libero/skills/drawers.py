"""Cabinet drawers: open and close one (motion plans over the executor, closed-loop on the joint).

The drawer comes from the ``view_fixtures`` tool (slide joint, qpos, range, world axis, handle
centre, part box). LIBERO's ``wooden_cabinet`` / ``white_cabinet`` drawers are slide joints
whose open range is negative (open at qpos <= -0.14 m), so opening moves the drawer along
``-axis``. :func:`close_drawer` pushes the drawer's front face back along ``+axis`` with the
closed gripper pointing down, its fingers closing across the push; :func:`open_drawer` grips
the handle bar with the gripper pointing horizontally at the drawer and pulls, closed-loop on
the joint, to within :data:`DRAWER_OPEN_MARGIN` of its range's open end; a pull held back goes
on with the closed fingers hooked inside the drawer's front from above, a hand that slipped
grips the handle again (:func:`pull_verdict`, :func:`next_hold`, :func:`hook_plan`); a handle too
low to grip is dragged by its bar (:mod:`rpent.robots.libero.skills.drawer_hook`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.articulated import open_direction
from rpent.robots.libero.skills.articulated import phase_result as _result
from rpent.robots.libero.skills.articulated import phase_runner as _runner
from rpent.robots.libero.skills.grasp import HAND_HALF_LENGTH, HAND_HALF_THICKNESS, ROBOT_BASE_XY
from rpent.robots.libero.skills.motion import Executor, xy_waypoints

__all__ = ["DRAWER_TRAVEL", "close_drawer", "drawer_push_plan", "push_across", "final_tilt", "open_drawer", "open_amount", "open_goal",
           "handle_reachable", "pull_verdict", "next_hold", "hook_plan", "DRAWER_FRONT_DEPTH", "DRAWER_HOOK_MIN_OPEN"]

#: fraction of the open range a drawer is pulled to / pushed back from.
DRAWER_TRAVEL = 0.17
#: grip-site height (m) above a drawer's lowest point when pushing it shut (finger pads ~1.3 cm
#: lower, palm ~2.3 cm higher: libero_10 t3's bottom drawer is 7 cm tall, the table 8 mm below it).
DRAWER_PUSH_HEIGHT = 0.022
#: distance (m) of the push point from the end of the drawer front nearest the robot base
#: (pushed at the front's centre, the forearm (``robot0_link5``) met the cabinet's body at
#: qpos -0.066 m with the grip site 4 cm above the table, libero_10 t3, seeds 0 and 1).
DRAWER_PUSH_EDGE = 0.04
#: how far (m) past the closed position of the part box's front (the handle's outer face) a push
#: aims: beside the handle the panel is ~3 cm deeper (the push stops early once the joint reads closed).
DRAWER_PUSH_PAST = 0.05
#: qpos (m) from which a cabinet drawer counts as closed (LIBERO ``default_close_ranges`` [0, 0.005]
#: of ``WoodenCabinet`` / ``WhiteCabinet``; 2 mm of margin).
DRAWER_CLOSED = 0.002
#: further 3 cm pushes from where the eef stands when the legs end short of closed (a leg
#: counts as reached 1.2 cm before its goal: libero_10 t3 seed 2 stopped at qpos -0.002 m).
DRAWER_EXTRA_PUSHES = 2
#: pitch (rad) by which the closed fingertips lean into a drawer push (the hand, upright, met the
#: front of the drawer above once the pushed front was 5 cm from shut: libero_10 t3, seed 0).
DRAWER_PUSH_TILT = 0.6
#: pitch (rad) of the further pushes (:data:`DRAWER_EXTRA_PUSHES`) after the legs ended short. The
#: Panda hand is long along the drawer front, across the handle of the shut drawer above, whose bar
#: stands as far out as the pushed drawer's bar does once shut: leaning ``DRAWER_PUSH_TILT``, the
#: hand's front met that bar 6.4 cm above the grip site with the pushed drawer still at qpos -0.002 m
#: (libero_10_task t3, seed 2). Leaning further puts the hand's front ~2 cm farther back at that height
#: (``0.064 * (tan 0.9 - tan 0.6)`` less the hand's thickness ``HAND_HALF_THICKNESS`` growing by
#: ``1 / cos``), while the fingertips stay where they push.
DRAWER_FINAL_TILT = 0.9
#: free distance (m) kept between the pushing hand's ends (``HAND_HALF_LENGTH`` either side of
#: the push point along the drawer front) and what stands beside the drawer.
DRAWER_HAND_ROOM = 0.01
#: step (m) by which the push point moves along the front, away from its usual end, until the
#: hand's sweep is clear (see :func:`push_across`).
DRAWER_PUSH_SHIFT = 0.01
#: points within this (m) of the drawer's box, sideways, are the drawer's own (its side walls
#: read up to ~1 mm inside the box on libero_10_lan t3, seed 0); farther out, they stand beside it.
DRAWER_SIDE_GAP = 0.004
#: how far (m) the pushing hand's top leans back out of the push (``DRAWER_PUSH_TILT``
#: over the ~0.1 m from the fingertips to the hand's top).
DRAWER_TILT_REACH = 0.06
#: the fingertips reach this far (m) below the grip site; points lower than the push's
#: fingertips less ``DRAWER_HAND_ROOM`` stay under the hand.
DRAWER_FINGER_BELOW = 0.013


def final_tilt(tilt: float) -> float:
    """Pitch (rad) of the further pushes after the push legs ended short: ``DRAWER_FINAL_TILT``
    with the sign of the legs' ``tilt`` (the fingertips lean into the push); 0 stays 0 (a drawer
    not along world y is pushed upright)."""
    return math.copysign(DRAWER_FINAL_TILT, tilt) if tilt else 0.0


def push_across(part: Mapping[str, Any], points: np.ndarray | None) -> float:
    """Where along the drawer front :func:`close_drawer` pushes: the offset (m) from the part box's
    centre along the front (the horizontal unit vector ``(-d_open_y, d_open_x)``).

    Usually ``DRAWER_PUSH_EDGE`` in from the front's end nearest the robot base (pushed at the
    centre, the forearm met the cabinet). The Panda hand, its fingers closing across the push,
    reaches ``HAND_HALF_LENGTH`` either side of the push point along the front, past the end of
    a narrow drawer: what stands beside the drawer there is swept along (libero_10_lan t3, seed 0:
    a wine bottle 4 mm beside the bottom drawer was knocked over and wedged between the hand and the
    cabinet, which stopped the push 0.067 m short). So, with ``points`` (world, m, ``(N, 3)``: the
    agentview clutter cloud of :func:`rpent.robots.libero.skills.clutter.scene_points`), the push
    point moves by ``DRAWER_PUSH_SHIFT`` toward the other end until no point beside the drawer
    (more than ``DRAWER_SIDE_GAP`` past its box sideways; nearer are the drawer's own), in front of
    the cabinet (from 1 cm outside the shut front to where the hand starts, its tilted top
    included) and higher than the fingertips (``DRAWER_FINGER_BELOW`` under the grip site at the push
    height, less ``DRAWER_HAND_ROOM``) lies within ``HAND_HALF_LENGTH + DRAWER_HAND_ROOM`` of
    it along the front; the usual point when none is clear or there are no points.
    """
    d_open = open_direction(part)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    centre = (lo + hi) / 2.0
    half = float(np.abs((hi - lo) @ d_open)) / 2.0
    across = np.array([-float(d_open[1]), float(d_open[0]), 0.0])
    across /= max(float(np.linalg.norm(across)), 1e-9)
    width = float(np.abs((hi - lo) @ across)) / 2.0
    side = 1.0 if float((np.array([ROBOT_BASE_XY[0], ROBOT_BASE_XY[1], 0.0]) - centre) @ across) > 0 else -1.0
    usual = side * max(width - DRAWER_PUSH_EDGE, 0.0)
    p = np.zeros((0, 3)) if points is None else np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        return usual
    rel = p - centre
    along, out = rel[:, :2] @ across[:2], rel[:, :2] @ d_open[:2]
    shut_front = half - abs(open_amount(part))
    low = float(lo[2]) + DRAWER_PUSH_HEIGHT - DRAWER_FINGER_BELOW - DRAWER_HAND_ROOM
    near = ((np.abs(along) > width + DRAWER_SIDE_GAP) & (out > shut_front + 0.01)
            & (out < half + 0.05 + HAND_HALF_THICKNESS + DRAWER_TILT_REACH) & (p[:, 2] > low))
    beside = along[near]
    reach = HAND_HALF_LENGTH + DRAWER_HAND_ROOM
    n = int(math.floor(2.0 * abs(usual) / DRAWER_PUSH_SHIFT + 1e-9))
    for k in range(n + 1):
        a = usual - side * k * DRAWER_PUSH_SHIFT
        if not np.any(np.abs(beside - a) <= reach):
            return float(a)
    return usual


def drawer_push_plan(part: Mapping[str, Any], points: np.ndarray | None = None) -> dict:
    """Where :func:`close_drawer` pushes an open drawer (pure geometry, world frame, m, rad).

    Args:
        part: the drawer's slide part (``view_fixtures``: ``axis``, ``range``, ``qpos``,
            ``min``/``max`` world box).
        points: what stands around it (world, m, ``(N, 3)``; see :func:`push_across`), or None.
    Returns:
        ``{"d_open": (3,) opening direction, "start": (3,) point 5 cm in front of the
        front, at :func:`push_across` along it (usually ``DRAWER_PUSH_EDGE`` in from its end
        nearest the robot base; farther in when that would sweep the hand into what stands
        beside the drawer), at the box's
        mid-height (the eef comes down to ``z`` there; the push legs run from it); "goal":
        (3,) ``DRAWER_PUSH_PAST`` past the closed position of the box's front; "z": grip-site
        height (``DRAWER_PUSH_HEIGHT`` above the box's bottom); "above_z": approach height
        (8 cm above the box); "tilt": pitch about world x leaning the fingertips into the
        push (``DRAWER_PUSH_TILT``, signed; 0 for a drawer not along world y)}``.
    """
    d_open = open_direction(part)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    centre = (lo + hi) / 2.0
    half = float(np.abs((hi - lo) @ d_open)) / 2.0
    front = centre + d_open * half  # world point on the drawer front (the side it opens toward)
    across = np.array([-float(d_open[1]), float(d_open[0]), 0.0])  # along the front, horizontal
    across /= max(float(np.linalg.norm(across)), 1e-9)
    front = front + across * push_across(part, points)
    z = float(lo[2]) + DRAWER_PUSH_HEIGHT
    start = front + d_open * 0.05  # at the box's mid-height: the push legs come down to z from there
    # the part box's front is the handle's outer face; beside the handle the panel is ~3 cm deeper
    goal = front - d_open * (abs(float(part["qpos"])) + DRAWER_PUSH_PAST)
    goal[2] = z
    # lean the fingertips into the push (pitch about world x, only for a drawer along world y):
    # upright, the hand met the front of the drawer above once the pushed front was 5 cm from shut
    tilt = 0.0 if abs(float(d_open[1])) < 0.9 else (DRAWER_PUSH_TILT if d_open[1] < 0 else -DRAWER_PUSH_TILT)
    return {"d_open": d_open, "start": start, "goal": goal, "z": z, "above_z": float(hi[2]) + 0.08, "tilt": tilt}


def close_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
                 points: np.ndarray | None = None) -> dict:
    """Push an open drawer shut with the closed fingertips.

    The gripper comes down pointing down, turned so its fingers close across the push (the
    Panda hand is long along the closing line and reaches ~6 cm past the closed fingers
    along it), ``DRAWER_PUSH_EDGE`` m in from the end of the front nearest the robot base
    (:data:`rpent.robots.libero.skills.grasp.ROBOT_BASE_XY`; pushed at the front's centre,
    the forearm met the cabinet's body), its grip site ``DRAWER_PUSH_HEIGHT`` above the
    drawer's lowest point, 5 cm in front of the front; for a drawer along world y it then
    leans the fingertips ``DRAWER_PUSH_TILT`` rad into the push (upright, the hand met the
    front of the drawer above 5 cm before shut) and pushes along the closing direction in
    5 cm legs to ``DRAWER_PUSH_PAST`` m past the closed position of the part box's front,
    re-reading the joint after each leg (``read_part``) and stopping once it reads
    ``DRAWER_CLOSED``; short of it, the hand leans further (:func:`final_tilt`: its front
    stood on the handle bar of the shut drawer above) and makes up to ``DRAWER_EXTRA_PUSHES``
    further 3 cm pushes. Measured on libero_10 t3 (``white_cabinet``, bottom drawer with a
    bowl inside). LIBERO counts a cabinet drawer closed only at qpos > 0 (``WoodenCabinet``
    / ``WhiteCabinet`` ``default_close_ranges`` [0, 0.005]).

    Args:
        part: the drawer's slide part (``view_fixtures``; ``min``/``max`` world box, m).
        read_part: returns the part's current dict (or None).
        points: what stands around the drawer (world, m, ``(N, 3)``): the push point along the
            front keeps the hand clear of it (:func:`push_across`); None: the usual point.
    Returns:
        ``{"success", "done" (joint at qpos >= 0, closed), "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    plan = drawer_push_plan(part, points)
    d_open, z, tilt = plan["d_open"], plan["z"], plan["tilt"]
    start, goal = plan["start"], plan["goal"]
    # fingers closing across the push: closing line (-sin yaw, cos yaw) perpendicular to d_open
    cur = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])
    want = math.atan2(float(d_open[1]), float(d_open[0]))
    yaw = float(cur + (want - cur + math.pi / 2) % math.pi - math.pi / 2)
    above = [float(start[0]), float(start[1]), plan["above_z"]]
    if not travel("drawer approach", above, control.GRIPPER_CLOSE, max_steps=120):
        return _result(ex, phases, "drawer approach", False, "approach failed")
    run("drawer align", "rotate_wrist", target_yaw=yaw, gripper=control.GRIPPER_CLOSE, tol=0.03)
    run("drawer descend", "move_to", xyz=[float(start[0]), float(start[1]), z], gripper=control.GRIPPER_CLOSE,
        step_clip=0.015, max_steps=100, target_yaw=yaw)
    if tilt:
        run("drawer tilt", "move_pose", xyz=[float(start[0]), float(start[1]), z], target_pitch=tilt, target_yaw=yaw,
            gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=60)
    qpos = float(part["qpos"])
    for wp in xy_waypoints(start, [float(goal[0]), float(goal[1]), z], 0.05):
        r = run("drawer push", "move_pose", xyz=[float(v) for v in wp], target_pitch=tilt, target_yaw=yaw,
                gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=40)
        if "error" in r or control.episode_over(ex.current_state()):
            break
        now = read_part()
        if now is not None and float(now["qpos"]) >= DRAWER_CLOSED:
            break
    lean = final_tilt(tilt)
    for _ in range(DRAWER_EXTRA_PUSHES):  # a leg counts as reached 1.2 cm short
        now = read_part()
        if now is None or float(now["qpos"]) >= DRAWER_CLOSED or control.episode_over(ex.current_state()):
            break
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        if lean != tilt:  # the hand's top leans back off the drawer above before pushing on
            run("drawer lean", "move_pose", xyz=[float(pos[0]), float(pos[1]), z], target_pitch=lean, target_yaw=yaw,
                gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=30)
            tilt = lean
            pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        more = pos - d_open * 0.03
        r = run("drawer push", "move_pose", xyz=[float(more[0]), float(more[1]), z], target_pitch=tilt, target_yaw=yaw,
                gripper=control.GRIPPER_CLOSE, step_clip=0.015, tol=0.004, max_steps=25)
        if "error" in r:
            break
    if not control.episode_over(ex.current_state()):
        pos = control.robot_state(ex.current_state())["eef_pos"]
        back = np.asarray(pos) + d_open * 0.05
        run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2])], target_pitch=tilt,
            target_yaw=yaw, gripper=control.GRIPPER_CLOSE, max_steps=40)
        if tilt:
            run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2]) + 0.08],
                target_pitch=0.0, target_yaw=yaw, gripper=control.GRIPPER_CLOSE, max_steps=80)
    now = read_part()
    qpos = float(now["qpos"]) if now else qpos
    ok = qpos >= 0.0 or bool(ex.current_state().get("success"))
    return {**_result(ex, phases, "drawer push", ok, None if ok else f"drawer joint at {qpos:.3f} m after the push"),
            "qpos": qpos}


#: fraction of a slide joint's range, from its open end, within which a pull counts as done:
#: LIBERO's cabinets ([-0.16, 0.01] m) then read <= -0.1498 m (their ``default_open_ranges``
#: [-0.16, -0.14] count open below -0.14 m; the goal does not use that privileged number).
DRAWER_OPEN_MARGIN = 0.06
#: pulls (a grip on the handle, or a hook inside the drawer front) before giving up.
DRAWER_PULL_TRIES = 3
#: length (m) of one pull leg along the opening direction (the joint is re-read after each).
DRAWER_PULL_LEG = 0.03
#: joint progress (m) below which a pull leg counts as stalled (two in a row end the pull).
DRAWER_STALL = 0.002
#: how much farther (m) than the drawer the hand may move along the opening direction before
#: the hold counts as slipped off the handle.
DRAWER_SLIP = 0.025
#: opening (m) from which the closed fingers fit between the cabinet and the inner face of the
#: drawer's front (a hook pull); less, the handle is gripped again.
DRAWER_HOOK_MIN_OPEN = 0.07
#: depth (m) of a drawer front behind its handle's outer face (handle bar 1.6 cm, standoff 2.1 cm,
#: front panel 0.5 cm, inner wall 0.7 cm: ``wooden_cabinet`` MJCF geoms, measured in the sim).
DRAWER_FRONT_DEPTH = 0.045
#: grip-site height (m) above the drawer part box's bottom for a hook pull (the floor is ~1.1 cm
#: above the box bottom, the closed fingertips ~1.3 cm below the grip site).
DRAWER_HOOK_HEIGHT = 0.04


def open_amount(part: Mapping[str, Any], qpos: float | None = None) -> float:
    """How far (m) a slide part stands open along :func:`open_direction`: ``qpos`` times the
    joint axis' component along it (``qpos`` defaults to the part's own)."""
    axis = np.asarray(part["axis"], dtype=np.float64)
    q = float(part["qpos"] if qpos is None else qpos)
    return q * float(axis @ open_direction(part))


def open_goal(part: Mapping[str, Any], margin: float = DRAWER_OPEN_MARGIN) -> float:
    """The opening (m, as :func:`open_amount`) a pull goes on to: the joint range's open end
    less ``margin`` of the range's span (layout-independent: only the joint's own range)."""
    lo, hi = (float(v) for v in part["range"])
    ends = sorted(open_amount(part, v) for v in (lo, hi))
    return ends[1] - margin * (ends[1] - ends[0])


def pull_verdict(legs: list[tuple[float, float]], goal: float, slip: float = DRAWER_SLIP,
                 stall: float = DRAWER_STALL) -> str:
    """Judge a pull from its legs so far (pure logic; unit-tested on joint traces).

    Args:
        legs: ``[(hand, opening), ...]`` after each leg, the first entry before the pull: the
            hand's position along the opening direction and :func:`open_amount` (both m).
        goal: the opening to reach (:func:`open_goal`).
    Returns:
        ``"open"`` (opening >= goal), ``"slipped"`` (the hand ran more than ``slip`` m ahead
        of the drawer since the first entry: it lost the handle), ``"stalled"`` (the last leg
        opened it less than ``stall`` m: a leg is a full move of up to 30 env steps) or
        ``"moving"``.
    """
    hand0, open0 = legs[0]
    hand, opening = legs[-1]
    if opening >= goal:
        return "open"
    if (hand - hand0) - (opening - open0) > slip:
        return "slipped"
    if len(legs) >= 2 and legs[-1][1] - legs[-2][1] < stall:
        return "stalled"
    return "moving"


def next_hold(verdict: str, opening: float, hook_min: float = DRAWER_HOOK_MIN_OPEN) -> str:
    """How the next pull holds the drawer after one that ended short (``verdict`` of
    :func:`pull_verdict`, ``opening`` m): ``"hook"`` (the closed fingers inside the drawer's
    front, the hand above the drawer) when the hand was stopped while holding (``stalled``:
    something behind it, e.g. a stove under the horizontal hand) and the drawer stands at
    least ``hook_min`` open; else ``"handle"`` (grip the handle again where it is now)."""
    return "hook" if verdict == "stalled" and opening >= hook_min else "handle"


def _pull_legs(run, ex: Executor, read_part, part: Mapping[str, Any], d_open: np.ndarray, goal: float,
               phase: str, max_legs: int, leg: float = DRAWER_PULL_LEG, down: float = 0.0,
               **pose: Any) -> tuple[str, float]:
    """Pull along ``d_open`` in ``leg`` m legs, each aimed ``down`` m lower too (``move_pose`` with ``pose``),
    re-reading the joint after each until :func:`pull_verdict` is not ``moving`` (after
    ``max_legs``, ``stalled``); returns ``(verdict, opening)`` (``"error"`` when a move failed,
    ``"ended"`` when the episode ended, e.g. on the task's success)."""
    pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
    now = read_part() or part
    legs = [(float(pos @ d_open), open_amount(now))]
    verdict = pull_verdict(legs, goal)
    for _ in range(max_legs):
        if verdict != "moving":
            break
        aim = pos + d_open * leg - np.array([0.0, 0.0, down])
        r = run(phase, "move_pose", xyz=[float(v) for v in aim], gripper=control.GRIPPER_CLOSE, **{"max_steps": 30, **pose})
        if "error" in r or control.episode_over(ex.current_state()):
            now = read_part() or now
            return ("ended" if control.episode_over(ex.current_state()) else "error"), open_amount(now)
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
        now = read_part() or now
        legs.append((float(pos @ d_open), open_amount(now)))
        verdict = pull_verdict(legs, goal)
    if verdict == "moving":
        verdict = "stalled"  # out of legs short of the goal: held back as much as a stall
    run.phases.append({"phase": phase, "legs": [[round(h, 4), round(o, 4)] for h, o in legs], "verdict": verdict})
    return verdict, legs[-1][1]


def _handle_pull(run, travel, ex: Executor, part: Mapping[str, Any], read_part, goal: float) -> tuple[str, float]:
    """Grip the handle bar with the gripper pointing horizontally at the drawer (fingers
    closing vertically) and pull; returns :func:`_pull_legs`' ``(verdict, opening)``, after
    letting go and backing off, the hand pointing down again."""
    d_open = open_direction(part)
    pitch = -math.pi / 2 if d_open[1] > 0 else math.pi / 2  # gripper axis pointing along -d_open
    h = np.asarray(part["handle"], dtype=np.float64)
    lo, hi = np.asarray(part["min"]), np.asarray(part["max"])
    front = float(max(lo @ d_open, hi @ d_open))
    bar = h + d_open * (front - 0.008 - float(h @ d_open))
    out = bar + d_open * 0.12
    if not travel("drawer approach", [float(out[0]), float(out[1]), float(h[2]) + 0.06], control.GRIPPER_OPEN,
                  target_yaw=0.0, max_steps=120):
        return "error", open_amount(part)
    r = run("drawer turn", "move_pose", xyz=[float(out[0]), float(out[1]), float(h[2])], target_pitch=pitch,
            target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=150)
    if "error" in r or control.episode_over(ex.current_state()):
        return "error", open_amount(part)
    run("drawer reach", "move_pose", xyz=[float(bar[0]), float(bar[1]), float(h[2])], target_pitch=pitch,
        target_yaw=0.0, gripper=control.GRIPPER_OPEN, step_clip=0.01, max_steps=120)
    run("drawer grip", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=15)
    verdict, opening = _pull_legs(run, ex, read_part, part, d_open, goal, "drawer pull",
                                  max_legs=int(math.ceil(DRAWER_TRAVEL / DRAWER_PULL_LEG)) + 2,
                                  target_pitch=pitch, target_yaw=0.0, step_clip=0.012)
    if not control.episode_over(ex.current_state()):
        run("drawer release", "release")
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"])
        back = pos + d_open * 0.06
        run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2]) + 0.04],
            target_pitch=pitch, target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=60)
        run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2]) + 0.12],
            target_pitch=0.0, target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=150)
    return verdict, opening


def hook_plan(part: Mapping[str, Any]) -> dict:
    """Where a hook pull puts the closed fingertips (pure geometry, world frame, m, rad).

    Args:
        part: the drawer's slide part now (``view_fixtures``: ``min``/``max`` box, ``handle``).
    Returns:
        ``{"d_open": (3,), "point": (3,) grip site inside the drawer, 2 cm behind the inner
        face of its front (:data:`DRAWER_FRONT_DEPTH` behind the box's extreme along the
        opening direction, i.e. the handle's outer face), across the drawer at the handle,
        :data:`DRAWER_HOOK_HEIGHT` above the box's bottom; "above_z": approach height (8 cm
        above the box); "yaw": hand yaw with the fingers' closing line along the front}``.
    """
    d_open = open_direction(part)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    h = np.asarray(part["handle"] if part.get("handle") is not None else (lo + hi) / 2.0, dtype=np.float64)
    front = float(max(lo @ d_open, hi @ d_open))
    point = h + d_open * (front - DRAWER_FRONT_DEPTH - 0.02 - float(h @ d_open))
    point[2] = float(lo[2]) + DRAWER_HOOK_HEIGHT
    # closing line (-sin yaw, cos yaw) across d_open: yaw = atan2(d_open) (mod pi, in [-pi/2, pi/2))
    yaw = math.atan2(float(d_open[1]), float(d_open[0]))
    yaw = (yaw + math.pi / 2) % math.pi - math.pi / 2
    return {"d_open": d_open, "point": point, "above_z": float(hi[2]) + 0.08, "yaw": float(yaw)}


def _hook_pull(run, travel, ex: Executor, part: Mapping[str, Any], read_part, goal: float) -> tuple[str, float]:
    """Come down pointing down with closed fingers inside the open drawer just behind its
    front (:func:`hook_plan`), pull the front along the opening direction, rise out;
    returns ``(verdict, opening)`` (``"blocked"`` when the descent stopped on something)."""
    plan = hook_plan(part)
    p, yaw = plan["point"], plan["yaw"]
    above = [float(p[0]), float(p[1]), plan["above_z"]]
    if not travel("drawer hook approach", above, control.GRIPPER_CLOSE, max_steps=120):
        return "error", open_amount(part)
    run("drawer hook align", "move_pose", xyz=above, target_pitch=0.0, target_yaw=yaw, gripper=control.GRIPPER_CLOSE,
        max_steps=80)
    run("drawer hook descend", "move_pose", xyz=[float(v) for v in p], target_pitch=0.0, target_yaw=yaw,
        gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=80)
    if control.episode_over(ex.current_state()):
        return "error", open_amount(part)
    pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
    if float(pos[2]) > float(p[2]) + 0.02:
        verdict, opening = "blocked", open_amount(read_part() or part)
    else:
        verdict, opening = _pull_legs(run, ex, read_part, part, plan["d_open"], goal, "drawer hook pull",
                                      max_legs=8, target_pitch=0.0, target_yaw=yaw, step_clip=0.015)
    if not control.episode_over(ex.current_state()):
        pos = control.robot_state(ex.current_state())["eef_pos"]
        run("drawer hook retreat", "move_pose", xyz=[float(pos[0]), float(pos[1]), plan["above_z"]], target_pitch=0.0,
            target_yaw=yaw, gripper=control.GRIPPER_CLOSE, max_steps=80)
    return verdict, opening


def handle_reachable(part: Mapping[str, Any], floor_z: float | None) -> bool:
    """Whether the horizontal grip of :func:`open_drawer` fits under a closed drawer's handle: the
    Panda hand, pointing at the drawer with its fingers closing vertically, reaches
    :data:`~rpent.robots.libero.skills.grasp.HAND_HALF_LENGTH` below the grip, which must stay
    above ``floor_z`` (m, what the fixture stands on; None: not known, assumed reachable). Measured:
    libero_goal_task t0's bottom drawer, handle 4.6 cm above the table, stopped the hand 5.7 cm
    above the handle on every pull (and from above, the drawer over it covers its handle); the
    middle drawer's, 11 cm up, is gripped."""
    if floor_z is None or part.get("handle") is None:
        return True
    return float(part["handle"][2]) - HAND_HALF_LENGTH >= floor_z


def open_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
                tries: int = DRAWER_PULL_TRIES, floor_z: float | None = None) -> dict:
    """Pull a drawer open, closed-loop on its joint, until it stands within
    :data:`DRAWER_OPEN_MARGIN` of its range's open end (:func:`open_goal`).

    First pull: grip the handle bar with the gripper pointing horizontally at the drawer. A
    top-down grasp cannot reach a lower drawer's bar (measured: the fingers stop on the bar of
    the drawer above, which sits at the same depth ~7 cm higher). So the open gripper turns to
    point against the opening direction (pitch -/+pi/2 about world x for a drawer opening
    along +/-y) in free space 12 cm in front of the bar, so its fingers close vertically; it
    moves in until the grip site is at the bar (the bar's outer face is the part box's extreme
    along the opening direction; the bar is ~1.6 cm deep, from the cabinet MJCF), closes on
    the bar and pulls in :data:`DRAWER_PULL_LEG` legs, re-reading the joint (``read_part``)
    after each (:func:`pull_verdict`), lets go, backs off and turns back to pointing down.
    A pull that ends short is followed (up to ``tries`` pulls in all) by another
    (:func:`next_hold`): a hand that slipped off the handle grips it again where it is now;
    a hand stopped while holding (libero_goal_swap t0: the vertical Panda hand, 0.21 m along
    its closing line, met the stove behind it at -0.124 m) hooks the closed fingers inside
    the drawer's front from above (:func:`hook_plan`) and pulls on.

    A closed drawer whose handle the hand cannot grip (:func:`handle_reachable` with
    ``floor_z``, m: what the fixture stands on) is dragged open instead by its bar, the closed
    fingertips hooked over the bar's inner top edge from in front
    (:func:`rpent.robots.libero.skills.drawer_hook.front_hook_pull`), up to ``tries`` times.

    Returns:
        ``{"success", "done" (opening >= open_goal), "stage", "phases", "reason"?, "qpos",
        "pulls": [verdict, ...]}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    if part.get("handle") is None:
        return _result(ex, phases, "drawer approach", False, "the drawer has no handle to pull")
    # a handle too low to grip (the hand meets what the cabinet stands on): drag it by its bar
    front = open_amount(part) < DRAWER_HOOK_MIN_OPEN and not handle_reachable(part, floor_z)
    d_open = open_direction(part)
    if abs(d_open[1]) < 0.9:
        return _result(ex, phases, "drawer approach", False,
                       "this drawer does not open along world y; the horizontal grasp turns about world x only")
    goal = open_goal(part)
    pulls: list[str] = []
    hold, stage, now = ("front hook" if front else "handle"), "drawer pull", part
    for _ in range(tries):
        now = read_part() or now
        if open_amount(now) >= goal:
            break
        if hold == "front hook":
            from rpent.robots.libero.skills.drawer_hook import front_hook_pull

            stage = "drawer hook drag"
            verdict, opening = front_hook_pull(run, travel, ex, now, read_part, goal)
        elif hold == "hook":
            stage = "drawer hook pull"
            verdict, opening = _hook_pull(run, travel, ex, now, read_part, goal)
        else:
            stage = "drawer pull"
            verdict, opening = _handle_pull(run, travel, ex, now, read_part, goal)
        pulls.append(verdict)
        if verdict in ("open", "error", "ended") or control.episode_over(ex.current_state()):
            break
        if verdict == "blocked":
            break  # the hook's descent stopped on something: a handle grip would meet it too
        if hold != "front hook":  # a drag that ended short drags again from where the bar is now
            hold = next_hold(verdict, opening)
    now = read_part() or now
    qpos = float(now["qpos"])
    ok = open_amount(now) >= goal or bool(ex.current_state().get("success"))
    reason = None if ok else (f"drawer joint at {qpos:.3f} m after {len(pulls)} pull(s) ({', '.join(pulls)}); "
                              f"the goal was {open_goal(part):.3f} m open")
    return {**_result(ex, phases, stage, ok, reason), "qpos": qpos, "pulls": pulls}
