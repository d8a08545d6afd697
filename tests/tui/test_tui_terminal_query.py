"""The one terminal query before the app starts: a real pseudo-terminal whose
"terminal" side answers late, as over SSH; every reply is consumed before the app would read keys."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

CHILD = """
import os, select, sys
from rpent_tui.services.images import query_terminal
info = query_terminal(5.0)
left = b""
while select.select([0], [], [], 0.3)[0]:
    left += os.read(0, 1024)
print("RESULT", info.mode, info.kitty, info.cell_px, len(left), flush=True)
"""


def _answer(reply: bytes, delay_s: float) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # the child: rpent-tui's side
        os.execvpe(sys.executable, [sys.executable, "-c", CHILD], dict(os.environ))
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while b"\x1b[c" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 1)[0]:
                seen += os.read(fd, 1024)
        assert b"\x1b_Gi=31" in seen and b"\x1b[16t" in seen  # kitty and cell-size queries, DA1 last
        time.sleep(delay_s)  # a slow link: later than textual-image's own 0.1 s timeout
        os.write(fd, reply)
        out = b""
        while b"RESULT" not in out or not out.endswith(b"\n"):
            if not select.select([fd], [], [], 20)[0]:
                break
            out += os.read(fd, 1024)
        return out.decode(errors="replace")
    finally:
        os.waitpid(pid, 0)
        os.close(fd)


def test_sixel_terminal_answering_late_is_detected_and_leaves_nothing_behind():
    out = _answer(b"\x1b[6;20;10t\x1b[?62;4;22c", delay_s=0.6)
    assert "RESULT sixel False (10, 20) 0" in out, out


def test_kitty_reply_is_detected_and_a_plain_terminal_gets_half_blocks():
    assert "RESULT kitty True None 0" in _answer(b"\x1b_Gi=31;OK\x1b\\\x1b[?62;22c", delay_s=0.3)
    assert "RESULT halfblock False None 0" in _answer(b"\x1b[?1;2c", delay_s=0.0)
