"""Session/TaskRun model under plain trio with the real rpent.services.Supervisor and real tiny services."""

from __future__ import annotations

import json
import os

import pytest
import trio

from rpent.session.commands import TaskCommand
from rpent.session.core import Session
from rpent.session.model import (ENV_ENDPOINT_REFUSED, OperatorPrompt, RunEvents, ServiceLog, SessionConfig,
                                 SessionConfigError, SessionNotReady)
from tui_helpers import StandInRun, plain_run_config, tiny_spec


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def make_session(tmp_path, run, shared=("vla", "sam3"), fail=()):
    sink: list = []
    specs = [tiny_spec(n, *(("--fail",) if n in fail else ())) for n in shared]
    session = Session(SessionConfig(output_dir=tmp_path / "session", planner="scripted"), sink.append,
                      run_task=run, shared_specs=specs, make_run_config=plain_run_config,
                      batch_interval_s=0.02)
    return session, sink


def test_env_endpoint_is_refused_with_the_seed_reason(tmp_path):
    cfg = SessionConfig(output_dir=tmp_path, env_endpoint="http://127.0.0.1:9")
    with pytest.raises(SessionConfigError) as err:
        Session(cfg, print)
    assert str(err.value) == ENV_ENDPOINT_REFUSED


def test_taskrun_with_operator_verdict_records_and_stops_every_service(tmp_path, png_bytes):
    run = StandInRun(ask=True, png=png_bytes)
    session, sink = make_session(tmp_path, run)
    pids = []

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            assert session.state == "ready"
            assert {n: v.state for n, v in session.services.items()} == {"vla": "ready", "sam3": "ready"}
            assert all(v.endpoint.startswith("http://127.0.0.1:") and v.pid for v in session.services.values())
            taskrun = session.start_task(TaskCommand("libero_goal", 1, 0))
            assert taskrun.id == "0001"
            with trio.fail_after(120):
                while session.operator_for("0001") is None or session.operator_for("0001").pending is None:
                    await trio.sleep(0.02)
            request = session.operator_for("0001").pending
            session.reply_operator("0001", request.id, "success", "bowl on plate")
            with trio.fail_after(120):
                done = await session.wait_run("0001")
            with trio.fail_after(120):  # let the 4 Hz batchers flush the run's 8 events
                while sum(len(m.events) for m in sink if isinstance(m, RunEvents)) < 8:
                    await trio.sleep(0.05)
            pids.extend(v.pid for v in session.services.values() if v.pid)
            nursery.cancel_scope.cancel()
        return done

    done = trio.run(main)
    assert done.state == "succeeded"
    assert done.output_dir == tmp_path / "session" / "tasks" / "0001_libero_goal_t1_s0"
    assert run.calls[0]["output_dir"] == done.output_dir and run.calls[0]["env_endpoint"] is None
    assert run.calls[0]["vla_endpoint"] == session.services["vla"].endpoint
    assert run.answers == [("success", "bowl on plate")]
    record = json.loads((done.output_dir / "taskrun.json").read_text())
    assert record["state"] == "succeeded" and record["environment_success"] is True and record["steps"] == 1
    assert done.tokens_in == 1200 and done.tool_calls == 1 and done.frames["main"] == png_bytes
    assert [e["event"] for e in done.transcript] == ["text", "tool_call", "tool_result"]
    env = session.services["env_server@0001"]
    assert env.scope == "0001"
    assert any(isinstance(m, OperatorPrompt) for m in sink)
    batches = [m for m in sink if isinstance(m, RunEvents)]
    assert sum(len(b.events) for b in batches) == 8 and len(batches) < 8
    logs = [line for m in sink if isinstance(m, ServiceLog) and m.name == "vla" for line in m.lines]
    assert logs[:3] == ["tiny log line 0", "tiny log line 1", "tiny log line 2"]
    assert len(pids) == 3 and not any(_alive(p) for p in pids)
    assert all(v.state == "stopped" for v in session.services.values())


def test_new_task_during_a_run_cancels_the_old_one(tmp_path):
    run = StandInRun(hang=True)
    session, _ = make_session(tmp_path, run, shared=("vla",))

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            first = session.start_task(TaskCommand("libero_goal", 0, 0))
            with trio.fail_after(120):
                while first.state != "running" or not first.transcript:
                    await trio.sleep(0.02)
            run.hang = False
            second = session.start_task(TaskCommand("libero_object", 2, 5))
            with trio.fail_after(120):
                await session.wait_run(second.id)
            nursery.cancel_scope.cancel()
        return first, second

    first, second = trio.run(main)
    assert first.state == "cancelled" and "replaced by TaskRun 0002" in first.detail
    first_record = json.loads((first.output_dir / "taskrun.json").read_text())
    assert first_record["state"] == "cancelled" and first_record["replaced_by"] == "0002"
    assert second.id == "0002" and second.state == "succeeded"
    assert second.output_dir.name == "0002_libero_object_t2_s5"
    assert session.services["env_server@0001"].state == "stopped"
    assert (first.output_dir / "env_server.log").is_file()  # the TaskRun's services log next to its record


class EndsWhileReplaced(StandInRun):
    """First call: the run layer is already ending (its predicate read, its record written) when the
    operator starts another task; it returns its outcome anyway. Later calls: the plain stand-in."""

    def __init__(self) -> None:
        super().__init__()
        self.ending = trio.Event()
        self.go = trio.Event()

    async def __call__(self, config, supervisor, *, operator, steering=None, on_event=None):
        if self.calls:
            return await super().__call__(config, supervisor, operator=operator, steering=steering, on_event=on_event)
        self.calls.append(config)
        await supervisor.start(tiny_spec("env_server", "--lines", "2"))
        on_event({"kind": "status", "state": "running", "detail": "env ready"})
        self.ending.set()
        with trio.CancelScope(shield=True):  # closing the video, writing the transcript: not interruptible
            await self.go.wait()
        return {"environment_success": True, "label": "succeeded", "stop_reason": "finished", "error": None,
                "finish": {"status": "success", "summary": "done"}, "output_dir": str(config["output_dir"])}


def test_a_replace_that_lands_after_the_run_ended_keeps_the_runs_outcome(tmp_path):
    run = EndsWhileReplaced()
    session, _ = make_session(tmp_path, run, shared=("vla",))

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            first = session.start_task(TaskCommand("libero_goal", 0, 0))
            with trio.fail_after(120):
                await run.ending.wait()
            second = session.start_task(TaskCommand("libero_object", 2, 5))
            run.go.set()
            with trio.fail_after(120):
                await session.wait_run(first.id)
                await session.wait_run(second.id)
            nursery.cancel_scope.cancel()
        return first, second

    first, second = trio.run(main)
    assert first.state == "succeeded", first.detail
    assert "replaced by TaskRun 0002" in first.detail and "after the run had ended (succeeded)" in first.detail
    record = json.loads((first.output_dir / "taskrun.json").read_text())
    assert record["state"] == "succeeded" and record["replaced_by"] == "0002" and record["ended_at"]
    assert second.state == "succeeded"


def test_failed_shared_service_makes_the_session_fatal(tmp_path):
    session, _ = make_session(tmp_path, StandInRun(), shared=("vla",), fail=("vla",))

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            with pytest.raises(SessionNotReady, match="session is fatal: shared service 'vla' failed"):
                session.start_task(TaskCommand("libero_goal", 0, 0))
            nursery.cancel_scope.cancel()

    trio.run(main)
    vla = session.services["vla"]
    assert session.state == "fatal" and vla.state == "failed"
    assert "exit" in vla.last_error.lower() or "code 1" in vla.last_error
    assert "error: checkpoint not found (test)" in list(vla.lines)
    assert session.input_mode == "disabled"


class RaisingRun:
    """run_task stand-in that fails like the run layer refusing a directory, inside a nursery (as the
    Session's own nurseries wrap it)."""

    async def __call__(self, config, supervisor, *, operator, steering=None, on_event=None):
        async with trio.open_nursery():
            raise FileExistsError(f"{config['output_dir']} already holds a run record (states.json); refusing to "
                                  "overwrite it. Choose a new --output-dir (or omit it for a fresh timestamped one).")


def _one_run(session, command):
    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            run = session.start_task(command)
            with trio.fail_after(120):
                await session.wait_run(run.id)
            nursery.cancel_scope.cancel()
        return run

    return trio.run(main)


def test_reused_output_dir_never_overwrites_an_earlier_taskrun(tmp_path):
    """Ids restarted at 0001 in each session, so a second session in the same
    --output-dir wrote into the first session's TaskRun directory."""
    first = _one_run(make_session(tmp_path, StandInRun(), shared=())[0], TaskCommand("libero_object", 0, 0))
    before = (first.output_dir / "taskrun.json").read_bytes()
    assert json.loads(before)["state"] == "succeeded"
    second = _one_run(make_session(tmp_path, StandInRun(), shared=())[0], TaskCommand("libero_object", 0, 0))
    assert (first.id, second.id) == ("0001", "0002")
    assert second.output_dir.name == "0002_libero_object_t0_s0" and second.output_dir != first.output_dir
    assert (first.output_dir / "taskrun.json").read_bytes() == before  # untouched
    assert json.loads((second.output_dir / "taskrun.json").read_text())["state"] == "succeeded"


def test_run_layer_refusal_reaches_the_screen_as_one_clean_line(tmp_path):
    session, _ = make_session(tmp_path, RaisingRun(), shared=())
    run = _one_run(session, TaskCommand("libero_object", 0, 0))
    assert run.state == "error"
    assert "ExceptionGroup" not in run.error and "sub-exception" not in run.error
    assert run.error.startswith(str(run.output_dir)) and "Choose a new --output-dir" in run.error
    assert "\n" not in run.error
    record = json.loads((run.output_dir / "taskrun.json").read_text())
    assert record["state"] == "error" and record["error"] == run.error


def test_taskrun_json_carries_the_run_label_and_why_the_predicate_is_unknown(tmp_path):
    """``taskrun.json`` carries the run record's ``label`` and ``environment_success_unknown`` next to
    ``environment_success`` (README: the same fields as the transcript), e.g. after the env server died."""
    from rpent.session.model import TaskRunView

    run = TaskRunView("0001", TaskCommand("libero_object", 0, 0), tmp_path / "0001_libero_object_t0_s0")
    reason = "could not read the environment's success at the end of the run (env server gone)"
    run.apply({"kind": "finished", "outcome": {"environment_success": None, "label": "error",
                                               "environment_success_unknown": reason}})
    record = run.record()
    assert record["label"] == "error" and record["environment_success"] is None
    assert record["environment_success_unknown"] == reason
    assert json.loads(json.dumps(record))["environment_success_unknown"] == reason
