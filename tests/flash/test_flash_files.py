"""Flash files without a simulator: generation from an audit + recipe, named errors, the
anchored-waypoint arithmetic of the replay, and the ``rpent-flash`` CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from rpent.flash.files import FlashFileError, find_plan, load_flash
from rpent.flash.generate import FlashGenerateError, generate
from rpent.flash.replay import FlashPlanner


def _est(x, y, yaw=0.0, major=0.08, minor=0.04):
    return {"center": [x, y, 0.04], "top_z": 0.08, "bottom_z": 0.0, "major_yaw": yaw, "major_extent": major,
            "minor_extent": minor, "ridge_yaw": None, "source": "sim_oracle_agentview_mask"}


def _run(tmp_path, solved=True):
    """A small solved run: locate object and target, grasp, carry in two hops, release."""
    calls = [
        ("segment", {"prompt": "soup"}, {"found": True, "object": "soup_1", "object_estimate": _est(-0.1, -0.2)}),
        ("segment", {"prompt": "basket"}, {"found": True, "object": "basket_1", "object_estimate": _est(0.0, 0.25, 0, 0.15, 0.15)}),
        ("move_to", {"xyz": [-0.1, -0.2, 0.16], "target_yaw": 0.1}, {"reached": True}),
        ("move_to", {"xyz": [9.0, 9.0, 9.0]}, {"error": "refused"}),  # an error: not in the recipe
        ("rotate_wrist", {"target_yaw": 0.1}, {"final_yaw": 0.1}),
        ("set_gripper", {"gripper": 1.0}, {"gripper": 1.0}),
        ("move_to", {"xyz": [-0.05, 0.025, 0.25]}, {"reached": True}),  # mid-transport: between anchors
        ("move_to", {"xyz": [0.01, 0.26, 0.25]}, {"reached": True}),
        ("release", {}, {}),
        ("finish", {"status": "success", "summary": "ok"}, {"_finish": True}),
    ]
    return _write_run(tmp_path, calls, suite="libero_object", task=4, language="put the soup in the basket",
                      planner="api", model="m", solved=solved, segment_lines=False)


def _write_run(tmp_path, calls, suite="libero_goal", task=1, language="put the plate on the stove",
               planner="scripted", model=None, solved=True, segment_lines=True):
    """A run of ``calls`` ((tool, args, result) triples) at seed 0: its transcript and its recipe
    (with ``segment`` lines, or without them as older recipes were); returns (audit, recipe)."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "Task"}], "source": "task"}]
    recipe = []
    for i, (name, args, res) in enumerate(calls):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"c{i}", "name": name,
                                                           "input": args}]})
        messages.append({"role": "tool", "name": name, "tool_call_id": f"c{i}", "content": res,
                         "is_error": "error" in res})
        if name == "segment":
            if segment_lines:
                recipe.append({"action": "segment", "prompt": args["prompt"],
                               "camera": args.get("camera", "agentview")})
        elif name != "finish" and "error" not in res:
            recipe.append({"action": name, **args})
    tag = f"{suite.removeprefix('libero_')}_t{task}_s0"
    doc = {"suite": suite, "task": task, "seed": 0, "task_language": language, "planner": planner,
           "model": model, "environment_success": solved, "messages": messages}
    (tmp_path / f"transcript_{tag}.json").write_text(json.dumps(doc))
    (tmp_path / f"{tag}_recipe.jsonl").write_text("".join(json.dumps(c) + "\n" for c in recipe))
    return tmp_path / f"transcript_{tag}.json", tmp_path / f"{tag}_recipe.jsonl"


def test_generate_binds_waypoints_to_anchors(tmp_path):
    audit, recipe = _run(tmp_path)
    plan_p, anchors_p = generate(audit, recipe, tmp_path / "flash")
    assert plan_p.name == "object_t4_s0_plan.json" and anchors_p.name == "object_t4_s0_anchors.json"
    plan, anchors = load_flash(tmp_path / "flash", "object_t4_s0")
    assert [a["prompt"] for a in anchors["anchors"]] == ["soup", "basket"]
    ops = [(s["op"], s.get("tool"), s.get("anchor")) for s in plan["steps"]]
    assert ops == [("locate", None, "a0"), ("locate", None, "a1"), ("tool", "move_to", "a0"),
                   ("tool", "rotate_wrist", "a0"), ("tool", "set_gripper", None), ("tool", "move_to", None),
                   ("tool", "move_to", "a1"), ("tool", "release", None)]
    assert plan["steps"][2]["offset_xy"] == [0.0, 0.0]
    assert plan["steps"][6]["offset_xy"] == [0.01, 0.01]
    assert plan["steps"][5]["interp"] == [2, 6, pytest.approx(0.5, abs=0.02)]
    assert plan["source"]["planner"] == "api" and plan["task_language"] == "put the soup in the basket"


def test_generate_refuses_to_overwrite_a_cells_plan_without_replace(tmp_path):
    audit, recipe = _run(tmp_path)
    plan_p, _ = generate(audit, recipe, tmp_path / "flash")
    before = plan_p.read_bytes()
    with pytest.raises(FlashGenerateError, match="already holds the flash plan of object_t4_s0.*--replace"):
        generate(audit, recipe, tmp_path / "flash")
    assert plan_p.read_bytes() == before
    from rpent.cli.flash import main as flash_main
    args = ["generate", "--audit", str(audit), "--recipe", str(recipe), "--destination", str(tmp_path / "flash")]
    assert flash_main(args) == 2
    assert flash_main([*args, "--replace"]) == 0 and load_flash(tmp_path / "flash", "object_t4_s0")[0]["cell"] == "object_t4_s0"


def test_rebuilt_waypoints_follow_moved_anchors(tmp_path):
    audit, recipe = _run(tmp_path)
    generate(audit, recipe, tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", "object_t4_s0")
    by_id = {a["id"]: a for a in anchors["anchors"]}
    # the live scene: the soup moved +5 cm in x and turned by 0.3 rad; the basket moved -4 cm in y
    live = {"a0": {0: _est(-0.05, -0.2, yaw=0.3)}, "a1": {0: _est(0.0, 0.21, 0, 0.15, 0.15)}}
    planner = FlashPlanner()
    grasp = planner._args(plan["steps"], 2, by_id, live)
    assert grasp["xyz"] == [pytest.approx(-0.05), pytest.approx(-0.2), 0.16]
    assert grasp["target_yaw"] == pytest.approx(0.4)  # turned with the object's grasp axis
    place = planner._args(plan["steps"], 6, by_id, live)
    assert place["xyz"][:2] == [pytest.approx(0.01), pytest.approx(0.22)]
    mid = planner._args(plan["steps"], 5, by_id, live)
    assert mid["xyz"][0] == pytest.approx((grasp["xyz"][0] + place["xyz"][0]) / 2, abs=2e-3)
    assert mid["xyz"][2] == 0.25
    # a round object keeps the recorded yaw; an axis flip by ~pi is folded, not a half turn
    live_flip = {"a0": {0: _est(-0.1, -0.2, yaw=math.pi - 0.05)}, "a1": live["a1"]}
    assert planner._args(plan["steps"], 2, by_id, live_flip)["target_yaw"] == pytest.approx(0.05)


def test_generate_refuses_unsolved_and_mismatched_runs(tmp_path):
    audit, recipe = _run(tmp_path, solved=False)
    with pytest.raises(FlashGenerateError, match="not solved"):
        generate(audit, recipe, tmp_path / "flash")
    audit, recipe = _run(tmp_path)
    recipe.write_text(recipe.read_text() + json.dumps({"action": "move_to", "xyz": [1, 2, 3]}) + "\n")
    with pytest.raises(FlashGenerateError, match="no matching successful call"):
        generate(audit, recipe, tmp_path / "flash")
    assert not (tmp_path / "flash").exists()


@pytest.mark.parametrize("fields, reason", [
    ({"label": "failed", "verdict_required": True, "operator_verdict": {"answer": "failure", "notes": "operator rejects"},
      "disagreement": "operator said failure; environment predicate: satisfied"}, "operator_rejected"),
    ({"label": "aborted", "operator_verdict": {"answer": "abort", "notes": ""}}, "aborted"),
    ({"label": "cancelled", "stop_reason": "cancelled", "error": "run cancelled (received SIGTERM)"}, "cancelled"),
])
def test_generate_refuses_a_run_not_labelled_succeeded_with_the_reason(tmp_path, fields, reason):
    """The operator's word reaches flash plans: a run whose predicate held but that the operator
    rejected (or aborted, or that was cancelled) gives no plan; the refusal names the reason."""
    audit, recipe = _run(tmp_path)
    doc = json.loads(audit.read_text())
    audit.write_text(json.dumps({**doc, **fields}))
    with pytest.raises(FlashGenerateError, match=rf"refused \({reason}\)"):
        generate(audit, recipe, tmp_path / "flash")
    assert not (tmp_path / "flash").exists()
    from rpent.cli.flash import main as flash_main

    assert flash_main(["generate", "--audit", str(tmp_path), "--recipe", str(recipe),
                       "--destination", str(tmp_path / "flash")]) == 2


def test_a_plan_carries_the_runs_label_and_provenance_and_a_rejected_plan_is_not_replayed(tmp_path):
    audit, recipe = _run(tmp_path)
    doc = json.loads(audit.read_text())
    prov = {"argv": ["rpent", "--planner", "api"], "rpent": {"version": "0.1.0", "commit": "c0ffee", "dirty": False},
            "versions": {"python": "3.11"}, "host": "h", "started_at": "t",
            "models": {"vla": None, "sam3": {"checkpoint": None, "endpoint": "socket://127.0.0.1:9",
                                             "fingerprint": None, "server_metadata": {"checkpoint": "/ckpt"}}}}
    audit.write_text(json.dumps({**doc, "label": "succeeded", "provenance": prov}))
    plan_p, _ = generate(audit, recipe, tmp_path / "flash", argv=["rpent-flash", "generate"])
    plan = json.loads(plan_p.read_text())
    src = plan["source"]
    assert (src["label"], src["environment_success"], src["operator_verdict"]) == ("succeeded", True, None)
    assert src["provenance"]["commit"] == "c0ffee" and src["provenance"]["argv"] == prov["argv"]
    assert src["provenance"]["models"]["sam3"] == {"checkpoint": "/ckpt", "endpoint": "socket://127.0.0.1:9",
                                                   "fingerprint": None}
    assert plan["generated_by"]["argv"] == ["rpent-flash", "generate"] and plan["generated_by"]["rpent"]["version"]
    load_flash(tmp_path / "flash", "object_t4_s0")
    plan["source"]["label"] = "failed"  # a plan made from a rejected run (by hand, or by an older rpent)
    plan_p.write_text(json.dumps(plan))
    with pytest.raises(FlashFileError, match="labelled 'failed'") as e:
        load_flash(tmp_path / "flash", "object_t4_s0")
    assert e.value.code == "flash_plan_rejected"


def test_missing_and_broken_files_are_named(tmp_path):
    with pytest.raises(FlashFileError) as e:
        find_plan(tmp_path / "nope", "libero_object", 4)
    assert e.value.code == "flash_plan_missing"
    tmp_path.joinpath("flash").mkdir()
    with pytest.raises(FlashFileError, match="object_t4_s<seed>_plan.json"):
        find_plan(tmp_path / "flash", "libero_object", 4)
    audit, recipe = _run(tmp_path)
    generate(audit, recipe, tmp_path / "flash")
    (tmp_path / "flash" / "object_t4_s0_plan.json").rename(tmp_path / "flash" / "object_t4_s2_plan.json")
    (tmp_path / "flash" / "object_t4_s0_anchors.json").unlink()
    assert find_plan(tmp_path / "flash", "libero_object", 4) == "object_t4_s2"  # any seed of the task
    with pytest.raises(FlashFileError) as e:
        load_flash(tmp_path / "flash", "object_t4_s2")
    assert e.value.code == "flash_anchors_missing"


def test_a_plan_renamed_for_another_task_is_refused(tmp_path):
    """Plans are found by file name; one copied under another task's name is refused, naming the
    cell it was made for, instead of replaying task 4's motions on task 3."""
    import shutil

    audit, recipe = _run(tmp_path)
    generate(audit, recipe, tmp_path / "flash")
    (tmp_path / "other").mkdir()
    for kind in ("plan", "anchors"):
        shutil.copy(tmp_path / "flash" / f"object_t4_s0_{kind}.json", tmp_path / "other" / f"object_t3_s0_{kind}.json")
    assert find_plan(tmp_path / "other", "libero_object", 3) == "object_t3_s0"
    with pytest.raises(FlashFileError, match="was made for object_t4_s0") as e:
        load_flash(tmp_path / "other", "object_t3_s0")
    assert e.value.code == "flash_plan_invalid"
    plan, anchors = load_flash(tmp_path / "flash", "object_t4_s0")  # the original still loads
    assert plan["cell"] == anchors["cell"] == "object_t4_s0"


def test_cli_generate(tmp_path):
    audit, recipe = _run(tmp_path)
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit", str(tmp_path), "--recipe",
                        str(recipe), "--destination", str(tmp_path / "f")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "f" / "object_t4_s0_plan.json").is_file()
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit", str(tmp_path / "x.json"),
                        "--recipe", str(recipe), "--destination", str(tmp_path / "f")], capture_output=True, text=True)
    assert p.returncode == 2 and "x.json does not exist" in p.stderr and "Traceback" not in p.stderr


def test_cli_generate_names_a_non_utf8_recipe_and_a_file_destination(tmp_path):
    audit, recipe = _run(tmp_path)
    garbled = tmp_path / "garbled_recipe.jsonl"
    garbled.write_bytes(b"\xff\xfe\x00{}")

    def gen(rec, dest):
        return subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit", str(audit), "--recipe",
                               str(rec), "--destination", str(dest)], capture_output=True, text=True)

    p = gen(garbled, tmp_path / "f")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == (f"rpent-flash: error: --recipe {garbled} is not UTF-8 text (invalid start byte at "
                                "byte 0); pass the run's <tag>_recipe.jsonl")
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for dest in (afile, afile / "sub"):
        p = gen(recipe, dest)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert f"--destination {dest}: {afile} is a file, not a directory" in p.stderr.strip().splitlines()[-1]
    assert afile.read_text() == "keep" and not (tmp_path / "f").exists()


def test_cli_replay_refuses_bad_input_before_starting_anything(tmp_path):
    def replay(*extra):
        return subprocess.run([sys.executable, "-m", "rpent.cli.flash", "replay", "--suite", "libero_object", "--task",
                               "0", "--output-root", str(tmp_path / "out"), *extra], capture_output=True, text=True)

    p = replay("--flash-dir", str(tmp_path / "none"), "--seeds", "1")
    assert p.returncode == 2 and p.stderr.startswith("rpent-flash: error: flash_plan_missing") and "Traceback" not in p.stderr
    p = replay("--flash-dir", str(tmp_path), "--seeds", "1", "1")
    assert p.returncode == 2 and "--seeds must be distinct integers >= 0" in p.stderr
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_annotate_step_sets_extra_fields_only(tmp_path):
    from rpent.run.record import RunRecord

    rec = RunRecord(tmp_path / "r", "object_t0_s1")
    rec.add_step({"robot0_eef_pos": [0, 0, 0], "env_steps": 3}, {})
    rec.annotate_step(0, capture="state_only")
    doc = json.loads((tmp_path / "r" / "states.json").read_text())
    assert doc["steps"][0]["capture"] == "state_only" and doc["steps"][0]["env_steps"] == 3
    with pytest.raises(ValueError, match="cannot change"):
        rec.annotate_step(0, artifacts=["x.png"])
    with pytest.raises(IndexError):
        rec.annotate_step(1, capture="state_only")


def test_run_record_recipe_lists_segment_calls_by_step_and_index(tmp_path):
    """The recipe writer lists successful segment calls (prompt or point, camera, artifact) in
    (step, segment index) order and drops everything before the last reset (reference §6.1)."""
    from rpent.run.record import RunRecord, dumps_json

    rec = RunRecord(tmp_path / "run", "object_t4_s0")
    state = {"robot0_eef_pos": [0, 0, 0], "env_steps": 0}

    def seg(idx, n, query, found=True, camera="agentview"):
        doc = {"found": found, "camera": camera, "step": idx, "query": query,
               "object_estimate": _est(0.1 * n, 0.0) if found else None}
        rec.add_artifact_to_step(idx, f"segment_{n:02d}.json", dumps_json(doc).encode())

    rec.add_step(state, {})
    seg(0, 0, {"prompt": "before reset"})
    rec.add_step(state, {}, command={"action": "reset", "reason": "r"}, result={"ok": True})
    seg(1, 1, {"prompt": "soup"})
    seg(1, 2, {"prompt": "nothing"}, found=False)  # an empty mask is not a recipe line
    seg(1, 3, {"point": [10, 20]}, camera="wrist")
    rec.add_step(state, {}, command={"action": "move_to", "xyz": [1, 2, 3]}, result={"reached": True})
    rec.add_step(state, {}, command={"action": "move_to", "xyz": [9, 9, 9]}, result={"error": "refused"})
    seg(3, 4, {"prompt": "basket"}, camera="wrist")
    rec.add_artifact_to_step(3, "segment_05.json", b'{"found": true, "camera": "agentview"}')  # older run: no query
    assert rec.recipe_commands() == [
        {"action": "segment", "prompt": "soup", "camera": "agentview", "artifact": "segment_01.json/01.json"},
        {"action": "segment", "point": [10, 20], "camera": "wrist", "artifact": "segment_03.json/01.json"},
        {"action": "move_to", "xyz": [1, 2, 3]},
        {"action": "segment", "prompt": "basket", "camera": "wrist", "artifact": "segment_04.json/03.json"},
    ]


def test_generate_from_a_recipe_with_segment_lines(tmp_path):
    """A recipe listing its segment calls drives the plan order; the reference estimates come
    from the segment artifacts next to the recipe, else from the transcript."""
    audit, recipe = _run(tmp_path)
    old = [json.loads(x) for x in recipe.read_text().splitlines()]
    art = tmp_path / "segment_01.json"
    art.mkdir()
    (art / "00.json").write_text(json.dumps({"found": True, "object": "basket_1", "camera": "agentview",
                                             "object_estimate": _est(0.02, 0.27, 0, 0.15, 0.15)}))
    new = [{"action": "segment", "prompt": "soup", "camera": "agentview"},  # no artifact: from the transcript
           {"action": "segment", "prompt": "basket", "camera": "agentview", "artifact": "segment_01.json/00.json"},
           {"action": "segment", "point": [5, 5], "camera": "wrist", "artifact": "segment_09.json/00.json"},
           *old]
    recipe.write_text("".join(json.dumps(c) + "\n" for c in new))
    generate(audit, recipe, tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", "object_t4_s0")
    assert [a["prompt"] for a in anchors["anchors"]] == ["soup", "basket"]
    assert anchors["anchors"][0]["observations"][0]["estimate"]["center"] == [-0.1, -0.2, 0.04]
    assert anchors["anchors"][1]["observations"][0]["estimate"]["center"] == [0.02, 0.27, 0.04]  # the artifact's
    assert [s["op"] for s in plan["steps"]][:3] == ["locate", "locate", "tool"]
    assert plan["steps"][6]["anchor"] == "a1" and plan["steps"][6]["offset_xy"] == [-0.01, -0.01]
    # a segment line that neither its artifact nor the transcript can answer is named
    recipe.write_text(json.dumps({"action": "segment", "prompt": "ghost", "camera": "agentview"}) + "\n"
                      + "".join(json.dumps(c) + "\n" for c in old))
    with pytest.raises(FlashGenerateError, match="segment 'ghost' on agentview"):
        generate(audit, recipe, tmp_path / "flash2")
    # a recipe of another cell is refused
    other = tmp_path / "object_t5_s0_recipe.jsonl"
    other.write_text("".join(json.dumps(c) + "\n" for c in old))
    with pytest.raises(FlashGenerateError, match="recipe of object_t5_s0"):
        generate(audit, other, tmp_path / "flash3")


def _grasp_descent_plan(descent_extra: dict | None = None, lift: bool = True) -> tuple[dict, dict]:
    """Anchors and plan of one cream-cheese grasp (hover, a descent to z 0.013 m, close, and a lift when
    ``lift``); ``descent_extra`` adds arguments to the descent's ``move_to``."""
    anchors = {"anchors": [{"id": "a0", "prompt": "cream cheese", "object": None,
                            "observations": [{"camera": "agentview", "estimate": _est(0.05, -0.1, 0.0, 0.07, 0.035)}]}]}
    steps = [
        {"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
        {"op": "tool", "tool": "move_to", "args": {"xyz": [0.05, -0.1, 0.1], "target_yaw": 0.0}, "anchor": "a0",
         "observation": 0, "offset_xy": [0.0, 0.0]},
        {"op": "tool", "tool": "move_to", "args": {"xyz": [0.05, -0.1, 0.013], "target_yaw": 0.0, "tol": 0.008,
                                                   "step_clip": 0.015, "max_steps": 100, **(descent_extra or {})},
         "anchor": "a0", "observation": 0, "offset_xy": [0.0, 0.0]},
        {"op": "tool", "tool": "set_gripper", "args": {"gripper": 1.0, "steps": 15}, "anchor": None,
         "observation": None, "offset_xy": None}]
    if lift:
        steps.append({"op": "tool", "tool": "move_to", "args": {"xyz": [0.05, -0.1, 0.25]}, "anchor": "a0",
                      "observation": 0, "offset_xy": [0.0, 0.0]})
    return anchors, {"steps": steps}


def test_blocked_grasp_descent_is_retried_once_shifted_along_the_long_axis():
    """A grasp descent stopped 1.7 cm above its target (the hand met a neighbour) is repaired:
    rise to the hover height, shift 1.5 cm along the object's long axis away from the push,
    descend again; the lift after the grasp keeps the shift. A descent that reached is left alone."""
    anchors, plan = _grasp_descent_plan()
    calls = []

    def call(name, args, blocked=True):
        calls.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": _est(0.06, -0.1, 0.0, 0.07, 0.035)}
        if name == "move_to" and args["xyz"][2] == 0.013 and len([c for c in calls if c[0] == "move_to"]) == 2:
            return {"reached": False, "final_eef_pos": [0.0676, -0.1037, 0.0297]}  # blocked, pushed +x
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    planner = FlashPlanner()
    planner._replay(plan, anchors, call, lambda text: None, None)
    moves = [a["xyz"] for n, a in calls if n == "move_to"]
    assert moves == [[0.06, -0.1, 0.1], [0.06, -0.1, 0.013],  # hover, blocked descent
                     [0.0676, -0.1037, pytest.approx(0.11)],  # rise straight up, 1 cm above the hover height
                     [pytest.approx(0.045), -0.1, 0.1], [pytest.approx(0.045), -0.1, 0.013],  # -x: away from the push
                     [pytest.approx(0.045), -0.1, 0.25]]  # the lift keeps the shift
    assert [n for n, _ in calls].count("set_gripper") == 1
    assert [n for n, _ in calls].count("segment") == 2  # the object is looked at again after the blocked descent
    # flash_replay.json's plan-step log names the repair next to the replayed steps
    ops = [(e["op"], e.get("tool") or e.get("kind")) for e in planner._log]
    assert ops == [("locate", None), ("tool", "move_to"), ("tool", "move_to"), ("repair", "blocked_grasp_descent"),
                   ("tool", "set_gripper"), ("tool", "move_to")]
    assert planner._log[2]["reached"] is False and planner._log[2]["mode"] == "anchored"
    repair = planner._log[3]
    assert repair["grasp_shift_xy"] == [pytest.approx(-0.015), 0.0] and repair["relocalised"] is True
    # a descent that reached its target (or stopped within 8 mm) is not retried
    calls.clear()

    def fine(name, args):
        calls.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": _est(0.06, -0.1, 0.0, 0.07, 0.035)}
        return {"reached": name != "move_to" or args["xyz"][2] != 0.013, "final_eef_pos": [0.06, -0.1, 0.019]}

    FlashPlanner()._replay(plan, anchors, fine, lambda text: None, None)
    assert [n for n, _ in calls] == ["segment", "move_to", "move_to", "set_gripper", "move_to"]


def test_retried_descent_levels_the_hand_tilted_by_the_block():
    """libero_object task 1 seeds 1/3/5: the blocked descent tilted the hand by 0.13 rad about
    world x, ``move_to`` kept that tilt and the fingers closed askew (0.025 m) on the box, which
    slipped on the lift. The re-alignment and the retried descent are ``move_pose`` calls that
    servo the pitch back to the one before the descent; the repair log names both pitches."""
    anchors, plan = _grasp_descent_plan({"yaw_step_clip": 0.1}, lift=False)
    calls = []

    def state(pitch):
        return {"state_after": {"state": {"eef_pitch": pitch}}}

    def call(name, args):
        calls.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": _est(0.06, -0.1, 0.0, 0.07, 0.035)}
        if name == "move_to" and args["xyz"][2] == 0.013:
            return {"reached": False, "final_eef_pos": [0.0676, -0.1037, 0.0297], **state(-0.132)}  # blocked, tilted
        tilted = name == "move_to" and len(calls) > 2  # the rise after the block: still tilted
        return {"reached": True, "final_eef_pos": args.get("xyz"), **state(-0.132 if tilted else -0.003)}

    planner = FlashPlanner()
    planner._replay(plan, anchors, call, lambda text: None, None)
    names = [n for n, _ in calls]
    assert names == ["segment", "move_to", "move_to", "move_to", "segment", "move_pose", "move_pose", "set_gripper"]
    # hover -> blocked descent -> rise (tilted) -> look -> level at the shifted hover -> level descent
    realign, descent = calls[5][1], calls[6][1]
    assert realign["target_pitch"] == descent["target_pitch"] == -0.003  # the pitch before the blocked descent
    assert realign["xyz"] == [pytest.approx(0.045), -0.1, 0.1] and realign["tol"] == 0.004
    assert descent["xyz"] == [pytest.approx(0.045), -0.1, 0.013] and descent["step_clip"] == 0.015
    assert "yaw_step_clip" not in descent and descent["target_yaw"] == 0.0  # move_pose has no yaw_step_clip
    repair = next(e for e in planner._log if e["op"] == "repair")
    assert repair["pitch_before_rad"] == -0.003 and repair["pitch_blocked_rad"] == -0.132
    assert repair["level_pitch"] == -0.003
    # a pitch reading far from pointing down (2.95 rad) is no pose to go back to: the retry keeps
    # the hand's orientation
    calls.clear()

    def odd(name, args):
        res = call(name, args)
        return {**res, **state(2.949)} if name == "move_to" and args["xyz"][2] == 0.1 else res

    planner = FlashPlanner()
    planner._replay(plan, anchors, odd, lambda text: None, None)
    assert [n for n, _ in calls] == ["segment", "move_to", "move_to", "move_to", "segment", "move_to", "move_to",
                                     "set_gripper"]
    assert next(e for e in planner._log if e["op"] == "repair")["level_pitch"] is None


def test_retry_keeps_the_earlier_estimate_when_the_new_look_is_partial():
    """After a blocked descent the object is looked at again; a look that shows only part of it
    (footprint > 20 % smaller: its centre is biased) is not used."""
    from rpent.flash.descent import same_footprint as _same_footprint

    ref = _est(0.05, -0.1, 0.0, 0.07, 0.035)
    assert _same_footprint(_est(0.06, -0.1, 0.0, 0.072, 0.034), ref)
    assert not _same_footprint(_est(0.066, -0.1, 0.0, 0.051, 0.035), ref)  # cut by the image edge
    assert not _same_footprint(_est(0.066, -0.1, 0.0, 0.07, 0.0), ref)


def _cabinet(dx=0.0, dy=0.0):
    """A ``view_fixtures`` result: a cabinet of two drawers (handles at the same XY, 7 cm apart in
    z) and a stove button without a handle (its box centre), shifted by (dx, dy) m."""
    def part(name, z):
        return {"part": name, "joint": name, "type": "slide", "qpos": 0.0,
                "handle": [0.04 + dx, -0.14 + dy, z], "min": [-0.08 + dx, -0.33 + dy, z - 0.03],
                "max": [0.14 + dx, -0.12 + dy, z + 0.03]}
    return {"fixtures": {"wooden_cabinet_1": [part("cabinet_top", 1.09), part("cabinet_middle", 1.015)],
                         "flat_stove_1": [{"part": "button", "type": "hinge", "handle": None,
                                           "min": [-0.46 + dx, 0.16 + dy, 0.90], "max": [-0.36 + dx, 0.26 + dy, 0.96]}]}}


def test_fixture_parts_read_before_the_first_motion_become_anchors(tmp_path):
    """A run that read drawers with ``view_fixtures`` (the scripted planner's way for libero_goal)
    and localised nothing with ``segment`` still makes a plan: the waypoints near a part bind to
    it (the nearest part in 3-D among those within the XY radius), the unused parts are left out,
    and the replay re-reads them with one ``view_fixtures`` call and follows a moved cabinet."""
    from rpent.flash.generate import fixture_estimate

    calls = [("view_env_state", {}, {"robot": {}}), ("view_fixtures", {}, _cabinet()),
             ("move_to", {"xyz": [-0.09, 0.0, 1.12]}, {"reached": True}),  # far from every part: absolute
             ("move_to", {"xyz": [0.04, -0.01, 1.075]}, {"reached": True}),
             ("move_pose", {"xyz": [0.04, -0.13, 1.015], "target_pitch": -1.57}, {"reached": True}),
             ("set_gripper", {"gripper": 1.0, "steps": 15}, {"gripper": 1.0}),
             ("view_fixtures", {}, _cabinet()),  # after moving: not an anchor
             ("move_pose", {"xyz": [0.04, -0.05, 1.015], "target_pitch": -1.57}, {"reached": True}),
             ("move_pose", {"xyz": [0.04, 0.03, 1.015], "target_pitch": -1.57}, {"reached": True}),  # 17 cm: held
             ("finish", {"status": "success", "summary": "ok"}, {"_finish": True})]
    messages = [{"role": "user", "content": [{"type": "text", "text": "open the middle drawer"}], "source": "task"}]
    recipe = []
    for i, (name, args, res) in enumerate(calls):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"c{i}", "name": name,
                                                           "input": args}]})
        messages.append({"role": "tool", "name": name, "tool_call_id": f"c{i}", "content": res, "is_error": False})
        if name not in ("view_env_state", "view_fixtures", "finish"):
            recipe.append({"action": name, **args})
    doc = {"suite": "libero_goal", "task": 0, "seed": 0, "task_language": "open the middle drawer",
           "planner": "scripted", "model": None, "environment_success": True, "messages": messages}
    (tmp_path / "transcript_goal_t0_s0.json").write_text(json.dumps(doc))
    (tmp_path / "goal_t0_s0_recipe.jsonl").write_text("".join(json.dumps(c) + "\n" for c in recipe))
    generate(tmp_path / "transcript_goal_t0_s0.json", tmp_path / "goal_t0_s0_recipe.jsonl", tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", "goal_t0_s0")
    assert [(a["id"], a["prompt"], a["kind"]) for a in anchors["anchors"]] == [
        ("f1", "wooden_cabinet_1/cabinet_top", "fixture_part"), ("f2", "wooden_cabinet_1/cabinet_middle", "fixture_part")]
    assert [(s["op"], s.get("tool"), s["anchor"]) for s in plan["steps"]] == [  # f0 (the stove button) binds nothing
        ("locate", None, "f1"), ("locate", None, "f2"), ("tool", "move_to", None), ("tool", "move_to", "f1"),
        ("tool", "move_pose", "f2"), ("tool", "set_gripper", None), ("tool", "move_pose", "f2"),
        ("tool", "move_pose", "f2")]  # the end of the pull follows the held drawer, though beyond the radius
    assert plan["steps"][6]["offset_xy"] == [0.0, pytest.approx(0.09)]
    assert plan["steps"][7]["offset_xy"] == [0.0, pytest.approx(0.17)]
    assert fixture_estimate(_cabinet(), "flat_stove_1", "button")["center"] == [-0.41, 0.21, 0.93]  # no handle: box
    assert fixture_estimate(_cabinet(), "flat_stove_1", "knob") is None
    # the replay: the cabinet moved 2 cm in x and -1 cm in y; one view_fixtures serves both locates
    seen = []

    def call(name, args):
        seen.append((name, args))
        return _cabinet(0.02, -0.01) if name == "view_fixtures" else {"reached": True}

    planner = FlashPlanner()
    planner._replay(plan, {"anchors": anchors["anchors"]}, call, lambda text: None, None)
    assert [n for n, _ in seen] == ["view_fixtures", "move_to", "move_to", "move_pose", "set_gripper", "move_pose",
                                    "move_pose"]
    moves = [a["xyz"] for n, a in seen if n in ("move_to", "move_pose")]
    assert moves[0] == [-0.09, 0.0, 1.12]  # unbound: as recorded
    assert moves[1] == [pytest.approx(0.06), pytest.approx(-0.02), 1.075]
    assert moves[3] == [pytest.approx(0.06), pytest.approx(-0.06), 1.015]
    assert moves[4] == [pytest.approx(0.06), pytest.approx(0.02), 1.015]
    assert all(e["found"] for e in planner._log if e["op"] == "locate")
    # a part the live scene lacks is a named failure, as for a lost object
    with pytest.raises(Exception, match="flash_anchor_not_found"):
        FlashPlanner()._replay(plan, {"anchors": anchors["anchors"]},
                               lambda n, a: {"fixtures": {}} if n == "view_fixtures" else {"reached": True},
                               lambda text: None, None)


def test_partial_relook_falls_back_to_the_first_observations_camera():
    """A blocked descent's wrist look that shows only part of the object (the hand hides it) is
    replaced by a look with the anchor's first camera; the rebuilt grasp is that live centre plus
    the recorded difference between the two observations, plus the shift."""
    anchors = {"anchors": [{"id": "a0", "prompt": "cream cheese", "object": None, "observations": [
        {"camera": "agentview", "estimate": _est(0.053, -0.1, 0.0, 0.067, 0.033)},
        {"camera": "wrist", "estimate": _est(0.0475, -0.1, 0.0, 0.072, 0.035)}]}]}
    plan = {"steps": [
        {"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
        {"op": "locate", "anchor": "a0", "camera": "wrist", "observation": 1},
        {"op": "tool", "tool": "move_to", "args": {"xyz": [0.0475, -0.1, 0.1]}, "anchor": "a0",
         "observation": 1, "offset_xy": [0.0, 0.0]},
        {"op": "tool", "tool": "move_to", "args": {"xyz": [0.0475, -0.1, 0.013], "tol": 0.008}, "anchor": "a0",
         "observation": 1, "offset_xy": [0.0, 0.0]},
        {"op": "tool", "tool": "set_gripper", "args": {"gripper": 1.0, "steps": 15}, "anchor": None,
         "observation": None, "offset_xy": None}]}
    calls = []
    looks = iter([_est(0.06, -0.1, 0.0, 0.067, 0.033), _est(0.055, -0.1, 0.0, 0.072, 0.035),  # before
                  _est(0.063, -0.1, 0.0, 0.056, 0.035),  # the wrist look after the block: partial
                  _est(0.065, -0.1, 0.0, 0.068, 0.033)])  # agentview: whole (the object moved +5 mm)

    def call(name, args):
        calls.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": next(looks)}
        if name == "move_to" and args["xyz"][2] == 0.013 and len([c for c in calls if c[0] == "move_to"]) == 2:
            return {"reached": False, "final_eef_pos": [0.0625, -0.1, 0.0297]}  # blocked, pushed +x
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    planner = FlashPlanner()
    planner._replay(plan, anchors, call, lambda text: None, None)
    assert [a["camera"] for n, a in calls if n == "segment"] == ["agentview", "wrist", "wrist", "agentview"]
    moves = [a["xyz"] for n, a in calls if n == "move_to"]
    # 0.065 (live agentview) - 0.0055 (recorded wrist - agentview) - 0.015 (shift away from the push)
    assert moves[-1] == [pytest.approx(0.0445), -0.1, 0.013] and moves[-2][:2] == [pytest.approx(0.0445), -0.1]
    repair = next(e for e in planner._log if e["op"] == "repair")
    assert repair["relocalised"] is True and repair["relocalised_camera"] == "agentview"


def test_a_plan_that_ends_holding_gets_one_final_release():
    """libero_spatial_swap task 2: the source run was solved while it held the bowl down on the
    plate, so its plan ends with the gripper closed; on a seed where the predicate does not hold
    after the last step the replay opens the gripper once (a stalled one is driven open)."""
    def tool(name, **args):
        return {"op": "tool", "tool": name, "args": args, "anchor": None, "observation": None, "offset_xy": None}

    holding = [tool("set_gripper", gripper=1.0, steps=15), tool("move_to", xyz=[0.07, 0.08, 0.95])]
    assert FlashPlanner._ends_holding(holding)
    assert not FlashPlanner._ends_holding([*holding, tool("release")])
    assert not FlashPlanner._ends_holding([tool("set_gripper", gripper=-1.0, steps=5), tool("move_to", xyz=[0, 0, 1])])
    assert not FlashPlanner._ends_holding([tool("move_to", xyz=[0, 0, 1])])
    # the scripted planner closes on a plate's rim with the descent itself (move_to gripper=+1)
    assert FlashPlanner._ends_holding([tool("move_to", xyz=[0, 0, 0.9], gripper=1.0), tool("move_to", xyz=[0, 0, 1])])
    assert not FlashPlanner._ends_holding([tool("move_to", xyz=[0, 0, 0.9], gripper=1.0), tool("move_to", xyz=[0, 0, 1],
                                                                                             gripper=-1.0)])
    for release, expected in [({"final_gripper_opening": 0.075, "start_gripper_opening": 0.008,
                                "peak_gripper_opening": 0.075}, ["release"]),
                              ({"final_gripper_opening": 0.009, "start_gripper_opening": 0.008,
                                "peak_gripper_opening": 0.009}, ["release", "set_gripper"])]:
        calls = []

        def call(name, args, release=release):
            calls.append(name)
            return release if name == "release" else {"gripper_opening": 0.07}

        planner = FlashPlanner()
        planner._log = []
        planner._final_release(call, lambda text: None)
        assert calls == expected
        assert [e["kind"] for e in planner._log] == ["final_release", "stalled_release"][:len(expected)]


def test_stalled_release_is_driven_open_once():
    """A release whose fingers did not open (``release`` stops after 6 env steps without growth;
    libero_object task 7 seeds 3 and 5: the milk stayed in the hand above the basket) is followed
    by one ``set_gripper(-1)``, logged as a ``stalled_release`` repair; a release that opened is not."""
    from rpent.flash.replay import REOPEN_STEPS

    anchors = {"anchors": []}
    plan = {"steps": [{"op": "tool", "tool": "release", "args": {}, "anchor": None, "observation": None,
                       "offset_xy": None}]}
    for res, repaired in [({"steps_used": 6, "start_gripper_opening": 0.0537, "peak_gripper_opening": 0.0542,
                            "final_gripper_opening": 0.0542, "terminated": False}, True),
                          ({"steps_used": 10, "start_gripper_opening": 0.0536, "peak_gripper_opening": 0.0733,
                            "final_gripper_opening": 0.0733, "terminated": False}, False),
                          ({"steps_used": 6, "start_gripper_opening": 0.0537, "peak_gripper_opening": 0.0542,
                            "final_gripper_opening": 0.0542, "terminated": True}, False)]:  # already solved
        calls = []

        def call(name, args, res=res):
            calls.append((name, args))
            return res if name == "release" else {"gripper": -1.0, "steps": 4, "gripper_opening": 0.0733,
                                                  "terminated": True}

        planner = FlashPlanner()
        planner._replay(plan, anchors, call, lambda text: None, None)
        if repaired:
            assert calls == [("release", {}), ("set_gripper", {"gripper": -1.0, "steps": REOPEN_STEPS})]
            assert planner._log[-1] == {"plan_step": 0, "op": "repair", "kind": "stalled_release",
                                        "opening_before_m": 0.0542, "opening_after_m": 0.0733}
        else:
            assert calls == [("release", {})] and all(e["op"] != "repair" for e in planner._log)


@pytest.mark.parametrize("change, needle", [
    ({"timeout_s": -5.0}, "--planner-timeout-s must be > 0 seconds"),
    ({"cuda_device": -3}, "--cuda-device must be an EGL device index >= 0"),
    ({"max_episode_steps": 0}, "--max-episode-steps 0 is out of range: valid step limits are 1.."),
    ({"seeds": [2**63]}, "--seeds 9223372036854775808 is out of range: valid seeds are 0..9223372036854775807"),
    ({"output_root": "FILE"}, "is a file, not a directory"),
    ({"output_root": "USED"}, "already holds files"),
    ({"output_root": "UNDER_FILE"}, "cannot be a directory"),
    ({"flash_dir": "FILE"}, "is a file; give the directory"),
])
def test_replay_options_are_refused_before_anything_starts(tmp_path, change, needle):
    """Each is one ValueError line before an env server starts or anything is written into an earlier
    replay's ``replay.jsonl``."""
    from rpent.flash.batch import ReplayOptions, check_options

    (tmp_path / "file").write_text("x")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "replay.jsonl").write_text("{}\n")
    paths = {"FILE": str(tmp_path / "file"), "USED": str(tmp_path / "used"),
             "UNDER_FILE": str(tmp_path / "file" / "sub")}
    kw = dict(flash_dir=str(tmp_path / "flash"), suite="libero_object", task=0, seeds=[1],
              output_root=str(tmp_path / "out"))
    kw.update({k: paths.get(v, v) if isinstance(v, str) else v for k, v in change.items()})
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        check_options(ReplayOptions(**kw))
    assert (tmp_path / "used" / "replay.jsonl").read_text() == "{}\n" and not (tmp_path / "out").exists()


def test_a_replay_stopped_between_episodes_says_so_in_its_ledger(tmp_path):
    """A signal that lands between two episodes stops the replay before the next seed: the ledger gets
    a ``stopped`` line with the reason and the seeds that never started (a reader must not take the
    rows above it for the whole replay)."""
    import trio

    from rpent.flash.batch import ReplayOptions, _replay_all

    rows: list[dict] = []
    opts = ReplayOptions(flash_dir=str(tmp_path), suite="libero_object", task=0, seeds=[6, 7, 8, 9],
                         output_root=str(tmp_path / "out"))
    stop = {"why": "received SIGINT", "scope": None, "steering": None}
    trio.run(_replay_all, opts, tmp_path, None, rows.append, stop)
    assert rows == [{"kind": "stopped", "suite": "libero_object", "task": 0, "reason": "received SIGINT",
                     "seeds_not_started": [6, 7, 8, 9]}]


def test_a_malformed_plan_is_refused_before_an_env_server_starts(tmp_path):
    """A plan with a bad step is found before the env server starts: check_options reads and
    cross-checks the plan and its anchors first."""
    from rpent.flash.batch import ReplayOptions, check_options

    flash = tmp_path / "flash"
    flash.mkdir()
    (flash / "object_t0_s0_plan.json").write_text(json.dumps({"schema": "rpent.flash.plan/1", "steps": [{}]}))
    (flash / "object_t0_s0_anchors.json").write_text(json.dumps({"schema": "rpent.flash.anchors/1", "anchors": []}))
    with pytest.raises(ValueError, match="unknown op None.*rpent-flash generate"):
        check_options(ReplayOptions(flash_dir=str(flash), suite="libero_object", task=0, seeds=[1],
                                    output_root=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()
    # a plan that is not JSON: one hint to regenerate it, with the command
    (flash / "object_t0_s0_plan.json").write_text("{not json")
    with pytest.raises(ValueError) as err:
        check_options(ReplayOptions(flash_dir=str(flash), suite="libero_object", task=0, seeds=[1],
                                    output_root=str(tmp_path / "out")))
    assert str(err.value).count("regenerate") == 1 and "rpent-flash generate --audit A" in str(err.value)


def test_only_waypoints_on_the_way_between_two_anchored_ones_are_interpolated():
    """A transport midpoint (on the recorded segment) follows both anchors; a free spot 14 cm off
    the segment (libero_goal task 3: the bowl set aside before the drawer is opened) and a retreat
    point behind the first anchored waypoint (t clamped to 0, 13 cm away) are replayed as recorded."""
    from rpent.flash.generate import INTERP_MAX_OFF_M, _interpolate_free_waypoints

    def move(x, y, anchor=None):
        return {"op": "tool", "tool": "move_to", "args": {"xyz": [x, y, 1.0]}, "anchor": anchor}

    def locate(anchor):
        return {"op": "locate", "anchor": anchor, "camera": "agentview", "observation": 0}

    steps = [locate("a0"), locate("a1"), move(-0.08, 0.05, "a0"), move(-0.076, 0.078), move(0.06, 0.2175),
             move(-0.208, 0.0), move(-0.0725, 0.105, "a1")]
    _interpolate_free_waypoints(steps)
    assert steps[3]["interp"] == [2, 6, pytest.approx(0.51, abs=0.02)]
    assert "interp" not in steps[4] and "interp" not in steps[5]
    assert INTERP_MAX_OFF_M == 0.05
    # libero_10_swap task 0: the next anchored waypoint belongs to an object first looked at later
    # (the second object of the task): not interpolated, and a plan that says so anyway (made
    # before this rule) is replayed as recorded instead of failing on the anchor
    steps = [locate("a0"), move(-0.08, 0.05, "a0"), move(-0.076, 0.078), locate("a1"), move(-0.0725, 0.105, "a1")]
    _interpolate_free_waypoints(steps)
    assert "interp" not in steps[2]
    steps[2]["interp"] = [1, 4, 0.5]
    anchors = {"a0": {"id": "a0", "observations": [{"estimate": _est(-0.08, 0.05)}]},
               "a1": {"id": "a1", "observations": [{"estimate": _est(-0.07, 0.1)}]}}
    for s in (steps[1], steps[4]):
        s.update(observation=0, offset_xy=[0.0, 0.0])
    live = {"a0": {0: _est(-0.07, 0.05)}, "a1": {}}
    assert FlashPlanner()._args(steps, 2, anchors, live)["xyz"] == [-0.076, 0.078, 1.0]


def test_a_look_at_several_instances_stands_for_the_one_the_run_grasped():
    """libero_spatial_swap task 3 (two akita black bowls): the source look listed both, top-scored
    the one 16 cm away, and the run grasped the other (on the cookies box). The anchor is the grasped
    instance (the one some following waypoint comes nearest, within the radius), its locate step says
    ``instances: 2``, and the replay looks at all instances and keeps the one nearest the recorded
    centre, whichever the live top result is."""
    from rpent.flash.generate import pick_instance

    far, used = _est(0.083, 0.197), _est(0.058, 0.035)
    res = {"found": True, "object": "bowl_2", "object_estimate": far,
           "instances": [{"object": "bowl_1", "object_estimate": used}, {"object": "bowl_2", "object_estimate": far}]}
    later = [{"action": "segment", "prompt": "plate"}, {"action": "move_to", "xyz": [0.5, 0.5, 1.2]},  # beyond both
             {"action": "move_to", "xyz": [0.0205, 0.0348, 1.18]}]  # the rim grasp hover of bowl_1
    est, obj, n = pick_instance(res, later, 0.15)
    assert (est, obj, n) == (used, "bowl_1", 2)
    assert pick_instance(res, later[:2], 0.15) == (far, "bowl_2", 2)  # no waypoint near either: the top one
    assert pick_instance({"object": "x", "object_estimate": used}, later, 0.15) == (used, "x", 1)
    # libero_spatial_task task 0 ("the bowl not between the plate and the ramekin"): the first waypoint
    # after the look (a hover by the ramekin) is 9 cm from the unused bowl; the grasp hover that
    # follows is 1 mm from the used one
    unused, grasped = _est(-0.2548, 0.2266), _est(-0.1699, 0.324)
    res0 = {"found": True, "object": "bowl_1", "object_estimate": unused,
            "instances": [{"object": "bowl_1", "object_estimate": unused}, {"object": "bowl_2", "object_estimate": grasped}]}
    later0 = [{"action": "move_to", "xyz": [-0.1897, 0.1623, 1.10]}, {"action": "move_to", "xyz": [-0.171, 0.3245, 1.03]}]
    assert pick_instance(res0, later0, 0.15) == (grasped, "bowl_2", 2)

    anchors = {"anchors": [{"id": "a0", "prompt": "akita black bowl", "object": "bowl_1", "observations": [
        {"camera": "agentview", "estimate": used, "object": "bowl_1", "instances": 2}]}]}
    plan = {"steps": [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0, "instances": 2},
                      {"op": "tool", "tool": "move_to", "args": {"xyz": [0.0205, 0.035, 1.18]}, "anchor": "a0",
                       "observation": 0, "offset_xy": [-0.0375, 0.0]}]}
    calls = []

    def call(name, args):
        calls.append((name, args))
        if name == "segment":  # live: the other bowl scores higher
            return {"found": True, "object_estimate": _est(0.09, 0.2),
                    "instances": [{"object_estimate": _est(0.09, 0.2)}, {"object_estimate": _est(0.066, 0.03)}]}
        return {"reached": True}

    FlashPlanner()._replay(plan, anchors, call, lambda text: None, None)
    assert calls[0] == ("segment", {"prompt": "akita black bowl", "camera": "agentview", "all_instances": True})
    assert calls[1][1]["xyz"] == [pytest.approx(0.0285), pytest.approx(0.03), 1.18]


def test_an_unsolved_replay_names_what_went_wrong():
    """The failure summary of a replay that ran every step adds the first empty grasp (the fingers
    closed on nothing by the motion after it), else the anchored waypoints not reached."""
    from rpent.flash.replay import _diagnosis

    def tool(i, name, mode="anchored", reached=True, opening=0.079, **args):
        return {"plan_step": i, "op": "tool", "tool": name, "mode": mode, "live_args": args, "reached": reached,
                "gripper_opening_m": opening}

    log = [tool(3, "move_to"), tool(4, "move_to", reached=False), tool(5, "set_gripper", "as_recorded", None, 0.02,
                                                                        gripper=1.0),
           tool(6, "move_to", opening=0.001)]
    assert _diagnosis(log) == "the grasp of plan step 5 came up empty: gripper opening 0.001 m after plan step 6"
    log[-1]["gripper_opening_m"] = 0.034  # it holds the object: the unreached descent is named instead
    assert _diagnosis(log) == "anchored waypoints not reached at plan steps 4"
    log[1]["reached"] = True
    assert _diagnosis(log) == ""


def test_a_replay_episode_stopped_by_a_signal_has_its_records_figures_in_the_ledger(tmp_path):
    """After SIGINT at 64 env steps the ``replay.jsonl`` row says 64, as the run's transcript does: the
    ledger row takes the run's own record."""
    from rpent.flash.batch import _stopped_row

    run = tmp_path / "object_t0_s5"
    run.mkdir()
    assert _stopped_row(run, "received SIGINT") == {"success": None, "label": "cancelled", "finish": None,
                                                     "error": "received SIGINT", "env_steps": None}
    (run / "transcript_object_t0_s5.json").write_text(json.dumps(
        {"label": "cancelled", "environment_success": False, "finish": None,
         "error": "run cancelled (received SIGINT)", "env_steps": 64}))
    assert _stopped_row(run, "received SIGINT") == {"success": False, "label": "cancelled", "finish": None,
                                                     "error": "run cancelled (received SIGINT)", "env_steps": 64}
    (run / "transcript_object_t0_s5.json").write_bytes(b"{half")
    assert _stopped_row(run, "received SIGINT")["env_steps"] is None


def test_a_place_on_a_support_surface_follows_the_target_not_the_carried_object(tmp_path):
    """libero_goal task 1 ("put the plate on the stove"): the scripted planner sets the plate down
    over the stove's ``support`` (its burner plate, 17 cm from the centre of the stove's mask) and
    looks at the plate while carrying it. The set-down binds to the stove's support point, not to
    the plate in the hand (whose carried look sees it wherever the hand is); the lift, with no
    other object near, stays with the plate's grasp observation."""
    plate = {**_est(0.04, -0.015), "support": [0.04, -0.017, 0.91]}
    stove = {**_est(-0.40, 0.20), "support": [-0.232, 0.194, 0.926]}
    carried = {**_est(-0.18, 0.19), "support": [-0.17, 0.19, 1.15]}  # the plate seen in the hand
    grip = {"gripper": 1.0}
    calls = [("segment", {"prompt": "plate"}, {"found": True, "object": "plate_1", "object_estimate": plate}),
             ("segment", {"prompt": "stove"}, {"found": True, "object": "flat_stove_1", "object_estimate": stove}),
             ("move_to", {"xyz": [0.095, -0.015, 1.09], "gripper": -1.0}, {"reached": True}),
             ("move_to", {"xyz": [0.095, -0.015, 0.88], **grip}, {"reached": False}),  # descend and close
             ("move_to", {"xyz": [0.095, -0.015, 1.18], **grip}, {"reached": True}),  # lift
             ("move_to", {"xyz": [-0.177, 0.194, 1.18], **grip}, {"reached": True}),  # over the burner
             ("segment", {"prompt": "plate"}, {"found": True, "object": "plate_1", "object_estimate": carried}),
             ("move_to", {"xyz": [-0.177, 0.194, 1.05], **grip}, {"reached": True}),  # set down
             ("finish", {"status": "success", "summary": "ok"}, {"_finish": True})]
    audit, recipe = _write_run(tmp_path, calls)
    generate(audit, recipe, tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", "goal_t1_s0")
    tools = [s for s in plan["steps"] if s["op"] == "tool"]
    assert [(s["anchor"], s["observation"], s.get("ref")) for s in tools] == [
        ("a0", 0, None), ("a0", 0, None), ("a0", 0, None), ("a1", 0, "support"), ("a1", 0, "support")]
    assert tools[-1]["offset_xy"] == [pytest.approx(0.055), pytest.approx(0.0)]
    assert anchors["anchors"][1]["observations"][0]["estimate"]["support"] == [-0.232, 0.194, 0.926]
    # the replay: the stove moved -1.5 cm in x; the set-down follows its live support point
    by_id = {a["id"]: a for a in anchors["anchors"]}
    live = {"a0": {0: plate}, "a1": {0: {**stove, "center": [-0.415, 0.2, 0.93], "support": [-0.247, 0.194, 0.926]}}}
    i = plan["steps"].index(tools[-1])
    assert FlashPlanner()._args(plan["steps"], i, by_id, live)["xyz"] == [pytest.approx(-0.192), pytest.approx(0.194),
                                                                          1.05]
    # a live look without a support point: the recorded support's offset from the centre
    live["a1"] = {0: {k: v for k, v in live["a1"][0].items() if k != "support"}}
    assert FlashPlanner()._args(plan["steps"], i, by_id, live)["xyz"][0] == pytest.approx(-0.192)


def _lifting_call(calls: list, looks, first_lift: float):
    """A tool ``call`` for replay tests: records each call in ``calls``, answers ``segment`` with
    the next estimate of ``looks``, and a lift (a ``move_to`` to z 0.25 m) with the gripper
    opening ``first_lift`` (m) the first time and 0.04 m (holding) after that."""

    def call(name, args):
        calls.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": next(looks)}
        lifts = [a for n, a in calls if n == "move_to" and a["xyz"][2] == 0.25]
        if name == "move_to" and args["xyz"][2] == 0.25:
            return {"reached": True, "state_after": {"state": {"gripper_opening": first_lift if len(lifts) == 1 else 0.04}}}
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    return call


def test_a_grasp_that_came_up_empty_is_retried_once_from_a_fresh_look():
    """The lift after a grasp ends with the fingers closed on nothing (the box slipped away while
    the fingers closed): where the source's grasp held (its next opening is a ``release``), the
    replay opens, looks at the object again with its first observation's camera, goes back over it
    at the approach's hover height and replays descent, close and lift once from the new estimate.
    A plan whose source opened the gripper again with a motion (the scripted planner's own retry)
    replays that instead."""
    from rpent.flash.regrasp import closing_step, source_grasp_held

    anchors, plan = _grasp_descent_plan()
    plan["steps"].append({"op": "tool", "tool": "release", "args": {}, "anchor": None, "observation": None,
                          "offset_xy": None})
    calls = []
    looks = iter([_est(0.06, -0.1, 0.0, 0.07, 0.035), _est(0.08, -0.09, 0.0, 0.07, 0.035)])
    call = _lifting_call(calls, looks, first_lift=0.001)

    planner = FlashPlanner()
    planner._replay(plan, anchors, call, lambda text: None, None)
    assert [n for n, _ in calls] == ["segment", "move_to", "move_to", "set_gripper", "move_to",  # empty lift
                                     "set_gripper", "segment", "move_to", "move_to", "set_gripper", "move_to",
                                     "release"]
    assert calls[5][1]["gripper"] == -1.0  # opened first
    moves = [a["xyz"] for n, a in calls if n == "move_to"][3:]
    assert moves == [[pytest.approx(0.08), -0.09, 0.1], [pytest.approx(0.08), -0.09, 0.013],
                     [pytest.approx(0.08), -0.09, 0.25]]  # over the new look, down, close, lift
    repair = next(e for e in planner._log if e["op"] == "repair")
    assert repair["kind"] == "empty_grasp" and repair["plan_step"] == 3 and repair["lift_step"] == 4
    assert repair["opening_before_m"] == 0.001 and repair["opening_after_m"] == 0.04 and repair["relocalised"]
    # the source's own retry: its next opening is a motion, not a release: no repair here
    retry = [*plan["steps"][:5], {"op": "tool", "tool": "move_to", "args": {"xyz": [0.05, -0.1, 0.3], "gripper": -1.0},
                                  "anchor": None, "observation": None, "offset_xy": None}]
    assert source_grasp_held(plan["steps"], 3) and not source_grasp_held(retry, 3)
    # fingers closed by a motion and never opened again: a closed-fingertip push, not a grasp
    push = [{"op": "tool", "tool": "move_to", "args": {"xyz": [0.0, 0.0, 0.3], "gripper": -1.0}},
            {"op": "tool", "tool": "move_to", "args": {"xyz": [0.0, 0.0, 0.2], "gripper": 1.0}},
            {"op": "tool", "tool": "move_to", "args": {"xyz": [0.0, 0.0, 0.1], "gripper": 1.0}},
            {"op": "tool", "tool": "move_pose", "args": {"xyz": [0.0, 0.1, 0.1], "gripper": 1.0}}]
    assert closing_step(push, 2) == 1 and not source_grasp_held(push, 1)
    held = [push[0], {"op": "tool", "tool": "set_gripper", "args": {"gripper": 1.0}}, push[2]]
    assert source_grasp_held(held, 1)  # closed at rest and carried to the end: the plan ends holding
    calls.clear()
    call = _lifting_call(calls, iter([_est(0.06, -0.1, 0.0, 0.07, 0.035)] * 3), first_lift=0.001)
    FlashPlanner()._replay({"steps": retry}, anchors, call, lambda text: None, None)
    assert [n for n, _ in calls].count("segment") == 1


def test_a_turned_grasp_yaw_past_the_wrist_limit_is_folded_by_pi():
    """libero_10_swap t1: the front camera's axis of the cream cheese box turned the hover yaw
    1.777 rad by +1.53 rad to 3.31 rad, past the last joint's range at that waypoint; the same grasp
    turned by pi (0.17 rad) is sent instead, so the hand does not swing away on its next turn."""
    ref = {**_est(-0.0367, -0.2199, yaw=0.2061, major=0.0366, minor=0.0103), "ridge_yaw": 0.2061}
    anchors = {"a0": {"id": "a0", "prompt": "cream cheese box", "observations": [{"camera": "agentview",
                                                                                 "estimate": ref}]}}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [-0.0367, -0.2199, 0.545], "target_yaw": 1.7769},
              "anchor": "a0", "observation": 0, "offset_xy": [0.0, 0.0]}]
    live = {"a0": {0: {**ref, "center": [0.0009, -0.2634, 0.44], "ridge_yaw": 0.2061 + 1.5333}}}
    assert FlashPlanner()._args(steps, 1, anchors, live)["target_yaw"] == pytest.approx(3.3102 - math.pi, abs=1e-3)
    live["a0"][0]["ridge_yaw"] = 0.2061 + 0.3  # within the joint's range: turned as before
    assert FlashPlanner()._args(steps, 1, anchors, live)["target_yaw"] == pytest.approx(2.0769)


@pytest.mark.parametrize("where", ["under_file", "uncreatable"])
def test_rpent_flash_replay_refuses_an_output_root_it_cannot_create_in_one_line(tmp_path, where):
    """An --output-root under a file, or where no directory can be made, is one line and exit 2 from
    the real command, before any env server starts."""
    from pathlib import Path

    audit, recipe = _run(tmp_path)
    flash = tmp_path / "f"
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit", str(audit), "--recipe",
                        str(recipe), "--destination", str(flash)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    (tmp_path / "file").write_text("x")
    root = tmp_path / "file" / "sub" if where == "under_file" else Path("/proc/rpent-no-such-dir/out")
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "replay", "--flash-dir", str(flash),
                        "--suite", "libero_object", "--task", "4", "--seeds", "1", "--output-root", str(root)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    needle = "is a file); choose a new directory" if where == "under_file" else "cannot be created in /proc (No such file"
    assert p.stderr.startswith(f"rpent-flash: error: --output-root {root}") and needle in p.stderr, p.stderr
    assert (tmp_path / "file").read_text() == "x"


def _blob(cx, cy, z0=0.93, z1=0.99, sx=0.06, sy=0.03, n=6):
    """World points (m) of a box-like thing standing at (cx, cy): its top face and sides."""
    pts = []
    for a in range(n):
        for b in range(n):
            x, y = cx - sx / 2 + sx * a / (n - 1), cy - sy / 2 + sy * b / (n - 1)
            pts += [[round(x, 4), round(y, 4), z1], [round(x, 4), round(y, 4), round((z0 + z1) / 2, 4)]]
    return pts


def test_a_thing_known_only_by_its_points_is_an_anchor_of_its_pick(tmp_path):
    """libero_goal_swap t5: the scripted planner sets aside what stands in the plate's way, found
    in a ``back_project`` point cloud (no ``segment`` names it), looked at again from above with the
    wrist camera. Its pick binds to a point anchor (one observation per look, the look's arguments
    kept) and follows it on another seed; once it is let go the anchor is retired, so a later push
    waypoint near where it stood binds to the plate."""
    plate = _est(-0.20, -0.04, 0.0, 0.16, 0.16)
    scene = _blob(-0.06, 0.02) + _blob(0.15, -0.2)  # the thing in the way, and another far off
    look = {"row_range": [0, 255], "col_range": [0, 255], "camera": "agentview", "resolution": "low",
            "z_min": 0.92, "z_max": 1.12, "max_points": 1500}
    wrist = {**look, "camera": "wrist", "z_max": 1.04}
    calls = [("segment", {"prompt": "plate"}, {"found": True, "object": "plate_1", "object_estimate": plate}),
             ("back_project", look, {"center_xyz": [0, 0, 0.95], "points": scene}),
             ("move_to", {"xyz": [-0.06, 0.02, 1.07], "gripper": -1.0}, {"reached": True}),
             ("back_project", wrist, {"center_xyz": [0, 0, 0.95], "points": _blob(-0.06, 0.02)}),
             ("move_to", {"xyz": [-0.06, 0.03, 0.93], "gripper": -1.0}, {"reached": True}),
             ("set_gripper", {"gripper": 1.0}, {"gripper_opening": 0.02}),
             ("move_to", {"xyz": [-0.06, 0.03, 1.18], "gripper": 1.0}, {"reached": True}),
             ("move_to", {"xyz": [0.12, 0.07, 0.95], "gripper": 1.0}, {"reached": True}),
             ("release", {}, {}),
             ("move_to", {"xyz": [-0.09, 0.02, 0.96], "gripper": -1.0}, {"reached": True}),  # push start
             ("finish", {"status": "success", "summary": "ok"}, {"_finish": True})]
    audit, recipe = _write_run(tmp_path, calls, "libero_goal_swap", 5, "push the plate to the front of the stove")
    generate(audit, recipe, tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", "goal_swap_t5_s0")
    thing = anchors["anchors"][1]
    assert thing["kind"] == "points" and thing["prompt"] is None and len(thing["observations"]) == 2
    assert thing["observations"][1]["back_project"]["camera"] == "wrist"
    assert thing["observations"][0]["estimate"]["center"][:2] == [pytest.approx(-0.06, abs=2e-3),
                                                                  pytest.approx(0.02, abs=2e-3)]
    ops = [(s["op"], s.get("tool"), s.get("anchor"), s.get("observation")) for s in plan["steps"]]
    assert ops == [("locate", None, "a0", 0), ("locate", None, "a1", 0), ("tool", "move_to", "a1", 0),
                   ("locate", None, "a1", 1), ("tool", "move_to", "a1", 1), ("tool", "set_gripper", None, None),
                   ("tool", "move_to", "a1", 1), ("tool", "move_to", None, None), ("tool", "release", None, None),
                   ("tool", "move_to", "a0", 0)]  # retired once let go: the push binds to the plate
    # the replay on a seed where the thing stands 3 cm farther in +x: the same looks, the pick follows
    shifted = _blob(-0.03, 0.02) + _blob(0.15, -0.2)
    sent = []

    def call(name, args):
        sent.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": plate}
        if name == "back_project":
            return {"points": shifted if args["camera"] == "agentview" else _blob(-0.03, 0.02)}
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    planner = FlashPlanner()
    planner._replay(plan, anchors, call, lambda text: None, None)
    assert [a for n, a in sent if n == "back_project"] == [thing["observations"][0]["back_project"],
                                                           thing["observations"][1]["back_project"]]
    moves = [a["xyz"] for n, a in sent if n == "move_to"]
    assert moves[1][:2] == [pytest.approx(-0.03, abs=2e-3), pytest.approx(0.03, abs=2e-3)]  # the descent
    assert moves[3] == [0.12, 0.07, 0.95]  # set down where the source did
    found = [e for e in planner._log if e["op"] == "locate" and e["anchor"] == "a1"]
    assert all(e["found"] and e["source"] == "back_project_points" for e in found)
    # nothing there any more: the first look keeps the recorded estimate (the pick as recorded)
    from rpent.flash.points import relocate
    assert relocate(lambda n, a: {"points": _blob(0.15, -0.2)}, thing, 0, {}) is None


def test_a_relook_hidden_by_what_the_plan_set_down_on_the_anchor_keeps_the_earlier_look():
    """libero_10_task t6: after the mug is set down on the plate, the plan looks at the plate again;
    the mug hides part of it and the mask's centre jumps. A re-look whose footprint shrank below
    0.9 of the earlier look's, with a place on that anchor in between, is not used: the next
    placement is rebuilt from the earlier look by the recorded difference between the two."""
    plate0, plate1 = _est(0.126, 0.016, 0.0, 0.108, 0.106), _est(0.143, 0.020, 0.0, 0.117, 0.082)
    mug = _est(-0.2, 0.01, 0.0, 0.08, 0.08)
    anchors = {"anchors": [{"id": "a0", "prompt": "mug", "observations": [{"camera": "agentview", "estimate": mug}]},
                           {"id": "a1", "prompt": "plate", "observations": [
                               {"camera": "agentview", "estimate": plate0},
                               {"camera": "agentview", "estimate": plate1}]}]}

    def tool(name, xyz=None, anchor=None, obs=None, off=None, **args):
        a = dict(args, **({"xyz": xyz} if xyz else {}))
        return {"op": "tool", "tool": name, "args": a, "anchor": anchor, "observation": obs, "offset_xy": off}

    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "locate", "anchor": "a1", "camera": "agentview", "observation": 0},
             tool("move_to", [-0.2, 0.01, 0.55], "a0", 0, [0.0, 0.0]),
             tool("set_gripper", gripper=1.0),
             tool("move_to", [0.126, 0.016, 0.59], "a1", 0, [0.0, 0.0], gripper=1.0),
             tool("release"),
             {"op": "locate", "anchor": "a1", "camera": "agentview", "observation": 1},
             tool("move_to", [0.126, 0.11, 0.46], "a1", 1, [-0.017, 0.09], gripper=1.0)]
    looks = iter([mug, _est(0.15, 0.0, 0.0, 0.108, 0.106), _est(0.21, 0.004, 0.0, 0.117, 0.082)])
    sent = []

    def call(name, args):
        sent.append((name, args))
        return {"found": True, "object_estimate": next(looks)} if name == "segment" else {"reached": True}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    # from the first look (0.15, 0.0) + the recorded difference (0.017, 0.004) + the offset
    assert sent[-1][1]["xyz"] == [pytest.approx(0.15), pytest.approx(0.094), 0.46]
    relook = [e for e in planner._log if e["op"] == "locate"][-1]
    assert relook["kept_earlier"] and relook["occluded_by_place"]["place_step"] == 5
    # without the place in between, or with the whole plate in view, the re-look is used
    from rpent.flash.occlusion import occluded_relook
    assert occluded_relook(steps[:5] + steps[6:], 6, "a1", plate1, plate0, 1) is None
    assert occluded_relook(steps, 6, "a1", plate0, plate0, 1) is None
    assert occluded_relook(steps, 6, "a1", plate1, plate0, 1)["place_step"] == 5


def test_a_point_anchor_leaves_out_what_stands_higher_than_its_recorded_top():
    """libero_goal_swap t5 seed 2: the bowl in the plate's way stands next to a taller bottle whose
    points merge into its cluster and whose top would make the estimate; points more than 1.5 cm
    above the recorded top are left out of the live look."""
    from rpent.flash.points import cluster_estimate, relocate

    bowl, tall = _blob(-0.03, 0.02), _blob(0.015, 0.02, z0=1.02, z1=1.10, sx=0.03)
    assert cluster_estimate(bowl + tall, [-0.03, 0.02], 0.03, 0.92)["center"][0] > -0.02  # merged
    est = cluster_estimate(bowl + tall, [-0.03, 0.02], 0.03, 0.92, top_z=1.005)
    assert est["center"][:2] == [pytest.approx(-0.03, abs=2e-3), pytest.approx(0.02, abs=2e-3)]
    ref = {**_est(-0.08, 0.02, 0.0, 0.06, 0.03), "top_z": 0.99}
    anchor = {"id": "a1", "prompt": None, "kind": "points",
              "observations": [{"camera": "agentview", "estimate": ref, "back_project": {"z_min": 0.92}}]}
    live = relocate(lambda n, a: {"points": bowl + tall}, anchor, 0, {})  # 5 cm from the recorded spot
    assert live["center"][:2] == [pytest.approx(-0.03, abs=2e-3), pytest.approx(0.02, abs=2e-3)]


def test_a_relook_is_compared_with_the_earlier_look_of_the_same_camera():
    """libero_10_swap t8: the stove is looked at from the front, then from the wrist (a part of it
    seen from above), then from the front again after a moka pot is set down on it. The last look
    is compared with the first front look, not with the wrist look."""
    front0, wrist, front1 = _est(0.046, 0.06, 0.0, 0.23, 0.16), _est(0.19, 0.064, 0.0, 0.30, 0.25), \
        _est(0.046, 0.06, 0.0, 0.23, 0.155)
    anchors = {"anchors": [{"id": "a0", "prompt": "moka pot", "observations": [
                               {"camera": "agentview", "estimate": _est(-0.05, 0.24)}]},
                           {"id": "a1", "prompt": "stove", "observations": [
                               {"camera": "agentview", "estimate": front0}, {"camera": "wrist", "estimate": wrist},
                               {"camera": "agentview", "estimate": front1}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "locate", "anchor": "a1", "camera": "agentview", "observation": 0},
             {"op": "locate", "anchor": "a1", "camera": "wrist", "observation": 1},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [-0.05, 0.24, 1.0]}, "anchor": "a0", "observation": 0,
              "offset_xy": [0.0, 0.0]},
             {"op": "tool", "tool": "set_gripper", "args": {"gripper": 1.0}, "anchor": None, "observation": None,
              "offset_xy": None},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [0.22, 0.03, 1.03], "gripper": 1.0}, "anchor": "a1",
              "observation": 1, "offset_xy": [0.03, -0.034]},
             {"op": "tool", "tool": "release", "args": {}, "anchor": None, "observation": None, "offset_xy": None},
             {"op": "locate", "anchor": "a1", "camera": "agentview", "observation": 2}]
    looks = iter([anchors["anchors"][0]["observations"][0]["estimate"], front0, wrist, front1])

    def call(name, args):
        return {"found": True, "object_estimate": next(looks)} if name == "segment" else {"reached": True}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    last = [e for e in planner._log if e["op"] == "locate"][-1]
    assert last["found"] and not last["kept_earlier"] and "occluded_by_place" not in last


def test_an_empty_grasp_of_one_of_several_instances_looks_again_near_its_live_estimate():
    """libero_10_swap t8 ("put both moka pots on the stove"): the second pot's grasp came up empty
    and the re-look kept the instance nearest the first look's recorded centre, the first pot,
    already on the stove. Where the prompt's looks found several instances, the re-look uses the
    descent's observation and keeps the instance nearest its live estimate."""
    pot1, pot2 = _est(-0.05, 0.24, 0.0, 0.07, 0.07), _est(-0.18, -0.21, 0.0, 0.07, 0.07)
    anchors = {"anchors": [{"id": "a0", "prompt": "moka pot", "observations": [
        {"camera": "agentview", "estimate": pot1, "instances": 2, "object": "moka_pot_1"},
        {"camera": "agentview", "estimate": pot2, "instances": 2, "object": "moka_pot_2"}]}]}

    def tool(name, obs=None, **args):
        return {"op": "tool", "tool": name, "args": args, "anchor": None if obs is None else "a0",
                "observation": obs, "offset_xy": None if obs is None else [0.0, 0.0]}

    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 1, "instances": 2},
             tool("move_to", 1, xyz=[-0.18, -0.21, 1.1]), tool("move_to", 1, xyz=[-0.18, -0.21, 0.99]),
             tool("set_gripper", gripper=1.0), tool("move_to", 1, xyz=[-0.18, -0.21, 1.2]), tool("release")]
    on_stove, pushed = _est(0.24, 0.055), _est(-0.17, -0.22, 0.0, 0.07, 0.07)
    seen = iter([[on_stove, _est(-0.185, -0.21)], [on_stove, pushed]])
    sent = []

    def call(name, args):
        sent.append((name, args))
        if name == "segment":
            return {"found": True, "instances": [{"object_estimate": e} for e in next(seen)]}
        lifts = [a for n, a in sent if n == "move_to" and a["xyz"][2] == 1.2]
        if name == "move_to" and args["xyz"][2] == 1.2:
            return {"reached": True, "state_after": {"state": {"gripper_opening": 0.001 if len(lifts) == 1 else 0.04}}}
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    repair = next(e for e in planner._log if e["op"] == "repair")
    assert repair["kind"] == "empty_grasp" and repair["live_center"][:2] == [-0.17, -0.22]
    assert [a["xyz"][:2] for n, a in sent if n == "move_to"][-2:] == [[-0.17, -0.22], [-0.17, -0.22]]


def test_a_close_relook_takes_the_instance_nearest_where_the_anchor_was_seen():
    """libero_spatial_task t0 seed 7: the source run's wrist look over the bowl saw one bowl; the
    live wrist look sees two, the other bowl (16 cm away) listed first. The re-look keeps the
    instance nearest the anchor's live front-camera estimate, and the grasp goes there."""
    front = _est(-0.171, 0.3245)
    anchors = {"anchors": [{"id": "a0", "prompt": "akita black bowl", "observations": [
        {"camera": "agentview", "estimate": front}, {"camera": "wrist", "estimate": _est(-0.17, 0.324)}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [-0.171, 0.3245, 1.03]}, "anchor": "a0",
              "observation": 0, "offset_xy": [0.0, 0.0]},
             {"op": "locate", "anchor": "a0", "camera": "wrist", "observation": 1},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [-0.17, 0.3606, 0.93]}, "anchor": "a0",
              "observation": 1, "offset_xy": [0.0, 0.0366]}]
    live_front, live_bowl, other_bowl = _est(-0.1796, 0.3055), _est(-0.18, 0.305), _est(-0.0437, 0.2143)
    sent = []

    def call(name, args):
        sent.append((name, dict(args)))
        if name != "segment":
            return {"reached": True, "final_eef_pos": args.get("xyz")}
        if args.get("camera") == "agentview":
            return {"found": True, "object_estimate": live_front}
        insts = [{"object": "akita_black_bowl_1", "object_estimate": other_bowl},
                 {"object": "akita_black_bowl_2", "object_estimate": live_bowl}]
        return {"found": True, "object_estimate": other_bowl, "instances": insts}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    wrist = [a for n, a in sent if n == "segment" and a["camera"] == "wrist"]
    assert wrist and wrist[0].get("all_instances") is True
    relook = [e for e in planner._log if e["op"] == "locate"][-1]
    assert relook["live_center"][:2] == [-0.18, 0.305]
    grasp = [a["xyz"] for n, a in sent if n == "move_to"][-1]
    assert abs(grasp[0] + 0.18) < 1e-6 and abs(grasp[1] - 0.3416) < 1e-6


def test_a_first_look_takes_the_instance_nearest_the_recorded_centre_in_three_dimensions():
    """The source run's front look saw one bowl, on top of a cabinet; this scene also shows a
    look-alike 43 cm lower at nearly the same x, y, listed first. The first look keeps the one
    nearest the recorded centre, height included."""
    recorded = [0.0374, -0.2675, 1.0399]
    on_top, below = _est(0.045, -0.27), _est(-0.0086, -0.2867)
    on_top["center"][2], below["center"][2] = 1.04, 0.6122
    anchors = {"anchors": [{"id": "a0", "prompt": "akita black bowl", "observations": [
        {"camera": "agentview", "estimate": dict(_est(*recorded[:2]), center=recorded)}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0}]
    sent = []

    def call(name, args):
        sent.append((name, dict(args)))
        insts = [{"object": "akita_black_bowl_2", "object_estimate": below},
                 {"object": "akita_black_bowl_1", "object_estimate": on_top}]
        return {"found": True, "object_estimate": below, "instances": insts}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    assert sent[0][1].get("all_instances") is True
    assert planner._log[0]["live_center"] == on_top["center"]


def test_a_later_look_at_another_instance_is_matched_near_its_recorded_centre():
    """libero_10_swap t8 "put both moka pots on the stove": the source run's second look at "moka
    pot" was at the second pot (another object than its first look). The replay matches it near
    its recorded centre, not near where the first pot was last seen (it now stands on the stove)."""
    first, second = _est(-0.0458, 0.2416), _est(-0.183, -0.2061)
    anchors = {"anchors": [{"id": "a0", "prompt": "moka pot", "observations": [
        {"camera": "agentview", "estimate": first, "object": "moka_pot_1", "instances": 2},
        {"camera": "agentview", "estimate": second, "object": "moka_pot_2", "instances": 2}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0, "instances": 2},
             {"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 1, "instances": 2}]
    on_stove, pot2 = _est(0.2397, 0.055), _est(-0.18, -0.21)
    looks = iter([[{"object": "moka_pot_1", "object_estimate": _est(-0.046, 0.226)},
                   {"object": "moka_pot_2", "object_estimate": pot2}],
                  [{"object": "moka_pot_1", "object_estimate": on_stove},
                   {"object": "moka_pot_2", "object_estimate": pot2}]])

    def call(name, args):
        insts = next(looks)
        return {"found": True, "object_estimate": insts[0]["object_estimate"], "instances": insts}

    planner = FlashPlanner()
    planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
    centres = [e["live_center"][:2] for e in planner._log if e["op"] == "locate"]
    assert centres == [[-0.046, 0.226], [-0.18, -0.21]]


def test_a_descent_stopped_as_high_as_the_source_s_own_is_not_a_blocked_one(tmp_path):
    """libero_10_swap t8: the source run's descent onto the second moka pot's handle stopped 1 cm
    above its target and the grasp held. The plan keeps that stop (``source_stop_z``); a replayed
    descent that stops as high is grasped as recorded, not "repaired" off the handle; one that
    stops well above the source's stop is still repaired."""
    calls = [
        ("segment", {"prompt": "moka pot"}, {"found": True, "object": "moka_pot_2",
                                             "object_estimate": _est(-0.18, -0.21, 1.5, 0.1, 0.045)}),
        ("move_to", {"xyz": [-0.186, -0.26, 0.12], "target_yaw": 1.5}, {"reached": True,
                                                                      "final_eef_pos": [-0.186, -0.26, 0.12]}),
        ("move_to", {"xyz": [-0.186, -0.26, 0.0], "tol": 0.008}, {"reached": False,
                                                                  "final_eef_pos": [-0.182, -0.269, 0.0099]}),
        ("set_gripper", {"gripper": 1.0, "steps": 15}, {"gripper_opening": 0.024}),
        ("move_to", {"xyz": [-0.186, -0.26, 0.2], "gripper": 1.0}, {"reached": True}),
        ("finish", {"status": "success", "summary": "ok"}, {"_finish": True}),
    ]
    audit, recipe = _write_run(tmp_path, calls, suite="libero_10_swap", task=8, language="put both moka pots on the stove")
    plan_file, anchors_file = generate(audit, recipe, tmp_path / "plans")
    plan, anchors = json.loads(plan_file.read_text()), json.loads(anchors_file.read_text())
    descent = plan["steps"][2]
    assert descent["source_stop_z"] == 0.0099 and "source_stop_z" not in plan["steps"][1]
    load_flash(tmp_path / "plans", "10_swap_t8_s0")  # a plan with the key is valid

    def replay(stop_z):
        sent = []

        def call(name, args):
            sent.append(name)
            if name == "segment":
                return {"found": True, "object_estimate": _est(-0.18, -0.21, 1.5, 0.1, 0.045)}
            if name == "move_to" and args["xyz"][2] == 0.0:
                return {"reached": False, "final_eef_pos": [-0.18, -0.26, stop_z]}
            return {"reached": True, "final_eef_pos": args.get("xyz"), "gripper_opening": 0.024}

        planner = FlashPlanner()
        planner._replay(plan, anchors, call, lambda text: None, None)
        return [e.get("kind") for e in planner._log if e["op"] == "repair"], sent

    repairs, sent = replay(0.012)  # 2 mm above the source's own stop
    assert repairs == [] and sent == ["segment", "move_to", "move_to", "set_gripper", "move_to"]
    repairs, _ = replay(0.03)  # 2 cm above it: the hand met something the source's did not
    assert repairs == ["blocked_grasp_descent"]
    bad = dict(plan, steps=[*plan["steps"][:2], dict(descent, source_stop_z="high"), *plan["steps"][3:]])
    (tmp_path / "plans" / "10_swap_t8_s0_plan.json").write_text(json.dumps(bad))
    with pytest.raises(FlashFileError, match="bad source_stop_z 'high'"):
        load_flash(tmp_path / "plans", "10_swap_t8_s0")


def test_a_few_millimetres_of_footprint_give_no_grasp_axis_to_turn_by():
    """libero_10_task t3: a wine bottle's cap seen from above (7.6 x 4.5 mm, ratio 1.7) turned the
    replayed hover by 1.7 rad while the descent, from a rounder wrist look, kept the recorded yaw;
    the hand knocked the bottle over. Extents that differ by less than 1 cm give no axis; a butter
    box (7 x 3.5 cm) still does."""
    from rpent.flash.replay import grasp_axis

    cap = {"major_yaw": 1.4395, "major_extent": 0.0076, "minor_extent": 0.0045, "ridge_yaw": None}
    assert grasp_axis(cap) is None
    assert grasp_axis({"major_yaw": 0.3, "major_extent": 0.07, "minor_extent": 0.035, "ridge_yaw": None}) == 0.3
    anchors = {"anchors": [{"id": "a0", "prompt": "bottle", "object": None, "observations": [
        {"camera": "agentview", "estimate": dict(_est(-0.1257, 0.0488), major_yaw=-0.2, major_extent=0.007,
                                                 minor_extent=0.004)}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [-0.1257, 0.0488, 1.18], "target_yaw": -0.279},
              "anchor": "a0", "observation": 0, "offset_xy": [0.0, 0.0]}]
    sent = []

    def call(name, args):
        sent.append((name, args))
        if name == "segment":
            return {"found": True, "object_estimate": dict(_est(-0.1622, 0.0631), **cap)}
        return {"reached": True, "final_eef_pos": args.get("xyz")}

    FlashPlanner()._replay({"steps": steps}, anchors, call, lambda text: None, None)
    assert [a["target_yaw"] for n, a in sent if n == "move_to"] == [-0.279]


def test_a_place_by_a_drawer_follows_the_drawer_and_a_released_object_binds_nothing(tmp_path):
    """libero_10_task t3 "put the bottle in the bottom drawer of the cabinet and close it": the
    place into the open drawer (8 cm from where the bottle stood) binds to the drawer part, not to
    the bottle's look before the grasp; the lift straight above the grasp still follows the bottle;
    and once the bottle is let go, the drawer push binds to the drawer too, never to where the
    bottle stood."""
    bottle = dict(_est(0.0, -0.22), major_extent=0.02, minor_extent=0.02)
    calls = [("view_fixtures", {}, _cabinet()),
             ("segment", {"prompt": "bottle"}, {"found": True, "object": "wine_bottle_1", "object_estimate": bottle}),
             ("move_to", {"xyz": [0.0, -0.22, 1.1]}, {"reached": True}),
             ("move_to", {"xyz": [0.0, -0.22, 0.99]}, {"reached": True}),
             ("set_gripper", {"gripper": 1.0, "steps": 15}, {"gripper_opening": 0.03}),
             ("move_to", {"xyz": [0.0, -0.22, 1.18]}, {"reached": True}),  # the lift: follows the bottle
             ("move_to", {"xyz": [0.04, -0.15, 1.07]}, {"reached": True}),  # the place, by the drawer
             ("release", {}, {}),
             ("move_to", {"xyz": [0.02, -0.20, 1.02], "gripper": 1.0}, {"reached": True}),  # the push: the drawer
             ("finish", {"status": "success", "summary": "ok"}, {"_finish": True})]
    audit, recipe = _write_run(tmp_path, calls, suite="libero_10_task", task=3,
                               language="put the bottle in the bottom drawer of the cabinet and close it")
    plan_file, _ = generate(audit, recipe, tmp_path / "plans")
    tools = [s for s in json.loads(plan_file.read_text())["steps"] if s["op"] == "tool" and "xyz" in s["args"]]
    assert [(s["anchor"] or "")[:1] for s in tools] == ["a", "a", "a", "f", "f"]


def test_a_first_look_that_cannot_see_the_object_looks_again_from_above_with_the_wrist_camera():
    """libero_10_swap t1 seeds 1, 6, 9: the cream cheese box stands behind the orange juice, 2 px
    of it in the front camera. The replay moves the open hand 25 cm above the recorded estimate's
    top and segments on the wrist camera; the instance found there is the anchor's live estimate.
    One found more than 10 cm off, or none, ends the replay with flash_anchor_not_found."""
    recorded = dict(_est(0.01, -0.25), top_z=0.47)
    anchors = {"anchors": [{"id": "a0", "prompt": "cream cheese box", "object": None,
                            "observations": [{"camera": "agentview", "estimate": recorded}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
             {"op": "tool", "tool": "move_to", "args": {"xyz": [0.01, -0.25, 0.6]}, "anchor": "a0", "observation": 0,
              "offset_xy": [0.0, 0.0]}]

    def replay(wrist_center):
        sent = []

        def call(name, args):
            sent.append((name, dict(args)))
            if name == "segment" and args["camera"] == "agentview":
                return {"found": True, "box": [11, 186, 11, 187], "object_estimate": None, "instances": []}
            if name == "segment":
                est = _est(*wrist_center)
                return {"found": True, "object_estimate": est, "instances": [{"object": "cc_1", "object_estimate": est}]}
            if name == "back_project":
                return {"error": "too few valid pixels"}
            return {"reached": True, "final_eef_pos": args.get("xyz")}

        planner = FlashPlanner()
        try:
            planner._replay({"steps": steps}, anchors, call, lambda text: None, None)
        except Exception as exc:  # noqa: BLE001
            return sent, planner._log, exc
        return sent, planner._log, None

    sent, log, exc = replay((0.03, -0.27))
    assert exc is None
    assert [n for n, _ in sent[:2]] == ["segment", "back_project"]  # the front look and its box: too few points
    assert sent[2] == ("move_to", {"xyz": [0.01, -0.25, 0.72], "gripper": -1.0, "max_steps": 150})
    assert sent[3][0] == "segment" and sent[3][1]["camera"] == "wrist"
    assert sent[-1] == ("move_to", {"xyz": [0.03, -0.27, 0.6]})  # the plan's waypoint follows the look from above
    assert [e for e in log if e["op"] == "repair"][0]["kind"] == "look_from_above"
    _, _, exc = replay((0.2, -0.25))  # 19 cm off: another object
    assert exc is not None and "flash_anchor_not_found" in str(exc.args[0]) and "from above" in str(exc)


def test_a_hinged_part_without_a_handle_is_anchored_on_its_hinge_axis():
    """A microwave door has no handle point and its box swings with the door: the anchor is the
    part's ``pos`` (on the hinge axis), which two init states with the door open by different
    angles agree on; a drawer keeps its handle, a part with neither its box centre."""
    from rpent.flash.generate import fixture_estimate

    def door(q_box_x):
        return {"fixtures": {"microwave_1": [{"part": "microdoorroot", "type": "hinge", "handle": None,
                                              "pos": [-0.171, 0.257, 1.016], "min": [q_box_x, 0.0, 0.92],
                                              "max": [q_box_x + 0.2, 0.26, 1.11]}]}}

    assert fixture_estimate(door(-0.26), "microwave_1", "microdoorroot")["center"] == [-0.171, 0.257, 1.016]
    assert fixture_estimate(door(-0.28), "microwave_1", "microdoorroot")["center"] == [-0.171, 0.257, 1.016]
    assert fixture_estimate(_cabinet(), "wooden_cabinet_1", "cabinet_top")["center"] == [0.04, -0.14, 1.09]


def test_the_lift_after_a_rim_grasp_by_a_cabinet_follows_the_plate(tmp_path):
    """libero_goal_task t1 "put the plate on the stove": the hand closes on the plate's rim, 5.5 cm
    from its centre, with a cabinet drawer 12 cm away. The lift above the grasp point follows the
    plate (it is within 3 cm of where the gripper closed), not the cabinet."""
    plate = dict(_est(0.04, -0.015), major_extent=0.11, minor_extent=0.11)
    calls = [("view_fixtures", {}, _cabinet()),
             ("segment", {"prompt": "plate"}, {"found": True, "object": "plate_1", "object_estimate": plate}),
             ("move_to", {"xyz": [0.095, -0.015, 1.09]}, {"reached": True}),
             ("move_to", {"xyz": [0.095, -0.015, 0.88], "gripper": 1.0}, {"reached": False,
                                                                           "final_eef_pos": [0.095, -0.015, 0.91]}),
             ("move_to", {"xyz": [0.08, -0.01, 1.18], "gripper": 1.0}, {"reached": True}),  # the lift
             ("finish", {"status": "success", "summary": "ok"}, {"_finish": True})]
    audit, recipe = _write_run(tmp_path, calls, suite="libero_goal_task", task=1, language="put the plate on the stove")
    plan_file, _ = generate(audit, recipe, tmp_path / "plans")
    tools = [s for s in json.loads(plan_file.read_text())["steps"] if s["op"] == "tool"]
    assert [s["anchor"] for s in tools] == ["a0", "a0", "a0"]


def test_a_grasp_that_holds_where_the_source_gave_it_up_goes_on_to_the_carry():
    """The source run lifted the cream cheese with nothing in the fingers, let go (a motion that
    opens the gripper, not a ``release``), looked again and grasped it again, then carried it.
    Where this replay's first grasp holds, the source's letting go and second grasp are skipped
    and the carry goes on at once; where it comes up empty as in the source, every step is
    replayed as recorded."""
    from rpent.flash.regrasp import kept_grasp_resume

    anchors, plan = _grasp_descent_plan()
    anchors["anchors"][0]["observations"].append({"camera": "agentview", "estimate": _est(0.07, -0.09, 0.0, 0.07, 0.035)})
    anchors["anchors"].append({"id": "a1", "prompt": "basket", "object": None,
                               "observations": [{"camera": "agentview", "estimate": _est(0.0, 0.25, 0.0, 0.15, 0.15)}]})
    tool = lambda name, args, anchor=None, k=None: {"op": "tool", "tool": name, "args": args, "anchor": anchor,  # noqa: E731
                                                    "observation": k, "offset_xy": None if anchor is None else [0.0, 0.0]}
    steps = plan["steps"]
    steps[1:1] = [{"op": "locate", "anchor": "a1", "camera": "agentview", "observation": 0}]
    # 0, 1 the looks; 2 hover, 3 descent, 4 close, 5 lift, all over a0's first look
    steps += [tool("move_pose", {"xyz": [0.05, -0.1, 0.3], "target_pitch": 0.0, "gripper": -1.0}, "a0", 0),  # 6: let go
              tool("move_to", {"xyz": [-0.5, 0.0, 0.4], "gripper": -1.0}),  # 7: out of the camera's view
              {"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 1},  # 8
              tool("move_to", {"xyz": [0.07, -0.09, 0.013], "gripper": -1.0}, "a0", 1),  # 9: descent again
              tool("set_gripper", {"gripper": 1.0, "steps": 15}),  # 10
              tool("move_to", {"xyz": [0.07, -0.09, 0.25], "gripper": 1.0}, "a0", 1),  # 11: lift
              tool("move_to", {"xyz": [0.0, 0.25, 0.25], "gripper": 1.0}, "a1", 0),  # 12: carry
              tool("release", {})]  # 13
    assert kept_grasp_resume(steps, 4) == 12 and kept_grasp_resume(steps, 10) is None  # the second held
    # a lift that carried the object away first is not a grasp given up
    assert kept_grasp_resume([*steps[:5], tool("move_to", {"xyz": [0.0, 0.25, 0.25], "gripper": 1.0}, "a1", 0),
                              *steps[6:]], 4) is None
    for first_lift, expected in ((0.04, ["segment", "segment", "move_to", "move_to", "set_gripper", "move_to",
                                         "move_to", "release"]),
                                 (0.001, ["segment", "segment", "move_to", "move_to", "set_gripper", "move_to",
                                          "move_pose", "move_to", "segment", "move_to", "set_gripper", "move_to",
                                          "move_to", "release"])):
        calls = []
        looks = iter([_est(0.05, -0.1, 0.0, 0.07, 0.035), _est(0.0, 0.25, 0.0, 0.15, 0.15),
                      _est(0.07, -0.09, 0.0, 0.07, 0.035)])
        planner = FlashPlanner()
        planner._replay({"steps": steps}, anchors, _lifting_call(calls, looks, first_lift), lambda text: None, None)
        assert [n for n, _ in calls] == expected
        kept = [e for e in planner._log if e["op"] == "repair" and e["kind"] == "kept_grasp"]
        assert kept == ([{"plan_step": 5, "op": "repair", "kind": "kept_grasp", "close_step": 4, "opening_m": 0.04,
                          "resume_step": 12}] if first_lift > 0.003 else [])


@pytest.mark.parametrize("bad, needle", [
    ("a step", "step 1 of object_t0_s0 is a str, not a JSON object"),
    ({"op": "locate", "camera": "agentview", "observation": 0}, "locate step that names no anchor"),
    ({"op": "locate", "anchor": "a0", "camera": "agentview", "observation": "x"}, "observation 'x' of anchor 'a0'"),
    ({"op": "tool", "tool": "set_gripper"}, r"\(set_gripper\) has args None; a JSON object"),
    ({"op": "tool", "tool": "move_to", "args": "xyz"}, r"\(move_to\) has args 'xyz'"),
    ({"op": "tool", "tool": "teleport", "args": {}}, "calls 'teleport', which is not a motion tool"),
    ({"op": "tool", "tool": "segment", "args": {"prompt": "x"}}, "calls 'segment', which is not a motion tool"),
    ({"op": "tool", "tool": "move_to", "args": {"gripper": -1.0}}, r"\(move_to\): xyz: Field required"),
    ({"op": "tool", "tool": "move_to", "args": {"xyz": [0.1, 0.2]}}, r"\(move_to\): xyz"),
])
def test_a_plan_step_the_toolkit_cannot_run_is_refused_before_anything_starts(tmp_path, bad, needle):
    """Every tool step is checked against the LIBERO toolkit's own argument schemas (the ones a
    planner's calls are validated with) when the plan is read, before an env server starts; a
    step that is not an object, a locate without an anchor or a non-integer observation too.
    The plan file is left as it was."""
    from rpent.flash.batch import ReplayOptions, check_options

    flash = tmp_path / "flash"
    flash.mkdir()
    anchors = {"schema": "rpent.flash.anchors/1", "anchors": [
        {"id": "a0", "prompt": "bowl", "observations": [{"camera": "agentview", "estimate": _est(0.0, 0.0)}]}]}
    steps = [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0}, bad]
    plan = flash / "object_t0_s0_plan.json"
    plan.write_text(json.dumps({"schema": "rpent.flash.plan/1", "steps": steps}))
    (flash / "object_t0_s0_anchors.json").write_text(json.dumps(anchors))
    before = plan.read_bytes()
    with pytest.raises(ValueError, match=needle):
        check_options(ReplayOptions(flash_dir=str(flash), suite="libero_object", task=0, seeds=[1],
                                    output_root=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists() and plan.read_bytes() == before
    # the same step with what the toolkit needs is accepted
    plan.write_text(json.dumps({"schema": "rpent.flash.plan/1", "steps": [
        steps[0], {"op": "tool", "tool": "move_to", "args": {"xyz": [0.1, 0.2, 1.0], "gripper": -1.0}}]}))
    load_flash(flash, "object_t0_s0")
