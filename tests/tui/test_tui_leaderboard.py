"""Leaderboard screen (shift+F7, next to Batch): the arms of a results root and published rows, the
highlighted arm's per-suite drill-down, and the HTML page written from the screen (checked on disk)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tui_helpers import StandInRun, make_app, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "leaderboard"))
from board_records import prepare_board_root  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_leaderboard_screen_shows_arms_drill_down_and_writes_the_page(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths in the form (and in the screenshot)
    root = prepare_board_root(tmp_path / "lb")
    published = tmp_path / "experiments" / "published"
    published.mkdir(parents=True)
    (published / "rpent_libero_pro.yaml").write_text(
        (REPO / "experiments" / "published" / "rpent_libero_pro.yaml").read_text())
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="batch")

    async def main():
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.press("shift+f7")
            screen = app.screen
            assert type(screen).__name__ == "LeaderboardScreen"
            screen.query_one("#lb-roots").value = "lb"
            screen.query_one("#lb-published").value = "experiments/published/rpent_libero_pro.yaml"
            await pilot.press("ctrl+r")
            board = screen.query_one("#lb-board")
            await wait_for(pilot, lambda: board.row_count == 9, what="the leaderboard rows")
            assert board.region.height >= 8 and screen.query_one("#lb-suites").region.height >= 5  # both on screen
            first = [str(c) for c in board.get_row_at(0)]
            assert first[:5] == ["1", "GPT-6 Astra (low reasoning) (published)", "741/800", "92.63 %", "[90.6, 94.2]"]
            rows = {str(board.get_row_at(i)[1]): [str(c) for c in board.get_row_at(i)] for i in range(9)}
            assert rows["scripted"][2:7] == ["12/16", "75.0%", "[50.5, 89.8]", "8/8", "4/8"]
            assert rows["flash"][2] == "8/12"
            # highlight the flash arm: its per-suite drill-down with every cell's mark
            index = [str(board.get_row_at(i)[1]) for i in range(9)].index("flash")
            board.move_cursor(row=index)
            suites = screen.query_one("#lb-suites")
            await wait_for(pilot, lambda: suites.row_count == 2 and str(suites.get_row_at(0)[0]) == "libero_object_task",
                           what="the flash arm's suites")
            goal = [str(c) for c in suites.get_row_at(1)]
            assert goal[:2] == ["libero_goal_swap", "3/6"] and goal[5] == "t0 ✓✓✓  t1 ✗✗✗"
            shots = os.environ.get("RPENT_TUI_SCREENSHOTS")
            if shots:  # screenshots/leaderboard.svg: RPENT_TUI_SCREENSHOTS=screenshots pytest tests/tui/test_tui_leaderboard.py
                Path(shots).mkdir(parents=True, exist_ok=True)
                (Path(shots) / "leaderboard.svg").write_text(app.export_screenshot(title="rpent-tui leaderboard"))
            await pilot.press("ctrl+s")
            page = root.root / "leaderboard.html"
            await wait_for(pilot, page.exists, what="the HTML page")
            html = page.read_text()
            assert "published, not rerun here" in html and "flash_plan_missing" in html
            await pilot.press("f7")
            assert type(app.screen).__name__ == "BatchScreen"
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_leaderboard_screen_says_why_it_cannot_read(tmp_path):
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="leaderboard")

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            screen.query_one("#lb-roots").value = str(tmp_path / "nothing")
            await pilot.press("ctrl+r")
            state = screen.query_one("#lb-state")
            await wait_for(pilot, lambda: "nothing is not an rpent-batch results root" in str(state.render()),
                           what="the error line")
            await pilot.press("ctrl+q")

    asyncio.run(main())
