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
from pathlib import Path

import pytest
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
                with trio.fail_after(120):
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
        assert list_sessions() == [] and not list(session_registry.rglob("*.json"))
        assert "received SIGTERM; stopping the session" in paths.log.read_text()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def test_registry_is_per_owner_and_another_owners_session_needs_its_exact_name(short_tmp, session_registry,
                                                                               monkeypatch):
    """Two people on one account: each lists, attaches to and stops only their own sessions by a bare
    name; another's session is named in the refusal and reached only by its exact OWNER/NAME."""
    procs = {}
    try:
        for owner, name in (("alice", "tui"), ("bob", "s"), ("bob", "tui")):
            monkeypatch.setenv("RPENT_USER", owner)
            paths = SessionPaths(short_tmp / owner / name)
            write_session_options(paths, config(paths.root))
            procs[(owner, name)] = (paths, start_detached(paths))
        assert sorted(p.relative_to(session_registry).as_posix() for p in session_registry.rglob("*.json")) == [
            "alice/tui.json", "bob/s.json", "bob/tui.json"]  # same name, no tui-2: names are per owner

        def rpent_tui(user, *args):
            return subprocess.run([sys.executable, "-m", "rpent_tui", *args], capture_output=True, text=True,
                                  timeout=90, env={**os.environ, "RPENT_USER": user})

        alice = rpent_tui("alice", "--list").stdout.splitlines()
        assert len(alice) == 1 and alice[0].startswith("tui ") and "owner alice" in alice[0] and " started 20" in alice[0]
        everyone = rpent_tui("carol", "--list", "--all").stdout
        assert all(f"owner {o}" in everyone for o in ("alice", "bob")), everyone
        assert "no running sessions of yours (carol" in rpent_tui("carol", "--list").stdout
        monkeypatch.setenv("RPENT_USER", "alice")
        assert resolve_session(None) == procs[("alice", "tui")][0]  # alice's only one, not bob's
        monkeypatch.setenv("RPENT_USER", "bob")
        assert resolve_session("tui") == procs[("bob", "tui")][0]
        # carol owns nothing: a bare name that only matches others' is refused with their exact names
        refused = rpent_tui("carol", "--stop", "tui")
        assert refused.returncode == 1 and "alice/tui" in refused.stderr and "another person's" in refused.stderr
        assert all(paths.running() for paths, _ in procs.values())
        stop = rpent_tui("carol", "--stop", "alice/tui")
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop
        procs[("alice", "tui")][1].wait(timeout=60)
        assert not procs[("alice", "tui")][0].running() and procs[("bob", "tui")][0].running()
        for key in (("bob", "s"), ("bob", "tui")):
            assert rpent_tui("bob", "--stop", key[1]).returncode == 0
            procs[key][1].wait(timeout=60)
        assert not list(session_registry.rglob("*.json"))
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_env_starting(paths, name: str, timeout: float = 120) -> int:
    """The pid of TaskRun service ``name`` once the state file shows it starting (not yet ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        svc = ((paths.read_state() or {}).get("services") or {}).get(name) or {}
        if svc.get("pid") and svc.get("state") == "starting":
            return int(svc["pid"])
        time.sleep(0.1)
    raise AssertionError(f"{name} never showed up starting; state: {paths.read_state()}")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_session_killed_or_stopped_during_env_server_startup(short_tmp):
    """Real LIBERO env server (~30-45 s to start): (1) SIGKILL the session while its
    TaskRun's env server is still starting: every process it started ends at once (the server dies
    before its readiness line), and the next session in the directory marks the orphaned TaskRun's
    record as ended (``error``, with the reason); (2) stop the next session (SIGTERM) during the same
    start-up: the TaskRun is recorded ``cancelled`` in ``taskrun.json`` and in the run layer's transcript.

    End-to-end evidence, not the discriminating test of the death signal: a starting env server that
    prints a line after its parent died also ends on the broken stdout pipe. The death signal alone
    is pinned by ``tests/services/test_supervisor.py::test_a_server_still_starting_dies_with_its_killed_parent``
    (a server that prints nothing while it starts; it fails without ``PR_SET_PDEATHSIG``)."""
    from tui_tmux import descendants, wait_gone

    from rpent.rpc.protocol import READY_PREFIX

    paths = SessionPaths(short_tmp / "sess")
    procs = []
    try:
        write_session_options(paths, config(paths.root))
        procs.append(start_detached(paths))
        client = RemoteSession(paths, lambda e: None)
        run1 = client.call("start_task", {"suite": "libero_object", "task": 0, "seed": 0})
        client.close()
        env_pid = _wait_env_starting(paths, "env_server@0001")
        tree = descendants(procs[0].pid)
        assert env_pid in tree
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait()
        assert wait_gone(tree, 10) == [], "processes outlived the SIGKILLed session"
        task1 = Path(run1["output_dir"])
        assert READY_PREFIX not in (task1 / "env_server.log").read_text(), "the env server finished starting first"
        assert json.loads((task1 / "taskrun.json").read_text())["state"] in ("starting", "running")

        # a new session in the same directory closes the orphaned record, then is stopped mid start-up
        write_session_options(paths, config(paths.root))
        procs.append(start_detached(paths))
        record1 = json.loads((task1 / "taskrun.json").read_text())
        assert record1["state"] == "error" and "killed or crashed" in record1["error"], record1
        client = RemoteSession(paths, lambda e: None)
        run2 = client.call("start_task", {"suite": "libero_object", "task": 0, "seed": 0})
        assert run2["id"] == "0002"
        _wait_env_starting(paths, "env_server@0002")
        tree = descendants(procs[1].pid)
        client.stop_session()
        client.close()
        procs[1].wait(timeout=120)
        assert wait_gone(tree, 10) == []
        task2 = Path(run2["output_dir"])
        record2 = json.loads((task2 / "taskrun.json").read_text())
        assert record2["state"] == "cancelled" and record2["ended_at"], record2
        transcript = json.loads(next(task2.glob("transcript_*.json")).read_text())
        assert transcript["label"] == "cancelled" and transcript["stop_reason"] == "cancelled", transcript
        assert transcript["error"].startswith("run cancelled"), transcript
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_signal_that_stops_the_session_is_the_recorded_reason_of_its_taskrun(short_tmp, session_registry):
    """SIGTERM to the session process while its TaskRun's env server starts: the TaskRun is
    cancelled and its record names the signal (``interrupted: received SIGTERM``), not an operator."""
    paths = SessionPaths(short_tmp / "sess")
    write_session_options(paths, config(paths.root))
    proc = start_detached(paths)
    try:
        client = RemoteSession(paths, lambda e: None)
        run = client.call("start_task", {"suite": "libero_object", "task": 0, "seed": 0})
        client.close()
        _wait_env_starting(paths, "env_server@0001")
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
        task = Path(run["output_dir"])
        record = json.loads((task / "taskrun.json").read_text())
        transcript = json.loads(next(task.glob("transcript_*.json")).read_text())
        reason = "interrupted: received SIGTERM"
        assert record["state"] == "cancelled" and reason in record["detail"], record
        assert (transcript["label"], transcript["stop_reason"]) == ("cancelled", "cancelled"), transcript
        assert transcript["error"] == f"run cancelled ({reason})", transcript["error"]
        assert [(e["kind"], e["reason"]) for e in transcript["steering"]] == [("stop", reason)], transcript["steering"]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
