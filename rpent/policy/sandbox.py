"""What the cell worker process is allowed: its environment and its resource limits.

Environment (allow-list, nothing else from the parent crosses):

* copied when set in the parent: ``PATH``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``;
* set: ``HOME`` = the run's output directory (also the worker's cwd), ``PYTHONHASHSEED=0``
  (reproducible ``hash()``/set order across workers), ``PYTHONPATH`` = the directory
  holding the ``rpent`` package (so the worker imports the same code),
  ``PYTHONNOUSERSITE=1``, ``PYTHONDONTWRITEBYTECODE=1``, and ``OMP_NUM_THREADS`` /
  ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` = 1 (numpy math in a cell must not
  compete with the simulator for cores);
* plus names the caller asks for (``extra``), refused when they look like credentials.

So API keys, tokens, endpoints and other secrets of the planner process never reach
policy code. (The worker is not network-isolated: see the module notes in
:mod:`rpent.policy.runner`.)

Resource limits, set by the parent with ``prlimit(2)`` on the worker's pid right after
it starts and before any cell is sent; soft = hard, so policy code cannot raise them
(raising a hard limit needs ``CAP_SYS_RESOURCE``):

* ``RLIMIT_AS`` — address space (default 2 GiB): unbounded allocation ends in
  ``MemoryError`` (or the worker dying), never in the host swapping;
* ``RLIMIT_CPU`` — CPU seconds over the worker's lifetime (default 3600): a backstop for
  a parent that can no longer enforce the per-cell wall time; the per-cell limit is the
  parent's wall-clock timeout;
* ``RLIMIT_NOFILE`` — open files (default 256);
* ``RLIMIT_FSIZE`` — largest file the worker may write (default 1 GiB);
* ``RLIMIT_CORE`` — 0 (no core dumps in the run directory).

``RLIMIT_NPROC`` is deliberately not set: Linux counts it per *user* (every process of
the same uid, the planner's and the simulator's included), not per worker. Processes a
cell forks stay in the worker's process group and are killed with it.
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import rpent

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
    """

    memory_bytes: int = 2 * 1024**3
    cpu_s: int = 3600
    open_files: int = 256
    file_bytes: int = 1024**3

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_s", "open_files", "file_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"WorkerLimits.{name} must be a positive int, got {value!r}")
        if self.memory_bytes < 256 * 1024**2:
            raise ValueError("WorkerLimits.memory_bytes below 256 MiB cannot start Python with numpy; raise it")
        if self.open_files < 32:
            raise ValueError("WorkerLimits.open_files below 32 cannot start the worker; raise it")


def worker_env(output_dir: str | os.PathLike, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a worker process (see the module docstring).

    Args:
        output_dir: the run's output directory (becomes ``HOME``).
        extra: more variables to pass, e.g. ``{"MUJOCO_GL": "egl"}``.

    Raises:
        ValueError: an ``extra`` name looks like a credential (contains KEY, TOKEN,
            SECRET, PASSWORD, CREDENTIAL, AUTH, COOKIE or SESSION); policy code must
            never hold secrets.
    """
    env = {name: os.environ[name] for name in ENV_ALLOW if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(
        HOME=str(Path(output_dir).resolve()),
        PYTHONHASHSEED="0",
        PYTHONPATH=str(Path(rpent.__file__).resolve().parent.parent),
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    for name, value in (extra or {}).items():
        if _SECRET_NAME.search(name):
            raise ValueError(
                f"refusing to pass {name!r} to the code-policy worker: it looks like a credential, "
                "and policy code must not hold secrets; drop it from the extra environment"
            )
        env[name] = str(value)
    return env


def apply_limits(pid: int, limits: WorkerLimits) -> dict[str, tuple[int, int]]:
    """Set ``limits`` on process ``pid`` (soft = hard) with ``resource.prlimit``.

    A limit already lower in the process (inherited) is kept, never raised.

    Returns:
        ``{"RLIMIT_AS": (soft, hard), ...}`` as set.

    Raises:
        OSError / ProcessLookupError: the process is gone or not ours.
    """
    wanted = {
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_CPU": limits.cpu_s,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }
    applied = {}
    for name, value in wanted.items():
        res = getattr(resource, name)
        _, hard = resource.prlimit(pid, res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.prlimit(pid, res, (value, value))
        applied[name] = (value, value)
    return applied
