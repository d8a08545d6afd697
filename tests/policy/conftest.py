"""Fixtures for the code-policy tests: real worker processes against a real (fixture)
toolkit; see policy_point_robot.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib (test dirs are not on sys.path): register the
# fixture module under its own name so test modules can import it.
_spec = importlib.util.spec_from_file_location("policy_point_robot", Path(__file__).with_name("policy_point_robot.py"))
_module = importlib.util.module_from_spec(_spec)
sys.modules["policy_point_robot"] = _module
_spec.loader.exec_module(_module)
PickPlaceWorld, PointRobotToolkit = _module.PickPlaceWorld, _module.PointRobotToolkit
from rpent.policy import CodePolicyRunner


@pytest.fixture
def toolkit():
    return PointRobotToolkit()


@pytest.fixture
def make_runner(tmp_path):
    """Factory: ``make_runner(toolkit=None, **kwargs) -> CodePolicyRunner`` writing to
    ``tmp_path/run``; every runner is closed (worker killed) at teardown."""
    runners = []

    def make(toolkit=None, **kwargs):
        kwargs.setdefault("grace_s", 1.0)
        runner = CodePolicyRunner(toolkit if toolkit is not None else PointRobotToolkit(),
                                  tmp_path / "run", **kwargs)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()


@pytest.fixture
def pick_place_world():
    return PickPlaceWorld()
