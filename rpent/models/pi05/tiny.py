"""Tiny Pi0.5 checkpoints for tests: real file formats, real key names, small dimensions, no downloads.

:func:`build_tiny_checkpoint` writes a directory that the real loader accepts:

* ``config.json`` - openpi style (variants + action settings) or lerobot style (``"type": "pi05"``,
  chunk_size, n_action_steps, ...), naming the tiny variants ``rpent_tiny`` / ``rpent_tiny_expert``;
* ``model.safetensors`` - seeded random weights under the real tensor names (``model.`` prefix for lerobot);
* ``norm_stats.json`` - openpi schema with q01/q99 for the embodiment's state and action dims;
* ``tokenizer.model`` - a SentencePiece model trained on a few LIBERO-like sentences (Gemma-like
  settings: BOS id 2, byte fallback, digits split, newline kept as its own piece).

Example::

    from rpent.models.pi05.tiny import build_tiny_checkpoint
    ckpt = build_tiny_checkpoint(tmp_path / "ckpt", layout="lerobot")
    # PI05_CHECKPOINT_PATH=ckpt python -m rpent.robots.components.pi05_vla_server --embodiment libero ...
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from rpent.models.pi05.checkpoint import LAYOUTS, random_tensors, save_checkpoint_tensors
from rpent.models.pi05.config import tiny_config
from rpent.models.pi05.embodiments import get_preset

TINY_SENTENCES = [
    "put both the alphabet soup and the tomato sauce in the basket",
    "put the black bowl in the bottom drawer of the cabinet and close it",
    "turn on the stove and put the moka pot on it",
    "pick up the ketchup and place it in the basket",
    "open the top drawer and put the bowl inside",
    "put both moka pots on the stove",
    "push the plate to the front of the stove",
    "put the cream cheese in the bowl",
    "Task: pick up the red block, State: 12 250 0 37 128 64 9 200;\nAction: ",
    "stack the left bowl on the right bowl and place them in the tray",
    "put the white mug on the left plate and put the yellow and white mug on the right plate",
    "pick up the book and place it in the back compartment of the caddy",
]
_TOKENIZER_LOCK = threading.Lock()
_TOKENIZER_BYTES: bytes | None = None


def tiny_tokenizer_bytes() -> bytes:
    """A small SentencePiece model (serialised), trained once per process with ``SentencePieceTrainer``.

    Vocabulary 320 pieces (fits the tiny model's 512 embedding rows), pad=0, eos=1, bos=2, unk=3 like
    Gemma; identity normalisation and no dummy prefix so "\\n" survives and is its own piece.
    """
    global _TOKENIZER_BYTES
    with _TOKENIZER_LOCK:
        if _TOKENIZER_BYTES is None:
            import sentencepiece as spm

            with tempfile.TemporaryDirectory() as d:
                corpus = Path(d) / "corpus.txt"
                corpus.write_text("\n".join(TINY_SENTENCES * 4) + "\n")
                spm.SentencePieceTrainer.train(
                    input=str(corpus),
                    model_prefix=str(Path(d) / "tiny"),
                    vocab_size=320,
                    model_type="bpe",
                    character_coverage=1.0,
                    byte_fallback=True,
                    split_digits=True,
                    normalization_rule_name="identity",
                    add_dummy_prefix=False,
                    remove_extra_whitespaces=False,
                    user_defined_symbols=["\n"],
                    pad_id=0,
                    eos_id=1,
                    bos_id=2,
                    unk_id=3,
                    hard_vocab_limit=False,
                    minloglevel=2,
                )
                _TOKENIZER_BYTES = (Path(d) / "tiny.model").read_bytes()
        return _TOKENIZER_BYTES


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def tiny_norm_stats(state_dim: int, action_dim: int, seed: int = 0) -> dict:
    """An openpi-schema norm_stats dict with q01 < q99 for the given dims (seeded)."""
    rng = np.random.default_rng(seed)

    def entry(d):
        q01 = rng.uniform(-1.0, -0.1, d)
        q99 = rng.uniform(0.1, 1.0, d)
        return {"mean": ((q01 + q99) / 2).tolist(), "std": ((q99 - q01) / 4).tolist(), "q01": q01.tolist(), "q99": q99.tolist()}

    return {"norm_stats": {"state": entry(state_dim), "actions": entry(action_dim)}}


def build_tiny_checkpoint(
    directory: str | os.PathLike,
    layout: str = "openpi",
    embodiment: str = "libero",
    seed: int = 0,
    drop_tensors: tuple[str, ...] = (),
    with_tokenizer: bool = True,
    with_norm_stats: bool = True,
) -> Path:
    """Write a tiny Pi0.5 checkpoint directory and return its path.

    Args:
        directory: target directory (created).
        layout: "openpi" (no key prefix) or "lerobot" (``model.`` prefix, lerobot-style config.json).
        embodiment: preset whose state/action dims the norm stats cover.
        seed: weight and stats seed (same seed -> same weights in both layouts).
        drop_tensors: checkpoint keys (openpi names) to leave out, to test the missing-tensor error.
        with_tokenizer / with_norm_stats: write ``tokenizer.model`` / ``norm_stats.json``.

    Raises:
        ValueError: unknown layout or embodiment.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    preset = get_preset(embodiment)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config()
    tensors = random_tensors(cfg, "cpu", seed=seed)
    for k in drop_tensors:
        tensors.pop(k)
    save_checkpoint_tensors(tensors, d, layout)
    if layout == "openpi":
        conf = {
            "paligemma_variant": cfg.paligemma_variant,
            "action_expert_variant": cfg.action_expert_variant,
            "action_dim": cfg.max_action_dim,
            "action_horizon": preset.action_horizon,
            "precision": "float32",
        }
    else:
        conf = {
            "type": "pi05",
            "paligemma_variant": cfg.paligemma_variant,
            "action_expert_variant": cfg.action_expert_variant,
            "chunk_size": 50,
            "n_action_steps": 10,
            "num_inference_steps": 10,
            "tokenizer_max_length": 200,
            "max_action_dim": 32,
            "max_state_dim": 32,
            "empty_cameras": 1,
            "image_resolution": [cfg.vision.image_size, cfg.vision.image_size],
            "dtype": "float32",
        }
    _write_atomic(d / "config.json", json.dumps(conf, indent=2).encode())
    if with_norm_stats:
        _write_atomic(d / "norm_stats.json", json.dumps(tiny_norm_stats(preset.state_dim, preset.action_dim, seed), indent=2).encode())
    if with_tokenizer:
        _write_atomic(d / "tokenizer.model", tiny_tokenizer_bytes())
    return d


def tiny_observation(embodiment: str = "libero", batch: int = 2, image_size: int = 256, seed: int = 0) -> dict:
    """A random ``vla.predict`` observation for ``embodiment`` (uint8 views, float32 states, task strings).

    Views: main_images/wrist_images uint8 [B, S, S, 3], plus extra_view_images [B, V-2, S, S, 3] for
    presets with more than 2 views; states float32 [B, state_dim] (about N(0, 0.3)).
    """
    preset = get_preset(embodiment)
    rng = np.random.default_rng(seed)
    tasks = ["put both moka pots on the stove", "open the top drawer and put the bowl inside", "pick up the ketchup"]
    obs = {
        "main_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "wrist_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "states": (rng.standard_normal((batch, preset.state_dim)) * 0.3).astype(np.float32),
        "task_descriptions": [tasks[i % len(tasks)] for i in range(batch)],
    }
    if preset.num_views > 2:
        obs["extra_view_images"] = rng.integers(0, 256, (batch, preset.num_views - 2, image_size, image_size, 3), dtype=np.uint8)
    return obs
