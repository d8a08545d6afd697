"""The Trajectories screen opens the episodes of datasets exported by ``rpent-flywheel`` (PNG and video).

Records come from the real ``TrajectoryRecorder``, datasets from the real export (lerobot's
writer); the screen is driven by key presses in Textual's pilot.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

import numpy as np

os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="rpent-test-hf-"))  # before datasets is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rpent.recording import TaskInfo, TrajectoryRecorder  # noqa: E402
from rpent_tui.services import datasets  # noqa: E402
from tui_helpers import StandInRun, make_app, wait_for  # noqa: E402


def _frame(k: int) -> dict:
    yy, xx = np.indices((256, 256))
    img = np.stack([(xx * 3 + k * 9) % 256, (yy * 5 + k * 7) % 256, (xx + yy + k * 13) % 256], -1).astype(np.uint8)
    return {"main_image": img, "wrist_image": img[::-1].copy(), "state": np.full(8, k * 0.01, np.float32)}


def _record(out, n: int, offset: int) -> list[np.ndarray]:
    """A successful run of one VLA chunk of ``n`` executed rows; returns the actions."""
    rec = TrajectoryRecorder(out, TaskInfo(robot="libero", suite="libero_goal", task=0, seed=0,
                                           task_language="open the drawer", planner="api", model="m"),
                             action_capture="full")
    rec.begin_tool_call("c1", "pi0_pick", {})
    chunk = np.random.default_rng(offset).uniform(-1, 1, (n, 7)).astype(np.float32)
    pid = rec.begin_prediction("open the top drawer", "c1", "pi0_pick", chunk)
    for i in range(n):
        rec.record_action(chunk[i], _frame(offset + i), call_id="c1", source="vla", pred_id=pid, index_in_chunk=i,
                          reward=0.0, terminated=i == n - 1, truncated=False, step=i)
    rec.end_prediction(pid, n)
    rec.end_tool_call("c1", {})
    rec.close("finished", True)
    return list(chunk)


def test_trajectories_screen_opens_exported_dataset_episodes(tmp_path):
    from rpent.flywheel import export_records

    logs = tmp_path / "logs"
    acts = [_record(tmp_path / "runs" / "a", 4, 0), _record(tmp_path / "runs" / "b", 3, 20)]
    export_records(tmp_path / "runs", logs / "export_png", progress=False)
    export_records(tmp_path / "runs", logs / "export_video", video=True, vcodec="h264", progress=False)

    episodes = datasets.list_dataset_episodes(logs)
    assert sorted((e.name, e.episode, e.steps) for e in episodes) == [
        ("export_png/train", 0, 4), ("export_png/train", 1, 3), ("export_video/train", 0, 4), ("export_video/train", 1, 3)]
    video_steps = datasets.episode_steps(logs / "export_video" / "train", 1)
    assert len(video_steps) == 3 and all(set(s.frames) == {"main", "wrist"} for s in video_steps)
    np.testing.assert_array_equal(np.asarray([s.action for s in video_steps], np.float32), np.stack(acts[1]))

    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="trajectories", logs_dir=logs)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: len(screen.runs) == 4 and screen.steps, what="dataset episodes", timeout=60)
            assert all(isinstance(r, datasets.DatasetEpisode) for r in screen.runs)
            for _ in range(4):
                run = screen.current_run
                assert len(screen.steps) == run.steps
                want = np.stack(acts[0] if run.episode == 0 else acts[1])
                np.testing.assert_array_equal(np.asarray([s.action for s in screen.steps], np.float32), want)
                assert screen.query_one("#traj-frame").has_frame
                detail = str(screen.query_one("#step-detail").render())
                assert "task 'open the top drawer'" in detail
                await pilot.press("j")
                await wait_for(pilot, lambda r=run: screen.current_run is not r or r is screen.runs[-1], what="next")
                await pilot.pause(0.3)
            await pilot.press("ctrl+q")

    asyncio.run(main())
