"""Fixtures for the security suite: real code-policy workers against the point-robot toolkit
of tests/policy, and helpers that find every process of one sandboxed cell on the host."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "policy_point_robot", Path(__file__).parent.parent / "policy" / "policy_point_robot.py")
_module = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("policy_point_robot", _module)
_spec.loader.exec_module(_module)
PointRobotToolkit = _module.PointRobotToolkit

from rpent.policy import CodePolicyRunner


def cell_processes(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (a run directory path: every process
    of a cell inherits the worker's command line, which names its scratch directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def wait_gone(marker: str, timeout_s: float = 60.0) -> list[int]:
    """Wait until no process of ``marker`` is left; returns what is left at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = cell_processes(marker)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


@pytest.fixture
def make_runner(tmp_path):
    """``make_runner(**kwargs) -> CodePolicyRunner`` writing to ``tmp_path/run``; every runner
    is closed at teardown and every process of its cells is then checked gone (and killed
    if not, so a failing test cannot leave attack processes behind)."""
    runners = []

    def make(toolkit=None, **kwargs):
        kwargs.setdefault("grace_s", 1.0)
        runner = CodePolicyRunner(toolkit if toolkit is not None else PointRobotToolkit(), tmp_path / "run", **kwargs)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()
    left = wait_gone(str(tmp_path / "run"), 30.0)
    for pid in left:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not left, f"processes of the cell outlived it: {left}"


sys.modules["security_helpers"] = sys.modules[__name__]   # test modules import the helpers above by this name
