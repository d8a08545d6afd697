"""One-line summaries of tool results for the Run screen's transcript (the raw JSON is one key away).

Every tool gets a line: its error first, then the fields an operator reads, numbers rounded to what
matters: positions (world frame, metres in the result) in whole millimetres, distances and
openings (``*_m``, ``gripper_opening``) in millimetres with 3 significant digits, other floats
(angles in rad, scores) with 3 significant digits, booleans as yes/no. Known tools list their
fields in a fixed order (``TOOL_FIELDS``, field names from the LIBERO toolkit's docstrings:
``rpent.robots.libero.toolkit``); any other tool shows its scalar fields in result order, bulky
values (images, states, point clouds) as counts. No Textual imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["summarize_tool_result", "fmt_number", "fmt_position", "TOOL_FIELDS"]

#: Fields shown per tool, in order (absent fields are skipped); then ``terminated``/``truncated`` when true.
TOOL_FIELDS: dict[str, tuple[str, ...]] = {
    "move_to": ("reached", "final_dist_m", "final_eef_pos", "steps_used"),
    "move_pose": ("reached", "final_dist_m", "final_eef_pos", "final_pitch", "steps_used"),
    "rotate_wrist": ("final_yaw", "final_err", "steps_used"),
    "rotate_pitch": ("final_pitch", "final_err", "steps_used"),
    "set_gripper": ("gripper", "gripper_opening", "steps"),
    "release": ("final_gripper_opening", "peak_gripper_opening", "steps_used"),
    "back_project": ("world_xyz", "center_xyz", "n_valid", "pixel", "camera", "step"),
    "segment": ("found", "world_xyz", "center_xyz", "score", "area_px", "camera", "step"),
    "view_env_state": ("step", "eef_pos", "gripper_opening", "success", "terminated"),
    "view_camera_meta": ("camera", "step"),
    "finish": ("status", "accepted", "summary"),
}

#: Fields never shown in a summary (large, or images).
BULKY = frozenset({"images", "image", "state", "state_after", "state_before", "points", "messages", "frames",
                   "camera_meta", "segmentation", "mask", "note", "source_artifact", "eef_quat", "gripper_qpos"})

#: Short names for long field names in the line.
SHORT = {"final_dist_m": "dist", "final_eef_pos": "eef", "steps_used": "steps", "gripper_opening": "opening",
         "final_gripper_opening": "opening", "peak_gripper_opening": "peak", "world_xyz": "xyz",
         "center_xyz": "centre", "n_valid": "valid px", "final_yaw": "yaw", "final_pitch": "pitch",
         "final_err": "err", "eef_pos": "eef"}

_POSITION_KEYS = ("xyz", "pos", "position", "center", "centre", "handle", "origin")
_MAX_PARTS = 7
_MAX_TEXT = 80


def fmt_number(value: float) -> str:
    """``value`` with 3 significant digits (``0.22440000000000002`` -> ``0.224``, ``1234.5`` -> ``1.23e+03``
    only past 5 digits: integers-valued floats keep their digits)."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e5:
        return str(int(value))
    text = f"{value:.3g}"
    return text


def fmt_position(value: Sequence[Any]) -> str:
    """A world position in metres as whole millimetres: ``[0.2244, -0.0512, 0.9]`` -> ``(224, -51, 900) mm``."""
    return "(" + ", ".join(f"{float(v) * 1000:.0f}" for v in value) + ") mm"


def _is_position(key: str, value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 3
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            and any(key == k or key.endswith("_" + k) or key.startswith(k + "_") for k in _POSITION_KEYS))


def _fmt(key: str, value: Any, tool: str) -> str | None:
    """``name value`` for one field, or None when it says nothing on one line."""
    name = SHORT.get(key, key)
    if isinstance(value, bool):
        return f"{name} {'yes' if value else 'no'}"
    if key == "gripper" and tool == "set_gripper" and isinstance(value, (int, float)):
        return "close" if value > 0 else "open"
    if isinstance(value, (int, float)):
        if isinstance(value, int) and key in ("steps_used", "steps"):
            return f"{value} steps"
        if key.endswith("_m") or key.endswith("gripper_opening"):
            return f"{name} {fmt_number(float(value) * 1000)} mm"
        return f"{name} {fmt_number(float(value))}"
    if value is None:
        return None
    if _is_position(key, value):
        return f"{name} {fmt_position(value)}"
    if isinstance(value, str):
        text = value.replace("\n", " ").strip()
        return f"{name} {text[:_MAX_TEXT] + ('…' if len(text) > _MAX_TEXT else '')}" if text else None
    if isinstance(value, Sequence):
        if len(value) <= 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return f"{name} (" + ", ".join(fmt_number(float(v)) for v in value) + ")"
        return f"{name} {len(value)} item(s)"
    if isinstance(value, Mapping):
        return f"{name} {len(value)} key(s)"
    return None


def _fixtures(result: Mapping[str, Any]) -> str | None:
    fixtures = result.get("fixtures")
    if not isinstance(fixtures, Mapping):
        return None
    if not fixtures:
        return "no articulated fixtures"
    names = [f"{name} ({len(parts) if isinstance(parts, Sequence) else '?'} part(s))" for name, parts in fixtures.items()]
    shown = ", ".join(names[:4]) + (f", … {len(names) - 4} more" if len(names) > 4 else "")
    return f"{len(names)} fixture(s): {shown}"


def summarize_tool_result(result: Any, tool: str | None = None) -> str | None:
    """The one-line summary of ``tool``'s ``result`` (a dict), or None when it is not a dict (the pane
    then shows its compact JSON). Never raises on odd values."""
    if not isinstance(result, Mapping):
        return None
    tool = tool or ""
    parts: list[str] = []
    if result.get("error") is not None:
        text = str(result["error"]).replace("\n", " ")
        parts.append(f"error {text[:400]}")
        if result.get("code") is not None:
            parts.append(f"code {result['code']}")
        return " · ".join(parts)
    if tool == "view_fixtures":
        line = _fixtures(result)
        if line is not None:
            return line
    keys = list(TOOL_FIELDS.get(tool, ()))
    if not keys:
        keys = [k for k in result if k not in BULKY and k != "code"]
    for key in keys:
        if key in result and len(parts) < _MAX_PARTS:
            part = _fmt(key, result[key], tool)
            if part is not None:
                parts.append(part)
    for flag in ("terminated", "truncated", "interrupted"):
        if result.get(flag) is True and flag not in keys:
            parts.append(flag)
    if not parts:
        return f"{len(result)} field(s)" if result else "ok"
    return " · ".join(parts)
