"""Articulated fixtures: turn a stove knob (motion plans over the executor); drawers are in
:mod:`~rpent.robots.libero.skills.drawers` (re-exported here).

The fixture's parts come from the ``view_fixtures`` tool (joint type, qpos, range, world
joint axis, part origin, handle centre, part box and footprint; :meth:`LiberoSim.fixture_parts
<rpent.robots.libero.sim.LiberoSim.fixture_parts>`). Conventions measured in LIBERO:

* ``flat_stove``: knob ``button`` is a hinge about world +z with range [-0.005, 2.1] rad;
  the stove is on at qpos >= 0.5 (``FlatStove.turn_on``), off below 0. Its fins stand ~6 cm
  above the table. :func:`turn_knob` finds the grip plate by probing descents around the axis,
  then pushes its side along an arc with the closed gripper (no grasp: the plate is thin),
  re-reading the joint between short pushes.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.articulated import PartsFn, open_direction, part_by_words  # noqa: F401 (re-exported)
from rpent.robots.libero.skills.articulated import phase_result as _result
from rpent.robots.libero.skills.articulated import phase_runner as _runner
from rpent.robots.libero.skills.drawers import *  # noqa: F401,F403 (re-exported: the drawer skills)
from rpent.robots.libero.skills.drawers import (  # noqa: F401 (re-exported, not in drawers.__all__)
    DRAWER_CLOSED, DRAWER_EXTRA_PUSHES, DRAWER_HOOK_HEIGHT, DRAWER_OPEN_MARGIN, DRAWER_PULL_LEG, DRAWER_PULL_TRIES,
    DRAWER_PUSH_EDGE, DRAWER_PUSH_HEIGHT, DRAWER_PUSH_PAST, DRAWER_PUSH_TILT, DRAWER_SLIP, DRAWER_STALL)
from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY, wrist_fold
from rpent.robots.libero.skills.motion import Executor

__all__ = ["KNOB_ON", "turn_knob", "knob_off_goal", "knob_push_verdict", "knob_radial_yaw", "knob_descent_yaw",
           "close_drawer", "drawer_push_plan", "open_drawer",
           "open_direction", "open_amount", "open_goal", "handle_reachable", "pull_verdict", "next_hold", "hook_plan",
           "part_by_words"]

#: qpos (rad) at which LIBERO's flat stove counts as on (``default_turnon_ranges`` minimum).
KNOB_ON = 0.5
#: height of the push (fraction of the way from the knob's hinge origin up to the top of its
#: box, ``view_fixtures`` ``pos``/``max``). LIBERO's flat stove knob (``flat_stove.xml``) has a
#: ring of collision boxes around the grip's foot, 1.28 cm above the origin, and the closed
#: fingertips reach ~1.5 cm below the grip site (the eef). At 0.38 of the knob's 5.9 cm (eef 2.3 cm
#: above the origin) the outer finger sat on that ring with 12-17 N, the knob rocked back and
#: forth between the two fingers and crept 0.013 rad per push (libero_10_task t2, seeds 5 and 6:
#: 0.19 and 0.38 rad after 3 attempts); at 0.55 (3.3 cm) the fingertips clear the ring by ~0.5 cm,
#: still overlap the grip by ~4 cm, and the same pushes turn it ~0.2 rad each.
KNOB_PUSH_HEIGHT = 0.55


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
    :data:`KNOB_PUSH_HEIGHT` of the knob's height (lower, the fingertips sit on the ring around
    the grip's foot; much higher, they ride on the grip's top edge), the fingers'
    closing line along the radius (their thin side leads); (3) push along the arc: aim 0.35 rad ahead of the gripper's
    own angle about the axis with 3 cm per-step clips (a saturated action), re-reading the
    joint (``read_part``) after each short push until it is past :data:`KNOB_ON` + 0.15
    (on) or at :func:`knob_off_goal` (off), and counts it on when it reads :data:`KNOB_ON` +
    :data:`KNOB_SETTLED` after the hand has lifted off, then turns the wrist back to the yaw it
    had before the step (:data:`KNOB_UNWIND_TOL`); a gripper that slid off the grip (3 cm outside the push
    radius), rides on it (:data:`KNOB_RIDE` above the push height) or no longer turns it
    (:func:`knob_push_verdict`) comes down again (the next attempt, from where the knob is
    now). Each descent turns the hand to the radial yaw nearest the current one (nearest the
    wrist's neutral 0 for a knob more than :data:`KNOB_FAR` from the robot base), or the other
    one where the wrist's last joint would come near its limit (:func:`knob_descent_yaw`); a turn that
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
    z_push = float(c[2] + KNOB_PUSH_HEIGHT * (top - c[2]))
    sign = 1.0 if on else -1.0  # hinge about +z: +qpos is counter-clockwise seen from above
    qpos = float(part["qpos"])

    off = knob_off_goal(part)

    def reached(margin: float = 0.15) -> bool:
        return (on and qpos >= KNOB_ON + margin) or (not on and qpos <= off)

    def at(angle: float, z: float) -> list[float]:
        return [float(c[0] + radius * math.cos(angle)), float(c[1] + radius * math.sin(angle)), z]

    def current_yaw() -> float:
        return control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"])

    yaw0 = current_yaw()  # the hand's yaw before the step, turned back to once the knob is turned

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
        yaw = knob_descent_yaw(angle, current_yaw(), at(angle, top)[:2], far)
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
                    step_clip=0.03, max_steps=8, target_yaw=knob_radial_yaw(phi + sign * 0.2, current_yaw()))
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
            # the push turned the hand with the grip (by 1.5-1.9 rad) and the pitch drifted with it;
            # turned back above the knob, the arm leaves from its usual pose (libero_10_task t2
            # seed 4: from yaw 1.95, pitch 0.47 the move home levelling the hand drove two wrist
            # joints onto their limits and stalled 7 cm low, in view of the next step's look)
            run("knob retreat", "rotate_wrist", target_yaw=yaw0, gripper=control.GRIPPER_CLOSE, tol=KNOB_UNWIND_TOL,
                max_steps=80)
            return {**_result(ex, phases, "knob retreat", True), "qpos": qpos, "grip_angle": grip}
    return {**_result(ex, phases, "knob push", False, f"knob joint at {qpos:.2f} rad after {attempts} pushes"),
            "qpos": qpos, "grip_angle": grip}


def knob_radial_yaw(angle: float, near: float) -> float:
    """Yaw (rad) that puts the fingers' closing line along the radius at ``angle`` (rad, world,
    about the knob's axis): the closed fingers are ~4 cm across that line and ~2 cm along the
    other (robosuite's Panda closes along the eef y axis). Of the two such yaws (pi apart), the
    one nearest ``near`` (rad); of two about as near (within :data:`KNOB_YAW_TIE`), the one nearer
    the wrist's neutral 0 (libero_90 t44: from -1.571 rad the turn to -3.142 rather than 0 swung
    the arm 16 cm off and the other turn from there did not come back)."""
    want = angle - math.pi / 2
    best = near + (want - near + math.pi / 2) % math.pi - math.pi / 2
    alt = best - math.pi if best > near else best + math.pi
    if abs(abs(alt - near) - abs(best - near)) < KNOB_YAW_TIE and abs(alt) < abs(best):
        best = alt
    return float(best)


def knob_descent_yaw(angle: float, current: float, xy: Sequence[float], far: bool = False) -> float:
    """Yaw (rad) a descent at ``angle`` about the knob's axis turns the hand to, with the eef at
    world ``xy`` (m): the radial yaw (:func:`knob_radial_yaw`) nearest the ``current`` yaw, or
    nearest the wrist's neutral 0 for a ``far`` knob (:data:`KNOB_FAR`), turned by pi when it
    would leave the Panda's last joint within :data:`~rpent.robots.libero.skills.grasp.WRIST_MARGIN`
    of its limit there and the other leaves more
    (:func:`~rpent.robots.libero.skills.grasp.wrist_fold`). On libero_10_task t2 (knob 0.50 m
    from the base) the descent after the grip probe, from -1.56 rad, turned to -3.04 rad (the
    joint at 4.3 rad, past its 2.90 limit): the arm swung 16-19 cm away at seeds 0, 3, 5 and 6,
    and at seed 3 the turn back to 0.10 rad from there swung it 70 cm off and ended the step."""
    return float(wrist_fold(knob_radial_yaw(angle, 0.0 if far else current), [xy]))


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
#: tolerance (rad) of the wrist's turn back to its yaw before the step once the knob is turned.
KNOB_UNWIND_TOL = 0.05
#: two radial yaws whose turns from the current yaw differ by less than this (rad) count as a tie
#: (broken toward the wrist's neutral 0).
KNOB_YAW_TIE = 0.05
#: how far (m, xy) from its goal a turn of the wrist may leave the gripper before the turn counts as
#: one the wrist cannot make (the arm swung 24 cm away: libero_goal_swap t7, -3.04 rad from -1.55).
KNOB_SWING = 0.04
#: how far (m) above the push height the gripper may ride before it counts as on top of the grip
#: (pushing the side it stays within ~1 cm; riding the grip's top edge it stood 1.7-2.1 cm higher
#: for 25 pushes and dragged the knob back: libero_goal_swap t7, seed 0, pushing at 0.38 of the
#: knob's height; the runs that turned it at seeds 1 and 2 rode 1.5-1.8 cm high for two pushes,
#: then came down on their own).
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
