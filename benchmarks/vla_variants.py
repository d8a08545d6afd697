"""Pi0.5 batch-1 latency A/B of the speed options in one run, on the same weights and inputs: the
previous path (cuBLAS everywhere, flow step 0 after the prefix) against the skinny expert kernel, the
step-0 overlap, both, and SDPA-backend / BLAS-library choices, each with its max |diff| against the
previous path, plus a kernel-level GPU profile (grouped) of the best variant.

    python benchmarks/vla_variants.py --iters 40 --out variants.json          # H200: full size, bf16
    python benchmarks/vla_variants.py --tiny --iters 3                        # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rpent.models.pi05 import fused  # noqa: E402
from rpent.models.pi05.config import full_config, tiny_config  # noqa: E402
from rpent.models.pi05.model import Pi05Model, default_device_dtype  # noqa: E402
from rpent.models.pi05.sampling import Pi05Runner  # noqa: E402


def timed(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def profile_grouped(runner, x, top=30):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        runner.run(*x)
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 1e3, e.count) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    print(f"  profile (eager launch, same kernels): {total:.3f} ms GPU in {sum(r[2] for r in rows)} kernels")
    for k, ms, c in rows[:top]:
        print(f"    {ms:7.3f} ms {c:5d}x {ms / c * 1e3:7.1f} us  {k[:100]}")
    return {"gpu_ms": total, "top": [(k[:160], ms, c) for k, ms, c in rows[:top]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--prompt-tokens", type=int, default=16)
    ap.add_argument("--batches", default="1,8,16")
    ap.add_argument("--out", default=None)
    ap.add_argument("--grid-batch", type=int, default=0, help="also time every variant at this batch size")
    ap.add_argument("--best-env", default=None, help="write the best attention tiles as shell exports here")
    args = ap.parse_args()
    dev, dt = default_device_dtype(None)
    cfg = (tiny_config() if args.tiny else full_config()).replace(action_horizon=10, num_flow_steps=5)
    model = Pi05Model.random(cfg, dev, dt, seed=0)
    rng = np.random.default_rng(0)

    def inputs(b):
        return (rng.integers(0, 256, (b, 2, 256, 256, 3), dtype=np.uint8),
                [rng.integers(10, min(cfg.vocab_size, 250000), args.prompt_tokens).astype(np.int64) for _ in range(b)],
                rng.standard_normal((b, 10, 32)).astype(np.float32))

    x1 = inputs(1)
    res = {"gpu": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}
    # name, skinny, overlap, attention (BM, keys per split, BN, stages); the first row is the previous path
    prev_attn = (16, 128, 64, 1)  # the tiles before the 2026-12-01 sweep
    now_attn = (fused.ATTN_BM, fused.ATTN_KEYS_PER_SPLIT, fused.ATTN_BN, fused.ATTN_STAGES)
    variants = [("previous (no overlap)", False, False, prev_attn), ("overlap", False, True, prev_attn),
                ("overlap+skinny", True, True, prev_attn), (f"defaults: overlap+attn{now_attn}", False, True, now_attn)]
    for a in ((16, 64, 64, 1), (16, 32, 32, 2), (16, 64, 32, 2), (32, 64, 64, 1), (16, 32, 32, 1), (32, 128, 64, 2), (16, 128, 64, 2),
              (64, 64, 64, 1)):
        variants.append((f"overlap+attn{a}", False, True, a))
    ref = None
    best = None
    grid_inputs = inputs(args.grid_batch) if args.grid_batch else None
    for name, sk, ov, at in variants:
        try:
            fused.disable_op("skinny", not sk)
            Pi05Model.overlap_first_step = ov
            fused.ATTN_BM, fused.ATTN_KEYS_PER_SPLIT, fused.ATTN_BN, fused.ATTN_STAGES = at
            runner = Pi05Runner(model)
            out = runner.run(*x1)
            ms = timed(lambda: runner.run(*x1), args.iters)
            d = 0.0 if ref is None else float(np.abs(out - ref).max())
            if ref is None:
                ref = out
            res[name] = {"b1_ms": ms, "max_abs_diff_vs_previous": d}
            extra = ""
            if args.grid_batch:
                xg = grid_inputs
                res[name][f"b{args.grid_batch}_ms"] = mg = timed(lambda: runner.run(*xg), max(5, args.iters // 4))
                extra = f"   B={args.grid_batch} {mg:7.2f} ms"
            print(f"  {name:34s} B=1 {ms:7.2f} ms   max|diff| vs previous {d:.2e}{extra}", flush=True)
            if best is None or ms < best[1]:
                best = (name, ms, sk, ov, at)
            del runner
        except Exception as exc:  # noqa: BLE001
            res[name] = {"error": repr(exc)}
            print(f"  {name}: FAILED {exc!r}", flush=True)
    print("  skinny choices:", json.dumps(fused.skinny_choices()))
    name, _, sk, ov, at = best
    for b in [int(v) for v in args.batches.split(",") if int(v) > 1]:
        xb = inputs(b)
        for label, s2, o2, a2 in (("previous", False, False, prev_attn), ("best", sk, ov, at)):
            fused.disable_op("skinny", not s2)
            Pi05Model.overlap_first_step = o2
            fused.ATTN_BM, fused.ATTN_KEYS_PER_SPLIT, fused.ATTN_BN, fused.ATTN_STAGES = a2
            runner = Pi05Runner(model)
            ms = timed(lambda: runner.run(*xb), max(5, args.iters // 4))
            res[f"b{b}_{label}"] = ms
            print(f"  B={b:<2} {label:8s} {ms:7.2f} ms ({ms / b:.2f} ms/sample)", flush=True)
            del runner
    if dev.type == "cuda":
        fused.disable_op("skinny", not sk)
        fused.ATTN_BM, fused.ATTN_KEYS_PER_SPLIT, fused.ATTN_BN, fused.ATTN_STAGES = at
        Pi05Model.overlap_first_step = False  # profile: sequential, so per-kernel times are not overlapped
        runner = Pi05Runner(model, use_cuda_graphs=False)
        runner.run(*x1)
        res["profile"] = profile_grouped(runner, x1)
    print(f"best: {name} {best[1]:.2f} ms")
    if args.best_env:  # for the next benchmark of the same call: the best attention tiles as env overrides
        Path(args.best_env).write_text("export RPENT_PI05_ATTN_BM={} RPENT_PI05_ATTN_SPLIT={} RPENT_PI05_ATTN_BN={} "
                                       "RPENT_PI05_ATTN_STAGES={} RPENT_PI05_SKINNY={}\n".format(*at, int(sk)))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
