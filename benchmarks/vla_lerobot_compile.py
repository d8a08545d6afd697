"""lerobot 0.6.1's Pi0.5 through its own ``compile_model=True`` path against rpent's Pi0.5, same H200 run.

lerobot's best setting: ``PI05Config(compile_model=True)`` makes ``PI05Pytorch`` call
``torch.set_float32_matmul_precision("high")`` (TF32 for its float32 SigLIP/projector/norms) and wrap
``sample_actions`` in ``torch.compile(mode=compile_mode)``; we pass ``compile_mode="reduce-overhead"``
(CUDA graphs; lerobot's default "max-autotune" adds GEMM autotuning on top, whose warm-up does not fit
one 10-minute device call). Random weights (the same tensors for both), bf16, B=1, 2 views, chunk 10,
5 flow steps, at 16 text tokens and at lerobot's default 200-token padding (16 real + 184 masked).

The two lerobot shapes compile in two processes at once (the warm-up is CPU-bound, ~200 s each);
their timings run one after the other once both are compiled (``--sync-dir`` files), so the GPU is
never shared while timing. The ``first`` process also times rpent's model (CUDA graphs) at T=16 and
T=200 and lerobot eager at its shape::

    python benchmarks/vla_lerobot_compile.py --text-len 16 --role first --sync-dir /tmp/s --out a.json &
    python benchmarks/vla_lerobot_compile.py --text-len 200 --role second --sync-dir /tmp/s --out b.json
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

from rpent.models.pi05.checkpoint import random_tensors  # noqa: E402
from rpent.models.pi05.config import full_config  # noqa: E402
from rpent.models.pi05.model import Pi05Model  # noqa: E402
from rpent.models.pi05.sampling import Pi05Runner  # noqa: E402


def timed(fn, iters):
    ts = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def wait_for(path: Path, timeout=560):
    t0 = time.time()
    while not path.exists():
        if time.time() - t0 > timeout:
            raise TimeoutError(f"no {path}")
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text-len", type=int, default=16, help="lerobot's text length: 16, or 200 = 16 real + 184 masked")
    ap.add_argument("--real-tokens", type=int, default=16)
    ap.add_argument("--role", choices=("first", "second"), default="first")
    ap.add_argument("--sync-dir", default="/tmp/lerobot_sync")
    ap.add_argument("--compile-mode", default="reduce-overhead")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from lerobot.policies.pi05.configuration_pi05 import PI05Config
    from lerobot.policies.pi05.modeling_pi05 import PI05Pytorch

    sync = Path(args.sync_dir)
    sync.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda:0")
    cfg = full_config().replace(action_horizon=10, num_flow_steps=5)
    hz, n, t = cfg.action_horizon, cfg.num_flow_steps, args.text_len
    g = torch.Generator().manual_seed(1)
    images_u8 = torch.randint(0, 256, (1, 2, 224, 224, 3), dtype=torch.uint8, generator=g)
    ids = torch.randint(10, 250000, (1, t), generator=g)
    tmask = torch.zeros(1, t, dtype=torch.bool)
    tmask[:, : min(t, args.real_tokens)] = True
    noise = torch.randn(1, hz, 32, generator=g)
    res = {"text_len": t, "real_tokens": int(tmask.sum()), "compile_mode": args.compile_mode}
    conf = PI05Config(dtype="bfloat16", chunk_size=hz, n_action_steps=5, num_inference_steps=n, device=str(dev),
                      compile_model=True, compile_mode=args.compile_mode)
    with torch.device(dev):
        lr = PI05Pytorch(conf)
    tensors = random_tensors(cfg, dev, torch.bfloat16, seed=0)
    lr.load_state_dict(tensors, strict=False)
    del tensors
    lr.eval()
    imgs = images_u8.to(dev).permute(0, 1, 4, 2, 3).float() / 127.5 - 1.0
    img_list = [imgs[:, i].to(torch.bfloat16) for i in range(2)]
    masks = [torch.ones(1, dtype=torch.bool, device=dev)] * 2
    tok, tm, nz = ids.to(dev), tmask.to(dev), noise.to(dev)

    def run():
        with torch.no_grad():
            return lr.sample_actions(img_list, masks, tok, tm, noise=nz, num_steps=n)

    t0 = time.perf_counter()
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    res["lerobot_compile_warmup_s"] = time.perf_counter() - t0
    print(f"[T={t}] lerobot compile_model=True ({args.compile_mode}) warm-up {res['lerobot_compile_warmup_s']:.0f} s", flush=True)
    (sync / f"ready_{args.role}").write_text("1")
    wait_for(sync / "ready_first")
    wait_for(sync / "ready_second")
    if args.role == "second":
        wait_for(sync / "done_first")
    res["lerobot_compiled_ms"] = timed(run, args.iters)
    print(f"[T={t}] lerobot compile_model=True B=1: {res['lerobot_compiled_ms']:.2f} ms", flush=True)
    eager = getattr(lr.sample_actions, "_torchdynamo_orig_callable", None)
    if eager is not None:
        with torch.no_grad():
            res["lerobot_eager_tf32_ms"] = timed(lambda: eager(img_list, masks, tok, tm, noise=nz, num_steps=n), 5)
        print(f"[T={t}] lerobot eager (TF32 on) B=1: {res['lerobot_eager_tf32_ms']:.2f} ms", flush=True)
    if args.role == "first":
        del lr
        torch.cuda.empty_cache()
        model = Pi05Model.random(cfg, dev, torch.bfloat16, seed=0)
        runner = Pi05Runner(model)
        rng = np.random.default_rng(0)
        for tt in (16, 200):
            x = (rng.integers(0, 256, (1, 2, 224, 224, 3), dtype=np.uint8), [rng.integers(10, 250000, tt).astype(np.int64)],
                 rng.standard_normal((1, hz, 32)).astype(np.float32))
            runner.run(*x)
            res[f"rpent_T{tt}_ms"] = timed(lambda: runner.run(*x), 40)
            print(f"rpent Pi0.5 (CUDA graph) B=1, T={tt}: {res[f'rpent_T{tt}_ms']:.2f} ms", flush=True)
        (sync / "done_first").write_text("1")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
