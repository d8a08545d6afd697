"""Meta-World's scripted expert behind the ``vla.predict`` contract (docs/interfaces.md).

It runs in the Meta-World environment (``.venv-metaworld/bin/python``) with the repository on
``PYTHONPATH`` and imports only :mod:`rpent.rpc`, numpy and ``metaworld.policies``; rpent-eval
starts it for ``--robot metaworld --policy expert``. Run::

    PYTHONPATH=. .venv-metaworld/bin/python -m rpent.robots.metaworld.expert_server --transport socket --port 0

Methods:

* ``vla.metadata`` -> ``{embodiment: "metaworld_sawyer", action_dim: 4, action_horizon: 1, n_exec: 1,
  num_flow_steps: 0, num_views: 0, image_size: 0, policy: "metaworld_expert"}``.
* ``vla.predict(observation, options=None)`` -> float32 ``[B, 1, 4]``: for each row ``b``,
  ``metaworld.policies.ENV_POLICY_MAP[observation["task"][b]]().get_action(environment_state[b])``
  clipped to [-1, 1]. ``observation["environment_state"]`` is float ``[B, 39]`` (the full
  Meta-World observation; LeRobot's ``observation.environment_state`` name), ``observation["task"]``
  the B Meta-World env names (``reach-v3`` ...). The expert is stateless (a function of the
  observation), so no episode state is kept between calls.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args

__all__ = ["ExpertPolicyServer", "OBS_DIM", "ACTION_DIM", "main"]

#: Meta-World V3 observation width (hand 3 + gripper 1 + 2 objects x 7 + padding, x2 frames, + goal 3).
OBS_DIM = 39
#: [dx, dy, dz, grip], Meta-World's action space.
ACTION_DIM = 4
#: Rows per call; a peer's claimed batch larger than this is refused (never allocate what a peer claims).
MAX_BATCH = 1024


class ExpertPolicyServer(RpcServer):
    """``vla.predict`` / ``vla.metadata`` over Meta-World's scripted policies (one instance per env name)."""

    def __init__(self) -> None:
        super().__init__(name="metaworld_expert")
        from metaworld.policies import ENV_POLICY_MAP

        self._map = ENV_POLICY_MAP
        self._policies: dict[str, Any] = {}
        self.register("vla.metadata", self.metadata, readonly=True)
        self.register("vla.predict", self.predict, readonly=True)

    def metadata(self) -> dict:
        """The policy's shape contract (see the module docstring)."""
        return {"embodiment": "metaworld_sawyer", "action_dim": ACTION_DIM, "action_horizon": 1, "n_exec": 1,
                "num_flow_steps": 0, "num_views": 0, "image_size": 0, "policy": "metaworld_expert"}

    def predict(self, observation: dict, options: dict | None = None) -> np.ndarray:
        """Expert actions for a batch (see the module docstring).

        Raises:
            ValueError: missing/ill-shaped ``environment_state``, ``task`` not a list of B known env names.
        """
        if not isinstance(observation, dict) or "environment_state" not in observation or "task" not in observation:
            raise ValueError("observation needs 'environment_state' float[B,39] and 'task' (B Meta-World env names)")
        obs = np.asarray(observation["environment_state"], dtype=np.float64)
        if obs.ndim == 1:
            obs = obs[None]
        names = observation["task"]
        names = [names] if isinstance(names, str) else list(names)
        if obs.ndim != 2 or obs.shape[1] != OBS_DIM or not 1 <= obs.shape[0] <= MAX_BATCH:
            raise ValueError(f"environment_state must be float[B,{OBS_DIM}] with 1 <= B <= {MAX_BATCH}, got {obs.shape}")
        if len(names) != obs.shape[0]:
            raise ValueError(f"task names ({len(names)}) must match the batch ({obs.shape[0]})")
        out = np.zeros((obs.shape[0], 1, ACTION_DIM), dtype=np.float32)
        for b, name in enumerate(names):
            if name not in self._map:
                raise ValueError(f"no Meta-World expert for task {name!r} (expected an env name like reach-v3)")
            pol = self._policies.get(name) or self._policies.setdefault(name, self._map[name]())
            out[b, 0] = np.clip(np.asarray(pol.get_action(obs[b]), dtype=np.float32), -1.0, 1.0)
        return out


def main(argv: list[str] | None = None) -> None:
    """Entry point: serve the expert until shutdown."""
    p = argparse.ArgumentParser(prog="python -m rpent.robots.metaworld.expert_server",
                                description="Serve Meta-World's scripted expert over vla.predict.")
    add_server_args(p)
    args = p.parse_args(argv)
    server = ExpertPolicyServer()
    serve_from_args(server, args)


if __name__ == "__main__":
    main()
