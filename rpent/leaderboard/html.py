"""The leaderboard page: one self-contained static HTML file (inline CSS and JavaScript, no server,
no network: it opens offline from disk) rendered with Jinja2 from a
:func:`rpent.leaderboard.collect.build_board` document.

The page has the leaderboard table (sortable by any column; each arm's row opens a drill-down with
its per-suite table and, per suite, every cell by task, linked to its run record and episode video),
a pairwise comparison panel (two selects; the Fisher / Cochran-Mantel-Haenszel results of every
pair are computed here with scipy and embedded as JSON) and the provenance of every results root
(invocations: dates, host, commit, command). Links to records are relative to the page's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rpent.leaderboard.markdown import ranked, short_suite
from rpent.recording.atomic import write_bytes_atomic

__all__ = ["render_html", "write_page", "OFFLINE_PLANNER_CAVEAT"]

#: Shown on the page (and in the docs) whenever a row runs the offline planner.
OFFLINE_PLANNER_CAVEAT = ("The offline planner (planner 'scripted', and flash plans made from its runs) reads the "
                          "simulator's state and its oracle segmentation: its rows are an expert baseline, not a "
                          "like-for-like comparison with models that see only camera images.")


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _ci(o: dict) -> str:
    if o.get("wilson_low") is None:
        return "-"
    return f"[{100 * o['wilson_low']:.1f}, {100 * o['wilson_high']:.1f}]"


def _num(x: Any, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _wall(r: dict) -> float | None:
    return r.get("wall_s_per_episode") if r["kind"] == "published" else r["overall"].get("median_wall_s")


def _tokens_value(r: dict) -> Any:
    o = r["overall"]
    total = None
    if o.get("tokens_in_per_episode") is not None or o.get("tokens_out_per_episode") is not None:
        total = (o.get("tokens_in_per_episode") or 0) + (o.get("tokens_out_per_episode") or 0)
    elif r.get("tokens_per_episode") is not None:
        total = r["tokens_per_episode"]
    return "" if total is None else total


def _tokens(r: dict) -> str:
    o = r["overall"]
    if o.get("tokens_in_per_episode") is not None:
        return f"{o['tokens_in_per_episode']:,.0f} / {o.get('tokens_out_per_episode') or 0:,.0f}"
    if o.get("tokens_out_per_episode") is not None:
        return f"{o['tokens_out_per_episode']:,.0f} out"
    if r.get("tokens_per_episode") is not None:
        return f"{r['tokens_per_episode']:,.0f}"
    return "-"


def render_html(board: dict[str, Any], *, title: str = "Leaderboard", caveats: list[str] | None = None) -> str:
    """The page's HTML text.

    Args:
        board: a :func:`rpent.leaderboard.collect.build_board` document.
        title: page title. caveats: extra lines shown under the title (the offline-planner caveat is
            added when a row uses the scripted planner or flash plans made from it).
    """
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("rpent.leaderboard", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    rows = ranked(board["rows"])
    notes = list(caveats or [])
    if any(r["kind"] == "run" and (r.get("planner") == "scripted" or r.get("flash_from")) for r in rows):
        notes.insert(0, OFFLINE_PLANNER_CAVEAT)
    show_label = any(r.get("label") for r in rows)
    ncols = 6 + len(board["suites"]) + 4 + (1 if show_label else 0) + 1
    return env.get_template("leaderboard.html.j2").render(
        board=board, rows=rows, title=title, caveats=notes, show_label=show_label, ncols=ncols,
        conf=int(round(100 * board.get("confidence", 0.95))), names={r["id"]: r["name"] for r in rows},
        short=short_suite, pct=_pct, ci=_ci, num=_num, wall=_wall, tokens=_tokens, tokens_value=_tokens_value)


def write_page(path: str | Path, html: str) -> Path:
    """Write the page atomically (a temporary name, then a rename); returns its path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(p, html.encode("utf-8"))
    return p
