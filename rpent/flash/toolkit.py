"""The flash toolkit: the LIBERO toolkit with images rendered only where a replay looks.

A flash replay needs camera images only where it re-localises an anchor (``segment`` on one
camera at a few steps); the LIBERO toolkit renders both cameras (RGB, depth, world map,
segmentation: ~0.5 s of CPU) after every motion tool. :class:`FlashToolkit` records every
motion step as usual (state, command, result, elapsed time, env steps) but with **no images**
("state-only" steps, ``"capture": "state_only"`` in ``states.json``), and renders a camera of
the **latest** step on demand, when a read-only tool asks for it (``segment``,
``back_project``, ``view_env_state``, ``view_camera_meta``): the artifacts are then added to
that step (``"capture": "on_demand"`` with the cameras rendered). ``finish`` renders both
cameras of the final step first, so every run record ends with the final scene. An earlier
state-only step has no images and cannot get them any more (the simulator renders only the
present): a tool asking for one gets a one-line error naming the step.

Used for ``--planner flash`` (:func:`rpent.run.runner.run_task` picks it). "Render only what a
tool needs" is the rule of :mod:`rpent.robots.libero.toolkit.observation`; this applies it to the
per-step capture too.
"""

from __future__ import annotations

from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.robots.libero.toolkit.observation import CAMERAS, CAPTURE_SIZE, camera_artifacts

__all__ = ["FlashToolkit", "IMAGE_TOOLS"]

#: Read-only tools that read a step's camera artifacts (``camera`` argument; both for ``view_env_state``).
IMAGE_TOOLS = ("segment", "back_project", "view_env_state", "view_camera_meta")
_STATE_KEYS = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")


class FlashToolkit(LiberoToolkit):
    """:class:`LiberoToolkit` whose motion steps are state-only; images on demand (module doc).

    Same arguments as :class:`LiberoToolkit`.
    """

    def capture_step(self, command: dict | None, result: dict | None, elapsed_s: float | None) -> int:
        """Record a state-only step (no rendering); returns its index.

        The state is the one the last env step returned (``robot0_eef_pos`` / ``_quat`` /
        ``robot0_gripper_qpos``, m and xyzw quaternion, world frame; episode flags and env steps),
        read from the env server when a key is missing (e.g. right after a reset).
        """
        cur = self._state
        if not all(k in cur for k in (*_STATE_KEYS, "steps", "terminated", "truncated", "success")):
            cur = {**self.env.robot_obs(), **self.env.status()}
            self._state = {**self._state, **cur}
        state = {k: cur[k] for k in _STATE_KEYS}
        state.update(terminated=cur["terminated"], truncated=cur["truncated"], success=cur["success"],
                     env_steps=cur["steps"])
        idx = self.record.add_step(state, {}, command=command, result=result, elapsed_s=elapsed_s,
                                   call_id=self._call_id if command is not None else None)
        self.record.annotate_step(idx, capture="state_only")
        self._emit({"kind": "step", "step": idx, "env_steps": cur["steps"], "terminated": cur["terminated"],
                    "truncated": cur["truncated"], "success": cur["success"],
                    "tool": (command or {}).get("action")})
        return idx

    def ensure_images(self, step_idx: int, cameras: tuple[str, ...] | list[str]) -> None:
        """Render ``cameras`` of step ``step_idx`` now unless that step already has them.

        Raises:
            ValueError: the step is not the latest one and was recorded without these images.
        """
        step = self.record.steps[step_idx]
        missing = [c for c in cameras if f"{c}.png" not in step["artifacts"]]
        if not missing:
            return
        if step_idx != len(self.record.steps) - 1:
            raise ValueError(f"step {step_idx} was recorded without {', '.join(missing)} images (a state-only "
                             "flash step) and the scene has moved on since; use step=-1")
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

    def before_call(self, name, kwargs, call_id, stateful):  # noqa: D102
        super().before_call(name, kwargs, call_id, stateful)
        if name == "finish":
            self._render_latest(CAMERAS)
        elif name in IMAGE_TOOLS and self.record.steps:
            cams = CAMERAS if name == "view_env_state" else (kwargs.get("camera") or "agentview",)
            try:
                idx = self.record.resolve_step(int(kwargs.get("step", -1)))
            except (IndexError, TypeError, ValueError):
                return  # the tool reports the bad step itself
            if idx == len(self.record.steps) - 1:
                self._render_latest(cams)

    def _render_latest(self, cameras) -> None:
        """Render the latest step's missing cameras; a render failure is left to the tool (which
        then reports the missing artifact) and noted in the step."""
        if not self.record.steps:
            return
        idx = len(self.record.steps) - 1
        try:
            self.ensure_images(idx, tuple(cameras))
        except Exception as exc:  # noqa: BLE001 — the tool's own error names what is missing
            self.record.annotate_step(idx, capture_error=f"{type(exc).__name__}: {exc}")

    def step_view(self, idx: int) -> dict:
        """``view_env_state`` of a step; a state-only step has no images (``_images`` empty)."""
        arts = self.record.steps[idx]["artifacts"]
        if "agentview.png" in arts and "wrist.png" in arts:
            return super().step_view(idx)
        view = self.state_view(idx)
        view["image_note"] = "state-only flash step: no images were rendered (they are rendered when a tool looks)"
        view["_images"] = []
        return view


