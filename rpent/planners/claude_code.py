"""``--planner claude_code``: the Claude Agent SDK driving its bundled Claude Code CLI.

* The toolkit is an in-process SDK MCP server named ``rpent``
  (``create_sdk_mcp_server``); the model sees ``mcp__rpent__<tool>``. Calls run in a
  worker thread through :class:`~rpent.planners.tool_bridge.ToolBridge` (serialised,
  results as JSON text + PNG image content, ``is_error`` on ``"error"``).
* Isolation: built-in tools off (``tools=[]``), only the rpent tools allowed,
  ``setting_sources=[]`` (no user/project settings, no CLAUDE.md),
  ``strict_mcp_config=True``, and ``CLAUDE_CONFIG_DIR`` pointed at a fresh temporary
  directory, so nothing from ``~/.claude`` is read.
* Environment for the CLI: ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` (from the
  environment or :attr:`PlannerConfig.env`), ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
  ``DISABLE_TELEMETRY=1``.
* ``--max-turns`` and ``--claude-code-max-budget-usd`` (else ``MAX_BUDGET_USD``, else
  10 USD) pass through; ``--reasoning-effort none`` disables thinking, other values set
  the SDK ``effort``.
* Steering: operator lines are sent with ``client.query`` while the turn runs; Claude
  Code surfaces them with the next tool result (its mid-turn message delivery).
  Interrupts cancel the running tool (toolkit.cancel) and, with ``stop``, interrupt the
  CLI.
* An accepted finish interrupts the CLI at once (no further model request).
* Timeout: the running tool is cancelled, the CLI interrupted and closed; error
  ``"Claude Agent SDK timed out after <N>s"``.
* Message size: the CLI echoes every tool result, images as base64, in one stdout JSON line,
  and the SDK refuses lines over ``max_buffer_size`` (default 1 MiB: one noisy 700 px frame
  overflows it). The buffer is :data:`CLI_BUFFER_BYTES`; the images of one tool result are
  downscaled to :data:`IMAGE_BUDGET_BYTES` of base64 (with a note to the model). A line that
  still overflows ends the run with ``"Claude Code CLI message too large: ..."`` (line size,
  limit, fix) instead of the SDK's bare ``CLIJSONDecodeError``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import tempfile
import threading
import time
from typing import Any

from rpent.planners.tool_defs import tool_defs
from rpent.planners.base import (
    EventHook,
    PlannerConfig,
    PlannerConfigError,
    PlannerResult,
    PlannerStats,
    Steering,
    Toolkit,
)
from rpent.planners.events import EventEmitter, PlannerTimeout, run_sdk_session
from rpent.planners.steering import OPERATOR_PREFIX
from rpent.planners.tool_bridge import MCP_PREFIX, MCP_SERVER_NAME, ToolBridge, strip_mcp_prefix

__all__ = ["DEFAULT_BUDGET_USD", "DEFAULT_MODEL", "ClaudeCodePlanner"]

log = logging.getLogger("rpent.planners.claude_code")

DEFAULT_MODEL = "sonnet"
DEFAULT_BUDGET_USD = 10.0
"""Fallback of ``--claude-code-max-budget-usd`` after ``MAX_BUDGET_USD`` (RPent reference §2.1)."""
_MAX_RESULT_CHARS = 200_000  # keep 60 kB JSON results inline in the CLI (never persisted to a file)
CLI_BUFFER_BYTES = 64 << 20
"""The SDK's ``max_buffer_size`` (bytes of one CLI stdout line). The toolkit's largest results are
two 1024 px PNG views (``*_high.png``; <= ~4 MiB base64 each even for noise); parallel tool calls
arrive in one line, and the CLI may repeat a result (``tool_use_result``): 64 MiB covers eight
results at the image budget with room for the JSON text."""
IMAGE_BUDGET_BYTES: int | None = CLI_BUFFER_BYTES // 8
"""Base64 bytes all images of one tool result may take (larger images are downscaled)."""


def run_coroutine_blocking(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code, even if this thread already runs
    an event loop (then a helper thread runs it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["exc"] = exc

    t = threading.Thread(target=runner, name="planner-asyncio", daemon=True)
    t.start()
    t.join()
    if "exc" in box:
        raise box["exc"]
    return box["value"]


class ClaudeCodePlanner:
    """``--planner claude_code --model <id>`` (bare id, default ``sonnet``).

    Raises:
        PlannerConfigError: api-only flags given (``--base-url``, ``--no-images``), bad ranges.
    """

    name = "claude_code"

    def __init__(self, config: PlannerConfig) -> None:
        config.validate()
        if config.base_url:
            raise PlannerConfigError("--base-url applies to --planner api only; for claude_code set "
                                     "ANTHROPIC_BASE_URL in the environment")
        if config.no_images:
            raise PlannerConfigError("--no-images applies to --planner api only")
        if config.model and ":" in config.model:
            raise PlannerConfigError(f"--planner claude_code takes a bare model id (e.g. sonnet, claude-sonnet-4-5), "
                                     f"got {config.model!r}; provider prefixes are for --planner api")
        self.config = config
        self.model = config.model or DEFAULT_MODEL
        budget = config.max_budget_usd
        if budget is None:
            env_budget = config.getenv("MAX_BUDGET_USD")
            try:
                budget = float(env_budget) if env_budget else DEFAULT_BUDGET_USD
            except ValueError:
                raise PlannerConfigError(f"MAX_BUDGET_USD must be a number of USD, got {env_budget!r}") from None
        self.max_budget_usd = budget

    def _options(self, system_prompt: str, server: Any, tool_names: list[str], cwd: str, config_dir: str,
                 stderr_tail: collections.deque, bridge: ToolBridge) -> Any:
        from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

        async def stop_after_end(hook_input: Any, tool_use_id: Any, context: Any) -> dict[str, Any]:
            # an accepted finish or an operator stop ends the session right after the tool:
            # no further model request
            if bridge.finish is not None:
                return {"continue_": False, "stopReason": "rpent finish accepted"}
            reason = bridge.stop_check() if bridge.stop_check is not None else None
            if reason:
                return {"continue_": False, "stopReason": reason}
            return {}

        cfg = self.config
        env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "CLAUDE_CONFIG_DIR": config_dir}
        for var in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
            if cfg.getenv(var):
                env[var] = cfg.getenv(var)
        if cfg.api_key:
            env["ANTHROPIC_API_KEY"] = cfg.api_key
        env.update(cfg.env)
        extra: dict[str, Any] = {}
        if cfg.reasoning_effort == "none":
            extra["thinking"] = {"type": "disabled"}
        elif cfg.reasoning_effort:
            extra["effort"] = cfg.reasoning_effort
        return ClaudeAgentOptions(
            model=self.model, system_prompt=system_prompt, mcp_servers={MCP_SERVER_NAME: server},
            strict_mcp_config=True, tools=[], allowed_tools=[MCP_PREFIX + n for n in tool_names],
            setting_sources=[], max_turns=cfg.max_turns, max_budget_usd=self.max_budget_usd, cwd=cwd, env=env,
            max_buffer_size=CLI_BUFFER_BYTES,
            stderr=stderr_tail.append,
            hooks={"PostToolUse": [HookMatcher(matcher=None, hooks=[stop_after_end])]},
            **extra)

    def solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, *,
              steering: Steering | None = None, on_event: EventHook | None = None) -> PlannerResult:
        """Run one Claude Code session; see :meth:`rpent.planners.base.Planner.solve`. Never raises."""
        return run_sdk_session("Claude Agent SDK", log, self.config.timeout_s, toolkit, steering, on_event,
                               lambda emit, result: run_coroutine_blocking(
                                   self._solve(system_prompt, user_message, toolkit, steering, emit, result)))

    async def _solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, steering: Steering | None,
                     emit: EventEmitter, result: PlannerResult) -> None:
        from claude_agent_sdk import ClaudeSDKClient, SdkMcpTool, ToolAnnotations, create_sdk_mcp_server
        from claude_agent_sdk._errors import CLIJSONDecodeError

        cfg = self.config
        deadline = time.monotonic() + cfg.timeout_s if cfg.timeout_s else None
        stats, transcript = result.stats, result.messages
        defs = tool_defs(toolkit.specs())
        toolkit.clear_cancel()
        bridge = ToolBridge(toolkit, emit, stats, transcript, stop_check=lambda: (
            (steering.stop_reason or "the operator stopped the run") if steering is not None and steering.stop_requested
            else None), image_budget=IMAGE_BUDGET_BYTES, steering=steering)

        def make_handler(name: str) -> Any:
            async def handler(args: dict[str, Any]) -> dict[str, Any]:
                content, is_error = await asyncio.to_thread(bridge.call, name, args)
                if bridge.finish is not None:
                    finish_seen.set()
                return {"content": content, "is_error": is_error}
            return handler

        finish_seen = asyncio.Event()
        sdk_tools = [SdkMcpTool(name=d.name, description=d.description, input_schema=d.input_schema,
                                handler=make_handler(d.name),
                                annotations=ToolAnnotations(maxResultSizeChars=_MAX_RESULT_CHARS))
                     for d in defs]
        server = create_sdk_mcp_server(MCP_SERVER_NAME, tools=sdk_tools)
        stderr_tail: collections.deque = collections.deque(maxlen=40)
        transcript.append({"role": "user", "content": [{"type": "text", "text": user_message}], "source": "task"})
        message_ids: set[str] = set()
        with tempfile.TemporaryDirectory(prefix="rpent-claude-") as tmp:
            cwd = str(cfg.cwd or tmp)
            options = self._options(system_prompt, server, [d.name for d in defs], cwd, tmp, stderr_tail, bridge)
            client = ClaudeSDKClient(options)
            await self._with_deadline(client.connect(), deadline, None, toolkit)
            try:
                await client.query(user_message)
                stop_task = asyncio.create_task(self._watch(client, steering, finish_seen, transcript, emit))
                try:
                    await self._with_deadline(self._consume(client, bridge, message_ids, result, emit,
                                                            steering, deadline, toolkit),
                                              deadline, client, toolkit)
                except CLIJSONDecodeError as exc:
                    toolkit.cancel()
                    result.stop_reason, result.error_kind = "error", "sdk"
                    result.error = self._too_large(exc)
                finally:
                    stop_task.cancel()
            finally:
                try:
                    await asyncio.wait_for(client.disconnect(), 10)
                except Exception:
                    pass
        stats.requests = stats.turns_used = len(message_ids)  # model replies seen (the CLI hides its retries)
        if bridge.finish is not None:
            result.finish = bridge.finish
            result.stop_reason = "finished"
            result.error = result.error_kind = None
        elif steering is not None and steering.stop_requested:
            result.stop_reason, result.error = "interrupted", steering.stop_reason
            result.error_kind = "interrupted"
        if result.stop_reason == "error" and result.error and stderr_tail:
            result.error += " | CLI stderr: " + " / ".join(line.strip() for line in list(stderr_tail)[-3:])

    @staticmethod
    def _too_large(exc: Exception) -> str:
        """The named error for a CLI line over the SDK buffer (``CLIJSONDecodeError``)."""
        import re

        detail = f"{exc} {getattr(exc, 'original_error', '')}"
        m = re.search(r"Buffer size (\d+) exceeds limit (\d+)", detail)
        if m is None:
            return f"Claude Code CLI message could not be decoded: {exc}"
        size, limit = int(m.group(1)), int(m.group(2))
        return (f"Claude Code CLI message too large: a stdout line of at least {size} bytes exceeds the Agent SDK "
                f"buffer of {limit} bytes (ClaudeAgentOptions.max_buffer_size); a tool result carried too many image "
                f"bytes: have tools return smaller images (fewer or lower-resolution views) or raise "
                f"rpent.planners.claude_code.CLI_BUFFER_BYTES")

    async def _with_deadline(self, coro: Any, deadline: float | None, client: Any, toolkit: Toolkit) -> Any:
        if deadline is None:
            return await coro
        try:
            return await asyncio.wait_for(coro, max(0.01, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            toolkit.cancel()
            if client is not None:
                try:
                    await asyncio.wait_for(client.interrupt(), 5)
                except Exception:
                    pass
            raise PlannerTimeout() from None

    async def _watch(self, client: Any, steering: Steering | None, finish_seen: asyncio.Event,
                     transcript: list, emit: EventEmitter) -> None:
        """Forward operator lines, stop requests and an accepted finish to the CLI."""
        interrupted = False
        while True:
            if finish_seen.is_set() or (steering is not None and steering.stop_requested):
                if not interrupted:
                    interrupted = True
                    try:
                        await asyncio.wait_for(client.interrupt(), 10)
                    except Exception as exc:  # incl. timeout: never hang on the CLI
                        log.debug("interrupt failed: %s", exc)
            elif steering is not None:
                for line in steering.drain():
                    transcript.append({"role": "user", "content": [{"type": "text", "text": OPERATOR_PREFIX + line}],
                                       "source": "operator"})
                    emit("operator", text=line)
                    await asyncio.wait_for(client.query(OPERATOR_PREFIX + line), 10)
            await asyncio.sleep(0.05)

    async def _consume(self, client: Any, bridge: ToolBridge, message_ids: set,
                       result: PlannerResult, emit: EventEmitter, steering: Steering | None,
                       deadline: float | None, toolkit: Toolkit) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage

        stats = result.stats
        while True:
            async for msg in client.receive_response():
                if isinstance(msg, AssistantMessage):
                    if getattr(msg, "message_id", None):
                        message_ids.add(msg.message_id)
                    blocks = self._assistant_blocks(msg, bridge, emit)
                    if blocks:
                        result.messages.append({"role": "assistant", "content": blocks})
                    if getattr(msg, "error", None):
                        log.warning("assistant message error: %s", msg.error)
                elif isinstance(msg, ResultMessage):
                    self._apply_result(msg, stats, result, emit)
            if bridge.finish is not None or (steering is not None and steering.stop_requested):
                return
            if steering is not None and steering.interactive and result.stop_reason in ("end_turn", ""):
                while not await asyncio.to_thread(steering.wait_for_input, 0.2):
                    if deadline is not None and time.monotonic() >= deadline:
                        raise asyncio.TimeoutError()
                if steering.stop_requested:
                    return
                continue  # the watcher forwards the line; the CLI starts a new turn
            return

    @staticmethod
    def _assistant_blocks(msg: Any, bridge: ToolBridge, emit: EventEmitter) -> list[dict[str, Any]]:
        from claude_agent_sdk import TextBlock, ThinkingBlock, ToolUseBlock

        blocks: list[dict[str, Any]] = []
        for b in msg.content:
            if isinstance(b, TextBlock):
                blocks.append({"type": "text", "text": b.text})
                emit("text", text=b.text)
            elif isinstance(b, ThinkingBlock):
                blocks.append({"type": "thinking", "thinking": b.thinking})
                emit("thinking", text=b.thinking)
            elif isinstance(b, ToolUseBlock):
                name = strip_mcp_prefix(b.name)
                bridge.expect(name, b.id)
                blocks.append({"type": "tool_use", "id": b.id, "name": name, "input": b.input})
        return blocks

    @staticmethod
    def _apply_result(msg: Any, stats: PlannerStats, result: PlannerResult, emit: EventEmitter) -> None:
        usage = msg.usage or {}
        delta = {"input_tokens": int(usage.get("input_tokens") or 0),
                 "output_tokens": int(usage.get("output_tokens") or 0),
                 "cache_read_tokens": int(usage.get("cache_read_input_tokens") or 0),
                 "cache_write_tokens": int(usage.get("cache_creation_input_tokens") or 0)}
        stats.add_usage(delta)
        emit("usage", **delta)
        if msg.total_cost_usd is not None:
            stats.cost_usd = (stats.cost_usd or 0.0) + float(msg.total_cost_usd)
        subtype = msg.subtype or ""
        if subtype == "error_max_turns":
            result.stop_reason = "max_turns"
        elif subtype == "error_max_budget_usd":
            result.stop_reason, result.error = "budget", f"Claude Code budget of ${stats.cost_usd or 0:.2f} reached"
        elif msg.is_error:
            status = getattr(msg, "api_error_status", None)
            detail = msg.result or "; ".join(msg.errors or []) or subtype
            result.stop_reason = "error"
            result.error = f"Claude Code error{f' (HTTP {status})' if status else ''}: {detail}"
            result.error_kind = "auth" if status in (401, 403) else ("provider" if status else "sdk")
            if status and 400 <= status < 500 and "image" in str(detail).lower():
                result.error += " (hint: the provider rejected image input)"
        else:
            result.stop_reason = "end_turn"
