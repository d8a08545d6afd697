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

__all__ = ["McpHttpToolServer"]


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

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tool_list)

        async def call_tool(ctx: Any, params: Any) -> Any:
            ids: dict[str, str] = {}

            def run() -> tuple[list[dict[str, Any]], bool]:
                return bridge.call(params.name, params.arguments or {}, on_call_id=lambda cid: ids.update(id=cid))

            try:
                # not abandoned on cancel: the toolkit call always completes (a motion is never half-run)
                content, is_error = await anyio.to_thread.run_sync(run)
            except anyio.get_cancelled_exc_class():
                bridge.undelivered(ids.get("id"), params.name, "the MCP client cancelled the request or disconnected "
                                   "before the result was sent")
                raise
            blocks = [types.TextContent(type="text", text=c["text"]) if c["type"] == "text"
                      else types.ImageContent(type="image", data=c["data"], mime_type=c["mimeType"])
                      for c in content]
            return types.CallToolResult(content=blocks, is_error=is_error)

        server = Server(MCP_SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool)
        return server.streamable_http_app(streamable_http_path=self.path, host=self.host)

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

        Open connections (the agent CLI keeps its MCP stream open) are not waited for:
        ``force_exit`` cancels them, so the server thread ends within about a second instead of
        outliving the run (uvicorn's graceful shutdown would wait for the client).
        """
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> "McpHttpToolServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
