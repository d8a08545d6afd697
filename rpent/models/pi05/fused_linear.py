"""Linear layers of the Gemma stacks: the few-row kernel of the action expert (with its fused
epilogues) and the FP8 paths. :func:`rpent.models.pi05.fused.linear` hands every call here.

Dispatch for ``y = x @ W.T`` with x [.., K] (M rows) and W a weight tensor [N, K] or an
:class:`~rpent.models.pi05.fp8.Fp8Linear`:

* M <= :data:`ROWS_MAX_M` (the expert's B*H action tokens) with the Triton kernels on (op ``rows``):
  :func:`rows_linear_kernel <rpent.models.pi05.linear_kernels.rows_linear_kernel>`, bf16 or FP8 weights,
  split over K so that every SM streams weights, with the GeGLU or the gated-residual + adaRMS epilogue
  (:func:`linear_gated_norm`): per expert layer 6 kernels instead of 10.
* FP8 weight otherwise on CUDA (the prefix; the expert when the few-row kernel is off): per-row E4M3
  activations (one Triton kernel, or the reference) and ``torch._scaled_mm`` with row-wise scales on the
  FP8 tensor cores, bf16 output.
* FP8 weight on the CPU (the references, tests): few rows multiply with the dequantised weight
  (weight-only FP8, what the few-row kernel computes); many rows quantise the activations per row exactly
  as the CUDA path does and multiply in float32.

The few-row kernel is opt-in (``RPENT_PI05_ROWS=1``, op ``rows``): on an H200 it was slower than cuBLAS
for the expert's projections (``benchmarks/vla_bench.py``, variant ``graph_rows``).
* bf16/float32 weight otherwise: cuBLAS (``F.linear``), or the older skinny kernel where
  :func:`rpent.models.pi05.fused.tune_skinny` chose it.

The reference of every fused path is the unfused composition of the same ops; the kernels compute in
float32 and round once per output, so they differ from it by bf16 rounding
(``tests/models/test_pi05_fp8.py`` under ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rpent.models.pi05 import fused
from rpent.models.pi05.fp8 import E4M3_MAX, FP8_DTYPE, Fp8Linear, quantize_rows_reference

#: Largest row count M that :func:`linear` sends to the few-row kernel.
ROWS_MAX_M = 32
#: Column block of the few-row kernel (the smallest tile ``tl.dot`` takes).
ROWS_BN = 16
#: Programs the few-row kernel aims for, per multiprocessor (K is split until the grid is this large).
ROWS_PROGRAMS_PER_SM = 2
_SM_COUNT: dict = {}
_COUNTERS: dict = {}
#: Tests (CPU, interpreter): the K split and K tile to use, so the split/last-program path runs.
TEST_SPLIT = 2
TEST_BK = 16


def _sm_count(device: torch.device) -> int:
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT[device]


def rows_config(m: int, n_out: int, k: int, device: torch.device, fp8: bool) -> tuple[int, int, int, int]:
    """(BK, SPLIT, num_warps, num_stages) of the few-row kernel for x [m, k] and ``n_out`` output columns.

    On CUDA: K tiles of 256 values (FP8) or 128 (bf16), split over K in powers of two while the grid has
    fewer than :data:`ROWS_PROGRAMS_PER_SM` programs per SM and each split keeps at least 2 tiles (at
    most 8 splits).
    On the CPU (interpreter tests): :data:`TEST_BK`, :data:`TEST_SPLIT` where K allows."""
    blocks = -(-n_out // ROWS_BN)
    if device.type != "cuda":
        bk = TEST_BK if k % TEST_BK == 0 else 16
        split = TEST_SPLIT if k % (TEST_SPLIT * bk) == 0 else 1
        return bk, split, 4, 1
    bk = 256 if fp8 else 128
    while k % bk:
        bk //= 2
    split = 1
    target = ROWS_PROGRAMS_PER_SM * _sm_count(device)
    while blocks * split < target and split < 8 and k % (2 * split * bk) == 0 and k // (2 * split) >= 2 * bk:
        split *= 2
    return bk, split, 4, 3


def _counters(key: tuple, n: int, device: torch.device) -> torch.Tensor:
    """int32 [n] counters for one call site (one weight and epilogue), zero between launches: the kernel's
    last program puts them back to 0. Made outside any CUDA graph capture (the warm-up runs first)."""
    t = _COUNTERS.get(key)
    if t is None or t.numel() < n:
        t = torch.zeros(n, dtype=torch.int32, device=device)
        _COUNTERS[key] = t
    return t


def _weight(w) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(w, Fp8Linear):
        return w.qweight, w.scale
    return w, None


def rows_kernel_applies(x: torch.Tensor, w) -> bool:
    """Whether :func:`linear` / :func:`linear_gated_norm` take the few-row kernel for x and w."""
    k = x.shape[-1]
    wt, _ = _weight(w)
    return (x.numel() // k <= ROWS_MAX_M and fused._use(x, "rows") and wt.shape[1] == k and k % 16 == 0
            and (wt.dtype == x.dtype or wt.dtype == FP8_DTYPE) and wt.is_contiguous())


def _rows_launch(x: torch.Tensor, w, geglu_out: bool, norm: tuple | None):
    k = x.shape[-1]
    m = x.numel() // k
    x2 = x.reshape(m, k).contiguous()
    wt, scale = _weight(w)
    n = wt.shape[0] // 2 if geglu_out else wt.shape[0]
    bk, split, warps, stages = rows_config(m, n, k, x.device, scale is not None)
    blocks = -(-n // ROWS_BN)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    part = (torch.empty((split, 2 if geglu_out else 1, m, n), dtype=torch.float32, device=x.device)
            if split > 1 else out)
    cnt = _counters((x.device, wt.data_ptr(), tuple(wt.shape), geglu_out, norm is not None, split), blocks + 1, x.device)
    if norm is not None:
        res, gate, nw, shift, eps = norm
        res2 = res.reshape(m, n).contiguous()
        xout, hout = torch.empty_like(res2), torch.empty_like(res2)
    else:
        res2 = gate = nw = shift = xout = hout = out
        eps = 0.0
    from rpent.models.pi05 import linear_kernels as lk

    lk.rows_linear_kernel[(blocks, split)](
        x2, wt, scale if scale is not None else x2, out, part, cnt, res2, gate, nw, shift, xout, hout,
        m, n, k, x2.stride(0), n, eps,
        BM=max(16, fused._p2(m)), BN=ROWS_BN, BK=bk, SPLIT=split, HAS_SCALE=scale is not None,
        GEGLU=geglu_out, NORM=norm is not None, BLOCK_N=fused._p2(n), num_warps=warps, num_stages=stages)
    shape = (*x.shape[:-1], n)
    if norm is not None:
        return xout.view(res.shape), hout.view(res.shape)
    return out.view(shape)


def quantize_rows(x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (E4M3 [M, K], float32 scales [M, 1]) per row: the Triton kernel on CUDA (op ``fp8quant``),
    else :func:`rpent.models.pi05.fp8.quantize_rows_reference` (same formula, same bits)."""
    m, k = x2.shape
    if fused._use(x2, "fp8quant") and x2.stride(-1) == 1:
        from rpent.models.pi05 import linear_kernels as lk

        q = torch.empty((m, k), dtype=FP8_DTYPE, device=x2.device)
        s = torch.empty((m, 1), dtype=torch.float32, device=x2.device)
        block = fused._p2(k)
        lk.quant_rows_kernel[(m,)](x2, q, s, k, x2.stride(0), BLOCK_K=block, num_warps=8 if block >= 4096 else 4)
        return q, s
    return quantize_rows_reference(x2)


def _fp8_linear(x: torch.Tensor, w: Fp8Linear) -> torch.Tensor:
    """FP8 weight without the few-row kernel (see the module docstring)."""
    k = x.shape[-1]
    m = x.numel() // k
    x2 = x.reshape(m, k)
    cuda = x.is_cuda and x.dtype == torch.bfloat16
    if m <= ROWS_MAX_M and not cuda:  # weight-only FP8: the few-row kernel's arithmetic
        return F.linear(x, w.dequantized(x.dtype))
    xq, xs = quantize_rows(x2.contiguous())
    if cuda:
        y = torch._scaled_mm(xq, w.qweight.t(), scale_a=xs, scale_b=w.scale.view(1, -1), out_dtype=torch.bfloat16)
    else:
        y = ((xq.float() @ w.qweight.float().t()) * xs * w.scale.float()[None, :]).to(x.dtype)
    return y.view(*x.shape[:-1], w.out_features)


def linear(x: torch.Tensor, w, geglu_out: bool = False) -> torch.Tensor:
    """``x @ W.T`` without bias (with ``geglu_out``: ``geglu(x @ W.T)`` of the fused [gate; up] weight),
    W a tensor [N, K] or an :class:`Fp8Linear`; x [.., K] -> [.., N] (or [.., N/2]) in x's dtype."""
    if rows_kernel_applies(x, w):
        return _rows_launch(x, w, geglu_out, None)
    if isinstance(w, Fp8Linear):
        y = _fp8_linear(x, w)
        return fused.geglu(y) if geglu_out else y
    return fused.tensor_linear(x, w, geglu_out)


def linear_gated_norm(res: torch.Tensor, x: torch.Tensor, w, gate: torch.Tensor, scale1p: torch.Tensor,
                      shift: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The expert's projection + gated residual + adaRMS: ``y = x @ W.T`` [.., N], then
    :func:`rpent.models.pi05.fused.gated_add_ada_rms_norm` ``(res, y, gate, scale1p, shift, eps)``; returns
    (new residual, normed), both like ``res`` [.., N]. One launch on the few-row kernel's path."""
    if rows_kernel_applies(x, w) and res.dtype == x.dtype:
        return _rows_launch(x, w, False, (res, gate, scale1p, shift, eps))
    return fused.gated_add_ada_rms_norm(res, linear(x, w), gate, scale1p, shift, eps)


__all__ = ["E4M3_MAX", "ROWS_MAX_M", "linear", "linear_gated_norm", "quantize_rows", "rows_config"]
