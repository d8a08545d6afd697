"""The leaderboard as a Markdown table (for a docs results page): one row per arm, best first, with
k/N, the rate and its Wilson interval overall and per suite, wall time, tokens and cost per
episode, label success where records carry operator verdicts, and the published rows marked
"published, not rerun here" with their source."""

from __future__ import annotations

from typing import Any

__all__ = ["render_markdown", "ranked", "short_suite"]


def short_suite(suite: str) -> str:
    """``libero_object_task`` -> ``object_task`` (column headers)."""
    return suite.removeprefix("libero_")


def ranked(rows: list[dict]) -> list[dict]:
    """Rows best first: by success rate, then by episodes (rows without a rate last)."""
    return sorted(rows, key=lambda r: (r["overall"]["rate"] is None, -(r["overall"]["rate"] or 0.0),
                                       -(r["overall"]["n"] or 0)))


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _ci(o: dict) -> str:
    if o.get("wilson_low") is None:
        return "-"
    return f"[{100 * o['wilson_low']:.1f}, {100 * o['wilson_high']:.1f}]"


def _num(x: Any, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _tokens(r: dict) -> str:
    o = r["overall"]
    if r["kind"] == "published":
        if o.get("tokens_out_per_episode") is not None:
            return f"{o['tokens_out_per_episode']:,.0f} out"
        return "-" if r.get("tokens_per_episode") is None else f"{r['tokens_per_episode']:,.0f}"
    if o.get("tokens_in_per_episode") is None:
        return "-"
    return f"{o['tokens_in_per_episode']:,.0f} / {o['tokens_out_per_episode'] or 0:,.0f}"


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(board: dict[str, Any], *, title: str | None = "Leaderboard") -> str:
    """The Markdown of a :func:`rpent.leaderboard.collect.build_board` document."""
    conf = int(round(100 * board.get("confidence", 0.95)))
    suites = board["suites"]
    show_label = any(r.get("label") for r in board["rows"])
    head = ["#", "arm", "planner / model", "k/N", "success", f"Wilson {conf}%", *map(short_suite, suites),
            "median wall s", "p90 wall s", "tokens/ep (in / out)", "cost/ep"]
    if show_label:
        head.append("label success (verdict cells)")
    head.append("notes")
    lines = [] if not title else [f"## {title}", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    for i, r in enumerate(ranked(board["rows"]), 1):
        o = r["overall"]
        who = " / ".join(x for x in (r.get("planner"), r.get("model")) if x) or "-"
        if r["kind"] == "published":
            kn = f"{o['k']}/{o['n']}" if o["k"] is not None else f"?/{o['n']}"
            rate = r.get("rate_published") or _pct(o["rate"], 2)
            per_suite = ["-"] * len(suites)
            wall, p90 = _num(r.get("wall_s_per_episode")), "-"
            src = f"[{_esc(r['source'])}]({r['url']})" if r.get("url") else _esc(r["source"])
            note = f"published, not rerun here ({src})"
            if r.get("k_derived"):
                note += f"; k derived from the published rate and N = {o['n']}"
        else:
            kn, rate = f"{o['k']}/{o['n']}", _pct(o["rate"])
            per_suite = []
            for s in suites:
                so = r["suites"].get(s)
                per_suite.append("-" if not so or not so["planned"] else
                                 f"{so['k']}/{so['n']} {_pct(so['rate'], 0)}")
            wall, p90 = _num(o.get("median_wall_s")), _num(r.get("p90_wall_s"))
            bits = [f"seeds {r['seeds']}"]
            if o["infra"] or o["pending"]:
                bits.append(f"{o['infra']} infra, {o['pending']} pending (not in N)")
            if r.get("not_run"):
                bits.append(f"{r['not_run']} cells without a flash plan counted as failures")
            if r.get("note"):
                notes.append(f"- **{_esc(r['name'])}**: {_esc(r['note'])}")
            note = "; ".join(bits)
        cells = [str(i), _esc(r["name"]), _esc(who), kn, rate, _ci(o), *per_suite, wall, p90, _tokens(r),
                 _num(o.get("cost_usd_per_episode"), "${:.4f}")]
        if show_label:
            lab = r.get("label")
            cells.append("-" if not lab else f"{lab['label_k']}/{lab['n']} (env {lab['env_k']}/{lab['n']}, "
                                             f"{lab['verdicts']} verdicts, {lab['disagreements']} disagree)")
        cells.append(note)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"k/N: episodes solved (the environment's success predicate) over episodes with a task outcome; "
                  f"Wilson {conf}% interval. Wall: seconds per episode (the run process, start to end; a shared-env "
                  "flash arm: the episode plus its share of its replay's env server start). Infrastructure errors and "
                  "pending cells are not in N."]
    if show_label:
        lines.append("Label success: cells whose run label is `succeeded` over the decided cells with a label "
                     "(records with operator verdicts), next to the environment predicate on the same cells.")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"
