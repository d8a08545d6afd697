"""The detached session process: own session and process group, state file, log, registry,
``rpent-tui --list`` / ``--stop``, attach from a fresh client, stop without leaving a process.

Real processes (``python -m rpent.session serve``) and real sockets; no simulator (``--shared none``
and no TaskRun), so this runs in a few seconds. TaskRuns in a detached session over a real terminal
are covered by ``test_session_tmux.py`` (slow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import trio

from rpent.session.client import RemoteSession
from rpent.session.layout import SessionPaths, list_sessions, pid_alive, resolve_session
from rpent.session.process import start_detached, write_session_options


def config(root):
    from rpent.session.model import SessionConfig

    return SessionConfig(output_dir=root, planner="scripted", shared_services=())


def test_detached_session_lives_alone_lists_attaches_and_stops(short_tmp, session_registry):
    paths = SessionPaths(short_tmp / "sess")
    write_session_options(paths, config(paths.root))
    proc = start_detached(paths)
    try:
        state = json.loads(paths.state.read_text())
        pid = state["pid"]
        assert pid == proc.pid and state["status"] == "serving"
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # its own session: no terminal SIGHUP reaches it
        assert os.getsid(pid) != os.getsid(0)
        assert [s.name for s in list_sessions()] == ["sess"] and resolve_session(None) == paths
        listing = subprocess.run([sys.executable, "-m", "rpent_tui", "--list"], capture_output=True, text=True,
                                 timeout=60, env={**os.environ})
        assert "sess" in listing.stdout and "serving" in listing.stdout, listing
        # a second start in the same directory is refused with the fix
        try:
            write_session_options(paths, config(paths.root))
        except FileExistsError as exc:
            assert "rpent-tui --attach" in str(exc)
        else:
            raise AssertionError("a second session in a running session's directory was accepted")

        async def attach():
            client = RemoteSession(paths, lambda e: None)
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                with trio.fail_after(20):
                    while client.state != "ready":
                        await trio.sleep(0.05)
                status = await trio.to_thread.run_sync(client.call, "status")
                nursery.cancel_scope.cancel()  # detach
            client.close()
            return status

        status = trio.run(attach)
        assert status["pid"] == pid and status["session_state"] == "ready"
        time.sleep(0.3)
        assert pid_alive(pid), "detaching stopped the session"
        stop = subprocess.run([sys.executable, "-m", "rpent_tui", "--stop", "sess"], capture_output=True, text=True,
                              timeout=90, env={**os.environ})
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop
        proc.wait(timeout=30)
        assert proc.returncode == 0, paths.log.read_text()
        state = json.loads(paths.state.read_text())
        assert state["status"] == "stopped" and not paths.socket.exists()
        assert list_sessions() == [] and not list(session_registry.glob("*.json"))
        assert "received SIGTERM; stopping the session" in paths.log.read_text()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
