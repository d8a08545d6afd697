"""The Meta-World toolkit: the planner's tools over a Meta-World env server (agent side).

Imports no simulator (the env server runs in its own environment). Tools:

* motion (stateful): ``move_to`` (absolute hand target, m, world frame), ``move_delta``
  (relative, m), ``set_gripper`` (open / close), ``expert_policy`` (Meta-World's scripted expert
  for this task, run closed loop inside the env server, one action per env step);
* perception (read-only): ``view_env_state``, ``render_camera`` (any scene camera, on demand),
  ``segment`` (MuJoCo's segmentation rendering: mask, bbox, world centroid of a body);
* episode and operator: ``finish``, ``request_operator_verdict``, ``request_scene_reset``
  (:class:`rpent.robots.libero.toolkit.operator.OperatorTools`, shared).

Sawyer action space (metaworld 3.1.1 ``SawyerXYZEnv``): one env step takes ``[dx, dy, dz, grip]``
in [-1, 1]; the hand's mocap target moves ``0.01 m`` per unit per step in the world frame (so at
most 1 cm per axis per step) inside the box x [-0.5, 0.5], y [0.40, 1.0], z [0.05, 0.5] m;
``grip`` -1 opens and +1 closes the fingers (a torque: it is applied at every step, so the
toolkit repeats the last gripper command with every motion step). World frame: MuJoCo's, z up,
the robot base at the origin facing +y.

After every stateful tool a step is captured into the run record (``agentview.png`` = camera
``corner``, ``wrist.png`` = camera ``gripperPOV``, 256 px, natural orientation;
``agentview_seg.npz`` body ids; ``*_metadata.json`` camera model), as in the LIBERO toolkit;
``episode.mp4`` gets one 224 px main-camera frame every :data:`VIDEO_EVERY` env steps (80 Hz
control, 20 fps video: the video plays in real time).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Callable, Literal

import numpy as np
from pydantic import Field

from rpent.robots.libero.toolkit.operator import NoOperator, Operator, OperatorTools
from rpent.run.record import dumps_json, encode_png
from rpent.toolkit.base import Toolkit, ToolCancelled, strip_images
from rpent.toolkit.registry import tool

__all__ = ["MetaWorldToolkit", "ACTION_SCALE_M", "HAND_LOW", "HAND_HIGH", "GAIN", "CAPTURE_SIZE"]

#: Hand displacement per action unit per env step (m): ``SawyerXYZEnv.action_scale`` = 1/100.
ACTION_SCALE_M = 0.01
#: The mocap box (m, world): ``SawyerXYZEnv`` ``mocap_low`` / ``mocap_high`` of the MT envs.
HAND_LOW = np.array([-0.5, 0.40, 0.05])
HAND_HIGH = np.array([0.5, 1.0, 0.5])
#: Proportional gain of ``move_to`` (action = gain * error in m, clipped to [-1, 1]); the gain the
#: Meta-World expert policies use (``metaworld.policies.action.move(..., p=10)`` and up to 25).
GAIN = 10.0
#: Env steps per episode video frame: Meta-World steps are 12.5 ms (80 Hz) and ``episode.mp4``
#: plays at 20 fps, so every 4th step gives a real-time video (and a quarter of the renders).
VIDEO_EVERY = 4
#: Edge (px) of the per-step renders.
CAPTURE_SIZE = 256
#: Episode keys of ``env.get_env_meta`` copied to ``states.json`` ``episode``.
EPISODE_KEYS = ("robot", "suite", "task", "seed", "max_episode_steps", "env_name", "task_variant",
                "n_task_variants", "benchmark_seed", "rand_vec_sha256", "init_state_id", "init_state_sha256",
                "metaworld", "mujoco")
_ALLOWED_AFTER_END = ("request_scene_reset",)


def _round(v: Any, n: int = 4) -> list[float]:
    return [round(float(x), n) for x in np.asarray(v).reshape(-1)]


class MetaWorldToolkit(OperatorTools, Toolkit):
    """Tools for one Meta-World episode (see the module docstring).

    Args:
        env: a :class:`rpent.robots.metaworld.env_client.MetaWorldEnvClient` (checked meta).
        record: the run's :class:`rpent.run.record.RunRecord`.
        vla, sam3: accepted for the run layer's uniform call; unused (no VLA / SAM3 tools here).
        operator: answers verdict / scene-reset requests (default :class:`NoOperator`).
        recorder: a :class:`rpent.recording.TrajectoryRecorder` (actions float32[4], state float32[4]) or None.
        on_event: UI callback (``tool_call``, ``tool_result``, ``step``, ``frames``, ``operator_request``).
        video: write ``episode.mp4``.
        require_operator_verdict: refuse ``finish`` until an operator verdict exists.
    """

    def __init__(self, env, record, *, vla=None, sam3=None, operator: Operator | None = None, recorder=None,
                 on_event: Callable[[dict], None] | None = None, video: bool = True,
                 require_operator_verdict: bool = False) -> None:
        super().__init__(on_event=on_event)
        self.env, self.record, self.vla, self.sam3 = env, record, None, None
        self.operator = operator or NoOperator()
        self.recorder = recorder
        self.video = video
        self.require_operator_verdict = require_operator_verdict
        self.operator_verdict = self.operator_verdict_record = None
        self.operator_verdicts: list[dict] = []
        self._grip = -1.0  # gripper command repeated with every motion step (-1 open, +1 closed)
        self._call_id: str | None = None
        self._current_tool: str | None = None
        self._segment_n = 0
        self._state: dict = {}
        self._start()

    # ------------------------------------------------------------------ episode state
    def _start(self) -> None:
        obs = self.env.reset()
        self._state = {**obs, **self.env.status()}
        meta = getattr(self.env, "meta", None) or {}
        self.record.set_episode({k: meta.get(k) for k in EPISODE_KEYS if k in meta})
        self.capture_step(command=None, result=None, elapsed_s=None)

    def reset_episode(self) -> None:
        """Restart the episode (scene reset confirmed by the operator)."""
        obs = self.env.reset()
        self._state = {**obs, **self.env.status()}
        self._grip = -1.0

    def current_state(self) -> dict:
        """The latest robot obs and episode flags (``hand_pos``, ``steps``, ``success``, ...)."""
        return self._state

    def solved(self) -> bool:
        """The environment's own success predicate (Meta-World's ``info["success"]``) now."""
        return bool(self.env.status().get("success"))

    def episode_over(self) -> str | None:
        """Why no motion may run now, or None."""
        steps = self._state.get("steps")
        if self.finish_result is not None:
            return f"episode is over (finish was called at step {steps}); no further robot motion"
        if self._state.get("truncated"):
            return f"episode is over (truncated at step {steps}); call finish"
        if self._state.get("terminated"):
            return f"episode is over (terminated at step {steps} with the task solved); call finish"
        return None

    def env_step(self, action: Any, *, expert: bool = False) -> dict:
        """Execute one float[4] action (the only place the toolkit advances physics).

        Checks the cancel flag first (raises :class:`ToolCancelled`), records the action with the
        observation before it (trajectory recording), adds the video frame. Returns the state
        after the step (with ``expert_action`` for the next step when ``expert``).
        """
        self.check_cancel()
        recording = self.recorder is not None
        observe_all = recording and getattr(self.recorder, "observations", "vla") == "all"
        if observe_all and self._state.get("_policy_obs") is None:
            self._state["_policy_obs"] = self.env.policy_obs()
        before = self._state.get("_policy_obs") or {"state": self._state.get("state")}
        video_frame = self.video and (int(self._state.get("steps", 0)) + 1) % VIDEO_EVERY == 0
        observe = "policy" if observe_all else ("main" if video_frame else None)
        r = self.env.step(np.asarray(action, dtype=np.float64), observe=observe, expert=expert)
        after = r.pop("policy_obs", None)
        if recording:
            self.recorder.record_action(np.asarray(action, dtype=np.float32), before, call_id=self._call_id,
                                        source="scripted", reward=float(r["reward"]),
                                        terminated=bool(r["terminated"]), truncated=bool(r["truncated"]),
                                        step=int(r["steps"]) - 1)
        frame = after["main_image"] if after is not None else r.pop("frame", None)
        if video_frame and frame is not None:
            self.record.add_video_frame(np.asarray(frame, dtype=np.uint8))
        self._state = {**r.pop("obs"), **r, "_policy_obs": after}
        return self._state

    def _ended(self) -> bool:
        return bool(self._state.get("truncated") or self._state.get("terminated"))

    def _summary(self) -> dict:
        s = self._state
        return {"hand_pos": _round(s.get("hand_pos", [0, 0, 0])), "gripper_opening": round(float(s.get("gripper_opening", 0)), 4),
                "env_steps": int(s.get("steps", 0)), "success": bool(s.get("success")),
                "terminated": bool(s.get("terminated")), "truncated": bool(s.get("truncated"))}

    # ------------------------------------------------------------------ motion tools
    @tool()
    def move_to(self, x: Annotated[float, Field(description="hand target x (m, world frame)")],
                y: Annotated[float, Field(description="hand target y (m, world frame)")],
                z: Annotated[float, Field(description="hand target z (m, world frame; table top is about 0.0)")],
                max_steps: Annotated[int, Field(ge=1, le=500, description="env steps at most")] = 150,
                tolerance_m: Annotated[float, Field(gt=0, le=0.1, description="stop when closer than this (m)")] = 0.005
                ) -> dict:
        """Move the hand (gripper center) to (x, y, z) in the world frame (metres, z up), keeping
        the gripper command. Closed loop: each env step sends action = clip(10 * error, -1, 1),
        i.e. at most 1 cm per axis per step. The target is clipped to the reachable box
        x [-0.5, 0.5], y [0.40, 1.0], z [0.05, 0.5]. Returns the reached hand position, the
        remaining error (m) and the env steps used."""
        target = np.clip(np.array([x, y, z], dtype=np.float64), HAND_LOW, HAND_HIGH)
        return self._servo(target, max_steps, tolerance_m)

    @tool()
    def move_delta(self, dx: Annotated[float, Field(ge=-0.5, le=0.5, description="m, world x")] = 0.0,
                   dy: Annotated[float, Field(ge=-0.5, le=0.5, description="m, world y")] = 0.0,
                   dz: Annotated[float, Field(ge=-0.5, le=0.5, description="m, world z")] = 0.0,
                   max_steps: Annotated[int, Field(ge=1, le=500)] = 150) -> dict:
        """Move the hand by (dx, dy, dz) metres in the world frame from where it is now (same
        controller and limits as move_to)."""
        start = np.asarray(self._state.get("hand_pos"), dtype=np.float64)
        target = np.clip(start + np.array([dx, dy, dz]), HAND_LOW, HAND_HIGH)
        return self._servo(target, max_steps, 0.005)

    def _servo(self, target: np.ndarray, max_steps: int, tol: float) -> dict:
        used = 0
        for _ in range(max_steps):
            err = target - np.asarray(self._state["hand_pos"], dtype=np.float64)
            if np.linalg.norm(err) < tol or self._ended():
                break
            self.env_step(np.concatenate([np.clip(GAIN * err, -1.0, 1.0), [self._grip]]))
            used += 1
        err = float(np.linalg.norm(target - np.asarray(self._state["hand_pos"])))
        out = {"target": _round(target), "error_m": round(err, 4), "steps_used": used, **self._summary()}
        if err >= tol:
            out["note"] = (f"target not reached within {max_steps} steps (error {err:.3f} m): blocked by an object "
                           "or the episode ended")
        return out

    @tool()
    def set_gripper(self, closed: Annotated[bool, Field(description="true: close (grasp), false: open")],
                    steps: Annotated[int, Field(ge=1, le=100, description="env steps to hold the hand still while "
                                                                          "the fingers move")] = 15) -> dict:
        """Close (grip +1) or open (grip -1) the fingers while holding the hand in place; the command
        stays applied to later motions. Returns gripper_opening (about 1 open, ~0.4-0.7 around a
        grasped object, near 0 closed on nothing)."""
        self._grip = 1.0 if closed else -1.0
        hold = np.asarray(self._state["hand_pos"], dtype=np.float64)
        for _ in range(steps):
            if self._ended():
                break
            err = hold - np.asarray(self._state["hand_pos"], dtype=np.float64)
            self.env_step(np.concatenate([np.clip(GAIN * err, -1.0, 1.0), [self._grip]]))
        return {"gripper_command": self._grip, **self._summary()}

    @tool()
    def expert_policy(self, max_steps: Annotated[int, Field(ge=1, le=500, description="env steps at most")] = 500
                      ) -> dict:
        """Run Meta-World's scripted expert policy for this task (metaworld.policies, the
        benchmark's own hand-written controller) closed loop inside the env server, one action per
        env step, until the environment reports success (the episode terminates there), max_steps,
        or the episode's step limit. Returns success, the env steps used and the final hand position."""
        used = 0
        nxt = self.env.expert_action()
        while used < max_steps and not self._ended():
            state = self.env_step(nxt, expert=True)
            nxt = state.pop("expert_action")
            used += 1
        self._grip = float(np.sign(nxt[3])) if nxt[3] != 0 else self._grip
        return {"policy": f"metaworld expert ({self.env.meta.get('env_name')})", "steps_used": used, **self._summary()}

    # ------------------------------------------------------------------ perception tools
    @tool(readonly=True)
    def view_env_state(self) -> dict:
        """The latest step: hand position (m, world), gripper opening, object / goal positions from
        the simulator (m, world; object2 is zeros for single-object tasks), episode flags, and the
        main (corner) and wrist (gripperPOV) images."""
        return self.step_view(len(self.record.steps) - 1)

    @tool(readonly=True)
    def render_camera(self, camera: Annotated[Literal["corner", "corner2", "corner3", "corner4", "topview",
                                                      "gripperPOV", "behindGripper"],
                                              Field(description="a camera of the Meta-World scene")] = "corner",
                      size: Annotated[int, Field(ge=64, le=1024, description="image edge (px)")] = 512) -> dict:
        """Render one camera of the present scene (natural orientation, row 0 = top) and return it
        as an image. Nothing moves."""
        r = self.env.render_camera(camera, size, size)
        png = encode_png(np.asarray(r["rgb"], dtype=np.uint8))
        return {"camera": camera, "size": size, "_images": [{"label": f"{camera} {size}px", "png": png}]}

    @tool(readonly=True)
    def segment(self, name: Annotated[str, Field(min_length=1, description="body name or part of it: obj, goal, "
                                                                           "hand, leftpad, ...")],
                camera: Literal["corner", "corner2", "corner3", "corner4", "topview", "gripperPOV",
                                "behindGripper"] = "corner") -> dict:
        """Find a body in a camera image with MuJoCo's segmentation rendering (the simulator's own
        labels, source "sim_oracle"): its pixel count, bounding box and centroid (row, col; natural
        orientation) and the world position (m) of its visible surface's centroid from the depth render."""
        r = self.env.segment(name, camera, CAPTURE_SIZE)
        mask = np.asarray(r.pop("mask"), dtype=bool)
        with_lock = self._segment_n
        self._segment_n += 1
        idx = len(self.record.steps) - 1
        rgb = np.asarray(self.env.render_camera(camera, CAPTURE_SIZE, CAPTURE_SIZE)["rgb"], dtype=np.uint8)
        overlay = rgb.copy()
        overlay[mask] = (0.5 * overlay[mask] + 0.5 * np.array([0, 255, 0])).astype(np.uint8)
        out = {k: (_round(v) if isinstance(v, np.ndarray) else v) for k, v in r.items()}
        out["source"] = "sim_oracle"
        self.record.add_artifact_to_step(idx, f"segment_{with_lock:02d}.json", dumps_json(out).encode("utf-8"))
        self.record.add_artifact_to_step(idx, f"segment_overlay_{with_lock:02d}.png", encode_png(overlay))
        out["_images"] = [{"label": f"segment {name} ({camera})", "png": encode_png(overlay)}]
        return out

    # ------------------------------------------------------------------ hooks
    def refuse_call(self, name, kwargs, call_id, stateful):  # noqa: D102
        if not stateful:
            return None
        why = self.episode_over()
        if why is None or (name in _ALLOWED_AFTER_END and self.finish_result is None):
            return None
        self.record.add_failed_call(call_id, name, kwargs, why, code="episode_over")
        return {"error": why, "code": "episode_over"}

    def note_undelivered(self, call_id: str, reason: str) -> None:
        """The result of ``call_id`` never reached the planner: mark its record."""
        self.record.mark_undelivered(call_id, reason)

    def before_call(self, name, kwargs, call_id, stateful):  # noqa: D102
        if stateful:
            self._call_id, self._current_tool = call_id, name
            self._t_call = time.monotonic()
            self._steps_before = int(self._state.get("steps", 0))
        if self.recorder is not None:
            self.recorder.begin_tool_call(call_id, name, kwargs)

    def after_call(self, name, kwargs, call_id, result):  # noqa: D102
        if self.recorder is not None:
            self.recorder.end_tool_call(call_id, result, result.get("error"))

    def after_stateful(self, name, kwargs, call_id, result):  # noqa: D102
        if "error" in result and int(self._state.get("steps", 0)) == self._steps_before:
            self.record.add_failed_call(call_id, name, kwargs, str(result["error"]))
            return result
        elapsed = time.monotonic() - getattr(self, "_t_call", time.monotonic())
        try:
            idx = self.capture_step({"action": name, **kwargs}, strip_images(result), elapsed)
        except Exception as exc:  # noqa: BLE001 — the motion happened; report the capture problem
            result["state_capture_error"] = f"{type(exc).__name__}: {exc}"
            self.record.add_failed_call(call_id, name, kwargs, result["state_capture_error"],
                                        state_capture_error=result["state_capture_error"])
            return result
        view = self.step_view(idx)
        images = view.pop("_images")
        return {**result, "state_after": view, "_images": images}

    # ------------------------------------------------------------------ step capture
    def capture_step(self, command: dict | None, result: dict | None, elapsed_s: float | None) -> int:
        """Render and store a new step; returns its index."""
        cap = self.env.capture(size=CAPTURE_SIZE, segmentation=True)
        robot, status, objects = cap["robot"], cap["status"], cap["objects"]
        artifacts: dict[str, bytes] = {}
        for role, render in cap["cameras"].items():
            artifacts[f"{role}.png"] = encode_png(np.asarray(render["rgb"], dtype=np.uint8))
            meta = dict(render["meta"])
            if "segmentation" in render:
                from rpent.robots.libero.toolkit.observation import npz_bytes

                artifacts[f"{role}_seg.npz"] = npz_bytes(ids=np.asarray(render["segmentation"], dtype=np.int32))
                meta["segmentation_ids"] = dict(render.get("segmentation_ids", {}))
            artifacts[f"{role}_metadata.json"] = dumps_json(meta).encode("utf-8")
        state = {"hand_pos": _round(robot["hand_pos"], 5), "gripper_opening": round(float(robot["gripper_opening"]), 5),
                 "state": _round(robot["state"], 6), "object_pos": _round(objects["object"]["pos"], 5),
                 "object2_pos": _round(objects["object2"]["pos"], 5), "goal_pos": _round(objects["goal"]["pos"], 5),
                 "terminated": bool(status["terminated"]), "truncated": bool(status["truncated"]),
                 "success": bool(status["success"]), "env_steps": int(status["steps"])}
        idx = self.record.add_step(state, artifacts, command=command, result=result, elapsed_s=elapsed_s,
                                   call_id=self._call_id if command is not None else None)
        self._emit({"kind": "step", "step": idx, "env_steps": state["env_steps"], "terminated": state["terminated"],
                    "truncated": state["truncated"], "success": state["success"], "tool": (command or {}).get("action")})
        self._emit({"kind": "frames", "step": idx, "main": artifacts["agentview.png"], "wrist": artifacts["wrist.png"]})
        return self.record.steps[idx]["step_idx"]

    def step_view(self, idx: int) -> dict:
        """``view_env_state`` of a recorded step, with the main and wrist images."""
        s = self.record.steps[idx]
        view = {"step": idx, "env_steps": s.get("env_steps"), "terminated": s["terminated"], "truncated": s["truncated"],
                "success": s["success"],
                "state": {k: s["state"][k] for k in ("hand_pos", "gripper_opening", "object_pos", "object2_pos",
                                                     "goal_pos") if k in s["state"]},
                "task_language": self.env.meta.get("task_language"), "artifacts": s["artifacts"]}
        if "command" in s:
            view["log"] = {"command": s["command"], "elapsed_s": s.get("elapsed_s")}
        view["image_note"] = "agentview = camera corner, wrist = camera gripperPOV; natural orientation (row 0 = top)"
        view["_images"] = [{"label": f"{cam} step {idx}", "png": self.record.artifact_path(f"{cam}.png", idx).read_bytes()}
                           for cam in ("agentview", "wrist")]
        return view

    def close(self) -> None:
        """Finish the episode video. Idempotent."""
        self.record.close_video()
