"""The session server over its real Unix socket: attach (snapshot + live deltas), two clients sharing
one operator verdict, commands, and refusal of garbage and token-less clients while serving on.

The session runs in this process (trio) with the TUI tests' ``run_task`` stand-in (it starts a real
tiny env server through the TaskRun's supervisor); clients are real ``RemoteSession`` objects on
real sockets. The detached session process itself is covered in ``test_session_process.py``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct

import pytest
import trio

from rpent.session import wire
from rpent.session.client import RemoteSession, SessionGone
from rpent.session.layout import SessionPaths
from rpent.session.server import SessionServer
from test_tui_app_screens import EchoToolkit, ToolkitRun  # tests/tui is on sys.path (tests/session/conftest.py)


def make_server(root, run):
    from tui_helpers import plain_run_config

    from rpent.session.code_cells import CodeCellService
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    paths = SessionPaths(root)
    token = paths.make_token()

    def make(sink):
        return Session(SessionConfig(output_dir=root, planner="scripted", shared_services=()), sink, run_task=run,
                       shared_specs=[], make_run_config=plain_run_config, batch_interval_s=0.02)

    return SessionServer(paths, make, token, make_cells=CodeCellService), paths, token


class Recorder:
    """A thread-safe sink that keeps every UI event."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    def of(self, name):
        return [e for e in self.events if type(e).__name__ == name]


async def until(predicate, what, timeout=120.0):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def test_two_clients_share_a_verdict_and_see_the_same_run(short_tmp, png_bytes):
    from tui_helpers import StandInRun

    from rpent.session.commands import TaskCommand
    from rpent.session.operator import OperatorReplyError

    run = StandInRun(ask=True, png=png_bytes)
    server, paths, _ = make_server(short_tmp / "s", run)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            a_events, b_events = Recorder(), Recorder()
            a, b = RemoteSession(paths, a_events), RemoteSession(paths, b_events)
            await nursery.start(a.run)
            await nursery.start(b.run)
            await until(lambda: a.state == "ready" and b.state == "ready", "session ready")
            view = await trio.to_thread.run_sync(a.start_task, TaskCommand("libero_object", 0, 0))
            assert view.id == "0001" and a.current is view
            await until(lambda: b.current is not None and b.current.operator is not None, "request in b")
            await until(lambda: a.current.operator is not None, "request in a")
            request = b.current.operator
            assert request.choices == ("success", "failure", "continue", "abort")
            assert request.frames["main"] == png_bytes  # the frames the operator judges travel too
            assert [e.request.id for e in a_events.of("OperatorPrompt")] == [request.id]
            reply = await trio.to_thread.run_sync(b.reply_operator, "0001", request.id, "success", "looks right")
            assert reply.answer == "success"
            # the request closes in the other client too, and cannot be answered twice
            await until(lambda: a_events.of("OperatorResolved"), "resolved in a")
            assert a_events.of("OperatorResolved")[0].reply.notes == "looks right"
            with pytest.raises(OperatorReplyError, match="expired or already answered"):
                await trio.to_thread.run_sync(a.reply_operator, "0001", request.id, "failure", "")
            await until(lambda: a.current.state == "succeeded" and b.current.state == "succeeded", "succeeded")
            for client in (a, b):
                run_view = client.current
                assert [e.get("event") for e in run_view.transcript][:3] == ["text", "tool_call", "tool_result"]
                assert run_view.timeline[0]["tool"] == "move_to" and run_view.frames["main"] == png_bytes
                assert run_view.outcome["environment_success"] is True
            assert run.answers == [("success", "looks right")]
            # steering goes to the session; a late client gets the whole backlog on attach
            c_events = Recorder()
            c = RemoteSession(paths, c_events)
            await nursery.start(c.run)
            assert [r.id for r in c.runs] == ["0001"] and c.current.state == "succeeded"
            assert c.current.transcript == a.current.transcript and c.current.operator is None
            assert c.services["env_server@0001"].state == "stopped"
            assert c.config.planner == "scripted"
            nursery.cancel_scope.cancel()

    trio.run(main)
    record = json.loads((short_tmp / "s" / "tasks" / "0001_libero_object_t0_s0" / "taskrun.json").read_text())
    assert record["state"] == "succeeded" and record["environment_success"] is True
    state = json.loads(paths.state.read_text())
    assert state["status"] == "stopped" and state["runs"][0]["state"] == "succeeded"
    assert not paths.socket.exists()


def _raw(paths):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(paths.socket))
    return sock


def _answer(sock):
    """The server's frame (a refusal) or b'' when it just closed."""
    try:
        return wire.read_frame_sync(sock, wire.SERVER_MAX_BYTES)
    except ConnectionError:
        return b""


def test_garbage_and_tokenless_clients_are_refused_and_the_session_keeps_serving(short_tmp):
    from tui_helpers import StandInRun

    server, paths, token = make_server(short_tmp / "s", StandInRun())

    def attack():
        results = {}
        with _raw(paths) as s:  # not even a frame
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
            results["http"] = _answer(s)
        with _raw(paths) as s:  # claims a 4 GiB frame: refused before anything is allocated
            s.sendall(struct.pack(">I", 0xFFFFFFF0) + b"x" * 100)
            results["huge"] = _answer(s)
        with _raw(paths) as s:  # a valid frame of random bytes
            s.sendall(struct.pack(">I", 64) + os.urandom(64))
            results["random"] = _answer(s)
        with _raw(paths) as s:
            wire.send_frame_sync(s, {"t": "hello", "protocol": wire.PROTOCOL, "role": "events"})
            results["no_token"] = _answer(s)
        with _raw(paths) as s:
            wire.send_frame_sync(s, {"t": "hello", "protocol": wire.PROTOCOL, "role": "commands", "token": "0" * 64})
            results["bad_token"] = _answer(s)
        with _raw(paths) as s:  # authenticated, then garbage: disconnected, nothing else happens
            wire.send_frame_sync(s, {"t": "hello", "protocol": wire.PROTOCOL, "role": "commands", "token": token})
            assert wire.read_frame_sync(s, wire.SERVER_MAX_BYTES)["t"] == "welcome"
            s.sendall(struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1")
            results["garbage_after_auth"] = _answer(s)
        with _raw(paths) as s:  # a call that is not one of the commands
            wire.send_frame_sync(s, {"t": "hello", "protocol": wire.PROTOCOL, "role": "commands", "token": token})
            wire.read_frame_sync(s, wire.SERVER_MAX_BYTES)
            wire.send_frame_sync(s, {"t": "call", "id": 1, "method": "__init__", "args": {}})
            results["unknown_call"] = wire.read_frame_sync(s, wire.SERVER_MAX_BYTES)
        return results

    async def main():
        with trio.fail_after(60):
            await serve_and_attack()

    async def serve_and_attack():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            mode = stat.S_IMODE(os.stat(paths.socket).st_mode)
            assert mode == 0o600, oct(mode)
            assert stat.S_IMODE(os.stat(paths.token).st_mode) == 0o600
            results = await trio.to_thread.run_sync(attack)
            assert results["http"] == b"" or "bad hello" in results["http"]["error"]
            assert "exceeds the limit" in results["huge"]["error"]
            assert results["random"]["t"] == "refused"
            assert "wrong or missing token" in results["no_token"]["error"]
            assert "wrong or missing token" in results["bad_token"]["error"]
            assert results["garbage_after_auth"] == b""
            assert results["unknown_call"]["ok"] is False and "unknown call" in results["unknown_call"]["error"]
            # still serving: a proper client attaches and calls
            events = Recorder()
            client = RemoteSession(paths, events)
            await nursery.start(client.run)
            status = await trio.to_thread.run_sync(client.call, "status")
            assert status["status"] == "serving" and status["clients"] == 1
            assert server.refused >= 6
            # the session stops from a client: attached clients are told
            await trio.to_thread.run_sync(client.stop_session)
            await until(lambda: client.gone is not None, "SessionGone")
            assert isinstance(events.events[-1], SessionGone)

    trio.run(main)
    assert json.loads(paths.state.read_text())["refused_connections"] >= 6


def test_code_cells_run_in_the_session_against_the_taskrun_toolkit(short_tmp):
    from rpent.session.code_cells import NoToolkitError
    from rpent.session.commands import TaskCommand

    toolkit = EchoToolkit()
    server, paths, _ = make_server(short_tmp / "s", ToolkitRun(toolkit))

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            events = Recorder()
            client = RemoteSession(paths, events)
            await nursery.start(client.run)
            await until(lambda: client.state == "ready", "ready")
            with pytest.raises(NoToolkitError):  # no TaskRun yet
                await client.cells.run_cell(None, short_tmp, "print(1)", timeout_s=30, max_calls=5)
            await trio.to_thread.run_sync(client.start_task, TaskCommand("libero_goal", 0, 0))
            await until(lambda: client.toolkit_for("0001") is not None, "toolkit")
            await client.cells.run_cell(client.toolkit_for("0001"), client.current.output_dir,
                                        "total = 0\nfor i in range(3):\n    total += robo.echo(x=i).x\nprint('total', total)\n",
                                        timeout_s=30, max_calls=5)
            await until(lambda: events.of("CellFinished"), "cell result", timeout=60)
            done = events.of("CellFinished")[0]
            assert "total 3" in str(done.result) and done.calls == 3
            assert events.of("CellProgress") and not client.cells.busy
            assert [c[0] for c in toolkit.calls] == ["echo", "echo", "echo"]
            nursery.cancel_scope.cancel()

    trio.run(main)
    cells = short_tmp / "s" / "tasks" / "0001_libero_goal_t0_s0" / "code_policy"
    assert (cells / "cell_001.py").is_file() and (cells / "cell_001.json").is_file()


def test_records_of_a_killed_session_are_closed_by_the_next(tmp_path):
    """A TaskRun whose session process died (SIGKILL) keeps ``state: running`` in its taskrun.json;
    the next session in the directory marks it ``error`` with the reason, and leaves alone a finished
    TaskRun and one whose session process still runs."""
    import json
    import subprocess

    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    dead = subprocess.Popen(["true"])
    dead.wait()
    tasks = tmp_path / "tasks"
    records = {"0001_libero_object_t0_s0": {"state": "running", "session_pid": dead.pid},
               "0002_libero_object_t0_s0": {"state": "running", "session_pid": os.getppid()},
               "0003_libero_object_t0_s0": {"state": "succeeded", "session_pid": dead.pid}}
    for name, data in records.items():
        (tasks / name).mkdir(parents=True)
        (tasks / name / "taskrun.json").write_text(json.dumps({"id": name[:4], **data}))
    session = Session(SessionConfig(output_dir=tmp_path, planner="scripted", shared_services=()), lambda e: None)
    assert session.close_orphaned_records() == [str(tasks / "0001_libero_object_t0_s0")]
    closed = json.loads((tasks / "0001_libero_object_t0_s0" / "taskrun.json").read_text())
    assert closed["state"] == "error" and closed["ended_at"]
    assert f"session process (pid {dead.pid}) ended while this TaskRun was 'running'" in closed["error"]
    assert "wrote no transcript" in closed["error"]
    for name in ("0002_libero_object_t0_s0", "0003_libero_object_t0_s0"):
        assert json.loads((tasks / name / "taskrun.json").read_text()) == {"id": name[:4], **records[name]}


def test_flywheel_export_in_the_session_is_refused_when_invalid_and_cancels(short_tmp):
    """``flywheel_export`` checks the job in the session (the error type travels back), every client
    sees the export's state and output, and ``flywheel_cancel`` stops its process group."""
    import sys

    from tui_helpers import StandInRun

    from rpent.session.flywheel_jobs import FlywheelJobError

    server, paths, token = make_server(short_tmp / "s", StandInRun())
    # stands in for rpent-flywheel: prints a progress line, then works for a minute
    server._flywheel_program = [sys.executable, "-c", "import time; print('episode 1/3', flush=True); time.sleep(60)"]
    run_dir = short_tmp / "run"
    run_dir.mkdir()

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            a_events, b_events = Recorder(), Recorder()
            a, b = RemoteSession(paths, a_events), RemoteSession(paths, b_events)
            await nursery.start(a.run)
            await nursery.start(b.run)
            call = lambda args: a.call("flywheel_export", args)  # noqa: E731
            with pytest.raises(FlywheelJobError, match="does not exist"):
                await trio.to_thread.run_sync(call, {"input_roots": [str(short_tmp / "nope")],
                                                     "output_dir": str(short_tmp / "out")})
            with pytest.raises(FlywheelJobError, match="already exists"):
                await trio.to_thread.run_sync(call, {"input_roots": [str(run_dir)], "output_dir": str(run_dir)})
            status = await trio.to_thread.run_sync(call, {"input_roots": [str(run_dir)],
                                                         "output_dir": str(short_tmp / "out"), "threads": 2})
            assert status["state"] == "running" and status["job"]["threads"] == 2
            await until(lambda: b.flywheel.status.progress == (1, 3), "progress in the other client")
            assert "episode 1/3" in b.flywheel.status.lines and b.flywheel.status.pid
            pid = b.flywheel.status.pid
            with pytest.raises(FlywheelJobError, match="already running"):
                await trio.to_thread.run_sync(call, {"input_roots": [str(run_dir)],
                                                     "output_dir": str(short_tmp / "out2")})
            assert await trio.to_thread.run_sync(a.flywheel.cancel)
            await until(lambda: a.flywheel.status.state == "cancelled" and b.flywheel.status.state == "cancelled",
                        "cancelled in both clients")
            await until(lambda: not os.path.exists(f"/proc/{pid}"), "the export's process ended")
            await until(lambda: any(e.state == "cancelled" for e in b_events.of("FlywheelOutput")), "final event")
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert json.loads(paths.state.read_text())["flywheel"]["state"] == "cancelled"
