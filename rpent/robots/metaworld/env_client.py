"""Client of the Meta-World env server (:mod:`rpent.robots.metaworld.env_server`), agent side.

Imports no simulator: only :mod:`rpent.rpc` and numpy. Checks on connect that the server
serves the episode this run expects (the LIBERO client's rule).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rpent.rpc import RpcClient

__all__ = ["MetaWorldEnvClient", "EnvMetaMismatch", "META_KEYS"]

#: ``env.get_env_meta`` keys that must match exactly between client and server.
META_KEYS = ("robot", "suite", "task", "seed", "max_episode_steps")


class EnvMetaMismatch(RuntimeError):
    """The env server at the endpoint serves another episode (or another robot)."""


class MetaWorldEnvClient:
    """Typed access to one Meta-World env server.

    Args:
        endpoint: ``[http|socket://]HOST:PORT``.
        expected: ``{robot: "metaworld", suite, task, seed, max_episode_steps}``; None skips the check.
        timeout: default per-call timeout (s).
    Raises:
        EnvMetaMismatch: the server serves another episode (the message says how to fix it).
        rpent.rpc.RpcTransportError / RpcTimeout: the server is unreachable.
    """

    def __init__(self, endpoint, expected: dict | None = None, timeout: float = 30.0) -> None:
        self.rpc = RpcClient(endpoint, timeout=timeout)
        self.endpoint = self.rpc.endpoint
        self.meta = self.rpc.call("env.get_env_meta")
        if expected is not None:
            bad = [k for k in META_KEYS if k in expected and self.meta.get(k) != expected[k]]
            if bad:
                have = ", ".join(f"{k}={self.meta.get(k)!r}" for k in META_KEYS)
                want = ", ".join(f"{k}={expected[k]!r}" for k in META_KEYS if k in expected)
                self.rpc.close()
                raise EnvMetaMismatch(
                    f"env_meta mismatch: the env_server at {self.endpoint} serves ({have}) but this run needs "
                    f"({want}). An env server is bound to one task: stop it and start one with these arguments "
                    f"(or omit --env-endpoint to let rpent start its own).")

    def reset(self) -> dict:
        """Restart the episode; returns the robot obs."""
        return self.rpc.call("env.reset", timeout=120.0)

    def step(self, action: np.ndarray, observe: str | None = None, expert: bool = False) -> dict:
        """One env step with a float[4] action (see ``EnvServer.step``)."""
        return self.rpc.call("env.step", np.asarray(action, dtype=np.float64), observe=observe, expert=expert,
                             timeout=60.0)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call any ``env.*`` method by name."""
        return self.rpc.call(method, *args, **kwargs)

    def status(self) -> dict:
        """``{steps, terminated, truncated, success, done, reward}``."""
        return self.rpc.call("env.status")

    def robot_obs(self) -> dict:
        """Hand position, gripper opening, 4-D state, 39-D observation."""
        return self.rpc.call("env.robot_obs")

    def policy_obs(self, images: bool = True) -> dict:
        """Main/wrist images (natural orientation; left out with ``images=False``), the 4-D state and the
        39-D ``environment_state``."""
        return self.rpc.call("env.policy_obs", images=images, timeout=120.0)

    def expert_action(self) -> np.ndarray:
        """Meta-World's scripted expert action for the current observation, float32[4]."""
        return self.rpc.call("env.expert_action")

    def capture(self, **kwargs: Any) -> dict:
        """State + main/wrist renders for a step record (``EnvServer.capture``)."""
        return self.rpc.call("env.capture", timeout=120.0, **kwargs)

    def render_camera(self, camera: str, height: int, width: int, depth: bool = False,
                      segmentation: bool = False) -> dict:
        """Render one camera now (natural orientation)."""
        return self.rpc.call("env.render_camera", camera, height, width, depth=depth, segmentation=segmentation,
                             timeout=120.0)

    def camera_meta(self, camera: str, height: int, width: int) -> dict:
        """Intrinsics/extrinsics of a camera for images of the given size."""
        return self.rpc.call("env.camera_meta", camera, height, width)

    def segment(self, name: str, camera: str, size: int = 256) -> dict:
        """MuJoCo-segmentation mask and world centroid of the bodies named like ``name``."""
        return self.rpc.call("env.segment", name, camera, size, timeout=120.0)

    def object_poses(self) -> dict:
        """object / object2 / goal positions (m, world)."""
        return self.rpc.call("env.object_poses")

    def close(self) -> None:
        """Close the connection (the server keeps running)."""
        self.rpc.close()
