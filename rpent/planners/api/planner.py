"""The ``api`` planner: a tool-calling loop over the official Anthropic / OpenAI SDKs.

Loop (RPent reference §8): send the conversation; execute the tool calls of the reply
in order; send the results back; repeat until an accepted ``finish`` (``_finish`` in a
tool *result*), the model stops calling tools, ``--max-turns`` model requests (retries
included; a normal stop), the planner timeout, an operator stop, or a provider error.

* Before each request the neutral conversation is image-pruned
  (:func:`~rpent.planners.api.images.prune_images`) and converted by the provider
  adapter; ``--no-images`` replaces images with text notes before they ever enter the
  conversation.
* Retries: 429/5xx/connection errors/timeouts, up to ``max_retries`` times per request,
  waiting ``retry-after`` or exponential backoff; every failed attempt is appended to
  ``<output_dir>/llm_errors.jsonl``.
* A provider error ends the run with ``result.error`` (a 4xx mentioning images adds a
  ``--no-images`` hint); no exception escapes ``solve``.
* Timeout: the running tool is cancelled (``toolkit.cancel()``), and the result error is
  ``"API planner timed out after <N>s"``.
* Steering: queued operator lines are delivered as user text before the next request;
  ``interrupt()`` cancels the running tool (the model sees the ``tool_cancelled``
  result); ``interrupt(stop=True)`` / ``/quit`` ends the run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from rpent.planners.api.errors import LlmErrorLog, ProviderError, backoff_s, from_sdk_exception
from rpent.planners.api.images import prune_images
from rpent.planners.api.model_spec import resolve_provider
from rpent.planners.api.provider import ModelReply, ProviderAdapter, make_adapter, tool_defs
from rpent.planners.base import (
    EventHook,
    Finish,
    PlannerConfig,
    PlannerConfigError,
    PlannerResult,
    PlannerStats,
    Steering,
    Toolkit,
)
from rpent.planners.content import image_ref, jsonable_result, to_tool_content, transcript_blocks
from rpent.planners.steering import OPERATOR_PREFIX
from rpent.planners.events import EventEmitter
from rpent.planners.tool_runner import run_tool

__all__ = ["OPERATOR_PREFIX", "ApiPlanner"]

log = logging.getLogger("rpent.planners.api")

REQUEST_TIMEOUT_S = 600.0
"""Upper bound on one HTTP request (s) when no planner deadline is closer."""


class _Timeout(Exception):
    pass


class _Stopped(Exception):
    pass


class _MaxTurns(Exception):
    pass


class ApiPlanner:
    """``--planner api``. See the module docstring.

    Args:
        config: :class:`~rpent.planners.base.PlannerConfig`; ``model`` must carry a
            provider prefix.
        adapter: inject a provider adapter (tests of odd providers); built from
            ``config`` when None.

    Raises:
        PlannerConfigError: bad ``--model``, missing API key, bad option ranges.
    """

    name = "api"

    def __init__(self, config: PlannerConfig, adapter: ProviderAdapter | None = None) -> None:
        config.validate()
        self.config = config
        self.settings = resolve_provider(config)
        try:
            self.adapter = adapter or make_adapter(
                self.settings.spec.provider, self.settings.spec.id, api_key=self.settings.api_key,
                base_url=self.settings.base_url, max_tokens=config.max_tokens,
                reasoning_effort=config.reasoning_effort)
        except ValueError as exc:
            raise PlannerConfigError(str(exc)) from None
        self.error_log = LlmErrorLog(config.output_dir)

    # ------------------------------------------------------------------------------------
    def solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, *,
              steering: Steering | None = None, on_event: EventHook | None = None) -> PlannerResult:
        """Run the loop; see :meth:`rpent.planners.base.Planner.solve`. Never raises."""
        start = time.monotonic()
        cfg = self.config
        deadline = start + cfg.timeout_s if cfg.timeout_s else None
        emit = EventEmitter(on_event)
        stats = PlannerStats()
        transcript: list[dict[str, Any]] = []
        conv: list[dict[str, Any]] = []
        result = PlannerResult(messages=transcript, stats=stats)
        remove_listener = steering.add_interrupt_listener(toolkit.cancel) if steering else (lambda: None)
        try:
            tools = tool_defs(toolkit.specs())
            toolkit.clear_cancel()
            self._add_user(conv, transcript, user_message, "task")
            while True:
                self._check_stop(steering)
                for line in steering.drain() if steering else []:
                    self._add_user(conv, transcript, OPERATOR_PREFIX + line, "operator")
                    emit("operator", text=line)
                reply = self._request(system_prompt, conv, tools, stats, deadline, steering, emit)
                stats.turns_used += 1
                stats.add_usage(reply.usage)
                conv.append({"role": "assistant", "content": reply.content})
                transcript.append({"role": "assistant", "content": transcript_blocks(reply.content)})
                emit("response", turn=stats.turns_used, content=transcript_blocks(reply.content),
                     stop_reason=reply.stop_reason, usage=reply.usage, raw=reply.raw)
                emit("usage", **reply.usage)
                for block in reply.content:
                    if block["type"] in ("text", "thinking") and block.get(block["type"]):
                        emit(block["type"], text=block[block["type"]])
                calls = [b for b in reply.content if b["type"] == "tool_use"]
                if not calls:
                    if steering is not None and steering.interactive:
                        self._wait_for_operator(steering, deadline)
                        continue
                    result.stop_reason = "end_turn"
                    break
                if self._run_calls(calls, toolkit, conv, transcript, stats, deadline, steering, emit, result):
                    result.stop_reason = "finished"
                    break
        except _Timeout:
            result.error = f"API planner timed out after {cfg.timeout_s:g}s"
            result.stop_reason = result.error_kind = "timeout"
        except _Stopped:
            result.error = (steering.stop_reason if steering else None) or "interrupted by operator"
            result.stop_reason = result.error_kind = "interrupted"
        except _MaxTurns:
            result.stop_reason = "max_turns"
        except ProviderError as exc:
            result.error = str(exc)
            result.stop_reason = "error"
            result.error_kind = {"auth": "auth", "connection": "network", "timeout": "network"}.get(exc.kind, "provider")
        except Exception as exc:  # never let a planner bug become a traceback for the user
            log.exception("api planner failed")
            result.error = f"{type(exc).__name__}: {exc}"
            result.stop_reason = "error"
            result.error_kind = "internal"
        finally:
            remove_listener()
            stats.elapsed_s = time.monotonic() - start
        if result.error:
            emit("error", error=result.error)
        return result

    # ------------------------------------------------------------------------------------
    @staticmethod
    def _add_user(conv: list, transcript: list, text: str, source: str) -> None:
        conv.append({"role": "user", "content": [{"type": "text", "text": text}]})
        transcript.append({"role": "user", "content": [{"type": "text", "text": text}], "source": source})

    @staticmethod
    def _check_stop(steering: Steering | None) -> None:
        if steering is not None and steering.stop_requested:
            raise _Stopped()

    @staticmethod
    def _remaining(deadline: float | None) -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    def _wait_for_operator(self, steering: Steering, deadline: float | None) -> None:
        while True:
            left = self._remaining(deadline)
            if left is not None and left <= 0:
                raise _Timeout()
            if steering.wait_for_input(0.2 if left is None else min(0.2, left)):
                self._check_stop(steering)
                return

    def _sleep(self, seconds: float, deadline: float | None, steering: Steering | None) -> None:
        end = time.monotonic() + seconds
        while True:
            self._check_stop(steering)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise _Timeout()
            if now >= end:
                return
            time.sleep(min(0.05, end - now))

    def _call_once(self, system: str, messages: list, tools: list, deadline: float | None,
                   steering: Steering | None) -> ModelReply:
        left = self._remaining(deadline)
        timeout_s = REQUEST_TIMEOUT_S if left is None else max(0.1, min(REQUEST_TIMEOUT_S, left))
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["reply"] = self.adapter.send(system, messages, tools, timeout_s=timeout_s)
            except BaseException as exc:
                box["exc"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="api-planner-request", daemon=True).start()
        while not done.wait(0.05):
            self._check_stop(steering)
            if deadline is not None and time.monotonic() >= deadline:
                raise _Timeout()
        if "exc" in box:
            raise from_sdk_exception(box["exc"], self.adapter.provider)
        return box["reply"]

    def _request(self, system: str, conv: list, tools: list, stats: PlannerStats, deadline: float | None,
                 steering: Steering | None, emit: EventEmitter) -> ModelReply:
        cfg = self.config
        if cfg.no_images:
            messages, omitted = conv, 0
        else:
            messages, omitted = prune_images(conv, cfg.image_budget_bytes)
        attempt = 0
        while True:
            if stats.requests >= cfg.max_turns:
                raise _MaxTurns()
            self._check_stop(steering)
            stats.requests += 1
            emit("request", turn=stats.turns_used + 1, attempt=attempt, provider=self.adapter.provider,
                 model=self.adapter.model, messages=[dict(m, content=transcript_blocks(m["content"]))
                                                     for m in messages],
                 tools=[t.name for t in tools], params=self.adapter.params(), images_omitted=omitted)
            try:
                return self._call_once(system, messages, tools, deadline, steering)
            except ProviderError as err:
                will_retry = err.retryable and attempt < cfg.max_retries and stats.requests < cfg.max_turns
                sleep = backoff_s(attempt, err.retry_after_s) if will_retry else 0.0
                self.error_log.write({"provider": err.provider, "model": self.adapter.model,
                                      "turn": stats.turns_used + 1, "attempt": attempt, "status": err.status,
                                      "kind": err.kind, "message": err.message,
                                      "retry_after_s": err.retry_after_s, "will_retry": will_retry,
                                      "sleep_s": sleep})
                log.warning("model request failed (attempt %d): %s%s", attempt + 1, err,
                            f"; retrying in {sleep:.1f}s" if will_retry else "")
                if not will_retry:
                    if err.retryable and stats.requests >= cfg.max_turns:
                        raise _MaxTurns() from None
                    raise
                emit("retry", attempt=attempt, status=err.status, error=str(err), sleep_s=sleep)
                self._sleep(sleep, deadline, steering)
                attempt += 1

    def _run_calls(self, calls: list[dict[str, Any]], toolkit: Toolkit, conv: list, transcript: list,
                   stats: PlannerStats, deadline: float | None, steering: Steering | None,
                   emit: EventEmitter, result: PlannerResult) -> bool:
        """Execute the reply's tool calls in order; True when a finish was accepted."""
        skip_reason: str | None = None
        for call in calls:
            name, args, call_id = call["name"], call.get("input") or {}, call["id"]
            emit("tool_call", name=name, args=args, call_id=call_id)
            timed_out = False
            if skip_reason is not None:
                raw = {"error": f"not executed: {skip_reason}", "code": "tool_cancelled", "interrupted": True}
                elapsed = 0.0
            elif call.get("input_error"):
                raw = {"error": f"bad arguments for {name}: {call['input_error']}"}
                elapsed = 0.0
            else:
                if steering is not None and not steering.stop_requested:
                    # a plain interrupt that came while no tool ran (the model was answering) had
                    # nothing to cancel: its flag must not cancel this call (a stop is never cleared)
                    toolkit.clear_cancel()
                outcome = run_tool(toolkit, name, args, call_id, deadline=deadline, steering=steering)
                stats.tool_calls += 1
                raw, elapsed, timed_out = outcome.result, outcome.elapsed_s, outcome.timed_out
                if outcome.interrupted:
                    toolkit.clear_cancel()
                    skip_reason = "the operator interrupted the previous tool call"
            content = to_tool_content(raw, no_images=self.config.no_images)
            conv.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content.blocks,
                         "is_error": content.is_error})
            transcript.append({"role": "tool", "tool_call_id": call_id, "name": name,
                               "content": transcript_blocks(content.blocks), "is_error": content.is_error})
            emit("tool_result", call_id=call_id, name=name, result=jsonable_result(raw), is_error=content.is_error,
                 images=[{"label": i.get("label", ""), "png": i["png"], "ref": image_ref(i.get("label", ""), i["png"])["ref"]}
                         for i in raw.get("_images") or [] if isinstance(i, dict) and isinstance(i.get("png"), bytes)],
                 elapsed_s=elapsed)
            if timed_out:
                raise _Timeout()
            if content.finish is not None:
                result.finish = Finish(*content.finish)
                return True
            self._check_stop(steering)
        return False
