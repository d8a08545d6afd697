"""The scripted planner's executor over its tool calls: the latest robot state seen in the
tools' answers, and motion calls left out when they would not move the arm.

:class:`ToolExecutor` adapts the planner's ``call(tool, args) -> result`` to the skills'
executor interface (``run(tool, args)``, ``current_state()``,
:class:`rpent.robots.libero.skills.motion.Executor`); :class:`Latest` keeps the state so no
``view_env_state`` is needed before each skill; :func:`needless_motion` answers a motion call
that would take 0 env steps without making it (each call still costs a step capture).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Latest", "ToolExecutor", "needless_motion", "state_of"]


def state_of(view: dict) -> dict:
    """Flat state (robot obs + episode flags) of a ``view_env_state`` answer or a ``state_after``."""
    return {**view["state"], "terminated": view["terminated"], "truncated": view["truncated"],
            "success": view["success"]}


#: the motion tools' default gripper command (:mod:`rpent.robots.libero.toolkit.motion`)
_GRIPPER_DEFAULT = {"move_to": -1.0, "move_pose": -1.0, "rotate_wrist": 1.0, "rotate_pitch": 1.0, "set_gripper": -1.0}


class Latest:
    """The latest robot state seen in any tool answer of this run (``state_after`` of a motion
    tool, or ``view_env_state`` of the latest step) and the last gripper command sent, so the
    planner need not call ``view_env_state`` again to know where the arm is, and can leave out
    motion calls that would not move it."""

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.gripper: float | None = None  #: last gripper command (-1 open, +1 close) of a motion call
        self.skipped = 0  #: motion calls left out because the arm was already there

    def note(self, name: str, args: dict, res: dict) -> None:
        """Update from one tool call and its answer."""
        after = res.get("state_after")
        if after:
            self.state = state_of(after)
        elif name == "view_env_state" and "state" in res and args.get("step", -1) == -1:
            self.state = state_of(res)
        if name in ("move_to", "move_pose", "rotate_wrist", "rotate_pitch", "set_gripper") and "error" not in res:
            self.gripper = float(args.get("gripper", _GRIPPER_DEFAULT[name]))
        elif name == "release" and "error" not in res:
            self.gripper = -1.0


def needless_motion(tool: str, args: dict, state: dict | None, gripper: float | None) -> dict | None:
    """The answer of a motion call that would not move the arm, or None when it must be made.

    A ``move_to`` whose target is already within its ``tol`` (default 0.012 m) of the eef, with
    the yaw within 0.02 rad of ``target_yaw`` (the loop's own stop test,
    :func:`rpent.robots.libero.control.move_to`) and the same gripper command as the last call,
    and a ``rotate_wrist`` to a ``target_yaw`` already within its ``tol`` (default 0.02 rad) with
    that gripper command, take 0 env steps but still cost a full step capture (two cameras with
    depth and segmentation, ~0.3-2 s here); the planner leaves them out. Every other call is made.

    Args:
        tool, args: the call; state: latest flat state (``robot0_eef_pos``, ``robot0_eef_quat``
            xyzw) or None; gripper: last gripper command sent (None: unknown).
    Returns:
        ``{"steps_used": 0, "reached": True, "skipped": reason}`` or None.
    """
    from rpent.robots.libero import control

    if state is None or gripper is None or tool not in ("move_to", "rotate_wrist"):
        return None
    g = float(args.get("gripper", _GRIPPER_DEFAULT[tool]))
    if g != gripper:
        return None
    rs = control.robot_state(state)
    yaw_now = control.eef_yaw(rs["eef_quat"])
    if tool == "rotate_wrist":
        if args.get("target_yaw") is None or not control.angle_reached(yaw_now, float(args["target_yaw"]),
                                                                        float(args.get("tol", 0.02))):
            return None
        return {"steps_used": 0, "reached": True, "final_yaw": yaw_now, "skipped": "the wrist is already at this yaw"}
    if not control.position_reached(rs["eef_pos"], args["xyz"], float(args.get("tol", 0.012))):
        return None
    if args.get("target_yaw") is not None and not control.angle_reached(yaw_now, float(args["target_yaw"]), 0.02):
        return None
    return {"steps_used": 0, "reached": True, "final_eef_pos": [float(v) for v in rs["eef_pos"]],
            "skipped": "the eef is already there"}


class ToolExecutor:
    """Adapts tool calls to the strategy's executor interface (``run(tool, args) -> result``,
    ``current_state()``), over the planner's ``call`` and its :class:`Latest` state; motion
    calls that would not move the arm (:func:`needless_motion`) are left out."""

    def __init__(self, call, latest: Latest | None = None) -> None:
        self._call = call
        self.latest = latest if latest is not None else getattr(call, "latest", None) or Latest()

    @property
    def state(self) -> dict[str, Any] | None:
        return self.latest.state

    def run(self, tool: str, args: dict) -> dict:
        skip = needless_motion(tool, args, self.latest.state, self.latest.gripper)
        if skip is not None:
            self.latest.skipped += 1
            return skip
        res = self._call(tool, args)
        if not hasattr(self._call, "latest"):
            self.latest.note(tool, args, res)
        return res

    def current_state(self) -> dict:
        if self.latest.state is None:
            res = self._call("view_env_state", {})
            if not hasattr(self._call, "latest"):
                self.latest.note("view_env_state", {}, res)
        return self.latest.state
