"""``rpent`` flag checks of the learning loop (memory, explore, flash): refused before anything
starts, with one line naming the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

TASK = ["--suite", "libero_object", "--task", "0"]


@pytest.mark.parametrize("args,message", [
    (["--explore", "--policy-mode", "code", "--code-file", "examples/pick_place_policy.py"],
     "--policy-mode code does not work with --explore"),
    (["--explore", "--planner", "flash"], "Flash Mode is evaluation-only; remove --explore"),
    (["--explore", "--explore-sessions", "0"], "--explore-sessions must be greater than 0"),
    (["--explore", "--explore-attempts-per-session", "-1"], "--explore-attempts-per-session must be >= 0"),
    (["--flash-dir", "/tmp/x"], "--flash-dir is for --planner flash only"),
    (["--planner", "flash", "--policy-mode", "code"], "--policy-mode code does not work with --planner flash"),
    (["--planner", "flash", "--policy-mode", "code", "--code-file", "examples/pick_place_policy.py"],
     "drop --planner flash: --code-file runs the file without a planner"),
    (["--planner", "scripted", "--memory-dir", "/nonexistent/mem"], "no memory corpus for robot 'libero'"),
    (["--planner", "flash", "--flash-dir", "README.md"], "--flash-dir README.md is a file; pass the directory"),
])
def test_refused(args, message, tmp_path):
    p = subprocess.run([sys.executable, "-m", "rpent.cli.main", *TASK, *args, "--output-dir", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_help_lists_the_learning_flags():
    out = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--help"], capture_output=True, text=True).stdout
    for flag in ("--memory-dir", "--explore-sessions", "--explore-attempts-per-session", "--no-auto-merge-memory",
                 "--flash-dir", "flash"):
        assert flag in out
