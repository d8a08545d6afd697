"""Tool definitions as offered to a model, built from ``toolkit.specs()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolDef", "tool_defs"]


@dataclass(frozen=True)
class ToolDef:
    """A tool as offered to the model: ``name``, ``description``, JSON ``input_schema``."""

    name: str
    description: str
    input_schema: dict[str, Any]


def tool_defs(specs: list[Any]) -> list[ToolDef]:
    """ToolDefs from ``toolkit.specs()`` (objects or dicts with name/description/input_schema).

    Raises:
        ValueError: a spec lacks a name, or two specs share one.
    """
    out: list[ToolDef] = []
    seen: set[str] = set()
    for s in specs:
        get = s.get if isinstance(s, dict) else (lambda k, d=None, _s=s: getattr(_s, k, d))
        name = get("name")
        if not name:
            raise ValueError(f"tool spec without a name: {s!r}")
        if name in seen:
            raise ValueError(f"duplicate tool name {name!r} in toolkit.specs()")
        seen.add(name)
        schema = get("input_schema") or {"type": "object", "properties": {}}
        out.append(ToolDef(name=name, description=get("description") or "", input_schema=dict(schema)))
    return out
