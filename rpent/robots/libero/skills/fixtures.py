"""Articulated fixtures: turn a stove knob, open and close a drawer (motion plans over the executor).

The fixture's parts come from the ``view_fixtures`` tool (joint type, qpos, range, world
joint axis, part origin, handle centre, part box; :meth:`LiberoSim.fixture_parts
<rpent.robots.libero.sim.LiberoSim.fixture_parts>`). Conventions measured in LIBERO:

* ``flat_stove``: knob ``button`` is a hinge about world +z with range [-0.005, 2.1] rad;
  the stove is on at qpos >= 0.5 (``FlatStove.turn_on``). Its fins stand ~6 cm above the
  table. :func:`turn_knob` pushes a fin along an arc around the knob axis with the closed
  gripper (no grasp: the fins are thin and their orientation is unknown), checking the joint
  after each sweep.
* ``wooden_cabinet`` drawers: slide joints whose open range is negative (open at qpos <=
  -0.14 m), so opening moves the drawer along ``-axis``. :func:`close_drawer` pushes the
  drawer's front face back along ``+axis`` with the closed gripper pointing down;
  :func:`open_drawer` grips the handle bar with the gripper pointing horizontally at the
  drawer and pulls.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.motion import Executor, xy_waypoints

__all__ = ["KNOB_ON", "turn_knob", "close_drawer", "open_drawer", "open_direction", "part_by_words"]

#: qpos (rad) at which LIBERO's flat stove counts as on (``default_turnon_ranges`` minimum).
KNOB_ON = 0.5
#: fraction of the open range a drawer is pulled to / pushed back from.
DRAWER_TRAVEL = 0.17

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

    return run, travel


def _result(ex: Executor, phases: list[dict], stage: str, ok: bool, reason: str | None = None) -> dict:
    s = ex.current_state()
    out = {"success": bool(s.get("success")), "done": ok, "stage": stage, "phases": phases}
    if reason:
        out["reason"] = reason
    return out


def turn_knob(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None],
              on: bool = True, radius: float = 0.035, sweep: float = 1.6, attempts: int = 3) -> dict:
    """Turn a hinge knob about world z by pushing the end of its grip with the closed gripper.

    LIBERO's stove knob (``flat_stove.xml``) has a vertical grip plate ~7 cm long and ~2.4 cm
    thick, its top ~5 cm above the stove. The grip's ends may point along world x or y, so
    the sides are tried in turn (robot's side first): rise above the knob, come down at
    ``radius`` m from the axis 0.45 rad before that end (angle + qpos); when the descent
    stops on the grip, go to the next side; else sweep
    ``sweep`` rad along the arc (counter-clockwise seen from above = +qpos for ``on``,
    clockwise for off) at 60% of the knob's height, rise, and re-read the joint
    (``read_part``); stops once it is past :data:`KNOB_ON` + 0.05 (on) or below 0.005 (off).

    Args:
        part: the knob part (``view_fixtures``); read_part: returns its current dict.
    Returns:
        ``{"success": env predicate, "done": joint reached the goal, "stage", "phases",
        "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    c = np.asarray(part["pos"], dtype=np.float64)
    top = float(part["max"][2]) if part.get("max") else c[2] + 0.06
    z_push = float(c[2] + 0.6 * (top - c[2]))
    sign = 1.0 if on else -1.0  # hinge about +z: +qpos is counter-clockwise seen from above
    qpos = float(part["qpos"])
    tried = 0
    for end in (math.pi, math.pi / 2, 1.5 * math.pi, 0.0):  # where a grip end may be; robot's side first
        if tried >= attempts:
            break
        start = end + qpos - sign * 0.45
        angles = [start + sign * sweep * i / 8 for i in range(9)]
        pts = [c + np.array([radius * math.cos(a), radius * math.sin(a), 0.0]) for a in angles]
        above = [float(pts[0][0]), float(pts[0][1]), top + 0.06]
        if not travel("knob approach", above, control.GRIPPER_CLOSE, max_steps=120):
            return {**_result(ex, phases, "knob approach", False, "approach failed"), "qpos": qpos}
        r = run("knob descend", "move_to", xyz=[float(pts[0][0]), float(pts[0][1]), z_push],
                gripper=control.GRIPPER_CLOSE, step_clip=0.015, max_steps=50)
        if control.episode_over(ex.current_state()):
            return {**_result(ex, phases, "knob descend", True), "qpos": qpos}
        if float(control.robot_state(ex.current_state())["eef_pos"][2]) > z_push + 0.012:
            continue  # landed on the grip: try the next side
        tried += 1
        for p in pts[1:]:
            r = run("knob push", "move_to", xyz=[float(p[0]), float(p[1]), z_push], gripper=control.GRIPPER_CLOSE,
                    step_clip=0.01, max_steps=30)
            if "error" in r or control.episode_over(ex.current_state()):
                break
        if control.episode_over(ex.current_state()):
            return {**_result(ex, phases, "knob push", True), "qpos": qpos}
        pos = control.robot_state(ex.current_state())["eef_pos"]
        run("knob retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), top + 0.08], gripper=control.GRIPPER_CLOSE,
            max_steps=60)
        now = read_part()
        qpos = float(now["qpos"]) if now else qpos
        if (on and qpos >= KNOB_ON + 0.05) or (not on and qpos <= 0.005):
            return {**_result(ex, phases, "knob retreat", True), "qpos": qpos}
    return {**_result(ex, phases, "knob push", False, f"knob joint at {qpos:.2f} rad after {tried} sweeps"),
            "qpos": qpos}


def close_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None]) -> dict:
    """Push an open drawer shut: closed gripper pointing down, fingertips at the middle of the
    drawer front's height, 4 cm in front of the front, pushed along the closing direction
    until ``DRAWER_TRAVEL`` m past the closed position's front.

    Returns:
        ``{"success", "done" (joint within 1 cm of closed), "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    d_open = open_direction(part)
    lo, hi = np.asarray(part["min"]), np.asarray(part["max"])
    centre = (lo + hi) / 2.0
    half = float(np.abs((hi - lo) @ d_open)) / 2.0
    front = centre + d_open * half  # world point on the drawer front (the side it opens toward)
    z = float(lo[2] + 0.5 * (hi[2] - lo[2]))
    z = max(z, float(lo[2]) + 0.02)
    start = front + d_open * 0.05
    above = [float(start[0]), float(start[1]), float(hi[2]) + 0.08]
    if not travel("drawer approach", above, control.GRIPPER_CLOSE, max_steps=120):
        return _result(ex, phases, "drawer approach", False, "approach failed")
    run("drawer descend", "move_to", xyz=[float(start[0]), float(start[1]), z], gripper=control.GRIPPER_CLOSE,
        step_clip=0.015, max_steps=100)
    qpos = float(part["qpos"])
    goal = front - d_open * (abs(qpos) + 0.02)
    for wp in xy_waypoints(start, [float(goal[0]), float(goal[1]), z], 0.05):
        r = run("drawer push", "move_to", xyz=[float(v) for v in wp], gripper=control.GRIPPER_CLOSE, step_clip=0.015,
                max_steps=40)
        if "error" in r or control.episode_over(ex.current_state()):
            break
    if not control.episode_over(ex.current_state()):
        pos = control.robot_state(ex.current_state())["eef_pos"]
        back = np.asarray(pos) + d_open * 0.05
        run("drawer retreat", "move_to", xyz=[float(back[0]), float(back[1]), float(pos[2])], gripper=control.GRIPPER_CLOSE,
            max_steps=40)
    now = read_part()
    qpos = float(now["qpos"]) if now else qpos
    ok = abs(qpos) <= 0.01 or bool(ex.current_state().get("success"))
    return {**_result(ex, phases, "drawer push", ok, None if ok else f"drawer joint at {qpos:.3f} m after the push"),
            "qpos": qpos}


def open_drawer(ex: Executor, part: Mapping[str, Any], read_part: Callable[[], Mapping[str, Any] | None]) -> dict:
    """Pull a drawer open by its handle bar, the gripper pointing horizontally at the drawer.

    A top-down grasp cannot reach a lower drawer's bar (measured: the fingers stop on the
    bar of the drawer above, which sits at the same depth ~7 cm higher). So the open gripper
    turns to point against the opening direction (pitch -/+pi/2 about world x for a drawer
    opening along +/-y) in free space 12 cm in front of the bar, so its fingers close
    vertically; it moves in until the grip site is at the bar (the bar's outer face is the
    part box's extreme along the opening direction; the bar is ~1.6 cm deep, from the
    cabinet MJCF), closes on the bar, pulls ``DRAWER_TRAVEL`` m along the opening direction,
    lets go, backs off and turns back to pointing down.

    Returns:
        ``{"success", "done" (joint past -0.12 m, i.e. open), "stage", "phases", "reason"?, "qpos"}``.
    """
    phases: list[dict] = []
    run, travel = _runner(ex, phases)
    if part.get("handle") is None:
        return _result(ex, phases, "drawer approach", False, "the drawer has no handle to pull")
    d_open = open_direction(part)
    if abs(d_open[1]) < 0.9:
        return _result(ex, phases, "drawer approach", False,
                       "this drawer does not open along world y; the horizontal grasp turns about world x only")
    pitch = -math.pi / 2 if d_open[1] > 0 else math.pi / 2  # gripper axis pointing along -d_open
    h = np.asarray(part["handle"], dtype=np.float64)
    lo, hi = np.asarray(part["min"]), np.asarray(part["max"])
    front = float(max(lo @ d_open, hi @ d_open))
    bar = h + d_open * (front - 0.008 - float(h @ d_open))
    out = bar + d_open * 0.12
    if not travel("drawer approach", [float(out[0]), float(out[1]), float(h[2]) + 0.06], control.GRIPPER_OPEN,
                  target_yaw=0.0, max_steps=120):
        return _result(ex, phases, "drawer approach", False, "approach failed")
    r = run("drawer turn", "move_pose", xyz=[float(out[0]), float(out[1]), float(h[2])], target_pitch=pitch,
            target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=150)
    if "error" in r or control.episode_over(ex.current_state()):
        return _result(ex, phases, "drawer turn", False, str(r.get("error", "episode over")))
    r = run("drawer reach", "move_pose", xyz=[float(bar[0]), float(bar[1]), float(h[2])], target_pitch=pitch,
            target_yaw=0.0, gripper=control.GRIPPER_OPEN, step_clip=0.01, max_steps=120)
    run("drawer grip", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=15)
    pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"])
    goal = pos + d_open * DRAWER_TRAVEL
    for wp in xy_waypoints(pos, goal, 0.04):
        r = run("drawer pull", "move_pose", xyz=[float(v) for v in wp], target_pitch=pitch, target_yaw=0.0,
                gripper=control.GRIPPER_CLOSE, step_clip=0.012, max_steps=40)
        if "error" in r or control.episode_over(ex.current_state()):
            break
    if not control.episode_over(ex.current_state()):
        run("drawer release", "release")
        pos = np.asarray(control.robot_state(ex.current_state())["eef_pos"])
        back = pos + d_open * 0.06
        run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2]) + 0.04], target_pitch=pitch,
            target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=60)
        run("drawer retreat", "move_pose", xyz=[float(back[0]), float(back[1]), float(pos[2]) + 0.12], target_pitch=0.0,
            target_yaw=0.0, gripper=control.GRIPPER_OPEN, max_steps=150)
    now = read_part()
    qpos = float(now["qpos"]) if now else float(part["qpos"])
    ok = qpos <= -0.12 or bool(ex.current_state().get("success"))
    return {**_result(ex, phases, "drawer pull", ok, None if ok else f"drawer joint at {qpos:.3f} m after the pull"),
            "qpos": qpos}
