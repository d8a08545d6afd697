"""A second stop signal while `rpent` is already stopping must not kill it before its record is written.

`timeout(1)` signals the command and then its whole process group, and an SSH drop can bring SIGHUP
after a SIGTERM: the real CLI gets two signals in a row and still writes a cancelled record and exits 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

RPENT = [sys.executable, "-m", "rpent.cli.main"]
TASK = ["--suite", "libero_object", "--task", "0", "--seed", "0", "--planner", "scripted", "--no-video"]


def test_sigterm_then_sighup_while_starting_still_writes_the_cancelled_record(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(RPENT + TASK + ["--output-dir", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, MUJOCO_GL="egl"))
    try:
        deadline = time.monotonic() + 120
        while not (out / "env_server.log").exists():  # the env server is being spawned
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the env server was never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, (proc.returncode, stdout[-2000:], stderr[-2000:])
    # whichever rpent saw first stops the run (both pending at once: the kernel delivers SIGHUP first)
    first = "SIGHUP" if "rpent: received SIGHUP; stopping the run" in stderr else "SIGTERM"
    second = {"SIGHUP": "SIGTERM", "SIGTERM": "SIGHUP"}[first]
    assert f"rpent: received {first}; stopping the run" in stderr
    assert f"rpent: received {second} again; still stopping the run and writing its record" in stderr
    assert f"rpent: interrupted; the run record is in {out}" in stderr
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert (tr["label"], tr["stop_reason"]) == ("cancelled", "cancelled"), tr
    assert tr["environment_success"] is None and f"received {first}" in tr["error"]
    steering = [json.loads(line) for line in (out / "steering.jsonl").read_text().splitlines()]
    assert [s["reason"] for s in steering if s["kind"] == "stop"][0] == f"received {first}"
