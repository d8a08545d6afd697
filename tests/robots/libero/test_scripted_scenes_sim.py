"""The scripted planner on libero_90's scenes and the push-path clearing, on the real LIBERO
simulator: one whole episode per skill through the ``rpent`` CLI, asserting on the run record
(all slow). Default run: the door geometry read from a real ``view_fixtures`` answer of the
microwave scene (a real env-server subprocess).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rpent.robots.libero.env_client import EnvClient
from rpent.robots.libero.skills import doors, scene
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.run.record import RunRecord
from tests.robots.libero.test_scripted_skills_sim import _episode, _said

SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]


def _calls(tr: dict) -> list[dict]:
    return [c for m in tr["messages"] if m["role"] == "assistant" for c in m["content"] if c["type"] == "tool_use"]


def test_microwave_door_frame_from_a_real_view_fixtures_answer(start_rpc_server, tmp_path):
    sp = start_rpc_server(SERVER + ["--suite", "libero_90", "--task", "35", "--seed", "0", "--port", "0"], timeout=120)
    env = EnvClient(sp.endpoint)
    try:
        env.reset()
        tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "90_t35_s0"), video=False)
        fx, part, read = scene.find_fixture_part(lambda n, a: tk.execute(n, a), "microwave", (), "hinge")
        assert fx == "microwave_1" and part["type"] == "hinge" and abs(part["qpos"]) < 0.01  # shut
        f = doors.door_frame(part)
        assert f["q_closed"] == 0.0 and f["q_open"] < -2.0 and 0.24 < f["length"] < 0.28
        # the footprint: the four corners of the door's own box, 0.259 m along it by 0.062 m (panel and handle)
        foot = np.asarray(part["footprint"])
        sides = sorted(np.linalg.norm(foot - np.roll(foot, 1, axis=0), axis=1))
        assert foot.shape == (4, 2) and sides == pytest.approx([0.062, 0.062, 0.2584, 0.2584], abs=2e-3)
        grip, _ = doors.handle_grip(f)
        # the handle bar stands out of the door on the side facing the table's centre, over the door's top half
        assert part["min"][2] < grip[2] < part["max"][2]
        assert read()["joint"] == part["joint"]
        tk.close()
    finally:
        env.close()
        sp.stop()


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_close_the_microwave_episode(tmp_path):
    tr = _episode(tmp_path, "libero_90", 33)  # "close the microwave": the door stands open 1.5 rad
    qpos = [m["content"]["fixtures"]["microwave_1"][0]["qpos"] for m in tr["messages"]
            if m["role"] == "tool" and m.get("name") == "view_fixtures"]
    # shut means qpos > -0.005 (LIBERO's Microwave default_close_ranges), which the environment's
    # success (checked by _episode) says; the planner's last reading comes before its last push
    assert qpos[0] < -1.3 and qpos[-1] > qpos[0] + 1.0


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_open_the_microwave_episode(tmp_path):
    tr = _episode(tmp_path, "libero_90", 35)  # "open the microwave": pull the handle, push the inner face
    calls = _calls(tr)
    grips = [c for c in calls if c["name"] == "set_gripper" and c["input"].get("gripper") == 1.0]
    assert grips, "the handle is gripped"
    qpos = [m["content"]["fixtures"]["microwave_1"][0]["qpos"] for m in tr["messages"]
            if m["role"] == "tool" and m.get("name") == "view_fixtures"]
    # open means qpos < -1.3 (LIBERO's Microwave default_open_ranges), which the environment's
    # success (checked by _episode) says; the planner's last reading comes before its last push
    assert qpos[0] > -0.01 and min(qpos) < -1.0


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_stack_two_bowls_and_place_them_in_the_tray_episode(tmp_path):
    tr = _episode(tmp_path, "libero_90", 63)  # "stack the left bowl on the right bowl and place them in the tray"
    said = _said(tr)
    assert any("bowl (right) in tray" in t for t in said) and any("bowl (left) on bowl (right)" in t for t in said)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_push_clears_its_path_first_episode(tmp_path):
    tr = _episode(tmp_path, "libero_goal_swap", 5)  # the black bowl stands in the plate's way
    said = _said(tr)
    assert any("stands in the way of the push" in t and "moving it to the free spot" in t for t in said), said


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_put_the_mug_in_the_microwave_and_close_it_episode(tmp_path):
    tr = _episode(tmp_path, "libero_10", 9)  # the mug carried in by its handle, then the door pushed shut
    said = _said(tr)
    assert any("carrying it in through the door" in t for t in said), said
    assert any("set down inside" in t for t in said), said
    qpos = [m["content"]["fixtures"]["microwave_1"][0]["qpos"] for m in tr["messages"]
            if m["role"] == "tool" and m.get("name") == "view_fixtures"]
    assert qpos[0] < -1.3 and qpos[-1] > qpos[0]  # open at the start; the success ended the episode as it shut
