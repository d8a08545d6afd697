"""Pi0.5 VLA server: our PyTorch Pi0.5 behind the rpent RPC layer, with dynamic batching.

Usage::

    export PI05_CHECKPOINT_PATH=/path/to/rlinf-pi05-libero-130-fullshot-sft
    python -m rpent.robots.components.pi05_vla_server --embodiment libero --cuda-device 0 \\
        --transport http --host 127.0.0.1 --port 8210 [--model-path DIR] [--tokenizer-path FILE]

Methods (docs/interfaces.md, "VLA predict contract"):

* ``vla.predict(observation, options=None)`` (alias ``predict``) -> float32 [B, n_exec, action_dim] in
  environment units. ``options``: ``noise_source`` ("server" default / "observation": use
  ``observation["noise"]`` [B, H, 32]), ``seed`` (server noise from this seed), ``num_flow_steps``
  (must equal the configured steps).
* ``vla.metadata()`` -> {embodiment, action_dim, action_horizon, n_exec, num_flow_steps, num_views,
  image_size, ...}.
* ``vla.stats()`` -> {batches_run, mean_batch_rows, recent_batch_rows, graph_captures, eager_calls, timing_ms: median
  ms of the server-side stages prepare / batch (queue + model) / finish}.

On CUDA the layers run as fused Triton kernels (``--no-fused-kernels`` for plain PyTorch) inside one CUDA
graph per batch bucket and prompt length; H200 figures are in ``benchmarks/vla_bench.py``.

Concurrent requests from several clients are collected for up to ``--batch-window-ms`` (only while
more are expected) and run as one batched model call; each client gets its own rows back. The
readiness line is printed after the model is loaded and warmed up, so "launch -> ready" is the cold start.
The first request runs eagerly and the next request of its shape captures its CUDA graph (later shapes are
captured at their first request), so the first action does not wait for a graph capture (``--capture-before-ready``
captures the batch-1 graphs before the readiness line instead). ``--precision fp8`` serves FP8 (E4M3)
Gemma weights (:mod:`rpent.models.pi05.fp8`; an FP8 checkpoint is read as such, half the bytes of its
projections). A checkpoint's safetensors files are read into the page cache by background threads from the start of
``main()`` (:mod:`rpent.models.prefetch`; ``RPENT_PI05_PREFETCH=0`` turns it off), so the disk read overlaps
the torch import and the CUDA context; the log names each start-up phase with its seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import deque
from typing import TYPE_CHECKING

from rpent.models.pi05.batching import DynamicBatcher
from rpent.models.pi05.embodiments import EMBODIMENTS
from rpent.models.pi05.settings import PRECISIONS, ConfigCheckError, resolve_settings
from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args

if TYPE_CHECKING:  # torch is imported only once the arguments are known to be usable
    from rpent.models.pi05.policy import Pi05Policy

CHECKPOINT_ENV = "PI05_CHECKPOINT_PATH"


def _log(msg: str) -> None:
    print(f"pi05_vla_server: {msg}", file=sys.stderr, flush=True)


class Pi05VlaServer(RpcServer):
    """RPC server around a policy with the predict stages of :class:`Pi05Policy`.

    Any object with ``prepare(observation, options) -> request`` (thread-safe, with ``batch_size``
    and ``shape_key``), ``run_prepared(list[request]) -> list[normalised chunk]`` (one worker thread),
    ``finish(request, normalised) -> actions`` and ``metadata() -> dict`` can be served; the APXInf
    adapter (:mod:`rpent.robots.components.apxinf_vla_server`) reuses this class that way.

    Args:
        policy: the loaded policy.
        batch_window_s: longest gap between arrivals while gathering concurrent requests (s).
        max_batch: most rows per model call (requests beyond are split or queued).
        batch_max_wait_s: longest total gathering time (s).
        initializer: run once on the batch worker thread before serving (thread-bound model
            handles load there); the constructor waits for it and re-raises its exception.
        name: service name reported by ``healthz``.
        pipeline: gather and launch the next batch while the current one runs, when the policy has
            ``launch_prepared`` (see :mod:`rpent.models.pi05.batching`); ``--no-pipeline`` turns it off.
    """

    def __init__(self, policy: "Pi05Policy", batch_window_s: float = 0.008, max_batch: int = 8, batch_max_wait_s: float = 0.04,
                 initializer=None, name: str = "pi05_vla_server", pipeline: bool = True):
        super().__init__(name=name)
        self.policy = policy
        launch = getattr(policy, "launch_prepared", None) if pipeline else None
        self.batcher = DynamicBatcher(policy.run_prepared, window_s=batch_window_s, max_batch=max_batch, max_wait_s=batch_max_wait_s,
                                      initializer=initializer, launch=launch)
        self.batcher.wait_ready()
        self._timings: deque = deque(maxlen=256)
        self.register("vla.predict", self.predict, readonly=True)
        self.register("predict", self.predict, readonly=True)
        self.register("vla.metadata", self.metadata, readonly=True)
        self.register("vla.stats", self.stats, readonly=True)

    def predict(self, observation: dict, options: dict | None = None):
        """See the module docstring. Raises ObservationError / ConfigCheckError for bad requests."""
        t0 = time.perf_counter()
        req = self.policy.prepare(observation, options)
        t1 = time.perf_counter()
        normalized = self.batcher.submit(req, rows=req.batch_size, key=req.shape_key)
        t2 = time.perf_counter()
        out = self.policy.finish(req, normalized)
        self._timings.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        return out

    def metadata(self) -> dict:
        """``vla.metadata``."""
        return self.policy.metadata()

    def stats(self) -> dict:
        """Batching statistics: model calls run and rows per call (graph_captures: 0 without a CUDA-graph runner;
        eager_calls: first calls of a shape answered without a graph), and ``timing_ms``: median ms per request over the last 256 of validation+tokenisation (``prepare``),
        waiting for and running the batched model call (``batch``) and un-normalisation (``finish``); with
        CUDA graphs also ``gpu_ms`` (median GPU ms per model call) and ``gpu_busy`` (GPU time over wall
        time across the recent calls, :meth:`Pi05Runner.gpu_stats`)."""
        sizes = list(self.batcher.batch_sizes)
        runner = getattr(self.policy, "runner", None)
        tm = list(self._timings)
        timing = {k: 1e3 * statistics.median(t[i] for t in tm) if tm else 0.0 for i, k in enumerate(("prepare", "batch", "finish"))}
        return {
            "timing_ms": timing,
            "batches_run": self.batcher.batches_run,
            "mean_batch_rows": (sum(sizes) / len(sizes)) if sizes else 0.0,
            "recent_batch_rows": sizes[-32:],
            "graph_captures": getattr(runner, "graph_captures", 0),
            "eager_calls": getattr(runner, "eager_calls", 0),
            **(runner.gpu_stats() if hasattr(runner, "gpu_stats") else {}),
        }

    def close(self) -> None:
        """Stop the batch worker."""
        self.batcher.close()


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (RPC options come from :func:`rpent.rpc.cli.add_server_args`)."""
    ap = argparse.ArgumentParser(prog="python -m rpent.robots.components.pi05_vla_server", description=__doc__.split("\n")[0])
    ap.add_argument("--embodiment", choices=sorted(EMBODIMENTS), default="libero", help="robot preset (default libero)")
    ap.add_argument("--model-path", default=None, help=f"checkpoint directory (default ${CHECKPOINT_ENV})")
    ap.add_argument("--tokenizer-path", default=None, help="PaliGemma SentencePiece model (default: found in the checkpoint directory)")
    ap.add_argument("--cuda-device", type=int, default=0, help="CUDA device index (default 0); CPU float32 when CUDA is unavailable")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU in float32 even when CUDA is available")
    ap.add_argument("--num-flow-steps", type=int, default=None, help="Euler steps (default: preset, 5)")
    ap.add_argument("--action-horizon", type=int, default=None, help="predicted actions per chunk (default: preset)")
    ap.add_argument("--n-exec", type=int, default=None, help="actions returned per query (default: preset)")
    ap.add_argument("--state-in-prompt", choices=("auto", "yes", "no"), default="auto",
                    help="discrete state in the prompt (auto: checkpoint config, else preset; pi05_libero_base/RLinf: no)")
    ap.add_argument("--batch-window-ms", type=float, default=8.0,
                    help="dynamic batching: longest gap between arriving requests while collecting a batch (default 8 ms; "
                         "a lone client never waits)")
    ap.add_argument("--batch-max-wait-ms", type=float, default=40.0, help="dynamic batching: longest total collection time (default 40 ms)")
    ap.add_argument("--max-batch", type=int, default=8,
                    help="largest batch per model call (default 8: with 16 closed-loop clients two alternating batches of 8, "
                         "one gathered while the other runs; benchmarks/vla_bench.py measures the throughput)")
    ap.add_argument("--no-pipeline", action="store_true",
                    help="wait for each batch before gathering the next (the pre-pipelining baseline of benchmarks/vla_bench.py)")
    ap.add_argument("--no-cuda-graphs", action="store_true", help="run the sampler eagerly (baseline)")
    ap.add_argument("--no-fused-kernels", action="store_true",
                    help="use the plain PyTorch ops instead of the fused Triton kernels on CUDA (same as RPENT_PI05_FUSED=0)")
    ap.add_argument("--precision", choices=("auto", *PRECISIONS), default="auto",
                    help="fp8: FP8 (E4M3, per-channel scales) Gemma prefix and action-expert weights, on GPUs with FP8 "
                         "tensor cores (compute capability >= 8.9; refused elsewhere); bf16: bf16 weights (float32 on the "
                         "CPU); auto (default): fp8 for an FP8 checkpoint (python -m rpent.models.pi05.fp8) on such a GPU, "
                         "else bf16")
    ap.add_argument("--capture-before-ready", action="store_true",
                    help="capture the batch-1 CUDA graphs before the readiness line (default: the first request runs "
                         "eagerly and the next one of its shape captures its graph, so the first action comes sooner)")
    ap.add_argument("--random-weights", choices=("full", "tiny"), default=None,
                    help="benchmarking only: no checkpoint, seeded random weights of the full or tiny architecture")
    add_server_args(ap)
    return ap


def check_args(args: argparse.Namespace) -> None:
    """Fail fast, before torch is imported: no checkpoint configured, or contradictory settings.

    Raises:
        SystemExit(2): with the reason and the fix on stderr.
    """
    if not args.random_weights and not (args.model_path or os.environ.get(CHECKPOINT_ENV)):
        _log(f"no checkpoint: pass --model-path DIR or set {CHECKPOINT_ENV} to a Pi0.5 checkpoint directory "
             "(config.json, model.safetensors, norm_stats.json, tokenizer)")
        raise SystemExit(2)
    try:
        resolve_settings(args.embodiment, args.action_horizon, args.n_exec, args.num_flow_steps, args.state_in_prompt)
    except ConfigCheckError as exc:
        _log(str(exc))
        raise SystemExit(2) from None


def load_policy(args: argparse.Namespace) -> "Pi05Policy":
    """Build the policy from the parsed arguments (imports torch).

    Raises:
        SystemExit(2): the checkpoint cannot be loaded (the message says why and how to fix).
    """
    import torch

    from rpent.models.pi05.fp8 import Fp8NotSupportedError
    from rpent.models.pi05.policy import Pi05Policy

    if args.cpu or not torch.cuda.is_available():
        device = "cpu"
        if not args.cpu:
            _log("CUDA is not available: running on the CPU in float32 (slow for the full-size model)")
    else:
        if args.cuda_device >= torch.cuda.device_count():
            _log(f"--cuda-device {args.cuda_device} does not exist ({torch.cuda.device_count()} CUDA device(s) visible)")
            raise SystemExit(2)
        device = f"cuda:{args.cuda_device}"
        torch.cuda.set_device(device)
    graphs = not args.no_cuda_graphs
    if args.no_fused_kernels:
        from rpent.models.pi05 import fused

        fused.set_enabled(False)
    overrides = dict(action_horizon=args.action_horizon, n_exec=args.n_exec, num_flow_steps=args.num_flow_steps)
    if args.random_weights:
        import tempfile
        from pathlib import Path

        from rpent.models.pi05.config import full_config, tiny_config
        from rpent.models.pi05.normalization import NormStats
        from rpent.models.pi05.tiny import tiny_norm_stats, tiny_tokenizer_bytes

        preset = EMBODIMENTS[args.embodiment]
        tok = Path(tempfile.mkdtemp(prefix="pi05_tok_")) / "tokenizer.model"
        tok.write_bytes(tiny_tokenizer_bytes())
        cfg = full_config() if args.random_weights == "full" else tiny_config()
        _log(f"RANDOM WEIGHTS ({args.random_weights} architecture): for benchmarks only, actions are meaningless")
        try:
            return Pi05Policy.random_weights(cfg, tok, NormStats.from_dict(tiny_norm_stats(preset.state_dim, preset.action_dim)),
                                             args.embodiment, device, graphs, precision=args.precision, **overrides)
        except Fp8NotSupportedError as exc:
            _log(str(exc))
            raise SystemExit(2) from None
    path = args.model_path or os.environ.get(CHECKPOINT_ENV)
    try:
        return Pi05Policy.from_checkpoint(path, args.embodiment, args.tokenizer_path, device,
                                          state_in_prompt=args.state_in_prompt, use_cuda_graphs=graphs, log=_log,
                                          precision=args.precision, **overrides)
    except Fp8NotSupportedError as exc:
        _log(str(exc))
        raise SystemExit(2) from None
    except (ValueError, RuntimeError, OSError) as exc:
        _log(f"cannot load the checkpoint: {exc}")
        raise SystemExit(2) from None


def start_checkpoint_prefetch(args: argparse.Namespace):
    """Start reading the checkpoint's safetensors files into the page cache (before torch is imported, so
    the disk read overlaps the torch import and the CUDA context; :mod:`rpent.models.prefetch`). Returns the
    :class:`rpent.models.prefetch.Prefetch`, or None (random weights, ``--cpu``, ``RPENT_PI05_PREFETCH=0``,
    or no directory: the loader then reports the problem)."""
    path = args.model_path or os.environ.get(CHECKPOINT_ENV)
    if args.random_weights or args.cpu or not path or os.environ.get("RPENT_PI05_PREFETCH", "1") == "0":
        return None
    from pathlib import Path

    from rpent.models.prefetch import start_prefetch

    d = Path(path)
    single = d / "model.safetensors"  # the loader's choice (rpent.models.pi05.checkpoint.safetensors_files)
    files = [single] if single.is_file() else sorted(p for p in d.glob("*.safetensors") if p.is_file())
    return start_prefetch(files, threads=int(os.environ.get("RPENT_PI05_PREFETCH_THREADS", "4"))) if files else None


def main(argv: list[str] | None = None) -> None:
    """Entry point: load, warm up, print the readiness line, serve until shutdown."""
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    check_args(args)
    prefetch = start_checkpoint_prefetch(args)
    t_torch = time.perf_counter()
    import torch

    if not args.cpu and torch.cuda.is_available() and args.cuda_device < torch.cuda.device_count():
        torch.cuda.init()  # the CUDA context, while the prefetch threads keep the disk busy
    _log(f"torch import + CUDA init {time.perf_counter() - t_torch:.1f} s"
         + (f" ({prefetch.summary()})" if prefetch is not None else ""))
    policy = load_policy(args)
    if prefetch is not None:
        _log(prefetch.summary())
    meta = policy.metadata()
    if policy.model.device.type == "cuda" and args.capture_before_ready:
        t1 = time.perf_counter()
        for side in sorted({meta["image_size"], 256}):  # the model size and LIBERO's 256 px policy views
            policy.runner.warmup(meta["num_views"], (side, side))
        _log(f"warm-up (B=1 graph capture) {time.perf_counter() - t1:.1f} s")
    else:
        policy.runner.lazy_capture = True  # the first request eagerly, its graph at the next one
    _log(f"ready in {time.perf_counter() - t0:.1f} s: {meta}")
    server = Pi05VlaServer(policy, batch_window_s=args.batch_window_ms / 1000.0, max_batch=args.max_batch,
                           batch_max_wait_s=args.batch_max_wait_ms / 1000.0, pipeline=not args.no_pipeline)
    try:
        serve_from_args(server, args)
    finally:
        server.close()


if __name__ == "__main__":
    main()
