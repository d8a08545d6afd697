"""A flash arm's plans come from its source arm's decided runs: a solved run becomes a plan (kept on
resume), a failed one leaves the task without a plan (its cells are decided as failures without a
run, through the real rpent-batch command), an undecided one makes the cells wait; an optional arm
added later to the same root leaves the finished cells alone."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpent.batch.flash_plans import prepare_flash_arm
from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import NOT_RUN, ResultsRoot
from rpent.run.record import run_tag

SUITE = "libero_object_swap"


def _record(root: ResultsRoot, cell: Cell, attempt: int, success: bool, *, recipe: bool = False) -> Path:
    run_dir = root.run_dir(cell, attempt)
    run_dir.mkdir(parents=True)
    tag = run_tag(cell.suite, cell.task, cell.seed)
    doc = {"suite": cell.suite, "task": cell.task, "seed": cell.seed, "elapsed_s": 30.0, "error": None,
           "stop_reason": "finished", "environment_success": success, "env_steps": 100, "label":
           "succeeded" if success else "failed", "stats": {}, "messages": [],
           "finish": {"status": "success" if success else "failure"}}
    (run_dir / f"transcript_{tag}.json").write_text(json.dumps(doc))
    (run_dir / "states.json").write_text(json.dumps({"steps": [{"step_idx": 0, "success": success}]}))
    if recipe:
        (run_dir / f"{tag}_recipe.jsonl").write_text('{"action": "move_to", "xyz": [0.1, 0.0, 1.0]}\n')
    root.append_ledger({"event": "start", "key": cell.key, "attempt": attempt, "run_dir": str(run_dir)})
    root.append_ledger({"event": "end", "key": cell.key, "attempt": attempt, "exit_code": 0 if success else 1,
                        "wall_s": 35.0, "status": "success" if success else "failure"})
    return run_dir


def _matrix(*extra):
    return Matrix(suites=(SUITE,), tasks=(0, 1, 2, 3), seeds=(0, 1, 2),
                  arms=(Arm("scripted"), Arm("flash", planner="flash", seeds=(1, 2), flash_from="scripted"), *extra))


def test_plans_follow_the_source_cells(tmp_path):
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    m = _matrix()
    # task 0: solved, plan already made (a resumed batch); task 1: failed; task 2: solved, but its run
    # cannot become a plan (its recipe names a command the transcript never made); task 3: not run yet
    _record(root, Cell("scripted", SUITE, 0, 0), 1, True)
    flash_dir = root.flash_dir("flash")
    flash_dir.mkdir(parents=True)
    for name in ("object_swap_t0_s0_plan.json", "object_swap_t0_s0_anchors.json"):
        (flash_dir / name).write_text("{}")
    _record(root, Cell("scripted", SUITE, 1, 0), 1, False)
    _record(root, Cell("scripted", SUITE, 2, 0), 1, True, recipe=True)
    prep = prepare_flash_arm(root, m, m.arm("flash"), root.cell_states(m.cells()))
    t = {k[1]: v for k, v in prep.tasks.items()}
    assert t[0].state == "plan" and not t[0].generated and t[0].plan.endswith("object_swap_t0_s0_plan.json")
    assert t[1].state == "no_plan" and "scripted/libero_object_swap/t1/s0/r0 was not solved" in t[1].detail
    assert t[2].state == "no_plan" and "could not become a plan" in t[2].detail
    assert t[3].state == "waiting" and "has no task outcome yet (pending)" in t[3].detail
    assert prep.of(Cell("flash", SUITE, 3, 1)) is t[3]


def _batch(root: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rpent.cli.batch", "--results-root", str(root), "--no-progress",
                           *extra], capture_output=True, text=True, timeout=300)


def test_tasks_without_a_plan_fail_without_a_run_and_a_new_arm_keeps_finished_cells(tmp_path):
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    m = Matrix(suites=(SUITE,), tasks=(1,), seeds=(0, 1, 2),
               arms=(Arm("scripted"), Arm("flash", planner="flash", seeds=(1, 2), flash_from="scripted")))
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    for c in m.cells("scripted"):
        _record(root, c, 1, False)
    done = _batch(root.root)
    assert done.returncode == 0, done.stdout + done.stderr
    rep = json.loads((root.root / "report.json").read_text())
    flash = {c["key"]: c for c in rep["cells"] if c["key"].startswith("flash/")}
    assert [c["status"] for c in flash.values()] == ["failure", "failure"]
    assert all(c["reason"].startswith("flash_plan_missing: the source run scripted/libero_object_swap/t1/s0/r0 "
                                      "was not solved") for c in flash.values())
    for c in flash.values():
        doc = json.loads((Path(c["run_dir"]) / NOT_RUN).read_text())
        assert doc["schema"] == "rpent.batch.not_run/1" and doc["key"] == c["key"] and doc["status"] == "failure"
        assert not list(Path(c["run_dir"]).glob("transcript_*"))   # no run was started
    flash_row = next(a for a in rep["arms"] if a["arm"] == "flash")["overall"]
    assert (flash_row["k"], flash_row["n"], flash_row["median_wall_s"]) == (0, 2, None)
    ledger = [json.loads(x) for x in (root.root / "attempts.jsonl").read_text().splitlines()]
    assert sum(e.get("not_run", False) and e["event"] == "end" for e in ledger) == 2
    assert "[not run]" in done.stderr
    # the same command again: nothing runs, nothing is counted twice
    files = sorted(p.relative_to(root.root) for p in root.root.rglob("*") if p.is_file())
    again = _batch(root.root)
    assert again.returncode == 0 and json.loads((root.root / "report.json").read_text())["arms"] == rep["arms"]
    assert [p for p in sorted(q.relative_to(root.root) for q in root.root.rglob("*") if q.is_file()) if p not in files] \
        == []
    # a new arm in the matrix file (a changed one is refused): the root gains it, finished cells untouched
    before = {p: p.read_bytes() for p in (root.root / "runs").rglob("*") if p.is_file()}
    yaml = tmp_path / "m.yaml"
    yaml.write_text(f"suites: [{SUITE}]\ntasks: 1\nseeds: 0-2\narms:\n  - {{name: scripted}}\n"
                    "  - {name: flash, planner: flash, seeds: 1-2, flash_from: scripted}\n"
                    "  - {name: llm, planner: api, model: 'openai:gpt-x', optional: true}\n")
    no_key = _batch(root.root, "--matrix", str(yaml), "--enable-arm", "llm")
    assert no_key.returncode == 2 and "arm llm: OPENAI_API_KEY is not set" in no_key.stderr, no_key.stderr
    changed = yaml.read_text().replace("seeds: 1-2, flash_from", "seeds: 1, flash_from")
    (tmp_path / "changed.yaml").write_text(changed)
    refused = _batch(root.root, "--matrix", str(tmp_path / "changed.yaml"))
    assert refused.returncode == 2 and "arm flash differs from the one in the results root (seeds: [1, 2] -> [1])" \
        in refused.stderr, refused.stderr
    not_enabled = _batch(root.root, "--matrix", str(yaml))
    assert not_enabled.returncode == 0, not_enabled.stderr
    assert [a["name"] for a in json.loads((root.root / "matrix.json").read_text())["arms"]] == ["scripted", "flash"]
    assert {p: p.read_bytes() for p in (root.root / "runs").rglob("*") if p.is_file()} == before
    (tmp_path / "more.yaml").write_text(yaml.read_text() + "  - {name: flash-b, planner: flash, seeds: 2, "
                                                          "flash_from: scripted}\n")
    extended = _batch(root.root, "--matrix", str(tmp_path / "more.yaml"))
    assert extended.returncode == 0, extended.stderr
    assert "added arm(s) flash-b" in extended.stderr
    assert [a["name"] for a in json.loads((root.root / "matrix.json").read_text())["arms"]] == \
        ["scripted", "flash", "flash-b"]
    rep2 = json.loads((root.root / "report.json").read_text())
    assert [a["overall"]["n"] for a in rep2["arms"]] == [3, 2, 1] and rep2["arms"][:2] == rep["arms"]
    assert {p: p.read_bytes() for p in (root.root / "runs").rglob("*") if p.is_file() and p in before} == before
    manifest = json.loads((root.root / "manifest.json").read_text())
    assert manifest["invocations"][-1]["arms_added"] == ["flash-b"]


def test_shared_env_arm_runs_a_task_as_one_replay_with_its_flags():
    from rpent.batch.flash_plans import replay_argv, replay_flags

    arm = Arm("f", planner="flash", flash_from="s", share_env=True)
    assert replay_flags(["--no-video", "--max-episode-steps", "600", "--transport=http"], "f") == \
        ["--max-episode-steps", "600", "--transport", "http"]
    with pytest.raises(ValueError, match="arm f: share_env runs rpent-flash replay, which has no --max-turns"):
        replay_flags(["--max-turns", "5"], "f")
    argv = replay_argv(arm, ["--no-video"], SUITE, 3, {1: Path("/r/a1"), 2: Path("/r/a2")}, Path("/r/g"),
                       Path("/r/flash"))
    assert argv[3:] == ["replay", "--suite", SUITE, "--task", "3", "--seeds", "1", "2", "--output-root", "/r/g",
                        "--flash-dir", "/r/flash", "--run-dir", "1=/r/a1", "--run-dir", "2=/r/a2"]
    with pytest.raises(ValueError, match="share_env needs its plans"):
        replay_argv(Arm("g", planner="flash", share_env=True), [], SUITE, 3, {1: Path("/x")}, Path("/g"), None)
    with pytest.raises(ValueError, match="share_env is for planner: flash"):
        Arm("h", share_env=True)


def test_replay_walls_share_the_env_server_start(tmp_path):
    from rpent.batch.flash_plans import replay_walls

    rows = [{"kind": "env_server_start", "wall_s": 9.0}, {"kind": "episode", "seed": 1, "wall_s": 7.0},
            {"kind": "episode", "seed": 2, "wall_s": 8.0}, {"kind": "env_server_start", "wall_s": 3.0}]
    (tmp_path / "replay.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    assert replay_walls(tmp_path) == {1: 13.0, 2: 14.0}
    assert replay_walls(tmp_path / "missing") == {}


def test_replay_run_dirs_are_checked_before_anything_starts(tmp_path):
    from rpent.cli.flash import main as flash_main
    from rpent.flash.batch import ReplayOptions, check_options

    def opts(run_dirs):
        return ReplayOptions(flash_dir=str(tmp_path / "fd"), suite=SUITE, task=0, seeds=[1, 2],
                             output_root=str(tmp_path / "out"), run_dirs=run_dirs)

    with pytest.raises(ValueError, match="give one SEED=DIR for every seed"):
        check_options(opts({1: str(tmp_path / "a")}))
    with pytest.raises(ValueError, match="every seed needs its own directory"):
        check_options(opts({1: str(tmp_path / "a"), 2: str(tmp_path / "a")}))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "states.json").write_text("{}")
    with pytest.raises(ValueError, match=r"--run-dir .*b already holds files"):
        check_options(opts({1: str(tmp_path / "a"), 2: str(tmp_path / "b")}))
    assert opts({1: "/x/one", 2: "/x/two"}).run_dir(2) == Path("/x/two")
    assert opts(None).run_dir(2) == tmp_path / "out" / "object_swap_t0_s2"
    assert flash_main(["replay", "--flash-dir", "d", "--suite", SUITE, "--task", "0", "--seeds", "1",
                       "--output-root", str(tmp_path / "o"), "--run-dir", "one=/x"]) == 2


def test_flash_arms_on_ray_need_the_results_root_on_every_node(tmp_path):
    (tmp_path / "m.yaml").write_text(f"suites: [{SUITE}]\ntasks: 0\nseeds: 0-1\narms:\n  - {{name: s}}\n"
                                     "  - {name: f, planner: flash, seeds: 1, flash_from: s}\n"
                                     "ray: {results: copy, address: '127.0.0.1:1'}\n")
    done = _batch(tmp_path / "r", "--matrix", str(tmp_path / "m.yaml"))
    assert done.returncode == 2 and "arm f reads its flash plans from" in done.stderr
    assert "use 'results: shared'" in done.stderr and not (tmp_path / "r").exists()
