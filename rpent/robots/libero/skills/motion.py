"""Motion plans over the executor interface: waypoints, the executor protocol, pick-and-place.

Moved out of :mod:`rpent.robots.libero.strategy`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.estimate import PARTIAL_VIEW, ObjectEstimate, refine_estimate
from rpent.robots.libero.skills.grasp import (FLAT_PRESS_STEPS, ROBOT_BASE_XY, Box, StrategyParams, column_blocked, min_opening,
                                              plan_grasp, wrist_fold)
from rpent.robots.libero.skills.handroom import ReleasePlan, hover_z, release_plan

__all__ = ["StrategyParams", "plan_grasp", "xy_waypoints", "Executor", "InProcessExecutor", "pick_and_place",
           "FLAT_CARRY_TILT", "flat_tilt_drop", "release_hang"]

#: how far (rad) a flat object held by its lip may swing down about the pinch while carried:
#: libero_goal's plate (11.5 g), pinched 5.4 cm from its centre, hung ~45-60 degrees after a
#: 0.2 m carry toward the cabinet and its low side met the cabinet top as it was lowered.
FLAT_CARRY_TILT = math.radians(55.0)


def flat_tilt_drop(offset: Sequence[float], tilt: float = FLAT_CARRY_TILT) -> float:
    """How much lower (m) than when level the far side of a flat object held at its lip hangs
    when it swings ``tilt`` rad about the pinch (pure geometry): the lip-to-lip span, twice the
    grasp's ``offset`` (grasp xy minus object centre xy, m), times ``sin(tilt)``."""
    return 2.0 * math.hypot(float(offset[0]), float(offset[1])) * math.sin(tilt)


def release_hang(hang: float, eef_z: float, seen_bottom: float | None, tolerance: float = 0.01) -> float:
    """The carried object's depth (m) below the eef to plan the release with: the planned
    ``hang`` (eef height minus the object's bottom at the grasp), or ``eef_z - seen_bottom``
    when a look at the carried object (``seen_bottom``: its lowest point, world z, m) finds it
    hanging more than ``tolerance`` lower (it swung in the grip). A higher reading is not
    trusted (the fingers hide the pinched side)."""
    if seen_bottom is None:
        return hang
    seen = float(eef_z) - float(seen_bottom)
    return seen if seen > hang + tolerance else hang


def xy_waypoints(start: Any, goal: Any, max_xy: float) -> list[np.ndarray]:
    """Split a move into waypoints whose xy steps are at most ``max_xy`` (m).

    Args:
        start, goal: (3,) world points; z is interpolated linearly.
    Returns:
        waypoints after ``start``, ending with ``goal``.
    """
    s = np.asarray(start, dtype=np.float64)
    g = np.asarray(goal, dtype=np.float64)
    dist = float(np.linalg.norm(g[:2] - s[:2]))
    n = max(1, int(math.ceil(dist / max_xy)))
    return [s + (g - s) * (i / n) for i in range(1, n + 1)]


class Executor(Protocol):
    """Runs motion primitives by tool name for :func:`pick_and_place`.

    ``run(tool, args) -> result dict`` with the toolkit's tool names and arguments
    (``move_to``, ``rotate_wrist``, ``set_gripper``, ``release``; RPent reference §3.3; an
    ``"error"`` key marks a failed or cancelled call) and ``current_state() -> state dict``
    (``robot0_eef_pos``, ``robot0_eef_quat`` xyzw, ``robot0_gripper_qpos``, ``terminated``,
    ``truncated``, ``success``). The offline planner's executor makes toolkit calls
    (:mod:`rpent.planners.scripted`); :class:`InProcessExecutor` runs the control loops.
    """

    def run(self, tool: str, args: dict) -> dict: ...

    def current_state(self) -> Mapping[str, Any]: ...


class InProcessExecutor:
    """:class:`Executor` over the :mod:`rpent.robots.libero.control` loops and a ``step_fn``.

    Args:
        step_fn: ``step_fn(action[7]) -> step result`` (e.g. ``LiberoSim.step``).
        state: the current state.
        cancelled: checked between env steps.
    """

    _LOOPS = {"move_to": control.move_to, "move_pose": control.move_pose, "rotate_wrist": control.rotate_wrist,
              "rotate_pitch": control.rotate_pitch, "set_gripper": control.set_gripper, "release": control.release}

    def __init__(self, step_fn: Callable[[np.ndarray], Mapping[str, Any]], state: Mapping[str, Any],
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        self.tracker = control.StateTracker(step_fn, state)
        self.cancelled = cancelled

    def run(self, tool: str, args: dict) -> dict:
        """Run loop ``tool`` with ``args`` on the tracked state."""
        return self._LOOPS[tool](self.tracker.step, self.tracker.state, cancelled=self.cancelled, **args)

    def current_state(self) -> Mapping[str, Any]:
        """The latest state."""
        return self.tracker.state

    @property
    def steps(self) -> int:
        """Env steps taken through this executor."""
        return self.tracker.steps


def pick_and_place(
    ex: Executor,
    obj: ObjectEstimate,
    target: ObjectEstimate,
    relation: str,
    params: StrategyParams = StrategyParams(),
    relocate: Callable[[Mapping[str, Any]], ObjectEstimate | None] | None = None,
    obstacles: Sequence[ObjectEstimate] = (),
    carry_over: float | None = None,
    release_top: float | None = None,
    boxes: Sequence[Box] = (),
    align_yaw: float | None = None,
    clutter: np.ndarray | None = None,
    base_xy: Sequence[float] | None = None,
    carried_bottom: Callable[[Mapping[str, Any]], float | None] | None = None,
) -> dict:
    """Run approach / (relocate) / descend / close / lift / transport / lower / release / retreat.

    Args:
        ex: the :class:`Executor` (toolkit calls, or :class:`InProcessExecutor`).
        obj: the object to pick; target: the container/support.
        relation: ``"in"`` or ``"on"``.
        params: heights and gains.
        relocate: optional ``relocate(state) -> ObjectEstimate | None`` called once while the
            gripper hovers above the object (e.g. segment + back-project the wrist camera);
            its estimate is merged with :func:`refine_estimate` and the grasp re-planned.
            A first estimate from the front camera is ~1.5 cm off for tall objects; a look
            from above is within a few mm.
        obstacles: other objects near the object (the rim grasp of
            :func:`~rpent.robots.libero.skills.grasp.plan_grasp` picks the side away from them).
            The grasp's ``offset`` (grasp xy minus object centre) is kept while carrying, so
            the object's centre, not the eef, lands above the target's centre.
        carry_over: optional world z (m) the carried object's bottom must clear during
            transport (e.g. the top of an object placed before on the same target).
        release_top: optional world z (m) of the surface inside the target the object is
            set down on (a drawer's floor): it is lowered to ``release_clearance_on`` above
            it instead of being let go ``release_clearance_in`` above the target's top (a
            bowl dropped into libero_10 t3's drawer from above its rim landed tilted, its rim
            higher than the cabinet's opening, and jammed the drawer at qpos -0.065 m).
        boxes: furniture (drawers, :class:`~rpent.robots.libero.skills.grasp.Box`): the rim
            grasp keeps its fingers off their walls, every move crosses above any box within
            0.15 m of its path (the arm caught on a cabinet's edge when crossing lower), and
            the second look hovers above the grasp point rather than the object's centre when
            a box overhangs that column.
        align_yaw: optional world yaw (rad) the object's long side (``major_yaw`` of the
            estimate the grasp was planned on, after the second look) is turned to after the
            lift, before the transport, by the smallest turn (mod pi,
            :func:`~rpent.robots.libero.skills.layout.compartment_turn`: a book's width laid
            along a caddy compartment's long side). The grasp's ``offset`` turns with it, the
            transport and the lowering hold the turned yaw, and the wrist turns back after
            the release. None: carried as grasped.
        clutter: optional ``float64[N, 3]`` world points of what else stands on the table
            (:func:`~rpent.robots.libero.skills.clutter.clutter_points`): the transport takes
            the route and height :func:`~rpent.robots.libero.skills.clutter.carry_route`
            chooses for the object's centre (an L-shaped detour round a tall neighbour,
            carried over a shorter one) instead of the straight line. The hover above the
            object is raised until the open hand clears its neighbours
            (:func:`~rpent.robots.libero.skills.handroom.hover_z`); set down ``on`` a target,
            a centre-grasped object is turned a quarter turn where that keeps the hand off
            what stands beside the place, else it is let go higher (by at most 6 cm,
            :func:`~rpent.robots.libero.skills.handroom.release_plan`).
        base_xy: optional world xy (m) of the robot's base
            (:func:`~rpent.robots.libero.skills.grasp.base_from_home`): the grasp's yaw keeps the
            wrist off its limit at the grasp and at the place
            (:func:`~rpent.robots.libero.skills.grasp.wrist_fold`).
        carried_bottom: optional ``carried_bottom(state) -> z | None``: the carried object's
            lowest point (world z, m) as seen now (e.g. segmented on the front camera). For a
            flat grasp (a plate pinched at its lip, which swings in the grip) the transport goes
            :func:`flat_tilt_drop` higher, and after it this look sets the release height
            (:func:`release_hang`).
    Returns:
        ``{"success": bool (the env's predicate as last reported), "stage": last stage,
        "env_steps": int | None (steps taken, when the executor counts them), "phases":
        [{"phase", "tool", **primitive result}], "reason"?: str}``. Stops early when the
        episode ends (success or truncation), when a primitive fails or is cancelled, or when
        the grasp comes up empty (``reason`` says which).
    Raises:
        ValueError: unknown relation.
    """
    if relation not in ("in", "on"):
        raise ValueError(f"relation must be 'in' or 'on', got {relation!r}")
    phases: list[dict] = []

    def over() -> bool:
        return control.episode_over(ex.current_state())

    def run(phase: str, tool: str, **args: Any) -> dict:
        result = ex.run(tool, args)
        phases.append({"phase": phase, "tool": tool,
                       **{k: v for k, v in result.items() if k not in ("_images", "state_after")}})
        return result

    def finish(stage: str, reason: str | None = None) -> dict:
        s = ex.current_state()
        out = {
            "success": bool(s.get("success", s.get("terminated", False))),
            "stage": stage,
            "env_steps": getattr(ex, "steps", None),
            "phases": phases,
        }
        if reason:
            limits = control.joints_at_limit(s)
            if limits:  # the arm ran into its own range: moves there end short of their targets
                reason += "; the arm's " + ", ".join(f"joint {j} at its limit ({q:+.2f} rad)" for j, q in limits)
            out["reason"] = reason
        return out

    def travel(phase: str, goal: Any, gripper: float, yaw: float | None = None, **kw: Any) -> bool:
        pos = control.robot_state(ex.current_state())["eef_pos"]
        for wp in xy_waypoints(pos, goal, params.max_xy_travel):
            args = {"xyz": [float(v) for v in wp], "gripper": gripper, **kw}
            if yaw is not None:
                args["target_yaw"] = float(yaw)
            r = run(phase, "move_to", **args)
            if "error" in r or over():
                return False
        return True

    s0 = control.robot_state(ex.current_state())
    grasp = _hover_clear(plan_grasp(obj, control.eef_yaw(s0["eef_quat"]), params, obstacles, boxes, target.center[:2],
                                    clutter, base_xy), obj, clutter)
    gx, gy, gz = (float(v) for v in grasp["xyz"])
    hang = gz - obj.bottom_z  # object bottom below the eef while carried
    carry_z = max(params.min_carry_z, target.top_z + hang + params.carry_clearance, grasp["approach_z"])
    if carry_over is not None:
        carry_z = max(carry_z, carry_over + hang + params.carry_clearance)

    # 1. rise to the travel height if low, cross above the object at that height (clears
    #    neighbouring tall objects and furniture near the path), then come down vertically
    travel_z = max(params.min_carry_z, grasp["approach_z"], _furniture_clear_z(boxes, s0["eef_pos"], obj.center))
    carry_z = max(carry_z, _furniture_clear_z(boxes, obj.center, target.center))
    carry_z = _reachable_carry(carry_z, target.top_z + hang, params)
    if s0["eef_pos"][2] < travel_z - 0.02:
        if not travel("rise", [s0["eef_pos"][0], s0["eef_pos"][1], travel_z], control.GRIPPER_OPEN):
            return finish("rise", _why(ex.current_state(), phases))
    # with a second look coming, hover above the object's centre (the wrist camera sees all of it)
    if grasp["kind"] == "handle":
        relocate = None  # the wrist's top view of a pot hides which end is the handle: keep the front view's
    hx, hy = (float(obj.center[0]), float(obj.center[1])) if relocate is not None else (gx, gy)
    if column_blocked(hx, hy, float(grasp["approach_z"]), boxes, margin=0.06) is not None:
        hx, hy = gx, gy  # a drawer overhangs the centre: look from above the grasp point
    if not travel("approach", [hx, hy, travel_z], control.GRIPPER_OPEN, yaw=grasp["yaw"], max_steps=120):
        return finish("approach", _why(ex.current_state(), phases))
    if travel_z - grasp["approach_z"] > 0.01:
        r = run("approach", "move_to", xyz=[hx, hy, float(grasp["approach_z"])], gripper=control.GRIPPER_OPEN,
                target_yaw=float(grasp["yaw"]), max_steps=80)
        if "error" in r or over():
            return finish("approach", _why(ex.current_state(), phases))
    if relocate is not None:
        closer = relocate(ex.current_state())
        if closer is not None:
            coarse, obj = obj, refine_estimate(obj, closer)
            if grasp["kind"] in ("rim", "flat"):  # the top view of a wide rim is often cut by the image edge: keep it wide
                if closer.minor_extent < PARTIAL_VIEW * coarse.minor_extent:
                    # cut across too (the image edge, the arm or a drawer hid part of it): its
                    # centre is biased toward the visible part (observed 3.6 cm off on a bowl
                    # seen 0.100 x 0.025 m); keep the first footprint, take only the top
                    obj = dataclasses.replace(coarse, top_z=closer.top_z,
                                              source=f"{coarse.source}+{closer.source}(partial: top only)")
                obj = dataclasses.replace(obj, major_extent=max(obj.major_extent, coarse.major_extent),
                                          minor_extent=max(obj.minor_extent, coarse.minor_extent))
            grasp = _hover_clear(plan_grasp(obj, control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"]),
                                            params, obstacles, boxes, target.center[:2], clutter, base_xy), obj, clutter)
            gx, gy, gz = (float(v) for v in grasp["xyz"])
            hang = gz - obj.bottom_z
            carry_z = max(params.min_carry_z, target.top_z + hang + params.carry_clearance, grasp["approach_z"],
                          _furniture_clear_z(boxes, obj.center, target.center))
            if carry_over is not None:
                carry_z = max(carry_z, carry_over + hang + params.carry_clearance)
            carry_z = _reachable_carry(carry_z, target.top_z + hang, params)
            phases.append({"phase": "relocate", "center": list(obj.center), "top_z": obj.top_z, "grasp": grasp["kind"],
                           "yaw": grasp["yaw"], "source": obj.source})
        r = run("approach", "move_to", xyz=[gx, gy, float(grasp["approach_z"])], gripper=control.GRIPPER_OPEN,
                target_yaw=float(grasp["yaw"]), max_steps=60)
        if "error" in r or over():
            return finish("approach", _why(ex.current_state(), phases))
    r = run("align", "rotate_wrist", target_yaw=float(grasp["yaw"]), gripper=control.GRIPPER_OPEN, tol=0.03)
    if "error" in r or over():
        return finish("align", _why(ex.current_state(), phases))
    # 2. descend slowly onto the grasp pose
    r = run("descend", "move_to", xyz=[gx, gy, gz], gripper=control.GRIPPER_OPEN, step_clip=0.015,
            tol=0.008, max_steps=100, target_yaw=float(grasp["yaw"]))
    if "error" in r or over():
        return finish("descend", _why(ex.current_state(), phases))
    z_now = float(control.robot_state(ex.current_state())["eef_pos"][2])
    if grasp["kind"] == "centre" and z_now > gz + params.blocked_descent and obj.major_extent <= params.turn_max_extent:
        # the fingers came down on a neighbour (libero_10 t1: a milk carton beside the cream cheese):
        # go back up and try across the other side of the object
        yaw2 = float(grasp["yaw"] + math.pi / 2)
        phases.append({"phase": "descend blocked", "eef_z": z_now, "grasp_z": gz, "retry_yaw": yaw2})
        for phase, tool, args in (
                ("approach", "move_to", dict(xyz=[gx, gy, float(grasp["approach_z"])], gripper=control.GRIPPER_OPEN,
                                             max_steps=60)),
                ("align", "rotate_wrist", dict(target_yaw=yaw2, gripper=control.GRIPPER_OPEN, tol=0.03)),
                ("descend", "move_to", dict(xyz=[gx, gy, gz], gripper=control.GRIPPER_OPEN, step_clip=0.015, tol=0.008,
                                            max_steps=100, target_yaw=yaw2))):
            r = run(phase, tool, **args)
            if "error" in r or over():
                return finish(phase, _why(ex.current_state(), phases))
        grasp = {**grasp, "yaw": yaw2}
    # 3. close (a flat object: pressed down while closing, grasp.FLAT_HOVER)
    if grasp["kind"] == "flat":
        r = run("close", "move_to", xyz=[gx, gy, float(grasp["press_z"])], gripper=control.GRIPPER_CLOSE,
                step_clip=0.015, tol=0.001, max_steps=FLAT_PRESS_STEPS, target_yaw=float(grasp["yaw"]))
    else:
        r = run("close", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=params.close_steps)
    if "error" in r or over():
        return finish("close", _why(ex.current_state(), phases))
    # 4. lift straight up
    if not travel("lift", [gx, gy, carry_z], control.GRIPPER_CLOSE, step_clip=0.02, max_steps=120):
        return finish("lift", _why(ex.current_state(), phases))
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < min_opening(grasp["kind"], params):
        return finish("lift", f"grasp came up empty (gripper opening {opening:.4f} m)")
    if opening > params.grasped_max_opening:
        return finish("lift", f"the gripper did not close (opening {opening:.4f} m): nothing between the fingers")
    if grasp["kind"] == "flat":  # a lip pinch lets the object swing down on the way: carry it higher
        swing = flat_tilt_drop(grasp["offset"])
        carry_z = _reachable_carry(max(carry_z, target.top_z + hang + swing + params.carry_clearance),
                                   target.top_z + hang + swing, params)
        pos = control.robot_state(ex.current_state())["eef_pos"]
        if carry_z > float(pos[2]) + 0.01:
            r = run("lift", "move_to", xyz=[float(pos[0]), float(pos[1]), float(carry_z)], gripper=control.GRIPPER_CLOSE,
                    step_clip=0.02, max_steps=80)
            if "error" in r or over():
                return finish("lift", _why(ex.current_state(), phases))
    # 5. transport above the target (turned first when asked: the offset turns with the object)
    ox, oy = float(grasp["offset"][0]), float(grasp["offset"][1])
    carry_yaw = None
    turn = 0.0
    if align_yaw is not None:
        turn = (align_yaw - obj.major_yaw + math.pi / 2) % math.pi - math.pi / 2
    clearance = params.release_clearance_in if relation == "in" else params.release_clearance_on
    release_z = target.top_z + hang + clearance
    if release_top is not None:  # set it down on this surface (a drawer's floor), not dropped from the rim
        release_z = release_top + hang + params.release_clearance_on
    room = _hand_room(clutter, grasp, (float(target.center[0] + ox), float(target.center[1] + oy)), release_z,
                      may_turn=align_yaw is None and grasp["kind"] == "centre") \
        if relation == "on" and release_top is None else None
    if room is not None and (room.turn or room.rise):
        if room.turn:
            folded = wrist_fold(float(grasp["yaw"]) + room.turn, [(float(target.center[0]), float(target.center[1]))],
                                ROBOT_BASE_XY if base_xy is None else base_xy)
            turn = float(control.wrap_angle(folded - float(grasp["yaw"])))
        release_z += room.rise
        phases.append({"phase": "hand room", "turn": turn, "rise": room.rise, "neighbour_top": room.top})
    if turn:
        carry_yaw = float(control.wrap_angle(grasp["yaw"] + turn))
        r = run("turn", "rotate_wrist", target_yaw=carry_yaw, gripper=control.GRIPPER_CLOSE, tol=0.03, max_steps=80)
        if "error" in r or over():
            return finish("turn", _why(ex.current_state(), phases))
        c, s_ = math.cos(turn), math.sin(turn)
        ox, oy = c * ox - s_ * oy, s_ * ox + c * oy
    tx, ty = float(target.center[0] + ox), float(target.center[1] + oy)
    corners: list = []
    if clutter is not None and len(clutter):
        from rpent.robots.libero.skills.clutter import carry_route

        pos = control.robot_state(ex.current_state())["eef_pos"]
        corners, bottom = carry_route(clutter, (float(pos[0]) - ox, float(pos[1]) - oy), target.center[:2],
                                      max(obj.major_extent, obj.minor_extent) / 2.0, carry_z - hang,
                                      params.max_carry_z - hang)
        if corners or bottom > carry_z - hang + 1e-6:
            carry_z = bottom + hang
            phases.append({"phase": "carry route", "corners": [[float(c[0]), float(c[1])] for c in corners],
                           "carry_z": float(carry_z)})
            r = run("transport", "move_to", xyz=[float(pos[0]), float(pos[1]), float(carry_z)],
                    gripper=control.GRIPPER_CLOSE, step_clip=0.02, max_steps=80)
            if "error" in r or over():
                return finish("transport", _why(ex.current_state(), phases))
    for cx, cy in corners:  # round the clutter (the object's centre at each corner)
        if not travel("transport", [float(cx) + ox, float(cy) + oy, carry_z], control.GRIPPER_CLOSE, yaw=carry_yaw,
                      max_steps=120):
            return finish("transport", _why(ex.current_state(), phases))
    if not travel("transport", [tx, ty, carry_z], control.GRIPPER_CLOSE, yaw=carry_yaw, max_steps=120):
        return finish("transport", _why(ex.current_state(), phases))
    # the object may have slipped out on the way (a plate held by its lip): say so rather than
    # lower and open an empty hand
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < min_opening(grasp["kind"], params):
        return finish("transport", f"the object slipped out of the gripper on the way (gripper opening {opening:.4f} m)")
    # 6. lower to the release height (a flat object's swing in the grip measured first)
    if grasp["kind"] == "flat" and carried_bottom is not None:
        eef_z = float(control.robot_state(ex.current_state())["eef_pos"][2])
        seen = carried_bottom(ex.current_state())
        new_hang = release_hang(hang, eef_z, seen)
        phases.append({"phase": "carried look", "seen_bottom": seen, "hang": hang, "release_hang": new_hang})
        release_z += new_hang - hang  # the release height planned before the carry, with the hang measured
        hang = new_hang
    if release_z < carry_z:
        r = run("lower", "move_to", xyz=[tx, ty, float(release_z)], gripper=control.GRIPPER_CLOSE,
                step_clip=0.015, tol=0.008, max_steps=100, **({"target_yaw": carry_yaw} if carry_yaw is not None else {}))
        if "error" in r or over():
            return finish("lower", _why(ex.current_state(), phases))
    # 7. release and retreat
    r = run("release", "release")
    if "error" in r or over():
        return finish("release", _why(ex.current_state(), phases))
    pos = control.robot_state(ex.current_state())["eef_pos"]
    run("retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), float(pos[2] + params.retreat_height)],
        gripper=control.GRIPPER_OPEN, max_steps=40)
    if carry_yaw is not None and not control.episode_over(ex.current_state()):
        # turn the wrist back before going home (a wrist left turned by ~1.4 rad at full reach
        # stalled the arm on its way home, 11 cm from where it was sent, in a trial)
        run("retreat", "rotate_wrist", target_yaw=float(grasp["yaw"]), gripper=control.GRIPPER_OPEN, tol=0.03,
            max_steps=80)
    s = ex.current_state()
    return finish("retreat", None if s.get("success") else _why(s, phases))


def _hover_clear(grasp: dict, obj: ObjectEstimate, clutter: np.ndarray | None) -> dict:
    """``grasp`` with its ``approach_z`` raised where the hand, hovering there above the object's
    centre or the grasp point (and turning its wrist), would touch a neighbour
    (:func:`~rpent.robots.libero.skills.handroom.hover_z`)."""
    if clutter is None or not len(clutter):
        return grasp
    z = max(hover_z(clutter, obj.center[:2]), hover_z(clutter, grasp["xyz"][:2]))
    return {**grasp, "approach_z": z} if z > grasp["approach_z"] else grasp


def _hand_room(clutter: np.ndarray | None, grasp: Mapping[str, Any], xy: Sequence[float], release_z: float,
               may_turn: bool) -> ReleasePlan | None:
    """:func:`~rpent.robots.libero.skills.handroom.release_plan` for setting the object down with
    the eef at ``xy`` and ``release_z`` (m); None without clutter."""
    if clutter is None or not len(clutter):
        return None
    return release_plan(clutter, xy, float(grasp["yaw"]), release_z, may_turn)


def _reachable_carry(carry_z: float, touch_z: float, params: StrategyParams) -> float:
    """``carry_z`` (m) lowered to ``params.max_carry_z`` where it is higher, but never below
    ``touch_z`` (the eef height at which the carried object's bottom meets the target's top) + 2 cm."""
    if carry_z <= params.max_carry_z:
        return carry_z
    return max(params.max_carry_z, touch_z + 0.02)


def _furniture_clear_z(boxes: Sequence[Box], start: Any, goal: Any, reach: float = 0.15, clearance: float = 0.06
                       ) -> float:
    """Lowest eef height (m) that crosses from ``start`` to ``goal`` (xy) ``clearance`` above
    every box within ``reach`` m of the straight path (0 when none): on libero_spatial the
    arm stalled at z 1.03 m crossing toward a bowl beside a 1.13 m cabinet."""
    sx, sy, gx, gy = float(start[0]), float(start[1]), float(goal[0]), float(goal[1])
    top = 0.0
    for b in boxes:
        n = max(2, int(math.hypot(gx - sx, gy - sy) / 0.02) + 1)
        if min(b.signed_distance(sx + (gx - sx) * i / (n - 1), sy + (gy - sy) * i / (n - 1)) for i in range(n)) < reach:
            top = max(top, b.z_hi + clearance)
    return top


def _why(state: Mapping[str, Any], phases: list[dict]) -> str | None:
    if state.get("success") or state.get("terminated"):
        return None
    if state.get("truncated"):
        return "episode truncated (max_episode_steps reached)"
    if phases and "error" in phases[-1]:
        return str(phases[-1]["error"])
    return "task predicate not satisfied"

