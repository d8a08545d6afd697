"""The LIBERO toolkit against a real env server subprocess: results, errors-as-results, records."""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
import pytest

from rpent.robots.libero.env_client import EnvClient
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.run.record import RunRecord

SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]


@pytest.fixture(scope="module")
def env_endpoint(start_rpc_server):
    sp = start_rpc_server(SERVER + ["--suite", "libero_object", "--task", "0", "--seed", "0", "--port", "0"],
                          timeout=120)
    yield sp.endpoint
    sp.stop()


@pytest.fixture
def toolkit(env_endpoint, tmp_path):
    env = EnvClient(env_endpoint)
    env.reset()
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s0"), video=False)
    yield tk
    tk.close()
    env.close()


def test_specs_and_disabled_vla(toolkit):
    names = {s.name for s in toolkit.specs()}
    assert {"move_to", "move_pose", "rotate_wrist", "rotate_pitch", "set_gripper", "release", "back_project",
            "segment", "view_env_state", "view_camera_meta", "finish", "request_scene_reset",
            "request_operator_verdict"} <= names
    assert "pi0_pick" not in names and "pi0_pick" in toolkit.disabled()
    move = toolkit.spec("move_to")
    assert move.input_schema["required"] == ["xyz"] and not move.readonly
    assert toolkit.spec("segment").readonly
    r = toolkit.execute("pi0_pick", {"prompt": "pick"})
    assert "unknown tool: pi0_pick" in r["error"] and "no VLA" in r["error"]


@pytest.mark.parametrize("name,args,needle", [
    ("move_to", {}, "xyz: Field required"),
    ("move_to", {"xyz": [0.1, 0.2]}, "at least 3 items"),
    ("move_to", {"xyz": [0, 0, 0.3], "speed": 2}, "speed: Extra inputs are not permitted"),
    ("move_to", {"xyz": "up"}, "xyz"),
    ("move_pose", {"xyz": [0, 0, 0.3], "max_steps": 0}, "max_steps"),
    ("rotate_wrist", {}, "need target_yaw or delta_yaw"),
    ("rotate_pitch", {"target_pitch": 0.1, "delta_pitch": 0.1}, "only one"),
    ("set_gripper", {"gripper": 3}, "gripper"),
    ("release", {"max_steps": -1}, "max_steps"),
    ("back_project", {"row": 5}, "either row and col"),
    ("back_project", {"row": 999, "col": 3, "resolution": "low"}, "out of bounds"),
    ("back_project", {"row_range": [0, 1], "col_range": [0, 1], "resolution": "low", "z_min": 5.0},
     "too few valid pixels"),
    ("segment", {}, "exactly one of prompt or point"),
    ("segment", {"prompt": "x", "point": [1, 2]}, "exactly one of prompt or point"),
    ("view_env_state", {"step": 7}, "state step not available"),
    ("view_camera_meta", {"camera": "top"}, "camera"),
    ("finish", {}, "status"),
    ("no_such_tool", {}, "unknown tool: no_such_tool"),
])
def test_bad_arguments_are_results(toolkit, name, args, needle):
    r = toolkit.execute(name, args)
    assert "error" in r, r
    assert needle in r["error"], r["error"]
    assert len(toolkit.record.steps) == 1  # nothing moved, no new step


def test_perception_and_motion(toolkit):
    seg = toolkit.execute("segment", {"prompt": "alphabet soup"})
    assert seg["found"] and seg["source"] == "sim_oracle" and seg["object"] == "alphabet_soup_1"
    assert seg["_images"] and seg["_images"][0]["png"][:4] == b"\x89PNG"
    assert (toolkit.record.dir / "segment_overlay_00.png" / "00.png").exists()
    x, y, z = seg["world_xyz"]
    # pixel mode back-projection of the mask's box centre lands on the object (a few cm)
    c0, r0, c1, r1 = seg["box"]
    bp = toolkit.execute("back_project", {"row_range": [r0, r1], "col_range": [c0, c1], "resolution": "low"})
    assert np.linalg.norm(np.array(bp["center_xyz"][:2]) - [x, y]) < 0.05
    assert "points" not in bp
    # max_points: the region's world points too (a point cloud), within the z band
    cloud = toolkit.execute("back_project", {"row_range": [r0, r1], "col_range": [c0, c1], "resolution": "low",
                                             "z_min": z - 0.01, "max_points": 50})
    pts = np.asarray(cloud["points"])
    assert pts.shape[1] == 3 and 8 <= len(pts) <= 50 and len(pts) <= cloud["n_valid"]
    assert (pts[:, 2] >= z - 0.01 - 1e-3).all()
    assert np.linalg.norm(np.median(pts[:, :2], axis=0) - [x, y]) < 0.05
    assert "error" in toolkit.execute("back_project", {"row_range": [r0, r1], "col_range": [c0, c1],
                                                       "resolution": "low", "max_points": 10 ** 6})
    miss = toolkit.execute("segment", {"prompt": "purple elephant"})
    assert not miss["found"] and "no visible object" in miss["reason"]
    r = toolkit.execute("move_to", {"xyz": [x, y, z + 0.2], "max_steps": 60})
    assert "error" not in r, r
    assert r["steps_used"] > 0 and r["state_after"]["step"] == 1
    assert [img["label"] for img in r["_images"]] == ["agentview step 1", "wrist step 1"]
    eef = r["state_after"]["state"]["robot0_eef_pos"]
    assert abs(eef[2] - (z + 0.2)) < 0.03
    states = json.loads((toolkit.record.dir / "states.json").read_text())
    assert [s["step_idx"] for s in states["steps"]] == [0, 1]
    assert states["steps"][1]["command"]["action"] == "move_to"
    view = toolkit.execute("view_env_state", {"step": 0})
    assert view["step"] == 0 and view["state"]["robot0_eef_pos"] != eef
    meta = toolkit.execute("view_camera_meta", {"camera": "wrist"})
    assert np.asarray(meta["camera_meta"]["extrinsic_cam2world"]).shape == (4, 4)


def test_finish_claim_is_not_success(toolkit):
    r = toolkit.execute("finish", {"status": "success", "summary": "I think so"})
    assert r["_finish"] and r["environment_success"] is False
    assert not toolkit.solved()


def test_cancel_stops_motion_between_env_steps(toolkit):
    start = toolkit.current_state()["robot0_eef_pos"].copy()
    timer = threading.Timer(0.3, toolkit.cancel)
    timer.start()
    t = time.monotonic()
    r = toolkit.execute("move_to", {"xyz": [start[0], start[1], start[2] + 0.25], "max_steps": 400,
                                    "step_clip": 0.0005, "tol": 0.001})
    timer.cancel()
    toolkit.clear_cancel()
    assert r.get("code") == "tool_cancelled" and r["interrupted"] is True, r
    assert r["steps_used"] < 400 and time.monotonic() - t < 60
    # the motion happened, so a step was captured even though the tool was cancelled
    assert len(toolkit.record.steps) == 2


def test_a_new_toolkit_starts_a_fresh_episode_on_a_used_env_server(env_endpoint, tmp_path):
    env = EnvClient(env_endpoint)
    first = LiberoToolkit(env, RunRecord(tmp_path / "a", "object_t0_s0"), video=False)
    start = first.current_state()["robot0_eef_pos"].copy()
    r = first.execute("move_to", {"xyz": [start[0], start[1], start[2] + 0.1], "max_steps": 20})
    assert r["steps_used"] > 0 and env.status()["steps"] > 0
    second = LiberoToolkit(env, RunRecord(tmp_path / "b", "object_t0_s0"), video=False)
    assert env.status()["steps"] == 0 and second.record.steps[0]["env_steps"] == 0
    assert np.allclose(second.current_state()["robot0_eef_pos"], start, atol=1e-6)
    env.close()


def test_a_finish_whose_predicate_cannot_be_read_is_refused_not_recorded(start_rpc_server, tmp_path):
    """The env server dies before ``finish``: the predicate cannot be read, so the finish is refused
    (an error result) and never becomes the run's finish (fresh-user finding: the transcript said
    ``finish`` by the planner *and* ``finish refused``)."""
    sp = start_rpc_server(SERVER + ["--suite", "libero_object", "--task", "0", "--seed", "0", "--port", "0"],
                          timeout=120)
    env = EnvClient(sp.endpoint)
    env.reset()
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s0"), video=False)
    try:
        tk._state["success"] = False
        sp.stop()
        r = tk.execute("finish", {"status": "failure", "summary": "gave up"})
        assert "_finish" not in r and "finish" in r.get("error", ""), r
        assert tk.finish_result is None
    finally:
        tk.close()
        env.close()


class _SeeingOperator:
    """Answers every request with ``success`` and keeps the frames it was shown."""

    def __init__(self):
        self.frames: list[dict] = []

    def ask(self, request_kind, prompt, choices, frames):
        self.frames.append(frames)
        return "success", ""


def test_on_demand_capture_records_state_only_steps_and_renders_where_a_tool_looks(env_endpoint, tmp_path):
    """capture="on_demand" (the scripted and flash planners): a motion step has the same state as
    an every-step capture of the same motion, no images, and says so; the latest step is rendered
    when a tool reads it or the operator is asked; an earlier state-only step is a one-line error."""
    env = EnvClient(env_endpoint)
    full = LiberoToolkit(env, RunRecord(tmp_path / "full", "object_t0_s0"), video=False)
    start = full.current_state()["robot0_eef_pos"].copy()
    target = [float(start[0]), float(start[1]), float(start[2]) + 0.08]
    full_step = full.execute("move_to", {"xyz": target, "max_steps": 20})["state_after"]
    operator = _SeeingOperator()
    lazy = LiberoToolkit(env, RunRecord(tmp_path / "lazy", "object_t0_s0"), video=False, capture="on_demand",
                         operator=operator)
    r = lazy.execute("move_to", {"xyz": target, "max_steps": 20})
    assert r["_images"] == [] and "state-only step" in r["state_after"]["image_note"]
    assert r["state_after"]["state"] == full_step["state"] and r["state_after"]["env_steps"] == full_step["env_steps"]
    steps = json.loads((lazy.record.dir / "states.json").read_text())["steps"]
    assert [(s["capture"], s["artifacts"]) for s in steps] == [("state_only", []), ("state_only", [])]
    seg = lazy.execute("segment", {"prompt": "alphabet soup"})
    assert seg["found"] and seg["step"] == 1
    step1 = lazy.record.steps[1]
    assert step1["capture"] == "on_demand" and step1["rendered_cameras"] == ["agentview"]
    assert "agentview_seg.npz" in step1["artifacts"] and "wrist.png" not in step1["artifacts"]
    old = lazy.execute("segment", {"prompt": "alphabet soup", "step": 0})
    assert old["code"] == "no_images" and old["error"] == (
        "segment: step 0 was recorded without agentview images (a state-only step) and the scene has moved on "
        "since; use step=-1")
    assert lazy.execute("view_env_state", {"step": 0})["image_note"].startswith("state-only step")
    verdict = lazy.execute("request_operator_verdict", {"question": "done?"})
    assert "error" not in verdict, verdict
    assert set(operator.frames[0]) == {"agentview", "wrist"}  # the operator sees the latest scene
    assert lazy.record.steps[1]["rendered_cameras"] == ["agentview", "wrist"]
    env.close()
