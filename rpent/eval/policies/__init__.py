"""Policy backends of ``rpent-eval``: in-process Pi0.5, ApxInf, a lerobot checkpoint, or any ``vla.predict`` endpoint.

:func:`open_policy` picks one from :class:`~rpent.eval.settings.PolicySettings` (imports are lazy:
the endpoint backend needs no torch, ApxInf needs ``apxinf_robo``).
"""

from __future__ import annotations

import logging

from rpent.eval.policies.base import EpisodeRef, EvalPolicy, check_metadata
from rpent.eval.settings import EvalSettings

__all__ = ["EpisodeRef", "EvalPolicy", "check_metadata", "open_policy"]


def open_policy(settings: EvalSettings, logger: logging.Logger | None = None) -> EvalPolicy:
    """Build the configured backend.

    Raises:
        PolicyError: the backend cannot start (missing module, unreachable endpoint, bad checkpoint).
    """
    backend = settings.policy.backend
    if backend == "endpoint":
        from rpent.eval.policies.endpoint import EndpointPolicy

        options = {"noise_source": "observation"} if settings.model.noise_source == "observation" else None
        return EndpointPolicy(settings.policy.endpoint or "", settings.policy.timeout_s, options,
                              send_episode_keys=settings.policy.episode_keys)
    if backend == "lerobot":
        from rpent.eval.policies.lerobot import InProcessLerobotPolicy

        return InProcessLerobotPolicy(settings.policy.checkpoint or "", settings.policy.device,
                                      settings.model.num_action_chunks, logger)
    if backend == "apxinf":
        from rpent.eval.policies.apxinf import ApxInfPolicy

        return ApxInfPolicy(settings.model, settings.policy.device, logger)
    from rpent.eval.policies.pi05 import InProcessPi05Policy

    return InProcessPi05Policy(settings.model, settings.policy.device, logger)
