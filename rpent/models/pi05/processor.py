"""Observation -> model inputs and model outputs -> environment actions for Pi0.5.

Conventions and their sources:

* **Image orientation**: images arrive already in the VLA orientation. For LIBERO the env server's
  ``env.policy_obs`` rotates ``agentview_image``/``robot0_eye_in_hand_image`` by 180 deg (both axes flipped),
  as openpi ``examples/libero/main.py`` and RLinf ``rlinf/envs/libero/utils.py`` do; the server does not
  rotate again.
* **Resize**: openpi ``image_tools.resize_with_pad``: keep the aspect ratio, bilinear resize so the image
  fits in SxS (S = 224), pad centred with black (0), in uint8. We resize on the model device with
  ``F.interpolate(bilinear, antialias=True)`` (PIL-style area-aware bilinear) and round back to uint8 levels.
  A square 256x256 LIBERO frame becomes a plain 224x224 resize.
* **Pixel scale**: uint8 -> ``x / 255 * 2 - 1`` in [-1, 1] (openpi ``Observation.from_dict``).
* **Views**: main, wrist, then ``extra_view_images`` in order; the preset's ``num_views`` are used. Absent
  views are not padded with masked blank images: a masked view changes nothing but costs 256 tokens
  (ApxInf ``config.rs``: "numerically equivalent to openpi padding + masking").
* **State**: normalised in the mode the checkpoint declares (quantile by default, or mean/std; see
  :mod:`rpent.models.pi05.normalization`) with ``norm_stats.json`` ``state``; written into the prompt only when
  ``discrete_state_input`` (openpi tokenizer; see :mod:`rpent.models.pi05.tokenizer`). pi05 has no
  state projection, so without it the state is not used by the model at all.
* **Actions**: model output [B, H, 32] (normalised) -> first ``n_exec`` steps -> first ``action_dim`` dims ->
  un-normalisation in the declared mode with the ``actions`` stats (openpi ``Unnormalize`` + ``LiberoOutputs`` which
  keeps the first 7 dims) -> float32 environment units; no gripper flip or clipping for pi05
  (RLinf ``prepare_actions_for_libero`` flips only OpenVLA/GR00T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rpent.models.pi05.embodiments import EmbodimentPreset, delta_to_absolute
from rpent.models.pi05.normalization import NormStats
from rpent.models.pi05.tokenizer import PromptTokenizer

NOISE_SOURCES = ("server", "observation")
OPTION_KEYS = ("num_flow_steps", "noise_source", "seed")


class ObservationError(ValueError):
    """A predict request is malformed; the message names the field and the expected form."""


@dataclass
class PreparedRequest:
    """One predict request after CPU preprocessing.

    Attributes:
        images: uint8 [B, V, H, W, 3] views in model order.
        token_ids: B int64 arrays (exact prompt lengths).
        noise: float32 [B, H, 32] initial flow state.
        states: float32 [B, state_dim] raw states (environment units).
    """

    images: np.ndarray
    token_ids: list[np.ndarray]
    noise: np.ndarray
    states: np.ndarray

    @property
    def batch_size(self) -> int:
        """B."""
        return int(self.images.shape[0])

    @property
    def shape_key(self) -> tuple:
        """Requests with equal keys can share one batched model call (same views and image size)."""
        return tuple(self.images.shape[1:])


def resize_with_pad(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> float [N, 3, size, size] holding uint8 levels 0..255 (openpi ``resize_with_pad``).

    Raises:
        ValueError: not a [N, H, W, 3] tensor.
    """
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be [N, H, W, 3], got {list(images.shape)}")
    x = images.permute(0, 3, 1, 2).float()
    h, w = x.shape[-2:]
    if (h, w) == (size, size):
        return x
    ratio = max(w / size, h / size)
    nh, nw = int(h / ratio), int(w / ratio)
    x = F.interpolate(x, size=(nh, nw), mode="bilinear", antialias=True, align_corners=False).round_().clamp_(0, 255)
    top, left = (size - nh) // 2, (size - nw) // 2
    return F.pad(x, (left, size - nw - left, top, size - nh - top), value=0.0)


def resize_with_pad_u8(images: np.ndarray, size: int) -> np.ndarray:
    """uint8 [N, H, W, 3] -> uint8 [N, size, size, 3] on the CPU, by :func:`resize_with_pad` (openpi
    ``resize_with_pad``: aspect kept, bilinear with antialias, centred black padding, rounded to uint8).
    Images already ``size`` x ``size`` are returned unchanged (no copy when contiguous).

    Raises:
        ValueError: not a uint8 [N, H, W, 3] array.
    """
    a = np.asarray(images)
    if a.dtype != np.uint8 or a.ndim != 4 or a.shape[-1] != 3:
        raise ValueError(f"images must be uint8 [N, H, W, 3], got {a.dtype} {list(a.shape)}")
    if a.shape[1:3] == (size, size):
        return np.ascontiguousarray(a)
    x = resize_with_pad(torch.from_numpy(np.ascontiguousarray(a)), size)
    return x.to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def images_to_model(images_u8: torch.Tensor, size: int, dtype: torch.dtype) -> torch.Tensor:
    """uint8 [B, V, H, W, 3] (on the model device) -> [B, V, 3, size, size] in [-1, 1], ``dtype``."""
    b, v = images_u8.shape[:2]
    x = resize_with_pad(images_u8.flatten(0, 1), size)
    return (x * (2.0 / 255.0) - 1.0).to(dtype).view(b, v, 3, size, size)


class Pi05Processor:
    """Turns ``vla.predict`` observations into :class:`PreparedRequest` and model output into actions.

    Args:
        preset: the embodiment (views, horizon, n_exec, action_dim, state_dim).
        norm_stats: quantile stats (``state`` and ``actions``).
        tokenizer: the prompt tokenizer.
        discrete_state_input: put the binned normalised state in the prompt.
        max_action_dim: model action width (32).

    Raises:
        ValueError: norm stats narrower than the preset's state/action dims.
    """

    def __init__(
        self,
        preset: EmbodimentPreset,
        norm_stats: NormStats,
        tokenizer: PromptTokenizer,
        discrete_state_input: bool,
        max_action_dim: int = 32,
    ):
        if norm_stats.actions.dim < preset.action_dim:
            raise ValueError(
                f"norm_stats 'actions' has {norm_stats.actions.dim} dims but embodiment {preset.name!r} returns "
                f"{preset.action_dim}: use the norm_stats.json that belongs to this checkpoint"
            )
        if preset.action_dim > max_action_dim:
            raise ValueError(f"action_dim {preset.action_dim} exceeds the model's {max_action_dim}")
        self.preset = preset
        self.norm_stats = norm_stats
        self.tokenizer = tokenizer
        self.discrete_state_input = discrete_state_input
        self.max_action_dim = max_action_dim

    # ------------------------------------------------------------------ requests
    def _images(self, obs: dict, b: int | None) -> np.ndarray:
        views = []
        for key in ("main_images", "wrist_images"):
            if key not in obs:
                raise ObservationError(f"observation lacks '{key}': uint8 [B, H, W, 3]")
            a = np.asarray(obs[key])
            if a.ndim == 3:
                raise ObservationError(f"'{key}' has shape {list(a.shape)}: add the batch dim, uint8 [B, H, W, 3]")
            views.append(a)
        extra = obs.get("extra_view_images")
        if extra is not None:
            e = np.asarray(extra)
            if e.ndim != 5:
                raise ObservationError(f"'extra_view_images' must be uint8 [B, V, H, W, 3], got {list(e.shape)}")
            views.extend(e[:, i] for i in range(e.shape[1]))
        need = self.preset.num_views
        if len(views) < need:
            raise ObservationError(
                f"embodiment {self.preset.name!r} needs {need} views (main, wrist, {need - 2} in 'extra_view_images'), got {len(views)}"
            )
        views = views[:need]
        for i, v in enumerate(views):
            if v.dtype != np.uint8 or v.ndim != 4 or v.shape[-1] != 3:
                raise ObservationError(f"view {i} must be uint8 [B, H, W, 3], got {v.dtype} {list(v.shape)}")
            if v.shape != views[0].shape:
                raise ObservationError(f"all views must share [B, H, W, 3]; view 0 is {list(views[0].shape)}, view {i} is {list(v.shape)}")
        if b is not None and views[0].shape[0] != b:
            raise ObservationError(f"images have batch {views[0].shape[0]} but {b} task descriptions were given")
        return np.stack(views, axis=1)

    def prepare(self, obs: dict, options: dict | None = None, action_horizon: int | None = None) -> PreparedRequest:
        """Validate and preprocess one request on the CPU.

        Args:
            obs: the ``vla.predict`` observation (see docs/interfaces.md).
            options: None or {"noise_source": "server"|"observation", "seed": int, "num_flow_steps": int}
                (``num_flow_steps`` is checked by the caller against the loaded model).
            action_horizon: H of the model (shape of the noise).

        Raises:
            ObservationError: naming the bad field and the expected form.
        """
        if not isinstance(obs, dict):
            raise ObservationError(f"observation must be a dict, got {type(obs).__name__}")
        options = dict(options or {})
        unknown = sorted(set(options) - set(OPTION_KEYS))
        if unknown:
            raise ObservationError(f"unknown option(s) {unknown}; known: {list(OPTION_KEYS)}")
        tasks = obs.get("task_descriptions")
        if isinstance(tasks, str):
            raise ObservationError("'task_descriptions' must be a list of str (one per batch row), got a single str")
        if not isinstance(tasks, (list, tuple)) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise ObservationError("observation needs 'task_descriptions': a non-empty list[str], one per batch row")
        b = len(tasks)
        images = self._images(obs, b)
        if "states" not in obs:
            raise ObservationError(f"observation lacks 'states': float32 [B, {self.preset.state_dim}]")
        states = np.asarray(obs["states"], dtype=np.float32)
        if states.shape != (b, self.preset.state_dim):
            raise ObservationError(f"'states' must be float32 [B={b}, {self.preset.state_dim}], got {list(states.shape)}")
        if not np.isfinite(states).all():
            raise ObservationError("'states' contains NaN or inf")
        hz = action_horizon
        source = options.get("noise_source", "observation" if obs.get("noise") is not None else "server")
        if source not in NOISE_SOURCES:
            raise ObservationError(f"noise_source must be one of {list(NOISE_SOURCES)}, got {source!r}")
        if source == "observation":
            if obs.get("noise") is None:
                raise ObservationError(f"noise_source 'observation' needs observation['noise'] float32 [B, {hz}, {self.max_action_dim}]")
            noise = np.asarray(obs["noise"], dtype=np.float32)
            if noise.shape != (b, hz, self.max_action_dim):
                raise ObservationError(f"'noise' must be float32 [B={b}, {hz}, {self.max_action_dim}] (action_horizon, padded action dim), got {list(noise.shape)}")
            if not np.isfinite(noise).all():
                raise ObservationError("'noise' contains NaN or inf")
        else:
            seed = options.get("seed")
            if seed is not None and not isinstance(seed, int):
                raise ObservationError(f"option 'seed' must be an int, got {type(seed).__name__}")
            rng = np.random.default_rng(seed)
            noise = rng.standard_normal((b, hz, self.max_action_dim), dtype=np.float32)
        norm_states = self.norm_stats.state.normalize(states)
        ids = [
            self.tokenizer.tokenize(t, norm_states[i, : self.norm_stats.state.dim] if self.discrete_state_input else None)
            for i, t in enumerate(tasks)
        ]
        return PreparedRequest(images=images, token_ids=ids, noise=noise, states=states)

    # ------------------------------------------------------------------ outputs
    def postprocess(self, normalized: np.ndarray, states: np.ndarray) -> np.ndarray:
        """Model output float32 [B, H, 32] -> env actions float32 [B, n_exec, action_dim] (see module doc)."""
        p = self.preset
        a = self.norm_stats.actions.unnormalize(normalized[:, : p.n_exec, : p.action_dim])
        return np.ascontiguousarray(delta_to_absolute(p, a, states), dtype=np.float32)
