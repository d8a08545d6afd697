"""VLA tools: ``pi0_pick`` (closed-loop grasp with a lift heuristic) and ``pi0_doubled``
(contact skills ended by the environment's success predicate). RPent reference §3.3.

Both run the VLA closed loop: render the policy observation, query ``vla.predict`` with the
given instruction (temporarily replacing the task description), execute the returned action
chunk (``n_exec`` actions, 5 for the LIBERO preset) one env step at a time (checking the
cancel flag between steps), and repeat. Every executed action is recorded as ``source: vla``
with its prediction id and index within the chunk when trajectory recording is on; the
prediction is closed with the number of rows actually executed (never the unexecuted tail).
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from rpent.robots.libero import control
from rpent.toolkit.base import ToolServiceError
from rpent.toolkit.registry import tool

__all__ = ["VlaTools", "DESCENT_FOR_PICK"]

#: pi0_pick success needs the eef to have descended at least this far (m) before lifting (reference §3.3).
DESCENT_FOR_PICK = 0.10
VLA_FALLBACK = "Use the scripted motion tools (move_to, set_gripper, release) instead."


class VlaTools:
    """Mixin of :class:`rpent.robots.libero.toolkit.LiberoToolkit` with the VLA tools."""

    def _predict(self, prompt: str) -> tuple[np.ndarray, dict]:
        """Query the VLA once. Returns (actions [n, 7] float32, policy observation)."""
        obs = self.policy_obs()
        batch = {
            "main_images": obs["main_image"][None],
            "wrist_images": obs["wrist_image"][None],
            "states": np.asarray(obs["state"], dtype=np.float32)[None],
            "task_descriptions": [prompt],
        }
        try:
            actions = self.vla.call("vla.predict", batch, None, timeout=120.0)
        except Exception as exc:  # noqa: BLE001
            raise ToolServiceError(f"VLA service failed: {type(exc).__name__}: {exc}", fallback=VLA_FALLBACK) from None
        actions = np.asarray(actions, dtype=np.float32)
        if actions.ndim != 3 or actions.shape[0] != 1 or actions.shape[2] < 7:
            raise ToolServiceError(f"VLA returned actions of shape {actions.shape}; expected [1, chunk, 7]",
                                   fallback=VLA_FALLBACK)
        return actions[0, :, :7], obs

    def _closed_loop(self, prompt: str, max_chunks: int, after_chunk=None) -> int:
        """Query the VLA and execute its chunk, up to ``max_chunks`` times or until the episode
        ends or ``after_chunk()`` returns True. Returns the number of chunks run."""
        chunks = 0
        for _ in range(max_chunks):
            self.check_cancel()
            if control.episode_over(self.current_state()):
                break
            chunk, _ = self._predict(prompt)
            chunks += 1
            self._run_chunk(prompt, chunk)
            if after_chunk is not None and after_chunk():
                break
        return chunks

    def _run_chunk(self, prompt: str, chunk: np.ndarray) -> int:
        """Execute one chunk; returns the number of actions executed."""
        pred_id = self.begin_prediction(prompt, chunk)
        n = 0
        try:
            for i, action in enumerate(chunk):
                if control.episode_over(self.current_state()):
                    break
                self.env_step(action, source="vla", pred_id=pred_id, index_in_chunk=i)
                n += 1
        finally:
            self.end_prediction(pred_id, n)
        return n

    @tool()
    def pi0_pick(self, prompt: Annotated[str, Field(min_length=1, description="VLA instruction, e.g. 'pick up the alphabet soup'")],
                 max_chunks: Annotated[int, Field(ge=1, le=200)] = 24,
                 lift_thresh: Annotated[float, Field(gt=0, description="re-ascent after the lowest point (m)")] = 0.05,
                 gripper_closed_thresh: Annotated[float, Field(gt=0, description="opening below which the gripper counts as holding (m)")] = 0.06) -> dict:
        """Closed-loop Pi0.5 grasp: one action chunk per iteration with `prompt` as the
        instruction. success = descended >= 0.10 m AND re-ascended >= lift_thresh after the
        lowest point AND gripper opening < gripper_closed_thresh; also stops at episode end.
        Returns name "pick", success, chunks_used, peak_lift_m, min/final gripper opening."""
        steps0 = int(self.current_state().get("steps", 0))
        s0 = control.robot_state(self.current_state())
        start_z = float(s0["eef_pos"][2])
        lowest = start_z
        min_open = final_open = control.gripper_opening(s0["gripper_qpos"])
        peak_lift = 0.0
        success = False

        def track() -> bool:
            nonlocal lowest, peak_lift, final_open, min_open, success
            rs = control.robot_state(self.current_state())
            z = float(rs["eef_pos"][2])
            lowest = min(lowest, z)
            peak_lift = max(peak_lift, z - lowest)
            final_open = control.gripper_opening(rs["gripper_qpos"])
            min_open = min(min_open, final_open)
            success = (start_z - lowest >= DESCENT_FOR_PICK and z - lowest >= lift_thresh
                       and final_open < gripper_closed_thresh)
            return success

        chunks = self._closed_loop(prompt, max_chunks, track)
        st = self.current_state()
        return {"name": "pick", "success": success, "chunks_used": chunks, "peak_lift_m": round(peak_lift, 4),
                "min_gripper_opening": round(min_open, 4), "final_gripper_opening": round(final_open, 4),
                "diagnostics": {"start_z": round(start_z, 4), "lowest_z": round(lowest, 4),
                                "descent_m": round(start_z - lowest, 4)},
                "steps_used": int(st.get("steps", 0)) - steps0,
                "terminated": bool(st.get("terminated")), "truncated": bool(st.get("truncated"))}

    @tool()
    def pi0_doubled(self, prompt: Annotated[str, Field(min_length=1, description="VLA instruction for a contact skill (knob, stove, push)")],
                    max_chunks: Annotated[int, Field(ge=1, le=200)] = 20) -> dict:
        """Closed-loop Pi0.5 contact skill until the environment reports success or
        max_chunks. success == task_success == env terminated; success=false does not mean the
        contact failed."""
        steps0 = int(self.current_state().get("steps", 0))
        chunks = self._closed_loop(prompt, max_chunks)
        st = self.current_state()
        done = bool(st.get("terminated"))
        return {"name": "doubled", "success": done, "task_success": done, "chunks_used": chunks,
                "steps_used": int(st.get("steps", 0)) - steps0,
                "terminated": done, "truncated": bool(st.get("truncated"))}
