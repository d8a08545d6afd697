"""Flash end to end on the real LIBERO simulator: the scripted planner solves libero_object task 0
seed 0, ``rpent-flash generate`` turns its run into flash files, and ``rpent-flash replay``
replays them on seeds 3 and 1 (other init states) with no LLM on one shared env server, each seed
its own run record; ``rpent --planner flash`` does the same for one seed (slow); a missing plan
and an anchor that cannot be found end with named failures in the run record. ~25 s + ~10 s per
replay on an idle 2-core machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TAG0 = "object_t0_s0"


def _rpent(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rpent.cli.main", "--suite", "libero_object", "--task", "0",
                           "--no-video", *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, MUJOCO_GL="egl"))


@pytest.fixture(scope="module")
def flash_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("flash")
    run = base / "scripted_s0"
    p = _rpent(["--seed", "0", "--planner", "scripted", "--output-dir", str(run)])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    # the recipe lists the run's segment calls (reference §6.1), each pointing at its result artifact
    recipe = [json.loads(x) for x in (run / f"{TAG0}_recipe.jsonl").read_text().splitlines()]
    segs = [c for c in recipe if c["action"] == "segment"]
    assert {(c["prompt"], c["camera"]) for c in segs} >= {("alphabet soup", "agentview"), ("basket", "agentview"),
                                                           ("alphabet soup", "wrist")}
    assert all((run / c["artifact"]).is_file() for c in segs)
    g = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit",
                        str(run / f"transcript_{TAG0}.json"), "--recipe", str(run / f"{TAG0}_recipe.jsonl"),
                        "--destination", str(base / "plans")], capture_output=True, text=True)
    assert g.returncode == 0, g.stderr
    anchors = json.loads((base / "plans" / f"{TAG0}_anchors.json").read_text())
    first = json.loads((run / segs[0]["artifact"]).read_text())
    assert anchors["anchors"][0]["observations"][0]["estimate"]["center"] == first["object_estimate"]["center"]
    return base / "plans"


def _calls(tr: dict) -> list[dict]:
    return [b for m in tr["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]


@pytest.mark.timeout(1200)  # includes the module's scripted seed-0 run; a loaded 2-core machine is several times slower
def test_flash_replay_serves_seeds_from_one_env_server_with_separate_records(flash_dir, tmp_path):
    from rpent.robots.libero import suites

    root = tmp_path / "batch"
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "replay", "--flash-dir", str(flash_dir), "--suite",
                        "libero_object", "--task", "0", "--seeds", "3", "1", "--output-root", str(root)],
                       capture_output=True, text=True, timeout=1100, env=dict(os.environ, MUJOCO_GL="egl"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    rows = [json.loads(x) for x in (root / "replay.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["env_server_start", "episode", "episode"]
    assert [r["seed"] for r in rows[1:]] == [3, 1] and all(r["success"] for r in rows[1:])
    assert all(r["cpu_s"] > 0 and r["wall_s"] > 0 for r in rows)
    info = suites.task_info("libero_object", 0, suites.check_libero_type(None))
    states = suites.load_init_states(info)
    pids = set()
    for switches, seed in enumerate((3, 1)):
        out = root / f"object_t0_s{seed}"
        tr = json.loads((out / f"transcript_object_t0_s{seed}.json").read_text())
        # each seed is a complete run record of its own, on the init state of its seed
        assert tr["planner"] == "flash" and tr["seed"] == seed and tr["environment_success"] is True
        assert tr["error"] is None and tr["finish"]["status"] == "success" and TAG0 in tr["finish"]["summary"]
        assert tr["init_state_sha256"] == suites.init_state_sha256(states[seed % info.n_init_states])
        stats = tr["stats"]
        assert stats["total_input_tokens"] == stats["total_output_tokens"] == stats["requests"] == 0
        calls = _calls(tr)
        segs = [c["input"] for c in calls if c["name"] == "segment"]
        assert {"prompt": "alphabet soup", "camera": "agentview", "all_instances": True} in segs
        # the anchored waypoints were rebuilt from this scene's segment results, not copied
        results = {m["tool_call_id"]: m["content"] for m in tr["messages"] if m["role"] == "tool"}
        soup = next(results[c["id"]] for c in calls if c["name"] == "segment" and c["input"]["prompt"] == "alphabet soup")
        first_move = next(c["input"] for c in calls if c["name"] == "move_to")
        assert first_move["xyz"][:2] == pytest.approx(soup["object_estimate"]["center"][:2], abs=1e-3)
        assert (out / f"object_t0_s{seed}_recipe.jsonl").is_file()
        # what was replayed and re-localised, and which server served it
        rep = json.loads((out / "flash_replay.json").read_text())
        assert rep["plan"] == TAG0 and rep["seed"] == seed and rep["finish"]["status"] == "success"
        assert rep["env_server"]["shared"] is True and rep["env_server"]["seed_switches"] == switches
        assert rep["env_server"]["seed"] == seed
        pids.add(rep["env_server"]["server_pid"])
        assert rep["relocalised"] >= 2 and rep["not_found"] == 0 and len(segs) == rep["relocalised"] + sum(
            e.get("looks", 0) for e in rep["steps"] if e["op"] == "repair")
        assert rep["replayed"] == sum(1 for e in rep["steps"] if e["op"] == "tool") >= 5
        assert any(e["op"] == "tool" and e["mode"] == "anchored" for e in rep["steps"])
        # motion steps are state-only; images only where the replay looked, and at the end
        st = json.loads((out / "states.json").read_text())
        assert "flash_replay.json" in st["run_artifacts"]
        steps = st["steps"]
        assert steps[0]["capture"] == "on_demand" and "agentview.png" in steps[0]["artifacts"]
        assert steps[-1]["capture"] == "on_demand" and {"agentview.png", "wrist.png"} <= set(steps[-1]["artifacts"])
        lean = [s for s in steps[1:-1] if s["capture"] == "state_only"]
        assert lean and all(s["artifacts"] == [] and s["command"]["action"] for s in lean)
        assert all(len(s["state"]["robot0_eef_pos"]) == 3 for s in steps)
        assert steps[-1]["env_steps"] == tr["env_steps"] and steps[-1]["success"] is True
    assert len(pids) == 1  # one env server served both seeds


@pytest.mark.slow
def test_flash_replays_a_seed0_plan_on_another_seed(flash_dir, tmp_path):
    out = tmp_path / "replay"
    p = _rpent(["--seed", "3", "--planner", "flash", "--flash-dir", str(flash_dir), "--output-dir", str(out)])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    tr = json.loads((out / "transcript_object_t0_s3.json").read_text())
    assert tr["planner"] == "flash" and tr["seed"] == 3
    assert tr["environment_success"] is True and tr["error"] is None
    assert tr["finish"]["status"] == "success" and TAG0 in tr["finish"]["summary"]
    stats = tr["stats"]
    assert stats["total_input_tokens"] == stats["total_output_tokens"] == stats["requests"] == 0
    calls = [b for m in tr["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    segs = [c["input"] for c in calls if c["name"] == "segment"]
    assert {"prompt": "alphabet soup", "camera": "agentview"} in segs and {"prompt": "basket", "camera": "agentview"} in segs
    # the anchored waypoints were rebuilt from this scene's segment results, not copied
    tool_results = {m["tool_call_id"]: m["content"] for m in tr["messages"] if m["role"] == "tool"}
    soup = next(tool_results[c["id"]] for c in calls if c["name"] == "segment" and c["input"]["prompt"] == "alphabet soup")
    first_move = next(c["input"] for c in calls if c["name"] == "move_to")
    assert first_move["xyz"][:2] == pytest.approx(soup["object_estimate"]["center"][:2], abs=1e-3)
    assert (out / "object_t0_s3_recipe.jsonl").is_file()


@pytest.mark.timeout(1200)  # may include the module's scripted seed-0 run, then two more runs
def test_missing_plan_and_lost_anchor_are_named_failures(flash_dir, tmp_path):
    p = _rpent(["--seed", "1", "--planner", "flash", "--flash-dir", str(tmp_path / "empty"), "--output-dir",
                str(tmp_path / "missing")])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    tr = json.loads((tmp_path / "missing" / "transcript_object_t0_s1.json").read_text())
    assert tr["error"].startswith("flash_plan_missing:") and tr["environment_success"] is False
    # an anchor whose prompt matches nothing in the scene
    lost = tmp_path / "lost"
    lost.mkdir()
    for f in flash_dir.iterdir():
        (lost / f.name).write_text(f.read_text().replace('"alphabet soup"', '"purple unicorn"'))
    p = _rpent(["--seed", "1", "--planner", "flash", "--flash-dir", str(lost), "--output-dir", str(tmp_path / "r")])
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    tr = json.loads((tmp_path / "r" / "transcript_object_t0_s1.json").read_text())
    assert tr["finish"]["status"] == "failure" and tr["error"] is None
    assert tr["finish"]["summary"].startswith("flash_anchor_not_found: anchor a0 'purple unicorn'")
