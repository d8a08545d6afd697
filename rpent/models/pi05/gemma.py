"""Gemma decoder stacks of Pi0.5: the Gemma-2B prefix (backbone) and the Gemma-300M action expert.

Conventions (Gemma / openpi ``gemma.py``; reference section 1.1-1.2):

* RMSNorm ``x * rsqrt(mean(x^2) + 1e-6) * (1 + w)``, statistics in float32 (``F.rms_norm``, one fused
  kernel; the (1 + w) scales are computed once in the model dtype).
* Multi-query attention: 8 query heads, 1 K/V head, head dim 256, scores scaled by 1/sqrt(256).
  We fold the heads into the query sequence (``[B, L, H, d] -> [B, 1, L*H, d]``): with one K/V head every
  query row attends to the same keys, so one single-head SDPA call computes all heads with no copies
  and can use the flash kernel.
* RoPE (theta 10000) on the two halves of each head (HF ``rotate_half``), positions = running count of
  valid tokens (padding uses no position).
* GeGLU MLP ``down(gelu_tanh(gate(x)) * up(x))``; gate and up are fused into one [2F, D] weight.
* The expert's norms are adaRMS: ``x_hat * (1 + scale) + shift`` and the residual branch is multiplied by
  ``gate`` (openpi ``transformers_replace`` Gemma / lerobot ``PiGemmaRMSNorm``), with (scale, shift, gate)
  from a Linear(width -> 3*width) of the time condition. The flow-matching time schedule is fixed, so
  the (scale, shift, gate) sets of every step are computed once (:meth:`GemmaExpert.precompute_time_conditioning`)
  and no step reads the 37 projections again (ApxInf's "precomputed style sets").
* Attention is shared layer by layer: layer ``l`` of the expert attends to the prefix K/V that layer
  ``l`` of the backbone wrote into the cache, plus the action tokens' own K/V.
* Each residual add is fused with the norm that follows it, RoPE with the K/V cache write, gelu with
  the up-projection product, and the action tokens' attention is split over the keys: one kernel each on
  CUDA (:mod:`rpent.models.pi05.fused`, reference PyTorch code elsewhere).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rpent.models.pi05 import fused
from rpent.models.pi05.checkpoint import EXPERT, LANG
from rpent.models.pi05.config import GemmaConfig, Pi05Config
from rpent.models.pi05.fp8 import SCALE_SUFFIX, Fp8Linear, cat_fp8


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables for integer positions [B, L] -> (cos, signed_sin), each [B, L, 1, head_dim] in ``dtype``
    (the reference form; see :class:`rpent.models.pi05.fused.RopeTables`)."""
    return fused.rope_tables(positions, head_dim, theta).full(dtype)


apply_rope = fused.apply_rope
mqa_attention = fused.mqa_attention


class GemmaLayerWeights(nn.Module):
    """The weights of one Gemma layer, fused: qkv [(H+2)*d, D], o [D, H*d], gate_up [2F, D], down [D, F];
    ``nn.Linear`` modules, or with ``fp8`` :class:`rpent.models.pi05.fp8.Fp8Linear` (E4M3 + per-channel scales)."""

    PROJECTIONS = ("qkv", "o", "gate_up", "down")

    def __init__(self, g: GemmaConfig, fp8: bool = False):
        super().__init__()
        hd = g.head_dim
        shapes = {"qkv": (g.width, (g.num_heads + 2 * g.num_kv_heads) * hd), "o": (g.num_heads * hd, g.width),
                  "gate_up": (g.width, 2 * g.mlp_dim), "down": (g.mlp_dim, g.width)}
        for name, (k, n) in shapes.items():
            setattr(self, name, Fp8Linear(k, n) if fp8 else nn.Linear(k, n, bias=False))

    def w(self, name: str):
        """The weight of projection ``name`` as :func:`fused.linear` takes it: the tensor [N, K] of an
        ``nn.Linear``, or the :class:`Fp8Linear` itself."""
        mod = getattr(self, name)
        return mod if isinstance(mod, Fp8Linear) else mod.weight

    def w_rows(self, name: str, start: int):
        """:meth:`w` restricted to output rows [start, N) (the last prefix layer's K/V rows of qkv)."""
        mod = getattr(self, name)
        return mod.rows(start) if isinstance(mod, Fp8Linear) else mod.weight[start:]

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """GeGLU: [.., D] -> [.., D]."""
        return self.down(fused.geglu(self.gate_up(x)))


class GemmaBackbone(nn.Module):
    """Gemma-2B prefix: token embedding and the decoder layers that fill the prefix K/V cache."""

    def __init__(self, cfg: Pi05Config, fp8: bool = False):
        super().__init__()
        g = cfg.backbone
        self.g = g
        self.embed = nn.Parameter(torch.empty(cfg.vocab_size, g.width))
        self.norm1 = nn.Parameter(torch.empty(g.depth, g.width))  # (1 + w) RMSNorm weights, input
        self.norm2 = nn.Parameter(torch.empty(g.depth, g.width))  # post-attention
        self.layers = nn.ModuleList(GemmaLayerWeights(g, fp8) for _ in range(g.depth))

    def embed_text(self, token_ids: torch.Tensor) -> torch.Tensor:
        """token_ids int64 [B, T] -> [B, T, D] embeddings times sqrt(D) (Gemma / openpi ``embed_prefix``)."""
        return F.embedding(token_ids, self.embed) * math.sqrt(self.g.width)

    def norm_scales(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The (1 + w) RMSNorm scales [depth, D] in the model dtype, computed once (Gemma's offset convention)."""
        if getattr(self, "_scales", None) is None or self._scales[0].dtype != self.norm1.dtype:
            self._scales = ((1.0 + self.norm1.float()).to(self.norm1.dtype), (1.0 + self.norm2.float()).to(self.norm2.dtype))
        return self._scales

    def fill_prefix_cache(
        self, x: torch.Tensor, rope: "fused.RopeTables", key_mask: torch.Tensor | None, kv: torch.Tensor,
        on_layer_kv=None,
    ) -> None:
        """Run the prefix through every layer and write each layer's K/V into ``kv``.

        Args:
            x: [B, Lp, D] prefix embeddings (image tokens then text tokens).
            rope: RoPE tables for the prefix positions [B, Lp].
            key_mask: None or bool [B, 1, 1, Lp] (False = padding).
            kv: cache [depth, 2, B, 1, Lp + H, d]; slots [0, Lp) are written here.
            on_layer_kv: optional callable(i), called as soon as layer i's K/V are in ``kv`` (the sampler
                starts flow step 0 of expert layer i there, on a second CUDA stream).

        The last layer only needs K/V (its hidden states are never read by pi05 inference), so its
        attention output and MLP are skipped: exact, and saves one layer's MLP and o-projection.
        """
        g = self.g
        lp = x.shape[1]
        nq = g.num_heads * g.head_dim
        w1, w2 = self.norm_scales()
        h = fused.rms_norm(x, w1[0], g.rms_norm_eps)
        for i, layer in enumerate(self.layers):
            kc, vc = kv[i, 0, :, 0, :lp], kv[i, 1, :, 0, :lp]
            if i == g.depth - 1:
                fused.rope_qkv_to_cache(fused.linear(h, layer.w_rows("qkv", nq)), rope, 0, kc, vc)
                if on_layer_kv is not None:
                    on_layer_kv(i)
                break
            q = fused.rope_qkv_to_cache(layer.qkv(h), rope, g.num_heads, kc, vc)
            if on_layer_kv is not None:
                on_layer_kv(i)
            a = fused.mqa_attention(q, kv[i, 0, :, :, :lp], kv[i, 1, :, :, :lp], key_mask)
            x, h = fused.add_rms_norm(x, layer.o(a), w2[i], g.rms_norm_eps)
            x, h = fused.add_rms_norm(x, layer.down(fused.geglu(layer.gate_up(h))), w1[i + 1], g.rms_norm_eps)


def sinusoidal_time_embedding(t: torch.Tensor, width: int, min_period: float, max_period: float) -> torch.Tensor:
    """openpi ``create_sinusoidal_pos_embedding``: t [N] float -> [N, width] float64 = [sin, cos] halves.

    Periods are geometric from ``min_period`` (4e-3) to ``max_period`` (4.0); angle = 2*pi*t/period.
    """
    frac = torch.linspace(0.0, 1.0, width // 2, dtype=torch.float64, device=t.device)
    period = min_period * (max_period / min_period) ** frac
    ang = (2 * math.pi / period)[None, :] * t.to(torch.float64)[:, None]
    return torch.cat([ang.sin(), ang.cos()], dim=-1)


class GemmaExpert(nn.Module):
    """Gemma-300M action expert with adaRMS time conditioning, plus the action/time projections.

    Holds ``action_in`` (32 -> De), ``action_out`` (De -> 32), ``time_in``/``time_out`` (De -> De) and the
    stacked adaRMS projections ``ada_w`` [2*depth+1, 3*De, De], ``ada_b`` [2*depth+1, 3*De] (order: layer
    l input norm at 2l, post-attention norm at 2l+1, final norm last).
    """

    def __init__(self, cfg: Pi05Config, fp8: bool = False):
        super().__init__()
        e = cfg.expert
        self.cfg = cfg
        self.g = e
        n = cfg.num_adarms_norms
        self.layers = nn.ModuleList(GemmaLayerWeights(e, fp8) for _ in range(e.depth))
        self.ada_w = nn.Parameter(torch.empty(n, 3 * e.width, e.width))
        self.ada_b = nn.Parameter(torch.empty(n, 3 * e.width))
        self.action_in = nn.Linear(cfg.max_action_dim, e.width)
        self.action_out = nn.Linear(e.width, cfg.max_action_dim)
        self.time_in = nn.Linear(e.width, e.width)
        self.time_out = nn.Linear(e.width, e.width)
        self.num_flow_steps = 0

    @staticmethod
    def flow_times(num_steps: int) -> torch.Tensor:
        """The Euler schedule t_s = 1 - s/N for s = 0..N-1 (float64 [N]); dt = -1/N (openpi ``sample_actions``)."""
        return 1.0 - torch.arange(num_steps, dtype=torch.float64) / num_steps

    @torch.no_grad()
    def precompute_time_conditioning(self, num_steps: int) -> None:
        """Compute the (1+scale, shift, gate) sets of every norm for every flow step, once.

        Stores buffers ``ada_scale1p``, ``ada_shift``, ``ada_gate`` [N, 2*depth+1, De], computed in float32
        and stored in the model dtype (the modulation is applied in that dtype with one fused
        ``addcmul``; the gate multiplies a residual branch in that dtype, as lerobot's ``layernorm_forward``). Time MLP: ``swish(time_out(swish(time_in(sincos(t)))))``.
        """
        dev = self.ada_w.device
        t = self.flow_times(num_steps).to(dev)
        emb = sinusoidal_time_embedding(t, self.g.width, self.cfg.time_min_period, self.cfg.time_max_period).float()
        c = F.silu(F.linear(emb, self.time_in.weight.float(), self.time_in.bias.float()))
        c = F.silu(F.linear(c, self.time_out.weight.float(), self.time_out.bias.float()))  # [N, De]
        mod = torch.einsum("sc,noc->sno", c, self.ada_w.float()) + self.ada_b.float()[None]  # [N, norms, 3De]
        scale, shift, gate = mod.chunk(3, dim=-1)
        dt = self.ada_w.dtype
        self.register_buffer("ada_scale1p", (1.0 + scale).to(dt).contiguous(), persistent=False)
        self.register_buffer("ada_shift", shift.to(dt).contiguous(), persistent=False)
        self.register_buffer("ada_gate", gate.to(dt).contiguous(), persistent=False)
        self.num_flow_steps = num_steps

    def velocity(
        self,
        x_t: torch.Tensor,
        step: int,
        kv: torch.Tensor,
        prefix_len: int,
        rope: "fused.RopeTables",
        key_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """Flow velocity v = f(x_t, t_step) for the action chunk.

        Args:
            x_t: [B, H, 32] noisy actions (float32).
            step: flow step index s (t = 1 - s/N) into the precomputed adaRMS sets.
            kv: the cache filled by :meth:`GemmaBackbone.fill_prefix_cache`; slots [Lp, Lp+H) are
                overwritten with the action tokens' K/V.
            prefix_len: Lp.
            rope: RoPE tables for the action positions (valid prefix count + 0..H-1) [B, H].
            key_mask: None or bool [B, 1, 1, Lp+H].

        Returns:
            v: [B, H, 32] float32.
        """
        x, h = self.begin_step(x_t, step)
        for i in range(len(self.layers)):
            x, h = self.layer_step(i, x, h, step, kv, prefix_len, rope, key_mask)
        return self.action_out(h).float()

    def begin_step(self, x_t: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Action tokens [B, H, 32] float32 -> (residual x, adaRMS-normed h) [B, H, De] before layer 0."""
        x = self.action_in(x_t.to(self.action_in.weight.dtype))
        return x, fused.ada_rms_norm(x, self.ada_scale1p[step][0], self.ada_shift[step][0], self.g.rms_norm_eps)

    def layer_step(self, i: int, x: torch.Tensor, h: torch.Tensor, step: int, kv: torch.Tensor, prefix_len: int,
                   rope: "fused.RopeTables", key_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert layer ``i`` of flow step ``step``: residual stream x and its adaRMS-normed h, both
        [B, H, De] -> the same after the layer (attention over prefix K/V of backbone layer i + the chunk,
        then the GeGLU MLP). The four projections go through :func:`fused.linear` /
        :func:`fused.linear_gated_norm`: at few rows one kernel each, with the GeGLU and the gated residual +
        adaRMS norm in their epilogues (:mod:`rpent.models.pi05.fused_linear`)."""
        g = self.g
        eps = g.rms_norm_eps
        sc, sh, gt = self.ada_scale1p[step], self.ada_shift[step], self.ada_gate[step]
        layer = self.layers[i]
        q = fused.rope_qkv_to_cache(fused.linear(h, layer.w("qkv")), rope, g.num_heads,
                                    kv[i, 0, :, 0, prefix_len:], kv[i, 1, :, 0, prefix_len:])
        a = fused.mqa_decode_attention(q, kv[i, 0], kv[i, 1], key_mask)
        x, h = fused.linear_gated_norm(x, a, layer.w("o"), gt[2 * i], sc[2 * i + 1], sh[2 * i + 1], eps)
        m = fused.linear(h, layer.w("gate_up"), geglu_out=True)
        return fused.linear_gated_norm(x, m, layer.w("down"), gt[2 * i + 1], sc[2 * i + 2], sh[2 * i + 2], eps)

    def tune_linears(self, rows: int) -> dict:
        """Pick cuBLAS or the skinny kernel for each projection at ``rows`` = B*H action tokens (CUDA,
        before graph capture; see :func:`fused.tune_skinny`). Returns {name: choice}."""
        out = {}
        if isinstance(self.layers[0].qkv, Fp8Linear):
            return out  # FP8 weights: the few-row kernel, nothing to choose
        for name, geg in (("qkv", False), ("o", False), ("gate_up", True), ("down", False)):
            ws = [getattr(layer, name).weight for layer in self.layers]
            out[name] = fused.tune_skinny(rows, ws, geglu_out=geg)
        return out


def gemma_state_from_checkpoint(t: dict[str, torch.Tensor], cfg: Pi05Config, backbone_prefix: str, expert_prefix: str) -> dict[str, torch.Tensor]:
    """Map checkpoint tensors (openpi names) to :class:`GemmaBackbone` / :class:`GemmaExpert` entries."""
    out: dict[str, torch.Tensor] = {backbone_prefix + "embed": t[LANG + "embed_tokens.weight"]}
    b = cfg.backbone
    out[backbone_prefix + "norm1"] = torch.stack([t[f"{LANG}layers.{i}.input_layernorm.weight"] for i in range(b.depth)])
    out[backbone_prefix + "norm2"] = torch.stack([t[f"{LANG}layers.{i}.post_attention_layernorm.weight"] for i in range(b.depth)])
    fp8 = (LANG + "layers.0.self_attn.q_proj.weight" + SCALE_SUFFIX) in t
    for src, dst, depth in ((LANG, backbone_prefix, b.depth), (EXPERT + "model.", expert_prefix, cfg.expert.depth)):
        for i in range(depth):
            c, m = f"{src}layers.{i}.", f"{dst}layers.{i}."
            groups = {"qkv": [f"self_attn.{n}_proj" for n in "qkv"], "o": ["self_attn.o_proj"],
                      "gate_up": ["mlp.gate_proj", "mlp.up_proj"], "down": ["mlp.down_proj"]}
            for name, parts in groups.items():
                ws = [t[c + p + ".weight"] for p in parts]
                if fp8:
                    out[m + name + ".qweight"] = cat_fp8(ws) if len(ws) > 1 else ws[0]
                    out[m + name + ".scale"] = torch.cat([t[c + p + ".weight" + SCALE_SUFFIX] for p in parts], 0)
                else:
                    out[m + name + ".weight"] = torch.cat(ws, 0) if len(ws) > 1 else ws[0]
    e = EXPERT + "model."
    names = []
    for i in range(cfg.expert.depth):
        names += [f"{e}layers.{i}.input_layernorm.dense", f"{e}layers.{i}.post_attention_layernorm.dense"]
    names.append(e + "norm.dense")
    out[expert_prefix + "ada_w"] = torch.stack([t[n + ".weight"] for n in names])
    out[expert_prefix + "ada_b"] = torch.stack([t[n + ".bias"] for n in names])
    for src, dst in (("action_in_proj", "action_in"), ("action_out_proj", "action_out"), ("time_mlp_in", "time_in"), ("time_mlp_out", "time_out")):
        out[f"{expert_prefix}{dst}.weight"] = t[src + ".weight"]
        out[f"{expert_prefix}{dst}.bias"] = t[src + ".bias"]
    return out
