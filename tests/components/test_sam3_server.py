"""The SAM3 server: start-up errors, request validation, top-candidate selection and mask encoding over a
real server subprocess with a stand-in predictor (``tests/components/sam3_standin.py`` through the
documented ``--predictor-factory`` hook), and the toolkit's ``segment`` tool against that server and a
real LIBERO env server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rpent.rpc import RemoteError, RpcClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from sam3_standin import text_blocks  # noqa: E402

MODULE = [sys.executable, "-m", "rpent.robots.components.sam3_server"]
STANDIN = ["--predictor-factory", "sam3_standin:make_predictor"]


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("SAM3_CHECKPOINT_PATH", None)
    env.update(extra)
    return env


def start_fails(args: list[str], **env) -> str:
    """Run the server expecting a start-up failure; returns stderr (asserts exit 2 and nothing bound)."""
    r = subprocess.run(MODULE + ["--port", "0", *args], capture_output=True, text=True, env=_env(**env), cwd=REPO, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "RPC server listening" not in r.stdout
    return r.stderr


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("sam3") / "sam3.pt"
    p.write_bytes(b"placeholder checkpoint for the stand-in predictor")
    return p


@pytest.fixture(scope="module", params=["http", "socket"])
def sam3(request, checkpoint, start_rpc_server):
    sp = start_rpc_server(MODULE + STANDIN + ["--transport", request.param, "--port", "0"],
                          env=_env(SAM3_CHECKPOINT_PATH=str(checkpoint)))
    client = RpcClient(sp.endpoint, timeout=30)
    yield client
    client.close()
    sp.stop()


def decode(reply: dict) -> np.ndarray:
    h, w = reply["mask_shape"]
    return np.unpackbits(np.asarray(reply["mask_bits"], dtype=np.uint8))[: h * w].reshape(h, w).astype(bool)


def test_a_damaged_checkpoint_is_a_named_error_and_exit_2(tmp_path):
    import torch

    whole = tmp_path / "whole.pt"
    torch.save({"w": torch.zeros(1000)}, whole)
    data = whole.read_bytes()
    for name, content in (("truncated.pt", data[: len(data) // 2]), ("empty.pt", b""),
                          ("garbage.safetensors", os.urandom(2000))):
        bad = tmp_path / name
        bad.write_bytes(content)
        err = start_fails(STANDIN + ["--checkpoint", str(bad)])
        assert f"weight file {bad} cannot be loaded" in err and "copy or download the file again" in err, err
        assert "Traceback" not in err


def test_start_up_errors(checkpoint, tmp_path):
    err = start_fails(STANDIN)
    assert "SAM3 checkpoint not found" in err and "set SAM3_CHECKPOINT_PATH" in err
    missing = tmp_path / "nope.pt"
    err = start_fails(STANDIN + ["--checkpoint", str(missing)])
    assert f"SAM3 checkpoint not found: {missing}" in err
    assert "must be 'module:function'" in start_fails(["--predictor-factory", "sam3_standin"], SAM3_CHECKPOINT_PATH=str(checkpoint))


def test_no_cuda_device_is_a_start_up_error(checkpoint):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device: the default predictor would try to load the real model")
    err = start_fails([], SAM3_CHECKPOINT_PATH=str(checkpoint))  # default factory: Meta's sam3
    assert "local SAM3 requires a CUDA-capable GPU" in err


def test_top_candidate_and_mask_encoding(sam3):
    img = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)
    r = sam3.call("sam3.segment", img, text_prompt="alphabet soup")
    assert r["found"] and r["score"] == pytest.approx(0.9) and r["mask_shape"] == [96, 128]
    assert r["mask_bits"].dtype == np.uint8 and r["mask_bits"].size == 96 * 128 // 8
    mask = decode(r)
    np.testing.assert_array_equal(mask, text_blocks(96, 128)[1])  # the top-scoring one, bit-exact, row-major
    assert r["box"] == [64, 48, 95, 71]
    p = sam3.call("sam3.segment", img, point=[10, 2], min_score=0.5)
    assert p["found"] and p["score"] == pytest.approx(0.8)
    assert p["box"] == [0, 7, 5, 13] and decode(p).sum() == 6 * 7
    assert sam3.call("sam3.metadata")["predictor"] == "StandInPredictor"


def test_not_found_reasons(sam3):
    img = np.zeros((32, 32, 3), dtype=np.uint8)
    assert sam3.call("sam3.segment", img, text_prompt="nothing") == {"found": False, "reason": "SAM3 returned no candidate"}
    r = sam3.call("sam3.segment", img, text_prompt="faint", min_score=0.5)
    assert r["found"] is False and r["reason"] == "top score 0.100 below min_score 0.500"
    assert sam3.call("sam3.segment", img, text_prompt="faint", min_score=0.05)["found"]
    r = sam3.call("sam3.segment", img, text_prompt="hollow")
    assert r["found"] is False and r["reason"] == "empty mask"


@pytest.mark.parametrize("kwargs,needle", [
    ({}, "segment needs exactly one of prompt or point"),
    ({"text_prompt": "bowl", "point": [1, 1]}, "segment needs exactly one of prompt or point"),
    ({"text_prompt": "  "}, "text_prompt must be a non-empty str"),
    ({"point": [40, 3]}, "out of bounds for a 32x32 image"),
    ({"point": [1.5, 3]}, "point must be [row, col] integer pixels"),
    ({"text_prompt": "bowl", "min_score": 1.5}, "min_score must be a number in [0, 1]"),
])
def test_bad_requests_name_the_problem(sam3, kwargs, needle):
    with pytest.raises(RemoteError) as e:
        sam3.call("sam3.segment", np.zeros((32, 32, 3), dtype=np.uint8), **kwargs)
    assert e.value.remote_type.endswith("ValueError") and needle in e.value.remote_message


def test_bad_image_is_rejected(sam3):
    with pytest.raises(RemoteError, match=r"image must be a uint8 \[H, W, 3\] RGB array, got float32 \[8, 8, 3\]"):
        sam3.call("sam3.segment", np.zeros((8, 8, 3), dtype=np.float32), text_prompt="bowl")
    with pytest.raises(RemoteError, match=r"image must be a uint8 \[H, W, 3\]"):
        sam3.call("sam3.segment", np.zeros((8, 8), dtype=np.uint8), text_prompt="bowl")


@pytest.fixture(scope="module")
def env_endpoint(start_rpc_server):
    sp = start_rpc_server([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", "libero_object", "--task", "0",
                           "--seed", "0", "--port", "0"], timeout=120)
    yield sp.endpoint
    sp.stop()


def test_toolkit_segment_tool_uses_the_sam3_server(env_endpoint, sam3, tmp_path, free_port):
    from rpent.robots.libero.env_client import EnvClient
    from rpent.robots.libero.toolkit import LiberoToolkit
    from rpent.run.record import RunRecord

    env = EnvClient(env_endpoint)
    env.reset()
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s0"), sam3=sam3, video=False)
    try:
        r = tk.execute("segment", {"prompt": "alphabet soup"})
        assert "error" not in r, r
        assert r["found"] and r["source"] == "sam3" and r["score"] == pytest.approx(0.9)
        h = w = 256  # the recorded low-resolution agentview image
        assert r["box"] == [w // 2, h // 2, 3 * w // 4 - 1, 3 * h // 4 - 1]
        assert r["pixel_count"] == (h // 4) * (w // 4) and len(r["world_xyz"]) == 3
        assert (tk.record.dir / "segment_overlay_00.png" / "00.png").exists()
        p = tk.execute("segment", {"point": [100, 120]})
        assert p["found"] and p["box"] == [117, 97, 123, 103]
        miss = tk.execute("segment", {"prompt": "nothing"})
        assert miss["found"] is False and miss["reason"] == "SAM3 returned no candidate" and miss["source"] == "sam3"
        low = tk.execute("segment", {"prompt": "faint", "min_score": 0.5})
        assert low["found"] is False and low["reason"] == "top score 0.100 below min_score 0.500"
        tk.sam3 = RpcClient(f"http://127.0.0.1:{free_port}", timeout=5)  # the service is gone: a result with a fallback
        down = tk.execute("segment", {"prompt": "alphabet soup"})
        assert "SAM3 service failed" in down["error"] and "back_project" in down["fallback"]
        tk.sam3.close()
    finally:
        tk.close()
        env.close()
