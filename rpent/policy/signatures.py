"""Python signatures for robot tools, derived from their JSON-schema ``input_schema``.

Used on both sides: the worker builds ``robo.<tool>(...)`` methods with these signatures
(so ``help(robo.move_to)`` and argument errors read like Python), and the code-mode prompt
lists the same signatures to the planner. Standard library only (the worker imports it).

Rules (documented in the prompt too):

* parameter names are the schema's property names, required ones first (in the order of
  ``required``), then the optional ones in property order;
* an optional property with a schema ``default`` gets that default;
* an optional property without one defaults to ``None``, which means "not sent": the
  toolkit then applies its own default (e.g. ``move_to(target_yaw=None)`` holds the yaw);
* property names that are not Python identifiers (or are keywords) cannot be parameters;
  such tools are still reachable as ``robo.call("tool", {...})``.
"""

from __future__ import annotations

import inspect
import keyword
from dataclasses import dataclass
from typing import Any

_JSON_TO_PY = {
    "number": "float",
    "integer": "int",
    "string": "str",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


@dataclass(frozen=True)
class ParamSpec:
    """One tool parameter.

    Attributes:
        name: property name (also the keyword the toolkit receives).
        required: listed in the schema's ``required``.
        default: schema default, or ``None`` ("not sent") when the schema has none.
        has_default: the schema declared a default.
        type_hint: a short Python-style type, e.g. ``"float"``, ``"list[float]"``,
            ``"'agentview'|'wrist'"``.
        description: the property's description ("" when none).
    """

    name: str
    required: bool
    default: Any
    has_default: bool
    type_hint: str
    description: str


def _type_hint(prop: dict[str, Any]) -> str:
    if "enum" in prop and isinstance(prop["enum"], list):
        return "|".join(repr(v) for v in prop["enum"])
    typ = prop.get("type")
    if isinstance(typ, list):
        return "|".join(_JSON_TO_PY.get(t, str(t)) for t in typ)
    if "anyOf" in prop and isinstance(prop["anyOf"], list):
        return "|".join(_type_hint(p) for p in prop["anyOf"] if isinstance(p, dict))
    py = _JSON_TO_PY.get(typ, "Any") if isinstance(typ, str) else "Any"
    if typ == "array" and isinstance(prop.get("items"), dict):
        inner = _type_hint(prop["items"])
        n_min, n_max = prop.get("minItems"), prop.get("maxItems")
        size = f"; {n_min} items" if n_min is not None and n_min == n_max else ""
        return f"list[{inner}{size}]"
    return py


def param_specs(input_schema: dict[str, Any] | None) -> list[ParamSpec]:
    """Parameters of a tool from its JSON-schema ``input_schema`` (``{"type": "object",
    "properties": {...}, "required": [...]}``).

    Raises:
        ValueError: the schema is not an object schema (names the offending part).
    """
    schema = input_schema or {}
    if not isinstance(schema, dict):
        raise ValueError(f"input_schema must be a dict (JSON schema), got {type(schema).__name__}")
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        raise ValueError("input_schema['properties'] must be a dict of property schemas")
    required = [r for r in (schema.get("required") or []) if r in props]
    order = required + [name for name in props if name not in required]
    out = []
    for name in order:
        prop = props[name] if isinstance(props[name], dict) else {}
        has_default = "default" in prop
        out.append(
            ParamSpec(
                name=name,
                required=name in required,
                default=prop.get("default"),
                has_default=has_default,
                type_hint=_type_hint(prop),
                description=str(prop.get("description", "")),
            )
        )
    return out


def python_signature(input_schema: dict[str, Any] | None) -> inspect.Signature | None:
    """An :class:`inspect.Signature` for the tool, or ``None`` when a property name is
    not a usable Python parameter name (then only ``robo.call`` reaches the tool)."""
    params = []
    for p in param_specs(input_schema):
        if not p.name.isidentifier() or keyword.iskeyword(p.name):
            return None
        default = inspect.Parameter.empty if p.required else p.default
        params.append(
            inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    return inspect.Signature(params)


def render_signature(name: str, input_schema: dict[str, Any] | None, prefix: str = "robo.") -> str:
    """Human-readable signature, e.g.
    ``robo.move_to(xyz: list[float; 3 items], gripper: float = -1, target_yaw: float = None)``."""
    parts = []
    for p in param_specs(input_schema):
        text = f"{p.name}: {p.type_hint}"
        if not p.required:
            text += f" = {p.default!r}"
        parts.append(text)
    return f"{prefix}{name}({', '.join(parts)})"
