"""A real session in Pilot: real Supervisor, real ``rpent.run.run_task`` with the scripted planner on
LIBERO (fresh MuJoCo env server), driven by key presses; then the Services and Trajectories screens
show it. The session requires the operator's verdict, so the verdict window opens with the
toolkit's real camera frames and is answered with ``s``. With ``RPENT_TUI_SCREENSHOTS=<dir>`` an SVG
of every screen (120x40, and ``*_100x30.svg``) is saved there — the ``screenshots/`` of the
repository come from this test.

Slow (~1 min): ``MUJOCO_GL=egl pytest -m slow tests/tui/test_tui_real_session.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from rpent_tui.app import AppOptions, RpentApp
from rpent_tui.screens.operator import OperatorModal
from rpent_tui.widgets.frames import FramePane
from rpent.session.core import Session
from rpent.session.model import SessionConfig
from tui_helpers import type_text, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def side_by_side(left: Path, right: Path, out: Path, gap: float = 20.0) -> None:
    """One SVG holding two captures side by side (each nested as its own ``<svg>``), written atomically."""
    import re

    parts, x, height = [], 0.0, 0.0
    for path in (left, right):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
        width, h = (float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', text).groups())
        parts.append(re.sub(r"^<svg ", f'<svg x="{x}" y="0" width="{width}" height="{h}" ', text, count=1))
        x, height = x + width + gap, max(height, h)
    body = "\n".join(parts)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {x - gap} {height}">\n{body}\n</svg>\n',
                   encoding="utf-8")
    tmp.replace(out)


@pytest.mark.parametrize("size", [(120, 40), (100, 30)], ids=["120x40", "100x30"])
def test_real_scripted_taskrun_on_libero(tmp_path, monkeypatch, size):
    monkeypatch.setenv("MUJOCO_GL", os.environ.get("MUJOCO_GL", "egl"))
    shots = os.environ.get("RPENT_TUI_SCREENSHOTS")
    suffix = "" if size == (120, 40) else f"_{size[0]}x{size[1]}"
    config = SessionConfig(output_dir=tmp_path / "session", planner="scripted", shared_services=(),
                           run_options={"require_operator_verdict": True})
    app = RpentApp(lambda sink: Session(config, sink), AppOptions(image_mode="halfblock", frame_interval_s=0.5,
                                                                  colour_depth="truecolor"))
    saved: list[Path] = []

    async def shot(pilot, name):
        if shots:
            await pilot.pause(0.5)
            for widget in app.screen.query("Input, TextArea"):
                widget.cursor_blink = False
            app.clear_notifications()
            await pilot.pause(0.3)
            path = Path(shots) / f"{name}{suffix}.svg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(app.export_screenshot(title=f"rpent-tui {name}"), encoding="utf-8")
            saved.append(path)

    async def main():
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("t")
            await type_text(pilot, "libero_object 0 0\n")
            await pilot.press("shift+tab")
            await wait_for(pilot, lambda: app.session.current and app.session.current.frames, timeout=120,
                           what="first camera frames")
            await wait_for(pilot, lambda: len(app.session.current.timeline) >= 5, timeout=300, what="steps")
            await pilot.press("f2")
            await wait_for(pilot, lambda: app.screen.query_one("#services").row_count >= 1, what="env server row")
            await shot(pilot, "services")
            await pilot.press("f3")
            await shot(pilot, "run")
            # the scripted planner asks for the verdict before finish: the window shows the real frames
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal), timeout=240, what="verdict window")
            await pilot.pause(0.5)
            panes = [(p.border_title, p.has_frame) for p in app.screen.query(FramePane)]
            assert panes == [("agentview camera", True), ("wrist camera", True)], panes
            await shot(pilot, "operator_verdict")
            # the same request drawn for a 256-colour terminal (the palette renderer), then answered
            truecolor = app.screen
            assert app.screen_stack[-1] is truecolor
            app.options.colour_depth = "256"
            palette = OperatorModal(truecolor.run_id, truecolor.request, "halfblock")
            await app.push_screen(palette)
            await pilot.pause(0.5)
            assert "256-colour palette" in app.session_summary()
            assert all(p.has_frame for p in palette.query(FramePane))
            await shot(pilot, "operator_verdict_256")
            app.pop_screen()
            app.options.colour_depth = "truecolor"
            await pilot.pause(0.3)
            if shots:
                side_by_side(Path(shots) / f"operator_verdict_256{suffix}.svg", Path(shots) / f"operator_verdict{suffix}.svg",
                             Path(shots) / f"operator_verdict_colours{suffix}.svg")
            await pilot.press("s")
            await wait_for(pilot, lambda: app.session.current.finished, timeout=240, what="TaskRun end")
            run = app.session.current
            assert run.state == "succeeded", run.detail
            assert run.outcome["environment_success"] is True
            assert run.outcome["operator_verdict"]["answer"] == "success"
            await wait_for(pilot, lambda: app.session.services["env_server@0001"].state == "stopped", timeout=30,
                           what="the TaskRun's env server stopped")
            await pilot.pause(1.0)
            await shot(pilot, "run_finished")
            await pilot.press("f4")
            await shot(pilot, "editor")
            await pilot.press("f5")
            await wait_for(pilot, lambda: app.screen.steps, what="recorded steps")
            await pilot.press("s", "j", "j", "j")
            await shot(pilot, "trajectories")
            assert app.screen.query_one("#traj-frame").has_frame
            await pilot.press("f6")
            await wait_for(pilot, lambda: app.screen.query_one("#fw-runs").option_count == 1, what="run list")
            await shot(pilot, "flywheel")
            await pilot.press("f3", "f1")
            await shot(pilot, "help")
            await pilot.press("escape", "ctrl+q")

    asyncio.run(main())
    record = tmp_path / "session" / "tasks" / "0001_libero_object_t0_s0"
    taskrun = json.loads((record / "taskrun.json").read_text())
    assert (record / "states.json").is_file() and taskrun["state"] == "succeeded"
    assert taskrun["operator_verdict"]["answer"] == "success" and taskrun["environment_success"] is True
    assert taskrun["disagreement"] is None
