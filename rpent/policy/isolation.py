"""Kernel-level isolation of the cell worker: the layers, applied by the worker to itself
before it accepts any cell.

The worker process started by the parent (the *stub*) builds the sandbox in this order;
each layer is best effort, and what was achieved is reported to the parent (``ready``
frame), recorded in every cell result under ``sandbox`` and logged in ``run.log`` when a
layer is off (docs/guides/sandbox.md has the table of layers, their limits and what each needs):

1. **cgroup** (``cgroup``): the stub writes its pid to the ``cgroup.procs`` files of the
   pids + memory group the parent created (:mod:`rpent.policy.cgroup`), so every process
   of the cell is counted and bounded together (process count, total memory) and can be
   killed together. Needs root or a delegated cgroup.
2. **resource limits** (``rlimits``): ``setrlimit`` soft = hard for RLIMIT_AS, CPU,
   NOFILE, FSIZE, CORE=0, inherited by every process of the cell (see
   :mod:`rpent.policy.sandbox`); without ``CAP_SYS_RESOURCE`` no process can raise them.
3. **namespaces** (``namespaces``): ``unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID
   | CLONE_NEWNET | CLONE_NEWIPC)`` with the own uid/gid mapped to themselves
   (``unshare(2)``, ``user_namespaces(7)``, ``pid_namespaces(7)``,
   ``mount_namespaces(7)``): no network at all; SysV IPC of its own.
4. **read-only filesystem** (``readonly_fs``): in the new mount namespace, propagation is
   made private, a tmpfs is mounted on the scratch directory, and every other mount
   is remounted read-only (``MS_BIND | MS_REMOUNT | MS_RDONLY``). The mounts are locked
   (they belong to a less privileged user namespace), so no process of the cell can make
   them writable again.
4b. **scratch quota** (``scratch_quota``): that tmpfs has ``size=`` the cell's scratch quota
   (and an inode limit), so a write past it fails with ``ENOSPC``; its pages count in the
   cell's memory cgroup; its files last as long as the worker and never reach the disk.
   The mount belongs to the cell's user namespace, so no process of the cell can remount it
   larger. Without a mount namespace the parent measures the directory instead
   (:mod:`rpent.policy.runner`).
5. **PID namespace** (``pid_namespace``): the stub forks; the child is PID 1 (*init*) of
   the new PID namespace. Init mounts a fresh ``/proc`` (only the cell's processes are
   visible), forks the worker proper (PID 2) and only reaps children and forwards the
   parent's ``SIGUSR1`` / ``SIGINT``. When init ends (the worker exited, or the parent
   killed the stub's process group), the kernel SIGKILLs every process of the
   namespace: nothing a cell started (``setsid``, double fork) survives it, and no
   process outside the namespace can be named in ``kill`` or ``prlimit``. The stub
   watches the parent and kills init when the parent is gone.
6. **process count in the namespace** (``process_limit``): RLIMIT_NPROC set inside the
   user namespace. Since Linux 5.14 that limit is counted per user namespace, so only the
   cell's processes count. Linux never applies it to uid 0 (``kernel/fork.c``), so for a
   root-run parent the cgroup (layer 1) is what bounds the count.
7. **capabilities** (``capabilities_dropped``): bounding set, ambient set and the
   effective/permitted sets emptied; ``PR_SET_NO_NEW_PRIVS`` (``capabilities(7)``,
   ``prctl(2)``).
8. **Landlock** (``landlock``, :mod:`rpent.policy.landlock`): reads only beneath the
   interpreter, its libraries, the ``rpent`` package and a short list of system paths
   (never the directory rpent was started from: see
   :func:`rpent.policy.worker_process.read_paths`);
   writes only beneath the scratch directory; no TCP; no signals to processes outside
   the cell. Works without namespaces or root.
9. **system-call filter** (``syscall_filter``, :mod:`rpent.policy.seccomp`): seccomp-bpf refuses
   ``socket()``, ``socketpair()`` other than ``SOCK_STREAM`` and ``io_uring_setup()``, so no
   process of the cell can reach a Unix socket on the host (a tmux or D-Bus server: neither the
   network namespace nor Landlock stops ``connect()`` to a socket file) or the host of a virtual
   machine over vsock. Needs ``PR_SET_NO_NEW_PRIVS`` (layer 7); works without namespaces or root.

Linux-only; on other systems every layer reports off and nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import resource
import signal
import sys
import time
from typing import Any, Callable

from rpent.policy import landlock, seccomp

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

#: System paths a cell may read (besides the interpreter, its packages and the rpent package). The
#: host's accounts (``/etc/passwd``, ``/etc/group``) are not among them: the worker's HOME is its
#: scratch directory, so nothing a cell imports needs to look a user up.
SYSTEM_READ_PATHS = (
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys/devices/system/cpu",
    "/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf",
    "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/mime.types",
)

#: Order of the layers in reports (see the module docstring).
LAYERS = ("cgroup", "cpu_quota", "rlimits", "namespaces", "readonly_fs", "scratch_quota", "pid_namespace",
          "process_limit", "capabilities_dropped", "landlock", "syscall_filter")

#: Inodes of the scratch tmpfs per MiB of its size (a cell cannot pin memory in empty files).
SCRATCH_INODES_PER_MIB = 64


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _errno_text() -> str:
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


class Report:
    """What each layer achieved: ``{layer: {"on": bool, "detail": str}}`` plus ``notes``."""

    def __init__(self) -> None:
        self.layers: dict[str, dict[str, Any]] = {}

    def set(self, layer: str, on: bool, detail: str = "") -> None:
        self.layers[layer] = {"on": bool(on), "detail": detail}

    def as_dict(self) -> dict[str, Any]:
        """The report as sent to the parent: the layers, plus the legacy flags
        ``user_namespace``, ``network_namespace``, ``capabilities_dropped`` and ``notes``
        (one line per layer that is off)."""
        ns = self.layers.get("namespaces", {}).get("on", False)
        return {
            "layers": {k: self.layers[k] for k in LAYERS if k in self.layers},
            "user_namespace": ns,
            "network_namespace": ns,
            "capabilities_dropped": self.layers.get("capabilities_dropped", {}).get("on", False),
            "notes": [f"{k}: off: {v['detail']}" for k, v in self.layers.items() if not v["on"]],
        }


def _write_own_pid(procs_file: str) -> None:
    """Move this process into a cgroup (write its pid to the group's ``cgroup.procs``)."""
    with open(procs_file, "w") as f:
        f.write(str(os.getpid()))


def _join_cgroup(report: Report, procs_files: list[str]) -> None:
    if not procs_files:
        report.set("cgroup", False, "the parent could not create a pids+memory cgroup (see its reason in run.log)")
        return
    joined, failed = [], []
    for path in procs_files:
        try:
            _write_own_pid(path)
            joined.append(os.path.dirname(path))
        except OSError as exc:
            failed.append(f"cannot join {path}: {exc.strerror or exc}")
    if failed:
        report.set("cgroup", False, "; ".join(failed) + (f" (joined {', '.join(joined)})" if joined else ""))
    else:
        report.set("cgroup", True, ", ".join(joined))


def _join_cpu_cgroup(report: Report, procs_file: str | None) -> None:
    """Join the separate v1 cpu group (its CFS quota); reported as layer ``cpu_quota``. The parent
    counts the quota as on only when this succeeded."""
    if not procs_file:
        return
    try:
        _write_own_pid(procs_file)
        report.set("cpu_quota", True, os.path.dirname(procs_file))
    except OSError as exc:
        report.set("cpu_quota", False, f"cannot join {procs_file}: {exc.strerror or exc}")


def _set_rlimits(report: Report, limits: dict[str, int]) -> None:
    applied = {}
    try:
        for name, value in limits.items():
            res = getattr(resource, name)
            _, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, value))
            applied[name] = value
        report.set("rlimits", True, ", ".join(f"{k}={v}" for k, v in applied.items()))
    except (OSError, ValueError, AttributeError) as exc:
        report.set("rlimits", False, f"setrlimit failed: {exc}")
    report.applied_limits = applied  # type: ignore[attr-defined]


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _mount_scratch(libc: Any, report: Report, scratch: str, scratch_bytes: int | None) -> bool:
    """A tmpfs of ``scratch_bytes`` on the scratch directory (layer 4b); a bind mount of the
    directory onto itself when no size is given or tmpfs fails. False when neither worked."""
    b = os.fsencode(scratch)
    if scratch_bytes:
        inodes = max(1024, SCRATCH_INODES_PER_MIB * scratch_bytes // 1024**2)
        opts = f"size={int(scratch_bytes)},nr_inodes={inodes},mode=0700".encode()
        if libc.mount(b"tmpfs", b, b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0:
            report.set("scratch_quota", True,
                       f"tmpfs of {int(scratch_bytes)} bytes ({scratch_bytes / 1024**2:g} MiB, {inodes} inodes) "
                       "on the scratch directory; its files last as long as the worker")
            return True
        report.set("scratch_quota", False, f"mounting a tmpfs on the scratch directory failed: {_errno_text()}; "
                                           "the parent measures the directory instead")
    else:
        report.set("scratch_quota", False, "no scratch quota requested")
    return libc.mount(b, b, None, MS_BIND, None) == 0


def _make_readonly(libc: Any, report: Report, scratch: str | None, scratch_bytes: int | None) -> tuple[bool, str]:
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        report.set("scratch_quota", False, "no private mount namespace: the parent measures the directory instead")
        return False, f"making mounts private failed: {_errno_text()}"
    if scratch:
        if not _mount_scratch(libc, report, scratch, scratch_bytes):
            return False, f"bind-mounting the scratch directory {scratch} failed: {_errno_text()}"
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    failed = []
    count = 0
    for line in lines:
        fields = line.split(" - ")[0].split()
        point, opts = _unescape(fields[4]), set(fields[5].split(","))
        if scratch and point == scratch:
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC),
                          ("noatime", MS_NOATIME), ("nodiratime", MS_NODIRATIME), ("relatime", MS_RELATIME)):
            if name in opts:
                flags |= bit
        if libc.mount(None, os.fsencode(point), None, flags, None) != 0:
            failed.append(f"{point} ({os.strerror(ctypes.get_errno())})")
        else:
            count += 1
    if failed:
        return False, f"{count} mounts read-only, but not: {', '.join(failed[:8])}"
    return True, f"{count} mounts read-only; writable: {scratch or 'nothing'}"


def _enter_namespaces(libc: Any, report: Report, scratch: str | None, scratch_bytes: int | None) -> bool:
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
    if libc.unshare(flags) != 0:
        why = f"unshare(CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC) failed: {_errno_text()} (unprivileged user namespaces disabled?)"
        for layer in ("namespaces", "readonly_fs", "pid_namespace"):
            report.set(layer, False, why)
        report.set("scratch_quota", False, f"no mount namespace ({why}): the parent measures the scratch directory "
                                           "while a cell runs and ends it when over the quota")
        return False
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    except OSError as exc:
        report.set("namespaces", False, f"namespaces entered but the uid/gid map was not written: {exc}")
    else:
        report.set("namespaces", True, "user, mount, pid, network (no interfaces but a down loopback), ipc")
    try:
        ok, detail = _make_readonly(libc, report, scratch, scratch_bytes)
    except OSError as exc:
        ok, detail = False, f"{exc}"
    report.set("readonly_fs", ok, detail)
    if "scratch_quota" not in report.layers:
        report.set("scratch_quota", False, f"the mount namespace was not set up ({detail}); the parent measures "
                                           "the scratch directory instead")
    return True


def _drop_capabilities(libc: Any) -> tuple[bool, str]:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read().strip())
    except (OSError, ValueError):
        last_cap = 40
    for cap in range(last_cap + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop then
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, f"PR_SET_NO_NEW_PRIVS failed: {_errno_text()}"
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return False, f"capset to empty failed: {_errno_text()}"
    return True, "no capabilities, no_new_privs"


def _forward(target: Callable[[], int | None]) -> Callable[[int, Any], None]:
    def handler(signum: int, _frame: Any) -> None:
        pid = target()
        if pid:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
    return handler


def _exit_status(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1


def _run_stub(child: int, close_fds: tuple[int, ...]) -> None:
    """The stub after the fork: forward signals to init, watch the parent, exit with
    init's status. Never returns."""
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    parent = os.getppid()
    for sig in (signal.SIGUSR1, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _forward(lambda: child))
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            code = _exit_status(status)
            if code > 128:  # init passes on "the worker was killed by signal N" as 128 + N: die the same way
                try:
                    if code - 128 not in (signal.SIGKILL, signal.SIGSTOP):
                        signal.signal(code - 128, signal.SIG_DFL)
                    os.kill(os.getpid(), code - 128)
                    time.sleep(1)
                except (OSError, ValueError):
                    pass
            os._exit(code)
        if os.getppid() != parent:  # the parent died: take the whole cell with it
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os._exit(3)
        time.sleep(0.2)


def _run_init(libc: Any, worker: int, close_fds: tuple[int, ...]) -> None:
    """PID 1 of the cell's namespace: reap every child, forward the parent's signals to the
    worker, exit with the worker's status (the kernel then kills what is left). Never returns."""
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    for sig in (signal.SIGUSR1, signal.SIGINT):
        signal.signal(sig, _forward(lambda: worker))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == worker:
            os._exit(_exit_status(status))


def isolate_self(*, namespaces: bool = True, scratch: str | None = None, scratch_bytes: int | None = None,
                 cgroup_procs: list[str] | None = None, cgroup_cpu_procs: str | None = None,
                 limits: dict[str, int] | None = None, max_processes: int = 64,
                 read_paths: list[str] | None = None, keep_fds: tuple[int, ...] = ()) -> dict[str, Any]:
    """Apply the layers of the module docstring; returns in the worker proper (PID 2 of the
    new PID namespace, or the same process when there is none). Must run before any other
    thread starts. Never raises.

    Args:
        namespaces: try layers 3-5 (False: skip them; the rest still applies).
        scratch: the one writable directory (absolute path), also the worker's cwd.
        scratch_bytes: size of the tmpfs mounted there (layer 4b; None: a bind mount, no quota).
        cgroup_procs: ``cgroup.procs`` files to join (layer 1).
        cgroup_cpu_procs: the separate v1 cpu group's ``cgroup.procs`` (layer ``cpu_quota``), or None.
        limits: ``{"RLIMIT_AS": bytes, ...}`` to set soft = hard (layer 2).
        max_processes: processes + threads of the cell, worker included (layer 6).
        read_paths: paths readable besides :data:`SYSTEM_READ_PATHS` (layer 8).
        keep_fds: the pipes to the parent: closed in the stub and init after their fork.

    Returns:
        ``{"layers": {name: {"on", "detail"}}, "user_namespace", "network_namespace",
        "capabilities_dropped", "notes": [one line per layer that is off],
        "limits": {RLIMIT_*: value}}``.
    """
    report = Report()
    report.applied_limits = {}  # type: ignore[attr-defined]
    if not sys.platform.startswith("linux"):
        for layer in LAYERS:
            report.set(layer, False, f"unsupported on {sys.platform}")
        return {**report.as_dict(), "limits": {}}
    try:
        libc = _libc()
    except OSError as exc:
        for layer in LAYERS:
            report.set(layer, False, f"libc not loadable: {exc}")
        return {**report.as_dict(), "limits": {}}

    _join_cgroup(report, list(cgroup_procs or []))
    _join_cpu_cgroup(report, cgroup_cpu_procs)
    _set_rlimits(report, dict(limits or {}))
    in_ns = False
    if namespaces:
        in_ns = _enter_namespaces(libc, report, scratch, scratch_bytes)
    else:
        for layer in ("namespaces", "readonly_fs", "pid_namespace"):
            report.set(layer, False, "namespaces not requested (namespaces=False)")
        report.set("scratch_quota", False, "no mount namespace (namespaces=False): the parent measures the scratch "
                                           "directory while a cell runs and ends it when over the quota")

    if in_ns:
        try:
            init = os.fork()
        except OSError as exc:
            report.set("pid_namespace", False, f"fork into the PID namespace failed: {exc}")
            init = -1
        if init > 0:
            _run_stub(init, keep_fds)
        if init == 0:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
                proc_note = f"; /proc not remounted ({_errno_text()}): the host's processes stay listed"
            else:
                proc_note = ""
            worker = os.fork()
            if worker > 0:
                _run_init(libc, worker, keep_fds)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            report.set("pid_namespace", True, f"the worker is PID {os.getpid()} under its own init{proc_note}")
    if scratch:
        try:
            os.chdir(scratch)
        except OSError:
            pass

    if not in_ns and os.getuid() != 0:
        report.set("process_limit", False,
                   "no user namespace of its own: RLIMIT_NPROC would count every process of this user")
    elif os.getuid() == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
        except (OSError, ValueError):
            pass
        report.set("process_limit", False, "RLIMIT_NPROC is never enforced for uid 0 (Linux); the cgroup bounds the count")
    else:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
            report.set("process_limit", True, f"RLIMIT_NPROC={max_processes} in the cell's user namespace")
        except (OSError, ValueError) as exc:
            report.set("process_limit", False, f"setrlimit(RLIMIT_NPROC) failed: {exc}")
    if in_ns:
        try:  # no nested user namespaces: a cell cannot regain capabilities anywhere
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
        except OSError:
            pass

    try:
        ok, detail = _drop_capabilities(libc)
    except Exception as exc:  # best effort by design
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    report.set("capabilities_dropped", ok, detail)

    reads = [p for p in (*SYSTEM_READ_PATHS, *(read_paths or [])) if p]
    try:
        ll = landlock.restrict_self(libc, reads, [scratch] if scratch else [])
    except Exception as exc:
        ll = {"filesystem": False, "note": f"{type(exc).__name__}: {exc}"}
    if ll.get("filesystem"):
        parts = ["files: read beneath the interpreter, its packages, the rpent package and system paths; "
                 "write beneath the scratch dir"]
        parts.append("no TCP" if ll.get("network") else "TCP not restricted (Landlock ABI < 4)")
        parts.append("no signals out of the cell" if ll.get("signals") else "signals not scoped (Landlock ABI < 6)")
        report.set("landlock", True, f"ABI {ll.get('abi')}: " + "; ".join(parts))
    else:
        report.set("landlock", False, str(ll.get("note")))
    try:
        filtered, detail = seccomp.restrict_sockets(libc)
    except Exception as exc:  # best effort by design
        filtered, detail = False, f"{type(exc).__name__}: {exc}"
    report.set("syscall_filter", filtered, detail)
    return {**report.as_dict(), "limits": dict(report.applied_limits)}  # type: ignore[attr-defined]
