"""Policy backend: any server speaking the ``vla.predict`` contract (docs/interfaces.md) over RPC.

Works with rpent's Pi0.5 server, the ApxInf server, the replay policy server, or anything else that
registers ``vla.predict`` and ``vla.metadata`` on an :class:`rpent.rpc.RpcServer`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rpent.eval.errors import PolicyError
from rpent.eval.policies.base import EpisodeRef
from rpent.rpc import RpcClient, RpcError


class EndpointPolicy:
    """``vla.predict`` over an ``http://`` or ``socket://`` endpoint.

    Args:
        endpoint: ``[protocol://]host:port``.
        timeout_s: per-call timeout (s).
        options: ``options`` passed with every ``vla.predict`` call (None: the server's defaults).
        send_episode_keys: add ``options["episode_keys"]`` (one :attr:`EpisodeRef.episode_key` per row)
            so a replay policy server replays the recorded sequence of each row's (task, reset state).

    Raises:
        PolicyError: the endpoint does not answer ``vla.metadata`` (names it and the error).
    """

    name = "endpoint"

    def __init__(
        self, endpoint: str, timeout_s: float = 120.0, options: dict[str, Any] | None = None,
        send_episode_keys: bool = False,
    ):
        self.endpoint = endpoint
        self.options = options
        self.send_episode_keys = send_episode_keys
        self.client = RpcClient(endpoint, timeout=timeout_s)
        try:
            self._meta = dict(self.client.call("vla.metadata", timeout=min(timeout_s, 30.0)))
        except RpcError as exc:
            self.client.close()
            raise PolicyError(
                f"policy endpoint {endpoint} did not answer vla.metadata: {exc}; start a vla.predict server "
                "there or fix policy.endpoint"
            ) from None

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata`` as the server reported it at connect time."""
        return dict(self._meta)

    def predict(self, observation: dict[str, Any], episodes: list[EpisodeRef] | None = None) -> np.ndarray:
        """One ``vla.predict`` call; returns float32 [B, n_exec, action_dim].

        Raises:
            PolicyError: the call failed (remote error, timeout, transport), naming the endpoint.
        """
        options = self.options
        if self.send_episode_keys and episodes:
            options = {**(options or {}), "episode_keys": [e.episode_key for e in episodes]}
        try:
            out = self.client.call("vla.predict", observation, options)
        except RpcError as exc:
            raise PolicyError(f"vla.predict on {self.endpoint} failed: {exc}") from None
        return np.asarray(out, dtype=np.float32)

    def close(self) -> None:
        """Close the connection."""
        self.client.close()
