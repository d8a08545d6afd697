"""Exceptions raised by batch VLA evaluation (``rpent-eval``).

Hierarchy::

    EvalError                   base class of everything below
    ├── EvalConfigError         a config is missing, malformed or violates a constraint (ValueError)
    │   └── CheckpointError     the model directory lacks config.json / model.safetensors / norm_stats.json
    ├── PolicyError             the policy backend failed, is missing, or returned malformed actions
    ├── EnvWorkerError          an env worker process raised or died; carries its traceback text
    └── TrajectoryCountError    eval/num_trajectories != total_num_envs x rollout_epoch

Every message names the problem and the fix; the constraint messages follow the product document
(the product document's evaluation guide, "constraints" and "common problems" tables).
"""

from __future__ import annotations


class EvalError(Exception):
    """Base class for every error raised by :mod:`rpent.eval`."""


class EvalConfigError(EvalError, ValueError):
    """An evaluation config is missing, malformed, or violates one of the seed's hard constraints."""


class CheckpointError(EvalConfigError):
    """The checkpoint directory (``rollout.model.model_path``) is missing or incomplete."""


class PolicyError(EvalError):
    """The policy backend is unavailable, failed, or returned actions of the wrong shape/dtype."""


class EnvWorkerError(EvalError):
    """An env worker process raised or exited; the message carries the worker id and its traceback."""


class TrajectoryCountError(EvalError):
    """The number of finished trajectories differs from ``total_num_envs x rollout_epoch``."""
