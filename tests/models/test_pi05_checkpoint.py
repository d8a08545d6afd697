"""Checkpoint directory verification (OK/MISS), strict tensor loading, both layouts, parameter counts."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors import safe_open

from rpent.models.pi05.checkpoint import (
    LANG,
    PALI,
    CheckpointError,
    config_from_checkpoint,
    load_checkpoint_tensors,
    save_checkpoint_tensors,
    verify_checkpoint_dir,
)
from rpent.models.pi05.config import full_config, parameter_counts, tiny_config
from rpent.models.pi05.policy import Pi05Policy
from rpent.models.pi05.tiny import build_tiny_checkpoint, tiny_observation


def test_complete_directory_lists_every_file_ok(tiny_ckpts):
    rep = verify_checkpoint_dir(tiny_ckpts["openpi"])
    assert rep.ok
    assert [line.split()[:2] for line in rep.lines()] == [
        ["OK", "config.json"], ["OK", "model.safetensors"], ["OK", "norm_stats.json"], ["OK", "tokenizer"]
    ]


def test_missing_files_are_named_with_where_to_get_them(tmp_path, tiny_ckpts):
    d = tmp_path / "ckpt"
    shutil.copytree(tiny_ckpts["openpi"], d)
    (d / "model.safetensors").unlink()
    (d / "tokenizer.model").unlink()
    sub = d / "assets/physical-intelligence/libero"
    sub.mkdir(parents=True)
    (d / "norm_stats.json").rename(sub / "norm_stats.json")
    rep = verify_checkpoint_dir(d)
    lines = rep.lines()
    assert lines[0].startswith("OK   config.json")
    assert lines[1].startswith("MISS model.safetensors") and "lerobot/pi05_libero_base" in lines[1]
    assert lines[2].startswith("MISS norm_stats.json") and "copy it to" in lines[2] and "assets/physical-intelligence" in lines[2]
    assert lines[3].startswith("MISS tokenizer") and "--tokenizer-path" in lines[3] and "paligemma_tokenizer.model" in lines[3]
    with pytest.raises(CheckpointError, match="missing: model.safetensors, norm_stats.json, tokenizer"):
        rep.raise_if_missing()
    # an explicit tokenizer path satisfies the tokenizer line
    rep2 = verify_checkpoint_dir(d, tokenizer_path=tiny_ckpts["openpi"] / "tokenizer.model")
    assert rep2.get("tokenizer").status == "OK"


def test_not_a_directory_says_how_to_point_at_one(tmp_path):
    rep = verify_checkpoint_dir(tmp_path / "nope")
    assert not rep.ok and all("PI05_CHECKPOINT_PATH" in line for line in rep.lines())


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_missing_tensor_fails_naming_it(tmp_path, layout):
    key = f"{LANG}layers.1.mlp.down_proj.weight"
    d = build_tiny_checkpoint(tmp_path / layout, layout=layout, drop_tensors=(key,))
    with pytest.raises(CheckpointError, match=r"1 missing tensor\(s\): " + key.replace(".", r"\.")):
        load_checkpoint_tensors(d, config_from_checkpoint(d))
    with pytest.raises(CheckpointError, match="refusing to run with random weights"):
        Pi05Policy.from_checkpoint(d, log=lambda s: None)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "short"])
def test_a_damaged_safetensors_file_is_one_named_error(tmp_path, damage):
    d = build_tiny_checkpoint(tmp_path / damage)
    weights = d / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes({"truncated": data[:-100], "garbage": bytes(range(256)) * 8, "empty": b"",
                         "short": data[:6]}[damage])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint_tensors(d, config_from_checkpoint(d))
    message = str(info.value)
    assert message.startswith(f"weight file {weights} cannot be loaded: ")
    assert "copy or download the file again" in message and "\n" not in message


def test_unexpected_and_misshaped_tensors_fail(tmp_path, tiny_ckpts):
    cfg = tiny_config()
    tensors, _ = load_checkpoint_tensors(tiny_ckpts["openpi"], cfg)
    extra = dict(tensors)
    extra["state_proj.weight"] = tensors["action_in_proj.weight"].clone()
    d = tmp_path / "extra"
    shutil.copytree(tiny_ckpts["openpi"], d)
    save_checkpoint_tensors(extra, d, "openpi")
    with pytest.raises(CheckpointError, match=r"1 unexpected tensor\(s\): state_proj\.weight"):
        load_checkpoint_tensors(d, cfg)
    # a config.json naming the wrong variants -> shape mismatches, with the fix
    d2 = tmp_path / "wrong_variant"
    shutil.copytree(tiny_ckpts["openpi"], d2)
    conf = json.loads((d2 / "config.json").read_text())
    conf["action_expert_variant"] = "rpent_tiny"  # width 64 instead of 32
    (d2 / "config.json").write_text(json.dumps(conf))
    with pytest.raises(CheckpointError, match="shape mismatch.*fix the variants"):
        load_checkpoint_tensors(d2, config_from_checkpoint(d2))


def test_known_unused_tensors_are_accepted_and_tied_lm_head_replaces_embedding(tmp_path, tiny_ckpts):
    cfg = tiny_config()
    tensors, _ = load_checkpoint_tensors(tiny_ckpts["openpi"], cfg)
    t = dict(tensors)
    emb = t.pop(f"{LANG}embed_tokens.weight")
    t[PALI + "lm_head.weight"] = emb  # safetensors keeps only one of the tied pair
    t["paligemma_with_expert.gemma_expert.lm_head.weight"] = emb[:, :32].clone()
    d = tmp_path / "tied"
    shutil.copytree(tiny_ckpts["openpi"], d)
    save_checkpoint_tensors(t, d, "openpi")
    loaded, _ = load_checkpoint_tensors(d, cfg)
    assert set(loaded) == set(tensors)
    assert np.array_equal(loaded[f"{LANG}embed_tokens.weight"].numpy(), emb.numpy())


def test_both_layouts_hold_the_same_keys_and_give_the_same_actions(tiny_ckpts):
    with safe_open(str(tiny_ckpts["lerobot"] / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and all(k.startswith("model.") for k in keys)
    assert "model.paligemma_with_expert.paligemma.model.vision_tower.vision_model.embeddings.patch_embedding.weight" in keys
    assert "model.paligemma_with_expert.gemma_expert.model.layers.0.input_layernorm.dense.weight" in keys
    pols = {lay: Pi05Policy.from_checkpoint(p, "libero", log=lambda s: None) for lay, p in tiny_ckpts.items()}
    assert pols["openpi"].layout == "openpi" and pols["lerobot"].layout == "lerobot"
    obs = tiny_observation("libero", 2)
    a = pols["openpi"].predict(obs, {"seed": 1})
    b = pols["lerobot"].predict(obs, {"seed": 1})
    assert a.shape == (2, 5, 7) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)


def test_full_size_parameter_counts_from_shapes_only():
    c = parameter_counts(full_config())
    assert 3.30e9 < c["used_at_inference"] < 3.40e9  # reference: about 3.35 B used at inference
    assert 405e6 < c["vision"] < 420e6  # SigLIP so400m + projector, about 414 M
    assert 1.95e9 < c["backbone"] < 2.0e9  # 18 Gemma-2B layers, 1.98 B
    assert 305e6 < c["expert"] < 315e6 and 110e6 < c["adarms"] < 120e6
    # stored total = used + expert lm_head + final norm: lerobot/pi05_base holds 3.617 B
    assert abs(c["used_at_inference"] + c["stored_unused"] - 3.617e9) < 0.01e9


def test_threaded_read_returns_the_same_tensors_in_order(tmp_path):
    """The multi-threaded checkpoint reader (used for CUDA loads) gives exactly the single-threaded result."""
    from safetensors.torch import save_file

    from rpent.models.pi05.checkpoint import read_tensors

    g = torch.Generator().manual_seed(0)
    a = {f"a{i}": torch.randn(i + 1, 7, generator=g) for i in range(9)}
    b = {f"b{i}": torch.randint(0, 9, (i + 2,), generator=g) for i in range(4)}
    save_file(a, str(tmp_path / "one.safetensors"))
    save_file(b, str(tmp_path / "two.safetensors"))
    files = [tmp_path / "one.safetensors", tmp_path / "two.safetensors"]
    items = [(f"x.{k}", 0, k) for k in a] + [(f"y.{k}", 1, k) for k in b]
    one = read_tensors(files, items, "cpu", torch.bfloat16, threads=1)
    many = read_tensors(files, items, "cpu", torch.bfloat16, threads=4)
    assert list(many) == [name for name, _, _ in items] == list(one)
    for name in one:
        assert many[name].dtype == one[name].dtype and torch.equal(many[name], one[name])
    assert many["x.a3"].dtype == torch.bfloat16 and many["y.b1"].dtype == torch.int64  # floats cast, ints kept
