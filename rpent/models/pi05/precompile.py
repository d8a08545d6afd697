"""Compile the Pi0.5 Triton kernels in a child process while the server loads its checkpoint.

A cold start pays for reading the weights (disk -> GPU) and for compiling the fused Triton kernels
(:mod:`rpent.models.pi05.triton_kernels`) the first time the sampler runs. The two are independent, so
the server calls :func:`start` first thing: ``python -m rpent.models.pi05.precompile`` in a child
process builds a model of the checkpoint's dimensions with *uninitialised* weights on the same GPU
(no file read, no random numbers), runs the sampler once eagerly per image size (B=1, the warm-up
shapes), and exits. Triton writes every compiled kernel to its on-disk cache
(``TRITON_CACHE_DIR``, inherited), so the server's own warm-up finds them there instead of compiling.
The server waits for the child (:func:`wait`) before its warm-up; a failing child only costs the
overlap (the server then compiles as before). The child needs a second copy of the weights' GPU memory
for a few seconds (6.7 GB full size in bf16); ``--no-precompile`` turns it off.

    python -m rpent.models.pi05.precompile --model-path CKPT_DIR --embodiment libero --sizes 224,256 --device cuda:0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def start(model_path: str, embodiment: str, device: str, sizes: tuple[int, ...] | None = None, action_horizon: int | None = None,
          n_exec: int | None = None, num_flow_steps: int | None = None, prompt_tokens: int = 16) -> subprocess.Popen | None:
    """Launch the child for the checkpoint at ``model_path`` (it reads only ``config.json`` and resolves the
    dimensions, horizon and flow steps as :meth:`Pi05Policy.from_checkpoint` does) on ``device``; None
    when it cannot start. Start it first thing: its interpreter and torch import overlap the caller's.
    ``sizes``: image sides to run (default: the model's and 256, the server's warm-up sizes).
    Its output goes to this process's stderr."""
    cmd = [sys.executable, "-m", "rpent.models.pi05.precompile", "--model-path", str(model_path), "--embodiment", embodiment,
           "--sizes", ",".join(map(str, sizes)) if sizes else "auto", "--prompt-tokens", str(prompt_tokens), "--device", device]
    for flag, v in (("--action-horizon", action_horizon), ("--n-exec", n_exec), ("--num-flow-steps", num_flow_steps)):
        if v is not None:
            cmd += [flag, str(v)]
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
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--embodiment", default="libero")
    ap.add_argument("--action-horizon", type=int, default=None)
    ap.add_argument("--n-exec", type=int, default=None)
    ap.add_argument("--num-flow-steps", type=int, default=None)
    ap.add_argument("--sizes", default="auto", help="image sides, comma-separated (auto: the model's and 256)")
    ap.add_argument("--prompt-tokens", type=int, default=16)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    import numpy as np
    import torch

    from rpent.models.pi05.checkpoint import config_from_checkpoint, expected_tensor_shapes, read_checkpoint_config
    from rpent.models.pi05.model import Pi05Model, default_device_dtype
    from rpent.models.pi05.sampling import Pi05Runner
    from rpent.models.pi05.settings import resolve_settings

    settings = resolve_settings(args.embodiment, args.action_horizon, args.n_exec, args.num_flow_steps, "auto",
                                read_checkpoint_config(args.model_path))
    cfg = config_from_checkpoint(args.model_path, action_horizon=settings.action_horizon, num_flow_steps=settings.num_flow_steps)
    dev, dtype = default_device_dtype(args.device)
    # uninitialised weights of the right shapes: only the kernels' shapes and dtypes matter here
    tensors = {k: torch.empty(shape, device=dev, dtype=dtype) for k, shape in expected_tensor_shapes(cfg).items()}
    model = Pi05Model.from_checkpoint_tensors(cfg, tensors)
    del tensors
    runner = Pi05Runner(model, use_cuda_graphs=False)
    views = settings.preset.num_views
    sizes = sorted({cfg.vision.image_size, 256}) if args.sizes == "auto" else [int(v) for v in args.sizes.split(",")]
    for side in sizes:
        runner.run(np.zeros((1, views, side, side, 3), dtype=np.uint8), [np.ones(args.prompt_tokens, dtype=np.int64)],
                   np.zeros((1, cfg.action_horizon, cfg.max_action_dim), dtype=np.float32))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    print(f"pi05 precompile: Triton kernels compiled in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
