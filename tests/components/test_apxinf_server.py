"""The APXInf adapter end to end: a real server subprocess whose L1 backend is the stand-in module
``tests/components/apxinf_standin.py`` (documented hook ``--backend-module``), over both transports.

Covers: metadata, shape handling (256 px views resized to the model's S, uint32 tokens, [H, 32] noise,
first n_exec rows of the first action_dim columns un-normalised), the exact numbers, server noise with a
seed, concurrent clients on the thread-bound handle, per-request config checks, and every start-up error
(missing apxinf_robo with the install instruction, franka, train mode, preset/checkpoint mismatch,
missing norm stats) exiting 2 before binding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from rpent.models.pi05.normalization import NormStats
from rpent.models.pi05.processor import resize_with_pad_u8
from rpent.models.pi05.tiny import tiny_norm_stats, tiny_observation, tiny_tokenizer_bytes
from rpent.models.pi05.tokenizer import PromptTokenizer
from rpent.robots.components.vla_client import VlaClient
from rpent.rpc import RemoteError

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from apxinf_standin import expected_normalized  # noqa: E402

MODULE = "rpent.robots.components.apxinf_vla_server"
IMAGE_SIZE = 64


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    return env


def make_model_dir(root: Path, embodiment: str = "libero", **config) -> Path:
    """An APXInf-style model directory for the stand-in (config.json, placeholder weights, stats, tokenizer)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"num_views": 2, "image_size": IMAGE_SIZE, "max_token_len": 48, **config}))
    save_file({"stand_in": np.zeros(4, dtype=np.float32)}, str(root / "model.safetensors"))  # the stand-in reads none
    dims = {"libero": (8, 7), "yam": (14, 14), "dual_franka": (20, 20)}[embodiment]
    (root / "norm_stats.json").write_text(json.dumps(tiny_norm_stats(*dims)))
    (root / "tokenizer.model").write_bytes(tiny_tokenizer_bytes())
    return root


def start(args: list[str], timeout: float = 60.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", MODULE, "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO)
    line = proc.stdout.readline()
    if not line.startswith("RPC server listening on "):
        proc.wait(timeout)
        raise RuntimeError(f"adapter did not start (rc {proc.returncode}): {line}{proc.stderr.read()}")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    proc.stdout.close()
    proc.stderr.close()


def start_fails(args: list[str]) -> str:
    """Run the adapter expecting a start-up failure; returns stderr (asserts exit 2, no readiness line)."""
    r = subprocess.run([sys.executable, "-m", MODULE, "--port", "0", *args], capture_output=True, text=True,
                       env=_env(), cwd=REPO, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "RPC server listening" not in r.stdout
    return r.stderr


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("apxinf") / "pi05_libero")


@pytest.fixture(scope="module", params=["http", "socket"])
def adapter(request, model_dir):
    proc, ep = start(["--embodiment", "libero", "--model-path", str(model_dir), "--tokenizer-path", str(model_dir / "tokenizer.model"),
                      "--norm-stats-path", str(model_dir / "norm_stats.json"), "--precision", "bf16",
                      "--backend-module", "apxinf_standin", "--transport", request.param])
    yield ep
    stop(proc)


def expected_actions(model_dir: Path, obs: dict) -> np.ndarray:
    """What the adapter must return for ``obs`` (with observation noise), computed independently of it."""
    stats = NormStats.load(model_dir / "norm_stats.json")
    tok = PromptTokenizer(model_dir / "tokenizer.model")
    out = []
    for i, task in enumerate(obs["task_descriptions"]):
        views = np.stack([obs["main_images"][i], obs["wrist_images"][i]])
        rgb = resize_with_pad_u8(views, IMAGE_SIZE)
        norm = expected_normalized(rgb, tok.tokenize(task).astype(np.uint32), obs["noise"][i])
        out.append(stats.actions.unnormalize(norm[:5, :7]))
    return np.stack(out).astype(np.float32)


def test_metadata_and_exact_actions(adapter, model_dir):
    with VlaClient(adapter) as vla:
        meta = vla.metadata()
        assert {k: meta[k] for k in ("embodiment", "action_dim", "action_horizon", "n_exec", "num_flow_steps", "num_views",
                                     "image_size", "backend", "precision", "max_token_len")} == {
            "embodiment": "libero", "action_dim": 7, "action_horizon": 10, "n_exec": 5, "num_flow_steps": 5, "num_views": 2,
            "image_size": IMAGE_SIZE, "backend": "apxinf", "precision": "bf16", "max_token_len": 48}
        obs = tiny_observation("libero", 3, image_size=256, seed=2)  # 256 px views: resized to 64 by the adapter
        obs["noise"] = np.random.default_rng(5).standard_normal((3, 10, 32)).astype(np.float32)
        a = vla.predict(obs)
        assert a.shape == (3, 5, 7) and a.dtype == np.float32
        np.testing.assert_allclose(a, expected_actions(model_dir, obs), rtol=1e-5, atol=1e-5)
        small = tiny_observation("libero", 1, image_size=IMAGE_SIZE, seed=3)  # already S x S: sent as is
        small["noise"] = np.zeros((1, 10, 32), dtype=np.float32)
        np.testing.assert_allclose(vla.rpc.call("predict", small), expected_actions(model_dir, small), rtol=1e-5, atol=1e-5)


def test_server_noise_seed_and_config_checks(adapter):
    obs = tiny_observation("libero", 2, seed=1)
    with VlaClient(adapter) as vla:
        s1, s2 = vla.predict(obs, {"seed": 11}), vla.predict(obs, {"seed": 11})
        s3 = vla.predict(obs, {"seed": 12})
        np.testing.assert_array_equal(s1, s2)
        assert np.abs(s1 - s3).max() > 1e-4
        with pytest.raises(RemoteError) as e:
            vla.predict(obs, {"num_flow_steps": 10})
        assert e.value.remote_type.endswith("ConfigCheckError") and "--num-flow-steps 10" in e.value.remote_message
        bad = dict(obs, noise=np.zeros((2, 9, 32), dtype=np.float32))
        with pytest.raises(RemoteError, match=r"'noise' must be float32 \[B=2, 10, 32\]"):
            vla.predict(bad)
        with pytest.raises(RemoteError, match=r"observation lacks 'wrist_images'"):
            vla.predict({k: v for k, v in obs.items() if k != "wrist_images"})


def test_concurrent_clients_on_the_thread_bound_handle(adapter, model_dir):
    results, errors = {}, []

    def client(i):
        try:
            obs = tiny_observation("libero", 1, image_size=IMAGE_SIZE, seed=20 + i)
            obs["noise"] = np.random.default_rng(i).standard_normal((1, 10, 32)).astype(np.float32)
            with VlaClient(adapter) as vla:
                results[i] = (vla.predict(obs), expected_actions(model_dir, obs))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not errors, errors
    assert len(results) == 6
    for got, want in results.values():
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_start_up_errors_exit_2_with_the_fix(model_dir, tmp_path):
    base = ["--model-path", str(model_dir), "--backend-module", "apxinf_standin"]
    err = start_fails(["--model-path", str(model_dir)])  # the real apxinf_robo is not installed here
    assert "cannot import 'apxinf_robo'" in err and "APXinf-robo install guide" in err
    assert "not supported by the APXInf adapter" in start_fails(base + ["--embodiment", "franka"])
    assert "eval (inference) only" in start_fails(base + ["--mode", "train"])
    yam = make_model_dir(tmp_path / "yam_on_2_views", "yam")
    err = start_fails(["--model-path", str(yam), "--backend-module", "apxinf_standin", "--embodiment", "yam"])
    assert "active camera views 3" in err and "expects 2" in err and "match --embodiment" in err
    ten = make_model_dir(tmp_path / "ten_steps", num_steps=10)
    assert "must match the ApxInf model's num_steps (10)" in start_fails(["--model-path", str(ten), "--backend-module", "apxinf_standin"])
    err = start_fails(base + ["--norm-stats-path", str(tmp_path / "none.json")])
    assert "norm stats" in err and "not found" in err
    assert "must be at least the number of executed actions" in start_fails(base + ["--action-horizon", "4"])
    cut = make_model_dir(tmp_path / "truncated")
    data = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[:-10])
    err = start_fails(["--model-path", str(cut), "--backend-module", "apxinf_standin"])
    assert f"weight file {cut / 'model.safetensors'} cannot be loaded: truncated" in err
    assert "copy or download the file again" in err and "Traceback" not in err
