"""Policy backends against real components: an RPC server on a real socket, the tiny Pi0.5 checkpoint."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rpent.eval.config import load_eval_config
from rpent.eval.errors import PolicyError
from rpent.eval.policies import EpisodeRef, check_metadata, open_policy
from rpent.eval.rollout import observation_noise
from rpent.eval.validation import build_settings
from rpent.rpc import RpcServer

META = {"embodiment": "libero", "action_dim": 7, "action_horizon": 10, "n_exec": 5, "num_flow_steps": 5,
        "num_views": 2, "image_size": 224}


class RecordingServer(RpcServer):
    """A vla.predict server that answers a ramp and remembers every options dict it received."""

    def __init__(self, meta: dict):
        super().__init__(name="recording_vla")
        self.meta = meta
        self.options: list = []
        self.lock = threading.Lock()
        self.register("vla.predict", self.predict, readonly=True)
        self.register("vla.metadata", lambda: self.meta, readonly=True)

    def predict(self, observation, options=None):
        with self.lock:
            self.options.append(options)
        b = len(observation["task_descriptions"])
        return np.arange(b * 5 * 7, dtype=np.float32).reshape(b, 5, 7)


@pytest.fixture()
def server():
    srv = RecordingServer(dict(META))
    ep = srv.start(transport="socket")
    yield srv, ep
    srv.shutdown()


def settings_for(*overrides: str):
    return build_settings(load_eval_config(overrides=list(overrides)), cpu_count=2)


def obs(b: int) -> dict:
    img = np.zeros((b, 256, 256, 3), np.uint8)
    return {"main_images": img, "wrist_images": img, "states": np.zeros((b, 8), np.float32),
            "task_descriptions": ["put the bowl on the plate"] * b}


def test_endpoint_backend_sends_episode_keys_over_a_real_socket(server):
    srv, ep = server
    s = settings_for(f"policy.endpoint={ep}", "policy.episode_keys=true")
    policy = open_policy(s)
    try:
        assert policy.metadata()["n_exec"] == 5 and check_metadata(policy.metadata(), s.model) == []
        refs = [EpisodeRef("libero_10", 3, 7, 1, 4, 0), EpisodeRef("libero_10", 0, 2, 1, 5, 0)]
        out = policy.predict(obs(2), refs)
        assert out.shape == (2, 5, 7) and out.dtype == np.float32
        assert srv.options[-1] == {"episode_keys": ["libero_10_t3_s7#e1g4", "libero_10_t0_s2#e1g5"]}
    finally:
        policy.close()
    plain = open_policy(settings_for(f"policy.endpoint={ep}"))
    plain.predict(obs(1), [EpisodeRef("libero_10", 0, 0, 0, 0, 0)])
    assert srv.options[-1] is None
    plain.close()


def test_unreachable_endpoint_is_a_clear_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but never listening: connections are refused
        with pytest.raises(PolicyError, match=f"policy endpoint http://127.0.0.1:{port} did not answer vla.metadata"):
            open_policy(settings_for(f"policy.endpoint=http://127.0.0.1:{port}", "policy.timeout_s=5"))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"n_exec": 3}, "returns 3 actions per query but rollout.model.num_action_chunks=5"),
        ({"num_views": 1}, r"active camera views \(2, .*\) but the checkpoint expects 1"),
        ({"action_dim": 14}, "14-D actions"),
        ({"num_flow_steps": 10}, "num_flow_steps must match OpenPI num_steps"),
    ],
)
def test_metadata_mismatches_are_refused(change, message):
    s = settings_for("policy.endpoint=http://127.0.0.1:9")
    with pytest.raises(PolicyError, match=message):
        check_metadata({**META, **change}, s.model)


def test_metadata_soft_differences_warn():
    s = settings_for("policy.endpoint=http://127.0.0.1:9")
    assert check_metadata({**META, "num_flow_steps": 0}, s.model) == []  # a replay server: no flow steps
    (warning,) = check_metadata({**META, "action_horizon": 50}, s.model)
    assert "action_horizon 50 differs" in warning


def test_apxinf_backend_without_apxinf_robo_gives_the_install_hint(tiny_pi05_checkpoint, monkeypatch):
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(tiny_pi05_checkpoint))
    s = settings_for("policy.backend=apxinf", "policy.device=cuda:0")
    with pytest.raises(PolicyError, match="apxinf_robo is not importable in the rollout process"):
        open_policy(s)


def test_a_truncated_model_safetensors_is_a_checkpoint_error_naming_the_file(tmp_path, monkeypatch):
    from rpent.eval.errors import CheckpointError, EvalConfigError
    from rpent.models.pi05.tiny import build_tiny_checkpoint

    d = build_tiny_checkpoint(tmp_path / "cut", layout="lerobot")
    weights = d / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(d))
    s = settings_for("policy.device=cpu")
    with pytest.raises(CheckpointError) as info:       # a config error: rpent-eval exits 2
        open_policy(s)
    assert isinstance(info.value, EvalConfigError)
    assert f"weight file {weights} cannot be loaded: truncated" in str(info.value)


def test_in_process_tiny_pi05_predicts_env_actions(tiny_pi05_checkpoint, monkeypatch):
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(tiny_pi05_checkpoint))
    s = settings_for("policy.device=cpu", "rollout.model.apxinf.noise_source=observation")
    policy = open_policy(s)
    meta = policy.metadata()
    assert check_metadata(meta, s.model) == [] and meta["n_exec"] == 5 and meta["action_horizon"] == 10
    o = obs(3)
    o["noise"] = np.stack([observation_noise(0, 0, g, 0, 10) for g in range(3)])
    a = policy.predict(o, [])
    b = policy.predict(o, [])
    assert a.shape == (3, 5, 7) and a.dtype == np.float32 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)  # same observation noise -> same actions (deterministic ODE)
    o["noise"] = np.stack([observation_noise(0, 1, g, 0, 10) for g in range(3)])
    assert not np.array_equal(policy.predict(o, []), a)
    policy.close()


def test_observation_noise_is_seeded_per_episode_query():
    a = observation_noise(0, 2, 5, 7, 10)
    assert a.shape == (10, 32) and a.dtype == np.float32
    np.testing.assert_array_equal(a, observation_noise(0, 2, 5, 7, 10))
    assert not np.array_equal(a, observation_noise(0, 2, 5, 8, 10))
    assert not np.array_equal(a, observation_noise(1, 2, 5, 7, 10))


def test_a_cuda_device_on_a_machine_without_cuda_is_a_config_error_naming_the_fix(tiny_pi05_checkpoint, monkeypatch):
    """policy.device=cuda on a CPU machine is a config error (exit 2) naming the key and the fix, not a
    failure inside torch ('pin_memory=True requires a CUDA ... backend', exit 1)."""
    import torch

    from rpent.eval.errors import EvalConfigError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("APXINF_PI05_MODEL_DIR", str(tiny_pi05_checkpoint))
    s = settings_for("policy.device=cuda")
    with pytest.raises(EvalConfigError, match=r"policy.device=cuda but this torch .* sees no CUDA device; "
                                              r"set policy.device=cpu \(or auto\)"):
        open_policy(s)
