"""SigLIP vision tower + PaliGemma multi-modal projector (image -> prefix tokens).

Architecture (HF ``SiglipVisionModel`` as used by PaliGemma-3b-pt-224; reference section 1.1):
14x14 stride-14 patch convolution, learned position embeddings (one per patch), pre-LayerNorm encoder
layers ``x + attn(ln1(x))``, ``x + fc2(gelu_tanh(fc1(ln2(x))))``, a final LayerNorm, then the linear
projector to the Gemma width. Image tokens are *not* rescaled: openpi's JAX model feeds the projector
output to Gemma unchanged (only text embeddings are multiplied by sqrt(width)).

Each residual add is fused with the LayerNorm that follows it (:func:`fused.add_layer_norm`, one Triton
kernel on CUDA). Our weights fuse q/k/v into one [3W, W] matrix (one GEMM instead of three); the mapping from the
checkpoint's separate ``q_proj``/``k_proj``/``v_proj`` is in :func:`siglip_state_from_checkpoint`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rpent.models.pi05 import fused
from rpent.models.pi05.checkpoint import PALI, VISION
from rpent.models.pi05.config import SiglipConfig


class SiglipLayer(nn.Module):
    """One pre-LN transformer encoder layer of SigLIP (bidirectional attention, biases everywhere)."""

    def __init__(self, cfg: SiglipConfig):
        super().__init__()
        w = cfg.width
        self.cfg = cfg
        self.ln1 = nn.LayerNorm(w, eps=cfg.layer_norm_eps)
        self.qkv = nn.Linear(w, 3 * w)
        self.out = nn.Linear(w, w)
        self.ln2 = nn.LayerNorm(w, eps=cfg.layer_norm_eps)
        self.fc1 = nn.Linear(w, cfg.mlp_dim)
        self.fc2 = nn.Linear(cfg.mlp_dim, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, P, W] -> [N, P, W] (N images, P patches)."""
        x, _ = self.forward_fused(x, fused.layer_norm(x, self.ln1.weight, self.ln1.bias, self.ln1.eps), None)
        return x

    def forward_fused(self, x: torch.Tensor, h: torch.Tensor, next_ln: nn.LayerNorm | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The layer on the residual stream x [N, P, W] and its ln1-normed h; returns (x after the layer,
        ``next_ln(x)`` or None). Each residual add is fused with the LayerNorm that follows it."""
        n, p, w = x.shape
        nh = self.cfg.num_heads
        qkv = self.qkv(h).view(n, p, 3, nh, w // nh).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])  # scale 1/sqrt(72), as SigLIP
        x, h = fused.add_layer_norm(x, self.out(a.transpose(1, 2).reshape(n, p, w)), self.ln2.weight, self.ln2.bias, self.ln2.eps)
        y = self.fc2(F.gelu(self.fc1(h), approximate="tanh"))
        if next_ln is None:
            return x + y, None
        return fused.add_layer_norm(x, y, next_ln.weight, next_ln.bias, next_ln.eps)


class SiglipEncoder(nn.Module):
    """Images in [-1, 1] -> projected image tokens.

    Input: float [N, 3, S, S] (S = cfg.image_size, channels RGB, values in [-1, 1], model dtype).
    Output: [N, (S/14)^2, out_width] tokens in the model dtype (out_width = Gemma width, 2048).
    """

    def __init__(self, cfg: SiglipConfig, out_width: int):
        super().__init__()
        self.cfg = cfg
        self.patch = nn.Conv2d(3, cfg.width, cfg.patch_size, stride=cfg.patch_size)
        self.pos = nn.Parameter(torch.empty(cfg.num_patches, cfg.width))
        self.layers = nn.ModuleList(SiglipLayer(cfg) for _ in range(cfg.depth))
        self.post_ln = nn.LayerNorm(cfg.width, eps=cfg.layer_norm_eps)
        self.proj = nn.Linear(cfg.width, out_width)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """See the class docstring. Raises ValueError for a wrong image size."""
        if images.shape[-2:] != (self.cfg.image_size, self.cfg.image_size):
            raise ValueError(f"SigLIP expects {self.cfg.image_size}x{self.cfg.image_size} images, got {tuple(images.shape[-2:])}")
        x = self.patch(images).flatten(2).transpose(1, 2) + self.pos
        first = self.layers[0].ln1
        h = fused.layer_norm(x, first.weight, first.bias, first.eps)
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x, h = layer.forward_fused(x, h, self.layers[i + 1].ln1 if i + 1 < n else self.post_ln)
        return self.proj(h)


def siglip_state_from_checkpoint(t: dict[str, torch.Tensor], cfg: SiglipConfig, prefix: str = "") -> dict[str, torch.Tensor]:
    """Map checkpoint tensors (openpi names) to :class:`SiglipEncoder` state-dict entries under ``prefix``."""
    out = {
        prefix + "patch.weight": t[VISION + "embeddings.patch_embedding.weight"],
        prefix + "patch.bias": t[VISION + "embeddings.patch_embedding.bias"],
        prefix + "pos": t[VISION + "embeddings.position_embedding.weight"],
        prefix + "post_ln.weight": t[VISION + "post_layernorm.weight"],
        prefix + "post_ln.bias": t[VISION + "post_layernorm.bias"],
        prefix + "proj.weight": t[PALI + "model.multi_modal_projector.linear.weight"],
        prefix + "proj.bias": t[PALI + "model.multi_modal_projector.linear.bias"],
    }
    for i in range(cfg.depth):
        c = f"{VISION}encoder.layers.{i}."
        m = f"{prefix}layers.{i}."
        out[m + "ln1.weight"] = t[c + "layer_norm1.weight"]
        out[m + "ln1.bias"] = t[c + "layer_norm1.bias"]
        out[m + "ln2.weight"] = t[c + "layer_norm2.weight"]
        out[m + "ln2.bias"] = t[c + "layer_norm2.bias"]
        out[m + "qkv.weight"] = torch.cat([t[c + f"self_attn.{n}_proj.weight"] for n in "qkv"], 0)
        out[m + "qkv.bias"] = torch.cat([t[c + f"self_attn.{n}_proj.bias"] for n in "qkv"], 0)
        out[m + "out.weight"] = t[c + "self_attn.out_proj.weight"]
        out[m + "out.bias"] = t[c + "self_attn.out_proj.bias"]
        for n in ("fc1", "fc2"):
            out[m + n + ".weight"] = t[c + f"mlp.{n}.weight"]
            out[m + n + ".bias"] = t[c + f"mlp.{n}.bias"]
    return out
