"""Kernel checks and the FP8 parity figure of ``benchmarks/vla_bench.py`` (full-size shapes on the GPU):
each fused Triton kernel against its PyTorch reference, the few-row expert kernel (bf16 and FP8
weights) against the unfused ops, the FP8 matmul against its float32 emulation, and the parity of the
FP8 model against the bf16 model in normalised action space on identical weights (the same random
draw), inputs and noise. An op whose kernel fails or disagrees is switched to its reference for the
rest of the run.
"""

from __future__ import annotations

import traceback

import numpy as np
import torch

from rpent.models.pi05 import fused, fused_linear
from rpent.models.pi05.fp8 import Fp8Linear, Fp8NotSupportedError, check_fp8_device, quantize_rows_reference


def fp8_supported(device: torch.device) -> str | None:
    """None when FP8 runs on ``device``, else the refusal message (:func:`check_fp8_device`)."""
    try:
        check_fp8_device(device)
    except Fp8NotSupportedError as exc:
        return str(exc)
    return None


def check_kernels(device, results) -> None:
    """Each fused CUDA kernel against its PyTorch reference at full-size shapes (bf16): relative L2 error.
    An op whose kernel fails or disagrees (> 2e-2) is switched to its reference for the rest of the run."""
    out = {}
    g = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device=device).to(torch.bfloat16)

    def rel(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    def pair(fn, *a):
        fused.set_enabled(True)
        x = fn(*a)
        fused.set_enabled(False)
        y = fn(*a)
        fused.set_enabled(True)
        return x, y

    def norm_checks():
        x, y, w, sc, sh, gt = rnd(528, 2048), rnd(528, 2048), rnd(2048), rnd(2048), rnd(2048), rnd(2048)
        xe, ye, sce, she, gte = rnd(16, 10, 1024), rnd(16, 10, 1024), rnd(1024), rnd(1024), rnd(1024)
        return max(rel(*pair(fused.rms_norm, x, w, 1e-6)),
                   max(rel(a, b) for a, b in zip(*pair(fused.add_rms_norm, x, y, w, 1e-6))),
                   max(rel(a, b) for a, b in zip(*pair(fused.gated_add_ada_rms_norm, xe, ye, gte, sce, she, 1e-6))))

    def rope_checks():
        rope = fused.rope_tables(torch.arange(528, device=device)[None], 256, 10000.0)
        qkv = rnd(1, 528, 10 * 256)
        res = []
        for on in (True, False):
            fused.set_enabled(on)
            cache = torch.zeros(2, 1, 528, 256, dtype=torch.bfloat16, device=device)
            q = fused.rope_qkv_to_cache(qkv, rope, 8, cache[0], cache[1])
            res.append((q, cache))
        fused.set_enabled(True)
        return max(rel(res[0][0], res[1][0]), rel(res[0][1], res[1][1]))

    def attention_checks():
        worst = 0.0
        for b, masked in ((1, False), (16, True)):
            q, k, v = rnd(b, 10, 8, 256), rnd(b, 1, 538, 256), rnd(b, 1, 538, 256)
            m = None
            if masked:
                m = torch.ones(b, 1, 1, 538, dtype=torch.bool, device=device)
                m[1::2, ..., 500:528] = False
            worst = max(worst, rel(*pair(fused.mqa_decode_attention, q, k, v, m)))
        return worst

    def layernorm_checks():
        x, y, w, bb = rnd(512, 1152), rnd(512, 1152), rnd(1152), rnd(1152)
        return max(rel(*pair(fused.layer_norm, x, w, bb, 1e-6)),
                   max(rel(a, b) for a, b in zip(*pair(fused.add_layer_norm, x, y, w, bb, 1e-6))))

    checks = {"norm": norm_checks, "rope": rope_checks, "geglu": lambda: rel(*pair(fused.geglu, rnd(528, 2 * 16384))),
              "attention": attention_checks, "layernorm": layernorm_checks}
    for op, fn in checks.items():
        try:
            err = fn()
            torch.cuda.synchronize(device)
            out[op] = err
            if not err < 2e-2:
                raise RuntimeError(f"{op}: relative error {err:.2e} vs the PyTorch reference")
        except Exception as exc:  # noqa: BLE001 - keep benchmarking with the reference for this op
            traceback.print_exc()
            out[op] = repr(exc)
            fused.set_enabled(True)
            fused.disable_op(op)
            print(f"  fused kernel {op!r} DISABLED for this run", flush=True)
    print("  kernels vs reference (relative L2, bf16): " + ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} FAILED"
                                                                      for k, v in out.items()), flush=True)
    results["kernel_check"] = out


def _rel(a, b) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def check_linear_kernels(device: torch.device, results: dict) -> None:
    """Relative L2 error of the few-row kernel (bf16 and FP8 weights, plain / GeGLU / gated-residual + norm
    epilogues, expert shapes at B=1 and B=2) against the unfused reference; E4M3 activation
    quantisation against torch's cast (bit-exact: count of differing bytes); the FP8 prefix matmul
    (``torch._scaled_mm``) against its float32 emulation. An op over 2e-2 is switched off ("rows") for
    the rest of the run."""
    out: dict = {}
    g = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device=device).to(torch.bfloat16)

    def pair(fn, *a):
        was_off = "rows" in fused._DISABLED_OPS  # noqa: SLF001 - the kernel is opt-in
        fused.disable_op("rows", False)
        x = fn(*a)
        fused.disable_op("rows")
        try:
            y = fn(*a)
        finally:
            fused.disable_op("rows", was_off)
        return x, y

    fp8 = fp8_supported(device) is None
    try:
        worst = 0.0
        for rows in (10, 20):
            for n, k, geg in ((2560, 1024, False), (8192, 1024, True), (1024, 2048, False), (1024, 4096, False)):
                w = rnd(n, k) / k ** 0.5
                x = rnd(1, rows, k)
                for weight in ([w, Fp8Linear.from_weight(w)] if fp8 else [w]):
                    # reference: the unfused ops on the weight the kernel multiplies with (FP8: dequantised,
                    # since the kernel is weight-only FP8 while cuBLAS's FP8 path also quantises x)
                    ref_w = weight.dequantized(torch.bfloat16) if isinstance(weight, Fp8Linear) else weight
                    a, _ = pair(lambda a, b: fused.linear(a, b, geglu_out=geg), x, weight)
                    _, b = pair(lambda a, b: fused.linear(a, b, geglu_out=geg), x, ref_w)
                    worst = max(worst, _rel(a, b))
                    if n == 1024:
                        res, gate, sc, sh = rnd(1, rows, n), rnd(n), rnd(n), rnd(n)
                        a, _ = pair(fused.linear_gated_norm, res, x, weight, gate, sc, sh, 1e-6)
                        _, b = pair(fused.linear_gated_norm, res, x, ref_w, gate, sc, sh, 1e-6)
                        worst = max(worst, _rel(a[0], b[0]), _rel(a[1], b[1]))
        out["rows"] = worst
        if not worst < 2e-2:
            raise RuntimeError(f"few-row kernel: relative error {worst:.2e} vs the reference")
    except Exception as exc:  # noqa: BLE001 - keep benchmarking with the reference path
        traceback.print_exc()
        out["rows"] = repr(exc)
        fused.disable_op("rows")
        print("  few-row kernel DISABLED for this run", flush=True)
    if fp8:
        try:
            x = rnd(530, 16384) * 3
            q, s = fused_linear.quantize_rows(x)
            q_ref, s_ref = quantize_rows_reference(x)
            out["quant_rows_bytes_differing"] = int((q.view(torch.uint8) != q_ref.view(torch.uint8)).sum().item())
            out["quant_rows_scale_max_rel"] = ((s - s_ref).abs() / s_ref).max().item()
            w = Fp8Linear.from_weight(rnd(2048, 16384) / 128)
            y = fused.linear(x, w)
            emu = ((q_ref.float() @ w.qweight.float().t()) * s_ref * w.scale[None, :]).to(torch.bfloat16)
            out["scaled_mm_vs_emulation"] = _rel(y, emu)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            out["fp8_matmul"] = repr(exc)
    torch.cuda.synchronize(device)
    print("  linear kernels: " + ", ".join(f"{k} {v:.2e}" if isinstance(v, float) else f"{k} {v}" for k, v in out.items()),
          flush=True)
    results["linear_kernel_check"] = out


def fp8_parity(model_bf16, model_fp8, run, inputs, results: dict) -> None:
    """max and mean |diff| of the normalised action chunks, FP8 model vs bf16 model, same inputs and noise
    (``run(model, inputs)`` -> float32 [B, H, 32] numpy), plus the largest |action| for scale."""
    a = run(model_bf16, inputs)
    b = run(model_fp8, inputs)
    d = np.abs(a - b)
    entry = {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean()), "max_abs_action": float(np.abs(a).max()),
             "batch": int(a.shape[0])}
    print(f"  parity FP8 vs bf16 (normalised actions, B={a.shape[0]}, same weights/inputs/noise): max |diff| "
          f"{entry['max_abs_diff']:.3e}, mean |diff| {entry['mean_abs_diff']:.3e} (max |action| {entry['max_abs_action']:.2f})",
          flush=True)
    results["fp8_parity"] = entry
