"""The picture in a Rich/Textual SVG screenshot as a grid of terminal cells, for snapshot comparison.

Rich's ``export_svg`` writes one ``<rect>`` per background segment and one ``<text>`` per styled
text segment, so the same picture can be written with different segment boundaries (a widget drawn
through a cached, simplified strip on one machine and segment by segment on another), and its
``terminal-<adler32>`` id hashes Textual's invisible style metadata. Comparing the files byte for byte
therefore fails on pictures that look identical. ``cell_grid`` reduces a screenshot to what is seen:
for every cell (row, column) its background colour, its character and the CSS of its text style
(colour, weight, decoration), from Rich's layout constants (cell 12.2 px wide, line 24.4 px high,
rect ``y = row * 24.4 + 1.5``; ``rich/console.py`` ``export_svg``).
"""

from __future__ import annotations

import html
import re

from rich.cells import cell_len

CHAR_W = 12.2
LINE_H = 24.4

_STYLE = re.compile(r"\.terminal-\d+-(r\d+)\s*\{([^}]*)\}")
_RECT = re.compile(r'<rect fill="(#[0-9a-fA-F]+)" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="[\d.]+" '
                   r'shape-rendering="crispEdges"/>')
_TEXT = re.compile(r'<text class="terminal-\d+-(r\d+)" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
                   r'clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)</text>')


Cell = tuple[str, str, str]  # (background fill, character, text style css)


def cell_grid(svg: str) -> dict[tuple[int, int], Cell]:
    """``{(row, column): (background, char, style)}`` of every cell the screenshot draws.

    Raises:
        ValueError: the text is not a Rich SVG screenshot (no styles or no cells found).
    """
    styles = {name: " ".join(body.split()) for name, body in _STYLE.findall(svg)}
    if not styles:
        raise ValueError("not a Rich SVG screenshot: no terminal-<id>-rN styles")
    grid: dict[tuple[int, int], list[str]] = {}
    for fill, x, y, width in _RECT.findall(svg):
        row = round((float(y) - 1.5) / LINE_H)
        col = round(float(x) / CHAR_W)
        for c in range(col, col + round(float(width) / CHAR_W)):
            grid.setdefault((row, c), ["", " ", ""])[0] = fill.lower()
    for cls, x, line, content in _TEXT.findall(svg):
        row, col = int(line), round(float(x) / CHAR_W)
        for ch in html.unescape(content).replace("\xa0", " "):
            cell = grid.setdefault((row, col), ["", " ", ""])
            cell[1], cell[2] = ch, styles.get(cls, cls) if ch != " " else ""
            col += max(cell_len(ch), 1)
    if not grid:
        raise ValueError("not a Rich SVG screenshot: no cells")
    return {k: (v[0], v[1], v[2]) for k, v in grid.items()}


def grid_diff(actual: str, expected: str, limit: int = 8) -> str:
    """A readable account of where two screenshots' pictures differ: the first ``limit`` differing
    rows, each as its text in both plus the first differing cell; empty when the pictures match."""
    a, e = cell_grid(actual), cell_grid(expected)
    rows = sorted({r for r, _ in a} | {r for r, _ in e})
    out: list[str] = []
    for r in rows:
        cols = sorted({c for rr, c in a if rr == r} | {c for rr, c in e if rr == r})
        diff = [c for c in cols if a.get((r, c)) != e.get((r, c))]
        if not diff:
            continue
        text = lambda g: "".join(g.get((r, c), ("", " ", ""))[1] for c in cols).rstrip()  # noqa: E731
        out.append(f"row {r}: expected {text(e)!r}\n        actual   {text(a)!r}\n"
                   f"        first difference at column {diff[0]}: expected {e.get((r, diff[0]))} "
                   f"actual {a.get((r, diff[0]))}")
        if len(out) >= limit:
            out.append("...")
            break
    return "\n".join(out)


def same_picture(actual: str, expected: str) -> bool:
    """True when both screenshots draw the same cells (background, character, text style)."""
    return cell_grid(actual) == cell_grid(expected)
