"""The LIBERO toolkit: the planner's tools over an env server (and optional VLA / SAM3 services).

Tools (RPent reference §3.3; names, parameters, defaults and units as upstream):

* motion (stateful, :mod:`.motion`): ``move_to``, ``move_pose``, ``rotate_wrist``, ``rotate_pitch``,
  ``set_gripper``, ``release``
* VLA (stateful, :mod:`.vla`): ``pi0_pick``, ``pi0_doubled`` — left out when no VLA is configured
* perception (read-only, :mod:`.perception`): ``view_env_state``, ``view_camera_meta``,
  ``back_project``, ``segment``
* episode and operator (:mod:`.operator`): ``finish``, ``request_operator_verdict``,
  ``request_scene_reset``

The execution contract (errors as results, locking, cancellation, ``_images``, ``_finish``) is
:class:`rpent.robots.libero.toolkit.base.Toolkit`. After every stateful tool the toolkit
records a new step into the run record and returns the tool's result plus the new state.

What a step holds depends on the capture mode (``capture=``, :data:`CAPTURE_MODES`):

* ``"every_step"`` (LLM planners; the default): both cameras are rendered after every motion
  (RGB, depth, world map, instance segmentation; :mod:`.observation`) and the result carries
  the agentview and wrist images.
* ``"on_demand"`` (planners that read state, not images: ``scripted``, ``flash``): a motion step
  is recorded with its state but **no images** (``"capture": "state_only"`` in ``states.json``);
  a camera of the **latest** step is rendered when a tool reads it (``segment``,
  ``back_project``, ``view_env_state``, ``view_camera_meta``; :data:`IMAGE_TOOLS`) and its
  artifacts are added to that step (``"capture": "on_demand"``, ``"rendered_cameras"``).
  ``finish`` (and an operator request, whose window shows the latest frames) renders both cameras
  of the latest step first, so every record ends with the final scene. An earlier state-only step cannot get images any more (the simulator renders only the
  present): a tool asking for one gets a one-line error naming the step. Rendering dominates a
  scripted episode on a CPU-only machine (two 256 px cameras with depth and segmentation cost
  more than the physics of a whole motion; ``benchmarks/scripted_bench.py --baseline``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control, geometry
from rpent.toolkit.base import Toolkit, ToolCancelled, ToolServiceError, strip_images
from rpent.robots.libero.toolkit.motion import MotionTools
from rpent.robots.libero.toolkit.observation import CAMERAS, CAPTURE_SIZE, HIGH_SIZE, camera_artifacts
from rpent.robots.libero.toolkit.operator import NoOperator, Operator, OperatorTools, TerminalOperator
from rpent.robots.libero.toolkit.perception import PerceptionTools
from rpent.toolkit.registry import ToolSpec
from rpent.robots.libero.toolkit.vla import VlaTools

__all__ = ["LiberoToolkit", "ToolSpec", "Toolkit", "ToolCancelled", "ToolServiceError", "Operator",
           "TerminalOperator", "NoOperator", "strip_images", "CAPTURE_MODES", "IMAGE_TOOLS"]

#: Step capture modes (module doc): images after every motion, or only where a tool looks.
CAPTURE_MODES = ("every_step", "on_demand")
#: Read-only tools that read a step's camera artifacts (``camera`` argument; both for ``view_env_state``).
IMAGE_TOOLS = ("segment", "back_project", "view_env_state", "view_camera_meta")

_STATE_KEYS = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")
#: recorded too where the env server gives it (the arm's joint angles, rad; older servers do not)
_OPTIONAL_STATE_KEYS = ("robot0_joint_pos",)


def _step_state(robot: Mapping[str, Any], status: Mapping[str, Any]) -> dict:
    """A recorded step's ``state``: the robot keys (:data:`_STATE_KEYS`, and
    :data:`_OPTIONAL_STATE_KEYS` where given) and the episode flags and env steps of ``status``."""
    state = {k: robot[k] for k in (*_STATE_KEYS, *_OPTIONAL_STATE_KEYS) if k in robot}
    state.update(terminated=status["terminated"], truncated=status["truncated"], success=status["success"],
                 env_steps=status["steps"])
    return state


#: ``env.get_env_meta`` keys copied to ``states.json`` ``episode`` (which init state was loaded).
EPISODE_KEYS = ("suite", "task", "seed", "libero_type", "max_episode_steps", "init_state_id",
                "init_state_global_id", "n_init_states", "init_state_sha256")
#: Stateful tools still allowed after the episode ended by truncation/termination (not after finish).
_ALLOWED_AFTER_END = ("request_scene_reset",)


class LiberoToolkit(MotionTools, VlaTools, PerceptionTools, OperatorTools, Toolkit):
    """Tools for one LIBERO episode.

    Args:
        env: an :class:`rpent.robots.libero.env_client.EnvClient` (checked meta).
        record: the run's :class:`rpent.run.record.RunRecord`.
        vla: an ``RpcClient`` of a predict-contract server (``vla.predict``) or None: without it
            ``pi0_pick``/``pi0_doubled`` are left out of the tool list.
        sam3: an ``RpcClient`` of the SAM3 server (``sam3.segment``) or None: ``segment`` then
            answers from the simulator's instance segmentation (``source: "sim_oracle"``).
        operator: answers verdict / scene-reset requests (default :class:`NoOperator`).
        recorder: a :class:`rpent.recording.TrajectoryRecorder` or None.
        on_event: UI/recording callback for ``tool_call``, ``tool_result``, ``step``, ``frames``,
            ``operator_request`` events (docs/interfaces.md).
        video: write ``episode.mp4`` (one agentview frame per env step, 20 fps, natural orientation).
        require_operator_verdict: refuse ``finish`` until an operator verdict exists.
        capture: ``"every_step"`` (default) or ``"on_demand"``: when step images are rendered
            (module doc).

    Raises:
        ValueError: an unknown ``capture`` mode.

    Once the episode is over (the env reports ``truncated`` or ``terminated``) or ``finish`` was
    called, stateful tools are refused with a one-line error (``code: "episode_over"``) and add
    no record step; ``request_scene_reset`` still restarts an ended (not finished) episode. Every
    stateful call that ends in an error without a new step is listed in ``states.json``
    ``failed_calls``.
    """

    #: capture modes this toolkit accepts (``capture=``; the runner passes ``--step-images``)
    CAPTURE_MODES = CAPTURE_MODES

    def __init__(self, env, record, *, vla=None, sam3=None, operator: Operator | None = None, recorder=None,
                 on_event: Callable[[dict], None] | None = None, video: bool = True,
                 require_operator_verdict: bool = False, capture: str = "every_step") -> None:
        if capture not in CAPTURE_MODES:
            raise ValueError(f"capture must be one of {', '.join(CAPTURE_MODES)}, got {capture!r}")
        super().__init__(on_event=on_event)
        self.capture = capture
        self.env = env
        self.record = record
        self.vla = vla
        self.sam3 = sam3
        self.operator = operator or NoOperator()
        self.recorder = recorder
        self.video = video
        self.require_operator_verdict = require_operator_verdict
        self.operator_verdict: str | None = None
        self.operator_verdict_record: dict | None = None
        self.operator_verdicts: list[dict] = []
        self._segment_n = 0
        self._seg_lock = threading.Lock()
        self._call_id: str | None = None
        self._state: dict = {}
        self._policy_obs: dict | None = None
        if vla is None:
            reason = "no VLA service configured (pass --vla-endpoint or set PI05_CHECKPOINT_PATH)"
            self.disable("pi0_pick", reason)
            self.disable("pi0_doubled", reason)
        self._start()

    # ------------------------------------------------------------------ episode state
    def _start(self) -> None:
        # every run starts a fresh episode from the init state, also on an attached env server that
        # served an earlier run (otherwise a solved scene would be credited to this run)
        obs = self.env.reset()
        status = self.env.status()
        self._state = {**obs, **status}
        meta = getattr(self.env, "meta", None) or {}
        self.record.set_episode({k: meta.get(k) for k in EPISODE_KEYS if k in meta})
        self.capture_step(command=None, result=None, elapsed_s=None)

    def reset_episode(self) -> None:
        """Restart the episode from its init state (scene reset confirmed by the operator)."""
        obs = self.env.reset()
        self._state = {**obs, **self.env.status()}
        self._policy_obs = None

    def current_state(self) -> dict:
        """The latest robot state and episode flags (``robot0_eef_pos``, ..., ``terminated``, ``truncated``)."""
        return self._state

    def solved(self) -> bool:
        """The environment's own success predicate (LIBERO BDDL goal), never the planner's claim."""
        return bool(self._state.get("success")) or bool(self.env.status().get("success"))

    def sim_instability(self) -> dict | None:
        """Where the simulation blew up this episode (``LiberoSim.instability``: env step, MuJoCo
        warning, DOF, joint, body, one-line ``detail``), or None: stable, or an env without the check."""
        method = getattr(self.env, "instability", None)
        if method is None:
            return None
        found = method()
        return dict(found) if isinstance(found, dict) else None

    def policy_obs(self) -> dict:
        """The current VLA observation (main/wrist 256x256x3 uint8 in VLA orientation, 8-D state);
        rendered now unless the last VLA step already returned it."""
        if self._policy_obs is None:
            self._policy_obs = self.env.policy_obs()
        return self._policy_obs

    def env_step(self, action: Any, source: str = "scripted", pred_id: str | None = None,
                 index_in_chunk: int | None = None) -> dict:
        """Execute one env action (the only place the toolkit advances physics).

        Checks the cancel flag first (raises :class:`ToolCancelled`), steps the env server,
        appends the video frame, and records the action with the observation before it when
        trajectory recording is on. Rendering follows "render only what is needed": a scripted
        step renders only the video frame (and is recorded with its 8-D state, no images); a
        VLA step also renders the wrist camera, because the next action of its chunk needs the
        full policy observation it was taken from (the flywheel export's frames). With a recorder
        in ``observations="all"`` mode (``--record-observations all``, for the flywheel's rule set
        v2) every step renders the policy observation, scripted steps included.

        Args:
            action: (7,) OSC_POSE delta action (reference §3.2).
            source: ``"scripted"`` or ``"vla"``.
            pred_id, index_in_chunk: VLA link (``source="vla"`` only).
        Returns:
            the step's state (flat robot obs + reward/terminated/truncated/success/steps).
        """
        self.check_cancel()
        recording = self.recorder is not None
        observe_all = recording and getattr(self.recorder, "observations", "vla") == "all"
        if recording and (source == "vla" or observe_all):
            observe = "policy"
        else:
            observe = "main" if self.video else None
        if observe_all and self._policy_obs is None:
            self.policy_obs()  # first step after start/reset: render the observation this action is taken from
        before = self._policy_obs if self._policy_obs is not None else {"state": self._state.get("state")}
        r = self.env.step(action, observe=observe)
        after = r.pop("policy_obs", None)
        if recording:
            self.recorder.record_action(
                np.asarray(action, dtype=np.float32), before, call_id=self._call_id, source=source,
                reward=float(r["reward"]), terminated=bool(r["terminated"]), truncated=bool(r["truncated"]),
                step=int(r["steps"]) - 1, pred_id=pred_id, index_in_chunk=index_in_chunk)
        self._policy_obs = after  # None after a scripted step: the next VLA query renders afresh
        # the video is for people: natural orientation, like agentview.png (VLA frames are mirrored back)
        frame = geometry.policy_to_natural(after["main_image"]) if after is not None else r.pop("frame", None)
        if self.video and frame is not None:
            self.record.add_video_frame(frame)
        state = {**r.pop("obs"), **r}
        self._state = state
        return state

    # ------------------------------------------------------------------ recording hooks
    def begin_prediction(self, prompt: str, chunk: np.ndarray) -> str | None:
        """Register a VLA chunk with the trajectory recorder; returns its pred_id (None when off)."""
        if self.recorder is None:
            return None
        return self.recorder.begin_prediction(prompt, self._call_id, self._current_tool, chunk,
                                              created_step=int(self._state.get("steps", 0)))

    def end_prediction(self, pred_id: str | None, n_executed: int) -> None:
        """Close a VLA chunk with the number of rows actually executed."""
        if self.recorder is not None and pred_id is not None:
            self.recorder.end_prediction(pred_id, n_executed)

    def episode_over(self) -> str | None:
        """Why no robot motion may run now (``"episode is over (truncated at step 5); call finish"``),
        or None while the episode runs."""
        steps = self._state.get("steps")
        if self.finish_result is not None:
            return f"episode is over (finish was called at step {steps}); no further robot motion"
        if self._state.get("truncated"):
            return f"episode is over (truncated at step {steps}); call finish"
        if self._state.get("terminated"):
            solved = " with the task solved" if self._state.get("success") else ""
            return f"episode is over (terminated at step {steps}{solved}); call finish"
        return None

    def refuse_call(self, name, kwargs, call_id, stateful):  # noqa: D102
        if not stateful:
            return self._refuse_missing_images(name, kwargs)
        why = self.episode_over()
        if why is None or (name in _ALLOWED_AFTER_END and self.finish_result is None):
            return None
        self.record.add_failed_call(call_id, name, kwargs, why, code="episode_over")
        return {"error": why, "code": "episode_over"}

    def note_undelivered(self, call_id: str, reason: str) -> None:
        """The result of ``call_id`` never reached the planner (MCP client gone): mark its record."""
        self.record.mark_undelivered(call_id, reason)

    def before_call(self, name, kwargs, call_id, stateful):  # noqa: D102
        if stateful:
            self._call_id = call_id
            self._current_tool = name
            self._t_call = time.monotonic()
            self._steps_before = int(self._state.get("steps", 0))
        if self.recorder is not None:
            self.recorder.begin_tool_call(call_id, name, kwargs)
        if self.capture == "on_demand":
            self._render_for(name, kwargs)

    def after_call(self, name, kwargs, call_id, result):  # noqa: D102
        if self.recorder is not None:
            self.recorder.end_tool_call(call_id, result, result.get("error"))

    # ------------------------------------------------------------------ step capture
    def capture_step(self, command: dict | None, result: dict | None, elapsed_s: float | None) -> int:
        """Store a new step and return its index: rendered (:mod:`.observation`) in ``every_step``
        mode, state-only in ``on_demand`` mode (:meth:`_state_only_step`)."""
        if self.capture == "on_demand":
            return self._state_only_step(command, result, elapsed_s)
        cap = self.env.capture(size=CAPTURE_SIZE, cameras=list(CAMERAS), depth=True,
                               segmentation=[] if self.sam3 is not None else list(CAMERAS))
        artifacts: dict[str, bytes] = {}
        for cam, render in cap["cameras"].items():
            artifacts.update(camera_artifacts(cam, render))
        robot, status = cap["robot"], cap["status"]
        state = _step_state(robot, status)
        idx = self.record.add_step(state, artifacts, command=command, result=result, elapsed_s=elapsed_s,
                                   call_id=self._call_id if command is not None else None)
        step = self.record.steps[idx]
        self._emit({"kind": "step", "step": idx, "env_steps": status["steps"], "terminated": status["terminated"],
                    "truncated": status["truncated"], "success": status["success"],
                    "tool": (command or {}).get("action")})
        self._emit({"kind": "frames", "step": idx, "main": artifacts["agentview.png"], "wrist": artifacts["wrist.png"]})
        return step["step_idx"]

    def _state_only_step(self, command: dict | None, result: dict | None, elapsed_s: float | None) -> int:
        """Record a step with no images (``"capture": "state_only"``); returns its index.

        The state is the one the last env step returned (``robot0_eef_pos`` / ``_quat`` /
        ``robot0_gripper_qpos``, m and xyzw quaternion, world frame; episode flags and env steps),
        read from the env server when a key is missing (e.g. right after a reset): the same values
        a rendered step records (``env.capture`` reads them from the same simulator state).
        """
        cur = self._state
        if not all(k in cur for k in (*_STATE_KEYS, "steps", "terminated", "truncated", "success")):
            cur = {**self.env.robot_obs(), **self.env.status()}
            self._state = {**self._state, **cur}
        state = _step_state(cur, cur)
        idx = self.record.add_step(state, {}, command=command, result=result, elapsed_s=elapsed_s,
                                   call_id=self._call_id if command is not None else None)
        self.record.annotate_step(idx, capture="state_only")
        self._emit({"kind": "step", "step": idx, "env_steps": cur["steps"], "terminated": cur["terminated"],
                    "truncated": cur["truncated"], "success": cur["success"],
                    "tool": (command or {}).get("action")})
        return idx

    def ensure_images(self, step_idx: int, cameras: tuple[str, ...] | list[str]) -> None:
        """Render ``cameras`` of step ``step_idx`` now unless that step already has them (on-demand
        capture; the artifacts of :func:`.observation.camera_artifacts`, 256 px).

        Raises:
            ValueError: the step is not the latest one and was recorded without these images.
        """
        step = self.record.steps[step_idx]
        missing = [c for c in cameras if f"{c}.png" not in step["artifacts"]]
        if not missing:
            return
        if step_idx != len(self.record.steps) - 1:
            raise ValueError(f"step {step_idx} was recorded without {', '.join(missing)} images (a state-only "
                             "step) and the scene has moved on since; use step=-1")
        cap = self.env.capture(size=CAPTURE_SIZE, cameras=missing, depth=True,
                               segmentation=[] if self.sam3 is not None else missing)
        for cam, render in cap["cameras"].items():
            for name, data in camera_artifacts(cam, render).items():
                self.record.add_artifact_to_step(step_idx, name, data)
        rendered = sorted({*step.get("rendered_cameras", []), *missing})
        self.record.annotate_step(step_idx, capture="on_demand", rendered_cameras=rendered)
        arts = self.record.steps[step_idx]["artifacts"]
        if "agentview.png" in arts and "wrist.png" in arts:
            self._emit({"kind": "frames", "step": step_idx,
                        "main": self.record.artifact_path("agentview.png", step_idx).read_bytes(),
                        "wrist": self.record.artifact_path("wrist.png", step_idx).read_bytes()})

    def _render_for(self, name: str, kwargs: dict) -> None:
        """On-demand capture: before ``finish``, an operator request (the operator sees the latest
        step's frames) or a tool of :data:`IMAGE_TOOLS` on the latest step, render the cameras it
        reads (both for ``finish``, operator requests and ``view_env_state``)."""
        if name in ("finish", "request_operator_verdict", "request_scene_reset"):
            self._render_latest(CAMERAS)
        elif name in IMAGE_TOOLS and self.record.steps:
            cams = CAMERAS if name == "view_env_state" else (kwargs.get("camera") or "agentview",)
            try:
                idx = self.record.resolve_step(int(kwargs.get("step", -1)))
            except (IndexError, TypeError, ValueError):
                return  # the tool reports the bad step itself
            if idx == len(self.record.steps) - 1:
                self._render_latest(cams)

    def _refuse_missing_images(self, name: str, kwargs: dict) -> dict | None:
        """On-demand capture: a tool of :data:`IMAGE_TOOLS` asking for an earlier state-only step's
        camera gets a one-line error (the simulator renders only the present), not a missing file."""
        if self.capture != "on_demand" or name not in IMAGE_TOOLS or name == "view_env_state" or not self.record.steps:
            return None
        try:
            idx = self.record.resolve_step(int(kwargs.get("step", -1)))
        except (IndexError, TypeError, ValueError):
            return None  # the tool reports the bad step itself
        cam = kwargs.get("camera") or "agentview"
        if idx == len(self.record.steps) - 1 or f"{cam}.png" in self.record.steps[idx]["artifacts"]:
            return None
        return {"error": f"{name}: step {idx} was recorded without {cam} images (a state-only step) and the scene "
                         "has moved on since; use step=-1", "code": "no_images"}

    def _render_latest(self, cameras) -> None:
        """Render the latest step's missing cameras; a render failure is left to the tool (which
        then reports the missing artifact) and noted in the step (``capture_error``)."""
        if not self.record.steps:
            return
        idx = len(self.record.steps) - 1
        try:
            self.ensure_images(idx, tuple(c for c in cameras if c in CAMERAS))
        except Exception as exc:  # noqa: BLE001 — the tool's own error names what is missing
            self.record.annotate_step(idx, capture_error=f"{type(exc).__name__}: {exc}")

    def capture_high_res(self, camera: str) -> None:
        """Render the latest step's camera at 1024 px and add it to that step's artifacts."""
        render = self.env.render_camera(camera, HIGH_SIZE, HIGH_SIZE, depth=True)
        render["meta"] = self.env.camera_meta(camera, HIGH_SIZE, HIGH_SIZE)
        idx = len(self.record.steps) - 1
        for name, data in camera_artifacts(camera, render, suffix="_high").items():
            self.record.add_artifact_to_step(idx, name, data)

    def after_stateful(self, name, kwargs, call_id, result):  # noqa: D102
        if "error" in result and int(self._state.get("steps", 0)) == self._steps_before:
            # nothing moved (bad arguments, refused, a service died): no new step (upstream rollback
            # rule), but the failed call is recorded
            self.record.add_failed_call(call_id, name, kwargs, str(result["error"]),
                                        **({"error_type": result["error_type"]} if "error_type" in result else {}))
            return result
        elapsed = time.monotonic() - getattr(self, "_t_call", time.monotonic())
        try:
            idx = self.capture_step({"action": name, **kwargs}, strip_images(result), elapsed)
        except Exception as exc:  # noqa: BLE001 — the motion happened; report the capture problem
            result["state_capture_error"] = f"{type(exc).__name__}: {exc}"
            self.record.add_failed_call(call_id, name, kwargs, str(result.get("error") or result["state_capture_error"]),
                                        state_capture_error=result["state_capture_error"],
                                        env_steps_before=self._steps_before,
                                        env_steps_after=int(self._state.get("steps", 0)))
            return result
        view = self.step_view(idx)
        images = view.pop("_images")
        out = {**result, "state_after": view}
        out["_images"] = images
        return out

    def state_view(self, idx: int) -> dict:
        """The state part of :meth:`step_view` for recorded step ``idx`` (no image files read):
        step, env steps, episode flags, state with gripper opening (m) and eef yaw/pitch (rad,
        world frame), task language, artifact names and the step's command."""
        s = self.record.steps[idx]
        state = dict(s["state"])
        state["gripper_opening"] = round(control.gripper_opening(np.asarray(state["robot0_gripper_qpos"])), 4)
        state["eef_yaw"] = round(control.eef_yaw(np.asarray(state["robot0_eef_quat"])), 4)
        state["eef_pitch"] = round(control.eef_pitch(np.asarray(state["robot0_eef_quat"])), 4)
        view = {"step": idx, "env_steps": s.get("env_steps"), "terminated": s["terminated"],
                "truncated": s["truncated"], "success": s["success"], "state": state,
                "task_language": self.env.meta.get("task_language"), "artifacts": s["artifacts"]}
        if "command" in s:
            view["log"] = {"command": s["command"], "elapsed_s": s.get("elapsed_s")}
        return view

    def step_view(self, idx: int) -> dict:
        """``view_env_state`` of a recorded step, with the agentview and wrist images; a state-only
        step (on-demand capture) has none (``_images`` empty, ``image_note`` says why)."""
        view = self.state_view(idx)
        s = self.record.steps[idx]
        if not ("agentview.png" in s["artifacts"] and "wrist.png" in s["artifacts"]):
            view["image_note"] = ("state-only step: no images were rendered (on-demand capture renders the latest "
                                  "step when a tool looks at it)")
            view["_images"] = []
            return view
        images = []
        for cam in ("agentview", "wrist"):
            name = f"{cam}_high.png" if f"{cam}_high.png" in s["artifacts"] else f"{cam}.png"
            path = self.record.artifact_path(name, idx)
            images.append({"label": f"{name.removesuffix('.png')} step {idx}", "png": path.read_bytes()})
        view["image_note"] = "images in natural orientation (row 0 = top); pixels index agentview.png / wrist.png"
        view["_images"] = images
        return view

    def next_segment_index(self) -> int:
        """Running number of ``segment`` artifacts of this run."""
        with self._seg_lock:
            n = self._segment_n
            self._segment_n += 1
            return n

    def close(self) -> None:
        """Finish the episode video. Idempotent."""
        self.record.close_video()
