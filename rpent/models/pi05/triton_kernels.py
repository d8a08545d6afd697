"""Triton kernels for Pi0.5 inference on CUDA (imported only through :mod:`rpent.models.pi05.fused`).

Each kernel replaces a chain of small PyTorch kernels inside the CUDA graph (fewer launches, fewer
passes over memory); the math is the one documented in :mod:`rpent.models.pi05.fused`, where every
kernel has a plain-PyTorch reference. All kernels read bf16/fp32, compute in float32 and write the
output dtype. Requires ``triton`` (it ships with CUDA builds of PyTorch); the tests run the same kernels
on the CPU under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # gelu tanh approximation constant sqrt(2/pi)


@triton.jit
def norm_kernel(x_ptr, y_ptr, gate_ptr, w_ptr, shift_ptr, xout_ptr, h_ptr, D, eps,
                HAS_RES: tl.constexpr, HAS_GATE: tl.constexpr, HAS_SHIFT: tl.constexpr, BLOCK_D: tl.constexpr):
    """One row per program: optional residual ``x + y (* gate)`` (written, rounded to the output dtype),
    then RMSNorm statistics in fp32 and ``h = x_hat * w (+ shift)``. Rows are contiguous [M, D]."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    m = offs < D
    x = tl.load(x_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
    if HAS_RES:
        y = tl.load(y_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
        if HAS_GATE:
            y = y * tl.load(gate_ptr + offs, mask=m, other=0.0).to(tl.float32)
        xr = (x + y).to(xout_ptr.dtype.element_ty)
        tl.store(xout_ptr + row * D + offs, xr, mask=m)
        x = xr.to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
    h = x * inv * tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if HAS_SHIFT:
        h = h + tl.load(shift_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * D + offs, h.to(h_ptr.dtype.element_ty), mask=m)


@triton.jit
def rope_qkv_kernel(qkv_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, v_ptr, L, stride_row,
                    k_sb, k_sl, v_sb, v_sl,
                    NQ: tl.constexpr, HALF: tl.constexpr, NH_P2: tl.constexpr):
    """One token per program. Input row: NQ query heads, then K, then V (head dim 2*HALF each).
    Queries and K are rotated (HF ``rotate_half``: [x1*c - x2*s, x2*c + x1*s]); V is copied.
    Q goes to ``q`` [tokens, NQ, 2*HALF] (contiguous); K/V rows go to strided cache views [B, L, 2*HALF]."""
    pid = tl.program_id(0).to(tl.int64)
    b = pid // L
    t = pid % L
    h = tl.arange(0, NH_P2)[:, None]
    c = tl.arange(0, HALF)[None, :]
    hm = h < NQ + 2
    src = qkv_ptr + pid * stride_row + h * (2 * HALF)
    x1 = tl.load(src + c, mask=hm, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF + c, mask=hm, other=0.0).to(tl.float32)
    cs = tl.load(cos_ptr + pid * HALF + c)
    sn = tl.load(sin_ptr + pid * HALF + c)
    is_v = h == NQ + 1
    r1 = tl.where(is_v, x1, x1 * cs - x2 * sn)
    r2 = tl.where(is_v, x2, x2 * cs + x1 * sn)
    if NQ > 0:
        qm = (h < NQ) & (c >= 0)
        dst = q_ptr + pid * (NQ * 2 * HALF) + h * (2 * HALF)
        tl.store(dst + c, r1.to(q_ptr.dtype.element_ty), mask=qm)
        tl.store(dst + HALF + c, r2.to(q_ptr.dtype.element_ty), mask=qm)
    km = (h == NQ) & (c >= 0)
    kdst = k_ptr + b * k_sb + t * k_sl + h * 0
    tl.store(kdst + c, r1.to(k_ptr.dtype.element_ty), mask=km)
    tl.store(kdst + HALF + c, r2.to(k_ptr.dtype.element_ty), mask=km)
    vm = is_v & (c >= 0)
    vdst = v_ptr + b * v_sb + t * v_sl + h * 0
    tl.store(vdst + c, r1.to(v_ptr.dtype.element_ty), mask=vm)
    tl.store(vdst + HALF + c, r2.to(v_ptr.dtype.element_ty), mask=vm)


@triton.jit
def geglu_kernel(x_ptr, out_ptr, F, BLOCK: tl.constexpr):
    """Row ``[gate | up]`` of width 2F -> ``gelu_tanh(gate) * up`` of width F (grid: rows x F-blocks).
    gelu_tanh(g) = g * sigmoid(2 * sqrt(2/pi) * (g + 0.044715 g^3)) = 0.5 g (1 + tanh(...))."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < F
    g = tl.load(x_ptr + row * 2 * F + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * F + F + offs, mask=m, other=0.0).to(tl.float32)
    z = 2.0 * SQRT_2_OVER_PI * (g + 0.044715 * g * g * g)
    y = g * tl.sigmoid(z) * u
    tl.store(out_ptr + row * F + offs, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def attn_partial_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, o_ptr, m_ptr, l_ptr,
                        Lq, Lk, NSPLIT, q_sb, k_sb, k_sl, v_sb, v_sl, mask_sb, scale,
                        HAS_MASK: tl.constexpr, KEYS_PER_SPLIT: tl.constexpr, D: tl.constexpr,
                        BM: tl.constexpr, BN: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """Split-K attention (flash-decoding): program (m-tile, split, batch) attends BM query rows to the
    keys [split*KEYS_PER_SPLIT, +KEYS_PER_SPLIT) with an online softmax in fp32 and writes the unnormalised
    partial output [BM, D] plus its row max and row sum. Queries are rows of a contiguous [B, Lq, D].
    ``DOT_PRECISION`` "ieee" keeps float32 models in true fp32 (Triton's default for fp32 dots is TF32)."""
    pid_m = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    rows = pid_m * BM + tl.arange(0, BM)
    rm = rows < Lq
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b * q_sb + rows[:, None] * D + d[None, :], mask=rm[:, None], other=0.0)
    m_i = tl.full([BM], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    start = split * KEYS_PER_SPLIT
    for n0 in range(0, KEYS_PER_SPLIT, BN):
        cols = start + n0 + tl.arange(0, BN)
        inb = cols < Lk
        valid = inb
        if HAS_MASK:
            valid = valid & (tl.load(mask_ptr + b * mask_sb + cols, mask=inb, other=0) != 0)
        k = tl.load(k_ptr + b * k_sb + cols[:, None] * k_sl + d[None, :], mask=inb[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_use[:, None])
        alpha = tl.exp(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + b * v_sb + cols[:, None] * v_sl + d[None, :], mask=inb[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    part = (b * NSPLIT + split) * Lq + rows
    tl.store(o_ptr + part[:, None] * D + d[None, :], acc, mask=rm[:, None])
    tl.store(m_ptr + part, m_i, mask=rm)
    tl.store(l_ptr + part, l_i, mask=rm)


@triton.jit
def attn_combine_kernel(o_ptr, m_ptr, l_ptr, out_ptr, Lq, NSPLIT, D: tl.constexpr, NS_P2: tl.constexpr):
    """Merge the splits of one query row: softmax-weighted sum of the partial outputs -> [B, Lq, D]."""
    r = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    s = tl.arange(0, NS_P2)
    sm = s < NSPLIT
    idx = (b * NSPLIT + s) * Lq + r
    m = tl.load(m_ptr + idx, mask=sm, other=float("-inf"))
    l = tl.load(l_ptr + idx, mask=sm, other=0.0)
    mx = tl.max(m, axis=0)
    w = tl.where(sm & (m > float("-inf")), tl.exp(m - mx), 0.0)
    d = tl.arange(0, D)
    o = tl.load(o_ptr + idx[:, None] * D + d[None, :], mask=sm[:, None], other=0.0)
    out = tl.sum(o * w[:, None], axis=0) / tl.sum(w * l, axis=0)
    tl.store(out_ptr + (b * Lq + r) * D + d, out.to(out_ptr.dtype.element_ty))


@triton.jit
def skinny_linear_kernel(x_ptr, w_ptr, out_ptr, M, N, K, stride_xm, stride_om, F_OFF,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GEGLU: tl.constexpr):
    """``out = x @ w.T`` for few rows (M <= BM, e.g. the action expert's 10 action tokens at batch 1),
    where the weight stream is the whole cost: program n reads the weight rows [n*BN, +BN) once, in
    BK-wide tiles, and keeps all M rows in one fp32 accumulator (no split over K, no atomics).

    With ``GEGLU`` the weight is the fused [gate; up] matrix [2F, K] and the program also reads the
    up rows ``F_OFF + rows``: the output is ``gelu_tanh(x @ gate.T) * (x @ up.T)`` [M, F] (one launch,
    and the [M, 2F] intermediate is never written). ``K`` must be a multiple of BK."""
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = pid * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    mm = rm < M
    nm = rn < N
    xp = x_ptr + rm[:, None] * stride_xm + rk[None, :]
    wp = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if GEGLU:
        up = w_ptr + (rn[None, :].to(tl.int64) + F_OFF) * K + rk[:, None]
        acc2 = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        xa = tl.load(xp + k0, mask=mm[:, None], other=0.0)
        wb = tl.load(wp + k0, mask=nm[None, :], other=0.0)
        acc += tl.dot(xa, wb)
        if GEGLU:
            ub = tl.load(up + k0, mask=nm[None, :], other=0.0)
            acc2 += tl.dot(xa, ub)
    if GEGLU:
        g = acc.to(out_ptr.dtype.element_ty).to(tl.float32)  # round like the two-kernel reference
        u = acc2.to(out_ptr.dtype.element_ty).to(tl.float32)
        z = 2.0 * SQRT_2_OVER_PI * (g + 0.044715 * g * g * g)
        acc = g * tl.sigmoid(z) * u
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=mm[:, None] & nm[None, :])


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, xout_ptr, h_ptr, D, eps,
                      HAS_RES: tl.constexpr, BLOCK_D: tl.constexpr):
    """One row per program: optional residual ``x + y`` (written, rounded to the output dtype), then
    LayerNorm ``(x - mean) * rsqrt(var + eps) * w + b`` with statistics in fp32 (SigLIP)."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    m = offs < D
    x = tl.load(x_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
    if HAS_RES:
        y = tl.load(y_ptr + row * D + offs, mask=m, other=0.0).to(tl.float32)
        xr = (x + y).to(xout_ptr.dtype.element_ty)
        tl.store(xout_ptr + row * D + offs, xr, mask=m)
        x = xr.to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(m, x - mean, 0.0)
    inv = tl.rsqrt(tl.sum(xc * xc, axis=0) / D + eps)
    h = xc * inv * tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32) + tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * D + offs, h.to(h_ptr.dtype.element_ty), mask=m)
