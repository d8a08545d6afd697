"""Operator workflows of the TUI Session on the record files.

Real components: the real ``rpent.run.run_task`` and LIBERO toolkit on one real env-server
subprocess (libero_object task 0 seed 0; every TaskRun resets its episode), the real ``api``
planner through the Anthropic SDK against the local provider endpoint (a scripted model), and the
real ``scripted`` planner. The operator answers through ``Session.reply_operator`` (what the
verdict window calls); Esc is ``Session.interrupt`` and ``/quit`` is ``Session.steer("/quit")``.
Every assertion reads ``taskrun.json``, ``transcript_*.json``, ``states.json`` or
``steering.jsonl``.

The TaskRuns attach to one env server (``make_run_config`` sets ``env_endpoint``) only to keep
the default test run short: the env server of a TaskRun in the product is always fresh.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import trio

from rpent.planners.provider_endpoint import ProviderEndpoint, Script, ToolCall, Turn
from rpent.session.commands import TaskCommand
from rpent.session.core import Session
from rpent.session.defaults import default_make_run_config
from rpent.session.model import SessionConfig


def _start_server_process(*args, **kwargs):
    """``tests/conftest.py``'s ``start_server_process`` (loaded by path: this folder has its own conftest)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rpent_tests_root_conftest",
                                                  Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.start_server_process(*args, **kwargs)


TASK = TaskCommand("libero_object", 0, 0)
TAG = "object_t0_s0"


@pytest.fixture(scope="module")
def env_server():
    server = _start_server_process([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", TASK.suite,
                                   "--task", str(TASK.task), "--seed", str(TASK.seed), "--max-episode-steps", "10000"],
                                  env={"MUJOCO_GL": "egl"}, timeout=300)
    yield server.endpoint
    server.stop()


def _session(tmp_path, env_endpoint, planner, **run_options):
    def make_run_config(config, command, output_dir, endpoints):
        cfg = default_make_run_config(config, command, output_dir, endpoints)
        cfg.env_endpoint, cfg.video = env_endpoint, False
        return cfg

    config = SessionConfig(output_dir=tmp_path / "session", planner=planner, shared_services=(),
                           model="anthropic:test-model" if planner == "api" else None, run_options=run_options)
    return Session(config, lambda event: None, shared_specs=[], make_run_config=make_run_config,
                   batch_interval_s=0.02)


def _drive(session, operator_answers=(), on_tool=None, timeout=240):
    """Run one TaskRun: answer each verdict request with the next of ``operator_answers`` and call
    ``on_tool(session, name)`` for each tool call the planner makes."""
    answers = list(operator_answers)
    session.seen_requests = []

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            run = session.start_task(TASK)
            seen = 0
            with trio.fail_after(timeout):
                while not run.finished:
                    operator = session.operator_for(run.id)
                    request = operator.pending if operator is not None else None
                    if request is not None and answers:
                        session.seen_requests.append(request)
                        answer, notes = answers.pop(0)
                        session.reply_operator(run.id, request.id, answer, notes)
                    calls = [e for e in run.transcript if e.get("event") == "tool_call"]
                    for call in calls[seen:]:
                        if on_tool is not None:
                            on_tool(session, call.get("name"))
                    seen = len(calls)
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        return run

    run = trio.run(main)
    taskrun = json.loads((run.output_dir / "taskrun.json").read_text())
    transcript = json.loads((run.output_dir / f"transcript_{TAG}.json").read_text())
    return run, taskrun, transcript


def _api_session(tmp_path, monkeypatch, env_endpoint, turns):
    ep = ProviderEndpoint(Script(turns))
    ep.__enter__()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return ep, _session(tmp_path, env_endpoint, "api", require_operator_verdict=True, base_url=ep.base_url)


FINISH_SUCCESS = Turn(tool_calls=(ToolCall("finish", {"status": "success", "summary": "the bowl is in the basket"}),))
ASK = Turn(tool_calls=(ToolCall("request_operator_verdict", {"question": "Is the bowl in the basket?"}),))


def test_failure_verdict_ends_the_taskrun_failed_on_record(tmp_path, monkeypatch, env_server):
    ep, session = _api_session(tmp_path, monkeypatch, env_server, [FINISH_SUCCESS, ASK, FINISH_SUCCESS])
    try:
        run, taskrun, tr = _drive(session, [("failure", "bowl still on the table")])
    finally:
        ep.__exit__(None, None, None)
    assert run.state == "failed" and taskrun["state"] == "failed" and tr["label"] == "failed"
    for doc in (taskrun, tr):
        verdict = doc["operator_verdict"]
        assert verdict["answer"] == "failure" and verdict["notes"] == "bowl still on the table"
        assert verdict["asked_by"] == "api" and verdict["time"] > 0 and verdict["question"]
        assert doc["environment_success"] is False
    # the refused finish(success) never becomes the final finish: the operator's verdict ended the episode
    assert tr["finish"]["status"] == "failure" and tr["finish"]["by"] == "operator"
    assert taskrun["finish"]["status"] == "failure"
    assert len(ep.model_requests()) == 2  # the planner was not asked for another turn after the verdict
    # defect 4: the verdict window shows the real toolkit's camera frames (agentview and wrist)
    request = session.seen_requests[0]
    assert set(request.frames) == {"agentview", "wrist"}
    assert [(title, shown) for title, shown in asyncio.run(_modal_panes(request))] == [
        ("agentview camera", True), ("wrist camera", True)]


async def _modal_panes(request):
    from textual.app import App

    from rpent_tui.screens.operator import OperatorModal
    from rpent_tui.widgets.frames import FramePane

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(OperatorModal("0001", request, "halfblock"))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        return [(pane.border_title, pane.has_frame) for pane in app.screen.query(FramePane)]


def test_continue_lets_the_planner_go_on_and_success_verdict_records_the_disagreement(tmp_path, monkeypatch,
                                                                                        env_server):
    look = Turn(tool_calls=(ToolCall("view_env_state"),))
    ep, session = _api_session(tmp_path, monkeypatch, env_server, [FINISH_SUCCESS, ASK, look, ASK, FINISH_SUCCESS])
    try:
        run, taskrun, tr = _drive(session, [("continue", "not yet"), ("success", "looks placed to me")])
    finally:
        ep.__exit__(None, None, None)
    tools = [b["name"] for m in tr["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert tools == ["finish", "request_operator_verdict", "view_env_state", "request_operator_verdict", "finish"]
    assert [v["answer"] for v in tr["operator_verdicts"]] == ["continue", "success"]
    # with a required verdict the operator decides; the env predicate (not met: nothing moved) is kept next to it
    assert taskrun["state"] == "succeeded" and tr["label"] == "succeeded"
    assert tr["environment_success"] is False and taskrun["environment_success"] is False
    assert "operator said success" in tr["disagreement"] and taskrun["disagreement"] == tr["disagreement"]
    assert "disagreement" in run.detail
    assert tr["finish"] == {"status": "success", "summary": "the bowl is in the basket", "by": "planner"}


def test_abort_verdict_ends_the_taskrun_aborted(tmp_path, monkeypatch, env_server):
    ep, session = _api_session(tmp_path, monkeypatch, env_server, [ASK, FINISH_SUCCESS])
    try:
        run, taskrun, tr = _drive(session, [("abort", "")])
    finally:
        ep.__exit__(None, None, None)
    assert run.state == "aborted" and taskrun["state"] == "aborted" and tr["label"] == "aborted"
    assert tr["operator_verdict"]["answer"] == "abort" and tr["finish"]["status"] == "abort"


def test_esc_stops_the_scripted_planners_motion_and_is_on_record(tmp_path, env_server):
    session = _session(tmp_path, env_server, "scripted")
    sent = []

    def on_tool(session, name):
        if name == "move_to" and not sent:
            sent.append(session.steer("please go slower"))
            sent.append(session.interrupt())

    run, taskrun, tr = _drive(session, on_tool=on_tool)
    assert sent[1] == "accepted"
    assert taskrun["state"] == "cancelled" and tr["stop_reason"] == "interrupted"
    assert tr["environment_success"] is False
    # the interrupted move_to stopped at an env-step boundary: its step says so
    steps = json.loads((run.output_dir / "states.json").read_text())["steps"]
    moved = [s for s in steps if (s.get("command") or {}).get("action") == "move_to"]
    assert len(moved) == 1 and moved[0]["result"]["code"] == "tool_cancelled"
    kinds = [json.loads(line)["kind"] for line in (run.output_dir / "steering.jsonl").read_text().splitlines()]
    assert kinds == ["operator_line", "interrupt"]
    assert [e["kind"] for e in tr["steering"]] == ["operator_line", "interrupt"]
    # a planner that cannot use text says so in the transcript
    assert any("cannot use operator text" in b.get("text", "") for m in tr["messages"] if m["role"] == "assistant"
               for b in m["content"])


def test_quit_ends_the_scripted_run_cleanly(tmp_path, env_server):
    session = _session(tmp_path, env_server, "scripted")
    replies = []

    def on_tool(session, name):
        if name == "move_to" and not replies:
            replies.append(session.steer("/quit"))

    run, taskrun, tr = _drive(session, on_tool=on_tool)
    assert replies == ["Stopping the run."]
    assert "TypeError" not in (tr["error"] or "") and tr["error"] == "operator quit"
    assert tr["stop_reason"] == "interrupted" and taskrun["state"] == "cancelled"
    assert [e["kind"] for e in tr["steering"]] == ["stop"] and tr["steering"][0]["reason"] == "operator quit"
