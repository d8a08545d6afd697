"""FP8 (E4M3, per-channel) Pi0.5 weights on the CPU: quantisation bounds, the FP8 checkpoint on disk and
its loading, the named refusal without FP8 tensor cores, the tiny model's parity against float32, and
the Triton kernels of the few-row linear layers and of the FP8 activations under ``TRITON_INTERPRET=1``
against their references. The FP8 matmul itself (``torch._scaled_mm``) needs a GPU: it runs in
``benchmarks/vla_bench.py --precision fp8`` with its parity figures.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from rpent.models.pi05 import fused  # noqa: E402
from rpent.models.pi05.checkpoint import LANG, config_from_checkpoint, load_checkpoint_tensors  # noqa: E402
from rpent.models.pi05.config import tiny_config  # noqa: E402
from rpent.models.pi05.fp8 import (  # noqa: E402
    E4M3_MAX,
    FP8_DTYPE,
    FP8_FORMAT,
    SCALE_SUFFIX,
    Fp8Linear,
    Fp8NotSupportedError,
    check_fp8_device,
    convert_checkpoint,
    dequantize,
    quantize_per_channel,
    quantize_rows_reference,
    quantized_keys,
)
from rpent.models.pi05.model import Pi05Model  # noqa: E402
from rpent.models.pi05.policy import Pi05Policy  # noqa: E402
from rpent.models.pi05.tiny import build_tiny_checkpoint, tiny_observation  # noqa: E402

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
triton_only = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                                 reason="Triton kernels need a GPU or TRITON_INTERPRET=1")


@pytest.fixture
def rows_kernel():
    """The few-row kernel is opt-in (RPENT_PI05_ROWS=1): on for the test's duration."""
    was_off = "rows" in fused._DISABLED_OPS
    fused.disable_op("rows", False)
    yield
    fused.disable_op("rows", was_off)


def rel(a, b):
    a, b = a.float(), b.float()
    assert torch.isfinite(a).all()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def both(fn, *args):
    """(Triton result, reference result) of ``fn(*args)``."""
    fused.force_on_cpu(True)
    try:
        a = fn(*args)
    finally:
        fused.force_on_cpu(False)
    return a, fn(*args)


# --------------------------------------------------------------------------- quantisation


def test_per_channel_quantisation_bounds_and_range():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 96, generator=g) * torch.logspace(-3, 2, 64)[:, None]  # rows over 5 decades
    w[7] = 0.0
    q, s = quantize_per_channel(w)
    assert q.dtype == FP8_DTYPE and s.dtype == torch.float32 and s.shape == (64,)
    deq = dequantize(q, s)
    # every row uses the full E4M3 range: its largest |value| maps to 448 exactly
    amax = q.float().abs().amax(1)
    assert torch.all(amax[torch.arange(64) != 7] == E4M3_MAX)
    # 3 mantissa bits: |error| <= 2^-4 relative for normals, half the subnormal spacing (2^-10 * scale) below
    bound = torch.maximum(w.abs() * 2.0 ** -4, s[:, None] * 2.0 ** -10) * (1 + 1e-6)
    assert torch.all((deq - w).abs() <= bound)
    assert torch.all(q[7].float() == 0) and s[7] == 1.0  # an all-zero row: scale 1, no division by zero
    assert 0 < rel(deq, w) < 0.05


@triton_only
def test_activation_quantisation_kernel_is_bit_exact():
    """The Triton kernel rounds to E4M3 exactly as torch's cast does (round to nearest, ties to even)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 80, generator=g) * torch.logspace(-4, 3, 37)[:, None]
    x[3] = 0.0
    from rpent.models.pi05 import fused_linear

    (q, s), (q_ref, s_ref) = both(fused_linear.quantize_rows, x)
    assert q.dtype == FP8_DTYPE and s.shape == (37, 1)
    assert torch.equal(s, s_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


def test_fp8_is_refused_without_fp8_tensor_cores():
    with pytest.raises(Fp8NotSupportedError, match=r"FP8 tensor cores.*the model is on cpu: use --precision bf16"):
        check_fp8_device("cpu")


# --------------------------------------------------------------------------- checkpoints


def _safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_convert_writes_an_fp8_checkpoint_that_loads_both_ways(tmp_path, layout):
    src = build_tiny_checkpoint(tmp_path / "src", layout=layout)
    dst = convert_checkpoint(src, tmp_path / "fp8", device="cpu", log=lambda s: None)
    cfg = tiny_config()
    header = _safetensors_header(dst / "model.safetensors")
    keys = quantized_keys(cfg)
    assert len(keys) == 7 * (cfg.backbone.depth + cfg.expert.depth)
    for k in keys:
        assert header[k]["dtype"] == "F8_E4M3"
        assert header[k + SCALE_SUFFIX]["dtype"] == "F32" and header[k + SCALE_SUFFIX]["shape"] == header[k]["shape"][:1]
    assert header[LANG + "embed_tokens.weight"]["dtype"] == "BF16"
    conf = json.loads((dst / "config.json").read_text())
    assert conf["quantization"]["format"] == FP8_FORMAT
    assert (dst / "norm_stats.json").read_bytes() == (src / "norm_stats.json").read_bytes()
    assert (dst / "tokenizer.model").is_file()
    assert not list(dst.glob("*.partial"))
    # FP8 values as stored: the per-channel quantisation of the source weights (read in bf16)
    orig, _ = load_checkpoint_tensors(src, config_from_checkpoint(src), "cpu", torch.bfloat16)
    stored, _ = load_checkpoint_tensors(dst, config_from_checkpoint(dst), "cpu", torch.float32, fp8=True)
    k = keys[3]
    q, s = quantize_per_channel(orig[k])
    assert stored[k].dtype == FP8_DTYPE and torch.equal(stored[k].view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(stored[k + SCALE_SUFFIX], s)
    # served without FP8: dequantised once, scale entries gone, every tensor float32
    plain, _ = load_checkpoint_tensors(dst, config_from_checkpoint(dst), "cpu", torch.float32)
    assert not any(n.endswith(SCALE_SUFFIX) for n in plain) and all(t.dtype == torch.float32 for t in plain.values())
    assert torch.equal(plain[k], dequantize(q, s))
    # the same bytes on disk: the FP8 file is smaller than the float32 tiny source
    assert (dst / "model.safetensors").stat().st_size < (src / "model.safetensors").stat().st_size
    with pytest.raises(FileExistsError, match="exists; convert into an empty directory"):
        convert_checkpoint(src, dst, device="cpu")


def test_convert_cli_refuses_an_incomplete_checkpoint(tmp_path):
    src = build_tiny_checkpoint(tmp_path / "src", with_norm_stats=False)
    run = subprocess.run([sys.executable, "-m", "rpent.models.pi05.fp8", str(src), str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 2 and "fp8 convert:" in run.stderr and "norm_stats.json" in run.stderr
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_unknown_quantisation_format_is_refused(tmp_path):
    d = build_tiny_checkpoint(tmp_path / "c")
    conf = json.loads((d / "config.json").read_text())
    conf["quantization"] = {"format": "gptq-int4"}
    (d / "config.json").write_text(json.dumps(conf))
    with pytest.raises(Exception, match="quantization format 'gptq-int4'"):
        load_checkpoint_tensors(d, tiny_config(), "cpu", torch.float32)


def test_policy_reads_an_fp8_checkpoint_and_refuses_fp8_on_the_cpu(tmp_path):
    src = build_tiny_checkpoint(tmp_path / "src")
    dst = convert_checkpoint(src, tmp_path / "fp8", device="cpu", log=lambda s: None)
    lines = []
    pol = Pi05Policy.from_checkpoint(dst, device="cpu", use_cuda_graphs=False, log=lines.append)  # auto: float32 here
    assert pol.metadata()["precision"] == "float32" and any("openpi-layout FP8 weights to cpu (float32)" in s for s in lines)
    out = pol.predict(tiny_observation("libero", 2, 64, seed=3), {"seed": 0})
    ref = Pi05Policy.from_checkpoint(src, device="cpu", use_cuda_graphs=False, log=lambda s: None)
    base = ref.predict(tiny_observation("libero", 2, 64, seed=3), {"seed": 0})
    assert out.shape == base.shape == (2, 5, 7) and np.isfinite(out).all()
    assert 0 < np.abs(out - base).max() < 0.25 * np.abs(base).max()
    with pytest.raises(Fp8NotSupportedError, match="use --precision bf16"):
        Pi05Policy.from_checkpoint(dst, device="cpu", precision="fp8", log=lambda s: None)


# --------------------------------------------------------------------------- the model


def _inputs(cfg, b=2, t=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = cfg.vision.image_size
    return (torch.rand(b, 2, 3, s, s, generator=g) * 2 - 1, torch.randint(5, 300, (b, t), generator=g),
            torch.randn(b, cfg.action_horizon, 32, generator=g))


def test_fp8_model_parity_against_float32_in_normalised_actions():
    """Same random draw, the Gemma projections in FP8 (CPU emulation of the CUDA arithmetic): the action
    chunks move by little, and not by nothing (the FP8 weights are really used)."""
    cfg = tiny_config().replace(action_horizon=10, num_flow_steps=3)
    ref = Pi05Model.random(cfg, "cpu", torch.float32, seed=0)
    m8 = Pi05Model.random(cfg, "cpu", torch.float32, seed=0, fp8=True)
    assert m8.precision == "fp8" and isinstance(m8.expert.layers[0].down, Fp8Linear)
    assert isinstance(m8.backbone.layers[1].qkv, Fp8Linear) and m8.vision.layers[0].qkv.weight.dtype == torch.float32
    x = _inputs(cfg)
    a, b = ref.sample_actions(*x), m8.sample_actions(*x)
    diff = (a - b).abs()
    assert 1e-5 < diff.mean().item() < 0.02 and diff.max().item() < 0.05 * a.abs().max().item()


# --------------------------------------------------------------------------- kernels


@triton_only
@pytest.mark.parametrize("rows", [1, 10, 20, 32])
@pytest.mark.parametrize("kind", ["float32", "fp8"])
def test_few_row_kernel_matches_its_reference(rows, kind, rows_kernel):
    """Plain, GeGLU and gated-residual + adaRMS epilogues, split over K (last-program reduction)."""
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(1, rows, 64, generator=g)
    w = torch.randn(96, 64, generator=g)
    wo = torch.randn(48, 64, generator=g)
    if kind == "fp8":
        w, wo = Fp8Linear.from_weight(w), Fp8Linear.from_weight(wo)
    a, b = both(fused.linear, x, w)
    assert a.shape == (1, rows, 96) and rel(a, b) < 1e-5
    a, b = both(lambda *t: fused.linear(*t, geglu_out=True), x, w)
    assert a.shape == (1, rows, 48) and rel(a, b) < 1e-5
    res = torch.randn(1, rows, 48, generator=g)
    gate, sc, sh = (torch.randn(48, generator=g) for _ in range(3))
    (xa, ha), (xb, hb) = both(fused.linear_gated_norm, res, x, wo, gate, sc, sh, 1e-6)
    assert xa.shape == ha.shape == res.shape and rel(xa, xb) < 1e-5 and rel(ha, hb) < 1e-5
    # a second launch finds the counters back at zero (same results again)
    (xc, hc), _ = both(fused.linear_gated_norm, res, x, wo, gate, sc, sh, 1e-6)
    assert torch.equal(xa, xc) and torch.equal(ha, hc)


@triton_only
@pytest.mark.parametrize("fp8", [False, True])
def test_whole_tiny_model_with_the_kernels_on_and_off(fp8, rows_kernel):
    cfg = tiny_config().replace(action_horizon=4, num_flow_steps=2)
    model = Pi05Model.random(cfg, "cpu", torch.float32, seed=2, fp8=fp8)
    x = _inputs(cfg, b=1, t=5, seed=4)
    a, b = both(model.sample_actions, *x)
    assert rel(a, b) < 1e-4
