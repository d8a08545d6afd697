"""``rpent-batch leaderboard`` and ``rpent-batch status``.

Examples::

    rpent-batch leaderboard results/lb --published experiments/published/rpent_libero_pro.yaml
    rpent-batch leaderboard results/lb results/lb_llm --output site/leaderboard.html --markdown lb.md
    rpent-batch status results/lb
    rpent-batch status results/lb --json

``leaderboard`` reads the run records of one or more results roots (nothing runs), writes the
self-contained HTML page (default ``<first root>/leaderboard.html``) and prints the same table as
Markdown (``--markdown FILE`` also writes it). ``status`` answers from the files of a results root
while its batch runs (or after), counting cells from their run records as ``rpent-batch report``
does and listing attempts whose record disagrees with the ledger. Exit codes: 0; 2 bad input (one line naming the problem).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["build_leaderboard_parser", "build_status_parser", "leaderboard_main", "status_main"]


def build_leaderboard_parser() -> argparse.ArgumentParser:
    """The ``rpent-batch leaderboard`` parser."""
    p = argparse.ArgumentParser(
        prog="rpent-batch leaderboard",
        description="Write the leaderboard of one or more results roots as a self-contained static HTML page (sortable, "
                    "per-suite drill-down, pairwise Fisher/CMH panel, a link per cell to its run record) and print it "
                    "as Markdown. Runs nothing.",
        epilog="Exit codes: 0; 2 bad input.")
    p.add_argument("roots", nargs="+", metavar="RESULTS_ROOT", help="rpent-batch results roots (one row per arm)")
    p.add_argument("--published", action="append", default=[], metavar="FILE",
                   help="YAML file of published reference rows, shown as 'published, not rerun here' (repeatable; "
                        "format: rpent/leaderboard/published.py)")
    p.add_argument("--output", default=None, metavar="FILE",
                   help="the HTML page (default <first root>/leaderboard.html); links to records are relative to it")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the Markdown table to FILE")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the leaderboard document (JSON) to FILE")
    p.add_argument("--title", default="Leaderboard", help="page and table title (default 'Leaderboard')")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval coverage (default 0.95)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the pairwise verdicts (default 0.05)")
    return p


def build_status_parser() -> argparse.ArgumentParser:
    """The ``rpent-batch status`` parser."""
    p = argparse.ArgumentParser(
        prog="rpent-batch status",
        description="Where a batch stands, from its results root's files (works while it runs): cells done/total, each "
                    "arm's success so far with its Wilson interval, running attempts, and the runner's ETA and "
                    "per-node load. Cells are counted from their run records, read as 'rpent-batch report' reads "
                    "them; an attempt whose record disagrees with the ledger's end line (record edited or broken "
                    "since) is counted as the record says and listed.",
        epilog="Exit codes: 0; 2 bad input.")
    p.add_argument("root", metavar="RESULTS_ROOT")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval coverage (default 0.95)")
    return p


def leaderboard_main(argv: list[str]) -> int:
    """``rpent-batch leaderboard``; returns the exit code."""
    from rpent.leaderboard.collect import LeaderboardError, build_board
    from rpent.leaderboard.html import render_html, write_page
    from rpent.leaderboard.markdown import render_markdown
    from rpent.leaderboard.published import PublishedError, load_published
    from rpent.recording.atomic import write_bytes_atomic

    parser = build_leaderboard_parser()
    args = parser.parse_args(argv)
    for flag, v, example in (("--confidence", args.confidence, "0.95"), ("--alpha", args.alpha, "0.05")):
        if not 0 < v < 1:
            parser.error(f"{flag} must be in (0, 1), e.g. {example}; got {v:g}")
    out = Path(args.output) if args.output else Path(args.roots[0]) / "leaderboard.html"
    for flag, p, name in (("--output", out, "leaderboard.html"),
                          *([("--markdown", Path(args.markdown), "leaderboard.md")] if args.markdown else []),
                          *([("--json", Path(args.json), "leaderboard.json")] if args.json else [])):
        if p.is_dir():
            parser.error(f"{flag} {p} is a directory; give a file name (e.g. {p / name})")
    try:
        published = [load_published(f) for f in args.published]
        board = build_board(args.roots, out.parent, published, confidence=args.confidence, alpha=args.alpha)
    except (LeaderboardError, PublishedError) as exc:
        parser.error(str(exc))
    md = render_markdown(board, title=args.title)
    flag, target = "--output", out
    try:
        write_page(out, render_html(board, title=args.title))
        if args.markdown:
            flag, target = "--markdown", Path(args.markdown)
            write_page(target, md)
        if args.json:
            flag, target = "--json", Path(args.json)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(target, (json.dumps(board, indent=1) + "\n").encode("utf-8"))
    except OSError as exc:
        parser.error(f"cannot write {flag} {target}: {exc.strerror or exc}; choose another {flag}")
    print(md, end="")
    runs = sum(r["kind"] == "run" for r in board["rows"])
    print(f"rpent-batch leaderboard: {out} ({runs} arm(s), {len(board['rows']) - runs} published row(s))"
          + (f"; markdown in {args.markdown}" if args.markdown else ""), file=sys.stderr)
    return 0


def status_main(argv: list[str]) -> int:
    """``rpent-batch status``; returns the exit code."""
    from rpent.batch.progress import read_status, render_status

    parser = build_status_parser()
    args = parser.parse_args(argv)
    if not 0 < args.confidence < 1:
        parser.error(f"--confidence must be in (0, 1), e.g. 0.95; got {args.confidence:g}")
    try:
        st = read_status(args.root, args.confidence)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(st, indent=1) if args.json else render_status(st), end="\n" if args.json else "")
    return 0
