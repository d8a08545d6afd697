"""A stand-in for APXinf-robo's L1 bare-model API (``load_bare_model`` / ``Model.infer_rgb``), for tests.

Implements the documented signature and its strictness (reference ``vla_pi05_reference.md`` section 3):
inputs must be uint8 [views, S, S, 3] ("nhwc"), uint32 [T] token ids (T <= max_token_len) and float32
[H, 32] noise or None; the handle is thread-bound (a call from another thread raises). The output is
a simple deterministic function of the inputs (:func:`expected_normalized`), so tests can check that
the adapter sent the right views, tokens and noise and un-normalised the right rows.

The model directory needs ``config.json`` and ``model.safetensors`` (any content); ``config.json`` may
set ``num_views`` (views the checkpoint was trained with, default 2), ``image_size`` (default 224),
``max_token_len`` (default 200) and ``num_steps`` (flow steps, default 5).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

ACTION_DIM = 32


def expected_normalized(rgb_u8: np.ndarray, token_ids: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The stand-in's output for one query: float32 [H, 32].

    ``0.5 * noise + 0.2 * mean(view j % V) / 255 + 0.1 * (sum(tokens) % 97) / 97 + 0.01 * T`` per column j.
    """
    views = rgb_u8.reshape(rgb_u8.shape[0], -1).astype(np.float64).mean(axis=1) / 255.0
    col = np.array([views[j % len(views)] for j in range(ACTION_DIM)])
    tok = (int(np.asarray(token_ids, dtype=np.int64).sum()) % 97) / 97.0
    return (0.5 * noise.astype(np.float64) + 0.2 * col[None, :] + 0.1 * tok + 0.01 * len(token_ids)).astype(np.float32)


class StandInModel:
    """The L1 handle: properties action_horizon, action_dim, num_views, image_size, patch_size, max_token_len."""

    def __init__(self, action_horizon: int, num_views: int, image_size: int, max_token_len: int, num_steps: int, seed: int):
        self.action_horizon = action_horizon
        self.action_dim = ACTION_DIM
        self.num_views = num_views
        self.image_size = image_size
        self.patch_size = 14
        self.max_token_len = max_token_len
        self.num_steps = num_steps
        self._thread = threading.get_ident()
        self._rng = np.random.default_rng(seed)
        self.calls = 0

    def infer_rgb(self, rgb_u8, layout: str = "nhwc", token_ids=None, noise=None) -> np.ndarray:
        """uint8 [views, S, S, 3], uint32 [T], float32 [H, 32] | None -> float32 [H, 32] (normalised domain)."""
        if threading.get_ident() != self._thread:
            raise RuntimeError("ApxInf model handle used from a different thread than the one that loaded it")
        if layout != "nhwc":
            raise ValueError(f"stand-in supports layout 'nhwc' only, got {layout!r}")
        s, v = self.image_size, self.num_views
        if not isinstance(rgb_u8, np.ndarray) or rgb_u8.dtype != np.uint8 or rgb_u8.shape != (v, s, s, 3):
            raise ValueError(f"rgb_u8 must be uint8 [{v}, {s}, {s}, 3], got {getattr(rgb_u8, 'dtype', type(rgb_u8))} "
                             f"{list(getattr(rgb_u8, 'shape', ()))}")
        if not rgb_u8.flags.c_contiguous:
            raise ValueError("rgb_u8 must be C-contiguous")
        if not isinstance(token_ids, np.ndarray) or token_ids.dtype != np.uint32 or token_ids.ndim != 1:
            raise ValueError(f"token_ids must be a uint32 [T] array, got {getattr(token_ids, 'dtype', type(token_ids))}")
        if not 1 <= token_ids.size <= self.max_token_len:
            raise ValueError(f"token_ids length {token_ids.size} not in 1..{self.max_token_len}")
        if noise is None:
            noise = self._rng.standard_normal((self.action_horizon, ACTION_DIM)).astype(np.float32)
        elif not isinstance(noise, np.ndarray) or noise.dtype != np.float32 or noise.shape != (self.action_horizon, ACTION_DIM):
            raise ValueError(f"noise must be float32 [{self.action_horizon}, {ACTION_DIM}], got "
                             f"{getattr(noise, 'dtype', type(noise))} {list(getattr(noise, 'shape', ()))}")
        self.calls += 1
        return expected_normalized(rgb_u8, token_ids, noise)


def load_bare_model(model_dir, model: str = "pi05", device: str = "cuda:0", precision: str = "auto", calibration=None,
                    tactics=None, action_horizon: int | None = None, num_views: int | None = None,
                    sampling_seed: int = 0) -> StandInModel:
    """The L1 loader's signature. Raises FileNotFoundError / ValueError like the engine would."""
    if model != "pi05":
        raise ValueError(f"unsupported model {model!r}")
    if precision not in ("auto", "bf16", "fp8", "int8"):
        raise ValueError(f"unsupported precision {precision!r}")
    if precision == "fp8" and calibration is None:
        raise ValueError("fp8 needs a calibration")
    d = Path(model_dir)
    for name in ("config.json", "model.safetensors"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d / name} not found")
    cfg = json.loads((d / "config.json").read_text())
    ckpt_views = int(cfg.get("num_views", 2))
    views = ckpt_views if num_views is None else min(int(num_views), ckpt_views)  # absent views are skipped
    return StandInModel(int(action_horizon or cfg.get("action_horizon", 10)), views, int(cfg.get("image_size", 224)),
                        int(cfg.get("max_token_len", 200)), int(cfg.get("num_steps", 5)), sampling_seed)
