"""The Pi0.5 VLA server end to end: a real server subprocess over both transports, tiny checkpoints.

Covers: readiness line and metadata, libero shapes/dtypes (the other presets: tests/models/test_pi05_policy.py), determinism with `observation`
noise, agreement with the in-process policy, dynamic batching (several client threads, each gets its
own rows), config checks, startup failures with their messages (OK/MISS list, missing tensor, no path).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from rpent.models.pi05.checkpoint import EXPERT
from rpent.models.pi05.policy import Pi05Policy
from rpent.models.pi05.tiny import build_tiny_checkpoint, tiny_observation
from rpent.robots.components.vla_client import VlaClient
from rpent.rpc import RemoteError

REPO = Path(__file__).resolve().parents[2]


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PI05_CHECKPOINT_PATH", None)
    env.update(extra)
    return env


class ServerProc:
    """A pi05_vla_server subprocess; ``endpoint`` from its readiness line."""

    def __init__(self, args: list[str], env: dict | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or _env(), cwd=REPO,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("RPC server listening on "):
            self.proc.wait(30)
            raise RuntimeError(f"server did not start (rc {self.proc.returncode}): {line}{self.proc.stderr.read()}")
        self.endpoint = line.split()[-1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for s in (self.proc.stdout, self.proc.stderr):
            s.close()


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("pi05_server")
    return {
        "lerobot": build_tiny_checkpoint(root / "lerobot", layout="lerobot"),
        "openpi": build_tiny_checkpoint(root / "openpi", layout="openpi"),
        "dual_franka": build_tiny_checkpoint(root / "dual_franka", layout="openpi", embodiment="dual_franka"),
        "yam": build_tiny_checkpoint(root / "yam", layout="openpi", embodiment="yam"),
    }


@pytest.fixture(scope="module", params=["http", "socket"])
def libero_server(request, ckpts):
    # the checkpoint comes from PI05_CHECKPOINT_PATH here (no --model-path)
    srv = ServerProc(["--embodiment", "libero", "--transport", request.param, "--batch-window-ms", "30"],
                     env=_env(PI05_CHECKPOINT_PATH=str(ckpts["lerobot"])))
    yield srv
    srv.stop()


def test_metadata_and_libero_shapes(libero_server):
    with VlaClient(libero_server.endpoint) as vla:
        meta = vla.metadata()
        assert {k: meta[k] for k in ("embodiment", "action_dim", "action_horizon", "n_exec", "num_flow_steps", "num_views")} == {
            "embodiment": "libero", "action_dim": 7, "action_horizon": 10, "n_exec": 5, "num_flow_steps": 5, "num_views": 2}
        assert meta["layout"] == "lerobot" and meta["discrete_state_input"] is False
        a = vla.predict(tiny_observation("libero", 3))
        assert a.shape == (3, 5, 7) and a.dtype == np.float32 and np.isfinite(a).all()
        assert vla.rpc.call("predict", tiny_observation("libero", 1)).shape == (1, 5, 7)  # alias


def test_observation_noise_is_deterministic_and_matches_in_process_policy(libero_server, ckpts):
    obs = tiny_observation("libero", 2, seed=4)
    obs["noise"] = np.random.default_rng(9).standard_normal((2, 10, 32)).astype(np.float32)
    with VlaClient(libero_server.endpoint) as vla:
        a = vla.predict(obs)
        b = vla.predict(obs, {"noise_source": "observation"})
        c = vla.predict({**obs, "noise": obs["noise"] * 0.5})
        s1 = vla.predict(tiny_observation("libero", 2), {"seed": 7})
        s2 = vla.predict(tiny_observation("libero", 2), {"seed": 7})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(s1, s2)
    assert np.abs(a - c).max() > 1e-4
    local = Pi05Policy.from_checkpoint(ckpts["lerobot"], "libero", log=lambda s: None).predict(obs)
    np.testing.assert_allclose(a, local, atol=1e-5)


def test_config_checks_and_bad_requests_are_remote_errors_with_fixes(libero_server):
    with VlaClient(libero_server.endpoint) as vla:
        with pytest.raises(RemoteError) as e:
            vla.predict(tiny_observation("libero", 1), {"num_flow_steps": 10})
        assert e.value.remote_type.endswith("ConfigCheckError")
        assert "must match the configured num_steps (5)" in e.value.remote_message and "--num-flow-steps 10" in e.value.remote_message
        bad = tiny_observation("libero", 1)
        bad["states"] = bad["states"][:, :3]
        with pytest.raises(RemoteError, match=r"'states' must be float32 \[B=1, 8\]"):
            vla.predict(bad)


def test_dynamic_batching_gives_each_client_its_own_result(libero_server):
    n = 6
    obs = [tiny_observation("libero", 1 + (i % 2), seed=10 + i) for i in range(n)]
    for i, o in enumerate(obs):
        o["noise"] = np.random.default_rng(i).standard_normal((o["states"].shape[0], 10, 32)).astype(np.float32)
    with VlaClient(libero_server.endpoint) as vla:
        single = [vla.predict(o) for o in obs]  # one at a time: batches of one request
        before = vla.rpc.call("vla.stats")["batches_run"]
    results: dict[int, list] = {i: [] for i in range(n)}
    errors = []
    barrier = threading.Barrier(n)

    def client(i):
        try:
            with VlaClient(libero_server.endpoint) as c:
                barrier.wait(10)
                for _ in range(3):
                    results[i].append(c.predict(obs[i]))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not errors, errors
    for i in range(n):
        for got in results[i]:
            np.testing.assert_allclose(got, single[i], atol=1e-5)
    with VlaClient(libero_server.endpoint) as vla:
        stats = vla.rpc.call("vla.stats")
    calls = stats["batches_run"] - before
    assert calls < 3 * n  # concurrent requests shared model calls
    assert max(stats["recent_batch_rows"]) > 2


def _start_fails(args, env=None) -> str:
    p = subprocess.run([sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--port", "0", *args],
                       capture_output=True, text=True, env=env or _env(), cwd=REPO, timeout=60)
    assert p.returncode == 2, p
    assert "RPC server listening" not in p.stdout
    return p.stderr


def test_startup_failures_name_the_problem(tmp_path, ckpts):
    err = _start_fails(["--embodiment", "libero"])
    assert "PI05_CHECKPOINT_PATH" in err and "--model-path" in err
    d = build_tiny_checkpoint(tmp_path / "partial", with_norm_stats=False, with_tokenizer=False)
    err = _start_fails(["--model-path", str(d)])
    assert "OK   config.json" in err and "OK   model.safetensors" in err
    assert "MISS norm_stats.json" in err and "MISS tokenizer" in err
    key = f"{EXPERT}model.layers.0.self_attn.q_proj.weight"
    d2 = build_tiny_checkpoint(tmp_path / "holey", drop_tensors=(key,))
    err = _start_fails(["--model-path", str(d2)])
    assert "1 missing tensor(s): " + key in err and "refusing to run with random weights" in err
    err = _start_fails(["--model-path", str(ckpts["openpi"]), "--action-horizon", "4"])
    assert "action_horizon (4) must be at least the number of executed actions n_exec (5)" in err


def test_fp8_without_fp8_tensor_cores_is_refused_by_name(ckpts):
    err = _start_fails(["--model-path", str(ckpts["openpi"]), "--cpu", "--precision", "fp8"])
    assert "Traceback" not in err
    assert "--precision fp8 needs a CUDA GPU with FP8 tensor cores (compute capability >= 8.9" in err
    assert "use --precision bf16" in err


def test_a_damaged_model_safetensors_is_a_named_error_and_exit_2(tmp_path):
    d = build_tiny_checkpoint(tmp_path / "truncated")
    weights = d / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    err = _start_fails(["--model-path", str(d), "--cpu"])
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if "cannot load the checkpoint" in ln)
    assert f"weight file {weights} cannot be loaded: truncated" in line
    assert "copy or download the file again" in line


def test_start_up_log_names_the_phases_and_the_prefetch(ckpts):
    # the checkpoint is read into the page cache from the start of main() (rpent.models.prefetch); the log
    # gives each start-up phase its seconds, so a slow cold start can be taken apart from the log alone
    srv = ServerProc(["--embodiment", "libero", "--model-path", str(ckpts["openpi"]), "--transport", "socket"])
    try:
        with VlaClient(srv.endpoint) as vla:
            assert vla.predict(tiny_observation("libero", 1)).shape == (1, 5, 7)
    finally:
        srv.proc.terminate()
        srv.proc.wait(30)
        err = srv.proc.stderr.read()
        srv.stop()
    assert "torch import + CUDA init " in err
    assert re.search(r"pi05_vla_server: prefetch (done|still reading): [0-9.]+ of [0-9.]+ GB in ", err), err
    assert re.search(r"loaded openpi-layout weights to cpu \(float32\) in [0-9.]+ s", err), err
    assert re.search(r"ready in [0-9.]+ s", err), err
