"""Meta-World in the TUI session: ``rpent-tui --robot metaworld`` config, ``/rpent-task`` parsing
against the Meta-World suites (names or indices, positional or flag form), and one real TaskRun
(the ``expert`` planner, the env server under ``.venv-metaworld``) driven from the Run screen in a
Textual pilot, checked on the session's ``taskrun.json`` and the run layer's transcript."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rpent.session.commands import CommandError, TaskCommand, completions, parse_input
from rpent.session.model import SessionConfig, SessionConfigError
from tests.robots.metaworld.conftest import needs_metaworld


@pytest.mark.parametrize("line, expected", [
    ("/rpent-task --suite mt10 --task pick-place-v3 --seed 0", TaskCommand("mt10", 2, 0)),
    ("/rpent-task --suite=mt10 --task=pick-place --seed=4", TaskCommand("mt10", 2, 4)),
    ("/rpent-task mt10 pick-place-v3 1", TaskCommand("mt10", 2, 1)),
    ("/rpent-task mt10 9 0", TaskCommand("mt10", 9, 0)),
    ("/rpent-task --task reach-v3", TaskCommand("mt50", 43, 0)),  # default suite mt50, seed 0
])
def test_task_command_for_metaworld(line, expected):
    assert parse_input(line, "metaworld") == expected


@pytest.mark.parametrize("line, message", [
    ("/rpent-task libero_goal 1 0", "unsupported suite 'libero_goal' for --robot metaworld; known suites: mt10, mt50"),
    ("/rpent-task mt10 pick-plate 0", "no Meta-World task 'pick-plate' in mt10; tasks: reach-v3"),
    ("/rpent-task mt10 10 0", r"task must be an integer in 0..9 for mt10, got 10"),
    ("/rpent-task --suite mt10 --task", "--task needs a value"),
    ("/rpent-task --suit mt10 --task 1", "unknown option '--suit'"),
    ("/rpent-task --suite mt10 --seed 1", "--task is required"),
    ("/rpent-task mt10 reach-v3 -1", "seed must be an integer >= 0"),
])
def test_task_command_errors_for_metaworld(line, message):
    with pytest.raises(CommandError, match=message):
        parse_input(line, "metaworld")


def test_completions_and_config_for_metaworld(tmp_path):
    assert completions("/rpent-task m", "metaworld") == ["/rpent-task mt10 ", "/rpent-task mt50 "]
    assert completions("/rpent-task mt10 pick", "metaworld") == ["/rpent-task mt10 pick-place-v3 0"]
    # LIBERO's grammar is unchanged: its suites are not Meta-World's
    with pytest.raises(CommandError, match="unsupported suite 'mt10'"):
        parse_input("/rpent-task mt10 0 0")
    SessionConfig(output_dir=tmp_path, robot="metaworld", planner="expert", shared_services=()).validate()
    with pytest.raises(SessionConfigError, match="--robot metaworld uses no vla service"):
        SessionConfig(output_dir=tmp_path, robot="metaworld", shared_services=("vla",)).validate()
    with pytest.raises(SessionConfigError, match="unknown robot 'franka'; choose one of: libero, metaworld"):
        SessionConfig(output_dir=tmp_path, robot="franka").validate()
    from rpent_tui.cli import build_parser, session_config_from_args

    cfg = session_config_from_args(build_parser().parse_args(
        ["--robot", "metaworld", "--planner", "expert", "--shared", "auto", "--output-dir", str(tmp_path)]))
    assert cfg.robot == "metaworld" and cfg.shared_services == ()
    from rpent.session.defaults import default_make_run_config

    rc = default_make_run_config(cfg, TaskCommand("mt10", 2, 0), tmp_path / "tasks" / "0001", {})
    assert (rc.robot, rc.suite, rc.task, rc.max_episode_steps) == ("metaworld", "mt10", 2, 500)


@needs_metaworld
@pytest.mark.timeout(280)
def test_expert_taskrun_from_the_run_screen(tmp_path):
    """``/rpent-task --suite mt10 --task reach-v3 --seed 0`` typed on the Run screen of a session with
    ``--robot metaworld --planner expert``: the TaskRun succeeds on the environment predicate, its
    camera frames reach the Run screen, and taskrun.json / the transcript say so."""
    from rpent.session.core import Session
    from rpent_tui.app import AppOptions, RpentApp
    from rpent_tui.widgets.frames import FramePane

    config = SessionConfig(output_dir=tmp_path / "session", robot="metaworld", planner="expert", shared_services=())
    app = RpentApp(lambda sink: Session(config, sink), AppOptions(image_mode="halfblock", frame_interval_s=0.2))
    seen_frames: list[bool] = []

    async def wait(pilot, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            await pilot.pause(0.1)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait(pilot, lambda: app.session.state == "ready", 60, "session")
            message = app.screen.query_one("#message")
            message.focus()
            message.value = "/rpent-task --suite mt10 --task reach-v3 --seed 0"
            await pilot.press("enter")
            await wait(pilot, lambda: app.session.current is not None and app.session.current.frames, 200,
                       "camera frames")
            await pilot.pause(0.5)
            seen_frames.extend(p.has_frame for p in app.screen.query(FramePane))
            await wait(pilot, lambda: app.session.current.finished, 200, "TaskRun end")
            await pilot.pause(0.3)

    import asyncio

    asyncio.run(main())
    run = app.session.current
    assert run.state == "succeeded", (run.state, run.detail, run.error)
    assert seen_frames == [True, True]
    assert {"main", "wrist"} <= set(run.frames) and run.frames["main"].startswith(b"\x89PNG")
    dirs = sorted((tmp_path / "session" / "tasks").iterdir())
    assert [d.name for d in dirs] == ["0001_mt10_t0_s0"]
    record = json.loads((dirs[0] / "taskrun.json").read_text())
    assert (record["robot"], record["suite"], record["task"], record["seed"]) == ("metaworld", "mt10", 0, 0)
    assert record["planner"] == "expert" and record["state"] == "succeeded"
    assert record["environment_success"] is True and record["steps"] >= 1
    transcript = json.loads((dirs[0] / "transcript_mt10_t0_s0.json").read_text())
    assert transcript["environment_success"] is True and transcript["planner"] == "expert"
    assert [m["name"] for m in transcript["messages"] if m.get("role") == "tool"] == \
        ["view_env_state", "expert_policy", "finish"]
    states = json.loads(Path(dirs[0] / "states.json").read_text())
    assert states["episode"]["env_name"] == "reach-v3" and states["steps"][-1]["success"] is True


@needs_metaworld
@pytest.mark.slow
@pytest.mark.timeout(280)
def test_detached_session_runs_a_metaworld_taskrun(tmp_path, monkeypatch):
    """The default ``rpent-tui`` path: a detached session process with ``--robot metaworld``; an attached
    client starts ``pick-place-v3`` (the session parses it against Meta-World's suites), the TaskRun
    succeeds and its taskrun.json names the robot (slow: ~1 min loaded)."""
    import os
    import shutil
    import signal
    import tempfile

    import trio

    from rpent.session.client import RemoteSession
    from rpent.session.layout import SessionPaths
    from rpent.session.process import start_detached, stop_session, write_session_options

    monkeypatch.setenv("RPENT_SESSIONS_DIR", str(tmp_path / "registry"))
    root = Path(tempfile.mkdtemp(prefix="rpmw-", dir="/tmp"))  # Unix socket paths are limited to 107 bytes
    paths = SessionPaths(root / "sess")
    write_session_options(paths, SessionConfig(output_dir=paths.root, robot="metaworld", planner="expert",
                                               shared_services=()))
    proc = start_detached(paths)
    try:
        async def attach():
            client = RemoteSession(paths, lambda e: None)
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                with trio.fail_after(60):
                    while client.state != "ready":
                        await trio.sleep(0.05)
                assert client.config.robot == "metaworld"
                command = parse_input("/rpent-task mt10 pick-place-v3 0", client.config.robot)
                run = await trio.to_thread.run_sync(client.start_task, command)
                with trio.fail_after(220):
                    while not run.finished:
                        await trio.sleep(0.2)
                nursery.cancel_scope.cancel()
            client.close()
            return run.state

        assert trio.run(attach) == "succeeded"
        record_path = paths.root / "tasks" / "0001_mt10_t2_s0" / "taskrun.json"
        deadline = time.monotonic() + 60  # written once the TaskRun's env server has stopped
        while (record := json.loads(record_path.read_text()))["ended_at"] is None:
            assert time.monotonic() < deadline, f"taskrun.json never ended: {record}"
            time.sleep(0.2)
        assert (record["robot"], record["task"], record["state"]) == ("metaworld", 2, "succeeded")
        assert record["environment_success"] is True
        assert stop_session(paths)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
