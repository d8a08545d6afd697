"""Sixel and kitty captures of the verdict window: the real app on a real pseudo-terminal (120x40)
with ``--images sixel`` / ``kitty``, the toolkit's real LIBERO camera frames (``tests/tui/frames``,
as in the operator snapshot); the raw byte stream the app writes is what a terminal would draw.

SVG export only draws half-blocks, and tmux passes neither graphics protocol through, so the
graphics renderers are captured as the terminal stream itself. With ``RPENT_TUI_SCREENSHOTS=<dir>``
the streams are saved as ``<dir>/operator_verdict_{sixel,kitty}.vt``; view one with
``cat`` in a 120x40 terminal that speaks the protocol (sixel: ``xterm -ti vt340``, foot, WezTerm,
mlterm; kitty: kitty, WezTerm, Ghostty). Slow (a child app per protocol): ``pytest -m slow tests/tui/test_tui_graphics_capture.py``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = r'''
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
os.chdir(sys.argv[3])
from rpent_tui.screens.operator import OperatorModal
from tui_canned import canned_app, verdict_request
mode = sys.argv[1]
app = canned_app(Path("."), start_mode="run")
app.options.image_mode = mode
def opened():
    app.push_screen(OperatorModal("0002", verdict_request(), mode))
app.call_later(opened)
app.run()
'''

#: What each protocol's image starts with: sixel DCS ``ESC P ... q``; kitty APC ``ESC _ G``.
MARKERS = {"sixel": re.compile(rb"\x1bP[0-9;]*q"), "kitty": re.compile(rb"\x1b_G")}


@pytest.mark.parametrize("mode", ["sixel", "kitty"])
def test_verdict_window_draws_both_frames_with_terminal_graphics(tmp_path, mode):
    from tui_bench import Terminal  # the benchmark's pty driver: a real pseudo-terminal, 120x40

    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40", "TEXTUAL_ANIMATIONS": "none",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    term = Terminal([sys.executable, "-c", CHILD, mode, str(HERE), str(tmp_path)], env)
    stream = b""
    try:
        import time

        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # until both frames are drawn (waits on the output, not a sleep)
            stream += term.read(0.2)
            if len(MARKERS[mode].findall(stream)) >= 2 and b"Is the black bowl on the plate?" in stream:
                stream += term.read(1.0)  # the rest of the frame being written
                break
    finally:
        term.close()
    images = MARKERS[mode].findall(stream)
    assert b"Is the black bowl on the plate?" in stream, stream[-2000:]
    assert len(images) >= 2, f"{len(images)} {mode} image(s) in {len(stream)} bytes"
    shots = os.environ.get("RPENT_TUI_SCREENSHOTS")
    if shots:
        out = Path(shots) / f"operator_verdict_{mode}.vt"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_bytes(stream)
        os.replace(tmp, out)
