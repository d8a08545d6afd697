"""Pi0.5 VLA speed benchmark: model latency, end-to-end latency through the RPC server, throughput
with concurrent clients, cold start; each next to its baselines from the same run (the previous expert
path, the unfused and eager forms of the same code, another checkout's server via ``--compare-root``),
bf16 and FP8 weights with their parity in normalised action space, the fused Triton kernels checked
against their PyTorch references, and optionally lerobot 0.6.1's Pi0.5 (eager and ``torch.compile``d)
with a numerical parity check on identical weights, tokens and noise.

Full size on the GPU (random weights, no checkpoint needed)::

    python benchmarks/vla_bench.py --random-weights --iters 30 --requests-per-client 30 --transport socket \
        --skip-eager-server --skip-baseline-server --cold-start-from-disk --drop-caches \
        --compare-root <checkout of the previous version> --out bench.json

CPU smoke run::

    python benchmarks/vla_bench.py --tiny --iters 5 --clients 4 --precision bf16 --out /tmp/vla_bench_tiny.json

Figures (median ms unless stated): model B=1 and B=16 per variant (``graph``: the defaults; ``graph_rows``:
the expert's projections on the few-row Triton kernel with fused GeGLU / residual + norm epilogues;
``graph_unfused``; ``eager``; ``fp8_graph`` / ``fp8_graph_rows``: FP8 Gemma weights), server end-to-end B=1 with the server-side stage times, server
throughput (inferences/s) with N concurrent client processes and the GPU time per model call, cold start
(launch -> readiness line -> first action; ``from_disk`` loads a full random checkpoint from local disk,
``_fp8`` its FP8 conversion, with an empty and then the filled Triton cache), lerobot parity/latency.
Prints a table and writes JSON to ``--out`` (after every section, so a killed run keeps what it measured).
Measured figures, with their machines and dates: ``docs/results/vla_serving.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rpent.models.pi05 import fused  # noqa: E402
from rpent.models.pi05.checkpoint import random_tensors, save_checkpoint_tensors  # noqa: E402
from rpent.models.pi05.config import full_config, parameter_counts, tiny_config  # noqa: E402
from rpent.models.pi05.model import Pi05Model, default_device_dtype  # noqa: E402
from rpent.models.pi05.sampling import Pi05Runner  # noqa: E402
from rpent.models.pi05.tiny import tiny_norm_stats, tiny_observation, tiny_tokenizer_bytes  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import vla_checks  # noqa: E402


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, iters: int, warmup: int) -> dict:
    """Run ``fn`` warmup+iters times; return median/p10/p90/mean in ms."""
    for _ in range(warmup):
        fn()
    _sync()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        _sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return {"median_ms": statistics.median(ts), "p10_ms": ts[len(ts) // 10], "p90_ms": ts[(len(ts) * 9) // 10], "mean_ms": statistics.mean(ts), "n": iters}


# ---------------------------------------------------------------------------- model (in process)


def bench_model(cfg, device, dtype, args, results):
    """In-process model latency (B=1 and ``--batch``) of each variant on the same random weights and inputs:
    ``graph`` (every default: CUDA graph, fused kernels, few-row expert kernel), ``graph_rows_off`` (the
    expert's projections on cuBLAS with separate norm/GeGLU kernels: the previous path), ``graph_unfused``
    (plain PyTorch ops), ``eager``, and with FP8 tensor cores ``fp8_graph`` (FP8 Gemma weights quantised from
    the same draw) with its parity against bf16."""
    model = Pi05Model.random(cfg, device, dtype, seed=0)
    v, s, t = 2, 256, args.prompt_tokens
    rng = np.random.default_rng(0)

    def inputs(b):
        imgs = rng.integers(0, 256, (b, v, s, s, 3), dtype=np.uint8)
        ids = [rng.integers(10, min(cfg.vocab_size, 250000), t).astype(np.int64) for _ in range(b)]
        noise = rng.standard_normal((b, cfg.action_horizon, 32)).astype(np.float32)
        return imgs, ids, noise

    kernels = fused.available() and device.type == "cuda"
    if kernels:  # same weights and inputs, kernels on vs off (bf16): the fused path must not change the actions
        x = inputs(4)
        outs = []
        for on in (True, False):
            fused.set_enabled(on)
            outs.append(Pi05Runner(model, use_cuda_graphs=False).run(*x))
        fused.set_enabled(True)
        d = float(np.abs(outs[0] - outs[1]).max())
        results["fused_vs_reference_max_abs_diff"] = d
        print(f"  fused kernels vs PyTorch reference, B=4 bf16: max |diff| normalised actions = {d:.3e}", flush=True)
    model8 = None
    if device.type == "cuda" and args.precision in ("fp8", "both"):
        refusal = vla_checks.fp8_supported(device)
        if refusal is None:
            model8 = Pi05Model.random(cfg, device, dtype, seed=0, fp8=True)
            torch.cuda.empty_cache()
            vla_checks.fp8_parity(model, model8, lambda m, x: Pi05Runner(m, use_cuda_graphs=False).run(*x), inputs(4), results)
        else:
            results["fp8"] = {"refused": refusal}
            print(f"  fp8: {refusal}", flush=True)
    if device.type == "cuda":  # (name, model, graphs, fused kernels, few-row kernel, batches)
        variants = [("graph", model, True, True, False, (1, args.batch)),
                    ("graph_rows", model, True, True, True, (1,)),
                    ("graph_unfused", model, True, False, False, (1,)),
                    ("eager", model, False, True, False, (1,))]
        if model8 is not None:
            variants += [("fp8_graph", model8, True, True, False, (1, args.batch)),
                         ("fp8_graph_rows", model8, True, True, True, (1,))]
        if args.precision == "fp8" and model8 is not None:
            variants = [vv for vv in variants if vv[0] in ("graph", "fp8_graph")]
    else:
        variants = [("eager", model, False, False, False, (1, args.batch))]
    rows_default = "rows" not in fused._DISABLED_OPS  # noqa: SLF001
    for name, m, graphs, on, rows, batches in variants:
        fused.set_enabled(on and kernels)
        fused.disable_op("rows", not rows)
        runner = Pi05Runner(m, use_cuda_graphs=graphs)
        for b in batches:
            x = inputs(b)
            iters = args.iters if b == 1 else max(3, args.iters // 3)
            r = timed(lambda: runner.run(*x), iters if name != "eager" else max(5, iters // 3), args.warmup)
            r["per_sample_ms"] = r["median_ms"] / b
            results[f"model_b{b}_{name}"] = r
            print(f"  model B={b:<2} {name:15s}: {r['median_ms']:8.2f} ms  ({r['per_sample_ms']:.2f} ms/sample)", flush=True)
        del runner
    fused.set_enabled(kernels)
    fused.disable_op("rows", not rows_default)
    if args.profile and device.type == "cuda":
        profile_kernels(model, inputs(1), results)
        if model8 is not None:
            profile_kernels(model8, inputs(1), results, key="profile_b1_fp8")
    del model8
    return model


def profile_kernels(model, x, results, top: int = 14, key: str = "profile_b1") -> None:
    """Kernel-level GPU time of one eager B=1 call (the same kernels the graph replays): top kernels by time."""
    from torch.profiler import ProfilerActivity, profile

    runner = Pi05Runner(model, use_cuda_graphs=False)
    runner.run(*x)
    _sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        runner.run(*x)
        _sync()
    rows = [(e.key, e.device_time_total / 1e3, e.count) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    n = sum(r[2] for r in rows)
    print(f"  {key} (eager, {model.precision}): {total:.2f} ms GPU time in {n} kernels", flush=True)
    for k, ms, c in rows[:top]:
        print(f"    {ms:7.3f} ms {c:5d}x  {k[:110]}")
    results[key] = {"gpu_ms": total, "kernels": n, "top": [{"kernel": k[:200], "ms": ms, "count": c} for k, ms, c in rows[:top]]}


# ---------------------------------------------------------------------------- lerobot comparison


def bench_lerobot(cfg, device, args, results, our_model, compile_only: bool = False):
    """lerobot 0.6.x PI05Pytorch on the same weights: parity (bf16 and fp32) and eager latency; with
    ``compile_only``, only ``torch.compile(mode="reduce-overhead")`` latency and its warm-up (run last: long)."""
    try:
        from lerobot.policies.pi05.configuration_pi05 import PI05Config
        from lerobot.policies.pi05.modeling_pi05 import PI05Pytorch
    except Exception as exc:  # noqa: BLE001 - optional comparison
        results["lerobot"] = {"error": f"lerobot not importable: {exc!r}"}
        print(f"  lerobot: skipped ({exc!r})")
        return
    out = {}
    b, t, hz, n = 1, args.prompt_tokens, cfg.action_horizon, cfg.num_flow_steps
    g = torch.Generator(device="cpu").manual_seed(1)
    images_u8 = torch.randint(0, 256, (b, 2, 224, 224, 3), dtype=torch.uint8, generator=g)
    ids = torch.randint(10, 250000, (b, t), generator=g)
    noise = torch.randn(b, hz, 32, generator=g)
    for dtype_name in ("bfloat16",) if compile_only else ("bfloat16", "float32"):
        try:
            dt = getattr(torch, dtype_name)
            conf = PI05Config(dtype=dtype_name, chunk_size=hz, n_action_steps=min(hz, 5), num_inference_steps=n, device=str(device))
            with torch.device(device):
                lr = PI05Pytorch(conf)
            tensors = random_tensors(cfg, device, dt, seed=0)
            missing, unexpected = lr.load_state_dict(tensors, strict=False)
            missing = [k for k in missing if "lm_head" not in k]
            lr.eval()
            imgs = images_u8.to(device).permute(0, 1, 4, 2, 3).float() / 127.5 - 1.0
            img_list = [imgs[:, i].to(dt) for i in range(2)]
            masks = [torch.ones(b, dtype=torch.bool, device=device)] * 2
            tok = ids.to(device)
            tmask = torch.ones_like(tok, dtype=torch.bool)

            def run_lerobot(fn=lr.sample_actions):
                return fn(img_list, masks, tok, tmask, noise=noise.to(device), num_steps=n)

            if compile_only:
                del tensors
                t0 = time.perf_counter()
                comp = torch.compile(lr.sample_actions, mode="reduce-overhead")
                with torch.no_grad():
                    for _ in range(3):
                        run_lerobot(comp)
                    _sync()
                    warm = time.perf_counter() - t0
                    entry = {"compile_warmup_s": warm, "compiled": timed(lambda: run_lerobot(comp), max(5, args.iters // 4), 2)}
                print(f"  lerobot compiled B=1: {entry['compiled']['median_ms']:.2f} ms (warm-up {warm:.0f} s)", flush=True)
                results["lerobot_compiled"] = entry
                return
            ours = our_model if our_model is not None and our_model.dtype == dt else Pi05Model.from_checkpoint_tensors(cfg, tensors)
            with torch.no_grad():
                ref = run_lerobot().float()
            mine = ours.sample_actions(imgs.to(dt), tok, noise.to(device))
            diff = (ref - mine).abs().max().item()
            entry = {"max_abs_diff_normalized": diff, "max_abs_ref": ref.abs().max().item(),
                     "missing_keys": missing[:10], "unexpected_keys": list(unexpected)[:10]}
            print(f"  parity vs lerobot ({dtype_name}): max |diff| = {diff:.3e} (max |action| {entry['max_abs_ref']:.2f}; "
                  f"missing {len(missing)}, unexpected {len(unexpected)})", flush=True)
            if dtype_name == "bfloat16":
                with torch.no_grad():
                    entry["eager"] = timed(run_lerobot, max(5, args.iters // 4), 2)
                print(f"  lerobot eager B=1: {entry['eager']['median_ms']:.2f} ms", flush=True)
            out[dtype_name] = entry
            del lr, tensors
            if ours is not our_model:
                del ours
            torch.cuda.empty_cache() if device.type == "cuda" else None
        except Exception as exc:  # noqa: BLE001 - report, keep the rest of the benchmark
            out[dtype_name] = {"error": repr(exc)}
            print(f"  lerobot {dtype_name}: failed: {exc!r}", flush=True)
    results["lerobot"] = out


# ---------------------------------------------------------------------------- server


def _client_proc(ep: str, seed: int, per: int, barrier, q, warmup: int = 5, image_size: int = 256) -> None:
    """One closed-loop client process: ``warmup`` concurrent calls (so the server captures the CUDA graphs of
    the batch shapes that occur), the barrier, then ``per`` timed predicts; puts "" or an error."""
    from rpent.robots.components.vla_client import VlaClient

    try:
        obs = tiny_observation("libero", 1, image_size, seed=seed)
        with VlaClient(ep, timeout=600) as c:
            for _ in range(warmup):
                c.predict(obs)
            barrier.wait(timeout=300)
            for _ in range(per):
                c.predict(obs)
        q.put("")
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        q.put(repr(exc))


def start_server(extra: list[str], args, env_extra: dict | None = None, root: Path | None = None) -> tuple[subprocess.Popen, str, float]:
    """Start the Pi0.5 server of checkout ``root`` (default: this one) and wait for its readiness line."""
    t0 = time.perf_counter()
    env = dict(os.environ, **(env_extra or {}))
    root = Path(root or REPO)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--embodiment", "libero",
                          "--transport", args.transport, "--port", "0", *extra],
                         stdout=subprocess.PIPE, stderr=None if args.verbose else subprocess.DEVNULL, text=True, env=env, cwd=root)
    line = p.stdout.readline()
    if not line.startswith("RPC server listening on "):
        p.kill()
        raise RuntimeError(f"server failed to start: {line!r}")
    return p, line.split()[-1], time.perf_counter() - t0


def stop_server(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()


def bench_server(server_args: list[str], name: str, args, results, env_extra: dict | None = None, root: Path | None = None,
                 throughput: bool = True) -> None:
    """One server process: launch -> readiness line -> first action (the cold start), e2e B=1 latency, and
    with ``throughput`` the closed-loop throughput of ``--clients`` client processes. A server that fails
    is reported under ``server_<name>`` and the benchmark goes on."""
    import traceback

    try:
        _bench_server(server_args, name, args, results, env_extra, root, throughput)
    except Exception as exc:  # noqa: BLE001 - one failed server must not lose the other figures
        traceback.print_exc()
        results[f"server_{name}_failed"] = repr(exc)
        print(f"  server {name}: FAILED {exc!r}", flush=True)


def _bench_server(server_args, name, args, results, env_extra, root, throughput) -> None:
    from rpent.robots.components.vla_client import VlaClient

    p, ep, ready_s = start_server(server_args, args, env_extra, root)
    try:
        obs1 = tiny_observation("libero", 1, args.image_size, seed=0)
        t0 = time.perf_counter()
        with VlaClient(ep, timeout=600) as c:
            c.predict(obs1)
            first_s = time.perf_counter() - t0
            r = timed(lambda: c.predict(obs1), args.iters, args.warmup)
            b1_timing = c.rpc.call("vla.stats").get("timing_ms")
        entry = {"ready_s": ready_s, "first_action_after_ready_s": first_s, "cold_start_s": ready_s + first_s, "e2e_b1": r}
        print(f"  server {name}: ready {ready_s:.1f} s, first action +{first_s:.2f} s, e2e B=1 {r['median_ms']:.2f} ms "
              f"(server-side stages ms: {b1_timing})", flush=True)
        if not throughput:
            entry["timing_ms_b1"] = b1_timing
            results[f"server_{name}"] = entry
            return
        n, per = args.clients, args.requests_per_client
        # one process per client (like env workers): client-side GIL contention must not cap the figure
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(n + 1)
        q = ctx.Queue()
        procs = [ctx.Process(target=_client_proc, args=(ep, i, per, barrier, q, 5, args.image_size), daemon=True) for i in range(n)]
        [p_.start() for p_ in procs]
        barrier.wait(timeout=300)
        t0 = time.perf_counter()
        errors = [e for e in (q.get(timeout=600) for _ in procs) if e]
        el = time.perf_counter() - t0
        [p_.join(10) for p_ in procs]
        with VlaClient(ep) as c:
            stats = c.rpc.call("vla.stats")
        entry["throughput"] = {"clients": n, "requests": n * per, "seconds": el, "inferences_per_s": n * per / el,
                               "mean_batch_rows": stats["mean_batch_rows"], "recent_batch_rows": stats["recent_batch_rows"],
                               "timing_ms": stats.get("timing_ms"), "gpu_ms": stats.get("gpu_ms"), "gpu_busy": stats.get("gpu_busy"),
                               "errors": errors[:3]}
        entry["timing_ms_b1"] = b1_timing
        gpu = (f"; GPU {stats['gpu_ms']:.2f} ms per model call, busy {100 * stats.get('gpu_busy', float('nan')):.1f} % of the time"
               if stats.get("gpu_ms") else "")
        print(f"  server {name}: {n} clients -> {n * per / el:.1f} inferences/s (recent batch rows {stats['recent_batch_rows'][-12:]}{gpu})", flush=True)
        results[f"server_{name}"] = entry
    finally:
        stop_server(p)


def write_random_checkpoint(cfg, directory: Path, dtype) -> Path:
    """A full checkpoint directory on local disk with random weights (cold start from disk)."""
    directory.mkdir(parents=True, exist_ok=True)
    save_checkpoint_tensors(random_tensors(cfg, "cuda" if torch.cuda.is_available() else "cpu", dtype, seed=0), directory, "openpi")
    (directory / "config.json").write_text(json.dumps({"paligemma_variant": cfg.paligemma_variant, "action_expert_variant": cfg.action_expert_variant}))
    (directory / "norm_stats.json").write_text(json.dumps(tiny_norm_stats(8, 7)))
    (directory / "tokenizer.model").write_bytes(tiny_tokenizer_bytes())
    return directory


def drop_page_cache(args) -> str:
    """With ``--drop-caches`` (root on Linux): flush dirty pages and drop the page cache, so the next
    checkpoint read comes from the disk. Returns what happened, for the results."""
    if not args.drop_caches:
        return "warm (not dropped)"
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "dropped"
    except OSError as exc:
        return f"could not drop ({exc.strerror or exc}): warm"


# ---------------------------------------------------------------------------- main


def save(results: dict, args) -> None:
    """Write the results so far to ``--out`` atomically (also after each section: a killed run keeps them)."""
    if not args.out:
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(json.dumps(results, indent=2, default=str))
    os.replace(tmp, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--random-weights", action="store_true", help="full-size architecture with random weights (default when not --tiny)")
    ap.add_argument("--tiny", action="store_true", help="tiny architecture (CPU smoke run)")
    ap.add_argument("--device", default=None, help="cuda:0 / cpu (default: cuda:0 if available)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16, help="batch size for the batched model figure")
    ap.add_argument("--prompt-tokens", type=int, default=16, help="prompt length for in-process figures (LIBERO: 10-21)")
    ap.add_argument("--num-flow-steps", type=int, default=5)
    ap.add_argument("--action-horizon", type=int, default=10)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests-per-client", type=int, default=20)
    ap.add_argument("--transport", choices=("http", "socket"), default="http")
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--skip-eager-server", action="store_true", help="only the graph server")
    ap.add_argument("--skip-baseline-server", action="store_true", help="skip the graph server without pipelining (baseline)")
    ap.add_argument("--server-variant", action="append", default=[],
                    help="also run the graph server with these extra arguments, e.g. '--max-batch 16' (repeatable)")
    ap.add_argument("--cold-start-from-disk", action="store_true", help="also start a server from a full random checkpoint written to local disk")
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before each from-disk cold start (root)")
    ap.add_argument("--compare-root", action="append", default=[],
                    help="also run the graph server and the from-disk cold starts with the server of this checkout "
                         "(baseline rows in the same run)")
    ap.add_argument("--precision", choices=("bf16", "fp8", "both"), default="both",
                    help="model and server figures in bf16, FP8 (GPUs with FP8 tensor cores) or both (default)")
    ap.add_argument("--disk-throughput", action="store_true",
                    help="also measure the clients' throughput on every from-disk server (default: cold start and e2e only)")
    ap.add_argument("--lerobot", action="store_true", help="compare with lerobot's PI05Pytorch if importable (latency + parity)")
    ap.add_argument("--lerobot-compile", action="store_true", help="also time lerobot under torch.compile (long warm-up)")
    ap.add_argument("--skip-model", action="store_true", help="skip the in-process model figures")
    ap.add_argument("--server-extra", default="", help="extra server arguments, e.g. '--max-batch 8 --batch-window-ms 5'")
    ap.add_argument("--verbose", action="store_true", help="show server stderr")
    ap.add_argument("--profile", action="store_true", help="print the top GPU kernels of one eager B=1 call")
    ap.add_argument("--skip-kernel-check", action="store_true", help="skip the fused-kernel vs reference check")
    ap.add_argument("--image-size", type=int, default=256, help="client image size for the server figures (224 skips the resize)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()

    device, dtype = default_device_dtype(args.device)
    base = tiny_config() if args.tiny else full_config()
    cfg = base.replace(action_horizon=args.action_horizon, num_flow_steps=args.num_flow_steps)
    results: dict = {
        "config": {"size": "tiny" if args.tiny else "full", "device": str(device), "dtype": str(dtype), "views": 2,
                   "prompt_tokens": args.prompt_tokens, "action_horizon": cfg.action_horizon, "num_flow_steps": cfg.num_flow_steps,
                   "torch": torch.__version__, "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                   "parameters": parameter_counts(cfg)},
    }
    print(f"Pi0.5 bench: {results['config']['size']} on {device} ({dtype}), 2 views, T={args.prompt_tokens}, H={cfg.action_horizon}, N={cfg.num_flow_steps}")
    print(f"  parameters used at inference: {results['config']['parameters']['used_at_inference'] / 1e9:.3f} B")
    if device.type == "cuda" and fused.available() and not args.skip_kernel_check:
        vla_checks.check_kernels(device, results)
        vla_checks.check_linear_kernels(device, results)
    results["config"]["fused_kernels"] = fused.available() and device.type == "cuda"
    if not args.skip_model:
        try:
            model = bench_model(cfg, device, dtype, args, results)
        except Exception as exc:  # noqa: BLE001 - keep the server figures
            import traceback

            traceback.print_exc()
            results["model_failed"] = repr(exc)
            model = None
        save(results, args)
        if args.lerobot and not args.tiny and model is not None:
            bench_lerobot(cfg, device, args, results, model)
            save(results, args)
        del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if not args.skip_server:
        size = ["--random-weights", "tiny" if args.tiny else "full"]
        common = ["--num-flow-steps", str(cfg.num_flow_steps), "--action-horizon", str(cfg.action_horizon), *args.server_extra.split()]
        if device.type == "cpu":
            common.append("--cpu")
        if device.type == "cuda" and not fused.available():
            common.append("--no-fused-kernels")
        if fused._DISABLED_OPS:  # noqa: SLF001 - ops that failed the check stay off in the servers too
            os.environ["RPENT_PI05_FUSED_OFF"] = ",".join(sorted(fused._DISABLED_OPS))  # noqa: SLF001
        fp8_ok = device.type == "cuda" and args.precision in ("fp8", "both") and vla_checks.fp8_supported(device) is None
        if device.type == "cuda":
            bench_server(size + common, "graph", args, results)
            save(results, args)
            if fp8_ok:
                bench_server(size + common + ["--precision", "fp8"], "graph_fp8", args, results)
                save(results, args)
            for i, root in enumerate(args.compare_root):  # the same figures from another checkout's server, same run
                bench_server(size + common, f"graph_baseline{i or ''}", args, results, root=Path(root))
                save(results, args)
            if not args.skip_baseline_server:  # same run, the batch worker waiting for each batch
                bench_server(size + common + ["--no-pipeline"], "graph_no_pipeline", args, results)
                save(results, args)
            for extra in filter(None, args.server_variant):
                bench_server(size + common + extra.split(), "graph" + extra.replace(" ", "").replace("--", "_"), args, results)
                save(results, args)
        if not args.skip_eager_server or device.type != "cuda":
            bench_server(size + common + ["--no-cuda-graphs"], "eager", args, results)
        if args.cold_start_from_disk:
            d = Path(tempfile.mkdtemp(prefix="pi05_random_ckpt_"))
            t0 = time.perf_counter()
            write_random_checkpoint(cfg, d, dtype)
            print(f"  wrote random checkpoint to {d} in {time.perf_counter() - t0:.1f} s")
            ckpts = [(d, "")]
            if fp8_ok:
                from rpent.models.pi05.fp8 import convert_checkpoint

                t0 = time.perf_counter()
                d8 = convert_checkpoint(d, Path(tempfile.mkdtemp(prefix="pi05_fp8_ckpt_")), device=str(device))
                torch.cuda.empty_cache()
                results["fp8_checkpoint"] = {"convert_s": time.perf_counter() - t0, "bytes": (d8 / "model.safetensors").stat().st_size,
                                             "bf16_bytes": (d / "model.safetensors").stat().st_size}
                print(f"  FP8 checkpoint {d8}: {results['fp8_checkpoint']['bytes'] / 1e9:.2f} GB "
                      f"(bf16 {results['fp8_checkpoint']['bf16_bytes'] / 1e9:.2f} GB), converted in "
                      f"{results['fp8_checkpoint']['convert_s']:.1f} s", flush=True)
                ckpts.insert(0, (d8, "_fp8"))
            # a fresh Triton cache: the cold start includes compiling the fused kernels, as on a new machine;
            # then a restart on a machine that ran the server before (the Triton cache the first run filled).
            # --compare-root: the same two starts of another checkout's server from the bf16 checkpoint.
            runs = [(ck, None, tag) for ck, tag in ckpts] + [(d, Path(r), f"_baseline{i or ''}") for i, r in enumerate(args.compare_root)]
            for ck, root, tag in runs:
                first_cache = tempfile.mkdtemp(prefix="triton_cold_")
                for name in ("from_disk" + tag, "from_disk_warm_triton_cache" + tag):
                    results[f"page_cache_{name}"] = drop_page_cache(args)
                    bench_server(["--model-path", str(ck)] + common + (["--cpu"] if device.type == "cpu" else []), name, args,
                                 results, env_extra={"TRITON_CACHE_DIR": first_cache}, root=root, throughput=args.disk_throughput)
                    save(results, args)
    if args.lerobot and args.lerobot_compile and device.type == "cuda" and not args.tiny:
        save(results, args)
        bench_lerobot(cfg, device, args, results, None, compile_only=True)
    print("\n| figure | value |\n|---|---|")
    if "fused_vs_reference_max_abs_diff" in results:
        print(f"| fused kernels vs reference, max abs diff (normalised, bf16) | {results['fused_vs_reference_max_abs_diff']:.3e} |")
    if "fp8_parity" in results:
        e = results["fp8_parity"]
        print(f"| FP8 vs bf16, normalised actions (B={e['batch']}) | max abs diff {e['max_abs_diff']:.3e}, "
              f"mean {e['mean_abs_diff']:.3e} |")
    for k, v in results.items():
        if k.startswith("model_") and isinstance(v, dict):
            print(f"| {k} | {v['median_ms']:.2f} ms ({v['per_sample_ms']:.2f} ms/sample) |")
        elif k.startswith("server_") and isinstance(v, dict):
            print(f"| {k} e2e B=1 | {v['e2e_b1']['median_ms']:.2f} ms |")
            if "throughput" in v:
                t = v["throughput"]
                gpu = f", GPU {t['gpu_ms']:.1f} ms/call busy {100 * (t.get('gpu_busy') or 0):.0f} %" if t.get("gpu_ms") else ""
                print(f"| {k} throughput ({t['clients']} clients) | {t['inferences_per_s']:.1f} inf/s{gpu} |")
            print(f"| {k} cold start (launch -> first action) | {v['cold_start_s']:.1f} s (ready {v['ready_s']:.1f} s) |")
        elif k == "lerobot":
            for dn, e in v.items() if isinstance(v, dict) else []:
                if isinstance(e, dict) and "max_abs_diff_normalized" in e:
                    print(f"| lerobot parity {dn} | max abs diff {e['max_abs_diff_normalized']:.3e} |")
                if isinstance(e, dict) and "eager" in e:
                    print(f"| lerobot eager B=1 | {e['eager']['median_ms']:.2f} ms |")
                pass
        elif k == "lerobot_compiled" and "compiled" in v:
            print(f"| lerobot compiled B=1 | {v['compiled']['median_ms']:.2f} ms (warm-up {v['compile_warmup_s']:.0f} s) |")
    save(results, args)
    if args.out:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
