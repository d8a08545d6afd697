"""``rpent-flash``: make flash plans from solved runs (RPent reference §6.4).

Example::

    rpent-flash generate --audit logs/RUN/transcript_object_t0_s0.json \\
        --recipe logs/RUN/object_t0_s0_recipe.jsonl --destination memory/libero/flash
    rpent --suite libero_object --task 0 --seed 3 --planner flash --flash-dir memory/libero/flash

Exit codes: 0 written, 2 bad input (one line naming the problem).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-flash`` parser."""
    p = argparse.ArgumentParser(prog="rpent-flash", description="Flash plans: replay a solved run without an LLM.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="turn one solved run into <cell>_plan.json + <cell>_anchors.json")
    g.add_argument("--audit", required=True,
                   help="the run's transcript_<tag>.json (or its run directory); the run must be solved")
    g.add_argument("--recipe", required=True, help="the run's <tag>_recipe.jsonl")
    g.add_argument("--destination", required=True, help="flash directory to write into (created)")
    g.add_argument("--bind-radius-m", type=float, default=None,
                   help="waypoints within this XY distance (m) of an anchor are stored relative to it (default 0.15)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0 or 2."""
    args = build_parser().parse_args(argv)
    from rpent.flash.generate import BIND_RADIUS_M, FlashGenerateError, generate

    try:
        plan, anchors = generate(args.audit, args.recipe, args.destination,
                                 bind_radius_m=args.bind_radius_m if args.bind_radius_m is not None else BIND_RADIUS_M)
    except (FlashGenerateError, OSError) as exc:
        print(f"rpent-flash: error: {exc}", file=sys.stderr)
        return 2
    print(f"rpent-flash: wrote {plan} and {anchors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
