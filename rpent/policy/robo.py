"""The ``robo`` facade that policy code uses inside a cell (worker side).

``robo.<tool>(...)`` exists for every toolkit tool (built from the ``tk.specs()`` the
parent sends when the worker starts): same argument names, same defaults (see
:mod:`rpent.policy.signatures`), and the same result fields, wrapped in a read-only
:class:`ToolResult` so fields read as attributes::

    r = robo.move_to([0.05, 0.10, 1.05])          # xyz in m, world frame
    if r.final_dist_m > 0.02: ...                  # a measured shortfall is a value, not an error
    r.to_dict()                                    # the plain result dict (images included)

Errors (convention of PyRUA-Lean, ``rpent_reference.md`` §4.1):

* missing/unknown arguments -> ``TypeError`` (Python's own binding, before anything moves);
* the toolkit answered ``{"error": ...}`` (bad argument values, a refused finish, a
  backend failure) -> :class:`~rpent.policy.errors.ToolError` carrying the error dict;
* measured failures (``final_dist_m > tol``, ``success=False``, ``found=False``) are
  returned, never raised: check them;
* call number ``max_calls + 1`` of a cell -> :class:`~rpent.policy.errors.CallBudgetExhausted`;
* an accepted ``robo.finish(status, summary)`` -> :class:`~rpent.policy.errors.EpisodeFinished`
  (a ``BaseException``: the cell stops, statements after it do not run);
* the cell's wall-time limit -> :class:`~rpent.policy.errors.CellTimeout` (``BaseException``).

Operator tools (``request_scene_reset``, ``request_operator_verdict``) are not callable
here: they raise :class:`~rpent.policy.errors.OperatorToolUnavailable`, because waiting
for a person can outlast a cell; the planner calls them as tools outside Python.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from rpent.policy import errors
from rpent.policy.signatures import param_specs, python_signature, render_signature

#: Names of operator tools that never run inside a cell.
OPERATOR_TOOLS = frozenset({"request_scene_reset", "request_operator_verdict"})

#: Gripper command values of the LIBERO action convention (rpent_reference.md §3.2):
#: -1 opens, +1 closes.
OPEN = -1.0
CLOSE = 1.0

#: ``transport(tool, args) -> reply`` where reply is ``{"result": dict}`` or
#: ``{"refused": {"kind": str, "message": str, ...}}`` (see rpent.policy.frames).
Transport = Callable[[str, dict], dict]


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return ToolResult(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class ToolResult:
    """Read-only attribute view of one tool result dict (nested dicts are views too).

    ``r.final_dist_m`` and ``r["final_dist_m"]`` read a field; ``"field" in r``,
    ``r.keys()``, ``r.get(name, default)`` work as on a dict; ``r.to_dict()`` returns a
    deep plain copy. Fields that start with ``_`` (``_images``: list of
    ``{"label": str, "png": bytes}``) are reachable by item access. Assigning raises
    ``AttributeError``. Lists stay lists; numbers stay Python numbers (wrap them with
    ``np.asarray`` for math).
    """

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]):
        object.__setattr__(self, "_data", dict(data))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        data = object.__getattribute__(self, "_data")
        if name in data:
            return _wrap(data[name])
        fields = ", ".join(k for k in data if not k.startswith("_"))
        raise AttributeError(f"result has no field {name!r}; fields: {fields}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("tool results are read-only; use r.to_dict() for a mutable copy")

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ToolResult):
            return self._data == other._data
        return NotImplemented

    def keys(self):
        """Field names (like ``dict.keys``)."""
        return self._data.keys()

    def get(self, key: str, default: Any = None) -> Any:
        """Field value or ``default`` (like ``dict.get``)."""
        return _wrap(self._data[key]) if key in self._data else default

    def to_dict(self) -> dict[str, Any]:
        """A deep plain copy of the result dict."""
        return _unwrap(self._data)

    def __repr__(self) -> str:
        shown = []
        for k, v in self._data.items():
            if k == "_images" and isinstance(v, list):
                shown.append(f"_images=<{len(v)} images>")
            else:
                text = repr(v)
                shown.append(f"{k}={text if len(text) <= 200 else text[:200] + '...'}")
        return f"ToolResult({', '.join(shown)})"


def _unwrap(value: Any) -> Any:
    if isinstance(value, ToolResult):
        value = value._data
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _raise_refusal(tool: str, refused: dict[str, Any]) -> None:
    kind = refused.get("kind")
    message = str(refused.get("message", f"{tool} refused"))
    if kind == "budget":
        raise errors.CallBudgetExhausted(message)
    if kind == "timeout":
        raise errors.CellTimeout(message)
    if kind == "interrupt":
        raise errors.CellInterrupted(message)
    if kind == "finished":
        raise errors.EpisodeFinished(str(refused.get("status", "")), str(refused.get("summary", "")))
    if kind == "operator":
        raise errors.OperatorToolUnavailable(message)
    raise errors.ToolError(tool, {"error": message, "code": kind})


class Robo:
    """The robot as policy code sees it: one method per toolkit tool.

    Built by the worker from the tool specs (dicts with ``name``, ``description``,
    ``input_schema``, ``readonly``) and a ``transport`` that carries one call to the
    parent. Besides the tool methods it offers ``robo.call(name, args)`` (any tool by
    name), ``robo.tools`` (sorted tool names), ``robo.describe(name)`` (signature and
    description), ``robo.OPEN`` / ``robo.CLOSE`` (gripper -1 / +1) and the exception
    classes (``robo.ToolError``, ``robo.EpisodeFinished``, ``robo.CallBudgetExhausted``,
    ``robo.CellTimeout``, ``robo.OperatorToolUnavailable``).
    """

    OPEN = OPEN
    CLOSE = CLOSE
    ToolError = errors.ToolError
    EpisodeFinished = errors.EpisodeFinished
    CallBudgetExhausted = errors.CallBudgetExhausted
    CellTimeout = errors.CellTimeout
    CellInterrupted = errors.CellInterrupted
    OperatorToolUnavailable = errors.OperatorToolUnavailable

    def __init__(self, specs: Iterable[dict[str, Any]], transport: Transport,
                 operator_tools: Iterable[str] = OPERATOR_TOOLS):
        self._transport = transport
        self._specs: dict[str, dict[str, Any]] = {}
        self._operator = set(operator_tools)
        for spec in specs:
            name = spec["name"]
            self._specs[name] = spec
            if name in self._operator:
                method = self._make_operator_stub(name)
            else:
                method = self._make_method(spec)
            if name.isidentifier() and not hasattr(type(self), name):
                setattr(self, name, method)

    # -- public helpers -------------------------------------------------------------
    @property
    def tools(self) -> list[str]:
        """Sorted names of the tools callable from Python (operator tools excluded)."""
        return sorted(n for n in self._specs if n not in self._operator)

    def describe(self, name: str) -> str:
        """Signature and description of one tool.

        Raises:
            AttributeError: unknown tool (the message lists the known ones).
        """
        spec = self._spec(name)
        return f"{render_signature(name, spec.get('input_schema'))}\n{spec.get('description', '')}"

    def call(self, name: str, args: dict[str, Any] | None = None, **kwargs: Any) -> ToolResult:
        """Call any tool by name with an argument dict (and/or keywords), bypassing the
        generated signature (the toolkit still validates). Same results and errors as
        the ``robo.<name>`` method."""
        self._spec(name)
        if name in self._operator:
            self._make_operator_stub(name)()
        merged = dict(args or {})
        merged.update(kwargs)
        return self._invoke(name, merged)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        known = ", ".join(self.tools)
        raise AttributeError(f"robo has no tool {name!r}; available tools: {known}")

    def __repr__(self) -> str:
        return f"<robo: {len(self.tools)} tools: {', '.join(self.tools)}>"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._specs))

    # -- internals ------------------------------------------------------------------
    def _spec(self, name: str) -> dict[str, Any]:
        if name not in self._specs:
            raise AttributeError(f"robo has no tool {name!r}; available tools: {', '.join(self.tools)}")
        return self._specs[name]

    def _invoke(self, name: str, args: dict[str, Any]) -> ToolResult:
        reply = self._transport(name, args)
        refused = reply.get("refused")
        if refused:
            _raise_refusal(name, refused)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise errors.ToolError(name, {"error": f"malformed reply from the runner: {reply!r:.200}"})
        if result.get("_finish"):
            raise errors.EpisodeFinished(str(result.get("status", "")), str(result.get("summary", "")))
        if "error" in result:
            raise errors.ToolError(name, result)
        return ToolResult(result)

    def _make_operator_stub(self, name: str) -> Callable[..., Any]:
        def operator_tool(*args: Any, **kwargs: Any) -> Any:
            raise errors.OperatorToolUnavailable(
                f"{name} is an operator tool and cannot be called from Python (waiting for a "
                f"person can outlast a cell); end this cell and call the {name} tool directly"
            )

        operator_tool.__name__ = name
        operator_tool.__doc__ = f"Not available in Python: call the {name} tool outside the python tool."
        return operator_tool

    def _make_method(self, spec: dict[str, Any]) -> Callable[..., ToolResult]:
        name = spec["name"]
        schema = spec.get("input_schema") or {}
        signature = python_signature(schema)
        no_default = {p.name for p in param_specs(schema) if not p.required and not p.has_default}

        def method(*args: Any, **kwargs: Any) -> ToolResult:
            if signature is None:
                if args:
                    raise TypeError(f"robo.{name} takes keyword arguments only; or use robo.call({name!r}, {{...}})")
                call_args = dict(kwargs)
            else:
                try:
                    bound = signature.bind(*args, **kwargs)
                except TypeError as exc:
                    raise TypeError(f"robo.{name}: {exc}; signature: {render_signature(name, schema)}") from None
                call_args = {k: v for k, v in bound.arguments.items()
                             if not (v is None and k in no_default)}
            return self._invoke(name, call_args)

        method.__name__ = name
        method.__qualname__ = f"robo.{name}"
        if signature is not None:
            method.__signature__ = signature  # type: ignore[attr-defined]
        lines = [render_signature(name, schema), "", str(spec.get("description", "")).strip()]
        for p in param_specs(schema):
            if p.description:
                lines.append(f"  {p.name}: {p.description}")
        method.__doc__ = "\n".join(lines)
        return method
