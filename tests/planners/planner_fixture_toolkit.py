"""TEST FIXTURE: a small, real toolkit implementing the toolkit contract of
docs/interfaces.md (``specs``, ``execute``, ``cancel``, ``clear_cancel``, ``solved``),
so the planners can be tested before the LIBERO toolkit is wired in.

It simulates a point end effector: ``move_to`` advances one "env step" every
``step_s`` seconds toward the target (at most ``step_clip`` m per step) and checks the
cancel flag between steps, like the real motion primitives. Results carry real PNG
images (``_images``). ``finish`` can be configured to refuse its first calls, like the
exploration guard (``{"error": "finish refused"}``).
"""

from __future__ import annotations

import io
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from PIL import Image


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool


def png_bytes(seed: int, size: int = 32) -> bytes:
    """A real PNG (noise-free gradient, distinct per seed) of ``size`` x ``size`` pixels."""
    img = Image.new("RGB", (size, size))
    img.putdata([((x * 7 + seed * 31) % 256, (y * 5 + seed * 17) % 256, (seed * 53) % 256)
                 for y in range(size) for x in range(size)])
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def noisy_png(seed: int, size: int) -> bytes:
    """A PNG that does not compress (for image-budget tests): ~3*size*size bytes."""
    import numpy as np

    noise = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    img = Image.fromarray(noise, "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class FixtureToolkit:
    """Point-robot toolkit (TEST FIXTURE).

    Args:
        step_s: seconds per simulated env step.
        refuse_finish: number of initial finish calls answered ``{"error": "finish refused"}``.
        image_size: side of the PNGs attached to results (pixels).
        goal: the xyz (m, world frame) where ``solved()`` becomes True (within 1 cm).
    """

    def __init__(self, step_s: float = 0.005, refuse_finish: int = 0, image_size: int = 32,
                 goal: tuple[float, float, float] = (0.1, 0.0, 0.2), noisy_images: bool = False) -> None:
        self.step_s = step_s
        self.refuse_finish = refuse_finish
        self.image_size = image_size
        self.noisy_images = noisy_images
        self.goal = goal
        self.eef = [0.0, 0.0, 0.3]
        self.steps = 0
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []
        self.cancelled_calls: list[str] = []
        self.finish_calls = 0
        self.images_made = 0
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self.running = threading.Event()

    def specs(self) -> list[Spec]:
        xyz = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3,
               "description": "target position [x, y, z] in m, world frame"}
        return [
            Spec("view_env_state", "Current state and camera image.", {"type": "object", "properties": {}}, True),
            Spec("move_to", "Servo the end effector to xyz (m, world frame).",
                 {"type": "object", "properties": {"xyz": xyz, "step_clip": {"type": "number"},
                                                   "max_steps": {"type": "integer"}},
                  "required": ["xyz"]}, False),
            Spec("wait_steps", "Hold still for n env steps.",
                 {"type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]}, False),
            Spec("finish", "End the episode.",
                 {"type": "object", "properties": {"status": {"type": "string"}, "summary": {"type": "string"}},
                  "required": ["status", "summary"]}, True),
        ]

    # -- contract --
    def cancel(self) -> None:
        self._cancel.set()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def solved(self) -> bool:
        return math.dist(self.eef, self.goal) < 0.01

    def execute(self, name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        self.calls.append((name, dict(args or {}), call_id))
        fn = getattr(self, f"_tool_{name}", None)
        if fn is None:
            return {"error": f"unknown tool: {name}"}
        try:
            with self._lock:
                return fn(**(args or {}))
        except TypeError as exc:
            return {"error": f"bad arguments for {name}: {exc}", "got": args}

    # -- tools --
    def _image(self, label: str) -> dict[str, Any]:
        make = noisy_png if self.noisy_images else png_bytes
        self.images_made += 1
        return {"label": label, "png": make(self.images_made, self.image_size)}

    def _state(self) -> dict[str, Any]:
        return {"step": self.steps, "eef_pos": [round(v, 4) for v in self.eef], "success": self.solved()}

    def _tool_view_env_state(self) -> dict[str, Any]:
        return {**self._state(), "_images": [self._image("agentview")]}

    def _run_steps(self, n: int, step_fn) -> tuple[int, bool]:
        self.running.set()
        try:
            for i in range(n):
                if self._cancel.is_set():
                    return i, True
                step_fn()
                self.steps += 1
                time.sleep(self.step_s)
            return n, False
        finally:
            self.running.clear()

    def _cancelled(self, name: str, used: int) -> dict[str, Any]:
        self.cancelled_calls.append(name)
        return {"error": f"{name} cancelled after {used} env steps", "code": "tool_cancelled",
                "interrupted": True, **self._state()}

    def _tool_move_to(self, xyz: list[float], step_clip: float = 0.025, max_steps: int = 80) -> dict[str, Any]:
        if not (isinstance(xyz, list) and len(xyz) == 3):
            return {"error": "xyz must be a list of 3 numbers (m)", "got": xyz}

        def step() -> None:
            delta = [t - e for t, e in zip(xyz, self.eef)]
            dist = math.hypot(*delta)
            scale = min(1.0, step_clip / dist) if dist > 0 else 0.0
            self.eef = [e + d * scale for e, d in zip(self.eef, delta)]

        needed = min(max_steps, math.ceil(math.dist(self.eef, xyz) / step_clip) if step_clip > 0 else 0)
        used, cancelled = self._run_steps(needed, step)
        if cancelled:
            return self._cancelled("move_to", used)
        return {**self._state(), "steps_used": used, "final_dist_m": round(math.dist(self.eef, xyz), 4),
                "_images": [self._image("agentview"), self._image("wrist")]}

    def _tool_wait_steps(self, steps: int) -> dict[str, Any]:
        used, cancelled = self._run_steps(int(steps), lambda: None)
        if cancelled:
            return self._cancelled("wait_steps", used)
        return {**self._state(), "steps_used": used}

    def _tool_finish(self, status: str, summary: str) -> dict[str, Any]:
        self.finish_calls += 1
        if self.finish_calls <= self.refuse_finish:
            return {"error": "finish refused", "detail": "the task is not solved yet; keep trying"}
        return {"_finish": True, "status": status, "summary": summary}
