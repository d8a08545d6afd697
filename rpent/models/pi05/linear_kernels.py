"""Triton kernels for the few-row linear layers of the action expert and for FP8 activations
(imported only through :mod:`rpent.models.pi05.fused_linear`).

* :func:`rows_linear_kernel` - ``y = x @ W.T`` for M <= 32 rows (the expert's B*H action tokens), W in
  bf16/float32 or FP8 E4M3 with per-output-channel scales (converted to the activation dtype in
  registers), split over K across programs with a deterministic serial reduction by the last program
  of each column block, and an epilogue chosen at compile time: plain store, GeGLU of a fused
  [gate; up] weight, or (``NORM``) the expert's gated residual + adaRMS norm of the whole rows, done by
  the last program of the launch once every column block is stored. One launch replaces cuBLAS + the
  norm kernel (o and down projections) or cuBLAS + the GeGLU kernel (gate/up).
* :func:`quant_rows_kernel` - activations [M, K] -> E4M3 [M, K] + one float32 scale per row
  (``max|x| / 448``) for ``torch._scaled_mm`` (the prefix's FP8 matmuls).

"Last program" coordination: each program stores its partial result, passes a CTA barrier and
increments a counter (``atomic_add``, acquire-release at GPU scope); the program that sees
``count == expected - 1`` reads the others' results (``.cg`` loads: from L2, not the SM's L1), finishes
the work and puts the counter back to 0 for the next launch. The arithmetic order does not depend on
which program finishes last, so the results are deterministic. All math in float32.
"""

from __future__ import annotations

import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # gelu tanh approximation constant sqrt(2/pi)
E4M3_MAX = tl.constexpr(448.0)  # largest finite float8_e4m3fn value


@triton.jit
def _tile_dot(x_ptr, w_ptr, rm, rn, mm, nm, k_lo, k_hi, stride_xm, K, BK: tl.constexpr, acc):
    """acc [BM, BN] += x[rm, k_lo:k_hi] @ w[rn, k_lo:k_hi].T, the weight converted to x's dtype."""
    rk = tl.arange(0, BK)
    for k0 in range(k_lo, k_hi, BK):
        xa = tl.load(x_ptr + rm[:, None] * stride_xm + (k0 + rk)[None, :], mask=mm[:, None], other=0.0)
        wb = tl.load(w_ptr + rn[None, :].to(tl.int64) * K + (k0 + rk)[:, None], mask=nm[None, :], other=0.0)
        acc += tl.dot(xa, wb.to(xa.dtype))
    return acc


@triton.jit
def rows_linear_kernel(
    x_ptr, w_ptr, s_ptr, out_ptr, part_ptr, cnt_ptr,
    res_ptr, gate_ptr, nw_ptr, shift_ptr, xout_ptr, hout_ptr,
    M, N, K, stride_xm, F_OFF, eps,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr, HAS_SCALE: tl.constexpr,
    GEGLU: tl.constexpr, NORM: tl.constexpr, BLOCK_N: tl.constexpr, NORM_ROWS: tl.constexpr = 4,
):
    """Grid (column blocks, SPLIT). Program (j, s) multiplies the M rows of x [M, K] (row stride
    ``stride_xm``) with weight rows [j*BN, +BN) over K range [s*K/SPLIT, +K/SPLIT).

    Weight ``w`` [N_w, K] row-major (bf16/float32, or float8_e4m3fn with ``HAS_SCALE``: scales ``s`` [N_w]
    float32 applied per output column after the K sum). ``GEGLU``: the weight is [gate; up] [2F, K] with
    F = N = ``F_OFF`` and the output is ``gelu_tanh(gate) * up`` [M, F], each half rounded to the output
    dtype first (as the two-kernel reference). ``out`` [M, N] contiguous, output dtype.

    SPLIT > 1: partial sums go to ``part`` float32 [SPLIT, (2 if GEGLU), M, N]; ``cnt`` int32 [column blocks
    (+1 with NORM)] counters, zero between launches. ``NORM``: after ``out`` (= y) is stored, the last
    program of the launch computes, for every row, ``x = res + y * gate`` (rounded to the output dtype,
    stored to ``xout``) and ``h = rmsnorm(x) * nw + shift`` (``hout``), with ``res``, ``xout``, ``hout``
    [M, N] contiguous and ``gate``, ``nw`` (the precomputed 1 + scale), ``shift`` [N]; BLOCK_N >= N; the
    rows are normalised NORM_ROWS at a time.
    """
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rm = tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mm = rm < M
    nm = rn < N
    k_per = K // SPLIT
    k_lo = pid_k * k_per
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc = _tile_dot(x_ptr, w_ptr, rm, rn, mm, nm, k_lo, k_lo + k_per, stride_xm, K, BK, acc)
    if GEGLU:
        acc2 = tl.zeros((BM, BN), dtype=tl.float32)
        acc2 = _tile_dot(x_ptr, w_ptr, rm, rn + F_OFF, mm, nm, k_lo, k_lo + k_per, stride_xm, K, BK, acc2)
    else:
        acc2 = acc
    tile = rm[:, None] * N + rn[None, :]
    tmask = mm[:, None] & nm[None, :]
    last = True
    if SPLIT > 1:
        halves = 2 if GEGLU else 1
        tl.store(part_ptr + (pid_k * halves) * M * N + tile, acc, mask=tmask)
        if GEGLU:
            tl.store(part_ptr + (pid_k * halves + 1) * M * N + tile, acc2, mask=tmask)
        tl.debug_barrier()
        done = tl.atomic_add(cnt_ptr + pid_n, 1)
        last = done == SPLIT - 1
        if last:
            tl.debug_barrier()
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            acc2 = tl.zeros((BM, BN), dtype=tl.float32)
            for s in tl.static_range(SPLIT):
                acc += tl.load(part_ptr + (s * halves) * M * N + tile, mask=tmask, other=0.0, cache_modifier=".cg")
                if GEGLU:
                    acc2 += tl.load(part_ptr + (s * halves + 1) * M * N + tile, mask=tmask, other=0.0,
                                    cache_modifier=".cg")
            tl.atomic_xchg(cnt_ptr + pid_n, 0)
    if last:
        if HAS_SCALE:
            acc = acc * tl.load(s_ptr + rn, mask=nm, other=0.0)[None, :]
            if GEGLU:
                acc2 = acc2 * tl.load(s_ptr + F_OFF + rn, mask=nm, other=0.0)[None, :]
        if GEGLU:
            g = acc.to(out_ptr.dtype.element_ty).to(tl.float32)  # round like the two-kernel reference
            u = acc2.to(out_ptr.dtype.element_ty).to(tl.float32)
            z = 2.0 * SQRT_2_OVER_PI * (g + 0.044715 * g * g * g)
            acc = g * tl.sigmoid(z) * u
        tl.store(out_ptr + tile, acc.to(out_ptr.dtype.element_ty), mask=tmask)
        if NORM:
            tl.debug_barrier()
            n_blocks = tl.num_programs(0)
            done2 = tl.atomic_add(cnt_ptr + n_blocks, 1)
            if done2 == n_blocks - 1:
                tl.debug_barrier()
                offs = tl.arange(0, BLOCK_N)
                cm = offs < N
                gate = tl.load(gate_ptr + offs, mask=cm, other=0.0).to(tl.float32)[None, :]
                nw = tl.load(nw_ptr + offs, mask=cm, other=0.0).to(tl.float32)[None, :]
                sh = tl.load(shift_ptr + offs, mask=cm, other=0.0).to(tl.float32)[None, :]
                for r0 in range(0, M, NORM_ROWS):  # NORM_ROWS rows at a time, all threads busy
                    rr = r0 + tl.arange(0, NORM_ROWS)
                    idx = rr[:, None] * N + offs[None, :]
                    msk = (rr < M)[:, None] & cm[None, :]
                    y = tl.load(out_ptr + idx, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
                    x = tl.load(res_ptr + idx, mask=msk, other=0.0).to(tl.float32)
                    xr = (x + y * gate).to(xout_ptr.dtype.element_ty)
                    tl.store(xout_ptr + idx, xr, mask=msk)
                    xf = xr.to(tl.float32)
                    inv = tl.rsqrt(tl.sum(xf * xf, axis=1) / N + eps)
                    h = xf * inv[:, None] * nw + sh
                    tl.store(hout_ptr + idx, h.to(hout_ptr.dtype.element_ty), mask=msk)
                tl.atomic_xchg(cnt_ptr + n_blocks, 0)


@triton.jit
def _round_e4m3(v):
    """Round float32 values in [-448, 448] to the nearest E4M3 value (ties to even), still as float32:
    the exponent from the bits (at least -6, E4M3's smallest normal; below it the subnormal spacing
    2^-9), the mantissa to 3 bits by the 1.5 * 2^23 trick. The later cast to float8 is then exact."""
    a = tl.abs(v)
    e = tl.maximum((a.to(tl.int32, bitcast=True) >> 23) - 127, -6)
    step = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)  # powers of two: the products are exact
    inv_step = ((127 - (e - 3)) << 23).to(tl.float32, bitcast=True)
    return ((v * inv_step + 12582912.0) - 12582912.0) * step


@triton.jit
def quant_rows_kernel(x_ptr, q_ptr, s_ptr, K, stride_x, BLOCK_K: tl.constexpr):
    """One row per program: ``s = max(max|x|, 1e-12) / 448``, ``q = clamp(x / s)`` rounded to E4M3 (nearest,
    ties to even, as ``torch.Tensor.to(torch.float8_e4m3fn)``), ``s`` stored as float32 [M, 1]. Rows of
    ``x`` start ``stride_x`` apart; ``q`` is [M, K] contiguous."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    m = offs < K
    x = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.math.div_rn(tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12), E4M3_MAX)  # IEEE division, as torch's
    q = _round_e4m3(tl.minimum(tl.maximum(tl.math.div_rn(x, s), -E4M3_MAX), E4M3_MAX))
    tl.store(q_ptr + row * K + offs, q.to(q_ptr.dtype.element_ty), mask=m)
    tl.store(s_ptr + row, s)
