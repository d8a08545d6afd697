"""The toolkit execution contract shared by every robot's tools (RPent reference §3.1).

* Errors are results, never crashes: unknown tool -> ``{"error": "unknown tool: X", "tools": [...]}``;
  bad arguments -> ``{"error": "bad arguments for X: ...", "got": {...}}``; a service failure
  -> ``{"error", "error_type", "fallback"?}``; anything else -> ``{"error", "traceback"}``.
* Concurrency: stateful (motion) calls are serialised under a write lock; read-only calls run
  concurrently under a read lock; calls queue instead of being rejected.
* Cancellation: :meth:`Toolkit.cancel` sets a flag that motions check between env steps; the
  interrupted tool returns ``{"error", "code": "tool_cancelled", "interrupted": True}``.
* Results are JSON-able dicts, except ``_images``: a list of ``{"label": str, "png": bytes}``
  that planners turn into image blocks. ``_finish: True`` ends the planner loop.
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
import uuid
from typing import Callable

from rpent.toolkit.registry import BoundTool, ToolArgumentError, ToolSpec, build_spec

__all__ = ["Toolkit", "ToolCancelled", "ToolServiceError", "strip_images"]


class ToolCancelled(Exception):
    """Raised inside a tool when the cancel flag is seen at an env-step boundary."""


class ToolServiceError(RuntimeError):
    """A backing service (VLA, SAM3, env) failed; ``fallback`` suggests what the planner can do."""

    def __init__(self, message: str, fallback: str | None = None) -> None:
        super().__init__(message)
        self.fallback = fallback


class _RWLock:
    """Writer-preferring readers/writer lock (stateful tools exclusive, read-only shared)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    def acquire(self, write: bool) -> None:
        with self._cond:
            if write:
                self._waiting_writers += 1
                while self._writer or self._readers:
                    self._cond.wait()
                self._waiting_writers -= 1
                self._writer = True
            else:
                while self._writer or self._waiting_writers:
                    self._cond.wait()
                self._readers += 1

    def release(self, write: bool) -> None:
        with self._cond:
            if write:
                self._writer = False
            else:
                self._readers -= 1
            self._cond.notify_all()


def strip_images(result: dict) -> dict:
    """A copy of a tool result without image bytes (``_images`` becomes a list of labels)."""
    out = {k: v for k, v in result.items() if k != "_images"}
    if result.get("_images"):
        out["_images"] = [img.get("label") for img in result["_images"]]
    return out


class Toolkit:
    """Base class: collects ``@tool`` methods of the (mixin) class and executes them.

    Subclasses define tool methods with :func:`rpent.robots.libero.toolkit.registry.tool` and
    may override :meth:`after_stateful` (capture a new step after a motion).

    Args:
        on_event: optional callback ``(event: dict) -> None`` receiving ``tool_call`` and
            ``tool_result`` events (results without image bytes); must not block.
    """

    def __init__(self, on_event: Callable[[dict], None] | None = None) -> None:
        self._tools: dict[str, BoundTool] = {}
        for attr_name, bound in type(self).declared_tools():
            bound.fn = getattr(self, attr_name)
            self._tools[bound.spec.name] = bound
        self._disabled: dict[str, str] = {}
        self._lock = _RWLock()
        self._cancel = threading.Event()
        self.on_event = on_event
        self.finish_result: dict | None = None
        self.tool_calls = 0

    # ------------------------------------------------------------------ registry
    @classmethod
    def declared_tools(cls) -> list[tuple[str, BoundTool]]:
        """The ``@tool`` methods the class declares, as ``(attribute name, BoundTool)``, each new
        and unbound (``fn`` is the function the class holds): specs and argument validation
        without an instance (a flash plan's steps are checked against them before anything
        starts)."""
        out = []
        for name in dir(cls):
            attr = getattr(cls, name, None)
            if callable(attr) and hasattr(attr, "__rpent_tool__"):
                out.append((name, build_spec(attr)))
        return out

    def disable(self, name: str, reason: str) -> None:
        """Leave tool ``name`` out of :meth:`specs` (e.g. ``pi0_pick`` without a VLA service)."""
        self._disabled[name] = reason

    def disabled(self) -> dict[str, str]:
        """Tools left out and why."""
        return dict(self._disabled)

    def specs(self) -> list[ToolSpec]:
        """The tools a planner may call, sorted by name."""
        return [t.spec for n, t in sorted(self._tools.items()) if n not in self._disabled]

    def spec(self, name: str) -> ToolSpec:
        """One tool's spec. Raises KeyError for an unknown or disabled tool."""
        if name in self._disabled or name not in self._tools:
            raise KeyError(name)
        return self._tools[name].spec

    # ------------------------------------------------------------------ cancel
    def cancel(self) -> None:
        """Ask the running motion to stop at its next env-step boundary (and every later one
        until :meth:`clear_cancel`)."""
        self._cancel.set()

    def clear_cancel(self) -> None:
        """Allow motions again after a cancel."""
        self._cancel.clear()

    def cancelled(self) -> bool:
        """True while a cancel is pending."""
        return self._cancel.is_set()

    def check_cancel(self) -> None:
        """Raise :class:`ToolCancelled` when a cancel is pending (call between env steps)."""
        if self._cancel.is_set():
            raise ToolCancelled()

    # ------------------------------------------------------------------ execution
    def _emit(self, event: dict) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a UI callback must never break a tool call
                pass

    def execute(self, name: str, args: dict | None = None, call_id: str | None = None) -> dict:
        """Run tool ``name`` with ``args``; never raises (errors are results).

        Args:
            name: tool name (an ``mcp__rpent__`` prefix is accepted and stripped).
            args: JSON object of named arguments.
            call_id: the planner's id for this call (generated when None).
        Returns:
            the tool's result dict (see the module docstring).
        """
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        if name.startswith("mcp__rpent__"):
            name = name[len("mcp__rpent__"):]
        args = {} if args is None else args
        self.tool_calls += 1
        self._emit({"kind": "tool_call", "name": name, "args": args, "call_id": call_id})
        t0 = time.monotonic()
        bound = self._tools.get(name)
        if bound is None or name in self._disabled:
            why = f" ({self._disabled[name]})" if name in self._disabled else ""
            result = {"error": f"unknown tool: {name}{why}", "tools": [s.name for s in self.specs()]}
        else:
            result = self._run(bound, args, call_id)
        result.setdefault("agent_elapsed_s", round(time.monotonic() - t0, 3))
        self._emit({"kind": "tool_result", "name": name, "call_id": call_id, "result": strip_images(result)})
        return result

    def _run(self, bound: BoundTool, args: dict, call_id: str) -> dict:
        name = bound.spec.name
        try:
            kwargs = bound.validate(args)
        except ToolArgumentError as exc:
            return {"error": f"bad arguments for {name}: {exc}", "got": args}
        write = not bound.spec.readonly
        self._lock.acquire(write)
        try:
            refused = self.refuse_call(name, kwargs, call_id, write)
            if refused is not None:
                return refused
            self.before_call(name, kwargs, call_id, write)
            try:
                result = bound.fn(**kwargs)
            except ToolCancelled:
                result = {"error": f"{name} cancelled between env steps", "code": "tool_cancelled",
                          "interrupted": True}
            except ToolArgumentError as exc:
                result = {"error": f"bad arguments for {name}: {exc}", "got": args}
            except (ValueError, IndexError, KeyError) as exc:
                result = {"error": f"{name}: {exc}", "got": args}
            except ToolServiceError as exc:
                result = {"error": f"{name}: {exc}", "error_type": "service_error"}
                if exc.fallback:
                    result["fallback"] = exc.fallback
            except Exception as exc:  # noqa: BLE001 — errors are results
                result = {"error": f"{name} failed: {type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc(limit=8)}
            if not isinstance(result, dict):
                result = {"result": result}
            if write:
                result = self.after_stateful(name, kwargs, call_id, result)
            self.after_call(name, kwargs, call_id, result)
            return result
        finally:
            self._lock.release(write)

    # ------------------------------------------------------------------ hooks
    def refuse_call(self, name: str, kwargs: dict, call_id: str, stateful: bool) -> dict | None:
        """Hook before a tool body runs (under the tool's lock): return an error result to refuse
        the call without running it (no other hook runs), or None to go on."""
        return None

    def before_call(self, name: str, kwargs: dict, call_id: str, stateful: bool) -> None:
        """Hook before a tool body runs (under the tool's lock)."""

    def after_stateful(self, name: str, kwargs: dict, call_id: str, result: dict) -> dict:
        """Hook after a stateful tool: capture a new step; returns the (augmented) result."""
        return result

    def after_call(self, name: str, kwargs: dict, call_id: str, result: dict) -> None:
        """Hook after every tool call (under the tool's lock)."""

    def describe(self) -> list[dict]:
        """Specs as dicts (for prompts, MCP servers and the code-policy facade)."""
        return [s.to_dict() for s in self.specs()]

    @staticmethod
    def signature_of(fn: Callable) -> inspect.Signature:
        """The Python signature of a tool method (for generated docs)."""
        return inspect.signature(fn)
