"""SVG snapshots of every screen at 80x24 and 120x40 (canned session, half-block images).

Our own capture (``App.export_screenshot``) compared byte-for-byte with the stored files in
``tests/tui/snapshots/``; pytest-textual-snapshot was not used because its syrupy pin needs
pytest < 9. Regenerate after an intended UI change with
``RPENT_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_tui_snapshots.py`` and review the SVGs
(``rsvg-convert x.svg > x.png``). Textual is pinned (8.2.8): other versions render differently.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from rpent_tui.screens.help import HelpScreen
from rpent_tui.screens.operator import OperatorModal
from tui_canned import canned_app, verdict_request

SNAPSHOTS = Path(__file__).with_name("snapshots")
UPDATE = os.environ.get("RPENT_UPDATE_SNAPSHOTS") == "1"


def _visible(svg: str) -> str:
    """The SVG with Rich's ``terminal-<adler32>`` id made constant: Rich hashes the ``repr`` of every
    segment, Textual's invisible style metadata included, so the id can change while every glyph,
    colour and class of the picture stays the same (seen as a rare flake under load)."""
    return re.sub(r"terminal-\d+", "terminal-ID", svg)


SCREENS = ["services", "run", "editor", "trajectories", "flywheel", "operator", "help"]


async def capture(root: Path, screen: str, size: tuple[int, int], expected: str | None = None) -> str:
    """SVG of ``screen`` of the canned app at ``size`` (columns, rows).

    With ``expected``, keeps capturing for up to ~10 s until the screen matches it (a loaded
    machine may draw a pane's late content, e.g. a camera frame read off the loop, after the
    first capture); the last capture is returned either way, so a real change still fails.
    """
    mode = screen if screen not in ("operator", "help") else "run"
    app = canned_app(root, start_mode=mode)
    async with app.run_test(size=size) as pilot:
        if screen in ("trajectories", "flywheel"):
            async def loaded():
                return app.screen.query_one("#runs" if screen == "trajectories" else "#fw-runs").option_count \
                    if screen == "flywheel" else app.screen.steps
            for _ in range(200):
                await pilot.pause(0.02)
                if (app.screen.steps if screen == "trajectories" else app.screen.query_one("#fw-runs").option_count):
                    break
        if screen == "operator":
            app.push_screen(OperatorModal("0002", verdict_request(), "halfblock"))
        if screen == "help":
            app.push_screen(HelpScreen(app.screen))
        await pilot.pause(0.3)
        for widget in app.screen.query("Input, TextArea"):
            widget.cursor_blink = False
        await pilot.pause(0.1)
        svg = app.export_screenshot(title=f"rpent-tui {screen}")
        footer = {"operator": "Success", "help": "Close"}.get(screen, "Help")
        for _ in range(40):  # a loaded machine may draw the footer a moment after the panes
            if footer in svg:
                break
            await pilot.pause(0.1)
            svg = app.export_screenshot(title=f"rpent-tui {screen}")
        for _ in range(50):
            if expected is None or _visible(svg) == _visible(expected):
                break
            await pilot.pause(0.2)
            svg = app.export_screenshot(title=f"rpent-tui {screen}")
        return svg


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("screen", SCREENS)
def test_screen_snapshot(screen, size, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = SNAPSHOTS / f"{screen}_{size[0]}x{size[1]}.svg"
    expected = path.read_text(encoding="utf-8") if path.exists() and not UPDATE else None
    svg = asyncio.run(capture(tmp_path, screen, size, expected))
    if screen not in ("operator", "help"):  # the footer keeps F1 help (and quit) visible even at 80x24
        assert ">f1" in svg.replace("&#160;", "") and "Help" in svg and "Quit" in svg
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
    assert path.exists(), f"no stored snapshot {path.name}; run with RPENT_UPDATE_SNAPSHOTS=1 and review it"
    assert _visible(svg) == _visible(path.read_text(encoding="utf-8")), (
        f"{path.name} changed; if intended, regenerate with RPENT_UPDATE_SNAPSHOTS=1 and review the SVG")
