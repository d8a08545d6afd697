"""The scripted pick-and-place plan, executor-agnostic.

:func:`pick_and_place_plan` issues primitive calls (``move_to``, ``rotate_wrist``,
``set_gripper``, ``release``; the toolkit's tool names and arguments, RPent reference §3.3)
through an *executor*:

* ``executor.run(tool, args) -> result dict`` (an ``"error"`` key marks a failed call), and
* ``executor.current_state() -> state dict`` (``robot0_eef_pos``, ``robot0_eef_quat`` (xyzw),
  ``robot0_gripper_qpos``, ``terminated``, ``truncated``, ``success``).

The offline planner's executor makes toolkit calls (:mod:`rpent.planners.scripted`); the
in-process one (:class:`InProcessExecutor`) runs the :mod:`rpent.robots.libero.control` loops on
a ``step_fn`` (prototyping, benchmarks). Heights and gains: :class:`strategy.StrategyParams`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.strategy import ObjectEstimate, StrategyParams, plan_grasp, xy_waypoints

__all__ = ["Executor", "InProcessExecutor", "pick_and_place_plan"]


class Executor(Protocol):
    """Runs primitives by tool name (see module docstring)."""

    def run(self, tool: str, args: dict) -> dict: ...

    def current_state(self) -> Mapping[str, Any]: ...


class InProcessExecutor:
    """Executor over :mod:`rpent.robots.libero.control` loops and a ``step_fn``.

    Args:
        step_fn: ``step_fn(action[7]) -> step result`` (e.g. ``LiberoSim.step``).
        state: the current state.
        cancelled: checked between env steps.
    """

    _LOOPS = {"move_to": control.move_to, "move_pose": control.move_pose, "rotate_wrist": control.rotate_wrist,
              "rotate_pitch": control.rotate_pitch, "set_gripper": control.set_gripper, "release": control.release}

    def __init__(self, step_fn, state: Mapping[str, Any], cancelled: Callable[[], bool] = lambda: False) -> None:
        self.tracker = control.StateTracker(step_fn, state)
        self.cancelled = cancelled

    def run(self, tool: str, args: dict) -> dict:  # noqa: D102
        return self._LOOPS[tool](self.tracker.step, self.tracker.state, cancelled=self.cancelled, **args)

    def current_state(self) -> Mapping[str, Any]:  # noqa: D102
        return self.tracker.state

    @property
    def steps(self) -> int:
        """Env steps taken."""
        return self.tracker.steps


def pick_and_place_plan(ex: Executor, obj: ObjectEstimate, target: ObjectEstimate, relation: str,
                        params: StrategyParams = StrategyParams()) -> dict:
    """Approach / align / descend / close / lift / transport / lower / release / retreat.

    Args:
        ex: the executor.
        obj: the object to pick; target: the container or support (world frame, m).
        relation: ``"in"`` or ``"on"``.
        params: heights and gains.
    Returns:
        ``{"success": bool (the env's predicate as last reported), "stage": last stage,
        "phases": [{"phase", "tool", **result}], "reason"?: str}``. Stops early when the
        episode ends, a primitive fails or is cancelled, or the grasp comes up empty.
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
        phases.append({"phase": phase, "tool": tool, **{k: v for k, v in result.items()
                                                          if k not in ("_images", "state_after")}})
        return result

    def end(stage: str, reason: str | None = None) -> dict:
        s = ex.current_state()
        out = {"success": bool(s.get("success", s.get("terminated", False))), "stage": stage, "phases": phases}
        reason = reason if reason is not None else _why(s, phases)
        if reason:
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
    grasp = plan_grasp(obj, control.eef_yaw(s0["eef_quat"]), params)
    gx, gy, gz = (float(v) for v in grasp["xyz"])
    hang = gz - obj.bottom_z  # object bottom below the eef while carried
    carry_z = max(params.min_carry_z, target.top_z + hang + params.carry_clearance, grasp["approach_z"])

    if s0["eef_pos"][2] < grasp["approach_z"] - 0.02:
        if not travel("rise", [s0["eef_pos"][0], s0["eef_pos"][1], grasp["approach_z"]], control.GRIPPER_OPEN):
            return end("rise")
    if not travel("approach", [gx, gy, grasp["approach_z"]], control.GRIPPER_OPEN, yaw=grasp["yaw"], max_steps=120):
        return end("approach")
    r = run("align", "rotate_wrist", target_yaw=float(grasp["yaw"]), gripper=control.GRIPPER_OPEN, tol=0.03)
    if "error" in r or over():
        return end("align")
    r = run("descend", "move_to", xyz=[gx, gy, gz], gripper=control.GRIPPER_OPEN, step_clip=0.015, tol=0.008,
            max_steps=100, target_yaw=float(grasp["yaw"]))
    if "error" in r or over():
        return end("descend")
    r = run("close", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=params.close_steps)
    if "error" in r or over():
        return end("close")
    if not travel("lift", [gx, gy, carry_z], control.GRIPPER_CLOSE, step_clip=0.02, max_steps=120):
        return end("lift")
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < params.grasped_min_opening:
        return end("lift", f"grasp came up empty (gripper opening {opening:.4f} m)")
    tx, ty = float(target.center[0]), float(target.center[1])
    if not travel("transport", [tx, ty, carry_z], control.GRIPPER_CLOSE, max_steps=120):
        return end("transport")
    clearance = params.release_clearance_in if relation == "in" else params.release_clearance_on
    release_z = target.top_z + hang + clearance
    if release_z < carry_z:
        r = run("lower", "move_to", xyz=[tx, ty, float(release_z)], gripper=control.GRIPPER_CLOSE,
                step_clip=0.015, tol=0.008, max_steps=100)
        if "error" in r or over():
            return end("lower")
    r = run("release", "release")
    if "error" in r or over():
        return end("release")
    pos = control.robot_state(ex.current_state())["eef_pos"]
    run("retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), float(pos[2] + params.retreat_height)],
        gripper=control.GRIPPER_OPEN, max_steps=40)
    return end("retreat")


def _why(state: Mapping[str, Any], phases: list[dict]) -> str | None:
    if state.get("success") or state.get("terminated"):
        return None
    if state.get("truncated"):
        return "episode truncated (max_episode_steps reached)"
    if phases and "error" in phases[-1]:
        return str(phases[-1]["error"])
    return "task predicate not satisfied"
