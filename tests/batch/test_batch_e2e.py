"""rpent-batch end to end with real scripted runs (each its own env server subprocess): parallel
runs, a second runner refused, an env server killed mid-run (infra error, retried, reported), the
runner killed mid-way and resumed, and (slow) the resumed report equal to an uninterrupted one."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.report import OUTCOME_FIELDS

FLAGS = ["--suites", "libero_object_swap", "--tasks", "4,9", "--seeds", "0-1", "--parallel", "2", "--no-video",
         "--no-progress"]


def _cmd(root, *extra):
    return [sys.executable, "-m", "rpent.cli.batch", *FLAGS, "--results-root", str(root), *extra]


def _ledger(root: Path) -> list[dict]:
    p = root / "attempts.jsonl"
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _gone(pids, timeout=90):
    _wait(lambda: not any(Path(f"/proc/{p}").exists() and "rpent" in _cmdline(p) for p in pids), timeout,
          "the killed runner's runs to stop")


def _report(root: Path) -> dict:
    return json.loads((root / "report.json").read_text())


def _outcomes(report: dict) -> dict:
    arm = report["arms"][0]
    rows = [{k: r[k] for k in ("suite", "task", *OUTCOME_FIELDS)} for r in arm["tasks"]]
    return {"overall": {k: arm["overall"][k] for k in OUTCOME_FIELDS}, "tasks": rows,
            "cells": {c["key"]: c["status"] for c in report["cells"]}}


def _kill_a_running_env_server(root: Path, runner_pid: int) -> str:
    """SIGKILL the env server of a run still in progress and return that cell's key.

    Whether a kill lands before its run has decided is a race this test cannot win on every machine
    (a 25-step episode can end between "listening" and the kill): the ledger says which it was. A kill
    that came too late (the attempt ended decided, not "infra") is tried again on the next running
    attempt, so the test does not depend on the machine's speed."""
    tried: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        ledger = _ledger(root)
        ended = {(e["key"], e["attempt"]) for e in ledger if e["event"] == "end"}
        running = [e for e in ledger if e["event"] == "start"
                   and (e["key"], e["attempt"]) not in ended | tried]
        if not running and len(ended) >= 4:
            break
        for start in running:
            env_log = Path(start["run_dir"]) / "env_server.log"
            if not (env_log.exists() and "listening" in env_log.read_text()):
                continue
            cell = start["key"].split("/")
            task_seed = f"--task {cell[2][1:]} --seed {cell[3][1:]} "
            pid = next((p for p in _descendants(runner_pid)
                        if "rpent.robots.libero.env_server" in _cmdline(p) and task_seed in _cmdline(p)), None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            attempt = (start["key"], start["attempt"])
            tried.add(attempt)
            end = _wait(lambda: next((e for e in _ledger(root) if e["event"] == "end"
                                      and (e["key"], e["attempt"]) == attempt), None), 180, "the killed cell to end")
            if end["status"] == "infra":
                return start["key"]
            break  # too late: that attempt had already decided; try the next running one
        time.sleep(0.2)
    raise AssertionError(f"no env server was killed while its run was in progress (tried {sorted(tried)})")


def _kill_mid_way_and_resume(root: Path, extra: list[str], *, kill_env_server: bool
                             ) -> tuple[subprocess.CompletedProcess, str | None]:
    """Start a batch, check a second runner is refused, optionally SIGKILL one run's env server
    (while its run is in progress), SIGKILL the runner after the first task outcome, then resume to
    the end. Returns the resumed runner's result and the key of the cell whose env server was killed."""
    killed = None
    log = open(root.parent / f"{root.name}-first.log", "w")
    runner = subprocess.Popen(_cmd(root, *extra), stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: sum(e["event"] == "start" for e in _ledger(root)) >= 2, 120, "two runs to start")
        second = subprocess.run(_cmd(root, *extra), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "is in use by another rpent-batch (pid %d" % runner.pid in second.stderr
        if kill_env_server:
            killed = _kill_a_running_env_server(root, runner.pid)
        _wait(lambda: any(e.get("status") in ("success", "failure") for e in _ledger(root)), 240,
              "a first task outcome")
        procs = _descendants(runner.pid)
        runner.kill()
        runner.wait(timeout=30)
        _gone(procs)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        log.close()
    return subprocess.run(_cmd(root, *extra), capture_output=True, text=True, timeout=280), killed


@pytest.mark.timeout(600)  # ~1 min on an idle 2-core machine; several on a loaded one
def test_env_server_killed_is_retried_runner_killed_is_resumed(tmp_path):
    root = tmp_path / "r"
    done, first_key = _kill_mid_way_and_resume(root, ["--max-episode-steps", "25"], kill_env_server=True)
    assert done.returncode == 0, done.stdout + done.stderr
    report = _report(root)
    o = report["arms"][0]["overall"]
    # every cell decided once; short episodes (25 env steps) cannot solve the task
    assert (o["planned"], o["n"], o["k"], o["infra"], o["pending"]) == (4, 4, 0, 0, 0)
    cell = next(c for c in report["cells"] if c["key"] == first_key)
    assert cell["infra_attempts"] == 1 and cell["decided_attempt"] >= 2
    # the run's own error: the env server's death as the client saw it (and, when the supervisor
    # reaped it first, "env_server exited with code -9")
    assert "env_server" in cell["infra_errors"][0] or "socket://127.0.0.1" in cell["infra_errors"][0]
    assert o["infra_attempts"] >= 1
    ends = [e for e in _ledger(root) if e["event"] == "end"]
    assert [e["status"] for e in ends if e["key"] == first_key][0] == "infra"
    # each decided attempt has its own complete run directory; no attempt directory was reused
    for c in report["cells"]:
        run_dir = Path(c["run_dir"])
        assert run_dir.name == f"attempt-{c['decided_attempt']}" and (run_dir / "states.json").exists()
    text = (root / "report.md").read_text()
    assert "## infrastructure errors" in text and first_key in text
    assert "| default | scripted | - | 0/4 | 0.0% | [0.0, 49.0] |" in done.stdout
    manifest = json.loads((root / "manifest.json").read_text())
    assert len(manifest["invocations"]) == 2  # the first and the resume; the refused runner recorded nothing
    inv = manifest["invocations"][-1]
    assert inv["exit_code"] == 0 and inv["rpent"]["source"].endswith("rpent") and inv["packages"]["scipy"]
    assert manifest["invocations"][0]["exit_code"] is None  # the killed runner never finished


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_interrupted_and_resumed_report_equals_uninterrupted(tmp_path):
    extra = ["--max-episode-steps", "180"]  # swap task 9 needs ~150 env steps, task 4 ~190: a mix of outcomes
    straight = subprocess.run(_cmd(tmp_path / "straight", *extra), capture_output=True, text=True, timeout=900)
    assert straight.returncode == 0, straight.stdout + straight.stderr
    resumed, _ = _kill_mid_way_and_resume(tmp_path / "resumed", extra, kill_env_server=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    a, b = _outcomes(_report(tmp_path / "straight")), _outcomes(_report(tmp_path / "resumed"))
    assert a["overall"]["n"] == 4
    assert {k.split("/", 1)[1]: v for k, v in a["cells"].items()} == {k.split("/", 1)[1]: v for k, v in b["cells"].items()}
    assert a["overall"] == b["overall"] and a["tasks"] == b["tasks"]
