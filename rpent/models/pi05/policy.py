"""Pi05Policy: a loaded checkpoint + tokenizer + norm stats + runner, answering predict requests.

Loading order (each step fails with a message that names the problem and the fix):

1. :func:`verify_checkpoint_dir` prints the OK/MISS list (seed 003) and stops on any MISS;
2. ``config.json`` -> dimensions (variants); the embodiment preset fixes action horizon and flow steps;
3. config checks (seed 003, :mod:`rpent.models.pi05.settings`): ``action_horizon >= n_exec``; a request's
   ``num_flow_steps`` must match the configured steps;
4. every model tensor is read from the safetensors file(s) (missing/unexpected/mis-shaped -> error);
5. the tokenizer (checkpoint dir or ``tokenizer_path``) and ``norm_stats.json`` (checkpoint root), read
   in the normalisation mode ``config.json`` declares (quantile or mean/std, see
   :mod:`rpent.models.pi05.normalization`); the mode in use is logged.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from rpent.models.pi05.checkpoint import (
    config_from_checkpoint,
    load_checkpoint_tensors,
    read_checkpoint_config,
    verify_checkpoint_dir,
)
from rpent.models.pi05.config import Pi05Config
from rpent.models.pi05.fp8 import PRECISIONS, Fp8NotSupportedError, check_fp8_device, is_fp8_checkpoint
from rpent.models.pi05.model import Pi05Model, default_device_dtype
from rpent.models.pi05.normalization import NormStats, declared_norm_modes
from rpent.models.pi05.processor import ObservationError, Pi05Processor, PreparedRequest
from rpent.models.pi05.sampling import Pi05Runner
from rpent.models.pi05.settings import ConfigCheckError, ServingSettings, resolve_settings
from rpent.models.pi05.tokenizer import PromptTokenizer


class Pi05Policy:
    """Predicts env actions for ``vla.predict`` observations.

    Build with :meth:`from_checkpoint` or :meth:`random_weights`. ``prepare`` / ``run_prepared`` /
    ``finish`` are the three stages the server splits across handler threads and the batch worker;
    :meth:`predict` chains them for in-process use.
    """

    def __init__(
        self,
        model: Pi05Model,
        processor: Pi05Processor,
        settings: ServingSettings,
        use_cuda_graphs: bool = True,
        source: str = "",
        layout: str = "",
        batch_buckets: tuple[int, ...] | None = None,
    ):
        self.model = model
        self.processor = processor
        self.settings = settings
        self.runner = Pi05Runner(model, use_cuda_graphs=use_cuda_graphs,
                                 **({"batch_buckets": tuple(batch_buckets)} if batch_buckets else {}))
        self.source = source
        self.layout = layout

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike,
        embodiment: str = "libero",
        tokenizer_path: str | os.PathLike | None = None,
        device: str | torch.device | None = None,
        action_horizon: int | None = None,
        n_exec: int | None = None,
        num_flow_steps: int | None = None,
        state_in_prompt: str = "auto",
        use_cuda_graphs: bool = True,
        log=None,
        batch_buckets: tuple[int, ...] | None = None,
        precision: str = "auto",
    ) -> "Pi05Policy":
        """Load a checkpoint directory (openpi or lerobot layout); see the module docstring.

        Args:
            log: callable(str) for the OK/MISS list and load timings (default: print to stderr).
            batch_buckets: batch sizes the runner captures CUDA graphs for (default
                :data:`rpent.models.pi05.sampling.DEFAULT_BATCH_BUCKETS`; larger batches are split).
            precision: "bf16" (bf16 weights on CUDA, float32 on the CPU), "fp8" (FP8 E4M3 Gemma
                projections, :mod:`rpent.models.pi05.fp8`; CUDA with FP8 tensor cores only), or "auto":
                fp8 for an FP8 checkpoint on such a GPU, else bf16.

        Raises:
            rpent.models.pi05.checkpoint.CheckpointError, ConfigCheckError, NormStatsError, TokenizerError,
            rpent.models.pi05.fp8.Fp8NotSupportedError (``precision="fp8"`` without FP8 tensor cores),
            ValueError (unknown precision).
        """
        log = log or (lambda s: print(s, file=sys.stderr, flush=True))
        report = verify_checkpoint_dir(path, tokenizer_path)
        log(f"checkpoint {report.directory}:")
        for line in report.lines():
            log("  " + line)
        report.raise_if_missing()
        ckpt_cfg = read_checkpoint_config(path)
        settings = resolve_settings(embodiment, action_horizon, n_exec, num_flow_steps, state_in_prompt, ckpt_cfg)
        cfg = config_from_checkpoint(path, action_horizon=settings.action_horizon, num_flow_steps=settings.num_flow_steps)
        dev, dtype = default_device_dtype(device)
        use_fp8 = resolve_precision(precision, dev, is_fp8_checkpoint(ckpt_cfg))
        t0 = time.perf_counter()
        tensors, layout = load_checkpoint_tensors(path, cfg, dev, dtype, fp8=use_fp8)
        model = Pi05Model.from_checkpoint_tensors(cfg, tensors)
        del tensors
        stored = " FP8" if is_fp8_checkpoint(ckpt_cfg) else ""
        log(f"loaded {layout}-layout{stored} weights to {dev} ({model.precision}) in {time.perf_counter() - t0:.1f} s; "
            "every tensor came from the file")
        tokenizer = PromptTokenizer(report.get("tokenizer").path, cfg.max_token_len, cfg.vocab_size)
        modes = declared_norm_modes(ckpt_cfg, str(report.get("config.json").path))
        norm_stats = NormStats.load(report.get("norm_stats.json").path, modes)
        log(f"normalization ({modes.source}): {norm_stats.describe()}")
        processor = Pi05Processor(settings.preset, norm_stats, tokenizer, settings.discrete_state_input, cfg.max_action_dim)
        policy = cls(model, processor, settings, use_cuda_graphs, source=str(report.directory), layout=layout,
                     batch_buckets=batch_buckets)
        return policy

    @classmethod
    def random_weights(
        cls,
        cfg: Pi05Config,
        tokenizer_path: str | os.PathLike,
        norm_stats: NormStats,
        embodiment: str = "libero",
        device: str | torch.device | None = None,
        use_cuda_graphs: bool = True,
        seed: int = 0,
        precision: str = "bf16",
        **overrides,
    ) -> "Pi05Policy":
        """Random weights of ``cfg``'s shapes (benchmarks); same code path after the tensors exist
        (``precision`` as in :meth:`from_checkpoint`; "auto" means bf16 here)."""
        settings = resolve_settings(embodiment, **overrides)
        cfg = cfg.replace(action_horizon=settings.action_horizon, num_flow_steps=settings.num_flow_steps)
        dev, dtype = default_device_dtype(device)
        model = Pi05Model.random(cfg, dev, dtype, seed, fp8=resolve_precision(precision, dev, False))
        tok = PromptTokenizer(tokenizer_path, cfg.max_token_len, cfg.vocab_size)
        proc = Pi05Processor(settings.preset, norm_stats, tok, settings.discrete_state_input, cfg.max_action_dim)
        return cls(model, proc, settings, use_cuda_graphs, source="random-weights")

    # ------------------------------------------------------------------ serving
    def metadata(self) -> dict:
        """``vla.metadata`` (docs/interfaces.md) plus state_dim, state-in-prompt, device/dtype, checkpoint."""
        s, cfg = self.settings, self.model.cfg
        return {
            "embodiment": s.preset.name,
            "action_dim": s.preset.action_dim,
            "action_horizon": s.action_horizon,
            "n_exec": s.n_exec,
            "num_flow_steps": self.model.expert.num_flow_steps,
            "num_views": s.preset.num_views,
            "image_size": cfg.vision.image_size,
            "state_dim": s.preset.state_dim,
            "discrete_state_input": s.discrete_state_input,
            "max_action_dim": cfg.max_action_dim,
            "normalization": {"state": self.processor.norm_stats.state.mode, "actions": self.processor.norm_stats.actions.mode},
            "device": str(self.model.device),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "precision": self.model.precision,
            "cuda_graphs": self.runner.use_graphs,
            "checkpoint": self.source,
            "layout": self.layout,
        }

    def prepare(self, observation: dict, options: dict | None = None) -> PreparedRequest:
        """Validate + CPU preprocessing (thread-safe). Checks ``options['num_flow_steps']`` against the
        configured steps (seed 003: they must match).

        Raises:
            ObservationError, ConfigCheckError.
        """
        if options is not None and not isinstance(options, dict):
            raise ObservationError(f"options must be a dict or None, got {type(options).__name__}")
        nf = (options or {}).get("num_flow_steps")
        configured = self.model.expert.num_flow_steps
        if nf is not None and nf != configured:
            raise ConfigCheckError(
                f"num_flow_steps ({nf}) must match the configured num_steps ({configured}): the adaRMS time "
                f"conditioning and CUDA graphs are built for it; restart the server with --num-flow-steps {nf}"
            )
        return self.processor.prepare(observation, options, self.settings.action_horizon)

    def run_prepared(self, requests: list[PreparedRequest]) -> list[np.ndarray]:
        """One batched model call for several prepared requests (same ``shape_key``); returns each
        request's normalised chunk float32 [B_i, H, 32]. Not thread-safe across calls: one worker."""
        images = np.concatenate([r.images for r in requests], 0)
        ids = [t for r in requests for t in r.token_ids]
        noise = np.concatenate([r.noise for r in requests], 0)
        out = self.runner.run(images, ids, noise)
        parts, i = [], 0
        for r in requests:
            parts.append(out[i:i + r.batch_size])
            i += r.batch_size
        return parts

    def launch_prepared(self, requests: list[PreparedRequest]) -> "PreparedBatch":
        """:meth:`run_prepared` without waiting for the GPU (the batcher's pipelined mode): returns a handle
        whose ``result()`` gives the per-request chunks. One launching thread at a time."""
        images = np.concatenate([r.images for r in requests], 0)
        ids = [t for r in requests for t in r.token_ids]
        noise = np.concatenate([r.noise for r in requests], 0)
        return PreparedBatch(self.runner.launch(images, ids, noise), [r.batch_size for r in requests])

    def finish(self, request: PreparedRequest, normalized: np.ndarray) -> np.ndarray:
        """Normalised chunk -> env actions float32 [B, n_exec, action_dim]."""
        return self.processor.postprocess(normalized[:, : self.settings.n_exec], request.states)

    def predict(self, observation: dict, options: dict | None = None) -> np.ndarray:
        """In-process ``vla.predict``: float32 [B, n_exec, action_dim] in environment units."""
        req = self.prepare(observation, options)
        return self.finish(req, self.run_prepared([req])[0])



def resolve_precision(precision: str, device: torch.device, checkpoint_is_fp8: bool) -> bool:
    """Whether to run the FP8 model: "fp8" (checked: :func:`rpent.models.pi05.fp8.check_fp8_device`),
    "bf16" never, "auto" for an FP8 checkpoint when ``device`` has FP8 tensor cores.

    Raises:
        Fp8NotSupportedError: "fp8" on a device without FP8 tensor cores; ValueError: unknown precision.
    """
    if precision not in ("auto", *PRECISIONS):
        raise ValueError(f"precision must be auto, {' or '.join(PRECISIONS)}; got {precision!r}")
    if precision == "fp8":
        check_fp8_device(device)
        return True
    if precision == "auto" and checkpoint_is_fp8:
        try:
            check_fp8_device(device)
        except Fp8NotSupportedError:
            return False
        return True
    return False


class PreparedBatch:
    """A batched model call in flight: ``result()`` blocks until it finished and returns one normalised
    chunk float32 [B_i, H, 32] per request, in order."""

    def __init__(self, pending, sizes: list[int]):
        self._pending = pending
        self._sizes = sizes

    def result(self) -> list[np.ndarray]:
        """Wait (GIL released) and split the rows per request."""
        out = self._pending.result()
        parts, i = [], 0
        for n in self._sizes:
            parts.append(out[i:i + n])
            i += n
        return parts
