"""An MCP client that disconnects during a slow tool.

The action completes (a motion is never abandoned half-way) but its result never reaches the
agent: the transcript entry says ``delivered: false`` and the toolkit's record is marked. A real
MCP client (the ``mcp`` package's Streamable-HTTP client, in its own process) talks to the
toolkit's MCP server; the test kills that process during ``wait_steps(300)``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from planner_fixture_toolkit import FixtureToolkit

from rpent.planners.base import PlannerStats
from rpent.planners.events import EventEmitter
from rpent.planners.mcp_http import UNDELIVERED_REASON, McpHttpToolServer
from rpent.planners.tool_bridge import ToolBridge
from rpent.planners.tool_defs import tool_defs

CLIENT = textwrap.dedent("""
    import sys, anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main(url, steps):
        async with streamable_http_client(url) as (r, w, *_):
            async with ClientSession(r, w) as s:
                await s.initialize()
                print("calling", flush=True)
                res = await s.call_tool("wait_steps", {"steps": int(steps)})
                print("result", res.is_error, flush=True)

    anyio.run(main, sys.argv[1], sys.argv[2])
""")


class RecordingToolkit(FixtureToolkit):
    """The fixture toolkit plus the toolkit hook the bridge calls for an undelivered result."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.undelivered: list[tuple[str, str]] = []

    def note_undelivered(self, call_id, reason):
        self.undelivered.append((call_id, reason))


def _serve(toolkit):
    transcript: list[dict] = []
    events: list[tuple[str, dict]] = []
    bridge = ToolBridge(toolkit, EventEmitter(lambda k, p: events.append((k, p))), PlannerStats(), transcript)
    return McpHttpToolServer(tool_defs(toolkit.specs()), bridge).start(), transcript, events


def _client(url, steps):
    return subprocess.Popen([sys.executable, "-c", CLIENT, url, str(steps)], stdout=subprocess.PIPE, text=True)


def test_a_result_lost_to_a_client_disconnect_is_marked_undelivered():
    toolkit = RecordingToolkit(step_s=0.01)
    srv, transcript, events = _serve(toolkit)
    try:
        client = _client(srv.url, 300)
        assert client.stdout.readline().strip() == "calling"
        assert toolkit.running.wait(60)
        client.kill()  # the MCP client disappears during the 3 s tool
        client.wait(60)
        client.stdout.close()
        end = time.monotonic() + 60
        while not toolkit.undelivered and time.monotonic() < end:
            time.sleep(0.05)
        assert toolkit.steps == 300  # the action itself completed
        (entry,) = [m for m in transcript if m["role"] == "tool"]
        assert entry["delivered"] is False and entry["undelivered_reason"] == UNDELIVERED_REASON
        assert toolkit.undelivered == [(entry["tool_call_id"], UNDELIVERED_REASON)]
        assert any(k == "error" and "was not delivered" in p["error"] for k, p in events)
    finally:
        srv.close()


def test_a_delivered_result_is_not_marked():
    toolkit = RecordingToolkit(step_s=0.001)
    srv, transcript, _ = _serve(toolkit)
    try:
        client = _client(srv.url, 20)
        out, _ = client.communicate(timeout=60)
        assert "result False" in out
        end = time.monotonic() + 60  # the bridge records the result once the server has sent it
        while not [m for m in transcript if m["role"] == "tool"] and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)  # and a lost delivery would be marked by now
        (entry,) = [m for m in transcript if m["role"] == "tool"]
        assert "delivered" not in entry and toolkit.undelivered == []
    finally:
        srv.close()
