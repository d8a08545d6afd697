"""Supervisor with real child processes: spawn, readiness, fail-fast, teardown, no orphans."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from rpent.rpc import RpcClient, RpcServer
from rpent.services import ServiceSpec, ServiceStartError, ServiceState, Supervisor

CHILD = str(Path(__file__).with_name("child_server.py"))


def child_spec(name: str, *flags: str, **kw) -> ServiceSpec:
    return ServiceSpec(name=name, argv=[sys.executable, CHILD, "--name", name, *flags], **kw)


def pid_gone(pid: int) -> bool:
    """True if ``pid`` does not exist or is a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_gone(pid):
            return True
        time.sleep(0.05)
    return pid_gone(pid)


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_spawn_ready_call_log_events_and_stop(tmp_path, transport):
    events = []

    async def main():
        async with Supervisor(tmp_path, on_event=events.append) as sup:
            svc = await sup.start(child_spec("alpha", transport=transport, env={"MARKER": "m1"}))
            assert svc.state is ServiceState.READY
            assert svc.endpoint.protocol == transport and svc.endpoint.host == "127.0.0.1"
            assert svc.health["name"] == "alpha" and svc.health["pid"] == svc.pid
            with svc.client(timeout=5) as c:
                assert await trio.to_thread.run_sync(c.call, "pid") == svc.pid
                await trio.to_thread.run_sync(c.call, "say", "hello from the test")
            await trio.sleep(0.2)
            return svc

    svc = trio.run(main)
    assert svc.state is ServiceState.STOPPED and svc.returncode == 0
    assert pid_gone(svc.pid)
    log = (tmp_path / "alpha.log").read_text()
    assert "env MARKER=m1" in log and f"RPC server listening on {svc.endpoint}" in log
    assert "hello from the test" in log
    states = [e["state"] for e in events if e["kind"] == "service_state"]
    assert states[0] == "pending" and states[1] == "starting" and states[-2:] == ["ready", "stopped"]
    lines = [e["line"] for e in events if e["kind"] == "service_log"]
    assert "hello from the test" in lines


def test_fail_fast_names_service_exit_code_and_last_lines(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            t0 = time.monotonic()
            with pytest.raises(ServiceStartError) as info:
                await sup.start(child_spec("vla", "--exit-before-ready", "3", ready_timeout_s=300))
            assert time.monotonic() - t0 < 100  # at the exit, not at the readiness timeout (300 s)
            assert sup.get("vla").state is ServiceState.FAILED
            return info.value

    err = trio.run(main)
    msg = str(err)
    assert "'vla'" in msg and "code 3" in msg and "checkpoint not found" in msg and "vla.log" in msg
    assert err.returncode == 3 and err.service == "vla"
    assert "checkpoint not found" in (tmp_path / "vla.log").read_text()


def test_readiness_timeout_kills_the_child(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            with pytest.raises(ServiceStartError, match="no readiness line .* within 1 s"):
                await sup.start(child_spec("slow", "--never-ready", ready_timeout_s=1.0, stop_grace_s=1.0))
            return sup.get("slow").pid

    pid = trio.run(main)
    assert wait_gone(pid, 5)


def test_missing_executable(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            with pytest.raises(ServiceStartError, match="cannot run '/nonexistent/server'"):
                await sup.start(ServiceSpec(name="ghost", argv=["/nonexistent/server"]))

    trio.run(main)


def test_sigterm_ignoring_child_is_killed_after_grace(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            svc = await sup.start(child_spec("stubborn", "--ignore-sigterm", stop_grace_s=0.5))
            t0 = time.monotonic()
            await sup.stop("stubborn")
            return svc, time.monotonic() - t0

    svc, took = trio.run(main)
    assert svc.returncode == -signal.SIGKILL
    assert 0.45 <= took < 5
    assert svc.state is ServiceState.STOPPED


def test_grandchild_dies_with_its_group(tmp_path):
    pidfile = tmp_path / "gc.pid"

    async def main():
        async with Supervisor(tmp_path) as sup:
            await sup.start(child_spec("parent", "--grandchild-pidfile", str(pidfile), stop_grace_s=2.0))
            gc = int(pidfile.read_text())
            assert not pid_gone(gc)
            return gc

    gc = trio.run(main)
    assert wait_gone(gc, 5)


def test_reverse_order_teardown_even_on_error(tmp_path):
    order = []

    def on_event(e):
        if e["kind"] == "service_state" and e["state"] == "stopped":
            order.append(e["service"])

    async def main():
        async with Supervisor(tmp_path, on_event=on_event) as sup:
            await sup.start(child_spec("first"))
            await sup.start(child_spec("second"))
            raise KeyError("boom in the run")

    with pytest.raises(KeyError):
        trio.run(main)
    assert order == ["second", "first"]


@pytest.mark.parametrize("when", ["spawning", "waiting", "ready"])
def test_cancellation_still_tears_down(tmp_path, when):
    """Cancelled while spawning (0.05 s in), while waiting for readiness (once the child printed its
    first line; it binds only after 120 s), or after ready: all stopped, log kept."""

    async def main():
        with trio.CancelScope() as scope:
            async with Supervisor(tmp_path) as sup:
                if when == "spawning":
                    scope.deadline = trio.current_time() + 0.05
                if when == "waiting":
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(sup.start, child_spec("c1", "--delay", "120"))
                        def first_line_out() -> bool:
                            try:
                                return any("child c1 starting" in line for line in sup.get("c1").log_tail)
                            except KeyError:
                                return False

                        with trio.fail_after(120):
                            while not first_line_out():
                                await trio.sleep(0.05)
                        scope.cancel()
                else:
                    # a cancelled start must not wait for the readiness 120 s away
                    await sup.start(child_spec("c1", "--delay", "120" if when == "spawning" else "0"))
                    scope.cancel()
                await trio.sleep_forever()
        return sup.get("c1")

    t0 = time.monotonic()
    svc = trio.run(main)
    assert time.monotonic() - t0 < 100
    assert svc.state is ServiceState.STOPPED and svc.returncode is not None and pid_gone(svc.pid)
    log = (tmp_path / "c1.log").read_text()
    assert "stopped (exit code" in log
    if when != "spawning":  # at 0.05 s the interpreter may not have printed anything yet
        assert "child c1 starting" in log


def test_unexpected_exit_is_reported(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            events = sup.subscribe()
            svc = await sup.start(child_spec("crashy"))
            os.kill(svc.pid, signal.SIGKILL)
            with trio.fail_after(60):
                async for e in events:
                    if e["kind"] == "service_state" and e["state"] == "failed":
                        return e

    e = trio.run(main)
    assert "exited unexpectedly" in e["detail"] and e["returncode"] == -signal.SIGKILL


def test_external_endpoint_only_checks_healthz(tmp_path):
    server = RpcServer("outside")
    ep = server.start(transport="socket")

    async def main():
        async with Supervisor(tmp_path) as sup:
            svc = await sup.start(ServiceSpec(name="env", endpoint=str(ep)))
            assert svc.state is ServiceState.READY and svc.pid is None and svc.health["name"] == "outside"
            with pytest.raises(ServiceStartError, match="failed healthz"):
                await sup.start(ServiceSpec(name="dead", endpoint="socket://127.0.0.1:1", healthz_timeout_s=2))

    try:
        trio.run(main)
        with RpcClient(ep, timeout=5) as c:
            assert c.healthz()["status"] == "ok"  # not stopped by the supervisor
        assert not list(tmp_path.glob("*.log"))
    finally:
        server.shutdown()


def test_spec_validation():
    with pytest.raises(ValueError, match="service name"):
        ServiceSpec(name="bad/name", argv=["x"])
    with pytest.raises(ValueError, match="argv"):
        ServiceSpec(name="x")
    with pytest.raises(ValueError, match="expected"):
        ServiceSpec(name="x", endpoint="http//x")
    with pytest.raises(ValueError, match="transport"):
        ServiceSpec(name="x", argv=["y"], transport="grpc")


def test_duplicate_names_rejected(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            await sup.start(child_spec("dup"))
            with pytest.raises(ValueError, match="already started"):
                await sup.start(child_spec("dup"))

    trio.run(main)


PARENT = """
import sys, trio
from rpent.services import ServiceSpec, Supervisor
async def main():
    async with Supervisor(sys.argv[1]) as sup:
        svc = await sup.start(ServiceSpec(name="kid", argv=[sys.executable, sys.argv[2], "--grandchild-pidfile", sys.argv[3]]))
        print(svc.pid, flush=True)
        await trio.sleep_forever()
trio.run(main)
"""


def test_no_orphans_when_the_parent_is_killed(tmp_path):
    """SIGKILL the supervising process: its server and the server's grandchild both end. The death
    signal may reach the server before the parent's other threads (and its stdin pipe) are gone."""
    pidfile = tmp_path / "gc.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), CHILD, str(pidfile)],
                              stdout=subprocess.PIPE, text=True)
    pids = []
    try:
        pids.append(int(parent.stdout.readline()))
        pids.append(int(pidfile.read_text()))  # written before the server binds, so before its pid line
        parent.kill()
        parent.wait()
        assert wait_gone(pids[0], 30), "server outlived its supervising parent"
        assert wait_gone(pids[1], 30), "grandchild outlived the supervising parent"
    finally:
        parent.kill()
        parent.stdout.close()
        for pid in pids:
            if not pid_gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_server_stopped_by_a_signal_stops_its_process_group(tmp_path):
    """The race behind the flaky orphan test, provoked deterministically: the kernel sends the parent's
    death signal when the parent's *forking thread* exits, possibly while the rest of the parent (and
    so the server's stdin pipe) still lives. A group-leading server with --parent-watch that is
    stopped by SIGTERM alone, its stdin still open, must still end its grandchild."""
    pidfile = tmp_path / "gc.pid"
    server = subprocess.Popen([sys.executable, CHILD, "--grandchild-pidfile", str(pidfile), "--host", "127.0.0.1",
                               "--port", "0", "--parent-watch"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    gc = None
    try:
        for line in server.stdout:
            if line.startswith("RPC server listening on"):
                break
        else:
            pytest.fail(f"the server exited before it was ready (code {server.wait()})")
        gc = int(pidfile.read_text())
        assert not pid_gone(gc)
        server.send_signal(signal.SIGTERM)  # stdin stays open: the parent watch does not fire
        assert server.wait(timeout=60) == 0
        assert wait_gone(gc, 30), "the grandchild outlived its server stopped by SIGTERM"
    finally:
        server.stdin.close()
        if server.poll() is None:
            server.kill()
        server.wait()
        server.stdout.close()
        if gc is not None and not pid_gone(gc):
            os.kill(gc, signal.SIGKILL)


def test_guest_mode_under_asyncio(tmp_path):
    async def trio_main():
        async with Supervisor(tmp_path) as sup:
            svc = await sup.start(child_spec("guest"))
            with svc.client(timeout=5) as c:
                return await trio.to_thread.run_sync(c.call, "pid") == svc.pid, svc

    async def host():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        trio.lowlevel.start_guest_run(
            trio_main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=lambda outcome: loop.call_soon_threadsafe(done.set_result, outcome),
            host_uses_signal_set_wakeup_fd=True,
        )
        return (await done).unwrap()

    ok, svc = asyncio.run(host())
    assert ok and svc.state is ServiceState.STOPPED and pid_gone(svc.pid)


def test_restart_replaces_the_process_and_keeps_teardown_order(tmp_path):
    async def main():
        async with Supervisor(tmp_path) as sup:
            a = await sup.start(child_spec("a"))
            b = await sup.start(child_spec("b"))
            old_pid = a.pid
            new = await sup.restart("a")
            assert new.state is ServiceState.READY and new.pid != old_pid
            assert wait_gone(old_pid, 10)
            assert [s.name for s in sup.services] == ["a", "b"]
            with new.client(timeout=5) as c:
                assert await trio.to_thread.run_sync(c.call, "pid") == new.pid
            return new, b

    new, b = trio.run(main)
    assert pid_gone(new.pid) and pid_gone(b.pid)
    assert (tmp_path / "a.log").read_text().count("RPC server listening on") == 2  # appended, not truncated


PARENT_STARTING = """
import sys, trio
from rpent.services import ServiceSpec, Supervisor
async def main():
    async with Supervisor(sys.argv[1]) as sup:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.start, ServiceSpec(name="kid", argv=[sys.executable, sys.argv[2], "--delay", "60"],
                                                      ready_timeout_s=120))
            while True:
                await trio.sleep(0.05)
                try:
                    svc = sup.get("kid")
                except KeyError:
                    continue
                # its first line is out: it will print nothing more before it binds (no SIGPIPE to end it)
                if svc.pid and any("starting (pid" in line for line in svc.log_tail):
                    break
            print(svc.pid, flush=True)
            await trio.sleep_forever()
trio.run(main)
"""


def test_a_server_still_starting_dies_with_its_killed_parent(tmp_path):
    """The parent is SIGKILLed while the server is still starting (it binds only after 60 s,
    so its --parent-watch thread is not running yet); the kernel's death signal ends it at once."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT_STARTING, str(tmp_path), CHILD],
                              stdout=subprocess.PIPE, text=True)
    child_pid = None
    try:
        child_pid = int(parent.stdout.readline())
        assert not pid_gone(child_pid), "the server did not start"
        parent.kill()
        parent.wait()
        assert wait_gone(child_pid, 10), "a server still starting outlived its SIGKILLed supervising parent"
    finally:
        parent.kill()
        parent.stdout.close()
        if child_pid is not None and not pid_gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_a_service_killed_before_its_reaper_runs_is_named_dead_in_the_run_error(tmp_path):
    # the planner's RPC sees the broken connection as soon as the server is killed; the run's error is
    # composed before the supervisor's reaper task has had its turn, and must still name the death
    from rpent.run.runner import _dead_services

    async def main():
        async with Supervisor(tmp_path) as sup:
            svc = await sup.start(child_spec("env_server"))
            os.kill(svc.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not pid_gone(svc.pid):
                assert time.monotonic() < deadline
                time.sleep(0.01)  # blocking on purpose: no checkpoint, so the reaper cannot run
            assert svc.returncode is None
            # a multi-threaded child shows as a zombie before its last thread is gone, and cannot be
            # reaped until then: poll (still without a checkpoint) until the kernel has the status
            while svc.exit_code() is None:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            return svc.exit_code(), _dead_services(sup)

    code, dead = trio.run(main)
    assert code == -signal.SIGKILL
    assert dead == "env_server exited with code -9 during the run; see env_server.log"
