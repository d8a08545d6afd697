"""Tool declarations: JSON schemas and argument validation from annotated Python signatures.

A tool is a plain function (or bound method) whose parameters carry type annotations and
defaults, optionally ``Annotated[T, Field(description=...)]`` (pydantic). :func:`tool`
marks it; :func:`build_spec` turns it into a :class:`ToolSpec` with an Anthropic-style
``input_schema`` (JSON Schema draft 2020-12 object, as the Messages API ``tools[].input_schema``
expects) and a pydantic model that validates and coerces the arguments a planner sends.

Validation errors never escape as exceptions to the planner: :meth:`BoundTool.validate`
raises :class:`ToolArgumentError` with a message that names every bad field and the fix,
which the toolkit turns into a readable ``{"error": "bad arguments for X: ...", "got": {...}}``
result (upstream RPent contract, reference §3.1).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import pydantic

__all__ = ["ToolSpec", "ToolArgumentError", "BoundTool", "tool", "build_spec"]


@dataclass(frozen=True)
class ToolSpec:
    """What a planner sees of one tool.

    Attributes:
        name: tool name (``[a-z_][a-z0-9_]*``), e.g. ``"move_to"``.
        description: what the tool does, its units and frames, and its result fields.
        input_schema: JSON Schema of the arguments (``{"type": "object", "properties": ..., "required": ...}``).
        readonly: True when the tool never advances the environment (may run concurrently
            with other read-only tools); False for motion tools (serialised, and followed by a
            state capture).
    """

    name: str
    description: str
    input_schema: dict
    readonly: bool

    def to_dict(self) -> dict:
        """The spec as a JSON-able dict ``{name, description, input_schema, readonly}``."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema, "readonly": self.readonly}


class ToolArgumentError(ValueError):
    """Arguments a planner sent do not match a tool's schema; the message lists each problem."""


_TOOL_ATTR = "__rpent_tool__"


def tool(name: str | None = None, *, readonly: bool = False, description: str | None = None):
    """Mark a function or method as a planner tool.

    Args:
        name: tool name; defaults to the function name.
        readonly: the tool never advances the environment.
        description: text shown to the planner; defaults to the function docstring.
    """

    def mark(fn: Callable) -> Callable:
        setattr(fn, _TOOL_ATTR, {"name": name or fn.__name__, "readonly": readonly,
                                 "description": description})
        return fn

    return mark


@dataclass
class BoundTool:
    """A tool ready to run: its spec, its callable and its argument model."""

    spec: ToolSpec
    fn: Callable[..., dict]
    model: type[pydantic.BaseModel] = field(repr=False)

    def validate(self, args: dict | None) -> dict:
        """Validate and coerce ``args``; return keyword arguments for :attr:`fn`.

        Raises:
            ToolArgumentError: wrong type, missing required field, unknown field, or a
                constraint (e.g. ``xyz`` not three numbers) violated.
        """
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ToolArgumentError(
                f"arguments must be a JSON object of named parameters, got {type(args).__name__}")
        try:
            parsed = self.model.model_validate(args)
        except pydantic.ValidationError as exc:
            problems = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
                problems.append(f"{loc}: {err.get('msg')}")
            allowed = ", ".join(self.spec.input_schema.get("properties", {})) or "(none)"
            raise ToolArgumentError(
                "; ".join(problems) + f". Accepted parameters: {allowed}.") from None
        out = {}
        for key in self.model.model_fields:
            if key in parsed.model_fields_set:
                out[key] = getattr(parsed, key)
        return out


def _clean_schema(schema: dict) -> dict:
    """Drop pydantic's ``title`` noise; keep properties, required, descriptions and $defs."""
    schema = dict(schema)
    schema.pop("title", None)
    props = {}
    for key, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        props[key] = prop
    schema["properties"] = props
    schema.setdefault("required", [])
    schema["type"] = "object"
    schema["additionalProperties"] = False
    return schema


def build_spec(fn: Callable) -> BoundTool:
    """Build a :class:`BoundTool` from a function marked with :func:`tool`.

    Parameters without a default are required. ``Annotated[..., Field(...)]`` metadata
    (description, ge/le, min_length/max_length) goes into the schema and is enforced.

    Raises:
        TypeError: ``fn`` is not marked with :func:`tool` or has an unannotated parameter.
    """
    meta = getattr(fn, _TOOL_ATTR, None)
    if meta is None:
        raise TypeError(f"{fn!r} is not marked with @tool")
    sig = inspect.signature(fn)
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(fn, eval_str=True)
    for pname, param in sig.parameters.items():
        if pname == "self":
            continue
        if pname not in hints:
            raise TypeError(f"tool {meta['name']}: parameter {pname!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], default)
    model = pydantic.create_model(
        f"{meta['name']}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    schema = _clean_schema(model.model_json_schema())
    description = meta["description"] or inspect.cleandoc(fn.__doc__ or meta["name"])
    spec = ToolSpec(name=meta["name"], description=description, input_schema=schema,
                    readonly=meta["readonly"])
    return BoundTool(spec=spec, fn=fn, model=model)
