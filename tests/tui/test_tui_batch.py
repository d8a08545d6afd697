"""Batch screen (F7): the matrix, progress and report of a results root, and launching rpent-batch."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tui_helpers import StandInRun, make_app, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "batch"))
from prepared import BEFORE, prepare_root, write_attempt  # noqa: E402

from rpent.batch.matrix import Cell  # noqa: E402


def test_batch_screen_shows_matrix_report_and_runs_rpent_batch(tmp_path):
    root = prepare_root(tmp_path / "ab", BEFORE[:3])
    extra = Cell("default", "libero_goal_swap", 0, 25, 0)
    # a later infra attempt of a decided cell changes nothing; an open attempt of a dead runner is not "running"
    write_attempt(root, extra, 2, "infra")
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="batch")

    async def main():
        async with app.run_test(size=(140, 40)) as pilot:
            screen = app.screen
            assert type(screen).__name__ == "BatchScreen"
            screen.query_one("#batch-root").value = str(root.root)
            await pilot.press("ctrl+u")
            matrix = screen.query_one("#batch-matrix")
            await wait_for(pilot, lambda: matrix.row_count == 3, what="the matrix")
            assert len(matrix.columns) == 3 + 10
            row = [str(c) for c in matrix.get_row_at(0)]
            assert row[:3] == ["default", "goal_swap", "0"] and row[3:].count("✓") == BEFORE[0]
            assert row[3:].count("✗") == 10 - BEFORE[0]
            report = screen.query_one("#batch-report")
            assert [str(c) for c in report.get_row_at(0)][:4] == ["default", "24/30", "80.0%", "[62.7, 90.5]"]
            assert "30/30 cells" in str(screen.query_one("#batch-state").render())
            shots = os.environ.get("RPENT_TUI_SCREENSHOTS")
            if shots:  # screenshots/batch.svg: RPENT_TUI_SCREENSHOTS=screenshots pytest tests/tui/test_tui_batch.py
                Path(shots).mkdir(parents=True, exist_ok=True)
                (Path(shots) / "batch.svg").write_text(app.export_screenshot(title="rpent-tui batch"))
            # launch a batch the CLI refuses: the output and the failed state reach the screen
            screen.query_one("#batch-flags").value = "--suites libero_object --tasks 99 --seeds 0"
            screen.query_one("#batch-root").value = str(tmp_path / "new")
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: app.batch_launcher.state == "failed", timeout=120, what="rpent-batch to end")
            await wait_for(pilot, lambda: any("99" in line for line in screen.query_one("#batch-log").lines),
                           what="the error line")
            # the end event re-reads the root on a worker thread: the state line follows a moment later
            # (a read that started while the batch ran may render "running" first: wait for the end's)
            await wait_for(pilot, lambda: "batch failed" in str(screen.query_one("#batch-state").render()),
                           what="the state line after the failed launch")
            assert "no results in" in str(screen.query_one("#batch-state").render())
            await pilot.press("ctrl+q")

    asyncio.run(main())
