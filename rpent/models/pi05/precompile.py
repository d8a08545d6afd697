"""Compile the Pi0.5 Triton kernels in a child process while the server loads its checkpoint.

A cold start pays for reading the weights (disk -> GPU) and for compiling the fused Triton kernels
(:mod:`rpent.models.pi05.triton_kernels`) the first time the sampler runs. The two are independent, so
:func:`start` launches ``python -m rpent.models.pi05.precompile`` in a child process: it builds a model
of the same dimensions with random weights on the same GPU, runs the sampler once eagerly per image
size (B=1, the warm-up shapes), and exits. Triton writes every compiled kernel to its on-disk cache
(``TRITON_CACHE_DIR``, inherited), so the server's own warm-up finds them there instead of compiling.
The server waits for the child (:func:`wait`) before its warm-up; a failing child only costs the
overlap (the server then compiles as before). The child needs a second copy of the weights' GPU memory
for a few seconds (6.7 GB full size in bf16); ``--no-precompile`` turns it off.

    python -m rpent.models.pi05.precompile --paligemma-variant gemma_2b --action-expert-variant gemma_300m \\
        --action-horizon 10 --num-flow-steps 5 --views 2 --sizes 224,256 --device cuda:0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def start(cfg, device: str, views: int, sizes: tuple[int, ...], prompt_tokens: int = 16) -> subprocess.Popen | None:
    """Launch the child for ``cfg`` (a :class:`Pi05Config`) on ``device``; None when it cannot start.
    Its output goes to this process's stderr."""
    cmd = [sys.executable, "-m", "rpent.models.pi05.precompile", "--paligemma-variant", cfg.paligemma_variant,
           "--action-expert-variant", cfg.action_expert_variant, "--action-horizon", str(cfg.action_horizon),
           "--num-flow-steps", str(cfg.num_flow_steps), "--views", str(views), "--sizes", ",".join(map(str, sizes)),
           "--prompt-tokens", str(prompt_tokens), "--device", device]
    try:
        return subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, env=dict(os.environ))
    except OSError:
        return None


def wait(proc: subprocess.Popen | None, timeout_s: float = 120.0) -> float | None:
    """Wait for the child; returns the seconds waited, or None without a child. A child still running
    after ``timeout_s`` is killed (the server compiles what is missing itself)."""
    if proc is None:
        return None
    t0 = time.perf_counter()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    """Child entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paligemma-variant", default="gemma_2b")
    ap.add_argument("--action-expert-variant", default="gemma_300m")
    ap.add_argument("--action-horizon", type=int, required=True)
    ap.add_argument("--num-flow-steps", type=int, required=True)
    ap.add_argument("--views", type=int, default=2)
    ap.add_argument("--sizes", default="224")
    ap.add_argument("--prompt-tokens", type=int, default=16)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    import numpy as np
    import torch

    from rpent.models.pi05.config import Pi05Config
    from rpent.models.pi05.model import Pi05Model, default_device_dtype
    from rpent.models.pi05.sampling import Pi05Runner

    cfg = Pi05Config.from_variants(args.paligemma_variant, args.action_expert_variant,
                                   action_horizon=args.action_horizon, num_flow_steps=args.num_flow_steps)
    dev, dtype = default_device_dtype(args.device)
    model = Pi05Model.random(cfg, dev, dtype, seed=0)
    runner = Pi05Runner(model, use_cuda_graphs=False)
    for side in (int(s) for s in args.sizes.split(",")):
        runner.run(np.zeros((1, args.views, side, side, 3), dtype=np.uint8), [np.ones(args.prompt_tokens, dtype=np.int64)],
                   np.zeros((1, cfg.action_horizon, cfg.max_action_dim), dtype=np.float32))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    print(f"pi05 precompile: Triton kernels compiled in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
