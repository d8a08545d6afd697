"""Policy backend: rpent's own Pi0.5 (:mod:`rpent.models.pi05`) in the evaluation process.

One copy of the weights on ``policy.device`` (bf16 on CUDA, float32 on CPU: the project's dtype
rule in :func:`rpent.models.pi05.model.default_device_dtype`), shared by every env worker through the
driver. Evaluation integrates the deterministic flow ODE (``flow_sde`` degrades to it, seed step 3).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from rpent.eval.errors import CheckpointError, PolicyError
from rpent.eval.settings import ModelSettings


#: Every batch size up to 16 gets its own CUDA graph (captured at its first use): the driver's calls carry
#: the running envs of one pipeline stage (e.g. 5 or 10), which would otherwise be padded to the next of
#: the server's buckets (1, 2, 4, 8, 12, 16) and pay for the dummy rows on every call.
EXACT_BATCH_BUCKETS = tuple(range(1, 17))


class InProcessPi05Policy:
    """Pi0.5 loaded from ``model.model_path`` with the ``libero`` embodiment preset.

    Args:
        model: validated model settings (action_horizon, num_action_chunks -> n_exec, num_steps).
        device: torch device string.
        logger: receives the checkpoint OK/MISS list and load timings.

    Raises:
        rpent.eval.errors.CheckpointError: a weight file is truncated or not safetensors (a config
            error: ``rpent-eval`` exits 2 naming the file and the fix).
        rpent.eval.errors.EvalConfigError: a ``cuda`` device where torch sees no CUDA, or precision ``fp8``
            on a device without FP8 tensor cores (exit 2).
        PolicyError: the checkpoint cannot be loaded otherwise (the loader's message is kept).
    """

    name = "pi05"

    def __init__(self, model: ModelSettings, device: str, logger: logging.Logger | None = None):
        from rpent.models.pi05.checkpoint import DamagedWeightsError
        from rpent.models.pi05.fp8 import Fp8NotSupportedError
        from rpent.models.pi05.policy import Pi05Policy

        log = logger or logging.getLogger("rpent.eval.run")
        self.settings = model
        if str(device).startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                from rpent.eval.errors import EvalConfigError

                raise EvalConfigError(f"policy.device={device} but this torch ({torch.__version__}) sees no CUDA "
                                      "device; set policy.device=cpu (or auto) on this machine")
        try:
            self.policy = Pi05Policy.from_checkpoint(
                model.model_path,
                embodiment="libero",
                device=device,
                action_horizon=model.action_horizon,
                n_exec=model.num_action_chunks,
                num_flow_steps=model.num_steps,
                log=log.info,
                batch_buckets=EXACT_BATCH_BUCKETS,
                precision="fp8" if model.precision == "fp8" else "bf16",  # bf16 on CUDA, float32 on the CPU
            )
        except DamagedWeightsError as exc:
            raise CheckpointError(str(exc)) from None
        except Fp8NotSupportedError as exc:
            from rpent.eval.errors import EvalConfigError

            raise EvalConfigError(f"rollout.model.apxinf.precision=fp8: {exc}") from None
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise PolicyError(f"cannot load Pi0.5 from {model.model_path}: {exc}") from exc
        self._options: dict[str, Any] = {"num_flow_steps": model.num_steps}
        if model.noise_source == "observation":
            self._options["noise_source"] = "observation"

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata`` of the loaded model (plus device, dtype, checkpoint)."""
        return self.policy.metadata()

    def predict(self, observation: dict[str, Any], episodes: list[Any] | None = None) -> np.ndarray:
        """float32 [B, n_exec, 7] for a batch (see :mod:`rpent.eval.policies.base`); ``episodes`` unused."""
        return self.policy.predict(observation, self._options)

    def close(self) -> None:
        """Drop the model."""
        self.policy = None  # type: ignore[assignment]
