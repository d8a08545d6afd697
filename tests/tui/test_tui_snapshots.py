"""SVG snapshots of every screen at 80x24 and 120x40 (canned session, half-block images).

Our own capture (``App.export_screenshot``) compared cell by cell (background, character, text
style; ``svg_grid``) with the stored files in ``tests/tui/snapshots/``: Rich may split the same
picture into different SVG segments, so the files themselves are not compared byte for byte; pytest-textual-snapshot was not used because its syrupy pin needs
pytest < 9. Regenerate after an intended UI change with
``RPENT_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_tui_snapshots.py`` and review the SVGs
(``rsvg-convert x.svg > x.png``). Textual is pinned (8.2.8): other versions render differently.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rpent_tui.screens.help import HelpScreen
from rpent_tui.screens.operator import OperatorModal
from svg_grid import grid_diff, same_picture
from tui_canned import canned_app, verdict_request

SNAPSHOTS = Path(__file__).with_name("snapshots")
UPDATE = os.environ.get("RPENT_UPDATE_SNAPSHOTS") == "1"


SCREENS = ["services", "run", "editor", "trajectories", "flywheel", "operator", "help"]


async def capture(root: Path, screen: str, size: tuple[int, int], expected: str | None = None) -> str:
    """SVG of ``screen`` of the canned app at ``size`` (columns, rows).

    With ``expected``, keeps capturing for up to 30 s until the screen matches it (a loaded
    machine may draw a pane's late content, e.g. a camera frame read off the loop, after the
    first capture); the last capture is returned either way, so a real change still fails.
    """
    mode = screen if screen not in ("operator", "help") else "run"
    app = canned_app(root, start_mode=mode)
    async with app.run_test(size=size) as pilot:
        if screen in ("trajectories", "flywheel"):
            for _ in range(200):
                await pilot.pause(0.02)
                if (app.screen.steps if screen == "trajectories" else app.screen.query_one("#fw-runs").option_count):
                    break
        if screen == "operator":
            app.push_screen(OperatorModal("0002", verdict_request(), "halfblock"))
        if screen == "help":
            app.push_screen(HelpScreen(app.screen))
        await pilot.pause(0.3)

        def steady_cursors():
            """Cursors drawn steadily where the focus is now, before every capture. Textual's blink
            pause shows a cursor only if its widget has focus at that moment (focus may land after
            mount on a loaded machine), and TextArea's line cache (Textual 8.2.8) keys a line the same
            with the blink off as in the blink's "off" phase, so a line cached in that phase would
            keep the cursor hidden: the blink is switched on and off again and that cache dropped."""
            for widget in app.screen.query("Input, TextArea"):
                widget.cursor_blink = True
                widget.cursor_blink = False
                if hasattr(widget, "_line_cache"):
                    widget._line_cache.clear()
                widget.refresh()

        steady_cursors()
        await pilot.pause(0.1)
        svg = app.export_screenshot(title=f"rpent-tui {screen}")
        footer = {"operator": "Success", "help": "Close"}.get(screen, "Help")
        for _ in range(40):  # a loaded machine may draw the footer a moment after the panes
            if footer in svg:
                break
            await pilot.pause(0.1)
            steady_cursors()
            await pilot.pause(0.05)
            svg = app.export_screenshot(title=f"rpent-tui {screen}")
        deadline = time.monotonic() + 30.0
        while expected is not None and not same_picture(svg, expected) and time.monotonic() < deadline:
            await pilot.pause(0.2)
            steady_cursors()
            await pilot.pause(0.05)
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
    stored = path.read_text(encoding="utf-8")
    assert same_picture(svg, stored), (
        f"{path.name} changed; if intended, regenerate with RPENT_UPDATE_SNAPSHOTS=1 and review the SVG\n"
        + grid_diff(svg, stored))


def test_table_painted_before_its_idle_still_fits_its_cells(tmp_path, monkeypatch):
    """A paint of the steps table between ``add_row`` and the table's on-idle width update (the
    screen's and the table's tasks race; CI once drew ``Tool`` at label width and ``pi0_pick`` cut
    to ``pi0_``) must not leave stale lines: forced here, the picture still matches the snapshot."""
    from rpent_tui.screens.trajectories import TrajectoriesScreen

    show_run = TrajectoriesScreen._show_run

    def show_run_then_paint(self, *args, **kwargs):
        show_run(self, *args, **kwargs)
        table = self.query_one("#steps")
        for y in range(table.size.height):
            table.render_line(y)

    monkeypatch.setattr(TrajectoriesScreen, "_show_run", show_run_then_paint)
    monkeypatch.chdir(tmp_path)
    stored = (SNAPSHOTS / "trajectories_120x40.svg").read_text(encoding="utf-8")
    svg = asyncio.run(capture(tmp_path, "trajectories", (120, 40), stored))
    assert same_picture(svg, stored), grid_diff(svg, stored)


def test_picture_comparison_ignores_segmentation_but_not_cells():
    """The comparison sees a split background rect as the same picture, and any changed character,
    colour or style as a different one (with the row named)."""
    stored = (SNAPSHOTS / "trajectories_120x40.svg").read_text(encoding="utf-8")
    rect = '<rect fill="#242f38" x="85.4" y="416.3" width="122" height="24.65" shape-rendering="crispEdges"/>'
    assert rect in stored
    split = stored.replace(rect, rect.replace('width="122"', 'width="61"')
                           + rect.replace('x="85.4"', 'x="146.4"').replace('width="122"', 'width="61"'))
    assert split != stored and same_picture(split, stored)
    renamed = stored.replace("&#160;pi0_pick&#160;<", "&#160;pi0_pack&#160;<", 1)
    assert renamed != stored and not same_picture(renamed, stored)
    assert "row 19" in grid_diff(renamed, stored) and "pi0_pack" in grid_diff(renamed, stored)
    recoloured = stored.replace(rect, rect.replace("#242f38", "#242f39"))
    assert not same_picture(recoloured, stored)
