"""The EGL device is derived from what is visible, or refused with one line.

This machine has no GPU (one EGL device, Mesa); the rule is tested on parsed values with the
device count given, and the real env server / rpent-eval are run against this host's one device.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rpent.robots.libero.egl import EglDeviceError, count_egl_devices, resolve_egl_device


@pytest.mark.parametrize("cuda_device,env,n,expected", [
    (None, {}, 1, None),
    (None, {"CUDA_VISIBLE_DEVICES": ""}, 1, None),
    (None, {"CUDA_VISIBLE_DEVICES": "1"}, 4, 1),          # EGL lists every GPU: the same physical device
    (None, {"CUDA_VISIBLE_DEVICES": "1"}, 1, 0),          # a container showing only GPU 1 to EGL
    (None, {"CUDA_VISIBLE_DEVICES": "2,3"}, 2, 0),
    (None, {"CUDA_VISIBLE_DEVICES": "3,1"}, 4, 3),        # robosuite renders on the first entry
    (None, {"CUDA_VISIBLE_DEVICES": "GPU-8d1c2a"}, 1, 0),
    (None, {"MUJOCO_EGL_DEVICE_ID": "2", "CUDA_VISIBLE_DEVICES": "0"}, 4, 2),
    (1, {"CUDA_VISIBLE_DEVICES": "2,3", "MUJOCO_EGL_DEVICE_ID": "7"}, 4, 3),   # torch cuda:1 = GPU 3
    (1, {"CUDA_VISIBLE_DEVICES": "2,3"}, 2, 1),                                # EGL shows only GPUs 2, 3
    (0, {}, 1, 0),
    (None, {"MUJOCO_GL": "osmesa", "MUJOCO_EGL_DEVICE_ID": "7"}, 0, None),
])
def test_consistent_device_is_derived(cuda_device, env, n, expected):
    assert resolve_egl_device(cuda_device, env, n).device == expected


@pytest.mark.parametrize("cuda_device,env,n,needles", [
    (None, {"CUDA_VISIBLE_DEVICES": "3"}, 2, ["CUDA_VISIBLE_DEVICES=3", "MUJOCO_EGL_DEVICE_ID unset", "0..1",
                                               "--cuda-device K"]),
    (None, {"MUJOCO_EGL_DEVICE_ID": "7"}, 1, ["MUJOCO_EGL_DEVICE_ID=7", "CUDA_VISIBLE_DEVICES unset", "0..0"]),
    (None, {"MUJOCO_EGL_DEVICE_ID": "x"}, 2, ["MUJOCO_EGL_DEVICE_ID=x"]),
    (None, {"CUDA_VISIBLE_DEVICES": "GPU-8d1c2a,GPU-77"}, 4, ["CUDA_VISIBLE_DEVICES=GPU-8d1c2a,GPU-77"]),
    (5, {}, 1, ["--cuda-device 5 does not exist", "1 EGL device(s)", "0..0"]),
    (5, {"CUDA_VISIBLE_DEVICES": "1"}, 1, ["--cuda-device 5 is not visible", "CUDA_VISIBLE_DEVICES=1", "0..0"]),
    (None, {}, 0, ["no EGL device found", "MUJOCO_GL=osmesa"]),
])
def test_inconsistent_device_is_refused_in_one_line(cuda_device, env, n, needles):
    with pytest.raises(EglDeviceError) as info:
        resolve_egl_device(cuda_device, env, n)
    msg = str(info.value)
    assert "\n" not in msg
    for needle in needles:
        assert needle in msg, msg


def _env_server(extra_env: dict, *args: str, timeout: float = 120) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "MUJOCO_EGL_DEVICE_ID")}
    env.update(MUJOCO_GL="egl", **extra_env)
    return subprocess.Popen([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", "libero_object",
                             "--task", "0", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


@pytest.mark.parametrize("extra_env,args,needle", [
    ({"MUJOCO_EGL_DEVICE_ID": "7"}, (), "MUJOCO_EGL_DEVICE_ID=7 is not an EGL device of this host"),
    ({}, ("--cuda-device", "5"), "--cuda-device 5 does not exist"),
    ({"CUDA_VISIBLE_DEVICES": "1"}, ("--cuda-device", "5"), "--cuda-device 5 is not visible: CUDA_VISIBLE_DEVICES=1"),
])
def test_env_server_refuses_a_missing_device_before_readiness_in_one_line(extra_env, args, needle):
    n = count_egl_devices()
    assert n >= 1, "this test needs one EGL device (Mesa's libegl1 is enough)"
    p = _env_server(extra_env, *args)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "RPC server listening" not in out
    assert "Traceback" not in err and "AttributeError" not in err
    lines = [line for line in err.splitlines() if line.startswith("env_server:")]
    assert len(lines) == 1 and needle in lines[0], err


@pytest.mark.slow
def test_env_server_derives_the_device_from_cuda_visible_devices():
    """CUDA_VISIBLE_DEVICES=1 on a one-device host killed the server; now it renders on device 0."""
    if count_egl_devices() != 1:
        pytest.skip("the derivation checked here is the one-EGL-device host")
    p = _env_server({"CUDA_VISIBLE_DEVICES": "1"})
    try:
        line = p.stdout.readline()
        assert line.startswith("RPC server listening on "), p.stderr.read() if p.poll() is not None else line
        from rpent.robots.libero.env_client import EnvClient

        env = EnvClient(line.split()[-1])
        try:
            env.reset()
            render = env.render_camera("agentview", 64, 64)
            assert render["rgb"].shape == (64, 64, 3) and render["rgb"].any()
        finally:
            env.close()
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    assert "EGL rendering device: 0 (CUDA_VISIBLE_DEVICES=1" in err


def test_rpent_eval_checks_the_env_workers_device_before_starting_them(tmp_path, monkeypatch):
    from rpent.eval.config import load_eval_config
    from rpent.eval.errors import EvalConfigError
    from rpent.eval.runner import run_eval
    from rpent.eval.validation import build_settings

    class Zero:
        name = "zero"

        def metadata(self):
            return {"action_dim": 7, "n_exec": 5, "num_views": 2}

        def predict(self, observation, episodes):  # pragma: no cover - never reached
            raise AssertionError("no episode may run")

        def close(self):
            pass

    loaded = load_eval_config("libero_object_pi05_eval", [
        "policy.endpoint=http://127.0.0.1:9", "env.eval.task_ids=[2]", "env.eval.total_num_envs=1",
        "env.num_workers=1", "env.eval.rollout_epoch=1", "env.eval.max_episode_steps=5"])
    settings = build_settings(loaded, cpu_count=2)
    monkeypatch.setenv("MUJOCO_EGL_DEVICE_ID", "7")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(EvalConfigError, match=r"env workers cannot render: MUJOCO_EGL_DEVICE_ID=7 is not an EGL device"):
        run_eval(settings, loaded, logs_dir=tmp_path, show_progress=False, policy=Zero())
    settings = build_settings(loaded, cuda_device=5, cpu_count=2)
    monkeypatch.delenv("MUJOCO_EGL_DEVICE_ID")
    with pytest.raises(EvalConfigError, match=r"--cuda-device 5 does not exist"):
        run_eval(settings, loaded, logs_dir=tmp_path, show_progress=False, policy=Zero())
