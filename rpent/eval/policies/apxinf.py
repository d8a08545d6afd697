"""Policy backend: ApxInf (in-process Rust/CUDA Pi0.5 engine) through ``apxinf_robo``'s L1 API.

As in the product document's evaluation guide: the harness keeps observation batching and OpenPI
pre/post-processing (here :class:`rpent.models.pi05.processor.Pi05Processor`: resize-with-pad to the
model's image size, prompt tokens, quantile un-normalisation), and ApxInf runs the model:
``apxinf_robo.load_bare_model(model_dir, model="pi05", device=..., precision=...)`` returns a handle
whose ``infer_rgb(rgb_u8 [views,S,S,3], "nhwc", token_ids uint32[T], noise float32[H,32] | None)``
gives the normalised chunk float32 [H, 32] (vla_pi05_reference §3). The handle is thread-bound: it is
loaded and called on the driver thread.

``apxinf_robo`` is not a PyPI package; it ships with ApxInf images. Without it this backend fails at
start with an install hint (and the other backends are unaffected).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from rpent.eval.errors import CheckpointError, PolicyError
from rpent.eval.settings import ModelSettings
from rpent.models.weights import WeightsFileError, check_safetensors

INSTALL_HINT = (
    "apxinf_robo is not importable in the rollout process: activate the environment that ships "
    "apxinf_py + apxinf_robo (the ApxInf image's venv; do not pip install it), or use "
    "policy.backend=pi05 (rpent's in-process Pi0.5) or policy.endpoint=<vla.predict server>"
)


class ApxInfPolicy:
    """Pi0.5 on ApxInf, one handle in the driver process.

    Args:
        model: validated model settings (model_path, precision, action_horizon, num_steps, noise_source).
        device: ``cuda:N``.
        logger: receives load messages.

    Raises:
        rpent.eval.errors.CheckpointError: a ``*.safetensors`` file is truncated or not safetensors.
        PolicyError: ``apxinf_robo`` missing (with :data:`INSTALL_HINT`), or the engine/checkpoint failed.
    """

    name = "apxinf"

    def __init__(self, model: ModelSettings, device: str, logger: logging.Logger | None = None):
        try:
            import apxinf_robo  # noqa: F401 - optional, image-provided
        except ImportError as exc:
            raise PolicyError(f"{INSTALL_HINT} ({exc})") from None
        from rpent.models.pi05.checkpoint import read_checkpoint_config, verify_checkpoint_dir
        from rpent.models.pi05.normalization import NormStats
        from rpent.models.pi05.policy import resolve_settings
        from rpent.models.pi05.processor import Pi05Processor
        from rpent.models.pi05.tokenizer import PromptTokenizer

        log = logger or logging.getLogger("rpent.eval.run")
        self.settings = model
        report = verify_checkpoint_dir(model.model_path)
        report.raise_if_missing()
        for weights in sorted(Path(model.model_path).glob("*.safetensors")):
            try:
                check_safetensors(weights)
            except WeightsFileError as exc:
                raise CheckpointError(str(exc)) from None
        ckpt_cfg = read_checkpoint_config(model.model_path)
        serving = resolve_settings(
            "libero", model.action_horizon, model.num_action_chunks, model.num_steps, "auto", ckpt_cfg
        )
        try:
            self.engine = apxinf_robo.load_bare_model(
                model.model_path, model="pi05", device=device, precision=model.precision,
                action_horizon=model.action_horizon, num_steps=model.num_steps,
            )
        except Exception as exc:  # noqa: BLE001 - engine errors have no common base class
            raise PolicyError(
                f"ApxInf could not load {model.model_path} on {device} ({model.precision}): {exc}; a 'kernel not "
                "found' / invalid device error means the binding was built for another GPU architecture "
                "(APXINF_CUDA_ARCH)"
            ) from exc
        tok = PromptTokenizer(report.get("tokenizer").path, int(getattr(self.engine, "max_token_len", 200)))
        self.processor = Pi05Processor(
            serving.preset, NormStats.load(report.get("norm_stats.json").path), tok, serving.discrete_state_input,
            int(getattr(self.engine, "action_dim", 32)),
        )
        self.image_size = int(getattr(self.engine, "image_size", 224))
        self.n_exec = serving.n_exec
        self._meta = {
            "embodiment": "libero",
            "action_dim": serving.preset.action_dim,
            "action_horizon": int(getattr(self.engine, "action_horizon", model.action_horizon)),
            "n_exec": serving.n_exec,
            "num_flow_steps": model.num_steps,
            "num_views": int(getattr(self.engine, "num_views", model.num_images_in_input)),
            "image_size": self.image_size,
            "device": device,
            "precision": model.precision,
        }
        log.info("ApxInf policy loaded: device=%s, metadata=%s", device, self._meta)

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata``-style description of the engine."""
        return dict(self._meta)

    def predict(self, observation: dict[str, Any], episodes: list[Any] | None = None) -> np.ndarray:
        """float32 [B, n_exec, 7]: one ``infer_rgb`` per batch row (the L1 call is single-sample);
        ``episodes`` unused."""
        import torch

        from rpent.models.pi05.processor import resize_with_pad

        options = {"noise_source": "observation"} if self.settings.noise_source == "observation" else None
        req = self.processor.prepare(observation, options, self._meta["action_horizon"])
        b, v = req.images.shape[:2]
        flat = torch.from_numpy(np.ascontiguousarray(req.images.reshape(b * v, *req.images.shape[2:])))
        resized = resize_with_pad(flat, self.image_size).round().clamp(0, 255).to(torch.uint8)
        rgb = resized.permute(0, 2, 3, 1).contiguous().numpy().reshape(b, v, self.image_size, self.image_size, 3)
        chunks = []
        for i in range(b):
            noise = req.noise[i] if self.settings.noise_source in ("observation", "torch") else None
            out = self.engine.infer_rgb(rgb[i], "nhwc", np.asarray(req.token_ids[i], dtype=np.uint32), noise)
            chunks.append(np.asarray(out, dtype=np.float32))
        return self.processor.postprocess(np.stack(chunks), req.states)

    def close(self) -> None:
        """Drop the engine handle."""
        self.engine = None
