"""The agent side (CLI, run layer, toolkit, client, planner) never imports metaworld or MuJoCo 3.x.

The Meta-World simulator lives in its own environment (``.venv-metaworld``); the main environment
keeps LIBERO's mujoco 2.3.7. These tests need no Meta-World environment.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = r"""
import json, sys
import rpent.cli.main as cli
import rpent.cli.batch
import rpent.run.runner
from rpent.robots.registry import get_robot
robot = get_robot("metaworld")
robot.toolkit_class()
import rpent.robots.metaworld.env_client, rpent.robots.metaworld.planner, rpent.robots.metaworld.prompts
from rpent.planners.base import planner_class
planner_class("expert")
# an external env endpoint: the config is built without the Meta-World interpreter (nothing starts here)
ns = cli.build_parser().parse_args(["--robot", "metaworld", "--suite", "mt10", "--task", "pick-place", "--seed", "4",
                                    "--env-endpoint", "socket://127.0.0.1:9"])
cfg = cli.config_from_args(ns)
mj = sys.modules.get("mujoco")
print(json.dumps({"metaworld": "metaworld" in sys.modules, "sim": "rpent.robots.metaworld.sim" in sys.modules,
                  "gymnasium": "gymnasium" in sys.modules,
                  "mujoco": getattr(mj, "__version__", None), "task": cfg.task, "suite": cfg.suite,
                  "planner": cfg.planner, "steps": cfg.max_episode_steps}))
"""


def test_agent_side_imports_no_metaworld_and_no_mujoco3():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["metaworld"] is False and got["sim"] is False and got["gymnasium"] is False
    assert got["mujoco"] is None or not got["mujoco"].startswith("3."), got["mujoco"]
    # --task by name resolves to its index in the suite; the robot's defaults apply
    assert (got["suite"], got["task"], got["planner"], got["steps"]) == ("mt10", 2, "expert", 500)


def test_main_environment_has_no_metaworld():
    """The main environment itself: metaworld is not installed, its mujoco is not 3.x."""
    import importlib.metadata as md

    with pytest.raises(md.PackageNotFoundError):
        md.version("metaworld")
    try:
        assert not md.version("mujoco").startswith("3."), md.version("mujoco")
    except md.PackageNotFoundError:
        pass


def test_task_lookup_errors_name_the_fix():
    from rpent.robots.metaworld import tasks

    assert tasks.resolve("mt50", "reach") == ("mt50", tasks.MT50.index("reach-v3"))
    assert tasks.resolve("MT10", "9") == ("mt10", 9)
    with pytest.raises(ValueError, match="tasks: reach-v3"):
        tasks.resolve("mt10", "assembly-v3")  # an MT50 task, not in MT10
    with pytest.raises(ValueError, match="mt10, mt50"):
        tasks.resolve("mt3", 0)
    with pytest.raises(ValueError, match="tasks 0-9"):
        tasks.task_info("mt10", 10)
    assert len(tasks.MT10) == 10 and len(tasks.MT50) == 50 and set(tasks.MT10) <= set(tasks.MT50)


def test_cli_refuses_bad_metaworld_flags(tmp_path):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    not_exec = tmp_path / "not_a_python"
    not_exec.write_text("")
    cases = [(["--task", "nope"], "no Meta-World task 'nope'"),
             (["--task", "0", "--planner", "scripted"], "--planner scripted cannot drive --robot metaworld"),
             (["--task", "0", "--vla-endpoint", "127.0.0.1:9"], "has no tools that use a VLA service"),
             (["--task", "0", "--env-python", str(tmp_path / "missing" / "python")],
              "scripts/install_metaworld.sh"),
             (["--task", "0", "--env-python", str(not_exec)], "is not an executable file"),
             # an interpreter without metaworld/msgpack: refused before a server is spawned
             (["--task", "0", "--env-python", sys.executable], "has no metaworld")]
    for extra, message in cases:
        out = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--robot", "metaworld", *extra,
                              "--output-dir", str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO,
                             timeout=120, env=env)
        assert out.returncode == 2, (extra, out.stdout, out.stderr)
        assert message in out.stderr, (extra, out.stderr)
