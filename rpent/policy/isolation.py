"""Kernel-level isolation the cell worker applies to itself before it accepts any cell.

Called first thing in :func:`rpent.policy.worker.main`, while the process is still
single-threaded (``unshare(CLONE_NEWUSER)`` requires that). Each step is best effort;
what was achieved is reported to the parent (``ready`` frame) and recorded in every
:class:`~rpent.policy.runner.CellResult` under ``sandbox``.

1. A new **user namespace** (own uid/gid mapped to themselves) plus a new **network
   namespace** (``unshare(CLONE_NEWUSER | CLONE_NEWNET)``, Linux ``unshare(2)``,
   ``user_namespaces(7)``). Effects: the worker has no network at all (no loopback route
   to the env/VLA servers, so it cannot bypass the parent's call budget); and because
   ptrace-mode access checks across user namespaces need ``CAP_SYS_PTRACE`` in the
   target's namespace, it cannot read ``/proc/<pid>/environ`` of the planner process or
   of any other process of the same user (where API keys live). Unavailable when
   unprivileged user namespaces are disabled (some distributions, Docker's default
   seccomp profile).
2. **Drop all capabilities** (bounding set, ambient set, then ``capset`` to empty) and set
   ``PR_SET_NO_NEW_PRIVS`` (``prctl(2)``, ``capabilities(7)``). Effects: even a worker
   started by root cannot raise its hard resource limits (that needs
   ``CAP_SYS_RESOURCE``), and cannot regain privileges through setuid programs. For a
   root parent this also blocks reading its ``/proc/<pid>/environ`` (the target's
   capabilities are not a subset of the worker's).

Linux-only; on other systems every step reports "unsupported" and nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


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


def _enter_namespaces(libc: Any) -> tuple[bool, bool, str | None]:
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return False, False, f"unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: {_errno_text()}"
    note = None
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    except OSError as exc:
        note = f"namespaces entered but uid/gid map not written: {exc}"
    return True, True, note


def _drop_capabilities(libc: Any) -> tuple[bool, str | None]:
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
    return True, None


def isolate_self(namespaces: bool = True) -> dict[str, Any]:
    """Apply the isolation steps of the module docstring to the calling process.

    Must run before any other thread starts. Never raises.

    Args:
        namespaces: try step 1 (user + network namespaces); step 2 always runs.

    Returns:
        ``{"user_namespace": bool, "network_namespace": bool, "capabilities_dropped":
        bool, "notes": [str, ...]}`` (notes explain any step that did not happen).
    """
    info: dict[str, Any] = {"user_namespace": False, "network_namespace": False,
                            "capabilities_dropped": False, "notes": []}
    if not sys.platform.startswith("linux"):
        info["notes"].append(f"kernel isolation unsupported on {sys.platform}")
        return info
    try:
        libc = _libc()
    except OSError as exc:
        info["notes"].append(f"libc not loadable: {exc}")
        return info
    if not namespaces:
        info["notes"].append("namespaces not requested (namespaces=False)")
    else:
        try:
            info["user_namespace"], info["network_namespace"], note = _enter_namespaces(libc)
            if note:
                info["notes"].append(note)
        except Exception as exc:  # best effort by design
            info["notes"].append(f"namespaces: {type(exc).__name__}: {exc}")
    try:
        info["capabilities_dropped"], note = _drop_capabilities(libc)
        if note:
            info["notes"].append(note)
    except Exception as exc:
        info["notes"].append(f"capabilities: {type(exc).__name__}: {exc}")
    return info
