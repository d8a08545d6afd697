"""Choice of the terminal image protocol for camera frames (``--images auto|sixel|kitty|halfblock|none``).

``textual-image`` would query the terminal itself, at import and again for the cell size while
the app runs, each time with a 0.1 s timeout (Textual's guest-mode notes): over SSH
or on a busy machine the replies arrive late and land in the app's keyboard input, where they
swallow the operator's keys. So the terminal is queried here, once, before Textual takes it
(:func:`query_terminal`): the kitty graphics query, the cell-size query (``CSI 16 t``) and last
the primary device attributes (DA1, ``CSI c``, answered by every terminal), waiting up to
``QUERY_TIMEOUT_S`` (fit for SSH) for the DA1 reply. Since DA1 is answered last, every earlier
reply has arrived by then and nothing is left over. DA1 attribute 4 means sixel; a kitty reply
``OK`` means the kitty protocol; otherwise half-blocks. :func:`prepare_textual_image` then hands
the result to textual-image so that it never queries. The mode can be forced with ``--images``
or ``RPENT_IMAGES``. When stdout is not a TTY (tests, pipes) ``auto`` resolves to ``halfblock``.
No Textual import here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["IMAGE_MODES", "ImageModeError", "resolve_image_mode", "detect_image_mode", "query_terminal",
           "TerminalInfo", "prepare_textual_image", "QUERY_TIMEOUT_S"]

#: Seconds to wait for the terminal's DA1 reply (a slow SSH link answers in a few hundred ms).
QUERY_TIMEOUT_S = 2.0
#: Cell size (px) assumed when the terminal does not say (VT340; only the 1:2 ratio matters for half-blocks).
DEFAULT_CELL_PX = (10, 20)

#: Accepted modes. ``kitty`` = the kitty terminal graphics protocol; ``halfblock`` = coloured
#: half-cell characters (works everywhere, also in SVG snapshots); ``none`` = no frames.
IMAGE_MODES = ("auto", "sixel", "kitty", "halfblock", "none")
ENV_VAR = "RPENT_IMAGES"


class ImageModeError(ValueError):
    """Unknown image mode; the message lists the valid ones."""


class TerminalInfo:
    """What the terminal answered: ``sixel`` / ``kitty`` support and the cell size in pixels
    (``cell_px`` = (width, height), or None when it did not say)."""

    def __init__(self, sixel: bool = False, kitty: bool = False, cell_px: tuple[int, int] | None = None) -> None:
        self.sixel, self.kitty, self.cell_px = sixel, kitty, cell_px

    @property
    def mode(self) -> str:
        """``sixel``, ``kitty`` or ``halfblock``."""
        return "sixel" if self.sixel else ("kitty" if self.kitty else "halfblock")


def query_terminal(timeout_s: float = QUERY_TIMEOUT_S) -> TerminalInfo:
    """Ask the controlling terminal (see the module docstring). Must run before ``App.run()``.

    Returns an empty :class:`TerminalInfo` (half-blocks) when stdin/stdout is not a terminal or the
    terminal does not answer DA1 within ``timeout_s`` seconds.
    """
    import re
    import select
    import sys
    import termios
    import time
    import tty

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return TerminalInfo()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    reply = b""
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        sys.stdout.write("\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\" "\x1b[16t" "\x1b[c")
        sys.stdout.flush()
        deadline = time.monotonic() + timeout_s
        while not re.search(rb"\x1b\[\?[\d;]*c", reply):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            reply += os.read(fd, 1024)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    da1 = re.search(rb"\x1b\[\?([\d;]*)c", reply)
    cell = re.search(rb"\x1b\[6;(\d+);(\d+)t", reply)
    return TerminalInfo(sixel=bool(da1) and "4" in da1.group(1).decode().split(";"),
                        kitty=b"\x1b_Gi=31;OK" in reply,
                        cell_px=(int(cell.group(2)), int(cell.group(1))) if cell else None)


def prepare_textual_image(mode: str, info: TerminalInfo | None = None) -> None:
    """Import textual-image without its own terminal queries and give it the cell size, so that it
    never reads the terminal while the app runs (its replies would eat keys). No-op for ``none``."""
    import sys

    if mode == "none":
        return
    from textual_image import _terminal

    width, height = (info.cell_px if info is not None and info.cell_px else None) or DEFAULT_CELL_PX
    _terminal.get_cell_size._result = _terminal.CellSize(width, height)  # the cached answer: never asked again
    real = sys.__stdout__
    try:
        sys.__stdout__ = None  # textual_image.renderable queries the terminal at import when stdout is a tty
        import textual_image.renderable  # noqa: F401
    finally:
        sys.__stdout__ = real
    import textual_image.widget  # noqa: F401 - asks get_cell_size(), which answers from the cache


def detect_image_mode(timeout_s: float = QUERY_TIMEOUT_S) -> str:
    """The best mode the terminal answers for: ``sixel``, ``kitty`` or ``halfblock``
    (:func:`query_terminal`; must run before ``App.run()``)."""
    return query_terminal(timeout_s).mode


def resolve_image_mode(flag: str | None = None, env: Mapping[str, str] | None = None, *, detect: bool = True) -> str:
    """The effective image mode: ``flag`` if given, else ``$RPENT_IMAGES``, else ``auto``;
    ``auto`` is detected (``detect=True``) or left as ``auto``.

    Raises:
        ImageModeError: a value outside ``IMAGE_MODES`` (the message names where it came from).
    """
    env = os.environ if env is None else env
    source, value = ("--images", flag) if flag else (ENV_VAR, env.get(ENV_VAR, "auto") or "auto")
    value = value.strip().lower()
    aliases = {"tgp": "kitty", "halfcell": "halfblock", "off": "none", "unicode": "halfblock"}
    value = aliases.get(value, value)
    if value not in IMAGE_MODES:
        raise ImageModeError(f"{source}={value!r} is not an image mode; choose one of: {', '.join(IMAGE_MODES)}")
    if value == "auto" and detect:
        return detect_image_mode()
    return value
