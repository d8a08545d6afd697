"""What the rollout driver needs from a policy backend, and the metadata check shared by all of them.

A backend answers the VLA predict contract (docs/interfaces.md, ``vla.predict``) in-process::

    predict(observation) -> float32 [B, n_exec, 7] (environment units)
    observation = {main_images u8 [B,256,256,3], wrist_images u8 [B,256,256,3] (2-view models),
                   states f32 [B,8], task_descriptions [str]*B, noise f32 [B,H,32] (observation noise)}

``predict`` also receives one :class:`EpisodeRef` per row. ``metadata()`` returns ``vla.metadata`` (embodiment, action_dim, action_horizon, n_exec,
num_flow_steps, num_views, image_size). :func:`check_metadata` compares it with the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rpent.eval.errors import PolicyError
from rpent.eval.settings import ModelSettings


@dataclass(frozen=True)
class EpisodeRef:
    """Which episode a batch row belongs to (backends that keep per-episode state use it).

    Attributes:
        suite: suite name; task_id, init_state_id: the (task, reset state) pair;
        epoch: rollout epoch; env_index: global env slot; query: 0-based policy query of the episode.
    """

    suite: str
    task_id: int
    init_state_id: int
    epoch: int
    env_index: int
    query: int

    @property
    def episode_key(self) -> str:
        """``<suite>_t<task>_s<init state>#e<epoch>g<env>``: the replay policy server's episode key
        (the part before ``#`` names the recorded sequence, the whole key one episode)."""
        return f"{self.suite}_t{self.task_id}_s{self.init_state_id}#e{self.epoch}g{self.env_index}"


class EvalPolicy(Protocol):
    """A policy backend used by :class:`rpent.eval.rollout.RolloutDriver`."""

    name: str

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata`` of the loaded model."""
        ...

    def predict(self, observation: dict[str, Any], episodes: list[EpisodeRef]) -> np.ndarray:
        """Actions float32 [B, n_exec, action_dim] for a batch; ``episodes[i]`` identifies row i."""
        ...

    def close(self) -> None:
        """Release the model / connection."""
        ...


def check_metadata(meta: dict[str, Any], model: ModelSettings) -> list[str]:
    """Check a backend's ``vla.metadata`` against the config (``num_flow_steps`` 0 or absent: the
    policy is not a flow-matching model, e.g. a replay server, and flow steps are not compared).

    Returns:
        warnings (soft mismatches the run can live with, e.g. a different action_horizon).

    Raises:
        PolicyError: action_dim differs, ``n_exec < num_action_chunks``, camera views differ (the
            seed's "active camera views ... but the checkpoint expects ..."), or flow steps differ.
    """
    warnings: list[str] = []
    if "action_dim" in meta and int(meta["action_dim"]) != model.action_dim:
        raise PolicyError(
            f"the policy produces {meta['action_dim']}-D actions but rollout.model.action_dim={model.action_dim}; "
            "serve a LIBERO (7-D) embodiment"
        )
    if "n_exec" in meta and int(meta["n_exec"]) < model.num_action_chunks:
        raise PolicyError(
            f"the policy returns {meta['n_exec']} actions per query but rollout.model.num_action_chunks="
            f"{model.num_action_chunks}; lower num_action_chunks or raise the server's n_exec"
        )
    if "num_views" in meta and int(meta["num_views"]) != model.num_images_in_input:
        raise PolicyError(
            f"active camera views ({model.num_images_in_input}, rollout.model.openpi.num_images_in_input) but the "
            f"checkpoint expects {meta['num_views']}; set num_images_in_input to match the checkpoint"
        )
    flow_steps = int(meta.get("num_flow_steps") or 0)  # 0: not a flow-matching policy (replay, scripted)
    if flow_steps > 0 and flow_steps != model.num_steps:
        raise PolicyError(
            f"num_flow_steps must match OpenPI num_steps: the policy runs {flow_steps} flow steps but "
            f"rollout.model.openpi.num_steps={model.num_steps}; align them (or restart the server)"
        )
    if flow_steps > 0 and "action_horizon" in meta and int(meta["action_horizon"]) != model.action_horizon:
        warnings.append(
            f"policy action_horizon {meta['action_horizon']} differs from rollout.model.apxinf.action_horizon="
            f"{model.action_horizon}; the policy's value is used"
        )
    return warnings
