"""Run records for TUI tests, written by the real writers (``rpent.run.record.RunRecord`` and
``rpent.recording.TrajectoryRecorder``), with fixed modification times so snapshots are stable."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
from PIL import Image

FIXED_MTIME = 1_790_000_000  # 2026-09-21, any fixed instant


def gradient(step: int, size: int = 64) -> np.ndarray:
    """A deterministic RGB uint8 image [size, size, 3] that changes with ``step``."""
    arr = np.zeros((size, size, 3), np.uint8)
    arr[..., 0] = (np.arange(size)[None, :] * 4 + step * 40) % 256
    arr[..., 1] = np.arange(size)[:, None] * 4
    arr[..., 2] = 120
    return arr


def png(arr: np.ndarray) -> bytes:
    """PNG bytes of an RGB array."""
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def build_run(root: Path, name: str = "0001_libero_goal_t0_s0", *, suite: str = "libero_goal", task: int = 0,
              seed: int = 0, steps: int = 4, success: bool = True, trajectory: bool = True,
              verdict: dict | None = None, label: str | None = None) -> Path:
    """A complete run directory: states.json + per-step ``agentview.png/NN.png``, transcript, and
    (``trajectory``) ``trajectories/<task_id>/`` with one VLA call of ``steps`` actions. ``verdict``
    (``{"answer", "notes"}``) and ``label`` go into ``taskrun.json`` as a session writes them, with the
    disagreement ``rpent.run.config.verdict_disagreement`` notes."""
    from rpent.run.record import RunRecord, run_tag

    out = root / name
    record = RunRecord(out, run_tag(suite, task, seed))
    record.set_episode({"suite": suite, "task": task, "seed": seed, "init_state_id": seed % 50,
                        "init_state_global_id": seed % 50, "n_init_states": 50, "max_episode_steps": 300})
    # env steps per recorded step: 0, 10, 20, ... without a trajectory; with one, the VLA call's
    # ``steps`` actions are env steps 0 .. steps-1, so the run ends at env step ``steps``
    env_steps = [10 * i for i in range(steps)] if not trajectory else [0] + [i + 1 for i in range(1, steps)]
    for i in range(steps):
        state = {"robot0_eef_pos": [0.1 * i, 0.0, 1.0], "env_steps": env_steps[i], "terminated": success and i == steps - 1,
                 "truncated": False, "success": success and i == steps - 1}
        command = None if i == 0 else {"action": "pi0_pick" if i == 1 else "move_to", "xyz": [0.1 * i, 0.0, 1.0]}
        record.add_step(state, {"agentview.png": png(gradient(i))}, command=command,
                        result=None if i == 0 else {"final_dist_m": 0.003 * i}, elapsed_s=0.5)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "put the bowl on the plate"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I will pick the bowl."},
                                          {"type": "tool_use", "id": "call-1", "name": "pi0_pick",
                                           "input": {"instruction": "pick up the bowl"}}]},
        {"role": "tool", "name": "pi0_pick", "tool_call_id": "call-1", "content": '{"success": true}'},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]
    from rpent.run.config import verdict_disagreement

    state = label or ("succeeded" if success else "failed")
    record.write_transcript({"suite": suite, "task": task, "seed": seed, "task_language": "put the bowl on the plate",
                             "planner": "scripted", "model": None, "policy_mode": "tools", "finish": "done",
                             "error": None, "stop_reason": None, "environment_success": success,
                             "env_steps": env_steps[-1] if steps else 0, "label": state,
                             "operator_verdict": verdict, "stats": {"elapsed_s": 0.5 * steps}, "messages": messages})
    if trajectory:
        from rpent.recording import TaskInfo, TrajectoryRecorder

        rec = TrajectoryRecorder(out, TaskInfo(robot="libero", suite=suite, task=task, seed=seed,
                                               task_language="put the bowl on the plate", planner="scripted"))
        rec.begin_tool_call("call-1", "pi0_pick", {"instruction": "pick up the bowl"})
        chunk = np.linspace(-0.5, 0.5, steps * 7, dtype=np.float32).reshape(steps, 7)
        pred = rec.begin_prediction("pick up the bowl", "call-1", "pi0_pick", chunk, created_step=0)
        for i in range(steps):
            rec.record_action(chunk[i], {"main_image": gradient(i, 256), "wrist_image": gradient(i + 3, 256),
                                         "state": np.zeros(8, np.float32)},
                              call_id="call-1", source="vla", reward=0.0, terminated=success and i == steps - 1,
                              truncated=False, step=i, pred_id=pred, index_in_chunk=i)
        rec.end_prediction(pred, steps)
        rec.end_tool_call("call-1", {"success": True})
        rec.close("finished", success)
    (out / "taskrun.json").write_text(json.dumps({
        "id": name[:4], "suite": suite, "task": task, "seed": seed, "state": state, "label": state,
        "environment_success": success, "planner": "scripted", "operator_verdict": verdict,
        "disagreement": verdict_disagreement(success, (verdict or {}).get("answer"))}))
    for path in [out, *out.rglob("*")]:
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
    return out
