"""The toolkit as a Streamable-HTTP MCP server on a loopback port (used by the codex
planner, whose CLI connects to MCP servers by URL).

Built on the ``mcp`` package's low-level ``Server`` (``on_list_tools`` /
``on_call_tool``) and its ``streamable_http_app()`` (Starlette, DNS-rebinding
protection for localhost on), served by uvicorn in a daemon thread on a socket bound
to 127.0.0.1 with a free port. Tool calls run in a worker thread through
:class:`~rpent.planners.tool_bridge.ToolBridge`, so the server loop stays responsive
while a motion runs.

    with McpHttpToolServer(toolkit_specs, bridge) as srv:
        srv.url   # http://127.0.0.1:<port>/mcp
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from rpent.planners.tool_defs import ToolDef
from rpent.planners.tool_bridge import MCP_SERVER_NAME, ToolBridge

__all__ = ["McpHttpToolServer", "UNDELIVERED_REASON"]

UNDELIVERED_REASON = "the MCP client disconnected before the result was sent"


class _DeliveryTracker:
    """ASGI wrapper that notices a ``tools/call`` whose HTTP client went away before the result
    was sent (the MCP transport drops such a result silently).

    Per POST it reads the JSON-RPC request (``method``, ``id``) from the body as the app receives
    it, watches ``http.disconnect`` and the response body chunks; when the request ends it calls
    ``on_done(id, tool_name, delivered)``: delivered is False unless a chunk carrying that id was
    sent before a disconnect. Messages pass through unchanged.
    """

    def __init__(self, app: Any, on_done: Any) -> None:
        self.app = app
        self.on_done = on_done

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        import json

        body: list[bytes] = []
        st: dict[str, Any] = {"id": None, "tool": "", "delivered": False, "gone": False}

        async def recv() -> dict:
            msg = await receive()
            if msg["type"] == "http.request":
                body.append(msg.get("body", b""))
                if not msg.get("more_body"):
                    try:
                        req = json.loads(b"".join(body))
                    except ValueError:
                        req = None
                    if isinstance(req, dict) and req.get("method") == "tools/call" and "id" in req:
                        st["id"] = req["id"]
                        st["tool"] = str((req.get("params") or {}).get("name", ""))
            elif msg["type"] == "http.disconnect":
                st["gone"] = True
            return msg

        async def snd(msg: dict) -> None:
            await send(msg)
            if (msg["type"] == "http.response.body" and st["id"] is not None and not st["gone"]
                    and f'"id":{json.dumps(st["id"])}'.encode() in msg.get("body", b"").replace(b" ", b"")):
                st["delivered"] = True

        try:
            await self.app(scope, recv, snd)
        finally:
            if st["id"] is not None:
                self.on_done(st["id"], st["tool"], st["delivered"])


class McpHttpToolServer:
    """Serve ``tools`` over MCP Streamable HTTP, executing calls through ``bridge``.

    Args:
        tools: the tool definitions to list.
        bridge: executes calls and records them.
        host: bind address (default 127.0.0.1).
        path: MCP endpoint path (default ``/mcp``).

    Raises:
        RuntimeError: from :meth:`start` when the server does not come up within 10 s.
    """

    def __init__(self, tools: list[ToolDef], bridge: ToolBridge, *, host: str = "127.0.0.1",
                 path: str = "/mcp") -> None:
        self.tools = tools
        self.bridge = bridge
        self.host = host
        self.path = path
        self._sock: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._rpc_calls: dict[Any, str] = {}  # JSON-RPC request id -> bridge call id (tools/call)
        self._rpc_pending: dict[Any, str] = {}  # requests whose client left before their call started
        self._rpc_lock = threading.Lock()

    @property
    def port(self) -> int:
        """Bound port (after :meth:`start`)."""
        assert self._sock is not None, "start() first"
        return self._sock.getsockname()[1]

    @property
    def alive(self) -> bool:
        """True while the server thread runs and has not been told to exit."""
        return (self._thread is not None and self._thread.is_alive() and self._server is not None
                and not self._server.should_exit)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/mcp``."""
        return f"http://{self.host}:{self.port}{self.path}"

    def _app(self) -> Any:
        import anyio
        import mcp_types as types
        from mcp.server.lowlevel.server import Server

        tool_list = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                     for t in self.tools]
        bridge = self.bridge
        bind = self._bind_rpc

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tool_list)

        async def call_tool(ctx: Any, params: Any) -> Any:
            ids: dict[str, str] = {}

            def note_id(cid: str) -> None:
                ids["id"] = cid
                if getattr(ctx, "request_id", None) is not None:
                    bind(ctx.request_id, cid, params.name)

            def run() -> tuple[list[dict[str, Any]], bool]:
                return bridge.call(params.name, params.arguments or {}, on_call_id=note_id)

            try:
                # not abandoned on cancel: the toolkit call always completes (a motion is never half-run)
                content, is_error = await anyio.to_thread.run_sync(run)
            except anyio.get_cancelled_exc_class():
                bridge.undelivered(ids.get("id"), params.name, UNDELIVERED_REASON)
                raise
            blocks = [types.TextContent(type="text", text=c["text"]) if c["type"] == "text"
                      else types.ImageContent(type="image", data=c["data"], mime_type=c["mimeType"])
                      for c in content]
            return types.CallToolResult(content=blocks, is_error=is_error)

        server = Server(MCP_SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool)
        return _DeliveryTracker(server.streamable_http_app(streamable_http_path=self.path, host=self.host),
                                self._rpc_done)

    def _rpc_done(self, rpc_id: Any, tool: str, delivered: bool) -> None:
        """The HTTP request of ``tools/call`` ``rpc_id`` ended (see :class:`_DeliveryTracker`)."""
        with self._rpc_lock:
            call_id = self._rpc_calls.pop(rpc_id, None)
            if call_id is None and not delivered:
                self._rpc_pending[rpc_id] = tool  # the call has not started yet (queued behind another)
        if call_id is not None and not delivered:
            self.bridge.undelivered(call_id, tool, UNDELIVERED_REASON)

    def _bind_rpc(self, rpc_id: Any, call_id: str, tool: str) -> None:
        """Called when the bridge starts call ``call_id`` for JSON-RPC request ``rpc_id``."""
        with self._rpc_lock:
            gone = self._rpc_pending.pop(rpc_id, None) is not None
            if not gone:
                self._rpc_calls[rpc_id] = call_id
        if gone:
            self.bridge.undelivered(call_id, tool, UNDELIVERED_REASON)

    def start(self) -> "McpHttpToolServer":
        """Bind, start uvicorn in a daemon thread and wait until it accepts connections."""
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((self.host, 0))
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="on", access_log=False,
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="rpent-mcp-http", daemon=True)
        self._thread.start()
        end = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > end or not self._thread.is_alive():
                raise RuntimeError("MCP HTTP tool server did not start within 10 s")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        """Stop the server now and release the port (idempotent).

        Open connections (the agent CLI keeps its MCP stream open) are waited for at most
        ``timeout_graceful_shutdown`` (1 s), so the server thread ends with the run instead of
        outliving it.
        """
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> "McpHttpToolServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
