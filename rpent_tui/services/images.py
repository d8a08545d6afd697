"""Choice of the terminal image protocol for camera frames (``--images auto|sixel|kitty|halfblock|none``).

``textual-image`` detects sixel, then the kitty graphics protocol (TGP), then falls back to
half-cell blocks, by querying the terminal **at import, before the app starts**, with a 0.1 s
timeout (``shared/reference/tui_reference.md`` §3). Over a slow SSH link that query can time out,
so the mode can be forced with ``--images`` or ``RPENT_IMAGES``. ``auto`` is resolved here, once,
before Textual takes the terminal; when stdout is not a TTY (tests, pipes) it resolves to
``halfblock`` so output stays text. No Textual import here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["IMAGE_MODES", "ImageModeError", "resolve_image_mode", "detect_image_mode"]

#: Accepted modes. ``kitty`` = the kitty terminal graphics protocol; ``halfblock`` = coloured
#: half-cell characters (works everywhere, also in SVG snapshots); ``none`` = no frames.
IMAGE_MODES = ("auto", "sixel", "kitty", "halfblock", "none")
ENV_VAR = "RPENT_IMAGES"


class ImageModeError(ValueError):
    """Unknown image mode; the message lists the valid ones."""


def detect_image_mode() -> str:
    """Query the terminal through ``textual_image.renderable`` (import-time detection) and name the result.

    Must run before ``App.run()``: once Textual reads stdin the terminal's replies are lost.
    Returns ``sixel``, ``kitty`` or ``halfblock``.
    """
    import textual_image.renderable as renderable

    if renderable.Image is renderable.SixelImage:
        return "sixel"
    if renderable.Image is renderable.TGPImage:
        return "kitty"
    return "halfblock"


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
