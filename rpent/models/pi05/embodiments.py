"""Embodiment presets of the Pi0.5 server and their action output transforms.

Presets follow RPent's ``PI05_EMBODIMENTS`` as described in seed 000 and reference section 3
(all: 5 flow steps, 32-d padded actions, gemma_2b + gemma_300m):

============  =====  =======  ======  ==========  ===========================================
preset        views  horizon  n_exec  action_dim  returned actions
============  =====  =======  ======  ==========  ===========================================
libero        2      10       5       7           EEF deltas (xyz, axis-angle, gripper -1 open
                                                  / +1 close), as the model emits them; no
                                                  gripper flip for pi05 (RLinf action_utils)
dual_franka   3      20       20      20          absolute TCP poses, 2 x [xyz, rot6d, grip]
yam           3      30       30      14          absolute qpos14 (2 x [6 joints, gripper])
============  =====  =======  ======  ==========  ===========================================

``dual_franka`` and ``yam`` are experimental (seed 000): their models predict deltas; we turn them
into absolute targets with the current state, documented in :func:`delta_to_absolute`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EmbodimentPreset:
    """Serving settings for one robot.

    Attributes:
        name: preset name.
        num_views: camera views fed to SigLIP, in order main, wrist, extra views.
        action_horizon: H, actions predicted per chunk.
        n_exec: actions returned per query (the first n_exec of the chunk).
        action_dim: env action width (first dims of the 32-d model output).
        num_flow_steps: Euler steps (5, RLinf's LIBERO eval setting).
        state_dim: length of ``states`` rows expected from the caller.
        discrete_state_input: put the binned state into the prompt (openpi pi05 format) by default.
        action_mode: "delta" (returned as predicted), "absolute_joint" or "absolute_tcp_rot6d".
    """

    name: str
    num_views: int
    action_horizon: int
    n_exec: int
    action_dim: int
    num_flow_steps: int
    state_dim: int
    discrete_state_input: bool
    action_mode: str = "delta"


EMBODIMENTS: dict[str, EmbodimentPreset] = {
    "libero": EmbodimentPreset("libero", 2, 10, 5, 7, 5, 8, False, "delta"),
    "dual_franka": EmbodimentPreset("dual_franka", 3, 20, 20, 20, 5, 20, False, "absolute_tcp_rot6d"),
    "yam": EmbodimentPreset("yam", 3, 30, 30, 14, 5, 14, True, "absolute_joint"),
}


def get_preset(name: str) -> EmbodimentPreset:
    """Look up a preset. Raises ValueError listing the known ones."""
    try:
        return EMBODIMENTS[name]
    except KeyError:
        raise ValueError(f"unknown embodiment {name!r}; choose one of {sorted(EMBODIMENTS)}") from None


def rot6d_to_matrix(r6: np.ndarray) -> np.ndarray:
    """6-D rotation (first two columns of R, Zhou et al. 2019) [..., 6] -> rotation matrices [..., 3, 3]
    by Gram-Schmidt."""
    a1, a2 = r6[..., 0:3], r6[..., 3:6]
    b1 = a1 / np.maximum(np.linalg.norm(a1, axis=-1, keepdims=True), 1e-8)
    a2 = a2 - (b1 * a2).sum(-1, keepdims=True) * b1
    b2 = a2 / np.maximum(np.linalg.norm(a2, axis=-1, keepdims=True), 1e-8)
    b3 = np.cross(b1, b2)
    return np.stack([b1, b2, b3], axis=-1)


def matrix_to_rot6d(m: np.ndarray) -> np.ndarray:
    """Rotation matrices [..., 3, 3] -> [..., 6] (column 0 then column 1)."""
    return np.concatenate([m[..., :, 0], m[..., :, 1]], axis=-1)


def delta_to_absolute(preset: EmbodimentPreset, actions: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Turn un-normalised model actions into what the preset returns.

    Args:
        preset: the embodiment.
        actions: float32 [B, n, action_dim] in environment units.
        states: float32 [B, state_dim] current robot state (environment units).

    Returns:
        float32 [B, n, action_dim]:
        * ``delta``: unchanged.
        * ``absolute_joint`` (yam): per arm [6 joint deltas, absolute gripper] -> joints + state joints
          (openpi ``AbsoluteActions`` with mask (6 x True, False) per arm).
        * ``absolute_tcp_rot6d`` (dual_franka): per arm [dxyz, rot6d delta, gripper] with deltas in the
          robot base frame: xyz = state xyz + dxyz, R = R_delta @ R_state, gripper absolute.
    """
    if preset.action_mode == "delta":
        return actions
    out = actions.astype(np.float32).copy()
    if preset.action_mode == "absolute_joint":
        mask = np.array(([True] * 6 + [False]) * 2)
        out[..., mask] += states[:, None, : mask.size][..., mask]
        return out
    if preset.action_mode == "absolute_tcp_rot6d":
        for arm in range(2):
            o = arm * 10
            out[..., o:o + 3] += states[:, None, o:o + 3]
            r_state = rot6d_to_matrix(states[:, None, o + 3:o + 9])
            r_delta = rot6d_to_matrix(actions[..., o + 3:o + 9])
            out[..., o + 3:o + 9] = matrix_to_rot6d(r_delta @ r_state)
        return out
    raise ValueError(f"unknown action_mode {preset.action_mode!r}")
