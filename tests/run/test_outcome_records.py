"""Records never say "false" for "never ran": the real `rpent` CLI stopped while its services start
(SIGTERM, an unreachable endpoint, an env server that exits at start) records the environment
predicate as unknown with the reason and where it stopped; a reused output directory is refused with
every earlier file unchanged; out-of-range seeds and step limits are refused before anything starts."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

RPENT = [sys.executable, "-m", "rpent.cli.main"]
TASK = ["--suite", "libero_object", "--task", "0", "--seed", "0", "--planner", "scripted", "--no-video"]
TRANSCRIPT = "transcript_object_t0_s0.json"


def _env(**extra) -> dict:
    return dict(os.environ, MUJOCO_GL="egl", **extra)


def _digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> hex)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_while_starting_is_unknown_and_the_reused_dir_is_refused_unchanged(tmp_path):
    out = tmp_path / "D"
    argv = RPENT + TASK + ["--output-dir", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 120
        while not (out / "env_server.log").exists():  # the env server is being spawned, not ready yet
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the env server was never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stdout[-2000:] + stderr[-2000:]
    assert "received SIGTERM" in stderr
    tr = json.loads((out / TRANSCRIPT).read_text())
    assert tr["environment_success"] is None, tr  # never read: not false
    assert tr["environment_success_unknown"].startswith(
        "the environment was never read: the run stopped while starting env_server (run cancelled (received SIGTERM))")
    assert (tr["label"], tr["stop_reason"], tr["stopped_during"]) == ("cancelled", "cancelled", "starting env_server")
    assert tr["recipe"] is None and not list(out.glob("*_recipe.jsonl"))
    assert not (out / "states.json").exists()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["argv"][1:] == argv[3:] and prov["interpreter_argv"][1:] == argv[1:]
    assert prov["config"]["seed"] == 0 and "commit" in prov["rpent"] and prov["versions"]["mujoco"]
    assert tr["provenance"]["started_at"] == prov["started_at"]

    # the same command again: refused, naming a file of the first run and a fresh directory; nothing changed
    before = _digest(out)
    assert {"run.log", "env_server.log", "steering.jsonl", TRANSCRIPT, "provenance.json"} <= set(before)
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_env())
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"--output-dir {out} already holds files (env_server.log, provenance.json, run.log and 2 more)" \
        in again.stderr
    assert f"--output-dir {out}-2" in again.stderr and "Traceback" not in again.stderr
    assert _digest(out) == before
    assert not (tmp_path / "D-2").exists()


def test_unreachable_env_endpoint_is_unknown_with_where_it_stopped(tmp_path):
    out = tmp_path / "u"
    port = _free_port()
    p = subprocess.run(RPENT + TASK + ["--env-endpoint", f"socket://127.0.0.1:{port}", "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 2, p.stdout + p.stderr
    tr = json.loads((out / TRANSCRIPT).read_text())
    assert tr["environment_success"] is None and tr["label"] == "error" and tr["stop_reason"] == "error"
    assert tr["stopped_during"] == f"reaching env_server at socket://127.0.0.1:{port}"
    assert tr["environment_success_unknown"].startswith(
        f"the environment was never read: the run stopped while reaching env_server at socket://127.0.0.1:{port}")
    assert f"socket://127.0.0.1:{port}" in tr["error"] and "\n" not in tr["error"]
    assert f"rpent: ERROR | finish=None | error={tr['error']}" in p.stdout
    assert not (out / "states.json").exists()
    assert json.loads((out / "provenance.json").read_text())["config"]["env_endpoint"] == f"socket://127.0.0.1:{port}"


def test_a_service_that_exits_at_start_names_its_own_reason(tmp_path):
    out = tmp_path / "egl"
    p = subprocess.run(RPENT + TASK + ["--output-dir", str(out)], capture_output=True, text=True, timeout=300,
                       env=_env(MUJOCO_EGL_DEVICE_ID="999"))
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    tr = json.loads((out / TRANSCRIPT).read_text())
    said = "the service said: env_server: MUJOCO_EGL_DEVICE_ID=999 is not an EGL device of this host"
    assert said in tr["error"] and "\n" not in tr["error"], tr["error"]
    assert "during the run" not in tr["error"]  # it never ran: the start failed
    assert said in p.stdout  # on the terminal too
    assert tr["environment_success"] is None and tr["label"] == "error"
    assert tr["stopped_during"] == "starting env_server"
    assert "is not an EGL device" in (out / "env_server.log").read_text()


@pytest.mark.parametrize("flags, needle", [
    (["--seed", "99999999999999999999"],
     "--seed 99999999999999999999 is out of range: valid seeds are 0..9223372036854775807"),
    (["--seed", str(2**63)], f"--seed {2**63} is out of range: valid seeds are 0..9223372036854775807"),
    (["--seed", "-1"], "--seed -1 is out of range: valid seeds are 0..9223372036854775807"),
    (["--max-episode-steps", str(2**63)],
     f"--max-episode-steps {2**63} is out of range: valid step limits are 1..9223372036854775807"),
    (["--task", "40"], "task 40 out of range for suite 'libero_object' (valid: 0..9)"),
])
def test_out_of_range_numbers_are_refused_before_anything_starts(tmp_path, flags, needle):
    out = tmp_path / "r"
    args = ["--suite", "libero_object", "--task", "0", "--planner", "scripted", *flags, "--output-dir", str(out)]
    p = subprocess.run(RPENT + args, capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()  # no run directory, no env server


def test_batch_and_flash_refuse_out_of_range_seeds(tmp_path, capsys):
    from rpent.cli.batch import main as batch_main
    from rpent.cli.flash import main as flash_main

    with pytest.raises(SystemExit) as ex:
        batch_main(["--suites", "libero_object", "--tasks", "0", "--seeds", "0-99999999999999999999",
                    "--results-root", str(tmp_path / "b")])
    assert ex.value.code == 2
    assert "--seeds: 99999999999999999999 is out of range; valid indices are 0..9223372036854775807" \
        in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        batch_main(["--suites", "libero_object", "--tasks", "0", "--seeds", "0-2000000",
                    "--results-root", str(tmp_path / "b")])
    assert ex.value.code == 2 and "names more than 1000000 indices" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    code = flash_main(["replay", "--flash-dir", str(tmp_path), "--suite", "libero_object", "--task", "0", "--seeds",
                       str(2**63), "--output-root", str(tmp_path / "f")])
    assert code == 2 and "--seeds 9223372036854775808 is out of range" in capsys.readouterr().err
    from rpent.session.commands import CommandError, parse_task_command

    with pytest.raises(CommandError, match=r"seed must be in 0\.\.9223372036854775807"):
        parse_task_command(f"/rpent-task libero_object 0 {2**63}")


@pytest.mark.parametrize("given", [".", ""])
def test_a_used_current_directory_as_output_dir_is_refused_in_one_line(tmp_path, given):
    """``--output-dir .`` (or an empty value) in a directory that holds files is refused like any other
    used directory, with a fresh sibling suggested by its absolute name; nothing is written."""
    (tmp_path / "notes.txt").write_text("mine")
    before = _digest(tmp_path)
    p = subprocess.run(RPENT + TASK + ["--output-dir", given], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert f"--output-dir {given} already holds files (notes.txt)" in p.stderr
    assert f"--output-dir {tmp_path}-2 " in p.stderr
    assert _digest(tmp_path) == before
