"""The TUI's flywheel export job: which --input-root arguments a selection of runs becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpent.session.flywheel_jobs import FlywheelJob, FlywheelJobError, flywheel_argv


def test_selection_to_input_roots(tmp_path):
    runs = [tmp_path / f"run{i}" for i in range(3)]
    out = tmp_path / "out"
    every = FlywheelJob.from_selection(runs, runs, tmp_path, out, 2)
    assert every.input_roots == (tmp_path,)
    some = FlywheelJob.from_selection(runs[:2], runs, tmp_path, out, 0)
    argv = flywheel_argv(some, program=["rpent-flywheel"])
    assert argv == ["rpent-flywheel", "--input-root", str(runs[0]), "--input-root", str(runs[1]),
                    "--output-dir", str(out), "--rules", "v1", "--image-writer-threads", "0"]
    v2 = FlywheelJob.from_selection(runs[:1], runs, tmp_path, out, 0, rules="v2")
    assert flywheel_argv(v2, program=["rpent-flywheel"])[-4:-2] == ["--rules", "v2"]
    with pytest.raises(FlywheelJobError, match="pick at least one run"):
        FlywheelJob.from_selection([], runs, tmp_path, out, 0)
    with pytest.raises(FlywheelJobError, match="does not exist"):
        some.validate()
    for r in runs[:2]:
        Path(r).mkdir()
    some.validate()
