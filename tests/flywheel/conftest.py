"""Flywheel tests: Hugging Face caches in a per-session temporary directory (offline), and record builders.

HF paths are set before anything imports ``datasets``/``huggingface_hub`` (they read them at import).

Records are built with the real ``TrajectoryRecorder`` (real files, real PNGs). A *plan* is a list
of tool calls executed in order:
  ``("scripted", n)``                    a scripted motion tool call of n env steps (recorded state-only,
                                          or with both images when ``observations="all"``)
  ``("vla", instruction, [n1, n2, ...])`` one VLA tool call querying chunks of 5 actions and
                                          executing n1, n2, ... of them (n <= 5)
  ``("reset",)``                          env reset: the step counter restarts at 0
The ``record_run`` fixture returns the record directory and the ground truth of every executed
action, so tests compare exported frames against what was handed to the recorder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

_HF_HOME = tempfile.mkdtemp(prefix="rpent-test-hf-")
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

from rpent.recording import TaskInfo, TrajectoryRecorder  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _hf_home_cleanup():
    yield
    shutil.rmtree(_HF_HOME, ignore_errors=True)




CHUNK = 5


@dataclass
class TruthAction:
    seq: int
    step: int
    source: str
    instruction: str | None
    action: np.ndarray
    main: np.ndarray | None
    wrist: np.ndarray | None
    state: np.ndarray
    call_id: str
    pred_id: str | None
    index_in_chunk: int | None


def make_obs(k: int, size: int = 256) -> dict:
    """Deterministic, frame-distinct, compressible observation number ``k`` (images ``size`` px square)."""
    yy, xx = np.indices((size, size))
    main = np.stack([(xx * 3 + k * 7) % 256, (yy * 5 + k * 11) % 256, ((xx + yy) + k * 13) % 256], -1).astype(np.uint8)
    wrist = np.stack([(yy * 2 + k * 17) % 256, (xx * 7 + k) % 256, ((xx * yy) // 64 + k * 3) % 256], -1).astype(np.uint8)
    state = (np.arange(8, dtype=np.float32) * 0.1 + np.float32(k) * np.float32(0.0137)).astype(np.float32)
    return {"main_image": main, "wrist_image": wrist, "state": state}


def record_run(
    output_dir: Path,
    plan: list[tuple],
    *,
    success: bool | None = True,
    status: str = "finished",
    robot: str = "libero",
    suite: str = "libero_goal",
    task: int = 0,
    seed: int = 0,
    obs_offset: int = 0,
    observations: str = "vla",
    success_seq: int | None = None,
    outcome: dict | None = None,
    image_size: int = 256,
    task_language: str = "open the top drawer",
) -> tuple[Path, list[TruthAction]]:
    """Record ``plan`` (module docstring); ``success_seq``: the action whose env step reports
    ``terminated=True`` (the first success; None: no action does); ``outcome``: the run layer's
    outcome fields for ``task.json`` (label, operator verdicts, ...; None: the recorder derives
    the label from ``success``)."""
    rng = np.random.default_rng(seed * 1000 + task + obs_offset)
    rec = TrajectoryRecorder(
        output_dir,
        TaskInfo(robot=robot, suite=suite, task=task, seed=seed, task_language=task_language,
                 planner="scripted", model=None),
        action_capture="full",
        observations=observations,
    )
    truth: list[TruthAction] = []
    step = 0
    k = obs_offset
    for n_call, item in enumerate(plan):
        call_id = f"call_{n_call}"
        if item[0] == "reset":
            step = 0
            continue
        if item[0] == "scripted":
            rec.begin_tool_call(call_id, "move_to", {"xyz": [0.1, 0.2, 0.3]})
            rec.record_planner_event("text", {"text": "moving"})
            for _ in range(item[1]):
                obs = make_obs(k, image_size)
                a = rng.uniform(-1, 1, 7).astype(np.float32)
                # scripted steps are recorded state-only (no renders), as the toolkit does by default
                full = observations == "all"
                term = len(truth) == success_seq
                seq = rec.record_action(a, obs if full else {"state": obs["state"]}, call_id=call_id, source="scripted",
                                        reward=float(term), terminated=term, truncated=False, step=step)
                truth.append(TruthAction(seq, step, "scripted", None, a, obs["main_image"] if full else None,
                                         obs["wrist_image"] if full else None, obs["state"], call_id, None, None))
                step += 1
                k += 1
            rec.end_tool_call(call_id, {"final_dist_m": 0.01})
        elif item[0] == "vla":
            _, instruction, execs = item
            rec.begin_tool_call(call_id, "pi0_pick", {"prompt": instruction})
            for n_exec in execs:
                chunk = rng.uniform(-1, 1, (CHUNK, 7)).astype(np.float32)
                pid = rec.begin_prediction(instruction, call_id, "pi0_pick", chunk)
                for i in range(n_exec):
                    obs = make_obs(k, image_size)
                    term = len(truth) == success_seq
                    seq = rec.record_action(chunk[i], obs, call_id=call_id, source="vla", pred_id=pid,
                                            index_in_chunk=i, reward=float(term), terminated=term, truncated=False,
                                            step=step)
                    truth.append(TruthAction(seq, step, "vla", instruction, chunk[i].copy(), obs["main_image"],
                                             obs["wrist_image"], obs["state"], call_id, pid, i))
                    step += 1
                    k += 1
                rec.end_prediction(pid, n_exec)
            rec.end_tool_call(call_id, {"success": True, "_images": [{"label": "main", "png": b"\x89PNG"}]})
        else:
            raise ValueError(item)
    rec.close(status, success, outcome=outcome)
    return rec.record_dir, truth


def vla_segments(truth: list[TruthAction]) -> list[list[TruthAction]]:
    """Expected episodes: contiguous runs of VLA actions (consecutive seq and step)."""
    segs: list[list[TruthAction]] = []
    prev = None
    for t in truth:
        if t.source != "vla":
            prev = None
            continue
        if prev is None or t.seq != prev.seq + 1 or t.step != prev.step + 1:
            segs.append([])
        segs[-1].append(t)
        prev = t
    return segs


@pytest.fixture(name="record_run")
def record_run_fixture():
    """The :func:`record_run` builder."""
    return record_run


@pytest.fixture(name="vla_segments")
def vla_segments_fixture():
    """The :func:`vla_segments` helper (expected episodes of a truth list)."""
    return vla_segments
