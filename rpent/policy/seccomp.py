"""The cell worker's system-call filter (seccomp-bpf): no sockets to anything outside the cell.

The network namespace leaves a cell no network interface, and Landlock refuses TCP; neither stops
``connect()`` to a Unix socket file on the host (a tmux server in ``/tmp``, a D-Bus or Docker
socket in ``/run``), to a datagram socket such as ``/dev/log``, or to the host over ``AF_VSOCK``
in a virtual machine, and a service on the other end may run commands for whoever connects. So
the worker installs, after ``PR_SET_NO_NEW_PRIVS``, a filter inherited by every process of the
cell that makes these calls fail with ``EPERM``:

* ``socket(2)``, every address family: a cell has nothing to talk to;
* ``socketpair(2)`` except ``SOCK_STREAM`` (asyncio's self-pipe and ``multiprocessing`` use a
  connected stream pair, which cannot be pointed anywhere else; a datagram pair could be
  re-``connect``-ed to a host socket);
* ``io_uring_setup(2)``: io_uring can open and connect sockets without those system calls.

A system call of another ABI than the interpreter's (32-bit ``int 0x80`` on x86-64, AArch32 on
AArch64) kills the process: it would name the calls by other numbers. x32 calls (bit 30 of the
number) get ``EPERM``. Sources: ``seccomp(2)``, ``include/uapi/linux/seccomp.h``,
``include/uapi/linux/audit.h`` (``AUDIT_ARCH_*``) and the kernel's syscall tables
(``arch/x86/entry/syscalls/syscall_64.tbl``, ``include/uapi/asm-generic/unistd.h``).
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Any

__all__ = ["restrict_sockets", "FILTERED"]

#: What the filter refuses, for reports.
FILTERED = "socket(), socketpair() other than SOCK_STREAM, io_uring_setup()"

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
SOCK_STREAM = 1
X32_SYSCALL_BIT = 0x40000000

# machine -> (AUDIT_ARCH_*, socket, socketpair, io_uring_setup)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 53, 425),
    "aarch64": (0xC00000B7, 198, 199, 425),
}

# classic BPF opcodes (include/uapi/linux/bpf_common.h)
_LD_W_ABS = 0x20   # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15      # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35      # BPF_JMP | BPF_JGE | BPF_K
_AND_K = 0x54      # BPF_ALU | BPF_AND | BPF_K
_RET_K = 0x06      # BPF_RET | BPF_K

# offsets in struct seccomp_data {int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];}
_NR, _ARCH, _ARG1_LOW = 0, 4, 24  # args[1]: its low 32 bits (little-endian)


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``platform.machine()``) as ``(code, jt, jf, k)`` instructions.

    Raises:
        KeyError: a machine without a table here.
    """
    arch, nr_socket, nr_socketpair, nr_io_uring_setup = _ARCHES[machine]
    errno = SECCOMP_RET_ERRNO | EPERM
    return [
        (_LD_W_ABS, 0, 0, _ARCH),                  # 0
        (_JEQ_K, 0, 10, arch),                     # 1: another ABI -> 12 (kill)
        (_LD_W_ABS, 0, 0, _NR),                    # 2
        (_JGE_K, 7, 0, X32_SYSCALL_BIT),           # 3: x32 -> 11 (EPERM)
        (_JEQ_K, 6, 0, nr_socket),                 # 4: -> 11
        (_JEQ_K, 5, 0, nr_io_uring_setup),         # 5: -> 11
        (_JEQ_K, 0, 3, nr_socketpair),             # 6: not socketpair -> 10 (allow)
        (_LD_W_ABS, 0, 0, _ARG1_LOW),              # 7: its type
        (_AND_K, 0, 0, 0xF),                       # 8: without SOCK_NONBLOCK / SOCK_CLOEXEC
        (_JEQ_K, 0, 1, SOCK_STREAM),               # 9: stream -> 10, else -> 11
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),         # 10
        (_RET_K, 0, 0, errno),                     # 11
        (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),  # 12
    ]


def restrict_sockets(libc: Any) -> tuple[bool, str]:
    """Install the filter on the calling thread's process (inherited by its children, permanent).

    Needs ``PR_SET_NO_NEW_PRIVS`` set first (or ``CAP_SYS_ADMIN``). Never raises.

    Returns:
        ``(installed, one-line detail)``.
    """
    machine = platform.machine()
    if machine not in _ARCHES:
        return False, f"no system-call table for {machine}"
    insns = program(machine)
    arr = (_Filter * len(insns))(*[_Filter(*i) for i in insns])
    prog = _Prog(len(insns), ctypes.cast(arr, ctypes.POINTER(_Filter)))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        return False, f"prctl(PR_SET_SECCOMP) failed: {os.strerror(err) if err else 'unknown error'}"
    return True, f"seccomp: refused {FILTERED}"
