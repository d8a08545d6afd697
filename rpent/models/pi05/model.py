"""The Pi0.5 model: SigLIP + Gemma-2B prefix + Gemma-300M action expert, flow-matching sampling.

Sampling (openpi ``PI0Pytorch.sample_actions`` semantics; reference section 1.2):

1. Prefix = [256 image tokens per view, in view order] + [text tokens]. Bidirectional attention among
   valid prefix tokens. Positions = running count of valid tokens.
2. The prefix runs through the backbone once; every layer's K/V is cached (``kv`` [depth, 2, B, 1, Lp+H, d]).
3. x starts as the noise [B, H, 32] at t=1; N Euler steps ``x += dt * v(x, t)`` with dt = -1/N down to t=0.
   Each step runs only the expert over the H action tokens, attending to the cached prefix K/V and to
   all action tokens (bidirectional inside the chunk); the prefix cache is reused, never recomputed.
4. The result is the normalised action chunk [B, H, 32] (float32).

On CUDA, flow step 0 of expert layer i runs on a second stream as soon as backbone layer i has written
its K/V (``overlap_first_step``): the latency-bound expert kernels fill the GPU beside the compute-bound
prefix. Same ops, same results (max |diff| 0 against the sequential order); H200 B=1: 9.47 vs 10.35 ms.

Prompt length: callers pass exactly the tokens of the prompt (no padding to max_token_len=200). Masked
padding keys contribute nothing to attention and take no RoPE position, so padding only costs compute:
the exact-length prefix gives the same numbers as openpi's padded one up to float rounding
(reference section 5: T=200 costs ~20% more prefix FLOPs than T=16-48 on LIBERO).

Precision: bf16 weights/activations on CUDA, with RMSNorm statistics, RoPE angles, the time/adaRMS
precomputation, softmax accumulation and the flow state x in float32; float32 everywhere on CPU.
On CUDA the layer ops run as fused Triton kernels (:mod:`rpent.models.pi05.fused`).

Reference parity (``benchmarks/vla_bench.py --lerobot``, H200): against lerobot 0.6.1's ``PI05Pytorch`` on
identical random weights, tokens and noise, max |diff| of the normalised action chunk = 4.8e-7 in float32
and 9.2e-3 in bf16 (lerobot keeps SigLIP in float32; we run it in bf16), largest |action| 4.06.
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch import nn

from rpent.models.pi05.checkpoint import random_tensors
from rpent.models.pi05.config import Pi05Config
from rpent.models.pi05.fp8 import SCALE_SUFFIX, quantize_tensors
from rpent.models.pi05.fused import rope_tables
from rpent.models.pi05.gemma import GemmaBackbone, GemmaExpert, gemma_state_from_checkpoint
from rpent.models.pi05.siglip import SiglipEncoder, siglip_state_from_checkpoint


def default_device_dtype(device: str | torch.device | None = None) -> tuple[torch.device, torch.dtype]:
    """(device, dtype) per the project rule: bf16 on CUDA, float32 on CPU. ``None`` picks cuda:0 if available."""
    if device is None:
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)


class Pi05Model(nn.Module):
    """Pi0.5 inference model. Build with :meth:`from_checkpoint_tensors` (or :meth:`random`), not ``__init__``.

    Attributes:
        cfg: dimensions, action horizon and number of flow steps.
        vision: :class:`SiglipEncoder`; backbone: :class:`GemmaBackbone`; expert: :class:`GemmaExpert`.
    """

    #: Run flow step 0 of the expert on a second CUDA stream alongside the prefix (CUDA only; the
    #: benchmark's A/B switch, ``RPENT_PI05_OVERLAP=0`` turns it off).
    overlap_first_step = os.environ.get("RPENT_PI05_OVERLAP", "1") != "0"
    #: ... only up to this batch size: at larger batches the expert is no longer latency-bound and the
    #: side stream only competes with the prefix (``RPENT_PI05_OVERLAP_MAX_BATCH``).
    overlap_max_batch = int(os.environ.get("RPENT_PI05_OVERLAP_MAX_BATCH", "16"))
    #: Tests: run the same interleaved order (backbone layer i, then step-0 expert layer i) on the CPU,
    #: without streams, to check it against the sequential order.
    interleave_on_cpu = False

    def __init__(self, cfg: Pi05Config, fp8: bool = False):
        super().__init__()
        self.cfg = cfg
        self.fp8 = fp8
        self.vision = SiglipEncoder(cfg.vision, cfg.backbone.width)
        self.backbone = GemmaBackbone(cfg, fp8)
        self.expert = GemmaExpert(cfg, fp8)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_checkpoint_tensors(cls, cfg: Pi05Config, tensors: dict[str, torch.Tensor]) -> "Pi05Model":
        """Assemble the model from checkpoint tensors (openpi names; see ``checkpoint.load_checkpoint_tensors``).

        The module is built on the meta device and every parameter is *assigned* from ``tensors``
        (``load_state_dict(strict=True, assign=True)``): nothing is randomly initialised, and a
        parameter without a source tensor raises. Device/dtype are those of ``tensors``. When ``tensors``
        hold FP8 projection weights with their ``*_scale`` entries (:func:`rpent.models.pi05.fp8.quantize_tensors`,
        or an FP8 checkpoint), the Gemma projections become :class:`rpent.models.pi05.fp8.Fp8Linear`.
        Then the per-step adaRMS sets are precomputed for ``cfg.num_flow_steps``.

        Raises:
            KeyError: a tensor is missing from ``tensors``; RuntimeError: strict loading failed.
        """
        fp8 = any(k.endswith(SCALE_SUFFIX) for k in tensors)
        with torch.device("meta"):
            model = cls(cfg, fp8)
        state = siglip_state_from_checkpoint(tensors, cfg.vision, "vision.")
        state.update(gemma_state_from_checkpoint(tensors, cfg, "backbone.", "expert."))
        model.load_state_dict(state, strict=True, assign=True)
        model.requires_grad_(False)
        model.eval()
        model.expert.precompute_time_conditioning(cfg.num_flow_steps)
        model.backbone.norm_scales()
        return model

    @classmethod
    def random(cls, cfg: Pi05Config, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0,
               fp8: bool = False) -> "Pi05Model":
        """A model with seeded random weights of the checkpoint schema, generated on ``device``
        (``--random-weights`` benchmarks; same code path as a real checkpoint); ``fp8``: the Gemma
        projections quantised to FP8 from those weights (same random draw as without)."""
        tensors = random_tensors(cfg, device, dtype, seed)
        if fp8:
            tensors = quantize_tensors(tensors, cfg)
        return cls.from_checkpoint_tensors(cfg, tensors)

    @property
    def precision(self) -> str:
        """"fp8" (FP8 Gemma projections, the rest in the model dtype) or the dtype name ("bfloat16", "float32")."""
        return "fp8" if self.fp8 else str(self.dtype).removeprefix("torch.")

    @property
    def device(self) -> torch.device:
        """Device of the weights."""
        return self.backbone.embed.device

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype of the weights (bf16 on CUDA, float32 on CPU)."""
        return self.backbone.embed.dtype

    def set_num_flow_steps(self, num_steps: int) -> None:
        """Recompute the adaRMS sets for a new number of flow steps (changes the outputs)."""
        if num_steps < 1:
            raise ValueError(f"num_flow_steps must be >= 1, got {num_steps}")
        self.cfg = self.cfg.replace(num_flow_steps=num_steps)
        self.expert.precompute_time_conditioning(num_steps)

    # ------------------------------------------------------------------ inference
    @torch.inference_mode()
    def sample_actions(
        self,
        images: torch.Tensor,
        token_ids: torch.Tensor,
        noise: torch.Tensor,
        token_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Sample one normalised action chunk per batch element.

        Args:
            images: [B, V, 3, S, S] in [-1, 1] (model dtype, on the model's device), S = cfg.vision.image_size.
            token_ids: int64 [B, T] prompt tokens (exact length; pad shorter prompts and mask them).
            noise: [B, H, 32] float32, the flow state at t=1 (H = cfg.action_horizon).
            token_mask: None (all tokens valid) or bool [B, T], False for padding.

        Returns:
            float32 [B, H, 32] normalised actions (quantile-normalised space, padded to 32 dims).

        Raises:
            ValueError: shapes that do not fit the config.
        """
        cfg = self.cfg
        b, nv = images.shape[:2]
        hz = cfg.action_horizon
        if noise.shape != (b, hz, cfg.max_action_dim):
            raise ValueError(f"noise must be [B={b}, H={hz}, {cfg.max_action_dim}], got {list(noise.shape)}")
        if token_ids.shape[0] != b:
            raise ValueError(f"token_ids batch {token_ids.shape[0]} != images batch {b}")
        img = self.vision(images.flatten(0, 1)).view(b, nv * cfg.vision.num_patches, -1)
        txt = self.backbone.embed_text(token_ids)
        prefix = torch.cat([img, txt], dim=1)
        lp = prefix.shape[1]
        dev = prefix.device
        if token_mask is None:
            prefix_valid = None
            pos = torch.arange(lp, device=dev).expand(b, lp)
            n_valid = torch.full((b, 1), lp, device=dev, dtype=torch.long)
            key_mask = None
        else:
            prefix_valid = torch.cat([torch.ones(b, img.shape[1], dtype=torch.bool, device=dev), token_mask.to(dev, torch.bool)], 1)
            pos = prefix_valid.long().cumsum(1) - 1
            n_valid = prefix_valid.long().sum(1, keepdim=True)
            key_mask = torch.cat([prefix_valid, torch.ones(b, hz, dtype=torch.bool, device=dev)], 1)[:, None, None, :]
        g = cfg.backbone
        kv = torch.empty((g.depth, 2, b, 1, lp + hz, g.head_dim), dtype=prefix.dtype, device=dev)
        srope = rope_tables(n_valid + torch.arange(hz, device=dev)[None, :], g.head_dim, g.rope_theta)
        n = self.expert.num_flow_steps
        dt = -1.0 / n
        x = noise.to(device=dev, dtype=torch.float32)
        prefix_rope = rope_tables(pos, g.head_dim, g.rope_theta)
        prefix_mask = None if prefix_valid is None else key_mask[..., :lp]
        first = 0
        cuda = dev.type == "cuda"
        if (self.overlap_first_step and b <= self.overlap_max_batch and (cuda or self.interleave_on_cpu)
                and len(self.expert.layers) == g.depth):
            # Flow step 0, layer i needs only backbone layer i's K/V: run it on a side stream as soon as
            # they are written, hidden behind the (compute-bound) prefix. Same ops, same results.
            main = torch.cuda.current_stream(dev) if cuda else None
            side = self._side_stream(dev) if cuda else None
            on_side = (lambda: torch.cuda.stream(side)) if cuda else contextlib.nullcontext
            if cuda:
                side.wait_stream(main)
            with on_side():
                state = list(self.expert.begin_step(x, 0))

            def on_layer_kv(i):
                if cuda:
                    ev = torch.cuda.Event()
                    ev.record(main)
                with on_side():
                    if cuda:
                        side.wait_event(ev)
                    state[:] = self.expert.layer_step(i, state[0], state[1], 0, kv, lp, srope, key_mask)

            self.backbone.fill_prefix_cache(prefix, prefix_rope, prefix_mask, kv, on_layer_kv)
            with on_side():
                v0 = self.expert.action_out(state[1]).float()
            if cuda:
                main.wait_stream(side)
            x = x + dt * v0
            first = 1
        else:
            self.backbone.fill_prefix_cache(prefix, prefix_rope, prefix_mask, kv)
        for s in range(first, n):
            x = x + dt * self.expert.velocity(x, s, kv, lp, srope, key_mask)
        return x

    def _side_stream(self, dev: torch.device) -> "torch.cuda.Stream":
        if getattr(self, "_side", None) is None:
            self._side = torch.cuda.Stream(device=dev)
        return self._side
