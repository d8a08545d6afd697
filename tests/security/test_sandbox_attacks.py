"""Attacks on the code-policy sandbox, each bounded so that a sandbox
that fails cannot hurt the machine: fork counts are capped in the attack itself (a real
fork bomb runs only after the cap was seen to hold), memory attacks allocate a few hundred
MB, and every process of a cell is checked gone at teardown (conftest.make_runner)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rpent
from rpent.policy import WorkerLimits

from security_helpers import cell_processes, wait_gone


def _layer(result: dict, name: str) -> bool:
    return bool(result["sandbox"]["isolation"].get("layers", {}).get(name, {}).get("on"))


def _need(result: dict, *layers: str) -> None:
    """Skip (naming the missing kernel mechanism) when the sandbox reports none of ``layers``
    on; a sandbox that reports nothing is tested (and must hold) all the same."""
    reported = result["sandbox"]["isolation"].get("layers")
    if reported and not any(_layer(result, name) for name in layers):
        notes = result["sandbox"]["isolation"].get("notes")
        pytest.skip(f"none of the sandbox layers {layers} is available here: {notes}")


def _at_most(marker: str, n: int, timeout_s: float = 30.0) -> bool:
    """True once at most ``n`` processes of the cell are left (a loaded machine reaps killed ones late)."""
    deadline = time.monotonic() + timeout_s
    while len(cell_processes(marker)) > n and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(cell_processes(marker)) <= n


# cell code: attempt(name, fn) records "done" or the OSError's type in the dict ``out``
ATTEMPT = textwrap.dedent("""
    out = {}
    def attempt(name, fn):
        try:
            fn()
            out[name] = "done"
        except OSError as e:
            out[name] = type(e).__name__
""")


BOUNDED_FORKS = textwrap.dedent("""
    import os, time
    kids = 0
    for i in range(200):                      # bounded: 200 at most even with no protection
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids += 1
    kids
""")


def test_a_fork_bomb_is_bounded_to_the_cells_process_limit_and_ends_with_the_cell(make_runner, tmp_path):
    runner = make_runner(limits=WorkerLimits(max_processes=16), timeout_s=30)
    marker = str(tmp_path / "run")
    probe = runner.run_cell(BOUNDED_FORKS)
    _need(probe, "cgroup", "process_limit")
    assert probe["ok"], probe["exception"]
    kids = int(probe["value"])
    assert 4 <= kids < 16, f"{kids} forks succeeded with max_processes=16"
    assert probe["processes_ended"] >= kids            # the sleepers ended with their cell
    assert _at_most(marker, 3)                         # stub, init, worker

    # the cap holds: now the real thing, for 2 s
    runner.timeout_s = 2.0
    bomb = runner.run_cell("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert bomb["timed_out"] or bomb["worker_lost"]
    assert _at_most(marker, 3)
    after = runner.run_cell("1 + 1")
    assert after["value"] == "2"


def test_setsid_and_double_fork_do_not_outlive_the_cell(make_runner, tmp_path):
    runner = make_runner()
    marker = str(tmp_path / "run")
    result = runner.run_cell(textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
        time.sleep(0.5)
        'forked'
    """))
    _need(result, "pid_namespace", "cgroup")
    assert result["value"] == "'forked'"
    runner.close()
    assert wait_gone(marker, 30.0) == []


def test_setsid_escapee_dies_when_the_rpent_process_is_killed(tmp_path):
    """The parent (an rpent process running a code-policy cell) is SIGKILLed: no cleanup code
    of it runs, yet nothing of the cell survives it."""
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent.parent / "policy")!r})
        from policy_point_robot import PointRobotToolkit
        from rpent.policy import CodePolicyRunner
        r = CodePolicyRunner(PointRobotToolkit(), {str(run)!r})
        res = r.run_cell("import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n        time.sleep(120)\\n    os._exit(0)\\ntime.sleep(0.3)\\n'ok'")
        print(res["value"], res["sandbox"]["isolation"]["layers"]["pid_namespace"]["on"], flush=True)
        time.sleep(120)
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(rpent.__file__).parent.parent))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "'ok'", line
        if line[1] != "True":
            pytest.skip("no PID namespace on this machine")
        assert len(cell_processes(str(run))) >= 3      # stub, init, worker (+ the escapee)
        proc.kill()
        proc.wait(10)
        assert wait_gone(str(run), 30.0) == []
    finally:
        proc.kill()
        proc.wait(10)
        for pid in cell_processes(str(run)):
            os.kill(pid, signal.SIGKILL)


def test_forked_children_share_one_memory_limit(make_runner):
    limit = 512 * 1024**2
    runner = make_runner(limits=WorkerLimits(total_memory_bytes=limit), timeout_s=30)
    result = runner.run_cell(textwrap.dedent("""
        import os, time
        r, w = os.pipe()
        kids = []
        for i in range(4):
            pid = os.fork()
            if pid == 0:
                os.close(r)
                block = b"\\x01" * (300 * 1024 * 1024)     # touched: 300 MB resident
                os.write(w, b"%d," % os.getpid())
                time.sleep(30)
                os._exit(0)
            kids.append(pid)
        os.close(w)
        time.sleep(4)
        os.set_blocking(r, False)
        try:
            filled = {int(p) for p in os.read(r, 256).decode().split(",") if p}
        except BlockingIOError:
            filled = set()
        # a child that filled its 300 MB and was OOM-killed afterwards is not holding it any more:
        # count the children that filled theirs and are still alive now
        held = sum(1 for pid in filled if os.waitpid(pid, os.WNOHANG) == (0, 0))
        held
    """))
    _need(result, "cgroup")
    if result["worker_lost"]:
        # the OOM killer chose the worker itself: only the group limit kills at ~600 MB
        assert "SIGKILL" in result["worker_exit"]
    else:
        assert result["ok"], result["exception"]
        assert int(result["value"]) <= 1, "more than one 300 MB child is alive in a 512 MiB cell"


def test_a_cell_cannot_reach_outside_its_sandbox(make_runner, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o600)
    sibling = subprocess.Popen(["sleep", "60"])
    site = next(p for p in sys.path if p.endswith("site-packages"))
    project = Path(rpent.__file__).parent
    try:
        runner = make_runner()
        result = runner.run_cell(ATTEMPT + textwrap.dedent(f"""
            import os, resource, socket
            attempt("kill", lambda: os.kill({sibling.pid}, 9))
            attempt("prlimit", lambda: resource.prlimit({sibling.pid}, resource.RLIMIT_NOFILE, (1, 1)))
            attempt("read_secret", lambda: open({str(secret)!r}).read())
            attempt("read_accounts", lambda: open("/etc/passwd").read())
            attempt("write_project", lambda: open({str(project / "planted.py")!r}, "w").write("x"))
            attempt("write_site", lambda: open({os.path.join(site, "planted.pth")!r}, "w").write("x"))
            attempt("write_run_dir", lambda: open({str(tmp_path / "run" / "planted")!r}, "w").write("x"))
            attempt("write_scratch", lambda: open("scratch_ok.txt", "w").write("x"))
            attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
            out["scratch_back"] = open("scratch_ok.txt").read()
            out
        """))
        assert result["ok"], result["exception"]
        out = ast.literal_eval(result["value"])
        reported = result["sandbox"]["isolation"].get("layers")

        def guarded_by(*layers: str) -> bool:
            # a layer the machine lacks is reported off (and logged); a sandbox that reports nothing is held to all
            return not reported or any(_layer(result, name) for name in layers)

        import resource
        assert sibling.poll() is None, "the cell killed a process outside its sandbox"
        assert resource.prlimit(sibling.pid, resource.RLIMIT_NOFILE)[0] != 1
        if guarded_by("pid_namespace", "landlock"):
            assert out["kill"] != "done" and out["prlimit"] != "done"
        if guarded_by("landlock") or os.getuid() != 0:
            assert out["read_secret"] != "done"
        if guarded_by("landlock"):
            assert out["read_accounts"] != "done"  # the host's accounts are not on the read allowlist
        if guarded_by("readonly_fs", "landlock"):
            assert out["write_project"] != "done" and not (project / "planted.py").exists()
            assert out["write_site"] != "done" and not os.path.exists(os.path.join(site, "planted.pth"))
            assert out["write_run_dir"] != "done" and not (tmp_path / "run" / "planted").exists()
        if guarded_by("namespaces", "landlock"):
            assert out["tcp"] != "done"
        assert out["write_scratch"] == "done" and out["scratch_back"] == "x"
        on_host = tmp_path / "run" / "code_policy" / "scratch" / "scratch_ok.txt"
        assert on_host.exists() != _layer(result, "scratch_quota")   # a tmpfs quota keeps it off the disk
        if reported and not any(_layer(result, n) for n in ("pid_namespace", "landlock", "readonly_fs", "namespaces")):
            pytest.skip(f"no isolation layer on this machine: {result['sandbox']['isolation'].get('notes')}")
    finally:
        sibling.kill()
        sibling.wait()


def test_a_cell_looping_on_refused_calls_is_ended_and_its_record_stays_small(make_runner, tmp_path):
    runner = make_runner(max_calls=5, timeout_s=120)
    t0 = time.monotonic()
    result = runner.run_cell(textwrap.dedent("""
        n = 0
        while True:
            try:
                robo.view_env_state()
            except Exception:
                n += 1
    """))
    assert time.monotonic() - t0 < 60  # ended by the call budget, not by the 120 s cell timeout
    assert result["exception"]["type"] == "CallBudgetExhausted" and result["worker_lost"]
    assert len(result["robot_calls"]) == 7 and result["calls_made"] == 5
    path = tmp_path / "run" / result["result_path"]
    assert path.stat().st_size <= 1_000_000
    assert json.loads(path.read_text())["budget_exhausted"]


def test_a_cell_flooding_output_and_errors_keeps_a_small_record(make_runner, tmp_path):
    runner = make_runner(timeout_s=2)
    result = runner.run_cell(textwrap.dedent("""
        import sys
        try:
            while True:
                print("x" * 1000)
                sys.stderr.write("y" * 1000 + "\\n")
        finally:
            raise RuntimeError("z" * 5_000_000)
    """))
    assert result["timed_out"]
    assert result["output_dropped_chars"] > 0
    path = tmp_path / "run" / result["result_path"]
    assert path.stat().st_size <= 1_000_000


def test_a_cell_cannot_talk_to_a_unix_socket_on_the_host(make_runner, tmp_path):
    """A service listening on a Unix socket file (a tmux server in /tmp, D-Bus in /run) would run
    commands for whoever connects: neither the network namespace nor Landlock stops connect() to
    a socket file. The cell gets no socket at all (seccomp), nor a datagram pair it could point
    at one; a stream pair (asyncio, multiprocessing) still works."""
    import socket

    path = tmp_path / "host.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.settimeout(0.5)
    dgram_path = tmp_path / "host_dgram.sock"
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(str(dgram_path))
    dgram.settimeout(0.5)
    try:
        runner = make_runner()
        result = runner.run_cell(ATTEMPT + textwrap.dedent(f"""
            import socket
            def stream():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect({str(path)!r})
                s.sendall(b"run-shell touch /tmp/pwned")
            def dgram_pair():
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                a.sendto(b"hello", {str(dgram_path)!r})
            def vsock():
                socket.socket(getattr(socket, "AF_VSOCK", 40), socket.SOCK_STREAM).connect((2, 1024))
            def stream_pair():
                a, b = socket.socketpair()
                a.sendall(b"x")
                assert b.recv(1) == b"x"
            attempt("unix_stream", stream)
            attempt("unix_dgram_pair", dgram_pair)
            attempt("vsock", vsock)
            attempt("stream_pair", stream_pair)
            out
        """))
        assert result["ok"], result["exception"]
        out = ast.literal_eval(result["value"])
        layers = result["sandbox"]["isolation"].get("layers") or {}
        if layers and not layers.get("syscall_filter", {}).get("on"):
            pytest.skip(f"no seccomp filter here: {layers.get('syscall_filter')}")
        with pytest.raises(TimeoutError):
            server.accept()
        with pytest.raises(TimeoutError):
            dgram.recv(64)
        assert out["unix_stream"] == "PermissionError" and out["unix_dgram_pair"] == "PermissionError"
        assert out["vsock"] == "PermissionError"
        assert out["stream_pair"] == "done"
        assert "socket()" in layers["syscall_filter"]["detail"]
        # uncaught, the refusal says why: the sandbox, not the host, refused the socket
        refused = runner.run_cell("import socket\nsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)")
        assert refused["exception"]["type"] == "PermissionError", refused
        assert "a code cell may not open sockets" in refused["exception"]["message"]
        assert "robo.<tool>()" in refused["exception"]["message"]
        other = runner.run_cell("raise PermissionError(1, 'Operation not permitted')")
        assert "sockets" not in other["exception"]["message"]
        after = runner.run_cell("1 + 1")
        assert after["value"] == "2"
    finally:
        server.close()
        dgram.close()
