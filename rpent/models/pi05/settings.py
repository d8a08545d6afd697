"""Serving settings: an embodiment preset with command-line overrides, and seed 003's config checks.

Seed 003 ("这些字段在代码里有硬性校验") lists the checks this mirrors:
``num_flow_steps`` must equal the configured steps (checked per request in ``Pi05Policy.prepare``),
``action_horizon`` must be >= the number of executed actions, and the noise source must be a legal value
(checked per request in the processor). Light module: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpent.models.pi05.embodiments import EmbodimentPreset, get_preset


#: Weight precisions of the Pi0.5 server and policy besides "auto" (:mod:`rpent.models.pi05.fp8`): "bf16"
#: (float32 on the CPU) or "fp8" (E4M3 Gemma projections, GPUs with FP8 tensor cores).
PRECISIONS = ("bf16", "fp8")


class ConfigCheckError(ValueError):
    """A serving setting contradicts another (seed 003's config constraints)."""


@dataclass(frozen=True)
class ServingSettings:
    """Resolved serving settings: the preset with command-line overrides applied.

    Attributes: embodiment preset, action_horizon (H), n_exec, num_flow_steps (N),
    discrete_state_input (state in prompt).
    """

    preset: EmbodimentPreset
    action_horizon: int
    n_exec: int
    num_flow_steps: int
    discrete_state_input: bool


def resolve_settings(
    embodiment: str,
    action_horizon: int | None = None,
    n_exec: int | None = None,
    num_flow_steps: int | None = None,
    state_in_prompt: str = "auto",
    checkpoint_config: dict | None = None,
) -> ServingSettings:
    """Apply overrides to the preset and run seed 003's config checks.

    Args:
        embodiment: preset name.
        action_horizon, n_exec, num_flow_steps: overrides (None = preset value).
        state_in_prompt: "auto" (checkpoint config.json ``discrete_state_input`` if present, else the
            preset), "yes" or "no".
        checkpoint_config: parsed config.json (optional).

    Raises:
        ConfigCheckError: ``action_horizon < n_exec`` or a bad ``state_in_prompt``.
        ValueError: unknown embodiment.
    """
    p = get_preset(embodiment)
    hz = p.action_horizon if action_horizon is None else int(action_horizon)
    ne = p.n_exec if n_exec is None else int(n_exec)
    nf = p.num_flow_steps if num_flow_steps is None else int(num_flow_steps)
    if nf < 1:
        raise ConfigCheckError(f"num_flow_steps must be >= 1, got {nf}")
    if hz < ne:
        raise ConfigCheckError(
            f"action_horizon ({hz}) must be at least the number of executed actions n_exec ({ne}): "
            "raise --action-horizon or lower --n-exec"
        )
    if state_in_prompt == "auto":
        ds = bool((checkpoint_config or {}).get("discrete_state_input", p.discrete_state_input))
    elif state_in_prompt in ("yes", "no"):
        ds = state_in_prompt == "yes"
    else:
        raise ConfigCheckError(f"state_in_prompt must be auto, yes or no, got {state_in_prompt!r}")
    return ServingSettings(p, hz, ne, nf, ds)
