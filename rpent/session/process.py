"""The session process: start it detached (its own session and process group, log and state file in
the session directory), run it (``python -m rpent.session serve DIR [--foreground]``), stop it.

A detached session survives the terminal or SSH connection that started it: it is started with
``setsid`` (``start_new_session``), so the terminal's SIGHUP never reaches it, with stdin from
/dev/null and stdout/stderr appended to ``session.log``. SIGTERM or SIGINT stop it cleanly (every
TaskRun is cancelled and recorded, its record naming the signal, then the shared services stop);
the services it spawns lead their own process groups and watch their parent's pipe
(``--parent-watch``), so they end even when the session process is SIGKILLed. ``--foreground`` runs the same server in the calling terminal
(log on stderr; SIGHUP stops it too) for debugging.

``session.json`` holds the options: ``{"config": SessionConfig fields, "vla_server_args": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .layout import SessionPaths, pid_alive, register, unregister, write_json_atomic

__all__ = ["SessionStartError", "write_session_options", "start_detached", "wait_ready", "stop_session", "main",
           "session_config_from_dict"]

#: Seconds ``start_detached`` waits for the socket (the session binds it before shared services start).
START_TIMEOUT_S = 60.0


class SessionStartError(RuntimeError):
    """The session process did not come up (the message holds the end of its log)."""


def config_to_dict(config: Any) -> dict[str, Any]:
    """``SessionConfig`` as JSON-able fields."""
    return {"output_dir": str(config.output_dir), "robot": config.robot, "planner": config.planner,
            "model": config.model, "vla_endpoint": config.vla_endpoint, "sam3_endpoint": config.sam3_endpoint,
            "env_endpoint": config.env_endpoint, "shared_services": list(config.shared_services),
            "run_options": dict(config.run_options)}


def session_config_from_dict(data: dict[str, Any]) -> Any:
    """A validated ``SessionConfig`` from ``config_to_dict`` output.

    Raises:
        SessionConfigError: invalid options (e.g. ``--env-endpoint``, with the seed's reason).
    """
    from rpent.session.model import SessionConfig

    config = SessionConfig(output_dir=Path(data["output_dir"]), robot=data.get("robot", "libero"),
                           planner=data.get("planner", "api"), model=data.get("model"),
                           vla_endpoint=data.get("vla_endpoint"), sam3_endpoint=data.get("sam3_endpoint"),
                           env_endpoint=data.get("env_endpoint"),
                           shared_services=tuple(data.get("shared_services", ())),
                           run_options=dict(data.get("run_options") or {}))
    config.validate()
    return config


def write_session_options(paths: SessionPaths, config: Any, vla_server_args: list[str] | None = None) -> None:
    """Create the session directory with ``session.json`` and a fresh token.

    Raises:
        FileExistsError: a session already runs there (the message says how to attach), or the directory
            holds files but never held a session (a run record, a results root: never mixed with a session's).
        ValueError: the directory is too deep for a Unix socket path.
    """
    paths.check_socket_path()
    if paths.running():
        raise FileExistsError(f"a session is already running in {paths.root}; attach to it with "
                              f"rpent-tui --attach {paths.root}")
    if not paths.config.exists():  # no session was ever started here: nothing but a session's own files
        from rpent.run.record import earlier_run_files, fresh_dir_suggestion
        from rpent.session.layout import SESSION_ENTRIES

        found = earlier_run_files(paths.root, ignore=SESSION_ENTRIES)
        if found:
            shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
            raise FileExistsError(f"--output-dir {paths.root} holds files ({shown}) but no session.json, so it is "
                                  "not a session directory; a session would write its files and tasks/ beside them. "
                                  f"Choose a new directory, e.g. --output-dir {fresh_dir_suggestion(paths.root)}")
    # An earlier, stopped session in the same directory: the new one gets a new token (its TaskRuns
    # continue the numbering under tasks/, see Session); session.log keeps growing.
    paths.token.unlink(missing_ok=True)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.make_token()
    write_json_atomic(paths.config, {"schema_version": 1, "config": config_to_dict(config),
                                     "vla_server_args": list(vla_server_args or [])})


def start_detached(paths: SessionPaths, *, env: dict[str, str] | None = None,
                   timeout_s: float = START_TIMEOUT_S) -> subprocess.Popen:
    """Start the session process for ``paths`` (already written by ``write_session_options``) in its
    own session and wait until it serves.

    Returns the ``Popen`` of the session process (its parent may exit; the session keeps running).

    Raises:
        SessionStartError: the process exited or did not bind its socket within ``timeout_s`` s.
    """
    log_fh = open(paths.log, "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "rpent.session", "serve", str(paths.root)],
                                stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env={**os.environ, **(env or {})})
    finally:
        log_fh.close()
    wait_ready(paths, proc, timeout_s)
    return proc


def _log_tail(paths: SessionPaths, n: int = 15) -> str:
    try:
        return "\n".join(paths.log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def wait_ready(paths: SessionPaths, proc: subprocess.Popen | None, timeout_s: float) -> None:
    """Wait until the session in ``paths`` serves (state ``serving`` and its socket exists).

    Raises:
        SessionStartError: ``proc`` exited first, or ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = paths.read_state() or {}
        if state.get("status") == "serving" and paths.socket.exists() and pid_alive(state.get("pid")):
            return
        if proc is not None and proc.poll() is not None:
            raise SessionStartError(f"the session process exited with status {proc.returncode}; "
                                    f"end of {paths.log}:\n{_log_tail(paths)}")
        time.sleep(0.05)
    raise SessionStartError(f"the session did not start within {timeout_s:.0f} s; end of {paths.log}:\n{_log_tail(paths)}")


def stop_session(paths: SessionPaths, timeout_s: float = 60.0) -> bool:
    """Stop the session process of ``paths`` with SIGTERM (it stops its services) and wait for it.

    Returns True when it ended within ``timeout_s`` s (or was not running); False otherwise.
    """
    state = paths.read_state() or {}
    pid = state.get("pid")
    if not pid_alive(pid):
        return True
    os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not pid_alive(pid)


def build_session(paths: SessionPaths, sink: Any) -> Any:
    """The ``Session`` described by ``paths.config`` (shared services as ``rpent-tui`` would start them)."""
    from rpent.session.core import Session
    from rpent.session.defaults import default_shared_specs

    data = json.loads(paths.config.read_text(encoding="utf-8"))
    config = session_config_from_dict(data["config"])
    specs = default_shared_specs(config)
    extra = list(data.get("vla_server_args") or [])
    if extra:
        specs = [type(s)(**{**s.__dict__, "argv": s.argv + extra}) if s.name == "vla" and s.endpoint is None else s
                 for s in specs]
    return Session(config, sink, shared_specs=specs)


def serve(paths: SessionPaths, *, foreground: bool = False) -> int:
    """Run the session server of ``paths`` until SIGTERM/SIGINT (and SIGHUP in the foreground) or a
    client's ``stop_session``. Returns the exit status (0 clean, 1 crashed)."""
    import trio

    from rpent.planners.steering import signal_stop_reason
    from rpent.session.code_cells import CodeCellService

    from .server import SessionServer
    from .wire import read_token

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "anthropic", "openai", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not foreground:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # detached: no terminal can hang us up
    server = SessionServer(paths, lambda sink: build_session(paths, sink), read_token(paths.root),
                           make_cells=lambda sink: CodeCellService(sink))
    stop_signals = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if foreground else [])

    async def main_task() -> None:
        async with trio.open_nursery() as nursery:
            async def on_signal() -> None:
                with trio.open_signal_receiver(*stop_signals) as signals:
                    async for signum in signals:
                        logging.getLogger("rpent.session").info("received %s; stopping the session",
                                                                signal.Signals(signum).name)
                        if server.session is not None:  # the TaskRuns' records name the signal
                            server.session.stop_runs(signal_stop_reason(signum))
                        server.stop()
                        return

            nursery.start_soon(on_signal)
            await server.serve()
            nursery.cancel_scope.cancel()

    entry = register(paths)
    try:
        trio.run(main_task)
    except BaseException as exc:  # noqa: BLE001 - logged; the state file says crashed
        logging.getLogger("rpent.session").exception("session crashed")
        state = paths.read_state() or {}
        write_json_atomic(paths.state, {**state, "status": "crashed", "error": f"{type(exc).__name__}: {exc}",
                                        "updated_at": time.time()})
        return 1
    finally:
        entry.unlink(missing_ok=True)
        unregister(paths)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m rpent.session serve DIR [--foreground]`` / ``stop DIR`` / ``list``."""
    p = argparse.ArgumentParser(prog="python -m rpent.session",
                                description="The rpent session process (normally started by rpent-tui or rpent --dashboard).")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve the session described by DIR/session.json")
    s.add_argument("session_dir", type=Path)
    s.add_argument("--foreground", action="store_true", help="log to this terminal; SIGHUP stops it (debugging)")
    t = sub.add_parser("stop", help="stop a session (its TaskRuns are cancelled and recorded, its services stopped)")
    t.add_argument("session", help="session name (rpent-tui --list) or directory")
    sub.add_parser("list", help="list running sessions")
    args = p.parse_args(argv)
    from .layout import SessionNotFound, list_sessions, resolve_session

    if args.cmd == "serve":
        paths = SessionPaths(args.session_dir.resolve())
        if not paths.config.is_file() or not paths.token.is_file():
            p.exit(2, f"rpent.session: error: {paths.root} has no session.json/token; start sessions with rpent-tui\n")
        return serve(paths, foreground=args.foreground)
    if args.cmd == "list":
        for info in list_sessions():
            print(info.line())
        return 0
    try:
        paths = resolve_session(args.session)
    except SessionNotFound as exc:
        p.exit(1, f"rpent.session: {exc}\n")
    return 0 if stop_session(paths) else 1
