"""A pids + memory (+ cpu) control group for one cell worker: the whole process tree of a cell
is counted and bounded together, and can be killed together.

Linux control groups (``cgroups(7)``; v1 ``Documentation/admin-guide/cgroup-v1/pids.rst``
and ``memory.rst``, v2 ``cgroup-v2.rst``). The group is created as a *child of the cgroup
this process is in* (read from ``/proc/self/cgroup``), so it only narrows the limits the
machine already gives us:

* v1 (a ``pids`` and a ``memory`` hierarchy mounted):
  ``pids.max``; ``memory.limit_in_bytes`` and, where swap accounting exists,
  ``memory.memsw.limit_in_bytes`` (same value: no escape into swap); where a ``cpu``
  hierarchy is mounted too, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (CFS bandwidth,
  ``Documentation/scheduler/sched-bwc.rst``);
* v2 (the unified hierarchy with ``pids`` and ``memory`` in ``cgroup.controllers``):
  ``pids.max``, ``memory.max``, ``memory.swap.max = 0``, and ``cpu.max`` where the ``cpu``
  controller is available; killing uses ``cgroup.kill``.

The CPU limit is ``cpu_cores`` x :data:`CPU_PERIOD_US` microseconds of CPU per period of
:data:`CPU_PERIOD_US`: a cell (a fork bomb included) never gets more than ``cpu_cores``
cores, however many processes it runs. Where no ``cpu`` controller is there,
``CellCgroup.cpu_cores`` is None and ``cpu_note`` says why.

Creating a group needs write access to our own cgroup directory: root, or a delegated
subtree (systemd ``Delegate=yes``). Where that is missing, :func:`create_cell_cgroup`
returns None with the reason, and the run records that the protection is off.

The worker joins the group itself, as the first act of its first process, before it
forks anything (``join`` paths passed on its command line), so no process of the cell is
ever outside it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: CFS bandwidth period, microseconds (the kernel's default period, 100 ms).
CPU_PERIOD_US = 100_000


def _own_cgroups() -> dict[str, str]:
    """``{controller or "" (v2): path}`` from ``/proc/self/cgroup``."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``[(mount point, fstype, super options)]`` of every cgroup/cgroup2 mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        pre, _, post = line.partition(" - ")
        fields, rest = pre.split(), post.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((fields[4], rest[0], set(rest[2].split(","))))
    return found


@dataclass
class CellCgroup:
    """One created group (see the module docstring).

    Attributes:
        version: 1 or 2.
        dirs: the group's directory per controller (v1: two directories; v2: one).
        pids_max: processes + threads allowed in the group.
        memory_bytes: bytes of memory (RSS + page cache, + swap where accounted) of the group.
        cpu_cores: CPU time per wall second the group may use (None: no cpu controller).
        cpu_note: what the CPU limit is, or why there is none.
    """

    version: int
    dirs: list[Path]
    pids_max: int
    memory_bytes: int
    notes: list[str] = field(default_factory=list)
    cpu_cores: float | None = None
    cpu_note: str = ""
    cpu_dir: Path | None = None

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid to, to join the pids + memory group
        (v2: the one group, its CPU limit included)."""
        return [str(d / "cgroup.procs") for d in self.dirs if d != self.cpu_dir]

    @property
    def cpu_procs_file(self) -> str | None:
        """v1: the ``cgroup.procs`` file of the separate cpu group with the quota (joined on its own:
        a kernel may refuse it while the pids + memory groups take the process); None otherwise."""
        if self.cpu_dir is None or self.cpu_cores is None:
            return None
        return str(self.cpu_dir / "cgroup.procs")

    def pids(self) -> set[int]:
        """Pids now in the group (empty when it is gone)."""
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return out

    def memory_peak(self) -> int | None:
        """Largest memory use of the group so far, bytes (None when unknown)."""
        for d in self.dirs:
            for name in ("memory.max_usage_in_bytes", "memory.peak"):
                try:
                    return int((d / name).read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
        return None

    def kill(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL every process of the group and wait until it is empty. True when empty."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.version == 2:
                try:
                    (self.dirs[0] / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if not self.pids():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left, then remove the group's directories (best effort)."""
        self.kill()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _quota_us(cpu_cores: float) -> int:
    return max(1000, int(round(cpu_cores * CPU_PERIOD_US)))


def _cpu_v1(point: Path, name: str, cpu_cores: float, created: list[Path]) -> tuple[float | None, str]:
    """The v1 cpu group ``point/name`` with a CFS quota; ``(cores, note)`` (cores None: not set)."""
    d = point / name
    try:
        d.mkdir()
        created.append(d)
        _write(d / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(d / "cpu.cfs_quota_us", str(_quota_us(cpu_cores)))
    except OSError as exc:
        return None, f"cannot set a CPU quota in {d}: {exc.strerror or exc}"
    return cpu_cores, f"cpu.cfs_quota_us={_quota_us(cpu_cores)} per cpu.cfs_period_us={CPU_PERIOD_US} ({cpu_cores:g} cores)"


def create_cell_cgroup(pids_max: int, memory_bytes: int,
                       cpu_cores: float | None = None) -> tuple[CellCgroup | None, str | None]:
    """Create a pids + memory (+ cpu) group under our own cgroup (see the module docstring).

    Args:
        pids_max: processes + threads of the whole group (the worker's own included).
        memory_bytes: total bytes of memory of the group.
        cpu_cores: CPU time per wall second for the group (None: no CPU limit).

    Returns:
        ``(group, None)``, or ``(None, reason)`` when this machine or user cannot have one
        (the reason says what is missing). Never raises.
    """
    own = _own_cgroups()
    mounts = _mounts()
    name = f"rpent-cell-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    v1 = {}
    for point, fstype, opts in mounts:
        for ctrl in ("pids", "memory"):
            if fstype == "cgroup" and ctrl in opts and ctrl in own and ctrl not in v1:
                v1[ctrl] = Path(point) / own[ctrl].lstrip("/") / name
    cpu_v1 = next((Path(point) / own["cpu"].lstrip("/") for point, fstype, opts in mounts
                   if fstype == "cgroup" and "cpu" in opts and "cpu" in own), None)
    created: list[Path] = []
    try:
        if len(v1) == 2:
            for ctrl in ("pids", "memory"):
                v1[ctrl].mkdir()
                created.append(v1[ctrl])
            _write(v1["pids"] / "pids.max", str(pids_max))
            _write(v1["memory"] / "memory.limit_in_bytes", str(memory_bytes))
            notes = []
            memsw = v1["memory"] / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                _write(memsw, str(memory_bytes))
            else:
                notes.append("no swap accounting (memory.memsw): swap is not counted")
            cores, cpu_note = None, "no CPU limit requested"
            if cpu_cores is not None:
                if cpu_v1 is None:
                    cpu_note = "no cgroup v1 cpu hierarchy this process is in: no CPU limit"
                else:
                    cores, cpu_note = _cpu_v1(cpu_v1, name, cpu_cores, created)
            cpu_dir = cpu_v1 / name if cpu_v1 is not None and cpu_v1 / name in created else None
            return CellCgroup(1, created, pids_max, memory_bytes, notes, cores, cpu_note, cpu_dir), None
        unified = next((Path(p) for p, t, _ in mounts if t == "cgroup2"), None)
        if unified is None or "" not in own:
            return None, "no cgroup v1 pids+memory hierarchies and no cgroup v2 mount"
        parent = unified / own[""].lstrip("/")
        available = set((unified / "cgroup.controllers").read_text().split()) if (unified / "cgroup.controllers").exists() else set()
        if not {"pids", "memory"} <= available:
            return None, (f"the cgroup v2 hierarchy at {unified} has no pids+memory controllers "
                          "(they are bound to v1 hierarchies this process is not in)")
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not {"pids", "memory"} <= enabled:
            _write(parent / "cgroup.subtree_control", "+pids +memory")
        cores, cpu_note = None, "no CPU limit requested"
        if cpu_cores is not None:
            if "cpu" not in available:
                cpu_note = f"the cgroup v2 hierarchy at {unified} has no cpu controller: no CPU limit"
            elif "cpu" not in enabled:
                try:
                    _write(parent / "cgroup.subtree_control", "+cpu")
                except OSError as exc:
                    cpu_note = f"cannot enable the cpu controller in {parent}: {exc.strerror or exc}"
        d = parent / name
        d.mkdir()
        created.append(d)
        _write(d / "pids.max", str(pids_max))
        _write(d / "memory.max", str(memory_bytes))
        notes = []
        try:
            _write(d / "memory.swap.max", "0")
        except OSError:
            notes.append("memory.swap.max not settable: swap is not counted")
        if cpu_cores is not None and (d / "cpu.max").exists():
            try:
                _write(d / "cpu.max", f"{_quota_us(cpu_cores)} {CPU_PERIOD_US}")
                cores, cpu_note = cpu_cores, f"cpu.max={_quota_us(cpu_cores)} {CPU_PERIOD_US} ({cpu_cores:g} cores)"
            except OSError as exc:
                cpu_note = f"cannot write {d / 'cpu.max'}: {exc.strerror or exc}"
        return CellCgroup(2, created, pids_max, memory_bytes, notes, cores, cpu_note), None
    except OSError as exc:
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass
        return None, f"cannot create a cgroup under {own.get('pids') or own.get('') or '?'}: {exc.strerror or exc} (needs root or a delegated cgroup)"
