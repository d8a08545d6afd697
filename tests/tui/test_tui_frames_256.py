"""Camera frames an operator can judge: the palette quantisation for 256-colour terminals (measured on
real LIBERO frames), the renderer named in the status line, and the verdict window's zoom and frame
history keys, answered with the verdict read back from ``taskrun.json``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import trio
from PIL import Image
from rich.color import Color, ColorSystem

from rpent_tui.screens.operator import OperatorModal
from rpent_tui.services.palette256 import (carrier_rgb, mean_lab_error, quantize_xterm256, rich_downgrade_indices,
                                           usable_indices)
from rpent_tui.widgets.frames import FramePane
from tui_helpers import StandInRun, make_app, type_text, wait_for
from tui_records import gradient, png

FRAMES = Path(__file__).with_name("frames")


@pytest.mark.parametrize("name", ["agentview_libero_object_t0_s0.png", "wrist_libero_object_t0_s0.png"])
@pytest.mark.parametrize("size", [(23, 48), (26, 52), (52, 52), (12, 24)])
def test_palette_quantisation_is_closer_than_richs_downgrade(name, size):
    """At the pixel sizes of the panes (80x24 .. 120x40), the palette colours chosen here are closer to
    the LIBERO frame (mean CIE76) than those Rich's own 256-colour downgrade shows."""
    image = Image.open(FRAMES / name).convert("RGB").resize(size)
    ours = quantize_xterm256(image)
    assert ours.shape == (size[1], size[0]) and ours.min() >= 16
    assert mean_lab_error(image, ours) < mean_lab_error(image, rich_downgrade_indices(image))


def test_each_chosen_index_has_a_carrier_that_richs_downgrade_emits_as_that_index():
    for i in usable_indices():
        assert Color.from_rgb(*(int(v) for v in carrier_rgb()[i])).downgrade(ColorSystem.EIGHT_BIT).number == i


class FramesRun(StandInRun):
    """The TUI tests' run stand-in (a real env-server process through the session's supervisor), sending
    three different frames and asking for the verdict with the newest main and wrist frames, as the
    LIBERO toolkit does."""

    def __init__(self, frames: list[bytes]) -> None:
        super().__init__(ask=True, png=frames[-1])
        self.frames = frames

    async def __call__(self, config, supervisor, *, operator, steering=None, on_event=None):
        from tui_helpers import tiny_spec

        self.calls.append(config)
        await supervisor.start(tiny_spec("env_server", "--lines", "2"))
        on_event({"kind": "status", "state": "running", "detail": "env ready"})
        for i, frame in enumerate(self.frames):
            on_event({"kind": "frames", "step": i * 10, "main": frame, "wrist": frame})
            await trio.sleep(0.05)
        answer = await trio.to_thread.run_sync(operator.ask, "verdict", "Did it succeed?", None,
                                               {"main": self.frames[-1], "wrist": self.frames[-1]})
        self.answers.append(answer)
        success = answer[0] == "success"
        on_event({"kind": "finished", "outcome": {"environment_success": success}})
        return {"environment_success": success, "finish": {"status": answer[0], "summary": "done"},
                "error": None, "output_dir": str(config["output_dir"]), "stats": {"tool_calls": 0}}


def _cell_colours(pane: FramePane) -> set[tuple[int, int, int]]:
    """The 24-bit colours of the image's cells as Textual hands them to the terminal driver."""
    image = pane.query_one(".frame-image")
    strips = image.render_lines(image.region.reset_offset)
    return {c.get_truecolor() for strip in strips for seg in strip if seg.style
            for c in (seg.style.color, seg.style.bgcolor) if c is not None}


@pytest.mark.parametrize("depth", ["256", "truecolor"])
def test_verdict_window_zooms_steps_through_frames_and_names_the_renderer(tmp_path, depth):
    libero = (FRAMES / "agentview_libero_object_t0_s0.png").read_bytes()
    frames = [png(gradient(1, 128)), png(gradient(3, 128)), libero]
    run = FramesRun(frames)
    app = make_app(tmp_path, run, shared=(), colour_depth=depth)

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            renderer = "halfblock 256-colour palette" if depth == "256" else "halfblock truecolor"
            assert app.screen.sub_title.endswith(renderer)
            assert str(app.screen.query_one("#counters").content).endswith(f"cameras: {renderer}")
            await pilot.press("t")
            await type_text(pilot, "libero_object 0 0\n")
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal) and app.screen.is_mounted,
                           what="the verdict window")
            modal = app.screen
            await pilot.pause(0.3)
            main, wrist = modal.query_one("#op-frame-main", FramePane), modal.query_one("#op-frame-wrist", FramePane)
            assert main.has_frame and "request · frame 3/3" in str(main.border_subtitle)
            colours = _cell_colours(main)
            palette = {tuple(int(v) for v in carrier_rgb()[i]) for i in usable_indices()}
            if depth == "256":  # every cell carries a chosen palette index that Rich's downgrade emits as is
                assert colours <= palette and len(colours) > 8
                for rgb in colours:
                    index = Color.from_rgb(*rgb).downgrade(ColorSystem.EIGHT_BIT).number
                    assert tuple(int(v) for v in carrier_rgb()[index]) == rgb
            else:
                assert len(colours - palette) > len(colours) // 2  # the frame's own 24-bit colours
            width_both = main.region.width
            await pilot.press("z")  # the main camera alone, at the full window size
            await pilot.pause(0.3)
            assert not wrist.display and main.region.width > 1.8 * width_both
            assert main.region.width >= 96 and main.region.height >= 20
            await pilot.press("comma")  # one frame back: step 10
            await pilot.pause(0.2)
            assert "step 10 · frame 2/3" in str(main.border_subtitle)
            await pilot.press("comma", "comma")  # the oldest; a further press only rings the bell
            assert "step 0 · frame 1/3" in str(main.border_subtitle)
            await pilot.press("full_stop", "full_stop")
            assert "request · frame 3/3" in str(main.border_subtitle)
            await pilot.press("z", "z")  # wrist alone, then both again
            await pilot.pause(0.2)
            assert main.display and wrist.display and not modal.has_class("-zoomed")
            await pilot.press("f")
            await wait_for(pilot, lambda: app.session.current.finished, what="the TaskRun end")
            await pilot.press("ctrl+q")

    asyncio.run(main())
    record = json.loads(next((tmp_path / "session" / "tasks").glob("*/taskrun.json")).read_text())
    assert run.answers == [("failure", "")] and record["state"] == "failed"
