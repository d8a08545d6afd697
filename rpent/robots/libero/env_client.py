"""Client of the LIBERO environment server (:mod:`rpent.robots.libero.env_server`).

:class:`EnvClient` wraps :class:`rpent.rpc.RpcClient` with the per-method timeouts of the
upstream client (reference §1.3: default 30 s, reset 120 s, step 60 s, chunk_step 120 s,
render 120 s) and checks on connect that the server serves the episode this run expects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rpent.rpc import RpcClient

__all__ = ["EnvClient", "EnvMetaMismatch", "META_KEYS"]

#: Keys of ``env.get_env_meta`` that must match exactly between client and server.
META_KEYS = ("suite", "task", "seed", "max_episode_steps", "policy_image_size")


class EnvMetaMismatch(RuntimeError):
    """The env server at the endpoint serves a different (suite, task, seed, max_episode_steps)."""


class EnvClient:
    """Typed access to one env server.

    Args:
        endpoint: ``[http|socket://]HOST:PORT`` of a running env server.
        expected: the episode this run needs, ``{suite, task, seed, max_episode_steps}`` and
            optionally ``policy_image_size`` (px); None skips the check.
        timeout: default per-call timeout (s).

    Raises:
        EnvMetaMismatch: the server serves another episode (the message says which and how
            to fix it: stop the stale server and start a new one).
        rpent.rpc.RpcTransportError / RpcTimeout: the server is unreachable.
    """

    def __init__(self, endpoint, expected: dict | None = None, timeout: float = 30.0) -> None:
        self.rpc = RpcClient(endpoint, timeout=timeout)
        self.endpoint = self.rpc.endpoint
        self.meta = self.rpc.call("env.get_env_meta")
        if expected is not None:
            diff = {k: (self.meta.get(k), expected[k]) for k in META_KEYS
                    if k in expected and self.meta.get(k) != expected[k]}
            if diff:
                have = ", ".join(f"{k}={self.meta.get(k)!r}" for k in META_KEYS)
                want = ", ".join(f"{k}={expected[k]!r}" for k in META_KEYS if k in expected)
                raise EnvMetaMismatch(
                    f"env_meta mismatch: the env_server at {self.endpoint} serves ({have}) but this run "
                    f"needs ({want}). An env server is bound to one task: stop the stale env_server "
                    f"and start a new one with these arguments (or omit --env-endpoint to let rpent "
                    f"start its own)."
                )

    # physics -----------------------------------------------------------------
    def reset(self) -> dict:
        """Restart the episode from the seed's init state; returns the robot obs."""
        return self.rpc.call("env.reset", timeout=120.0)

    def step(self, action: np.ndarray, observe: str | None = None) -> dict:
        """One env step with a 7-D action; see ``EnvServer.step`` for ``observe`` and the result."""
        return self.rpc.call("env.step", np.asarray(action, dtype=np.float64), observe=observe, timeout=60.0)

    def chunk_step(self, actions: np.ndarray, return_all_frames: bool = False) -> dict:
        """Execute an (n, 7) action chunk; see ``LiberoSim.chunk_step``."""
        return self.rpc.call("env.chunk_step", np.asarray(actions, dtype=np.float64),
                             return_all_frames=return_all_frames, timeout=120.0)

    # read-only ---------------------------------------------------------------
    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call any ``env.*`` method by name (``timeout=`` may be given, in s)."""
        return self.rpc.call(method, *args, **kwargs)

    def status(self) -> dict:
        """``{steps, terminated, truncated, success, done}``."""
        return self.rpc.call("env.status")

    def instability(self) -> dict | None:
        """None, or where the simulation blew up this episode (``LiberoSim.instability``)."""
        return self.rpc.call("env.instability")

    def robot_obs(self) -> dict:
        """Robot state (no rendering)."""
        return self.rpc.call("env.robot_obs")

    def policy_obs(self) -> dict:
        """Main/wrist images in VLA orientation and the 8-D state."""
        return self.rpc.call("env.policy_obs", timeout=120.0)

    def capture(self, **kwargs: Any) -> dict:
        """Images, depth, segmentation and calibration for a step record (``EnvServer.capture``)."""
        return self.rpc.call("env.capture", timeout=120.0, **kwargs)

    def render_camera(self, camera: str, height: int, width: int, depth: bool = False,
                      segmentation: bool = False) -> dict:
        """Render one camera now (natural orientation)."""
        return self.rpc.call("env.render_camera", camera, height, width, depth=depth,
                             segmentation=segmentation, timeout=120.0)

    def camera_meta(self, camera: str, height: int, width: int) -> dict:
        """Camera intrinsics/extrinsics for images of the given size."""
        return self.rpc.call("env.camera_meta", camera, height, width)

    def close(self) -> None:
        """Close the connection (the server keeps running)."""
        self.rpc.close()
