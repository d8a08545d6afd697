"""JSON Lines encoding and tolerant reading for the trajectory record.

Writing: one JSON object per line, UTF-8, ending in ``\\n``, written with a single
``write`` + ``flush`` so a killed process leaves complete lines plus at most one truncated
final line. Reading: every line is checked; a final line without ``\\n`` counts as truncated
even when it happens to parse, because the writer always ends a complete line with ``\\n``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def to_jsonable(value: Any) -> Any:
    """Return ``value`` converted to plain JSON types.

    numpy arrays -> nested lists, numpy scalars -> int/float/bool, tuples -> lists,
    ``bytes`` -> ``{"_bytes": len}`` (payloads such as PNGs are not inlined in JSONL lines),
    non-finite floats -> ``None`` with the original kept as a string under ``{"_nonfinite": "nan"}``,
    anything else unknown -> ``repr`` string. float32 values become the exact double of the
    float32, so converting back with ``np.float32`` is lossless.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else {"_nonfinite": repr(f)}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()] if value.ndim else to_jsonable(value.item())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"_bytes": len(value)}
    return repr(value)


def dumps_line(record: dict) -> str:
    """Serialise one record as a JSON line (with the trailing ``\\n``).

    Raises:
        TypeError: ``record`` is not a dict.
    """
    if not isinstance(record, dict):
        raise TypeError(f"a JSONL record must be a dict, got {type(record).__name__}")
    return json.dumps(to_jsonable(record), ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


@dataclass
class LineProblem:
    """A line of a JSONL file that could not be used.

    Attributes:
        line: 1-based line number.
        reason: ``"truncated"`` (final line without newline), ``"invalid_json"`` or ``"not_object"``.
        detail: human-readable explanation.
    """

    line: int
    reason: str
    detail: str


@dataclass
class JsonlContent:
    """Result of :func:`read_jsonl`: the parsed objects in file order and every bad line."""

    records: list[dict] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    exists: bool = True


def read_jsonl(path: Path) -> JsonlContent:
    """Read a JSON Lines file, keeping good lines and reporting bad ones (never raises on content).

    A missing file gives ``JsonlContent(exists=False)`` with no records. Blank lines are skipped.

    Raises:
        OSError: the file exists but cannot be read.
    """
    path = Path(path)
    if not path.exists():
        return JsonlContent(exists=False)
    raw = path.read_bytes()
    out = JsonlContent()
    lines = raw.split(b"\n")
    # split() leaves a final "" when the file ends with "\n"; anything else is a truncated line
    for i, line in enumerate(lines):
        is_last = i == len(lines) - 1
        if not line.strip():
            continue
        if is_last:
            out.problems.append(
                LineProblem(i + 1, "truncated", f"{path.name} line {i + 1} has no line end (write was cut off)")
            )
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            out.problems.append(LineProblem(i + 1, "invalid_json", f"{path.name} line {i + 1}: {e}"))
            continue
        if not isinstance(obj, dict):
            out.problems.append(
                LineProblem(i + 1, "not_object", f"{path.name} line {i + 1} is a {type(obj).__name__}, not an object")
            )
            continue
        out.records.append(obj)
    return out
