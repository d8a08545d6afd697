"""The F6 export screen as an operator uses it: picked runs are marked in text (not only by colour),
the rule set is chosen by keys, and the report says per run why it was excluded; the dataset and
report on disk are read back."""

from __future__ import annotations

import asyncio
import json

from textual.widgets import Select

from tui_helpers import StandInRun, make_app, type_text, wait_for
from tui_records import build_run



def _rows(table) -> list[tuple[str, str]]:
    return [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]


def test_picks_are_marked_rules_chosen_and_each_exclusion_named(tmp_path):
    logs = tmp_path / "logs"
    good = build_run(logs, "0001_libero_goal_t0_s0", steps=4)
    bad = build_run(logs, "0002_libero_goal_t1_s0", task=1, steps=3, success=False)
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="flywheel", logs_dir=logs)
    out = tmp_path / "dataset"

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            selection = app.screen.query_one("#fw-runs")
            await wait_for(pilot, lambda: selection.option_count == 2, what="run list")
            assert selection.border_subtitle == "0 of 2 picked"
            lines = [selection.render_line(y).text for y in range(2)]
            assert all(line.startswith("▐ ▌") for line in lines), lines  # nothing picked: blank boxes
            await pilot.press("space")  # picks the highlighted (first) run
            await pilot.pause(0.1)
            picked = [selection.render_line(y).text for y in range(2)]
            assert sorted(line[:3] for line in picked) == ["▐ ▌", "▐x▌"], picked
            assert selection.border_subtitle == "1 of 2 picked"
            await pilot.press("ctrl+a")
            await pilot.pause(0.1)
            assert all(selection.render_line(y).text.startswith("▐x▌") for y in range(2))
            # the rule set, by keys: Tab to it, open, down to v2, Enter
            rules = app.screen.query_one("#fw-rules", Select)
            assert rules.value == "v1"  # the session does not record every observation
            await pilot.press("tab")
            assert app.focused is rules
            await pilot.press("enter", "down", "enter")
            await wait_for(pilot, lambda: rules.value == "v2", 10, what="rules v2")
            await pilot.press("tab")
            await type_text(pilot, str(out))
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: app.flywheel.status.state not in ("idle", "running"), timeout=180,
                           what="export end")
            status = app.flywheel.status
            assert status.state == "succeeded", "\n".join(status.lines[-20:])
            assert status.job.rules == "v2"
            table = app.screen.query_one("#fw-report")
            await wait_for(pilot, lambda: table.row_count > 0, what="report rows")
            rows = _rows(table)
            exported = [v for f, v in rows if f.startswith(f"✓ {good.name}/")]
            excluded = [v for f, v in rows if f.startswith(f"✗ {bad.name}/")]
            assert exported and exported[0].startswith("exported ") and "1 episode(s)" in exported[0], rows
            assert excluded and excluded[0].startswith("not_successful"), rows
            await pilot.press("ctrl+q")

    asyncio.run(main())
    report = json.loads((out / "report.json").read_text())
    assert report["rules"] == "v2"
    assert [x["reason"] for x in report["exclusions"] if x["record"].startswith(bad.name)] == ["not_successful"]
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    LeRobotDataset = import_lerobot_dataset()
    dataset = LeRobotDataset("rpent/test", root=out / "train")
    assert dataset.num_episodes == 1 and dataset.num_frames == report["counts"]["frames"] > 0


def test_a_run_the_operator_rejected_is_listed_by_its_label_not_only_by_the_predicate(tmp_path):
    logs = tmp_path / "logs"
    build_run(logs, "0001_libero_goal_t0_s0", steps=3)
    build_run(logs, "0002_libero_goal_t1_s0", task=1, steps=3, label="failed",
              verdict={"answer": "failure", "notes": "bowl tipped over"})
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="flywheel", logs_dir=logs)

    async def main():
        async with app.run_test(size=(160, 40)) as pilot:
            selection = app.screen.query_one("#fw-runs")
            await wait_for(pilot, lambda: selection.option_count == 2, what="run list")
            return sorted(str(selection.get_option_at_index(i).prompt) for i in range(2))

    prompts = asyncio.run(main())
    assert prompts == [
        "libero_goal t0 s0 · succeeded · env ✓ · 1 traj · 0001_libero_goal_t0_s0",
        "libero_goal t1 s0 · failed (operator: failure) · env ✓ · 1 traj · 0002_libero_goal_t1_s0"], prompts
