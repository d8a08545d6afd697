"""RPC between rpent processes: endpoints, msgpack codec, server base, client.

Public API (see docs/interfaces.md)::

    from rpent.rpc import parse_endpoint, Endpoint, RpcServer, RpcClient
    from rpent.rpc import RpcError, RemoteError, RpcTransportError, RpcTimeout
"""

from rpent.rpc.client import RpcClient
from rpent.rpc.endpoint import Endpoint, parse_endpoint
from rpent.rpc.errors import RemoteError, RpcCodecError, RpcError, RpcProtocolError, RpcTimeout, RpcTransportError
from rpent.rpc.server import RpcServer

__all__ = [
    "Endpoint",
    "parse_endpoint",
    "RpcServer",
    "RpcClient",
    "RpcError",
    "RemoteError",
    "RpcTransportError",
    "RpcTimeout",
    "RpcProtocolError",
    "RpcCodecError",
]
