"""Provenance manifest of a results root (``manifest.json``): what code, packages, checkpoints,
planners, flags and machine produced the records, and when. Each invocation (the first run and
every resume) is appended to ``invocations``; the file is rewritten atomically. The provenance
helpers are :mod:`rpent.recording.provenance`'s (every run records its own too).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from rpent.recording.atomic import write_bytes_atomic
from rpent.recording.provenance import PACKAGES, git_info, hash_checkpoint, machine_info, package_versions

__all__ = ["Manifest", "git_info", "package_versions", "hash_checkpoint", "machine_info", "PACKAGES"]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Manifest:
    """``manifest.json`` of a results root.

    Args:
        path: ``<root>/manifest.json`` (loaded when it exists; a broken file is kept aside as
            ``manifest.json.broken-<t>`` and a new one started, never silently overwritten).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.doc: dict[str, Any] = {"schema_version": 1, "invocations": []}
        if self.path.exists():
            try:
                self.doc = json.loads(self.path.read_text(encoding="utf-8"))
                self.doc.setdefault("invocations", [])
            except ValueError:
                self.path.rename(self.path.with_name(f"{self.path.name}.broken-{int(time.time())}"))

    def begin(self, *, argv: list[str], matrix: dict[str, Any], executor: str, parallel: int, max_retries: int,
              checkpoints: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Record the start of an invocation (code, packages, machine, matrix, checkpoint hashes)
        and write the file; returns the invocation entry (update it and call :meth:`end`)."""
        inv = {"argv": list(argv), "cwd": os.getcwd(), "started": _now(), "ended": None, "pid": os.getpid(),
               "executor": executor, "parallel": parallel, "max_retries": max_retries,
               "rpent": git_info(), "packages": package_versions(), "machine": machine_info(),
               "checkpoints": checkpoints, "exit_code": None, "attempts_started": 0}
        self.doc["matrix"] = matrix
        self.doc.setdefault("created", inv["started"])
        self.doc["invocations"].append(inv)
        self.write()
        return inv

    def end(self, inv: dict[str, Any], exit_code: int) -> None:
        """Record the end of ``inv`` and write the file."""
        inv["ended"], inv["exit_code"] = _now(), exit_code
        self.write()

    def write(self) -> None:
        """Rewrite the file atomically."""
        write_bytes_atomic(self.path, (json.dumps(self.doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
