"""Code mode against the real LIBERO toolkit over a real env server (MuJoCo, CPU EGL).

Slow: the env server takes ~12 s to start, the example policy ~20 s of simulation.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from rpent.policy import CodeModeToolkit, CodePolicyRunner, code_mode_system_prompt, run_code_file

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pick_place_policy.py"
SUITE, TASK = "libero_object", 0


@pytest.fixture(scope="module")
def env_endpoint(start_rpc_server):
    pytest.importorskip("libero")
    server = start_rpc_server([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", SUITE,
                               "--task", str(TASK), "--seed", "0", "--transport", "socket", "--port", "0"],
                              env={"MUJOCO_GL": "egl"}, timeout=180.0)
    yield server.endpoint
    server.stop()


@pytest.fixture
def libero_toolkit(env_endpoint, tmp_path):
    """A fresh episode (env reset) with its own run record."""
    from rpent.robots.libero.env_client import EnvClient
    from rpent.robots.libero.toolkit import LiberoToolkit
    from rpent.run.record import RunRecord, run_tag

    env = EnvClient(env_endpoint)
    env.reset()
    toolkit = LiberoToolkit(env, RunRecord(tmp_path / "run", run_tag(SUITE, TASK, 0)), video=False)
    yield toolkit
    toolkit.close()


def test_example_policy_solves_the_task_through_code_file(libero_toolkit, tmp_path):
    with CodePolicyRunner(libero_toolkit, tmp_path / "run", timeout_s=600) as runner:
        result = run_code_file(runner, EXAMPLE)
    assert result["exception"] is None, result["exception"]
    assert result["finished"]["status"] == "success", result["stdout"]
    assert libero_toolkit.solved()
    steps = sum(c.get("env_steps", 0) for c in result["robot_calls"])
    assert result["env_steps"] == steps > 0
    assert (tmp_path / "run" / "code_policy" / "cell_001.json").exists()


def test_cells_share_state_and_a_timeout_cancels_a_real_motion(libero_toolkit, tmp_path):
    code_tk = CodeModeToolkit(libero_toolkit, CodePolicyRunner(libero_toolkit, tmp_path / "run", timeout_s=30.0,
                                                               grace_s=15.0))  # fits a 5 cm move / an env step under load
    try:
        first = code_tk.execute("python", {"code": "start = np.asarray(robo.view_env_state().state.robot0_eef_pos)\n"
                                                   "start.round(3).tolist()"})
        assert first["ok"], first["exception"]
        moved = code_tk.execute("python", {"code": "r = robo.move_to((start + [0.0, 0.0, 0.05]).tolist())\n"
                                                   "round(r.final_dist_m, 3) <= 0.012, r.steps_used > 0"})
        assert moved["ok"] and moved["value"] == "(True, True)", moved
        assert moved["moved"] and moved["env_steps"] > 0 and moved["_images"]
        t0 = time.monotonic()
        stuck = code_tk.execute("python", {"code": "while True:\n"
                                                   "    robo.move_to((start + [0.0, 0.0, 0.6]).tolist(), max_steps=2000)\n"})
        assert time.monotonic() - t0 < 30.0 + 15.0 + 30  # the loop alone never ends: the 30 s cell timeout ended it
        assert stuck["timed_out"] and stuck["exception"]["type"] == "CellTimeout"
        assert stuck["robot_calls"][-1]["result"]["code"] == "tool_cancelled"
        after = code_tk.execute("python", {"code": "robo.view_env_state().step > 0, 'start' in globals()"})
        assert after["value"] == "(True, True)"
    finally:
        code_tk.runner.close()


def test_prompt_lists_the_libero_tools_with_their_signatures(libero_toolkit):
    prompt = code_mode_system_prompt(libero_toolkit.specs())
    assert "`robo.move_to(xyz: list[float; 3 items], gripper: float = -1.0" in prompt
    assert "target_yaw: float|None = None" in prompt
    assert "`robo.segment(prompt: str|None = None, point: list[int; 2 items]|None = None" in prompt
    assert "robo.request_scene_reset" not in prompt and "`request_scene_reset`" in prompt
