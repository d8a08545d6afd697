"""Text from untrusted sources (code cells, models, records) made safe to show on a terminal
(imports nothing of rpent)."""

from __future__ import annotations

__all__ = ["printable"]

# C0 controls but tab and newline -> the Unicode control pictures (ESC -> U+241B), DEL -> U+2421,
# C1 controls -> U+FFFD: one character for one, so styled spans over the text stay where they were.
_STAND_INS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_STAND_INS[0x7F] = 0x2421
_STAND_INS.update({c: 0xFFFD for c in range(0x80, 0xA0)})


def printable(text: str) -> str:
    """``text`` with every terminal control character but tab and newline replaced by a visible
    stand-in of the same length, so what a code cell or a model wrote cannot move the cursor, clear
    the screen, retitle the window or write the clipboard of whoever reads it."""
    return text.translate(_STAND_INS)
