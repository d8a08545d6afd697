"""Fused operations of the Pi0.5 layers: Triton kernels on CUDA, plain PyTorch everywhere else.

Every op below has one meaning and two implementations: the reference (PyTorch ops, used on the CPU,
when Triton is missing, with ``RPENT_PI05_FUSED=0`` / :func:`set_enabled(False)` / the server's
``--no-fused-kernels``, or per op with ``RPENT_PI05_FUSED_OFF=norm,rope,geglu,attention``) and a Triton kernel
(:mod:`rpent.models.pi05.triton_kernels`) that does the same work in one launch inside the CUDA graph.
The kernels compute in float32 and round once per output, so they differ from the reference (which
rounds intermediates to bf16) only by bf16 rounding; ``tests/models/test_pi05_fused.py`` checks each
kernel against its reference under ``TRITON_INTERPRET=1``, and ``benchmarks/vla_bench.py`` on the GPU
(H200, full size, bf16: relative L2 error 2-3e-3 per op; 1.0e-2 max |diff| in normalised actions).
Measured on an H200 (B=1, 2 views, T=16, H=10, N=5, CUDA graph): 15.6 ms -> 10.5 ms, 3064 -> 1580 kernels
(2026-12-01, with the SigLIP add+LayerNorm kernel, the re-tiled attention and the step-0 overlap of
:mod:`rpent.models.pi05.model`: 15.2 ms -> 9.47 ms).

Ops (shapes for one layer; D width, d head dim, H query heads, F MLP width):

* :func:`rope_tables` positions [B, L] -> (cos, sin) float32 [B, L, d/2] (RoPE theta 10000, HF Gemma).
* :func:`rms_norm` / :func:`add_rms_norm`: Gemma RMSNorm ``x * rsqrt(mean(x^2) + eps) * w`` with ``w``
  the precomputed (1 + weight); ``add_`` first adds the residual branch and returns both.
* :func:`ada_rms_norm` / :func:`gated_add_ada_rms_norm`: the expert's adaRMS ``x_hat * (1 + scale) + shift``;
  ``gated_add_`` first does the gated residual ``x + y * gate``.
* :func:`layer_norm` / :func:`add_layer_norm`: SigLIP's LayerNorm (weight and bias, fp32 statistics),
  ``add_`` first adds the residual branch and returns both (one kernel instead of an add and a norm).
* :func:`rope_qkv_to_cache`: fused q/k/v projection output [B, L, (H+2) d] -> RoPE'd queries [B, L, H, d]
  and RoPE'd K / plain V written straight into the K/V cache rows.
* :func:`geglu`: [.., 2F] (gate | up) -> gelu_tanh(gate) * up [.., F].
* :func:`linear` / :func:`linear_gated_norm`: ``x @ w.T`` for a bf16/float32 weight or an FP8 weight
  (:mod:`rpent.models.pi05.fp8`), dispatched by :mod:`rpent.models.pi05.fused_linear`: cuBLAS, the FP8
  tensor cores (``torch._scaled_mm`` after the ``fp8quant`` kernel), the opt-in few-row kernel with fused
  GeGLU / gated residual + adaRMS epilogues (op ``rows``, ``RPENT_PI05_ROWS=1``), or the older
  weight-streaming skinny kernel (op ``skinny``, ``RPENT_PI05_SKINNY=1``) for the shapes where
  :func:`tune_skinny` timed it faster than cuBLAS on this GPU.
* :func:`mqa_decode_attention`: the action tokens' multi-query attention over the cached prefix + their
  own K/V, split over the keys (flash-decoding) so a 10-token chunk fills many SMs instead of 2.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

_ENABLED = os.environ.get("RPENT_PI05_FUSED", "1") != "0"
_FORCE_ON_CPU = False  # tests: run the Triton kernels on CPU tensors under TRITON_INTERPRET=1
_KERNELS = None  # the triton_kernels module, False when Triton cannot be imported
_DISABLED_OPS: set[str] = set(filter(None, os.environ.get("RPENT_PI05_FUSED_OFF", "").split(",")))
if os.environ.get("RPENT_PI05_SKINNY", "0") != "1":
    # opt-in: on the H200 the tuned skinny kernel won only the expert's gate_up projection and the batch-1
    # latency did not move (10.51 vs 10.47 ms, benchmarks/vla_variants.py), while tuning costs start-up time
    _DISABLED_OPS.add("skinny")
if os.environ.get("RPENT_PI05_ROWS", "0") != "1":
    # opt-in: on an H200 (B=1, bf16) the few-row kernel with its fused epilogues ran the expert's 360
    # projections in 3.7 ms against cuBLAS's 2.4 ms (model 10.44 vs 9.63 ms, benchmarks/vla_bench.py)
    _DISABLED_OPS.add("rows")
#: Names of the ops with a Triton kernel (for :func:`disable_op` / ``RPENT_PI05_FUSED_OFF=op1,op2``).
OPS = ("norm", "rope", "geglu", "attention", "skinny", "layernorm", "rows", "fp8quant")

#: Keys per split of :func:`mqa_decode_attention` and its tile sizes (BM query rows, BN keys).
#: H200, B=1 (benchmarks/vla_variants.py, 2026-12-01): 32 keys per split, BN 32 -> 9.47 ms against
#: 9.71 ms with 128 keys per split, BN 64 (90 launches of 3.9 instead of 7.8 us).
ATTN_KEYS_PER_SPLIT = int(os.environ.get("RPENT_PI05_ATTN_SPLIT", "32"))
ATTN_BM = int(os.environ.get("RPENT_PI05_ATTN_BM", "16"))
ATTN_BN = int(os.environ.get("RPENT_PI05_ATTN_BN", "32"))
ATTN_STAGES = int(os.environ.get("RPENT_PI05_ATTN_STAGES", "1"))


def set_enabled(flag: bool) -> None:
    """Turn the Triton kernels on/off for this process (off = the PyTorch reference everywhere)."""
    global _ENABLED
    _ENABLED = bool(flag)


def disable_op(op: str, flag: bool = True) -> None:
    """Use the PyTorch reference for one op (one of :data:`OPS`) while the others keep their kernels."""
    if op not in OPS:
        raise ValueError(f"unknown fused op {op!r}; one of {OPS}")
    (_DISABLED_OPS.add if flag else _DISABLED_OPS.discard)(op)


def force_on_cpu(flag: bool) -> None:
    """Tests only: use the Triton kernels for CPU tensors too (requires ``TRITON_INTERPRET=1``)."""
    global _FORCE_ON_CPU
    _FORCE_ON_CPU = bool(flag)


def _kernels():
    global _KERNELS
    if _KERNELS is None:
        try:
            from rpent.models.pi05 import triton_kernels

            _KERNELS = triton_kernels
        except Exception:  # noqa: BLE001 - ImportError, or a Triton without a usable backend
            _KERNELS = False
    return _KERNELS


def available() -> bool:
    """Whether the Triton kernels can be used in this process (Triton importable and enabled)."""
    return _ENABLED and bool(_kernels())


def _use(t: torch.Tensor, op: str) -> bool:
    return _ENABLED and op not in _DISABLED_OPS and (t.is_cuda or _FORCE_ON_CPU) and bool(_kernels())


def _p2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


# --------------------------------------------------------------------------- RoPE


class RopeTables:
    """RoPE cos/sin for integer positions: ``cos``, ``sin`` float32 [B, L, d/2] (frequencies
    ``theta ** (-2i/d)``, HF Gemma), plus the full-width tables of the reference path, made on demand."""

    def __init__(self, positions: torch.Tensor, head_dim: int, theta: float):
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
        ang = positions.to(torch.float32)[..., None] * inv
        self.cos = ang.cos().contiguous()
        self.sin = ang.sin().contiguous()
        self._full: dict = {}

    def full(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, signed_sin) [B, L, 1, d] in ``dtype``: [cos, cos] and [-sin, sin] (``apply_rope``'s form)."""
        if dtype not in self._full:
            c, s = self.cos[:, :, None], self.sin[:, :, None]
            self._full[dtype] = (torch.cat([c, c], -1).to(dtype), torch.cat([-s, s], -1).to(dtype))
        return self._full[dtype]


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> RopeTables:
    """RoPE tables for int positions [B, L] (see :class:`RopeTables`)."""
    return RopeTables(positions, head_dim, theta)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Reference RoPE on x [B, L, heads, d] with full tables [B, L, 1, d]:
    ``x*cos + rotate_half(x)*sin``, ``rotate_half(x) = [-x2, x1]`` (HF Gemma)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)


def rope_qkv_to_cache(qkv: torch.Tensor, rope: RopeTables, num_q_heads: int, k_out: torch.Tensor,
                      v_out: torch.Tensor) -> torch.Tensor | None:
    """Split the fused projection, rotate queries and keys, write K/V into the cache.

    Args:
        qkv: [B, L, (num_q_heads + 2) * d] contiguous: queries, then one K head, then one V head.
        rope: tables for the L positions.
        num_q_heads: H (0: only K/V, e.g. the last prefix layer).
        k_out, v_out: [B, L, d] cache views (last dim contiguous), written in place.

    Returns:
        queries [B, L, H, d] (RoPE applied), or None when ``num_q_heads`` is 0.
    """
    b, l, w = qkv.shape
    d = w // (num_q_heads + 2)
    if _use(qkv, "rope"):
        qkv = qkv.contiguous()
        q = torch.empty((b, l, num_q_heads, d), dtype=qkv.dtype, device=qkv.device) if num_q_heads else None
        _kernels().rope_qkv_kernel[(b * l,)](
            qkv, rope.cos, rope.sin, q if q is not None else qkv, k_out, v_out, l, qkv.stride(1),
            k_out.stride(0), k_out.stride(1), v_out.stride(0), v_out.stride(1),
            NQ=num_q_heads, HALF=d // 2, NH_P2=_p2(num_q_heads + 2))
        return q
    cos, sin = rope.full(qkv.dtype)
    q, k, v = qkv.split([num_q_heads * d, d, d], dim=-1)
    k_out.copy_(apply_rope(k.view(b, l, 1, d), cos, sin)[:, :, 0])
    v_out.copy_(v)
    if not num_q_heads:
        return None
    return apply_rope(q.reshape(b, l, num_q_heads, d), cos, sin)


# --------------------------------------------------------------------------- norms


def _norm_launch(x, y, gate, w, shift, eps, want_x):
    d = x.shape[-1]
    xc = x.contiguous()
    h = torch.empty_like(xc)
    xo = torch.empty_like(xc) if want_x else h
    rows = xc.numel() // d
    _kernels().norm_kernel[(rows,)](
        xc, y.contiguous() if y is not None else xc, gate if gate is not None else w, w,
        shift if shift is not None else w, xo, h, d, eps,
        HAS_RES=y is not None, HAS_GATE=gate is not None, HAS_SHIFT=shift is not None, BLOCK_D=_p2(d))
    return xo, h


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Gemma RMSNorm of x [.., D] with the (1 + weight) scale ``w`` [D]; statistics in float32."""
    if _use(x, "norm"):
        return _norm_launch(x, None, None, w, None, eps, False)[1]
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def add_rms_norm(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual then RMSNorm: returns (x + y, rms_norm(x + y) * w), both [.., D] in x's dtype."""
    if _use(x, "norm"):
        return _norm_launch(x, y, None, w, None, eps, True)
    x = x + y
    return x, F.rms_norm(x, (x.shape[-1],), w, eps)


def ada_rms_norm(x: torch.Tensor, scale1p: torch.Tensor, shift: torch.Tensor, eps: float) -> torch.Tensor:
    """adaRMS: ``rms_norm(x) * (1 + scale) + shift`` with the precomputed per-step [D] vectors."""
    if _use(x, "norm"):
        return _norm_launch(x, None, None, scale1p, shift, eps, False)[1]
    return torch.addcmul(shift, F.rms_norm(x, (x.shape[-1],), None, eps), scale1p)


def gated_add_ada_rms_norm(x: torch.Tensor, y: torch.Tensor, gate: torch.Tensor, scale1p: torch.Tensor,
                           shift: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated residual ``x + y * gate`` then adaRMS; returns (new x, normed) [.., D]."""
    if _use(x, "norm"):
        return _norm_launch(x, y, gate, scale1p, shift, eps, True)
    x = torch.addcmul(x, y, gate)
    return x, torch.addcmul(shift, F.rms_norm(x, (x.shape[-1],), None, eps), scale1p)


def _ln_launch(x, y, w, b, eps, want_x):
    d = x.shape[-1]
    xc = x.contiguous()
    h = torch.empty_like(xc)
    xo = torch.empty_like(xc) if want_x else h
    _kernels().layer_norm_kernel[(xc.numel() // d,)](
        xc, y.contiguous() if y is not None else xc, w, b, xo, h, d, eps, HAS_RES=y is not None, BLOCK_D=_p2(d))
    return xo, h


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm of x [.., D] with weight/bias [D] (``F.layer_norm``); statistics in float32."""
    if _use(x, "layernorm"):
        return _ln_launch(x, None, w, b, eps, False)[1]
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def add_layer_norm(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual then LayerNorm: returns (x + y, layer_norm(x + y)), both [.., D] in x's dtype."""
    if _use(x, "layernorm"):
        return _ln_launch(x, y, w, b, eps, True)
    x = x + y
    return x, F.layer_norm(x, (x.shape[-1],), w, b, eps)


# --------------------------------------------------------------------------- MLP


def geglu(x: torch.Tensor) -> torch.Tensor:
    """[.., 2F] (gate | up halves) -> gelu_tanh(gate) * up [.., F] (Gemma GeGLU)."""
    if _use(x, "geglu"):
        xc = x.contiguous()
        f = xc.shape[-1] // 2
        out = torch.empty((*xc.shape[:-1], f), dtype=xc.dtype, device=xc.device)
        block = min(1024, _p2(f))
        _kernels().geglu_kernel[(xc.numel() // (2 * f), triton_cdiv(f, block))](xc, out, f, BLOCK=block)
        return out
    gate, up = x.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up


def triton_cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


# --------------------------------------------------------------------------- attention


def mqa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """Reference multi-query attention with one shared K/V head (SDPA; heads folded into the query rows).

    Args:
        q: [B, Lq, H, d] queries (RoPE applied); k, v: [B, 1, Lk, d]; key_mask: None or bool
            [B, 1, 1, Lk] (True = may be attended).

    Returns:
        [B, Lq, H*d] in q's dtype; scores scaled by 1/sqrt(d) (Gemma 2B: query_pre_attn_scalar = d).
    """
    b, lq, h, d = q.shape
    o = F.scaled_dot_product_attention(q.reshape(b, 1, lq * h, d), k, v, attn_mask=key_mask)
    return o.view(b, lq, h * d)


def mqa_decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """Same result as :func:`mqa_attention`, for few queries over many keys (the action chunk attending
    to the prefix cache): the keys are split into chunks of :data:`ATTN_KEYS_PER_SPLIT`, each chunk's
    partial softmax runs in its own program, a second kernel merges them (flash-decoding)."""
    b, lq, h, d = q.shape
    if not _use(q, "attention") or d != _p2(d) or d < 16:
        return mqa_attention(q, k, v, key_mask)
    kk = _kernels()
    rows = lq * h
    qc = q.reshape(b, rows, d).contiguous()
    lk = k.shape[-2]
    ks, vs = k[:, 0], v[:, 0]  # [B, Lk, d] views
    nsplit = triton_cdiv(lk, ATTN_KEYS_PER_SPLIT)
    part_o = torch.empty((b, nsplit, rows, d), dtype=torch.float32, device=q.device)
    part_m = torch.empty((b, nsplit, rows), dtype=torch.float32, device=q.device)
    part_l = torch.empty((b, nsplit, rows), dtype=torch.float32, device=q.device)
    if key_mask is not None:
        mask = key_mask.reshape(b, lk).to(torch.int8)
    else:
        mask = qc
    kk.attn_partial_kernel[(triton_cdiv(rows, ATTN_BM), nsplit, b)](
        qc, ks, vs, mask, part_o, part_m, part_l, rows, lk, nsplit, qc.stride(0), ks.stride(0), ks.stride(1),
        vs.stride(0), vs.stride(1), mask.stride(0), 1.0 / math.sqrt(d),
        HAS_MASK=key_mask is not None, KEYS_PER_SPLIT=ATTN_KEYS_PER_SPLIT, D=d, BM=ATTN_BM, BN=ATTN_BN,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32", num_warps=4, num_stages=ATTN_STAGES)
    out = torch.empty((b, rows, d), dtype=q.dtype, device=q.device)
    kk.attn_combine_kernel[(rows, b)](part_o, part_m, part_l, out, rows, nsplit, D=d, NS_P2=_p2(nsplit))
    return out.view(b, lq, h * d)


# --------------------------------------------------------------------------- skinny linear

#: Largest row count M routed to the skinny kernel (the expert's B*H action tokens).
SKINNY_MAX_M = 32
#: (BN, BK, num_warps, num_stages) candidates :func:`tune_skinny` times against cuBLAS.
SKINNY_CONFIGS = ((16, 256, 4, 4), (16, 512, 4, 3), (32, 256, 4, 4), (32, 128, 4, 5), (64, 128, 4, 4),
                  (16, 128, 2, 6), (64, 64, 4, 6))
_SKINNY: dict[tuple, tuple | None] = {}  # (M, N, K, geglu) -> config, or None = cuBLAS
#: Config used on CPU tensors under the Triton interpreter (tests), where nothing is timed.
SKINNY_TEST_CONFIG = (16, 32, 4, 1)


def _skinny_launch(x2: torch.Tensor, w: torch.Tensor, geglu_out: bool, cfg: tuple) -> torch.Tensor:
    bn, bk, warps, stages = cfg
    m, k = x2.shape
    n = w.shape[0] // 2 if geglu_out else w.shape[0]
    out = torch.empty((m, n), dtype=x2.dtype, device=x2.device)
    _kernels().skinny_linear_kernel[(triton_cdiv(n, bn),)](
        x2, w, out, m, n, k, x2.stride(0), out.stride(0), n, BM=max(16, _p2(m)), BN=bn, BK=bk,
        GEGLU=geglu_out, num_warps=warps, num_stages=stages)
    return out


def linear(x: torch.Tensor, w, geglu_out: bool = False) -> torch.Tensor:
    """``x @ w.T`` without bias for a weight tensor [N, K] or an FP8 weight
    (:class:`rpent.models.pi05.fp8.Fp8Linear`): x [.., K] -> [.., N]; with ``geglu_out`` w is the fused
    [gate; up] weight [2F, K] and the result is ``geglu(x @ w.T)`` [.., F]. Dispatch (few-row kernel with
    fused epilogues, FP8 matmuls, cuBLAS): :mod:`rpent.models.pi05.fused_linear`."""
    from rpent.models.pi05 import fused_linear

    return fused_linear.linear(x, w, geglu_out)


def linear_gated_norm(res: torch.Tensor, x: torch.Tensor, w, gate: torch.Tensor, scale1p: torch.Tensor,
                      shift: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``gated_add_ada_rms_norm(res, linear(x, w), gate, scale1p, shift, eps)``: the expert's o and down
    projections with the residual and norm that follow (one launch on the few-row kernel's path;
    :func:`rpent.models.pi05.fused_linear.linear_gated_norm`)."""
    from rpent.models.pi05 import fused_linear

    return fused_linear.linear_gated_norm(res, x, w, gate, scale1p, shift, eps)


def tensor_linear(x: torch.Tensor, w: torch.Tensor, geglu_out: bool = False) -> torch.Tensor:
    """``F.linear(x, w)`` without bias: x [.., K], w [N, K] -> [.., N]; with ``geglu_out`` w is the fused
    [gate; up] weight [2F, K] and the result is ``geglu(F.linear(x, w))`` [.., F].

    Few rows (M <= :data:`SKINNY_MAX_M`) go through the skinny Triton kernel when :func:`tune_skinny`
    chose it for this (M, N, K) on this GPU; everything else is cuBLAS (+ :func:`geglu`)."""
    k = x.shape[-1]
    m = x.numel() // k
    cfg = None
    if m <= SKINNY_MAX_M and _use(x, "skinny") and x.dtype == w.dtype:
        cfg = _SKINNY.get((m, w.shape[0], k, geglu_out)) if x.is_cuda else SKINNY_TEST_CONFIG
        if cfg is not None and k % cfg[1]:
            cfg = None
    if cfg is None:
        y = F.linear(x, w)
        return geglu(y) if geglu_out else y
    out = _skinny_launch(x.reshape(m, k).contiguous(), w, geglu_out, cfg)
    return out.view(*x.shape[:-1], out.shape[-1])


def tune_skinny(m: int, weights: list[torch.Tensor], geglu_out: bool = False, reps: int = 5) -> tuple | None:
    """Choose cuBLAS or a skinny-kernel config for x [m, K] times each of ``weights`` (same shape [N, K];
    pass every layer's weight so the timing streams them from memory as inference does, not from L2).

    Times one pass over all weights per candidate with CUDA events (median of ``reps``), stores and
    returns the winner (None = cuBLAS). Does nothing (returns the stored choice) outside CUDA, when the
    kernels are off, for m > :data:`SKINNY_MAX_M`, or while a CUDA graph is being captured."""
    w0 = weights[0]
    n, k = w0.shape
    key = (m, n, k, geglu_out)
    if key in _SKINNY:
        return _SKINNY[key]
    if not (w0.is_cuda and m <= SKINNY_MAX_M and _use(w0, "skinny")) or torch.cuda.is_current_stream_capturing():
        return None
    x = torch.randn(m, k, device=w0.device, dtype=torch.float32).to(w0.dtype)

    def run_cublas():
        for w in weights:
            y = F.linear(x, w)
            if geglu_out:
                geglu(y)

    def timed(fn):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        return sorted(ts)[len(ts) // 2]

    best, best_t = None, timed(run_cublas)
    ref = F.linear(x, w0)
    ref = (geglu(ref) if geglu_out else ref).float()
    for cfg in SKINNY_CONFIGS:
        if k % cfg[1]:
            continue
        try:
            got = _skinny_launch(x, w0, geglu_out, cfg).float()
            if not ((got - ref).norm() / ref.norm().clamp_min(1e-12)) < 2e-2:
                continue
            t = timed(lambda: [_skinny_launch(x, w, geglu_out, cfg) for w in weights])
        except Exception:  # noqa: BLE001 - a config that does not compile/fit is skipped
            continue
        if t < best_t:
            best, best_t = cfg, t
    _SKINNY[key] = best
    return best


def skinny_choices() -> dict:
    """The tuned choices so far: ``{"M,N,K,geglu": config or "cublas"}`` (for benchmark reports)."""
    return {",".join(map(str, k)): (list(v) if v else "cublas") for k, v in _SKINNY.items()}
