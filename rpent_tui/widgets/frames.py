"""Camera frame panes (main and wrist) drawn with sixel, the kitty protocol or half-block characters.

The widget class is chosen once from the resolved ``--images`` mode (``services.images``) and the
terminal's colour depth (``RpentApp.colour_depth``): ``sixel`` -> textual-image ``SixelImage``,
``kitty`` -> ``TGPImage``, ``halfblock`` -> ``HalfcellImage`` (plain coloured text: works in every
terminal and in SVG snapshots) in 24-bit colour (and with 16 colours, where Rich maps each cell), or
with 256 colours the same half-blocks in palette colours chosen by ``services.palette256``
(``Palette256Halfcell``), ``none`` -> a text placeholder. The panes are fixed-size and re-rendered only when a new frame arrives
(reference §3: sixel flickers when scrolled, so image panes stay static).

Size: the picture takes the largest size that fits the whole pane at the image's aspect ratio
(textual-image's ``auto`` x ``auto`` sizing, with the terminal's cell size in pixels; half-blocks
draw two square pixels per cell), centred; the caption (step) is the pane's bottom border title,
so no row is lost to it.
"""

from __future__ import annotations

import io
import types

from PIL import Image as PILImage
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

__all__ = ["FramePane", "image_widget_class", "decode_png", "renderer_name"]


_IMAGE_CLASSES: dict[str, type[Widget]] = {}


def _palette_renderable() -> type:
    """textual-image's half-cell renderable, drawing palette indices (``services.palette256``) instead of
    24-bit colours: for terminals with 256 colours, where Rich would otherwise round every pixel itself."""
    from rich.color import Color
    from rich.segment import Segment
    from rich.style import Style
    from textual_image._terminal import get_cell_size
    from textual_image.renderable.halfcell import Image as Halfcell

    from ..services.palette256 import carrier_rgb, quantize_xterm256

    colours = [Color.from_rgb(*(int(v) for v in rgb)) for rgb in carrier_rgb()]  # Rich emits index i for row i

    class Palette256Halfcell(Halfcell):
        """Half-cell image in xterm-256 palette colours (see ``services.palette256``)."""

        _indices: tuple[tuple[int, int], object] | None = None  # ((width, height), indices) of the last render

        def __rich_console__(self, console, options):  # noqa: ANN001, ANN204 - Rich's protocol
            width, height = self._render_size.get_cell_size(options.max_width, options.max_height, get_cell_size())
            height *= 2  # two pixels per cell, as the base renderer
            if self._indices is None or self._indices[0] != (width, height):
                scaled = self._image_data.scaled(width, height)._image
                self._indices = ((width, height), quantize_xterm256(scaled))
            indices = self._indices[1]
            for y in range(0, height - 1, 2):
                upper, lower = indices[y], indices[y + 1]
                for x in range(width):
                    yield Segment("▀", style=Style(color=colours[upper[x]], bgcolor=colours[lower[x]]))
                yield Segment("\n")

    return Palette256Halfcell


def renderer_name(mode: str, colour_depth: str) -> str:
    """What the status line says about the camera panes: ``sixel``, ``kitty``, ``none``, ``halfblock
    truecolor``, ``halfblock 256-colour palette`` or ``halfblock 16 colours`` (``colour_depth``:
    ``truecolor``, ``256``, ``16``)."""
    if mode != "halfblock":
        return mode
    return {"truecolor": "halfblock truecolor", "256": "halfblock 256-colour palette"}.get(colour_depth,
                                                                                          "halfblock 16 colours")


def _same_size_no_layout(base: type[Widget], renderable: type | None = None) -> type[Widget]:
    """A subclass of a textual-image widget whose ``image`` setter skips the screen layout pass when
    the new picture has the previous one's pixel size (a camera stream: every frame): the widget's
    cell size depends only on the pixel size and the pane, so a repaint is enough. textual-image
    always asks for ``refresh(layout=True)``, which reflows and repaints the whole screen."""

    def image_get(self):  # noqa: ANN001, ANN202 - textual-image's own type
        return base.image.fget(self)

    def image_set(self, value) -> None:  # noqa: ANN001
        before = (getattr(self, "_image_width", None), getattr(self, "_image_height", None))
        size = getattr(value, "size", None)
        self._repaint_only = bool(size) and tuple(size) == before and getattr(self, "_image", None) is not None
        try:
            base.image.fset(self, value)
        finally:
            self._repaint_only = False

    def refresh(self, *regions, repaint: bool = True, layout: bool = False, recompose: bool = False):  # noqa: ANN001, ANN202
        return base.refresh(self, *regions, repaint=repaint, layout=layout and not self._repaint_only,
                            recompose=recompose)

    namespace = {"_repaint_only": False, "image": property(image_get, image_set), "refresh": refresh,
                 "__module__": __name__, "__doc__": base.__doc__}
    # same class name: CSS type selectors and snapshots keep naming textual-image's widget
    return types.new_class(base.__name__, (base,), {"Renderable": renderable or base._Renderable},
                           lambda ns: ns.update(namespace))


def image_widget_class(mode: str, colour_depth: str = "truecolor") -> type[Widget] | None:
    """The textual-image widget class for an image mode (None for ``none``); half-blocks on a terminal
    with 256 colours (``colour_depth`` ``256``) draw palette colours. The class
    skips the layout pass when a new frame has the previous frame's pixel size (``_same_size_no_layout``).

    Raises:
        ValueError: an unknown mode (use ``services.images.resolve_image_mode`` first).
    """
    if mode == "none":
        return None
    from textual_image import widget as ti

    classes = {"sixel": ti.SixelImage, "kitty": ti.TGPImage, "halfblock": ti.HalfcellImage}
    if mode not in classes:
        raise ValueError(f"unresolved image mode {mode!r}; expected one of: {', '.join(classes)}, none")
    palette = mode == "halfblock" and colour_depth == "256"
    key = f"{mode}-palette" if palette else mode
    if key not in _IMAGE_CLASSES:
        _IMAGE_CLASSES[key] = _same_size_no_layout(classes[mode], _palette_renderable() if palette else None)
    return _IMAGE_CLASSES[key]


def decode_png(data: bytes) -> PILImage.Image:
    """PNG bytes -> RGB PIL image.

    Raises:
        ValueError: the bytes are not a decodable image.
    """
    try:
        image = PILImage.open(io.BytesIO(data))
        image.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises several types
        raise ValueError(f"camera frame is not a decodable PNG ({exc})") from None
    return image.convert("RGB")


class FramePane(Vertical):
    """A titled camera frame; ``show(png_bytes, caption)`` replaces the picture.

    Args:
        title: pane title (``main``, ``wrist``).
        mode: resolved image mode (``sixel``, ``kitty``, ``halfblock``, ``none``).
    """

    DEFAULT_CSS = """
    FramePane { height: 1fr; border: round $panel-lighten-2; border-title-color: $text-muted;
                border-subtitle-color: $text-muted; align: center middle; }
    FramePane > .frame-image { width: auto; height: auto; }
    FramePane > #frame-placeholder { width: 1fr; height: 1fr; content-align: center middle; color: $text-muted; }
    """

    def __init__(self, title: str, mode: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.mode = mode
        self._cls: type[Widget] | None = None
        self.has_frame = False
        self._shown_png: bytes | None = None

    def compose(self) -> ComposeResult:
        self._cls = image_widget_class(self.mode, getattr(self.app, "colour_depth", "truecolor"))
        if self._cls is not None:
            image = self._cls(None, classes="frame-image")
            image.display = False
            yield image
        yield Static("no frame yet" if self._cls is not None else "images off (--images none)", id="frame-placeholder")

    def show(self, png: bytes | None, caption: str = "") -> None:
        """Display ``png`` (None clears) with a one-line caption (the bottom border title)."""
        self.border_subtitle = caption
        if self._cls is None:
            return
        if png is not None and png is self._shown_png:
            return  # the same frame (a screen switch or counter repaint): nothing to redraw
        self._shown_png = png
        image = self.query_one(".frame-image")
        placeholder = self.query_one("#frame-placeholder", Static)
        if png is None:
            image.display, placeholder.display = False, True
            self.has_frame = False
            return
        try:
            picture = decode_png(png)
        except ValueError as exc:
            placeholder.update(str(exc))
            image.display, placeholder.display = False, True
            return
        image.image = picture
        image.display, placeholder.display = True, False
        self.has_frame = True
