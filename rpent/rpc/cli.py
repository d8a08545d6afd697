"""Command-line plumbing shared by every rpent RPC server's ``main()``.

Usage in a server module::

    parser = argparse.ArgumentParser()
    add_server_args(parser)
    args = parser.parse_args()
    serve_from_args(MyServer(...), args)
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from rpent.rpc.procgroup import group_alive, killpg_quiet
from rpent.rpc.protocol import (DEFAULT_AUTH_TIMEOUT_S, DEFAULT_FRAME_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S,
                                DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_UNAUTHENTICATED,
                                READY_PREFIX, ConnectionLimits)
from rpent.rpc.server import RpcServer

PARENT_WATCH_GRACE_S = 3.0
"""Seconds a server and its process group get to stop after the parent died, before SIGKILL."""


def add_server_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--transport``, ``--host``, ``--port``, ``--max-frame-bytes``, ``--max-connections``,
    ``--idle-timeout-s``, ``--frame-timeout-s``, ``--auth-timeout-s``, ``--max-unauthenticated``,
    ``--parent-watch``."""
    g = parser.add_argument_group("RPC server")
    g.add_argument("--transport", choices=("http", "socket"), default="http", help="RPC transport (default http)")
    g.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; a non-loopback address requires $RPENT_RPC_TOKEN)")
    g.add_argument("--port", type=int, default=0, help="TCP port; 0 lets the OS pick (reported on the readiness line)")
    g.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES,
                   help=f"largest request message in bytes (default {DEFAULT_MAX_FRAME_BYTES})")
    g.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS,
                   help=f"connections served at once; one more is refused with an error (default {DEFAULT_MAX_CONNECTIONS})")
    g.add_argument("--idle-timeout-s", type=float, default=DEFAULT_IDLE_TIMEOUT_S,
                   help=f"close a connection idle this long between requests; clients reconnect "
                        f"(default {DEFAULT_IDLE_TIMEOUT_S:g})")
    g.add_argument("--frame-timeout-s", type=float, default=DEFAULT_FRAME_TIMEOUT_S,
                   help=f"drop a connection whose request stalls this long mid-way (default {DEFAULT_FRAME_TIMEOUT_S:g})")
    g.add_argument("--auth-timeout-s", type=float, default=DEFAULT_AUTH_TIMEOUT_S,
                   help=f"with $RPENT_RPC_TOKEN: close a new connection that has not sent its authenticating first "
                        f"request within this many seconds (default {DEFAULT_AUTH_TIMEOUT_S:g})")
    g.add_argument("--max-unauthenticated", type=int, default=DEFAULT_MAX_UNAUTHENTICATED,
                   help=f"with $RPENT_RPC_TOKEN: connections held while they authenticate, outside --max-connections; "
                        f"past it the oldest is closed (default {DEFAULT_MAX_UNAUTHENTICATED})")
    g.add_argument("--parent-watch", action="store_true",
                   help="exit when stdin reaches EOF (the supervising parent died or closed the pipe)")


def ready_line(server: RpcServer) -> str:
    """The readiness line for a bound server: ``RPC server listening on <protocol>://<host>:<port>``.

    ``host`` is the address as bound (``0.0.0.0`` stays ``0.0.0.0``; clients map it to 127.0.0.1).
    """
    return f"{READY_PREFIX}{server.endpoint}"


def serve_from_args(server: RpcServer, args: argparse.Namespace) -> None:
    """Bind per ``args``, print+flush the readiness line, serve until shutdown/SIGTERM/parent death.

    SIGTERM and SIGINT stop the server cleanly (handlers are installed only here, in the server
    process's main thread). With ``--parent-watch`` a thread reads stdin; at EOF (the parent died
    or closed the pipe) the server shuts down. With ``--parent-watch``, once the server stopped
    because of a signal or of the parent watch, and if it leads its own process group (as under
    the Supervisor, which uses ``start_new_session``), the main thread SIGTERMs the group, waits up
    to ``PARENT_WATCH_GRACE_S`` for the other members, then SIGKILLs the group, so no grandchild
    is orphaned. This is done by the main thread itself, not left to the watch thread: the
    parent's death signal (``PR_SET_PDEATHSIG``, :mod:`rpent.services.spawn`) fires when the
    parent's *forking thread* exits, which can be before the rest of the parent is gone, i.e.
    before stdin reaches EOF and while ``getppid()`` still names the dying parent.

    Raises:
        SystemExit(2): the address cannot be bound or the arguments are invalid (message on stderr).
    """
    if not 0 <= args.port <= 65535:
        print(f"--port {args.port} out of range 0-65535", file=sys.stderr)
        raise SystemExit(2)
    try:
        limits = ConnectionLimits(getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS),
                                  getattr(args, "idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S),
                                  getattr(args, "frame_timeout_s", DEFAULT_FRAME_TIMEOUT_S),
                                  getattr(args, "auth_timeout_s", DEFAULT_AUTH_TIMEOUT_S),
                                  getattr(args, "max_unauthenticated", DEFAULT_MAX_UNAUTHENTICATED))
        server.bind(transport=args.transport, host=args.host, port=args.port, max_frame_bytes=args.max_frame_bytes,
                    limits=limits)
    except (ValueError, OSError) as exc:
        print(f"{server.name}: cannot start RPC server: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    signalled = threading.Event()
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        def on_signal(*_: object) -> None:
            signalled.set()
            server.shutdown()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
    fired = threading.Event()
    if args.parent_watch:
        threading.Thread(target=_watch_parent, args=(server, fired), name="parent-watch", daemon=True).start()
    print(ready_line(server), flush=True)
    try:
        server.serve_forever()
    finally:
        # only on the main thread: there our own SIGTERM handler (above) absorbs the group SIGTERM
        if args.parent_watch and main_thread and (fired.is_set() or signalled.is_set()):
            _stop_own_group()


def _watch_parent(server: RpcServer, fired: threading.Event) -> None:
    try:
        fd = sys.stdin.fileno()
        while os.read(fd, 65536):
            pass
    except (OSError, ValueError):
        pass
    fired.set()
    server.shutdown()
    try:  # the parent may have taken our stdout pipe with it
        print(f"{server.name}: parent went away (stdin closed); shutting down", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _stop_own_group() -> None:
    """If this process leads its own process group, SIGTERM the group, wait up to
    ``PARENT_WATCH_GRACE_S`` for the other live members, then SIGKILL the group if any is left."""
    me = os.getpid()
    if os.getpgrp() != me:
        return  # not a group leader: only this process is ours to stop
    killpg_quiet(me, signal.SIGTERM)  # our own SIGTERM handler only repeats shutdown()
    deadline = time.monotonic() + PARENT_WATCH_GRACE_S
    while time.monotonic() < deadline and group_alive(me, exclude_pid=me):
        time.sleep(0.05)
    if group_alive(me, exclude_pid=me):
        killpg_quiet(me, signal.SIGKILL)
