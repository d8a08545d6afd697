"""Landlock for the cell worker: what files it may read or write, no TCP, no signals out.

Landlock (Linux >= 5.13, ``landlock(7)``; kernel ``Documentation/userspace-api/landlock.rst``)
lets an unprivileged process restrict itself and all its future children; it needs no
root, no namespaces, only ``PR_SET_NO_NEW_PRIVS``. Used here as a layer that holds even
where user/mount namespaces are unavailable:

* files: read + execute only beneath the given read paths (the interpreter, its
  libraries, the project's code, system directories), read + write beneath the scratch
  directory, read + write of device files under ``/dev``; everything else (home
  directories, ``/tmp``, other runs, key files) is neither readable nor writable;
* network (ABI >= 4): no TCP bind or connect at all;
* scopes (ABI >= 6): no signals to processes outside the cell, no abstract unix sockets
  outside it.

Called through ``ctypes`` (three syscalls; the constants are those of
``include/uapi/linux/landlock.h``, x86-64 syscall numbers 444-446, the same on arm64).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Iterable

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version(libc: Any) -> int:
    """Landlock ABI of the running kernel; 0 when Landlock is missing or disabled."""
    v = libc.syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    return max(0, int(v))


def restrict_self(libc: Any, read_paths: Iterable[str], write_paths: Iterable[str]) -> dict[str, Any]:
    """Restrict the calling process (and its future children) as the module docstring says.

    ``PR_SET_NO_NEW_PRIVS`` must already be set. Never raises.

    Returns:
        ``{"abi": int, "filesystem": bool, "network": bool, "signals": bool, "note": str|None}``.
    """
    info: dict[str, Any] = {"abi": 0, "filesystem": False, "network": False, "signals": False, "note": None}
    abi = abi_version(libc)
    info["abi"] = abi
    if abi < 1:
        info["note"] = f"Landlock unavailable: {os.strerror(ctypes.get_errno()) or 'not in this kernel'}"
        return info
    write_rights = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
                    | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    read_rights = EXECUTE | READ_FILE | READ_DIR
    handled = read_rights | write_rights
    if abi >= 2:
        handled |= REFER
    if abi >= 3:
        handled |= TRUNCATE
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if fd < 0:
        info["note"] = f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
        return info
    try:
        rules = [(p, read_rights) for p in read_paths]
        rules += [(p, handled) for p in write_paths]
        rules.append(("/dev", read_rights | WRITE_FILE | (TRUNCATE if abi >= 3 else 0)))
        for path, rights in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY
                rule = _PathBeneath(rights & handled, pfd)
                libc.syscall(SYS_ADD_RULE, fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(pfd)
        if libc.syscall(SYS_RESTRICT_SELF, fd, 0) != 0:
            info["note"] = f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
            return info
    finally:
        os.close(fd)
    info["filesystem"] = True
    info["network"] = abi >= 4
    info["signals"] = abi >= 6
    return info
