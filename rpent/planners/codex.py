"""``--planner codex``: the OpenAI Codex Python SDK (``openai-codex``) driving its bundled
``codex`` CLI (``codex app-server`` over stdio).

* The toolkit is served as a Streamable-HTTP MCP server on a loopback port for the
  duration of the run (:class:`~rpent.planners.mcp_http.McpHttpToolServer`), registered
  as ``[mcp_servers.rpent]`` with ``default_tools_approval_mode = "approve"`` (the
  approval policy is ``never``, so unapproved MCP calls would be refused). The model
  sees the namespace ``mcp__rpent`` with the bare tool names.
* Configuration goes into a fresh temporary ``CODEX_HOME/config.toml`` (nothing from
  ``~/.codex`` is read except ``auth.json``, copied when present so a ChatGPT login keeps
  working). ``project_doc_max_bytes = 0`` keeps ``AGENTS.md`` out of the prompt.
* ``CODEX_BASE_URL`` adds a custom Responses provider ``rpent_custom``
  (``wire_api = "responses"``, ``/v1`` appended when missing, key from
  ``CODEX_API_KEY``); without it an API key (``CODEX_API_KEY`` or ``OPENAI_API_KEY``) is
  logged in through the SDK, else the copied login is used.
* Thread: ``approval_mode=deny_all``, ``sandbox=read_only``, the rendered system prompt as
  ``base_instructions``. Model: ``--model``, else ``CODEX_MODEL``, else the SDK default (refused with
  ``CODEX_BASE_URL``: the CLI sends that model to a custom provider without tools). A turn that
  ends without a single tool call is an error (``Codex ended its turn without calling any rpent
  tool ...``), never a silent ``end_turn``.
* ``--max-turns`` caps model requests (counted from token-usage updates; the turn is
  interrupted when reached — a normal stop). Operator lines steer the running turn
  (``turn.steer``); an accepted finish or a stop interrupts it.
* Timeout: the running tool is cancelled, the turn interrupted; error
  ``"Codex SDK timed out after <N>s"``.
* If the toolkit's MCP server stops during the run, the turn is interrupted at once and the run
  ends with ``"toolkit MCP server exited during tool call <tool> (<id>) ..."`` (the model would
  otherwise get raw transport errors and end a normal turn); closing the server stops its thread.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rpent.planners.tool_defs import tool_defs
from rpent.planners.base import (
    EventHook,
    PlannerConfig,
    PlannerConfigError,
    PlannerResult,
    Steering,
    Toolkit,
)
from rpent.planners.steering import OPERATOR_PREFIX
from rpent.planners.events import EventEmitter, PlannerTimeout, run_sdk_session
from rpent.planners.mcp_http import McpHttpToolServer
from rpent.planners.tool_bridge import MCP_SERVER_NAME, ToolBridge

__all__ = ["CodexPlanner", "codex_config_toml"]

log = logging.getLogger("rpent.planners.codex")

CUSTOM_PROVIDER = "rpent_custom"
KEY_VAR = "RPENT_CODEX_PROVIDER_KEY"


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def codex_config_toml(mcp_url: str, base_url: str | None, max_retries: int) -> str:
    """The ``config.toml`` written into the temporary ``CODEX_HOME``.

    Args:
        mcp_url: URL of the rpent Streamable-HTTP MCP server.
        base_url: custom Responses provider base URL (``CODEX_BASE_URL``), or None.
        max_retries: ``request_max_retries`` / ``stream_max_retries`` of the custom provider.
    """
    lines = ["project_doc_max_bytes = 0", ""]
    if base_url:
        url = base_url.rstrip("/")
        if not url.endswith("/v1"):
            url += "/v1"
        lines[0:0] = [f"model_provider = {_toml_str(CUSTOM_PROVIDER)}"]
        lines += [f"[model_providers.{CUSTOM_PROVIDER}]", f"name = {_toml_str(CUSTOM_PROVIDER)}",
                  f"base_url = {_toml_str(url)}", f"env_key = {_toml_str(KEY_VAR)}", 'wire_api = "responses"',
                  f"request_max_retries = {int(max_retries)}", f"stream_max_retries = {int(max_retries)}", ""]
    lines += [f"[mcp_servers.{MCP_SERVER_NAME}]", f"url = {_toml_str(mcp_url)}",
              'default_tools_approval_mode = "approve"', ""]
    return "\n".join(lines)


RPC_TIMEOUT_S = 10.0
"""Upper bound on one control call to the codex app-server (interrupt, steer)."""


def _bounded(fn: Any, what: str, timeout_s: float = RPC_TIMEOUT_S) -> bool:
    """Run ``fn()`` in a daemon thread, waiting at most ``timeout_s``; True when it returned
    without raising. The app-server may never answer a control call for a turn that just
    ended, so the planner never waits on one unbounded."""
    ok = threading.Event()

    def run() -> None:
        try:
            fn()
            ok.set()
        except Exception as exc:
            log.debug("codex %s failed: %s", what, exc)

    t = threading.Thread(target=run, name=f"codex-{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    return ok.is_set()


class CodexPlanner:
    """``--planner codex [--model <id>]``.

    Raises:
        PlannerConfigError: api-only flags (``--base-url``, ``--no-images``), prefixed model
            ids, bad ranges.
    """

    name = "codex"

    def __init__(self, config: PlannerConfig) -> None:
        config.validate()
        if config.base_url:
            raise PlannerConfigError("--base-url applies to --planner api only; for codex set CODEX_BASE_URL "
                                     "(and CODEX_API_KEY) in the environment")
        if config.no_images:
            raise PlannerConfigError("--no-images applies to --planner api only")
        if config.model and ":" in config.model:
            raise PlannerConfigError(f"--planner codex takes a bare model id, got {config.model!r}")
        self.config = config
        self.model = config.model or config.getenv("CODEX_MODEL")
        self.base_url = config.getenv("CODEX_BASE_URL")
        self.api_key = config.api_key or config.getenv("CODEX_API_KEY") or (
            None if self.base_url else config.getenv("OPENAI_API_KEY"))
        if self.base_url and not self.api_key:
            raise PlannerConfigError("CODEX_BASE_URL is set but CODEX_API_KEY is not; export the key for that "
                                     "provider (any non-empty value for a local server)")
        if self.base_url and not self.model:
            raise PlannerConfigError(
                "--planner codex with CODEX_BASE_URL needs --model <id> (or CODEX_MODEL): the Codex SDK's default "
                "model is one the bundled CLI sends to a custom provider without any tools, so the run could "
                "not call rpent's tools; e.g. --model gpt-5.1-codex")

    def solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, *,
              steering: Steering | None = None, on_event: EventHook | None = None) -> PlannerResult:
        """Run one Codex turn; see :meth:`rpent.planners.base.Planner.solve`. Never raises."""
        return run_sdk_session("Codex SDK", log, self.config.timeout_s, toolkit, steering, on_event,
                               lambda emit, result: self._solve(system_prompt, user_message, toolkit, steering,
                                                                emit, result))

    def _solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, steering: Steering | None,
               emit: EventEmitter, result: PlannerResult) -> None:
        from openai_codex import ApprovalMode, Codex, CodexConfig, Sandbox

        cfg = self.config
        deadline = time.monotonic() + cfg.timeout_s if cfg.timeout_s else None
        stats, transcript = result.stats, result.messages
        defs = tool_defs(toolkit.specs())
        toolkit.clear_cancel()
        def stop_check() -> str | None:
            if steering is not None and steering.stop_requested:
                return steering.stop_reason or "the operator stopped the run"
            return None

        bridge = ToolBridge(toolkit, emit, stats, transcript, stop_check=stop_check, steering=steering)
        transcript.append({"role": "user", "content": [{"type": "text", "text": user_message}], "source": "task"})
        with tempfile.TemporaryDirectory(prefix="rpent-codex-") as home, McpHttpToolServer(defs, bridge) as mcp:
            Path(home, "config.toml").write_text(codex_config_toml(mcp.url, self.base_url, cfg.max_retries))
            user_auth = Path.home() / ".codex" / "auth.json"
            if not self.api_key and user_auth.is_file():
                shutil.copy(user_auth, Path(home, "auth.json"))
            env = {"CODEX_HOME": home, **({KEY_VAR: self.api_key} if self.base_url else {}), **cfg.env}
            cwd = str(cfg.cwd or home)
            with Codex(CodexConfig(env=env, cwd=cwd)) as cx:
                if self.api_key and not self.base_url:
                    cx.login_api_key(self.api_key)
                thread = cx.thread_start(model=self.model, approval_mode=ApprovalMode.deny_all,
                                         sandbox=Sandbox.read_only, base_instructions=system_prompt, cwd=cwd,
                                         ephemeral=True)
                effort = None
                if cfg.reasoning_effort:
                    from openai_codex.generated.v2_all import ReasoningEffort
                    effort = ReasoningEffort(cfg.reasoning_effort)
                state: dict[str, Any] = {"requests": 0}
                text = user_message
                while True:
                    turn = thread.turn(text, effort=effort)
                    # stop before a finish/stop result reaches the model (bounded: never hang on the CLI)
                    bridge.on_end = lambda t=turn: _bounded(t.interrupt, "interrupt")
                    unsent = self._drive(turn, bridge, toolkit, steering, emit, result, deadline, state, mcp)
                    if result.stop_reason != "end_turn" or bridge.finish is not None:
                        break
                    fresh = steering.drain() if steering is not None else []
                    while not (unsent or fresh) and steering is not None and steering.interactive:
                        if deadline is not None and time.monotonic() >= deadline:
                            raise PlannerTimeout()
                        if steering.wait_for_input(0.2):
                            if steering.stop_requested:
                                result.stop_reason, result.error = "interrupted", steering.stop_reason
                                result.error_kind = "interrupted"
                                break
                            fresh = steering.drain()
                    for line in fresh:
                        transcript.append({"role": "user", "content": [
                            {"type": "text", "text": OPERATOR_PREFIX + line}], "source": "operator"})
                        emit("operator", text=line)
                    lines = unsent + fresh
                    if not lines or result.stop_reason == "interrupted":
                        break
                    text = "\n".join(OPERATOR_PREFIX + line for line in lines)  # a new turn carries them
        if bridge.finish is not None:
            result.finish, result.stop_reason, result.error, result.error_kind = bridge.finish, "finished", None, None

    def _drive(self, turn: Any, bridge: ToolBridge, toolkit: Toolkit, steering: Steering | None,
               emit: EventEmitter, result: PlannerResult, deadline: float | None,
               state: dict[str, Any], mcp: McpHttpToolServer | None = None) -> list[str]:
        """Consume one turn's notifications in a worker thread while this thread steers, stops
        and times out. Returns operator lines that could not be steered into the turn (the
        caller sends them as the next turn, so none is lost)."""
        done = threading.Event()
        box: dict[str, Any] = {"turn": None, "exc": None}

        def consume() -> None:
            try:
                for ev in turn.stream():
                    self._on_notification(ev, bridge, emit, result, state, box)
            except BaseException as exc:
                box["exc"] = exc
            finally:
                done.set()

        threading.Thread(target=consume, name="codex-notifications", daemon=True).start()
        interrupted = None
        unsent: list[str] = []
        while not done.wait(0.05):
            if interrupted is not None:
                if interrupted == "timeout" or (deadline is not None and time.monotonic() >= deadline + 10):
                    done.wait(5)
                    raise PlannerTimeout()
                continue
            if bridge.finish is not None:
                interrupted = "finished"
            elif mcp is not None and not mcp.alive:
                interrupted = "mcp_exited"  # the model would only see raw transport errors from here on
                toolkit.cancel()
            elif steering is not None and steering.stop_requested:
                interrupted = "interrupted"
            elif state["requests"] >= self.config.max_turns:
                interrupted = "max_turns"
            elif deadline is not None and time.monotonic() >= deadline:
                interrupted = "timeout"
                toolkit.cancel()
            if interrupted is not None:
                _bounded(turn.interrupt, "interrupt")
                continue
            if steering is not None:
                for line in unsent + steering.drain():
                    if line not in unsent:
                        result.messages.append({"role": "user", "content": [
                            {"type": "text", "text": OPERATOR_PREFIX + line}], "source": "operator"})
                        emit("operator", text=line)
                    if _bounded(lambda ln=line: turn.steer(OPERATOR_PREFIX + ln), "steer"):
                        if line in unsent:
                            unsent.remove(line)
                    elif line not in unsent:
                        unsent.append(line)
        if interrupted == "timeout":
            raise PlannerTimeout()
        if box["exc"] is not None:
            raise box["exc"]
        result.stats.requests = state["requests"]
        turn_obj = box["turn"]
        status = getattr(getattr(turn_obj, "status", None), "value", None)
        if bridge.finish is not None:
            result.stop_reason = "finished"  # _solve records the finish
        elif interrupted == "mcp_exited" or (mcp is not None and not mcp.alive):
            failed = state.get("failed_call") or state.get("last_call") or ("?", "?", "")
            tool, call_id, detail = failed
            result.stop_reason, result.error_kind = "error", "internal"
            result.error = (f"toolkit MCP server exited during tool call {tool} ({call_id}); the run stopped "
                            f"(the model would only see transport errors)" + (f": {detail}" if detail else ""))
            if not any(m.get("role") == "tool" and m.get("tool_call_id") == call_id for m in result.messages):
                result.messages.append({"role": "tool", "tool_call_id": call_id, "name": tool, "is_error": True,
                                        "content": [{"type": "text", "text": result.error}]})
        elif steering is not None and steering.stop_requested:  # also when the bridge interrupted first
            result.stop_reason, result.error = "interrupted", steering.stop_reason
            result.error_kind = "interrupted"
        elif interrupted == "max_turns" or state["requests"] >= self.config.max_turns:
            result.stop_reason = "max_turns"
        elif status == "failed":
            err = getattr(turn_obj, "error", None)
            message = getattr(err, "message", None) or "turn failed"
            extra = getattr(err, "additional_details", None)
            result.stop_reason = "error"
            result.error = f"Codex turn failed: {message}" + (f" ({extra})" if extra else "")
            info = str(getattr(getattr(err, "codex_error_info", None), "root", getattr(err, "codex_error_info", "")))
            result.error_kind = ("auth" if "unauthorized" in info.lower() else
                                 "network" if "connection" in info.lower() else "provider")
        else:
            result.stop_reason = "end_turn"
            interactive = steering is not None and steering.interactive  # there a text-only turn is a question
            if not interactive and result.stats.tool_calls == 0 and not any(m["role"] == "tool" for m in result.messages):
                model = self.model or "the Codex SDK's default model"
                result.stop_reason, result.error_kind = "error", "provider"
                result.error = (f"Codex ended its turn without calling any rpent tool (model {model}); check that "
                                "the model supports tool calls with this provider (pass --model) and that the "
                                "toolkit MCP server was reachable")
        return unsent

    @staticmethod
    def _on_notification(ev: Any, bridge: ToolBridge, emit: EventEmitter, result: PlannerResult,
                         state: dict[str, Any], box: dict[str, Any]) -> None:
        method, payload = ev.method, ev.payload
        if method == "thread/tokenUsage/updated":
            last = payload.token_usage.last
            cached = last.cached_input_tokens or 0
            usage = {"input_tokens": max(0, (last.input_tokens or 0) - cached),
                     "output_tokens": last.output_tokens or 0, "cache_read_tokens": cached,
                     "cache_write_tokens": last.cache_write_input_tokens or 0}
            result.stats.add_usage(usage)
            result.stats.turns_used += 1
            state["requests"] += 1
            emit("usage", **usage)
        elif method in ("item/started", "item/completed"):
            item = getattr(payload.item, "root", payload.item)
            kind = getattr(item, "type", "")
            if method == "item/started" and kind == "mcpToolCall":
                args = item.arguments if isinstance(item.arguments, dict) else {}
                state["last_call"] = (item.tool, item.id, "")
                bridge.expect(item.tool, item.id)
                result.messages.append({"role": "assistant", "content": [
                    {"type": "tool_use", "id": item.id, "name": item.tool, "input": args}]})
            elif method == "item/completed" and kind == "mcpToolCall" and getattr(item, "error", None):
                err = getattr(item.error, "message", None) or str(item.error)
                state["failed_call"] = (item.tool, item.id, err.strip().splitlines()[0][:300] if err.strip() else "")
            elif method == "item/completed" and kind == "agentMessage" and item.text:
                result.messages.append({"role": "assistant", "content": [{"type": "text", "text": item.text}]})
                emit("text", text=item.text)
            elif method == "item/completed" and kind == "reasoning":
                text = "\n".join((item.summary or []) + (item.content or []))
                if text:
                    result.messages.append({"role": "assistant", "content": [{"type": "thinking", "thinking": text}]})
                    emit("thinking", text=text)
        elif method == "turn/completed":
            box["turn"] = payload.turn
