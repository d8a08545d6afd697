"""The main job end to end: the real `rpent` CLI and run loop on the real LIBERO simulator,
with real env-server subprocesses."""

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

from rpent.planners.base import PlannerConfig
from rpent.run import RunConfig, run_task
from rpent.services import Supervisor

RPENT = [sys.executable, "-m", "rpent.cli.main"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _rpent(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(RPENT + list(args), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, MUJOCO_GL="egl"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_scripted_episode_succeeds_and_leaves_full_record(tmp_path):
    out = tmp_path / "run"
    p = _rpent("--robot", "libero", "--suite", "libero_object", "--task", "0", "--seed", "0",
               "--planner", "scripted", "--output-dir", str(out))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "SUCCESS" in p.stdout
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["environment_success"] is True and tr["finish"]["status"] == "success" and tr["error"] is None
    assert tr["stats"]["tool_calls"] >= 8 and tr["env_steps"] > 50
    tools = [m["content"][0]["name"] for m in tr["messages"]
             if m["role"] == "assistant" and m["content"][0]["type"] == "tool_use"]
    assert tools[:3] == ["view_env_state", "segment", "segment"] and tools[-1] == "finish"
    assert "set_gripper" in tools and "release" in tools
    states = json.loads((out / "states.json").read_text())
    steps = states["steps"]
    assert states["failed_calls"] == []  # always present; empty when no call failed
    assert steps[0]["step_idx"] == 0 and steps[-1]["success"] is True
    for name in ("agentview.png", "agentview_policy.png", "agentview_depth.npz", "agentview_world.npz",
                 "agentview_seg.npz", "agentview_metadata.json", "wrist.png", "wrist_world.npz"):
        assert (out / name / f"{len(steps) - 1:02d}.{name.rsplit('.', 1)[1]}").exists(), name
    assert (out / "segment_overlay_00.png" / "00.png").exists()
    # the scripted planner reads state: images are rendered where a tool looked (--step-images auto),
    # and the record says which steps have them; every step keeps its state
    assert {s.get("capture") for s in steps} <= {"state_only", "on_demand"}
    assert steps[-1]["capture"] == "on_demand" and steps[-1]["rendered_cameras"] == ["agentview", "wrist"]
    only_state = [s for s in steps if s["capture"] == "state_only"]
    assert only_state and all(s["artifacts"] == [] and "robot0_eef_pos" in s["state"] for s in only_state)
    for s in steps:
        if s["capture"] == "on_demand":
            assert all(f"{cam}.png" in s["artifacts"] for cam in s["rendered_cameras"])
    recipe = [json.loads(line) for line in (out / "object_t0_s0_recipe.jsonl").read_text().splitlines()]
    assert recipe and all("action" in c for c in recipe)
    assert "run object_t0_s0 ended: environment_success=True" in (out / "run.log").read_text()
    assert "RPC server listening on" in (out / "env_server.log").read_text()
    import av

    with av.open(str(out / "episode.mp4")) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames == tr["env_steps"]
    # a second run into the same directory is refused, nothing overwritten
    again = _rpent("--suite", "libero_object", "--task", "0", "--output-dir", str(out), timeout=120)
    assert again.returncode == 2 and "refusing to write into it" in again.stderr


def test_unsupported_instruction_finishes_with_reason(tmp_path):
    out = tmp_path / "l90"
    p = _rpent("--suite", "libero_90", "--task", "42", "--planner", "scripted", "--output-dir", str(out),
               "--no-video")  # "put the frying pan under the cabinet shelf"
    assert p.returncode == 1, p.stdout + p.stderr
    tr = json.loads((out / "transcript_90_t42_s0.json").read_text())
    assert tr["finish"]["status"] == "unsupported" and "under the cabinet shelf" in tr["finish"]["summary"]
    assert tr["environment_success"] is False


@pytest.mark.parametrize("args,needle", [
    (["--suite", "libero_nope", "--task", "0"], "libero_object"),
    (["--suite", "libero_object", "--task", "42"], "42"),
    (["--suite", "libero_object", "--task", "0", "--planner", "api"], "requires a model id"),
    (["--suite", "libero_object", "--task", "0", "--planner", "claude_code", "--base-url", "http://x"],
     "--base-url is for --planner api only"),
    (["--suite", "libero_object", "--task", "0", "--policy-mode", "code"], "--code-file"),
    (["--suite", "libero_object", "--task", "0", "--env-endpoint", "http//x"], "HOST:PORT"),
    (["--suite", "libero_object", "--task", "0", "--code-file", str(EXAMPLES)],
     f"--code-file '{EXAMPLES}' is a directory; pass the policy's .py file"),
    (["--suite", "libero_object", "--task", "0", "--code-file", str(EXAMPLES / "pick_place_policy.py"),
      "--code-max-calls", "0"], "--code-max-calls must be >= 1 robot-tool calls per cell, got 0"),
    (["--suite", "libero_object", "--task", "0", "--code-file", str(EXAMPLES / "pick_place_policy.py"),
      "--code-timeout-s", "-1"], "--code-timeout-s must be > 0 seconds, got -1"),
    (["--suite", "libero_object", "--task", "0", "--cuda-device", "-1"], "--cuda-device must be a GPU index >= 0"),
])
def test_bad_cli_arguments(args, needle, tmp_path):
    p = _rpent(*args, "--output-dir", str(tmp_path / "r"), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stderr
    assert "Traceback" not in p.stderr


def test_required_verdict_without_a_terminal_is_refused_before_anything_starts(tmp_path):
    """Nobody can answer an operator request without a terminal: refused up front (exit 2, one line
    naming the fix), not at the end of a run whose finish can never be accepted."""
    out = tmp_path / "r"
    p = subprocess.run(RPENT + ["--suite", "libero_object", "--task", "0", "--planner", "scripted",
                                "--require-operator-verdict", "--output-dir", str(out)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MUJOCO_GL="egl"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        "rpent: error: --require-operator-verdict needs an operator at a terminal, but stdin is not a terminal; "
        "run rpent from a terminal, or use rpent-tui (or rpent --dashboard) to give verdicts there"]
    assert not out.exists()  # nothing started: no run directory, no env server log
    # the flash planner never asks: refused up front too, whatever stdin is
    p = subprocess.run(RPENT + ["--suite", "libero_object", "--task", "0", "--planner", "flash",
                                "--require-operator-verdict", "--output-dir", str(out)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MUJOCO_GL="egl"))
    assert p.returncode == 2 and "the flash planner replays a plan and never asks" in p.stderr, p.stderr
    assert not out.exists()
    # with a terminal on stdin the flag passes this check (the bad task is what is refused then)
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.run(RPENT + ["--suite", "libero_object", "--task", "42", "--require-operator-verdict",
                                    "--output-dir", str(out)],
                           stdin=slave, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MUJOCO_GL="egl"))
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 2 and "42" in p.stderr and "terminal" not in p.stderr, p.stderr


def test_output_dir_under_a_file_is_refused_in_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    p = _rpent("--suite", "libero_object", "--task", "0", "--output-dir", str(blocker / "sub"), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        f"rpent: error: --output-dir {blocker / 'sub'} cannot be a directory ({blocker} is a file); choose a new directory"]
    p = _rpent("--suite", "libero_object", "--task", "0", "--output-dir", str(blocker), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        f"rpent: error: --output-dir {blocker} is a file, not a directory; choose a new directory"]
    assert blocker.read_text() == "x"
    # a place that cannot be created (procfs refuses every mkdir): one line, no traceback
    p = _rpent("--suite", "libero_object", "--task", "0", "--output-dir", "/proc/rpent-nope", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        "rpent: error: --output-dir /proc/rpent-nope cannot be created in /proc (No such file or directory); "
        "choose a directory you can write to"], p.stderr


def test_a_code_file_that_is_not_python_is_refused_in_one_line_before_anything_starts(tmp_path):
    bad = tmp_path / "policy.py"
    bad.write_text("def f(:\n")
    before = bad.read_bytes()
    out = tmp_path / "o"
    p = _rpent("--suite", "libero_object", "--task", "0", "--policy-mode", "code", "--code-file", str(bad),
               "--output-dir", str(out), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [f"rpent: error: --code-file {bad}: syntax error at line 1: invalid syntax"]
    assert not out.exists() and bad.read_bytes() == before  # no env server, no run directory
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes(b"x = '\xe9'\n")
    p = _rpent("--suite", "libero_object", "--task", "0", "--code-file", str(latin1), "--output-dir", str(out),
               timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().startswith(f"rpent: error: --code-file {latin1}: not UTF-8 text") and not out.exists()


def test_an_error_raised_inside_the_run_is_recorded_by_its_own_message_not_as_an_exception_group(tmp_path):
    # a host that skips the command line's checks (a script, the TUI) hands the run a broken policy file
    bad = tmp_path / "policy.py"
    bad.write_text("def f(:\n")
    out = tmp_path / "o"
    cfg = RunConfig(suite="libero_object", task=0, seed=0, planner="scripted", output_dir=out, video=False,
                    planner_config=PlannerConfig(), policy_mode="code", code_file=str(bad))

    async def main():
        async with Supervisor(log_dir=out) as sup:
            return await run_task(cfg, sup)

    outcome = trio.run(main)
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert outcome.label == tr["label"] == "error"
    assert tr["error"] == f"ValueError: --code-file {bad}: syntax error at line 1: invalid syntax", tr["error"]


def test_a_cells_terminal_controls_never_reach_the_terminal_through_the_final_line(tmp_path):
    policy = tmp_path / "policy.py"
    policy.write_text('raise ValueError("boom\\x1b]2;PWNED\\x07\\x1b[2J")\n')
    out = tmp_path / "o"
    p = _rpent("--suite", "libero_object", "--task", "0", "--code-file", str(policy), "--output-dir", str(out),
               "--progress", "off", timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr  # the policy's exception is an error of the run
    assert "\x1b" not in p.stdout + p.stderr, (p.stdout + p.stderr)[-2000:]
    assert "error=policy code raised ValueError: boom\u241b]2;PWNED\u2407\u241b[2J |" in p.stdout, p.stdout
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["error"] == "policy code raised ValueError: boom\u241b]2;PWNED\u2407\u241b[2J"
    assert tr["planner"] == "code_file"  # the file ran as the policy: no planner did
    assert "planner=code_file" in (out / "run.log").read_text()
    # the cell's own record keeps the exact message
    cell = json.loads((out / "code_policy" / "cell_001.json").read_text())
    assert cell["exception"]["message"] == "boom\x1b]2;PWNED\x07\x1b[2J"


def test_an_exception_in_a_code_file_policy_is_an_error_of_the_run_not_a_task_failure(tmp_path):
    """A --code-file policy that raises ends the run as an error (exit 2, label and stop_reason
    ``error``, the error naming the exception); one that gives up with robo.finish('failure') is a
    task failure (exit 1, label ``failed``, no error)."""
    raising = tmp_path / "raising.py"
    raising.write_text("s = robo.view_env_state()\nraise KeyError('no grasp pose for the bowl')\n")
    giving_up = tmp_path / "giving_up.py"
    giving_up.write_text("s = robo.view_env_state()\nrobo.finish('failure', 'no grasp pose for the bowl')\n")
    runs = {}
    for name, policy in (("raising", raising), ("giving_up", giving_up)):
        out = tmp_path / name
        p = _rpent("--suite", "libero_object", "--task", "0", "--policy-mode", "code", "--code-file", str(policy),
                   "--output-dir", str(out), "--no-video", "--progress", "off", timeout=300)
        runs[name] = (p, json.loads((out / "transcript_object_t0_s0.json").read_text()))
    p, tr = runs["raising"]
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "rpent: ERROR" in p.stdout, p.stdout
    assert (tr["label"], tr["stop_reason"], tr["environment_success"]) == ("error", "error", False), tr
    assert tr["error"] == "policy code raised KeyError: 'no grasp pose for the bowl'", tr["error"]
    p, tr = runs["giving_up"]
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "rpent: NOT SOLVED" in p.stdout, p.stdout
    assert (tr["label"], tr["stop_reason"], tr["error"]) == ("failed", "finished", None), tr
    assert tr["finish"]["status"] == "failure"


def test_killed_env_server_keeps_record_and_leaves_no_orphans(tmp_path):
    out = tmp_path / "killed"
    cfg = RunConfig(suite="libero_object", task=0, seed=0, planner="scripted", output_dir=out, video=False,
                    planner_config=PlannerConfig(), record_trajectory=True)
    pids: dict[str, int] = {}

    async def main():
        async with Supervisor(log_dir=out) as sup:
            def on_event(ev):
                # kill the env server as soon as the first motion begins
                if ev.get("kind") == "tool_call" and ev.get("name") == "move_to" and "env" not in pids:
                    pids["env"] = sup.get("env_server").pid
                    os.kill(pids["env"], signal.SIGKILL)

            return await run_task(cfg, sup, on_event=on_event)

    outcome = trio.run(main)
    assert "env" in pids
    # the predicate could not be read at the end: unknown (null) with the reason, never the last
    # value the env reported before it died (false here)
    assert outcome.environment_success is None and outcome.label == "error"
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["environment_success"] is None and tr["label"] == "error"
    reason = tr["environment_success_unknown"]
    assert reason.startswith("could not read the environment's success at the end of the run (")
    assert "the env last reported success=False after" in reason and "\n" not in reason
    assert outcome.environment_success_unknown == reason and tr["error"]
    assert tr["stopped_during"] == "running the planner" and tr["stop_reason"] == "error"
    assert "env_server exited with code -9 during the run; see env_server.log" in tr["error"]
    (task_json,) = out.glob("trajectories/*/task.json")  # the trajectory record says the same
    task = json.loads(task_json.read_text())
    assert task["environment_success"] is None and task["status"] == "error" and reason in task["error"]
    # the planner saw the service failure as tool errors naming the endpoint/transport and stopped
    errors = [m["content"].get("error", "") for m in tr["messages"] if m["role"] == "tool" and m["is_error"]]
    assert errors and any("env_server" in e or "127.0.0.1" in e for e in errors), errors
    states = json.loads((out / "states.json").read_text())
    assert states["steps"][0]["step_idx"] == 0
    # the failed call and its error are in states.json too, not only the transcript
    failed = states["failed_calls"]
    assert failed and failed[0]["tool"] == "move_to" and failed[0]["after_step"] == len(states["steps"]) - 1
    assert any(e.startswith(failed[0]["error"][:60]) or failed[0]["error"] in e for e in errors), (failed, errors)
    assert failed[0]["call_id"] in {m["tool_call_id"] for m in tr["messages"] if m["role"] == "tool"}
    assert not _alive(pids["env"])


def test_cancelled_run_keeps_its_transcript(tmp_path):
    out = tmp_path / "cancelled"
    cfg = RunConfig(suite="libero_object", task=0, seed=0, planner="scripted", output_dir=out, video=False,
                    planner_config=PlannerConfig())

    async def main():
        async with Supervisor(log_dir=out) as sup:
            async with trio.open_nursery() as nursery:
                token = trio.lowlevel.current_trio_token()

                def on_event(ev):
                    # cancel the run (as Ctrl-C or a TUI task switch would) once the robot moves
                    if ev.get("kind") == "tool_call" and ev.get("name") == "move_to":
                        token.run_sync_soon(nursery.cancel_scope.cancel)

                nursery.start_soon(lambda: run_task(cfg, sup, on_event=on_event))
        return sup.get("env_server").pid

    env_pid = trio.run(main)
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["stop_reason"] == "cancelled" and "cancelled" in tr["error"]
    assert any(m["role"] == "tool" for m in tr["messages"])  # what the planner did is kept
    assert not _alive(env_pid)


def test_planner_ending_without_finish_records_stop_reason_and_error(tmp_path):
    """A planner that ends its turn without calling finish is not silent."""
    from rpent.planners.provider_endpoint import ProviderEndpoint, Script, Turn

    out = tmp_path / "nofinish"
    with ProviderEndpoint(Script([Turn(text="I am done thinking.")])) as ep:
        p = subprocess.run(RPENT + ["--suite", "libero_object", "--task", "0", "--planner", "api", "--model",
                                    "anthropic:claude-test", "--base-url", ep.base_url, "--max-episode-steps", "5",
                                    "--no-video", "--output-dir", str(out)],
                           capture_output=True, text=True, timeout=280,
                           env=dict(os.environ, MUJOCO_GL="egl", ANTHROPIC_API_KEY="k"))
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["finish"] is None and tr["stop_reason"] == "end_turn"
    assert tr["error"] == ("the planner stopped without calling finish: the model ended its turn "
                           "(stop_reason end_turn)")
    assert "\n" not in tr["error"] and tr["error"] in p.stdout + p.stderr


def test_sigterm_records_a_cancelled_run_that_names_the_signal(tmp_path):
    """SIGTERM (an SSH drop, a batch runner stopping its runs) ends `rpent` with exit 2 and a record
    that says the run was cancelled by that signal, not by an operator."""
    out = tmp_path / "term"
    proc = subprocess.Popen(RPENT + ["--suite", "libero_object", "--task", "0", "--planner", "scripted", "--no-video",
                                     "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MUJOCO_GL="egl"))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # wait for the first recorded step: the robot is moving
            try:
                if json.loads((out / "states.json").read_text())["steps"]:
                    break
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                pass
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the run never recorded a step")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    assert "received SIGTERM" in err
    tr = json.loads((out / "transcript_object_t0_s0.json").read_text())
    assert tr["stop_reason"] == "cancelled"
    assert "received SIGTERM" in tr["error"] and "operator" not in tr["error"], tr["error"]
    assert tr["environment_success"] is False


def test_a_run_on_an_init_state_that_blows_up_says_so_in_its_record(tmp_path):
    """libero_10_task t5 seed 0: the simulation blows up in the first steps (the book and the mug
    start in contact); the record, the final line and the batch reading of the run all say where."""
    out = tmp_path / "run"
    p = _rpent("--suite", "libero_10_task", "--task", "5", "--seed", "0", "--planner", "scripted",
               "--no-video", "--output-dir", str(out))
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "the simulation became unstable at env step" in p.stdout
    tr = json.loads((out / "transcript_10_task_t5_s0.json").read_text())
    bad = tr["environment_unstable"]
    assert tr["environment_success"] is False and bad["joint"] == "black_book_1_joint0"
    assert 1 <= bad["env_step"] <= tr["env_steps"] and bad["warning"] == "bad qacc"
    from rpent.batch.matrix import Cell
    from rpent.batch.records import classify_attempt

    from rpent.batch.matrix import Arm, Matrix
    from rpent.batch.records import CellState
    from rpent.batch.report import build_report, render_markdown

    cell = Cell("a", "libero_10_task", 5, 0, 0)
    res = classify_attempt(cell, 1, out, {"exit_code": 1, "wall_s": 30.0})
    assert res.status == "failure" and res.unstable == bad["detail"]
    report = build_report(Matrix(("libero_10_task",), (5,), (0,), arms=(Arm("a"),)),
                          {cell.key: CellState(cell, [res])})
    assert report["arms"][0]["overall"]["unstable"] == 1 and report["arms"][0]["overall"]["failures"] == 1
    md = render_markdown(report)
    assert "## simulation unstable" in md and f"| {cell.key} | failure | the simulation became unstable" in md
