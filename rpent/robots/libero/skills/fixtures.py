"""Articulated fixtures: turn a stove knob, open and close a drawer (motion plans over the executor).

The fixture's parts come from the ``view_fixtures`` tool (joint type, qpos, range, world
joint axis, part origin, handle centre, part box; :meth:`LiberoSim.fixture_parts
<rpent.robots.libero.sim.LiberoSim.fixture_parts>`). Conventions measured in LIBERO:

* ``flat_stove``: knob ``button`` is a hinge about world +z with range [-0.005, 2.1] rad;
  the stove is on at qpos >= 0.5 (``FlatStove.turn_on``). Its fins stand ~6 cm above the
  table. :func:`turn_knob` finds the grip plate by probing descents around the axis, then
  pushes its side along an arc with the closed gripper (no grasp: the plate is thin),
  re-reading the joint between short pushes.
* ``wooden_cabinet`` drawers: slide joints whose open range is negative (open at qpos <=
  -0.14 m), so opening moves the drawer along ``-axis``. :func:`close_drawer` pushes the
  drawer's front face back along ``+axis`` with the closed gripper pointing down, its
  fingers closing across the push;
  :func:`open_drawer` grips the handle bar with the gripper pointing horizontally at the
  drawer and pulls, closed-loop on the joint, to within :data:`DRAWER_OPEN_MARGIN` of its
  range's open end; a pull held back goes on with the closed fingers hooked inside the drawer's
  front from above, a hand that slipped grips the handle again (:func:`pull_verdict`,
  :func:`next_hold`, :func:`hook_plan`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY
from rpent.robots.libero.skills.motion import Executor, xy_waypoints

__all__ = ["KNOB_ON", "turn_knob", "knob_off_goal", "knob_push_verdict", "close_drawer", "drawer_push_plan", "open_drawer",
           "open_direction", "open_amount", "open_goal", "pull_verdict", "next_hold", "hook_plan", "part_by_words"]

#: qpos (rad) at which LIBERO's flat stove counts as on (``default_turnon_ranges`` minimum).
KNOB_ON = 0.5
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

PartsFn = Callable[[], Mapping[str, list]]


def part_by_words(parts: Mapping[str, list], fixture_words: tuple[str, ...], part_words: tuple[str, ...] = (),
                  joint_type: str | None = None) -> tuple[str, dict] | None:
    """Find a fixture part: the fixture whose name contains any of ``fixture_words`` and its
    part whose part/joint name contains all ``part_words`` (e.g. ``("top",)``), of
    ``joint_type`` when given. Returns ``(fixture name, part dict)`` or None."""
    for fx, plist in parts.items():
        if not any(w in fx for w in fixture_words):
            continue
        for p in plist:
            if joint_type is not None and p.get("type") != joint_type:
                continue
            name = f"{p.get('part', '')} {p.get('joint', '')}"
            if all(w in name for w in part_words):
                return fx, p
    return None


def open_direction(part: Mapping[str, Any]) -> np.ndarray:
    """World unit vector (3,) along which a slide part opens: ``-axis`` when its range is
    mostly negative (LIBERO cabinets), else ``+axis``."""
    axis = np.asarray(part["axis"], dtype=np.float64)
    lo, hi = part["range"]
    return -axis if abs(lo) > abs(hi) else axis


def _runner(ex: Executor, phases: list[dict]):
    def run(phase: str, tool: str, **args: Any) -> dict:
        r = ex.run(tool, args)
        phases.append({"phase": phase, "tool": tool,
                       **{k: v for k, v in r.items() if k not in ("_images", "state_after")}})
        return r

    def travel(phase: str, goal, gripper: float, **kw: Any) -> bool:
        pos = control.robot_state(ex.current_state())["eef_pos"]
        for wp in xy_waypoints(pos, goal, 0.25):
            r = run(phase, "move_to", xyz=[float(v) for v in wp], gripper=gripper, **kw)
            if "error" in r or control.episode_over(ex.current_state()):
                return False
        return True

    run.phases = phases  # type: ignore[attr-defined]
    return run, travel


def _result(ex: Executor, phases: list[dict], stage: str, ok: bool, reason: str | None = None) -> dict:
    s = ex.current_state()
    out = {"success": bool(s.get("success")), "done": ok, "stage": stage, "phases": phases}
    if reason:
        out["reason"] = reason
    return out


def turn_knob(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
              on: bool = True, radius: float = 0.042, attempts: int = 3, max_pushes: int = 30) -> dict:
    """Turn a hinge knob about world z by pushing the side of its grip with the closed gripper.

    LIBERO's stove knob (``flat_stove.xml``) has a vertical grip plate ~10 cm long (its ends
    ~5 cm from the axis) and ~2.4 cm thick, ~5 cm tall; the knob body has a 1 kg m^2 inertia
    and 1 N m s/rad damping about the hinge, so at 4 cm it resists like a ~600 kg mass: it
    needs the full force of a saturated action for a second or more, pushed near the grip's
    end. Steps: (1) find the grip: come down at ``radius`` m from the axis at angles 0,
    pi/2, pi/4, 3pi/4 (a half turn suffices, the grip is symmetric; the robot's side first)
    until the descent stops on it; (2) come down pi/2 - 0.1 rad before it (+0.3 rad more per
    further attempt; clockwise of it for
    ``on``, which turns +qpos = counter-clockwise seen from above; the opposite for off) at
    38% of the knob's height (higher, the fingers ride on the grip's top edge), the fingers'
    closing line along the radius (their thin side leads); (3) push along the arc: aim 0.35 rad ahead of the gripper's
    own angle about the axis with 3 cm per-step clips (a saturated action), re-reading the
    joint (``read_part``) after each short push until it is past :data:`KNOB_ON` + 0.15
    (on) or at :func:`knob_off_goal` (off), and counts it on when it reads :data:`KNOB_ON` +
    :data:`KNOB_SETTLED` after the hand has lifted off; a gripper that slid off the grip (3 cm outside the push
    radius), rides on it (:data:`KNOB_RIDE` above the push height) or no longer turns it
    (:func:`knob_push_verdict`) comes down again (the next attempt, from where the knob is
    now). Each descent turns the hand to the radial yaw nearest the current one (nearest the
    wrist's neutral 0 for a knob more than :data:`KNOB_FAR` from the robot base); a turn that
    leaves the gripper more than :data:`KNOB_SWING` from where it should be (the wrist could
    not turn that way: the arm swung 24 cm away on libero_goal_swap t7) is made the other way
    round, a half turn away.

    Args:
        part: the knob part (``view_fixtures``); read_part: returns its current dict.
        radius: push radius (m) about the hinge axis; attempts: grip searches;
        max_pushes: short pushes (<= 8 env steps each) per attempt.
    Returns:
        ``{"success": env predicate, "done": joint reached the goal, "stage", "phases",
        "reason"?, "qpos", "grip_angle"?}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    c = np.asarray(part["pos"], dtype=np.float64)
    top = float(part["max"][2]) if part.get("max") else c[2] + 0.06
    z_push = float(c[2] + 0.38 * (top - c[2]))
    sign = 1.0 if on else -1.0  # hinge about +z: +qpos is counter-clockwise seen from above
    qpos = float(part["qpos"])

    off = knob_off_goal(part)

    def reached(margin: float = 0.15) -> bool:
        return (on and qpos >= KNOB_ON + margin) or (not on and qpos <= off)

    def at(angle: float, z: float) -> list[float]:
        return [float(c[0] + radius * math.cos(angle)), float(c[1] + radius * math.sin(angle)), z]

    def radial_yaw(angle: float, near: float | None = None) -> float:
        """Yaw that puts the fingers' closing line along the radius at ``angle`` (the
        closed fingers are ~4 cm across that line and ~2 cm along the other; robosuite's
        Panda closes along the eef y axis), the one of the two nearest ``near`` (default:
        the current yaw); of two about as near (within :data:`KNOB_YAW_TIE`), the one nearer the
        wrist's neutral 0 (libero_90 t44: from -1.571 rad the turn to -3.142 rather than 0 swung
        the arm 16 cm off and the other turn from there did not come back)."""
        cur = control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"]) if near is None else near
        want = angle - math.pi / 2
        best = cur + (want - cur + math.pi / 2) % math.pi - math.pi / 2
        alt = best - math.pi if best > cur else best + math.pi
        if abs(abs(alt - cur) - abs(best - cur)) < KNOB_YAW_TIE and abs(alt) < abs(best):
            best = alt
        return float(best)

    far = math.hypot(float(c[0]) - ROBOT_BASE_XY[0], float(c[1]) - ROBOT_BASE_XY[1]) > KNOB_FAR

    def swung(goal: list[float]) -> bool:
        """True when the gripper stands more than :data:`KNOB_SWING` (xy) from ``goal``."""
        pos = control.robot_state(ex.current_state())["eef_pos"]
        return math.hypot(float(pos[0]) - goal[0], float(pos[1]) - goal[1]) > KNOB_SWING

    def descend(angle: float, phase: str) -> bool | None:
        """Come down at ``angle``; True when it reached z_push, False when it stopped on the
        grip, None when the episode ended or a move failed."""
        if not travel(phase, at(angle, top + 0.05), control.GRIPPER_CLOSE, max_steps=120):
            return None
        yaw = radial_yaw(angle, near=0.0 if far else None)
        run(phase, "move_to", xyz=at(angle, top + 0.05), gripper=control.GRIPPER_CLOSE, target_yaw=yaw, max_steps=40)
        if swung(at(angle, top + 0.05)):
            # the wrist could not turn that way (goal_swap t7: -3.04 rad from -1.55, the arm swung
            # 24 cm away and came down there): the other radial yaw, a half turn away
            phases.append({"phase": phase, "swung": [float(v) for v in control.robot_state(ex.current_state())["eef_pos"]]})
            if not travel(phase, at(angle, top + 0.05), control.GRIPPER_CLOSE, max_steps=120,
                          target_yaw=yaw - math.copysign(math.pi, yaw)):
                return None
            run(phase, "move_to", xyz=at(angle, top + 0.05), gripper=control.GRIPPER_CLOSE,
                target_yaw=yaw - math.copysign(math.pi, yaw), max_steps=40)
            if swung(at(angle, top + 0.05)):
                return None
        run(phase, "move_to", xyz=at(angle, z_push), gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=50)
        if control.episode_over(ex.current_state()):
            return None
        if float(control.robot_state(ex.current_state())["eef_pos"][2]) <= z_push + 0.012:
            return True
        run(phase, "move_to", xyz=at(angle, top + 0.05), gripper=control.GRIPPER_CLOSE, max_steps=40)
        return False

    if reached():
        return {**_result(ex, phases, "knob check", True), "qpos": qpos}
    grip = None
    for probe in (math.pi, 1.5 * math.pi, 1.25 * math.pi, 1.75 * math.pi):  # the robot's side (-x) first
        free = descend(probe + qpos, "knob find grip")
        if free is None:
            return {**_result(ex, phases, "knob find grip", bool(ex.current_state().get("success"))), "qpos": qpos}
        if not free:
            grip = probe + qpos
            break
        run("knob find grip", "move_to", xyz=at(probe + qpos, top + 0.05), gripper=control.GRIPPER_CLOSE,
            max_steps=40)
    if grip is None:
        return {**_result(ex, phases, "knob find grip", False, "no grip found around the knob axis"), "qpos": qpos}
    q0 = qpos
    for attempt in range(attempts):
        # come down in the middle of the gap between the grip's two arms (it runs through the
        # axis), a little nearer the arm to push: the probes know the grip's angle only to
        # +/-0.39 rad, and 0.9 rad before it (the first version) the fingers landed on its edge
        # and slid off (goal t7, 1 run of 3)
        start = grip + (qpos - q0) - sign * (math.pi / 2 - 0.1 + 0.3 * attempt)
        free = descend(start, "knob descend")
        if free is None:
            return {**_result(ex, phases, "knob descend", bool(ex.current_state().get("success"))), "qpos": qpos}
        if not free:
            continue
        trace, heights = [qpos], []
        for _ in range(max_pushes):
            pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
            phi = math.atan2(pos[1] - c[1], pos[0] - c[0])
            r = run("knob push", "move_to", xyz=at(phi + sign * 0.35, z_push), gripper=control.GRIPPER_CLOSE,
                    step_clip=0.03, max_steps=8, target_yaw=radial_yaw(phi + sign * 0.2))
            if "error" in r or control.episode_over(ex.current_state()):
                break
            now = read_part()
            qpos = float(now["qpos"]) if now else qpos
            trace.append(qpos)
            if reached():
                break
            pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"], dtype=np.float64)
            heights.append(float(pos[2]) - z_push)
            verdict = knob_push_verdict(trace, heights, math.hypot(pos[0] - c[0], pos[1] - c[1]) - radius, sign)
            if verdict != "pushing":
                phases.append({"phase": "knob push", verdict: [float(v) for v in pos],
                               "qpos": [round(v, 4) for v in trace]})
                break  # slid off the grip (outward or onto it) or no longer turning it: come down again
        if control.episode_over(ex.current_state()):
            return {**_result(ex, phases, "knob push", bool(ex.current_state().get("success"))), "qpos": qpos,
                    "grip_angle": grip}
        pos = control.robot_state(ex.current_state())["eef_pos"]
        run("knob retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), top + 0.08], gripper=control.GRIPPER_CLOSE,
            max_steps=60)
        now = read_part()
        qpos = float(now["qpos"]) if now else qpos
        # the lifting fingers drag the knob back a little (libero_10 t2: 0.653 -> 0.643, 0.682 -> 0.638 rad)
        if reached(KNOB_SETTLED):
            return {**_result(ex, phases, "knob retreat", True), "qpos": qpos, "grip_angle": grip}
    return {**_result(ex, phases, "knob push", False, f"knob joint at {qpos:.2f} rad after {attempts} pushes"),
            "qpos": qpos, "grip_angle": grip}


def knob_off_goal(part: Mapping[str, Any]) -> float:
    """The qpos (rad) at or below which a knob counts as off: turned back against the stop at the
    low end of its range, ``KNOB_OFF_FRACTION`` of the way from 0 to that end (LIBERO's flat
    stove, range [-0.005, 2.1] rad, is off only below 0: ``default_turnoff_ranges`` [-0.005, 0],
    so a knob resting at exactly 0.0, as libero_goal_task t7 starts, must still be turned), or
    0.002 rad above the low end of a range that does not reach below 0."""
    lo = float(part["range"][0])
    return KNOB_OFF_FRACTION * lo if lo < 0 else lo + 0.002


#: fraction of the way from 0 to the low end of a knob's range at which it counts as off
#: (:func:`knob_off_goal`).
KNOB_OFF_FRACTION = 0.6
#: margin (rad) past :data:`KNOB_ON` that counts as on once the hand has lifted off (pushes go on to
#: 0.15 past it: lifting, the fingers dragged the knob back by up to 0.044 rad, libero_10 t2).
KNOB_SETTLED = 0.05
#: horizontal distance (m) of the knob's axis from the robot base beyond which a descent turns to
#: the radial yaw nearest the wrist's neutral 0 instead of the one nearest the current yaw (measured:
#: at 0.61 m, libero_goal_swap t7, the turn to -3.04 rad from -1.55 swung the arm away and one
#: to 0.1 rad turned the knob on at seeds 0-2; at 0.33 m and 0.51 m, libero_goal t7 and libero_10
#: t2, the turn to -3.04 rad is made and the one to 0.1 rad met the grip with the hand).
KNOB_FAR = 0.56
#: two radial yaws whose turns from the current yaw differ by less than this (rad) count as a tie
#: (broken toward the wrist's neutral 0).
KNOB_YAW_TIE = 0.05
#: how far (m, xy) from its goal a turn of the wrist may leave the gripper before the turn counts as
#: one the wrist cannot make (the arm swung 24 cm away: libero_goal_swap t7, -3.04 rad from -1.55).
KNOB_SWING = 0.04
#: how far (m) above the push height the gripper may ride before it counts as on top of the grip
#: (pushing the side it stays within ~1 cm; riding the grip's top edge it stood 1.7-2.1 cm higher
#: for 25 pushes and dragged the knob back: libero_goal_swap t7, seed 0; the runs that turned it
#: at seeds 1 and 2 rode 1.5-1.8 cm high for two pushes, then came down on their own).
KNOB_RIDE = 0.014
#: pushes in a row above :data:`KNOB_RIDE` that count as riding.
KNOB_RIDE_PUSHES = 3
#: pushes without a new highest turn (by :data:`KNOB_STALL` rad toward the goal) that count as
#: stalled (seed 1 turned the knob to 0.094 rad, lost it back to -0.005 and passed 0.104 rad
#: 7 pushes later on its way to on).
KNOB_STALL_PUSHES = 10
#: rad by which a push must pass the best turn so far to count as progress.
KNOB_STALL = 0.01


def knob_push_verdict(trace: list[float], heights: list[float], radial_out: float, sign: float = 1.0) -> str:
    """Judge a knob push after each short push (pure logic; unit-tested on joint traces).

    Args:
        trace: knob qpos (rad) before the first push and after each push so far.
        heights: the gripper's height above the push height (m) after each push so far.
        radial_out: the gripper's distance from the hinge axis less the push radius (m), now.
        sign: +1 turning on (+qpos), -1 turning off.
    Returns:
        ``"slipped"`` (3 cm outside the push radius), ``"riding"`` (the last
        :data:`KNOB_RIDE_PUSHES` pushes all ended more than :data:`KNOB_RIDE` above the push
        height: on top of the grip), ``"stalled"`` (none of the last :data:`KNOB_STALL_PUSHES`
        pushes turned it :data:`KNOB_STALL` rad past its best turn before them) or ``"pushing"``.
    """
    if radial_out > 0.03:
        return "slipped"
    if len(heights) >= KNOB_RIDE_PUSHES and all(h > KNOB_RIDE for h in heights[-KNOB_RIDE_PUSHES:]):
        return "riding"
    if len(trace) > KNOB_STALL_PUSHES:
        best_before = max(sign * q for q in trace[:-KNOB_STALL_PUSHES])
        if max(sign * q for q in trace[-KNOB_STALL_PUSHES:]) < best_before + KNOB_STALL:
            return "stalled"
    return "pushing"


def drawer_push_plan(part: Mapping[str, Any]) -> dict:
    """Where :func:`close_drawer` pushes an open drawer (pure geometry, world frame, m, rad).

    Args:
        part: the drawer's slide part (``view_fixtures``: ``axis``, ``range``, ``qpos``,
            ``min``/``max`` world box).
    Returns:
        ``{"d_open": (3,) opening direction, "start": (3,) point 5 cm in front of the
        front, ``DRAWER_PUSH_EDGE`` in from its end nearest the robot base, at the box's
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
    width = float(np.abs((hi - lo) @ across)) / 2.0
    side = 1.0 if float((np.array([ROBOT_BASE_XY[0], ROBOT_BASE_XY[1], 0.0]) - centre) @ across) > 0 else -1.0
    front = front + across * side * max(width - DRAWER_PUSH_EDGE, 0.0)
    z = float(lo[2]) + DRAWER_PUSH_HEIGHT
    start = front + d_open * 0.05  # at the box's mid-height: the push legs come down to z from there
    # the part box's front is the handle's outer face; beside the handle the panel is ~3 cm deeper
    goal = front - d_open * (abs(float(part["qpos"])) + DRAWER_PUSH_PAST)
    goal[2] = z
    # lean the fingertips into the push (pitch about world x, only for a drawer along world y):
    # upright, the hand met the front of the drawer above once the pushed front was 5 cm from shut
    tilt = 0.0 if abs(float(d_open[1])) < 0.9 else (DRAWER_PUSH_TILT if d_open[1] < 0 else -DRAWER_PUSH_TILT)
    return {"d_open": d_open, "start": start, "goal": goal, "z": z, "above_z": float(hi[2]) + 0.08, "tilt": tilt}


def close_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None]) -> dict:
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
    ``DRAWER_CLOSED``; short of it, up to ``DRAWER_EXTRA_PUSHES`` further 3 cm pushes. Measured on libero_10 t3 (``white_cabinet``, bottom drawer with a
    bowl inside). LIBERO counts a cabinet drawer closed only at qpos > 0 (``WoodenCabinet``
    / ``WhiteCabinet`` ``default_close_ranges`` [0, 0.005]).

    Args:
        part: the drawer's slide part (``view_fixtures``; ``min``/``max`` world box, m).
        read_part: returns the part's current dict (or None).
    Returns:
        ``{"success", "done" (joint at qpos >= 0, closed), "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    plan = drawer_push_plan(part)
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
    for _ in range(DRAWER_EXTRA_PUSHES):  # a leg counts as reached 1.2 cm short (seed 2 stopped at -0.002 m)
        now = read_part()
        if now is None or float(now["qpos"]) >= DRAWER_CLOSED or control.episode_over(ex.current_state()):
            break
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
               phase: str, max_legs: int, **pose: Any) -> tuple[str, float]:
    """Pull along ``d_open`` in :data:`DRAWER_PULL_LEG` legs (``move_pose`` with ``pose``),
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
        aim = pos + d_open * DRAWER_PULL_LEG
        r = run(phase, "move_pose", xyz=[float(v) for v in aim], gripper=control.GRIPPER_CLOSE, max_steps=30, **pose)
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


def open_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
                tries: int = DRAWER_PULL_TRIES) -> dict:
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

    Returns:
        ``{"success", "done" (opening >= open_goal), "stage", "phases", "reason"?, "qpos",
        "pulls": [verdict, ...]}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    if part.get("handle") is None:
        return _result(ex, phases, "drawer approach", False, "the drawer has no handle to pull")
    d_open = open_direction(part)
    if abs(d_open[1]) < 0.9:
        return _result(ex, phases, "drawer approach", False,
                       "this drawer does not open along world y; the horizontal grasp turns about world x only")
    goal = open_goal(part)
    pulls: list[str] = []
    hold, stage, now = "handle", "drawer pull", part
    for _ in range(tries):
        now = read_part() or now
        if open_amount(now) >= goal:
            break
        if hold == "hook":
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
        hold = next_hold(verdict, opening)
    now = read_part() or now
    qpos = float(now["qpos"])
    ok = open_amount(now) >= goal or bool(ex.current_state().get("success"))
    reason = None if ok else (f"drawer joint at {qpos:.3f} m after {len(pulls)} pull(s) ({', '.join(pulls)}); "
                              f"the goal was {open_goal(part):.3f} m open")
    return {**_result(ex, phases, stage, ok, reason), "qpos": qpos, "pulls": pulls}
