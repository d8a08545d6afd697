"""Bad input to rpent-batch is one line with the fix, exit code 2, nothing written; unreadable run
records are shown, not silently pending; compare says which task strata the CMH test dropped."""

import json

import pytest

from rpent.batch.compare import compare_roots, render_compare
from rpent.batch.matrix import Cell
from rpent.batch.report import build_report, render_markdown
from rpent.run.record import run_tag

from prepared import prepare_root, write_attempt

RUN = ("--suites", "libero_object", "--tasks", "0", "--seeds", "0", "--no-progress")


@pytest.fixture
def cli(capsys):
    from rpent.cli.batch import main

    def run(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out = capsys.readouterr()
        return exc.value.code, out.out, out.err

    return run


def _one_line_usage_error(r, *needles):
    code, out, err = r
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    for n in needles:
        assert n in last, last


def test_results_root_that_is_a_dangling_link_a_link_loop_or_uncreatable(tmp_path, cli):
    """A symbolic link to nothing, a link loop (or a path under one) and a place that takes no new
    directory are one line naming the path, before any work; nothing is created."""
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for root in ("loop_a", "loop_a/sub", "dangling"):
        _one_line_usage_error(cli(*RUN, "--results-root", str(tmp_path / root)),
                              "is a symbolic link to nothing (or a link loop)", "choose another --results-root")
    _one_line_usage_error(cli(*RUN, "--results-root", "/proc/rpent-no-such-dir/root"), "cannot be created in /proc")
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "loop_a", "loop_b"]


def test_results_root_that_is_a_file_or_under_one(tmp_path, cli):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_usage_error(cli(*RUN, "--results-root", str(f)), "is a file, not a directory")
    _one_line_usage_error(cli(*RUN, "--results-root", str(f / "sub")), f"({f} is a file)")
    assert f.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("given", ["D", "."])
def test_a_directory_with_files_but_no_matrix_is_refused_unchanged(tmp_path, cli, monkeypatch, given):
    """Another tool's output (here a report.md of one's own) is never taken as a results root."""
    used = tmp_path / "D"
    used.mkdir()
    (used / "report.md").write_text("my notes")
    (used / "run.log").write_text("an earlier run")
    monkeypatch.chdir(used if given == "." else tmp_path)
    _one_line_usage_error(cli(*RUN, "--results-root", given),
                          "holds files (report.md, run.log) but no matrix.json", f"--results-root {tmp_path / 'D'}-2")
    assert sorted(p.name for p in used.iterdir()) == ["report.md", "run.log"]
    assert (used / "report.md").read_text() == "my notes"


def test_a_missing_arm_checkpoint_is_refused_before_anything_starts(tmp_path, cli):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("suites: [libero_object]\ntasks: [0]\nseeds: [0]\n"
                      "arms:\n  - {name: a, planner: scripted, vla_checkpoint: /nonexistent/ckpt}\n")
    root = tmp_path / "r"
    _one_line_usage_error(cli("--matrix", str(matrix), "--results-root", str(root), "--no-progress"),
                          "arm a: vla_checkpoint /nonexistent/ckpt does not exist")
    assert not root.exists()


@pytest.mark.parametrize("flags, needle", [
    (("--cell-timeout-s", "0"), "--cell-timeout-s must be > 0"),
    (("--cell-timeout-s", "-5"), "--cell-timeout-s must be > 0"),
    (("--max-retries", "-1"), "--max-retries must be >= 0, got -1"),
    (("--parallel", "0"), "--parallel must be >= 1 concurrent runs, got 0"),
    (("--repeats", "0"), "--repeats must be >= 1"),
    (("--price-in", "-1"), "--price-in must be >= 0"),
])
def test_non_positive_numeric_flags_are_refused_before_running(tmp_path, cli, flags, needle):
    root = tmp_path / "r"
    _one_line_usage_error(cli(*RUN, "--results-root", str(root), *flags), needle)
    assert not root.exists()


@pytest.mark.parametrize("conf", ["2", "0", "1", "-0.5", "nan"])
def test_report_confidence_outside_0_1_is_refused_and_writes_nothing(tmp_path, cli, conf):
    root = prepare_root(tmp_path / "r", [1], seeds=range(25, 27))
    _one_line_usage_error(cli("report", str(root.root), "--confidence", conf), "--confidence must be in (0, 1)")
    assert not (root.root / "report.json").exists() and not (root.root / "report.md").exists()
    a = prepare_root(tmp_path / "a", [1], seeds=range(25, 27))
    _one_line_usage_error(cli("compare", str(a.root), str(root.root), "--alpha", conf), "--alpha must be in (0, 1)")


def test_corrupt_matrix_json_is_named(tmp_path, cli):
    root = prepare_root(tmp_path / "r", [1], seeds=range(25, 27))
    root.matrix_path.write_text("{not json")
    _one_line_usage_error(cli("report", str(root.root)), str(root.matrix_path), "unreadable")
    assert not (root.root / "report.json").exists()
    other = prepare_root(tmp_path / "o", [1], seeds=range(25, 27))
    _one_line_usage_error(cli("compare", str(other.root), str(root.root)), str(root.matrix_path), "unreadable")


def test_unreadable_records_are_listed_and_resume_says_why_it_reruns(tmp_path, capsys, monkeypatch):
    root = prepare_root(tmp_path / "r", [1, 1], seeds=range(25, 27))
    c0, c1 = Cell("default", "libero_goal_swap", 0, 25), Cell("default", "libero_goal_swap", 1, 26)
    (root.run_dir(c0, 1) / f"transcript_{run_tag(c0.suite, c0.task, c0.seed)}.json").write_text("garbage")
    (root.run_dir(c1, 1) / "states.json").write_text("garbage{")
    from rpent.batch.matrix import Matrix

    matrix = Matrix.from_dict(json.loads(root.matrix_path.read_text()))
    rep = build_report(matrix, root.cell_states(matrix.cells()))
    cells = {c["key"]: c for c in rep["cells"]}
    assert cells[c0.key]["status"] == "pending" and "transcript_" in cells[c0.key]["invalid_attempts"][0]["reason"]
    assert "states.json" in cells[c1.key]["invalid_attempts"][0]["reason"]
    md = render_markdown(rep)
    assert "## unreadable run records" in md and f"| {c0.key} | 1 | pending |" in md

    from rpent.batch import runner as runner_mod

    class NoServices:
        def __init__(self, *a, **k):
            self.vla_checkpoint = self.sam3_checkpoint = None

        def start(self):
            raise runner_mod.SharedServiceError("stub: stop before running")

    monkeypatch.setattr(runner_mod, "ArmServices", NoServices)
    r = runner_mod.BatchRunner(matrix, root, executor=None, options=runner_mod.BatchOptions(progress=False))
    states = r.states()
    capsys.readouterr()
    counts = {"default": [0, 0, 0]}
    r._run_arm(matrix.arms[0], states, counts, runner_mod.Progress(None, {"default": 4}, counts, 2, 2, bar=False))
    err = [ln for ln in capsys.readouterr().err.splitlines() if "re-running" in ln]
    assert len(err) == 2 and "transcript_" in err[0] and "states.json" in err[1], err


def test_report_infra_section_does_not_call_a_retried_cell_an_infra_error(tmp_path):
    root = prepare_root(tmp_path / "r", [0], seeds=range(25, 26))
    cell = Cell("default", "libero_goal_swap", 0, 26)
    from rpent.batch.matrix import Arm, Matrix

    m = Matrix(suites=("libero_goal_swap",), tasks=(0,), seeds=(25, 26), arms=(Arm(name="default"),))
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    write_attempt(root, cell, 1, "infra")
    write_attempt(root, cell, 2, "failure")
    md = render_markdown(build_report(m, root.cell_states(m.cells())))
    section = md.split("## infrastructure errors")[1]
    assert "last error" not in section
    assert "| final status | infra attempts / attempts | latest infra error |" in section
    assert f"| {cell.key} | failure | 1/2 |" in section


def test_compare_says_which_task_strata_were_dropped(tmp_path):
    a = prepare_root(tmp_path / "a", [0, 5], seeds=range(25, 30))
    b = prepare_root(tmp_path / "b", [0, 4], seeds=range(25, 30))
    res = compare_roots(a.root, b.root, None, None)
    assert res["overall"]["strata_used"] == 1 and res["overall"]["strata_dropped_uninformative"] == 1
    text = render_compare(res)
    assert "over 1 informative task strata (1 dropped: 1 without information" in text
    a0 = prepare_root(tmp_path / "a0", [0], seeds=range(25, 30))
    b0 = prepare_root(tmp_path / "b0", [0], seeds=range(25, 30))
    assert "over 0 informative task strata (1 dropped" in render_compare(compare_roots(a0.root, b0.root, None, None))


def test_malformed_matrix_yaml_names_line_and_column(tmp_path, cli):
    bad = tmp_path / "m1.yaml"
    bad.write_text("suites: [libero_object\ntasks: [0]\n")
    _one_line_usage_error(cli("--matrix", str(bad), "--results-root", str(tmp_path / "r")),
                          str(bad), "not valid YAML (line 2, column 6)", "fix the file")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name, content, needle", [
    ("latin1.yaml", b"\xff\xfe suites: [x]\n", "is not UTF-8 text"),
    ("suites_int.yaml", b"suites: 5\ntasks: 0\nseeds: 0\n", "suites must be a suite name or a list of names"),
    ("suites_map.yaml", b"suites: {a: 1}\ntasks: 0\nseeds: 0\n", "suites must be a suite name or a list of names"),
    ("repeats_text.yaml", b"suites: [libero_object]\ntasks: 0\nseeds: 0\nrepeats: abc\n",
     "repeats must be an integer >= 1, got 'abc'"),
    ("repeats_float.yaml", b"suites: [libero_object]\ntasks: 0\nseeds: 0\nrepeats: 1.7\n",
     "repeats must be an integer >= 1, got 1.7"),
    ("dir.yaml", None, "is a directory, not a file"),
])
def test_unreadable_or_mistyped_matrix_file_is_one_line(tmp_path, cli, name, content, needle):
    bad = tmp_path / name
    if content is None:
        bad.mkdir()
    else:
        bad.write_bytes(content)
    root = tmp_path / "r"
    _one_line_usage_error(cli("--matrix", str(bad), "--results-root", str(root), "--no-progress"),
                          f"matrix file {bad}", needle)
    assert not root.exists()
