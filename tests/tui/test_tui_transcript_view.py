"""The Run screen's transcript pane (a line view that renders only the rows on screen):
tool results show the fields an operator reads and their raw JSON on expand; the oldest lines are
dropped past the cap while the pane keeps following the end; a narrower pane re-wraps."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from rpent_tui.widgets.transcript import TranscriptView

RESULT = {"kind": "planner", "event": "tool_result", "name": "move_to", "call_id": "c1",
          "result": {"reached": True, "final_dist_m": 0.0031, "steps_used": 12, "eef_pos": [0.1, 0.2, 1.05]}}


class _Host(App):
    def compose(self) -> ComposeResult:
        yield TranscriptView(id="transcript")


def _text(view: TranscriptView) -> str:
    return "\n".join(line.text.rstrip() for line in view.lines)


def test_enter_shows_the_raw_json_of_the_selected_tool_result():
    async def main():
        app = _Host()
        async with app.run_test(size=(100, 30)) as pilot:
            view = app.query_one(TranscriptView)
            view.focus()
            view.add_events([{"kind": "planner", "event": "text", "text": "moving to the bowl"}, RESULT,
                             {"kind": "planner", "event": "text", "text": "next"}])
            await pilot.pause()
            assert "reached yes · dist 3.1 mm · 12 steps" in _text(view)
            assert "eef_pos" not in _text(view)  # the summary leaves out what an operator does not read
            await pilot.press("p")  # select the last tool result above the bottom
            await pilot.press("enter")
            await pilot.pause()
            shown = _text(view)
            assert '"eef_pos": [' in shown and '"steps_used": 12' in shown and '"reached": true' in shown
            assert view.is_expanded(1)
            await pilot.press("enter")  # collapse again
            await pilot.pause()
            assert "eef_pos" not in _text(view) and not view.is_expanded(1)
            await pilot.press("E")  # expand every result
            await pilot.pause()
            assert '"final_dist_m": 0.0031' in _text(view)

    asyncio.run(main())


def test_a_long_stream_is_capped_follows_the_end_and_rewraps():
    async def main():
        app = _Host()
        async with app.run_test(size=(100, 30)) as pilot:
            view = app.query_one(TranscriptView)
            n = TranscriptView.MAX_ENTRIES + TranscriptView.TRIM_CHUNK + 10
            for start in range(0, n, 100):
                view.add_events({"kind": "planner", "event": "text", "text": f"line {i}: " + "word " * 30}
                                for i in range(start, min(start + 100, n)))
                await pilot.pause()
            assert view.entry_count == TranscriptView.MAX_ENTRIES
            assert view.is_vertical_scroll_end
            assert f"line {n - 1}:" in _text(view) and "line 0:" not in _text(view)
            await pilot.resize_terminal(60, 20)
            await pilot.pause(0.3)
            width = view.scrollable_content_region.width
            assert max(line.cell_length for line in view.lines[-200:]) <= width
            assert all(len(line.text.rstrip()) <= width for line in view.lines[-200:])
            assert view.is_vertical_scroll_end

    asyncio.run(main())
