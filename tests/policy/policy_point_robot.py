"""TEST FIXTURE: a tiny "point robot" toolkit implementing the toolkit contract of
docs/interfaces.md (``specs()``, ``execute(name, args, call_id) -> dict`` never raising,
``cancel()``/``clear_cancel()``, ``solved()``), so the code-policy runner can be tested
with real processes and real timing before (and besides) the LIBERO toolkit.

The robot is a point in the world frame (m). ``move_to`` servoes it toward a target in
env steps of at most ``step_clip`` m, sleeping ``step_s`` per step (a stand-in for
physics) and checking the cancel flag at every step boundary, like the real primitives.
Stateful results carry ``steps_used`` and three small real PNG images.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import numpy as np
from PIL import Image


def _png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value % 256, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


class ToolSpec:
    """Fixture-local stand-in for the toolkit's ToolSpec (same four attributes)."""

    def __init__(self, name: str, description: str, input_schema: dict, readonly: bool):
        self.name, self.description, self.input_schema, self.readonly = name, description, input_schema, readonly


_XYZ = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3,
        "description": "target position, m, world frame"}


class PointRobotToolkit:
    """Test fixture toolkit (see module docstring).

    Attributes:
        pos: current position, float64 [3], m.
        gripper: last gripper command (-1 open, +1 closed).
        env_steps: total env steps taken.
        executed: list of (tool, args, call_id) in execution order.
        cancel_seen_at_step: env step at which a motion observed the cancel flag, or None.
        success_region: the task succeeds when pos is within 0.02 m of this point with
            the gripper open after having been closed.
    """

    def __init__(self, step_s: float = 0.005, goal=(0.3, 0.0, 0.1)):
        self.step_s = step_s
        self.pos = np.zeros(3)
        self.gripper = -1.0
        self.env_steps = 0
        self.executed: list[tuple[str, dict, str | None]] = []
        self.cancel_seen_at_step: int | None = None
        self._cancel = threading.Event()
        self.goal = np.asarray(goal, float)
        self._grasped = False
        self._solved = False
        self.finish_result: dict | None = None

    # -- contract ------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec("move_to", "Servo the point toward xyz (m, world frame).", {
                "type": "object",
                "properties": {"xyz": _XYZ,
                               "gripper": {"type": "number", "default": -1},
                               "tol": {"type": "number", "default": 0.012},
                               "step_clip": {"type": "number", "default": 0.025},
                               "max_steps": {"type": "integer", "default": 80}},
                "required": ["xyz"]}, False),
            ToolSpec("set_gripper", "Drive the gripper (-1 open, +1 close).", {
                "type": "object",
                "properties": {"gripper": {"type": "number", "default": -1},
                               "steps": {"type": "integer", "default": 5}}}, False),
            ToolSpec("view_env_state", "Current state and images.", {
                "type": "object", "properties": {"step": {"type": "integer", "default": -1}}}, True),
            ToolSpec("finish", "End the task.", {
                "type": "object",
                "properties": {"status": {"type": "string"}, "summary": {"type": "string"}},
                "required": ["status", "summary"]}, True),
            ToolSpec("request_operator_verdict", "Ask the operator.", {
                "type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}, True),
        ]

    def cancel(self) -> None:
        self._cancel.set()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def solved(self) -> bool:
        return self._solved

    def execute(self, name: str, args: dict, call_id: str | None = None) -> dict[str, Any]:
        self.executed.append((name, dict(args), call_id))
        try:
            handler = getattr(self, f"_tool_{name}")
        except AttributeError:
            return {"error": f"unknown tool: {name}"}
        try:
            return handler(**args)
        except TypeError as exc:
            return {"error": f"bad arguments for {name}: {exc}", "got": dict(args)}

    # -- tools ---------------------------------------------------------------------
    def _images(self) -> list[dict]:
        v = self.env_steps
        return [{"label": "agentview", "png": _png(v)}, {"label": "wrist", "png": _png(v + 1)}]

    def _step(self) -> bool:
        if self._cancel.is_set():
            self.cancel_seen_at_step = self.env_steps
            return False
        time.sleep(self.step_s)
        self.env_steps += 1
        return True

    def _tool_move_to(self, xyz, gripper=-1, tol=0.012, step_clip=0.025, max_steps=80):
        if not (isinstance(xyz, list) and len(xyz) == 3 and all(isinstance(v, (int, float)) for v in xyz)):
            return {"error": "xyz must be a JSON array of three numbers", "got": xyz}
        target = np.asarray(xyz, float)
        used = 0
        while used < max_steps and np.linalg.norm(target - self.pos) > tol:
            if not self._step():
                return {"error": "tool cancelled", "code": "tool_cancelled", "interrupted": True,
                        "steps_used": used}
            delta = target - self.pos
            dist = np.linalg.norm(delta)
            self.pos = self.pos + delta * min(1.0, step_clip / dist)
            self.gripper = float(gripper)
            used += 1
        return {"target_xyz": list(map(float, target)), "final_eef_pos": self.pos.tolist(),
                "final_dist_m": float(np.linalg.norm(target - self.pos)), "steps_used": used,
                "terminated": self._solved, "truncated": False, "_images": self._images()}

    def _tool_set_gripper(self, gripper=-1, steps=5):
        for _ in range(steps):
            if not self._step():
                return {"error": "tool cancelled", "code": "tool_cancelled", "interrupted": True}
        self.gripper = float(gripper)
        if gripper > 0:
            self._grasped = True
        elif self._grasped and np.linalg.norm(self.pos - self.goal) < 0.02:
            self._solved = True
        return {"gripper": self.gripper, "steps": steps, "terminated": self._solved, "truncated": False,
                "_images": self._images()}

    def _tool_view_env_state(self, step=-1):
        return {"step": self.env_steps, "terminated": self._solved, "truncated": False,
                "state": {"robot0_eef_pos": self.pos.tolist(), "robot0_gripper_qpos": [0.04, -0.04]},
                "_images": self._images()}

    def _tool_finish(self, status, summary):
        self.finish_result = {"status": status, "summary": summary}
        return {"_finish": True, "status": status, "summary": summary}

    def _tool_request_operator_verdict(self, question):
        return {"status": "success", "operator_notes": ""}


class PickPlaceWorld(PointRobotToolkit):
    """TEST FIXTURE: a LIBERO-shaped pick-and-place world on the point robot.

    Same tool names, arguments and result fields as the LIBERO toolkit
    (rpent_reference.md §3.3) for ``view_env_state``, ``segment``, ``move_to``,
    ``set_gripper``, ``release`` and ``finish``, with toy physics: closing the gripper
    within 2.5 cm (xy) of the object and at most 4 cm below its segmented surface point
    grasps it; a grasped object moves with the eef; releasing it within 6 cm (xy) of the
    target and less than 15 cm above it succeeds (``terminated``). A planar move of more
    than 0.30 m in one call is refused, like the OSC limit of the real robot.
    """

    def __init__(self, language="pick up the alphabet soup and place it in the basket",
                 obj=(0.05, 0.15, 0.90), target=(-0.10, -0.20, 0.88), step_s=0.0):
        super().__init__(step_s=step_s)
        self.language = language
        self.pos = np.array([-0.20, 0.0, 1.15])
        self.obj = np.asarray(obj, float)
        self.target = np.asarray(target, float)
        self.holding = False

    def specs(self):
        keep = [s for s in super().specs() if s.name in ("set_gripper", "finish")]
        move = next(s for s in super().specs() if s.name == "move_to")
        schema = {**move.input_schema, "properties": {
            **move.input_schema["properties"],
            "target_yaw": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None,
                           "description": "also turn the gripper to this yaw (rad)"}}}
        return keep + [
            ToolSpec("move_to", move.description, schema, False),
            ToolSpec("view_env_state", "State, task language and camera images.", {
                "type": "object", "properties": {"step": {"type": "integer", "default": -1}}}, True),
            ToolSpec("segment", "SAM3 segmentation with world xyz.", {
                "type": "object",
                "properties": {"prompt": {"type": "string"},
                               "point": {"type": "array", "items": {"type": "integer"}},
                               "camera": {"type": "string", "enum": ["agentview", "wrist"], "default": "agentview"},
                               "step": {"type": "integer", "default": -1},
                               "min_score": {"type": "number", "default": 0.2}}}, True),
            ToolSpec("release", "Open the gripper in place.", {
                "type": "object", "properties": {"max_steps": {"type": "integer", "default": 20}}}, False),
        ]

    def _tool_view_env_state(self, step=-1):
        opening = 0.03 if self.holding else (0.08 if self.gripper < 0 else 0.0)
        return {"step": self.env_steps, "terminated": self._solved, "truncated": False,
                "task_language": self.language,
                "state": {"robot0_eef_pos": self.pos.tolist(), "robot0_eef_quat": [1.0, 0.0, 0.0, 0.0],
                          "robot0_gripper_qpos": [opening / 2, -opening / 2],
                          "object_names": ["alphabet_soup_1", "basket_1"]},
                "_images": self._images()}

    def _tool_segment(self, prompt=None, point=None, camera="agentview", step=-1, min_score=0.2):
        if (prompt is None) == (point is None):
            return {"error": "segment needs exactly one of prompt or point"}
        where = {"soup": self.obj, "basket": self.target}
        for word, xyz in where.items():
            if word in (prompt or ""):
                return {"found": True, "score": 0.9, "box": [10, 10, 40, 40], "world_xyz": xyz.tolist(),
                        "world_error": None, "segment_artifact": "segment_00.json",
                        "overlay_artifact": "segment_overlay_00.png"}
        return {"found": False, "score": 0.0, "box": None, "world_xyz": None, "world_error": "no mask"}

    def _tool_move_to(self, xyz, gripper=-1, tol=0.012, step_clip=0.025, max_steps=80, **kw):
        if isinstance(xyz, list) and len(xyz) == 3:
            if np.linalg.norm(np.asarray(xyz[:2], float) - self.pos[:2]) > 0.30:
                return {"error": "bad arguments for move_to: planar move > 0.30 m; use waypoints"}
        result = super()._tool_move_to(xyz, gripper, tol, step_clip, max_steps)
        if self.holding:
            self.obj = self.pos - [0.0, 0.0, 0.0]
        return result

    def _tool_set_gripper(self, gripper=-1, steps=5):
        if gripper > 0 and not self.holding:
            close = np.linalg.norm(self.pos[:2] - self.obj[:2]) < 0.025 and -0.04 <= self.pos[2] - self.obj[2] <= 0.01
            self.holding = bool(close)
        elif gripper < 0:
            self._drop()
        self.gripper = float(gripper)
        self.env_steps += steps
        return {"gripper": self.gripper, "steps": steps, "terminated": self._solved, "truncated": False,
                "_images": self._images()}

    def _drop(self):
        if self.holding:
            self.holding = False
            near = np.linalg.norm(self.obj[:2] - self.target[:2]) < 0.06
            low = self.obj[2] - self.target[2] < 0.15
            self._solved = self._solved or bool(near and low)

    def _tool_release(self, max_steps=20):
        self._drop()
        self.gripper = -1.0
        self.env_steps += 10
        return {"steps_used": 10, "start_opening": 0.03, "peak_opening": 0.08, "final_opening": 0.08,
                "terminated": self._solved, "truncated": False, "_images": self._images()}
