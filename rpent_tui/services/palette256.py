"""Camera frames for terminals with 256 colours: a palette-aware quantisation that keeps the scene legible.

A terminal without 24-bit colour (tmux's default, ``TERM=*-256color`` without ``COLORTERM=truecolor``)
gets every truecolor cell downgraded by Rich (``rich.color.Color.downgrade``): a colour whose HLS
saturation is under 15% becomes one of the 24 greys, any other is rounded channel by channel into
the 6x6x6 cube. LIBERO's scenes are mostly low-saturation browns, greys and beiges, so objects turn
into grey speckle. Here each pixel (after the frame is scaled to the pane) takes the entry of the
xterm-256 palette (indices 16-255: the 6x6x6 cube and the grey ramp; 0-15 are left out because each
terminal theme sets its own) nearest in CIELAB, after a saturation boost (``SATURATION``) and with the
chroma axes (a*, b*) weighted ``CHROMA_WEIGHT``: small coloured objects keep their hue instead of
falling onto the grey ramp, and the table and floor become flat areas instead of speckle. On LIBERO
frames scaled to pane size the mean CIE76 error against the original stays below Rich's own
downgrade (``mean_lab_error``, tested) while objects keep their colours.

Textual carries every cell colour as 24-bit and Rich downgrades it on output (HLS saturation under
15% -> grey ``231 + round(L * 25)``, else the cube by rounding). So each chosen index ``i`` is drawn
with a *carrier* RGB that Rich maps to ``i`` (``carrier_rgb``): the palette colour itself for the
cube, and ``round((i - 231) * 255 / 25)`` grey for the grey ramp (Rich's grey rule is offset from
the palette's own grey values). The cube's grey diagonal (59, 102, 145, 188) has no carrier and is
left out (the grey ramp covers it). The terminal then shows exactly the chosen palette colours.

Palette values: the xterm-256 definition (cube levels 0, 95, 135, 175, 215, 255; greys 8 + 10k),
as in xterm's ``256colres.pl`` and Rich's ``rich._palettes.EIGHT_BIT_PALETTE``. CIELAB: sRGB with the
D65 white point (IEC 61966-2-1; CIE 15). No Textual imports.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image as PILImage, ImageEnhance

__all__ = ["xterm_palette", "usable_indices", "carrier_rgb", "GREY_DIAGONAL", "srgb_to_lab", "quantize_xterm256", "rich_downgrade_indices", "mean_lab_error",
           "prepare_for_palette", "FIRST_INDEX"]

#: First palette index used (0-15 depend on the terminal's theme).
FIRST_INDEX = 16
#: Saturation factor applied before quantising (``PIL.ImageEnhance.Color``; 1 = unchanged). Chosen on
#: LIBERO agentview and wrist frames at pane sizes: 1.5 keeps the objects' colours, more tints the table.
SATURATION = 1.5
#: Weight of the chroma axes (a*, b*) against lightness (L*) in the nearest-colour search.
CHROMA_WEIGHT = 1.5
_CUBE = (0, 95, 135, 175, 215, 255)


@lru_cache(maxsize=1)
def xterm_palette() -> np.ndarray:
    """RGB of palette indices 0-255, ``uint8`` array of shape (256, 3); 0-15 hold xterm's defaults
    (never chosen here)."""
    base = [(0, 0, 0), (128, 0, 0), (0, 128, 0), (128, 128, 0), (0, 0, 128), (128, 0, 128), (0, 128, 128),
            (192, 192, 192), (128, 128, 128), (255, 0, 0), (0, 255, 0), (255, 255, 0), (0, 0, 255),
            (255, 0, 255), (0, 255, 255), (255, 255, 255)]
    cube = [(_CUBE[r], _CUBE[g], _CUBE[b]) for r in range(6) for g in range(6) for b in range(6)]
    greys = [(8 + 10 * k,) * 3 for k in range(24)]
    return np.array(base + cube + greys, dtype=np.uint8)


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB ``uint8`` (..., 3) -> CIELAB ``float64`` (..., 3) (L in 0..100), D65 white."""
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124564, 0.3575761, 0.1804375],
                  [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


#: Cube entries on the grey diagonal: Rich shows their RGB as a grey of the ramp, and no RGB reaches them.
GREY_DIAGONAL = (59, 102, 145, 188)


@lru_cache(maxsize=1)
def usable_indices() -> np.ndarray:
    """Palette indices chosen from: 16-255 without ``GREY_DIAGONAL``."""
    return np.array([i for i in range(FIRST_INDEX, 256) if i not in GREY_DIAGONAL], dtype=np.uint8)


@lru_cache(maxsize=1)
def carrier_rgb() -> np.ndarray:
    """The RGB (``uint8`` (256, 3)) to draw palette index ``i`` with, so that Rich's 256-colour downgrade
    emits ``i`` (see the module docstring); rows outside ``usable_indices`` hold the palette colour."""
    out = xterm_palette().copy()
    for i in range(232, 256):
        out[i] = round((i - 231) * 255 / 25)
    return out

@lru_cache(maxsize=1)
def _palette_lab() -> np.ndarray:
    return srgb_to_lab(xterm_palette()[usable_indices()])


def prepare_for_palette(image: PILImage.Image) -> PILImage.Image:
    """The saturation boost applied before quantising (RGB in, RGB out, same size)."""
    return ImageEnhance.Color(image.convert("RGB")).enhance(SATURATION)


def quantize_xterm256(image: PILImage.Image) -> np.ndarray:
    """Palette indices (``uint8``, shape (height, width), from ``usable_indices``) for an RGB image already scaled
    to the pixels it is shown with: after ``prepare_for_palette``, each pixel's nearest palette entry in
    CIELAB with the chroma axes weighted ``CHROMA_WEIGHT``."""
    rgb = np.asarray(prepare_for_palette(image), dtype=np.uint8)
    weight = np.array([1.0, CHROMA_WEIGHT, CHROMA_WEIGHT])
    lab = srgb_to_lab(rgb.reshape(-1, 3)) * weight
    pal = _palette_lab() * weight
    # |a-b|^2 = |a|^2 - 2ab + |b|^2, in one matrix product (a 120x120 frame: 14400 x 240)
    d = (lab ** 2).sum(1)[:, None] - 2 * lab @ pal.T + (pal ** 2).sum(1)[None, :]
    return usable_indices()[d.argmin(1)].reshape(rgb.shape[:2])


def rich_downgrade_indices(image: PILImage.Image) -> np.ndarray:
    """The palette indices Rich gives the same pixels when the terminal has 256 colours (what the
    half-block renderer shows there without this module), shape (height, width)."""
    from rich.color import Color, ColorSystem

    rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    cache: dict[tuple[int, int, int], int] = {}
    out = np.empty(rgb.shape[:2], dtype=np.uint8)
    for y in range(rgb.shape[0]):
        for x in range(rgb.shape[1]):
            key = tuple(int(v) for v in rgb[y, x])
            if key not in cache:
                cache[key] = Color.from_rgb(*key).downgrade(ColorSystem.EIGHT_BIT).number
            out[y, x] = cache[key]
    return out


def mean_lab_error(image: PILImage.Image, indices: np.ndarray) -> float:
    """Mean CIE76 distance (Lab units; ~2.3 is a just-noticeable difference) between ``image`` and the
    palette colours ``indices`` show for it."""
    lab = srgb_to_lab(np.asarray(image.convert("RGB"), dtype=np.uint8))
    shown = srgb_to_lab(xterm_palette()[indices])
    return float(np.sqrt(((lab - shown) ** 2).sum(-1)).mean())
