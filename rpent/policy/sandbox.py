"""What the cell worker process is allowed: its environment and its resource limits.

Environment (allow-list, nothing else from the parent crosses):

* copied when set in the parent: ``PATH``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``;
* set: ``HOME`` = ``TMPDIR`` = the cell's scratch directory (also the worker's cwd; the
  only directory it can write), ``PYTHONHASHSEED=0``
  (reproducible ``hash()``/set order across workers),
  ``PYTHONNOUSERSITE=1``, ``PYTHONDONTWRITEBYTECODE=1``, and ``OMP_NUM_THREADS`` /
  ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` = 1 (numpy math in a cell must not
  compete with the simulator for cores);
* plus names the caller asks for (``extra``), refused when they look like credentials or
  change how Python finds code (``PYTHON*``).

No ``PYTHONPATH``: the worker imports the parent's own ``rpent`` package by its location
(:data:`rpent.policy.worker_process.BOOTSTRAP`), so it may read that package directory but
not the directory above it.

So API keys, tokens, endpoints and other secrets of the planner process never reach
policy code. (The worker is not network-isolated: see the module notes in
:mod:`rpent.policy.runner`.)

Resource limits, set by the worker on itself (``setrlimit``, soft = hard) as the first
act of its first process, before it forks anything, so every process of the cell inherits
them and none can raise them (raising a hard limit needs ``CAP_SYS_RESOURCE``, which the
worker drops):

* ``RLIMIT_AS`` — address space per process (default 2 GiB): unbounded allocation ends
  in ``MemoryError`` (or the worker dying), never in the host swapping;
* ``RLIMIT_CPU`` — CPU seconds over the worker's lifetime (default 3600): a backstop for
  a parent that can no longer enforce the per-cell wall time; the per-cell limit is the
  parent's wall-clock timeout;
* ``RLIMIT_NOFILE`` — open files (default 256);
* ``RLIMIT_FSIZE`` — largest file the worker may write (default 1 GiB);
* ``RLIMIT_CORE`` — 0 (no core dumps in the run directory).

For the whole process tree of a cell (what a fork multiplies), :class:`WorkerLimits` also
holds ``max_processes`` (processes + threads, default 64), ``total_memory_bytes``
(default 2 GiB) and ``cpu_cores`` (CPU time per wall second, default 1.0), enforced by a
pids + memory + cpu cgroup where the machine allows one (:mod:`rpent.policy.cgroup`) and by
RLIMIT_NPROC inside the cell's own user namespace (:mod:`rpent.policy.isolation`, layers 1
and 6), and ``scratch_bytes`` (default 256 MiB): the scratch directory is a tmpfs of that
size in the worker's mount namespace, or, without one, watched by the parent
(:mod:`rpent.policy.runner`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

#: Variables copied from the parent environment when present.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)

#: Fallback PATH when the parent has none.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class WorkerLimits:
    """Resource limits of one worker process (see the module docstring).

    Attributes:
        memory_bytes: RLIMIT_AS, bytes of address space (default 2 GiB).
        cpu_s: RLIMIT_CPU, CPU seconds over the worker's lifetime (default 3600).
        open_files: RLIMIT_NOFILE (default 256).
        file_bytes: RLIMIT_FSIZE, bytes (default 1 GiB).
        max_processes: processes + threads of the whole cell, the worker's own included
            (default 64; cgroup ``pids.max`` and RLIMIT_NPROC in the cell's user namespace).
        total_memory_bytes: memory of the whole cell, bytes (default 2 GiB; cgroup memory limit).
        cpu_cores: CPU time of the whole cell per second of wall time (default 1.0 = one core;
            cgroup ``cpu.max`` / ``cpu.cfs_quota_us``).
        scratch_bytes: total bytes of the scratch directory (default 256 MiB; a tmpfs of that
            size, counted in the cell's memory too, or the parent's watch without namespaces).
    """

    memory_bytes: int = 2 * 1024**3
    cpu_s: int = 3600
    open_files: int = 256
    file_bytes: int = 1024**3
    max_processes: int = 64
    total_memory_bytes: int = 2 * 1024**3
    cpu_cores: float = 1.0
    scratch_bytes: int = 256 * 1024**2

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_s", "open_files", "file_bytes", "max_processes", "total_memory_bytes",
                     "scratch_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"WorkerLimits.{name} must be a positive int, got {value!r}")
        if self.memory_bytes < 256 * 1024**2:
            raise ValueError("WorkerLimits.memory_bytes below 256 MiB cannot start Python with numpy; raise it")
        if self.max_processes < 8:
            raise ValueError("WorkerLimits.max_processes below 8 cannot start the worker (its threads count); raise it")
        if self.total_memory_bytes < 256 * 1024**2:
            raise ValueError("WorkerLimits.total_memory_bytes below 256 MiB cannot start Python with numpy; raise it")
        if self.open_files < 32:
            raise ValueError("WorkerLimits.open_files below 32 cannot start the worker; raise it")
        if not isinstance(self.cpu_cores, (int, float)) or isinstance(self.cpu_cores, bool) or not self.cpu_cores >= 0.01:
            raise ValueError(f"WorkerLimits.cpu_cores must be a number >= 0.01 (cores), got {self.cpu_cores!r}")
        if self.scratch_bytes < 1024**2:
            raise ValueError("WorkerLimits.scratch_bytes below 1 MiB leaves the cell no room to write; raise it")


def worker_env(output_dir: str | os.PathLike, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a worker process (see the module docstring).

    Args:
        output_dir: the worker's writable directory (becomes ``HOME`` and ``TMPDIR``; the
            runner passes ``<run>/code_policy/scratch``).
        extra: more variables to pass, e.g. ``{"MUJOCO_GL": "egl"}``.

    Raises:
        ValueError: an ``extra`` name looks like a credential (contains KEY, TOKEN,
            SECRET, PASSWORD, CREDENTIAL, AUTH, COOKIE or SESSION); policy code must
            never hold secrets.
    """
    env = {name: os.environ[name] for name in ENV_ALLOW if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    home = str(Path(output_dir).resolve())
    env.update(
        HOME=home,
        TMPDIR=home,
        PYTHONHASHSEED="0",
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    for name, value in (extra or {}).items():
        if name.upper().startswith("PYTHON"):
            raise ValueError(f"refusing to pass {name!r} to the code-policy worker: it changes which code the "
                             "worker runs; the worker imports this process's own rpent package")
        if _SECRET_NAME.search(name):
            raise ValueError(
                f"refusing to pass {name!r} to the code-policy worker: it looks like a credential, "
                "and policy code must not hold secrets; drop it from the extra environment"
            )
        env[name] = str(value)
    return env


def rlimits(limits: WorkerLimits) -> dict[str, int]:
    """The per-process limits the worker sets on itself: ``{"RLIMIT_AS": bytes, "RLIMIT_CPU":
    s, "RLIMIT_NOFILE": n, "RLIMIT_FSIZE": bytes, "RLIMIT_CORE": 0}`` (see the module docstring)."""
    return {
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_CPU": limits.cpu_s,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }
