"""The Triton kernels of rpent.models.pi05.fused against their PyTorch references, run on the CPU with
``TRITON_INTERPRET=1`` (the same kernels the CUDA graph replays on the GPU), plus the whole tiny model with
every kernel on vs off. Skipped where Triton is not installed (it ships with CUDA builds of PyTorch;
on a CPU machine: ``pip install triton``).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from rpent.models.pi05 import fused  # noqa: E402
from rpent.models.pi05.config import tiny_config  # noqa: E402
from rpent.models.pi05.model import Pi05Model  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                                reason="Triton kernels need a GPU or TRITON_INTERPRET=1")


@pytest.fixture
def triton_on():
    """Run the ops through the Triton kernels (interpreted on CPU tensors) for the test's duration."""
    assert fused.available(), "triton is importable but rpent.models.pi05.triton_kernels failed to import"
    fused.force_on_cpu(True)
    yield
    fused.force_on_cpu(False)


def both(fn, *args):
    """(triton result, reference result) of ``fn(*args)``; tensors are cloned per run."""
    fused.force_on_cpu(True)
    a = fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in args])
    fused.force_on_cpu(False)
    b = fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in args])
    return a, b


def close(a, b, tol):
    a, b = a.float(), b.float()
    assert torch.isfinite(a).all()
    err = (a - b).norm() / b.norm().clamp_min(1e-12)
    assert err < tol, f"relative error {err:.2e} >= {tol}"


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_norms(dtype, tol, triton_on):
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(3, 5, 48, generator=g).to(dtype) for _ in range(2))
    w, sc, sh, gate = (torch.randn(48, generator=g).to(dtype) for _ in range(4))
    close(*both(fused.rms_norm, x, w, 1e-6), tol)
    close(*both(fused.ada_rms_norm, x, sc, sh, 1e-6), tol)
    (x1, h1), (x2, h2) = both(fused.add_rms_norm, x, y, w, 1e-6)
    close(x1, x2, tol), close(h1, h2, tol)
    (x1, h1), (x2, h2) = both(fused.gated_add_ada_rms_norm, x, y, gate, sc, sh, 1e-6)
    close(x1, x2, tol), close(h1, h2, tol)


@pytest.mark.parametrize("nq", [3, 0])
def test_rope_qkv_writes_queries_and_exactly_the_cache_rows(nq, triton_on):
    g = torch.Generator().manual_seed(1)
    b, l, d, start, total = 2, 7, 16, 4, 13
    qkv = torch.randn(b, l, (nq + 2) * d, generator=g)
    rope = fused.rope_tables(torch.randint(0, 50, (b, l), generator=g), d, 10000.0)
    out = []
    for force in (True, False):
        fused.force_on_cpu(force)
        cache = torch.full((2, b, 1, total, d), float("nan"))
        q = fused.rope_qkv_to_cache(qkv, rope, nq, cache[0, :, 0, start:start + l], cache[1, :, 0, start:start + l])
        out.append((q, cache))
    (q1, c1), (q2, c2) = out
    assert torch.isnan(c1[:, :, :, :start]).all() and torch.isnan(c1[:, :, :, start + l:]).all()  # nothing else touched
    assert torch.isfinite(c1[:, :, :, start:start + l]).all()  # every target element written
    torch.testing.assert_close(c1[:, :, :, start:start + l], c2[:, :, :, start:start + l], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c1[1, :, 0, start:start + l], qkv[..., -d:])  # V copied unrotated
    if nq:
        assert q1.shape == (b, l, nq, d)
        torch.testing.assert_close(q1, q2, rtol=1e-5, atol=1e-5)
    else:
        assert q1 is None and q2 is None


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_geglu(dtype, tol, triton_on):
    x = torch.randn(4, 3, 2 * 40, generator=torch.Generator().manual_seed(2)).to(dtype) * 2
    a, b = both(fused.geglu, x)
    assert a.shape == (4, 3, 40)
    close(a, b, tol)


@pytest.mark.parametrize("masked", [False, True])
def test_decode_attention_over_several_splits(masked, triton_on):
    g = torch.Generator().manual_seed(3)
    b, lq, h, d, lk = 2, 5, 2, 16, 2 * fused.ATTN_KEYS_PER_SPLIT + 37  # 3 key splits, the last one partial
    q = torch.randn(b, lq, h, d, generator=g)
    k, v = torch.randn(b, 1, lk, d, generator=g), torch.randn(b, 1, lk, d, generator=g)
    mask = None
    if masked:
        mask = torch.rand(b, lk, generator=g) > 0.5
        mask[:, -3:] = True
        mask[0, : fused.ATTN_KEYS_PER_SPLIT] = False  # a whole split without any valid key
        mask = mask[:, None, None, :]
    a, ref = both(fused.mqa_decode_attention, q, k, v, mask)
    assert a.shape == (b, lq, h * d)
    close(a, ref, 1e-5)
    # bf16 operands: the interpreter's bf16 tl.dot is wrong (numpy has no bf16 matmul), so bf16 attention is
    # checked on the GPU by benchmarks/vla_bench.py (kernels on vs off, max |diff| in normalised actions)


@pytest.mark.parametrize("masked", [False, True])
def test_whole_tiny_model_kernels_on_vs_off(masked):
    cfg = tiny_config(action_horizon=4, num_flow_steps=2)
    model = Pi05Model.random(cfg, seed=0)
    g = torch.Generator().manual_seed(4)
    images = torch.rand(2, 2, 3, 56, 56, generator=g) * 2 - 1
    ids = torch.randint(3, 300, (2, 9), generator=g)
    noise = torch.randn(2, 4, 32, generator=g)
    mask = None
    if masked:
        mask = torch.ones(2, 9, dtype=torch.bool)
        mask[1, 6:] = False
    fused.force_on_cpu(True)
    try:
        on = model.sample_actions(images, ids, noise, mask)
    finally:
        fused.force_on_cpu(False)
    off = model.sample_actions(images, ids, noise, mask)
    assert on.shape == (2, 4, 32)
    torch.testing.assert_close(on, off, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_layer_norms(dtype, tol, triton_on):
    g = torch.Generator().manual_seed(3)
    x, y = (torch.randn(2, 7, 40, generator=g).to(dtype) * 3 + 1 for _ in range(2))  # width 40: a masked tail
    w, b = (torch.randn(40, generator=g).to(dtype) for _ in range(2))
    close(*both(fused.layer_norm, x, w, b, 1e-6), tol)
    (x1, h1), (x2, h2) = both(fused.add_layer_norm, x, y, w, b, 1e-6)
    close(x1, x2, tol), close(h1, h2, tol)


@pytest.mark.parametrize("rows", [1, 10, 20])
def test_skinny_linear_and_its_geglu_epilogue(rows, triton_on):
    """The weight-streaming kernel for few rows (float32: the interpreter has no bf16 dot), plain and
    with the GeGLU of a fused [gate; up] weight, against F.linear (+ the reference GeGLU)."""
    fused.disable_op("skinny", False)
    rows_off = "rows" in fused._DISABLED_OPS
    fused.disable_op("rows")  # the opt-in few-row kernel would take these shapes first (tests/models/test_pi05_fp8.py)
    try:
        g = torch.Generator().manual_seed(rows)
        x = torch.randn(1, rows, 64, generator=g)
        w = torch.randn(96, 64, generator=g)
        close(*both(fused.linear, x, w), 1e-5)
        a, b = both(lambda *t: fused.linear(*t, geglu_out=True), x, w)
        assert a.shape == (1, rows, 48)
        close(a, b, 1e-5)
    finally:
        fused.disable_op("skinny", True)
        fused.disable_op("rows", rows_off)
