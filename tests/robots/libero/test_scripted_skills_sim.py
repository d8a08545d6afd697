"""The scripted planner's new skills on the real LIBERO simulator.

Default run: the spatial resolver through the real toolkit (``segment(all_instances=True)``
against a real env-server subprocess on ``libero_spatial`` task 0). Slow: one whole episode
per skill family through the ``rpent`` CLI (rim grasp + spatial qualifier; two pick-and-place
steps from one instruction; a drawer), asserting on the run record. ``view_fixtures`` on
the same server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rpent.robots.libero.env_client import EnvClient
from rpent.robots.libero.skills import scene
from rpent.robots.libero.skills.language import parse_task
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.run.record import RunRecord

SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]
RPENT = [sys.executable, "-m", "rpent.cli.main"]


@pytest.fixture(scope="module")
def spatial_toolkit(start_rpc_server, tmp_path_factory):
    sp = start_rpc_server(SERVER + ["--suite", "libero_spatial", "--task", "0", "--seed", "0", "--port", "0"],
                          timeout=120)
    env = EnvClient(sp.endpoint)
    env.reset()
    tk = LiberoToolkit(env, RunRecord(tmp_path_factory.mktemp("spatial") / "run", "spatial_t0_s0"), video=False)
    yield tk
    tk.close()
    env.close()
    sp.stop()


def test_qualifiers_pick_different_bowls_from_segmented_instances(spatial_toolkit):
    def call(name, args):
        return spatial_toolkit.execute(name, args)

    seg = call("segment", {"prompt": "black bowl", "all_instances": True})
    assert sorted(i["object"] for i in seg["instances"]) == ["akita_black_bowl_1", "akita_black_bowl_2"]
    assert all(i["object_estimate"]["minor_extent"] > 0.079 for i in seg["instances"])  # wider than the gripper
    chosen = {}
    for text in ("pick up the black bowl between the plate and the ramekin and place it on the plate",
                 "pick up the black bowl next to the ramekin and place it on the plate",
                 "pick up the black bowl next to the plate and place it on the plate"):
        (goal,) = parse_task(text).steps
        picked = scene.localise_step(call, goal)
        chosen[goal.object_qualifier.text] = picked.object_name
        assert picked.target_name == "plate_1" and picked.obstacles
    # the task's bowl (BDDL object of interest akita_black_bowl_1) lies between plate and ramekin
    assert chosen["between the plate and the ramekin"] == "akita_black_bowl_1"
    assert chosen["next to the plate"] == "akita_black_bowl_1"
    assert chosen["next to the ramekin"] == "akita_black_bowl_2"
    with pytest.raises(scene.NotFound, match="microwave"):
        scene.find_instances(call, "microwave")


def test_view_fixtures_reports_drawers_and_knob(spatial_toolkit):
    fixtures = spatial_toolkit.execute("view_fixtures", {})["fixtures"]
    drawers = {p["part"]: p for p in fixtures["wooden_cabinet_1"]}
    assert set(drawers) == {"cabinet_top", "cabinet_middle", "cabinet_bottom"}
    top = drawers["cabinet_top"]
    assert top["type"] == "slide" and top["range"] == pytest.approx([-0.16, 0.01]) and top["handle"] is not None
    assert top["handle"][2] > drawers["cabinet_middle"]["handle"][2] > drawers["cabinet_bottom"]["handle"][2]
    (knob,) = fixtures["flat_stove_1"]
    assert knob["type"] == "hinge" and knob["axis"] == pytest.approx([0, 0, 1], abs=1e-6) and knob["qpos"] < 0.5
    fx, part, read = scene.find_fixture_part(lambda n, a: spatial_toolkit.execute(n, a), "cabinet", ("bottom",), "slide")
    assert (fx, part["part"]) == ("wooden_cabinet_1", "cabinet_bottom") and read()["joint"] == part["joint"]


def _episode(tmp_path, suite: str, task: int) -> dict:
    out = tmp_path / "run"
    p = subprocess.run(RPENT + ["--suite", suite, "--task", str(task), "--seed", "0", "--planner", "scripted",
                                "--no-video", "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ, MUJOCO_GL="egl"))
    tag = f"{suite[len('libero_'):]}_t{task}_s0"
    tr = json.loads((out / f"transcript_{tag}.json").read_text())
    assert tr["environment_success"] is True, (tr["finish"], tr["error"], p.stdout[-2000:])
    assert tr["finish"]["status"] == "success"
    assert (out / f"{tag}_recipe.jsonl").exists()
    return tr


@pytest.mark.slow
def test_rim_grasp_and_spatial_qualifier_episode(tmp_path):
    tr = _episode(tmp_path, "libero_spatial", 1)  # "... the black bowl next to the ramekin ..."
    calls = [c for m in tr["messages"] if m["role"] == "assistant" for c in m["content"] if c["type"] == "tool_use"]
    assert any(c["name"] == "segment" and c["input"].get("prompt") == "ramekin" for c in calls)


@pytest.mark.slow
def test_two_step_instruction_episode(tmp_path):
    tr = _episode(tmp_path, "libero_10", 0)  # "put both the alphabet soup and the tomato sauce in the basket"
    releases = [c for m in tr["messages"] if m["role"] == "assistant" for c in m["content"]
                if c["type"] == "tool_use" and c["name"] == "release"]
    assert len(releases) == 2


@pytest.mark.slow
def test_open_drawer_episode(tmp_path):
    tr = _episode(tmp_path, "libero_goal", 0)  # "open the middle drawer of the cabinet"
    calls = [c for m in tr["messages"] if m["role"] == "assistant" for c in m["content"] if c["type"] == "tool_use"]
    names = [c["name"] for c in calls]
    assert "view_fixtures" in names and "segment" not in names
    assert any(c["name"] == "move_pose" and c["input"].get("target_pitch") for c in calls)  # the horizontal grip
