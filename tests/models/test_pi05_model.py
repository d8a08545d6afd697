"""Pi0.5 model numerics on the tiny config, against an independent naive implementation.

The naive reference below is written from the architecture description (reference section 1), not from
our model code: unfused q/k/v and gate/up weights straight from the checkpoint dict, explicit per-head
attention with a full 2-D mask over [prefix | actions], the JAX-style RoPE formula, the time MLP and
adaRMS projections evaluated at every step, and the whole prefix recomputed at every flow step (no K/V
cache). Agreement checks the fused weights, the multi-query head folding, the cached prefix K/V, the
skipped last prefix layer and the precomputed adaRMS sets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rpent.models.pi05.checkpoint import EXPERT, LANG, PALI, VISION, config_from_checkpoint, load_checkpoint_tensors
from rpent.models.pi05.config import tiny_config
from rpent.models.pi05.model import Pi05Model


def _lin(t, name, x, bias=True):
    return F.linear(x, t[name + ".weight"], t.get(name + ".bias") if bias else None)


def _attend(q, k, v, mask):
    """q [B,Lq,H,d], k/v [B,Lk,H,d] (already repeated), mask [B,Lq,Lk] bool -> [B,Lq,H*d]."""
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask[:, None], float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)
    return o.reshape(*o.shape[:2], -1)


def _rope(x, pos, theta=10000.0):
    d = x.shape[-1]
    ts = theta ** (2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (pos.double()[..., None] / ts)[:, :, None, :]
    x1, x2 = x[..., : d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x2 * ang.cos() + x1 * ang.sin()], -1).to(x.dtype)


def _rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def naive_sample(t, cfg, images, ids, noise, valid):
    """images [B,V,3,S,S] in [-1,1]; ids [B,T]; valid [B,T] bool; noise [B,H,32] -> [B,H,32]."""
    vc, bc, ec = cfg.vision, cfg.backbone, cfg.expert
    b, nv = images.shape[:2]
    x = F.conv2d(images.flatten(0, 1), t[VISION + "embeddings.patch_embedding.weight"], t[VISION + "embeddings.patch_embedding.bias"], stride=vc.patch_size)
    x = x.flatten(2).transpose(1, 2) + t[VISION + "embeddings.position_embedding.weight"]
    for i in range(vc.depth):
        p = f"{VISION}encoder.layers.{i}."
        h = F.layer_norm(x, (vc.width,), t[p + "layer_norm1.weight"], t[p + "layer_norm1.bias"], 1e-6)
        q, k, v = (_lin(t, p + f"self_attn.{n}_proj", h).view(*h.shape[:2], vc.num_heads, -1) for n in "qkv")
        x = x + _lin(t, p + "self_attn.out_proj", _attend(q, k, v, torch.ones(h.shape[0], h.shape[1], h.shape[1], dtype=torch.bool)))
        h = F.layer_norm(x, (vc.width,), t[p + "layer_norm2.weight"], t[p + "layer_norm2.bias"], 1e-6)
        x = x + _lin(t, p + "mlp.fc2", F.gelu(_lin(t, p + "mlp.fc1", h), approximate="tanh"))
    x = F.layer_norm(x, (vc.width,), t[VISION + "post_layernorm.weight"], t[VISION + "post_layernorm.bias"], 1e-6)
    img = _lin(t, PALI + "model.multi_modal_projector.linear", x).reshape(b, -1, bc.width)
    txt = F.embedding(ids, t[LANG + "embed_tokens.weight"]) * math.sqrt(bc.width)
    prefix0 = torch.cat([img, txt], 1)
    pvalid = torch.cat([torch.ones(b, img.shape[1], dtype=torch.bool), valid], 1)
    lp, hz = prefix0.shape[1], noise.shape[1]
    allvalid = torch.cat([pvalid, torch.ones(b, hz, dtype=torch.bool)], 1)
    mask = allvalid[:, None, :].repeat(1, lp + hz, 1)
    mask[:, :lp, lp:] = False  # the prefix never attends to the actions
    pos = allvalid.long().cumsum(1) - 1
    n = cfg.num_flow_steps
    xt = noise.clone()
    for s in range(n):
        tt = torch.tensor([1.0 - s / n], dtype=torch.float64)
        half = ec.width // 2
        period = cfg.time_min_period * (cfg.time_max_period / cfg.time_min_period) ** torch.linspace(0, 1, half, dtype=torch.float64)
        ang = tt[:, None] * 2 * math.pi / period
        cond = torch.cat([ang.sin(), ang.cos()], -1).float()
        cond = F.silu(_lin(t, "time_mlp_out", F.silu(_lin(t, "time_mlp_in", cond))))

        def ada(name, h):
            sc, sh, g = _lin(t, name + ".dense", cond).chunk(3, -1)
            return _rms(h) * (1 + sc[:, None]) + sh[:, None], g[:, None]

        pre, suf = prefix0, _lin(t, "action_in_proj", xt)
        for i in range(bc.depth):
            pb, pe = f"{LANG}layers.{i}.", f"{EXPERT}model.layers.{i}."
            hp = _rms(pre) * (1 + t[pb + "input_layernorm.weight"])
            hs, g1 = ada(pe + "input_layernorm", suf)
            qs = [_lin(t, pb + "self_attn.q_proj", hp, False), _lin(t, pe + "self_attn.q_proj", hs, False)]
            ks = [_lin(t, pb + "self_attn.k_proj", hp, False), _lin(t, pe + "self_attn.k_proj", hs, False)]
            vs = [_lin(t, pb + "self_attn.v_proj", hp, False), _lin(t, pe + "self_attn.v_proj", hs, False)]
            q = _rope(torch.cat(qs, 1).view(b, lp + hz, bc.num_heads, -1), pos)
            k = _rope(torch.cat(ks, 1).view(b, lp + hz, 1, -1), pos).repeat(1, 1, bc.num_heads, 1)
            v = torch.cat(vs, 1).view(b, lp + hz, 1, -1).repeat(1, 1, bc.num_heads, 1)
            o = _attend(q, k, v, mask)
            pre = pre + _lin(t, pb + "self_attn.o_proj", o[:, :lp], False)
            suf = suf + _lin(t, pe + "self_attn.o_proj", o[:, lp:], False) * g1
            hp = _rms(pre) * (1 + t[pb + "post_attention_layernorm.weight"])
            hs, g2 = ada(pe + "post_attention_layernorm", suf)
            mlp = lambda pfx, h: _lin(t, pfx + "mlp.down_proj", F.gelu(_lin(t, pfx + "mlp.gate_proj", h, False), approximate="tanh") * _lin(t, pfx + "mlp.up_proj", h, False), False)  # noqa: E731
            pre = pre + mlp(pb, hp)
            suf = suf + mlp(pe, hs) * g2
        hs, _ = ada(f"{EXPERT}model.norm", suf)
        xt = xt - (1.0 / n) * _lin(t, "action_out_proj", hs)
    return xt


@pytest.fixture(scope="module")
def tiny(tiny_ckpts):
    d = tiny_ckpts["openpi"]
    cfg = config_from_checkpoint(d, action_horizon=6, num_flow_steps=3)
    tensors, _ = load_checkpoint_tensors(d, cfg)
    return cfg, tensors, Pi05Model.from_checkpoint_tensors(cfg, tensors)


def _inputs(cfg, b, t, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = cfg.vision.image_size
    images = torch.rand(b, 2, 3, s, s, generator=g) * 2 - 1
    ids = torch.randint(5, 300, (b, t), generator=g)
    noise = torch.randn(b, cfg.action_horizon, cfg.max_action_dim, generator=g)
    return images, ids, noise


def test_every_parameter_was_assigned_from_the_checkpoint(tiny):
    cfg, tensors, model = tiny
    assert all(p.device.type == "cpu" and not p.is_meta for p in model.parameters())
    assert torch.equal(model.backbone.embed, tensors[LANG + "embed_tokens.weight"])


def test_matches_independent_naive_implementation(tiny):
    cfg, tensors, model = tiny
    images, ids, noise = _inputs(cfg, 2, 7)
    ours = model.sample_actions(images, ids, noise)
    ref = naive_sample(tensors, cfg, images, ids, noise, torch.ones_like(ids, dtype=torch.bool))
    assert ours.shape == (2, 6, 32) and ours.dtype == torch.float32
    assert (ours - noise).abs().max() > 1e-2  # the flow moved the sample
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("masked", [False, True])
def test_step0_interleaved_with_the_prefix_equals_the_sequential_order(tiny, masked):
    """The order the CUDA path uses (expert layer i of flow step 0 right after backbone layer i wrote its
    K/V) gives exactly the sequential result, also with padded prompts (key mask)."""
    cfg, _, model = tiny
    assert len(model.expert.layers) == cfg.backbone.depth  # else the interleaved order is not taken
    images, ids, noise = _inputs(cfg, 2, 8, seed=4)
    valid = torch.ones(2, 8, dtype=torch.bool)
    valid[0, 6:] = False
    mask = valid if masked else None
    sequential = model.sample_actions(images, ids, noise, mask)
    model.interleave_on_cpu = True
    try:
        interleaved = model.sample_actions(images, ids, noise, mask)
    finally:
        model.interleave_on_cpu = False
    assert torch.equal(interleaved, sequential)
    assert (sequential - noise).abs().max() > 1e-2


def test_padded_prompts_equal_exact_length_prompts(tiny):
    cfg, tensors, model = tiny
    images, ids, noise = _inputs(cfg, 2, 9, seed=1)
    valid = torch.ones(2, 9, dtype=torch.bool)
    valid[1, 5:] = False  # row 1 has a 5-token prompt padded to 9
    batched = model.sample_actions(images, ids, noise, valid)
    single1 = model.sample_actions(images[1:], ids[1:, :5], noise[1:])
    single0 = model.sample_actions(images[:1], ids[:1], noise[:1])
    torch.testing.assert_close(batched[1:], single1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched[:1], single0, atol=1e-5, rtol=1e-5)
    ref = naive_sample(tensors, cfg, images, ids, noise, valid)
    torch.testing.assert_close(batched, ref, atol=2e-5, rtol=1e-4)


def test_deterministic_given_noise_and_sensitive_to_it(tiny):
    cfg, _, model = tiny
    images, ids, noise = _inputs(cfg, 1, 6, seed=2)
    a = model.sample_actions(images, ids, noise)
    b = model.sample_actions(images, ids, noise.clone())
    assert torch.equal(a, b)
    c = model.sample_actions(images, ids, noise + 0.5)
    assert (a - c).abs().max() > 1e-3


def test_num_flow_steps_change_recomputes_time_conditioning(tiny_ckpts):
    d = tiny_ckpts["openpi"]
    cfg = config_from_checkpoint(d, action_horizon=4, num_flow_steps=2)
    tensors, _ = load_checkpoint_tensors(d, cfg)
    model = Pi05Model.from_checkpoint_tensors(cfg, tensors)
    images, ids, noise = _inputs(cfg, 1, 5, seed=3)
    model.set_num_flow_steps(4)
    assert model.expert.ada_scale1p.shape[0] == 4
    torch.testing.assert_close(model.sample_actions(images, ids, noise),
                               naive_sample(tensors, cfg.replace(num_flow_steps=4), images, ids, noise, torch.ones_like(ids, dtype=torch.bool)),
                               atol=2e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="num_flow_steps must be >= 1"):
        model.set_num_flow_steps(0)


def test_bad_noise_shape_is_a_clear_error(tiny):
    cfg, _, model = tiny
    images, ids, noise = _inputs(cfg, 1, 4)
    with pytest.raises(ValueError, match=r"noise must be \[B=1, H=6, 32\]"):
        model.sample_actions(images, ids, noise[:, :5])


def test_random_weights_build_is_seeded():
    cfg = tiny_config()
    a = Pi05Model.random(cfg, seed=5)
    b = Pi05Model.random(cfg, seed=5)
    assert torch.equal(a.expert.ada_w, b.expert.ada_w)
    assert np.isfinite(a.expert.ada_scale1p.numpy()).all()
