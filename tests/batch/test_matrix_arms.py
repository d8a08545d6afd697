"""Arms of a matrix beyond the plain ones: a subset of the seeds, flash plans from another arm, optional
arms enabled by a flag, and a results root extended by a new arm without touching the others; the
checked-in LIBERO-PRO leaderboard experiment."""

import json
from pathlib import Path

import pytest

from rpent.batch.matrix import (Arm, Matrix, extend_matrix, format_index_list, load_matrix_file, select_arms)

REPO = Path(__file__).resolve().parents[2]


def _m(*arms, seeds=(0, 1, 2)):
    return Matrix(suites=("libero_object",), tasks=(0, 1), seeds=seeds, arms=arms)


def test_an_arm_runs_its_own_subset_of_the_seeds():
    m = _m(Arm("a"), Arm("f", planner="flash", seeds=(2, 1), flash_from="a"))
    assert [c.seed for c in m.cells("f")] == [1, 2, 1, 2]
    assert len(m.cells("a")) == 6 and len(m.cells()) == 10
    assert m.arm_seeds("f") == (1, 2) and m.arm_seeds("a") == (0, 1, 2)
    # a matrix narrowed to fewer seeds (rpent-batch --seeds) keeps the arm's seeds that are in it
    assert _m(Arm("a"), Arm("f", seeds=(1, 7))).arm_seeds("f") == (1,)
    with pytest.raises(ValueError, match=r"arm f runs none of the matrix's seeds \(0-2\): its seeds are 7-9"):
        _m(Arm("a"), Arm("f", seeds=(7, 8, 9)))


@pytest.mark.parametrize("arms, message", [
    ((Arm("f", planner="flash", flash_from="a"),), "flash_from 'a' is not an arm listed before it"),
    ((Arm("f", planner="flash", flash_from="a"), Arm("a")), "arms before it: none"),
    ((Arm("a", seeds=(1, 2)), Arm("f", planner="flash", flash_from="a")), "flash_seed 0 is not a seed of arm a"),
])
def test_flash_from_must_name_an_earlier_arm_that_runs_the_plan_seed(arms, message):
    with pytest.raises(ValueError, match=message):
        _m(*arms)


def test_flash_from_arm_is_checked_on_its_own():
    with pytest.raises(ValueError, match="flash_from needs planner: flash"):
        Arm("f", flash_from="a")
    with pytest.raises(ValueError, match="--flash-dir is set by rpent-batch"):
        Arm("f", planner="flash", flash_from="a", flags=("--flash-dir", "/x"))
    with pytest.raises(ValueError, match="names the arm itself"):
        Arm("f", planner="flash", flash_from="f")


def test_optional_arms_run_only_when_enabled():
    m = _m(Arm("a"), Arm("llm1", planner="api", model="anthropic:x", optional=True),
           Arm("llm2", planner="api", model="openai:y", optional=True))
    sel, left = select_arms(m, [])
    assert [a.name for a in sel.arms] == ["a"] and left == ["llm1", "llm2"]
    sel, left = select_arms(m, ["llm2"])
    assert [a.name for a in sel.arms] == ["a", "llm2"] and left == ["llm1"]
    assert [a.name for a in select_arms(m, ["all"])[0].arms] == ["a", "llm1", "llm2"]
    with pytest.raises(ValueError, match=r"--enable-arm: no arm nope; optional arms: llm1, llm2"):
        select_arms(m, ["nope"])
    m2 = _m(Arm("a", optional=True), Arm("f", planner="flash", flash_from="a"))
    with pytest.raises(ValueError, match="add --enable-arm a"):
        select_arms(m2, [])


def test_a_root_gains_a_new_arm_and_keeps_the_others():
    stored = _m(Arm("a"), Arm("b", planner="flash", seeds=(1, 2), flash_from="a"))
    new = _m(Arm("a"), Arm("c", planner="api", model="openai:z"))
    merged, added = extend_matrix(stored, new)
    assert [a.name for a in merged.arms] == ["a", "b", "c"] and added == ["c"]
    assert merged.cells("b") == stored.cells("b")  # an arm not in the new matrix keeps its cells
    assert extend_matrix(stored, stored) == (stored, [])
    with pytest.raises(ValueError, match=r"arm a differs .*planner: 'scripted' -> 'api'.*give the changed arm a new name"):
        extend_matrix(stored, _m(Arm("a", planner="api", model="openai:z")))
    with pytest.raises(ValueError, match=r"seeds: \[0, 1, 2\] there, \[0, 1\] now"):
        extend_matrix(stored, _m(Arm("a"), seeds=(0, 1)))


def test_matrix_json_round_trip_and_older_files():
    m = _m(Arm("a", note="expert baseline"), Arm("f", planner="flash", seeds=(1, 2), flash_from="a", flash_seed=0),
           Arm("o", optional=True))
    assert Matrix.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    old = {"schema_version": 1, "suites": ["libero_object"], "tasks": [0], "seeds": [0, 1], "repeats": 1, "flags": [],
           "arms": [{"name": "default", "planner": "scripted", "model": None, "policy_mode": "tools", "code_file": None,
                     "vla_checkpoint": None, "vla_endpoint": None, "sam3_checkpoint": None, "sam3_endpoint": None,
                     "flags": [], "price_in_usd_per_mtok": None, "price_out_usd_per_mtok": None}]}
    loaded = Matrix.from_dict(old)
    assert loaded.arms[0] == Arm("default") and len(loaded.cells()) == 2


def test_yaml_arm_keys(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("suites: [libero_object]\ntasks: 0\nseeds: 0-4\narms:\n"
                 "  - {name: s, note: expert}\n"
                 "  - {name: f, planner: flash, seeds: '1-2,4', flash_from: s}\n"
                 "  - {name: l, planner: api, model: 'openai:x', optional: true}\n")
    doc = load_matrix_file(p)
    m = Matrix(doc["suites"], doc["tasks"], doc["seeds"], arms=doc["arms"])
    assert m.arm("f").seeds == (1, 2, 4) and m.arm("l").optional and m.arm("s").note == "expert"
    p.write_text("suites: [x]\ntasks: 0\nseeds: 0\narms:\n  - {name: l, optional: maybe}\n")
    with pytest.raises(ValueError, match="optional must be true or false"):
        load_matrix_file(p)


def test_the_checked_in_leaderboard_experiment():
    doc = load_matrix_file(REPO / "experiments" / "libero_pro_leaderboard.yaml")
    m = Matrix(doc["suites"], doc["tasks"], doc["seeds"], arms=doc["arms"])
    assert sorted(m.suites) == sorted(f"libero_{b}_{k}" for b in ("spatial", "object", "goal", "10")
                                      for k in ("task", "swap"))
    assert len(m.cells("scripted")) == 800 and len(m.cells("flash")) == 720
    assert m.arm("flash").flash_from == "scripted" and m.arm_seeds("flash") == tuple(range(1, 10))
    assert m.arm("flash").share_env
    sel, left = select_arms(m, [])
    assert [a.name for a in sel.arms] == ["scripted", "flash"]
    assert left and all(m.arm(n).planner == "api" for n in left)
    assert format_index_list(m.arm_seeds("flash")) == "1-9"
    # narrowed on the command line for a smoke run: the flash arm keeps the seeds left
    small = Matrix(("libero_object_swap",), (0, 1), (0, 1), arms=m.arms)
    assert [c.seed for c in small.cells("flash")] == [1, 1]


def test_the_checked_in_flash_experiment_matches_the_leaderboard_flash_arm():
    lb = load_matrix_file(REPO / "experiments" / "libero_pro_leaderboard.yaml")
    doc = load_matrix_file(REPO / "experiments" / "libero_pro_flash.yaml")
    m = Matrix(doc["suites"], doc["tasks"], doc["seeds"], arms=doc["arms"])
    full = Matrix(lb["suites"], lb["tasks"], lb["seeds"], arms=lb["arms"])
    assert (m.suites, m.tasks, m.seeds) == (full.suites, full.tasks, full.seeds)
    assert [a.name for a in m.arms] == ["scripted", "flash"]
    # the plan source only: seed 0 of every task; the flash arm itself is the leaderboard's
    assert len(m.cells("scripted")) == 80 and {c.seed for c in m.cells("scripted")} == {0}
    assert m.arm("flash") == full.arm("flash") and m.cells("flash") == full.cells("flash")
    assert m.arm("scripted").planner == full.arm("scripted").planner
    assert m.arm("scripted").flags == full.arm("scripted").flags
