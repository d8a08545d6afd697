"""Policy backend: a lerobot checkpoint (ACT, Diffusion Policy, ...) in the evaluation process.

``policy.backend=lerobot policy.checkpoint=DIR``: :class:`rpent.models.lerobot.policy.LerobotPolicy`
on ``policy.device``, shared by every env worker through the driver. The same checkpoint served by
``python -m rpent.robots.components.lerobot_policy_server`` is evaluated with ``policy.endpoint=...``
instead; both report the checkpoint's and its training dataset's sha256 in ``vla.metadata``, which
the evaluation writes to ``policy.json`` and ``metrics.json``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from rpent.eval.errors import PolicyError


class InProcessLerobotPolicy:
    """A loaded lerobot checkpoint.

    Args:
        checkpoint: the checkpoint directory (validated: it holds config.json + model.safetensors).
        device: torch device.
        n_exec: actions per query (the config's ``num_action_chunks``).
        logger: receives the load message.

    Raises:
        PolicyError: lerobot is not installed, or the checkpoint cannot be loaded (the loader's message).
    """

    name = "lerobot"

    def __init__(self, checkpoint: str, device: str, n_exec: int, logger: logging.Logger | None = None):
        log = logger or logging.getLogger("rpent.eval.run")
        try:
            from rpent.models.lerobot.policy import LerobotPolicy

            self.policy = LerobotPolicy(checkpoint, device=device, n_exec=n_exec, log=log.info)
        except ImportError as exc:
            raise PolicyError(f"lerobot is not importable ({exc}); pip install -e '.[flywheel,train]' and "
                              "pip install --no-deps lerobot==0.4.4") from None
        except (OSError, ValueError, RuntimeError) as exc:
            raise PolicyError(f"cannot load the lerobot checkpoint {checkpoint}: {exc}") from None

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata`` of the checkpoint (with its and its dataset's sha256)."""
        return self.policy.metadata()

    def predict(self, observation: dict[str, Any], episodes: list[Any] | None = None) -> np.ndarray:
        """float32 [B, n_exec, 7]; ``episodes`` unused (the policy keeps no per-episode state).

        Raises:
            PolicyError: the observation does not fit the checkpoint (e.g. a task it was not trained on).
        """
        from rpent.models.lerobot.policy import ObservationError

        try:
            return self.policy.predict(observation)
        except ObservationError as exc:
            raise PolicyError(str(exc)) from None

    def close(self) -> None:
        """Drop the model."""
        self.policy = None  # type: ignore[assignment]
