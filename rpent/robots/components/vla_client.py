"""Client for the VLA predict contract (``vla.predict`` / ``vla.metadata``), any VLA server.

Usage::

    from rpent.robots.components.vla_client import VlaClient
    with VlaClient("http://127.0.0.1:8210") as vla:
        meta = vla.metadata()                 # {embodiment, action_dim, action_horizon, n_exec, ...}
        actions = vla.predict({
            "main_images": main,              # uint8 [B, H, W, 3], VLA orientation
            "wrist_images": wrist,            # uint8 [B, H, W, 3]
            "states": states,                 # float32 [B, 8]
            "task_descriptions": ["put both moka pots on the stove"] * B,
        })                                    # float32 [B, n_exec, action_dim], environment units
"""

from __future__ import annotations

import numpy as np

from rpent.rpc import RpcClient


class VlaClient:
    """Thin typed wrapper over :class:`rpent.rpc.RpcClient` for VLA servers.

    Args:
        endpoint: ``[http|socket://]HOST:PORT``.
        timeout: default per-call timeout (s); the first call on a cold GPU may capture a CUDA graph.

    Raises (from calls): rpent.rpc.RemoteError (server-side validation, e.g. ObservationError with the
    fix in its message), RpcTimeout, RpcTransportError; ValueError for a malformed reply.
    """

    def __init__(self, endpoint: str, timeout: float = 120.0):
        self.rpc = RpcClient(endpoint, timeout=timeout)
        self._meta: dict | None = None

    def metadata(self) -> dict:
        """``vla.metadata`` (cached after the first call)."""
        if self._meta is None:
            self._meta = self.rpc.call("vla.metadata")
        return self._meta

    def predict(self, observation: dict, options: dict | None = None, timeout: float | None = None) -> np.ndarray:
        """``vla.predict`` -> float32 [B, n_exec, action_dim].

        Images are sent as given (uint8); resize to 224 on the client side is not required.
        """
        kwargs = {} if timeout is None else {"timeout": timeout}
        out = self.rpc.call("vla.predict", observation, options, **kwargs)
        arr = np.asarray(out)
        if arr.dtype != np.float32 or arr.ndim != 3:
            raise ValueError(f"vla.predict returned {arr.dtype} {list(arr.shape)}, expected float32 [B, n_exec, action_dim]")
        return arr

    def close(self) -> None:
        """Close the connection."""
        self.rpc.close()

    def __enter__(self) -> "VlaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
