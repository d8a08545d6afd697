"""Helpers for the TUI tests: real tiny services, a stand-in for ``rpent.run.run_task``, app and key helpers.

Imported as ``tui_helpers`` (pytest puts this folder on ``sys.path``; the ``tui_`` prefix avoids
clashes with other test folders' helper modules)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

TINY = str(Path(__file__).with_name("tiny_service.py"))


def tiny_spec(name: str, *extra: str):
    """A ServiceSpec for the tiny real RPC service."""
    from rpent.services import ServiceSpec

    return ServiceSpec(name=name, argv=[sys.executable, TINY, *extra], ready_timeout_s=30, stop_grace_s=1)


class StandInRun:
    """Stand-in for ``rpent.run.run_task`` until the run layer lands (marked seam; see report).

    Like ``rpent.run.run_task``: starts a fresh ``env_server`` through the given (per-TaskRun) supervisor,
    emits status/planner/step/frames events, asks the operator for a verdict when ``ask`` is set,
    then returns an outcome; blocks forever with ``hang=True`` (to be cancelled).
    """

    def __init__(self, *, ask: bool = False, hang: bool = False, png: bytes = b"") -> None:
        self.ask, self.hang, self.png = ask, hang, png
        self.calls: list[Any] = []
        self.answers: list[tuple[str, str]] = []

    async def __call__(self, config, supervisor, *, operator, steering=None, on_event=None):
        self.calls.append(config)
        n = len(self.calls)
        await supervisor.start(tiny_spec("env_server", "--lines", "2"))
        on_event({"kind": "status", "state": "running", "detail": "env ready"})
        on_event({"kind": "planner", "event": "text", "text": "I will pick up the bowl."})
        on_event({"kind": "planner", "event": "tool_call", "name": "move_to", "args": {"xyz": [0.1, 0.2, 1.0]}, "call_id": "c1"})
        on_event({"kind": "step", "step": 0, "terminated": False, "truncated": False, "success": False, "tool": "move_to"})
        on_event({"kind": "frames", "step": 0, "main": self.png, "wrist": self.png})
        on_event({"kind": "planner", "event": "tool_result", "call_id": "c1", "result": {"final_dist_m": 0.004}})
        on_event({"kind": "planner", "event": "usage", "input_tokens": 1200, "output_tokens": 80, "tool_calls": 1})
        if self.hang:
            await trio.sleep_forever()
        if self.ask:
            answer = await trio.to_thread.run_sync(operator.ask, "verdict", "Did it succeed?", None,
                                                   {"main": self.png})
            self.answers.append(answer)
        success = not self.ask or self.answers[-1][0] == "success"
        on_event({"kind": "finished", "outcome": {"environment_success": success}})
        return {"environment_success": success, "finish": {"status": "success", "summary": "done"},
                "error": None, "output_dir": str(config["output_dir"]), "stats": {"tool_calls": 1}}


def plain_run_config(config, command, output_dir, endpoints):
    """RunConfig stand-in: a dict with the fields the contract names."""
    return {"robot": config.robot, "suite": command.suite, "task": command.task, "seed": command.seed,
            "planner": config.planner, "model": config.model, "output_dir": output_dir,
            "env_endpoint": None, "vla_endpoint": endpoints.get("vla"), "sam3_endpoint": endpoints.get("sam3")}


def make_app(tmp_path, run, *, shared=("vla",), start_mode="run", image_mode="halfblock", **options):
    """An ``RpentApp`` over a real Session (real supervisor, tiny real services) and ``run`` as run_task."""
    from rpent_tui.app import AppOptions, RpentApp
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    def make(sink):
        return Session(SessionConfig(output_dir=tmp_path / "session", planner="scripted"), sink, run_task=run,
                       shared_specs=[tiny_spec(n) for n in shared], make_run_config=plain_run_config,
                       batch_interval_s=0.02)

    return RpentApp(make, AppOptions(image_mode=image_mode, start_mode=start_mode, **options))


async def wait_for(pilot, predicate, timeout: float = 120.0, what: str = "condition"):
    """Pause the pilot until ``predicate()`` is true (fails the test after ``timeout`` s)."""
    import time as _time

    deadline = _time.monotonic() + timeout
    while not predicate():
        if _time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.05)


async def type_text(pilot, text: str):
    """Press the keys of ``text`` one by one (keyboard only)."""
    keys = {" ": "space", "/": "slash", "&": "ampersand", "?": "question_mark", ".": "full_stop", "_": "underscore",
            "-": "minus", ":": "colon", "(": "left_parenthesis", ")": "right_parenthesis", "'": "apostrophe",
            "=": "equals_sign", ",": "comma", "\n": "enter"}
    await pilot.press(*[keys.get(c, c) for c in text])
