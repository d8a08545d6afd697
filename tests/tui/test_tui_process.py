"""run_supervised against real child processes: output, logging, SIGTERM->SIGKILL, no orphaned grandchild."""

import os
import sys
import time

import pytest
import trio

from rpent.session.supervised import run_supervised


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_output_lines_are_streamed_and_logged(tmp_path):
    got: list[str] = []
    log = tmp_path / "job.log"
    code = "import sys; print('one'); print('two', file=sys.stderr); sys.stdout.write('tail'); sys.exit(3)"
    result = trio.run(lambda: run_supervised([sys.executable, "-c", code], on_lines=got.extend, log_path=log))
    assert result.returncode == 3
    assert sorted(got) == ["one", "tail", "two"]
    assert sorted(log.read_text().splitlines()) == ["one", "tail", "two"]


def test_cancel_kills_a_term_ignoring_child_and_its_grandchild(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    pids: list[int] = []
    ready = trio.Event()

    async def main():
        def on_lines(lines):
            if "ready" in lines:
                ready.set()

        async with trio.open_nursery() as nursery:
            async def job():
                await run_supervised([sys.executable, "-c", code], on_lines=on_lines, grace_s=0.3,
                                     on_started=pids.append)
            nursery.start_soon(job)
            with trio.fail_after(60):
                await ready.wait()
            t0 = time.monotonic()
            nursery.cancel_scope.cancel()
        return time.monotonic() - t0

    stop_s = trio.run(main)
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 30
    while (_alive(pids[0]) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pids[0]) and not _alive(grandchild)
    assert 0.25 <= stop_s < 30  # waited the grace period, then SIGKILL (it ignores SIGTERM: never by itself)


def test_missing_program_names_it():
    with pytest.raises(FileNotFoundError, match="cannot execute 'no-such-rpent-program'"):
        trio.run(lambda: run_supervised(["no-such-rpent-program"]))
