"""``rpent-flash``: make flash plans from solved runs (RPent reference §6.4).

Example::

    rpent-flash generate --audit logs/RUN/transcript_object_t0_s0.json \\
        --recipe logs/RUN/object_t0_s0_recipe.jsonl --destination memory/libero/flash
    rpent --suite libero_object --task 0 --seed 3 --planner flash --flash-dir memory/libero/flash
    rpent-flash replay --flash-dir memory/libero/flash --suite libero_object --task 0 --seeds 1 2 3 \\
        --output-root logs/flash_t0

``replay`` runs the seeds one after the other in this process on one shared env server
(:mod:`rpent.flash.batch`), each a separate run record in ``<output-root>/<tag>/``.

Exit codes: generate: 0 written, 2 bad input. replay: 0 every seed solved, 1 some seed not
solved, 2 bad input, a run error or a stop by SIGTERM/SIGINT/SIGHUP (the running episode's record
says cancelled and names the signal, its row is in ``replay.jsonl``, no further seed starts).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-flash`` parser."""
    p = argparse.ArgumentParser(prog="rpent-flash", description="Flash plans: replay a solved run without an LLM.",
                                epilog="Exit codes: see `rpent-flash generate --help` and `rpent-flash replay --help`.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="turn one solved run into <cell>_plan.json + <cell>_anchors.json",
                       description="Turn one solved run into <cell>_plan.json + <cell>_anchors.json.",
                       epilog="Exit codes: 0 written (both paths printed), 2 bad input (the run is not solved or "
                              "not labelled succeeded, a file is missing or malformed, the cell's plan exists "
                              "without --replace).")
    g.add_argument("--audit", required=True,
                   help="the run's transcript_<tag>.json (or its run directory); the run must be solved")
    g.add_argument("--recipe", required=True, help="the run's <tag>_recipe.jsonl")
    g.add_argument("--destination", required=True, help="flash directory to write into (created)")
    g.add_argument("--replace", action="store_true",
                   help="overwrite the plan and anchors of the same cell in --destination (refused without it)")
    g.add_argument("--bind-radius-m", type=float, default=None,
                   help="waypoints within this XY distance (m) of an anchor are stored relative to it (default 0.15)")
    r = sub.add_parser("replay", help="replay a task's flash plan on several seeds on one shared env server",
                       description="Replay a task's flash plan on several seeds on one shared env server; JSON "
                                   "lines on stdout (one per episode, one per env server start), a run record "
                                   "per seed.",
                       epilog="Exit codes: 0 every seed solved, 1 some seed not solved, 2 bad input (before "
                              "anything starts), an episode ended in an error or was cancelled, or not every "
                              "seed ran.")
    r.add_argument("--flash-dir", required=True, help="directory of <cell>_plan.json/_anchors.json")
    r.add_argument("--suite", required=True, help="LIBERO / LIBERO-PRO suite, e.g. libero_object or libero_goal_swap")
    r.add_argument("--task", type=int, required=True, help="task index in the suite (0-9; libero_90: 0-89)")
    r.add_argument("--seeds", type=int, nargs="+", required=True, help="replay seeds (distinct, >= 0)")
    r.add_argument("--output-root", required=True, help="run directories go to <output-root>/<tag>/ (+ replay.jsonl)")
    r.add_argument("--libero-type", choices=("standard", "pro"), default=None,
                   help="LIBERO variant, as for rpent (default $LIBERO_TYPE, else pro; pro includes the standard suites)")
    r.add_argument("--max-episode-steps", type=int, default=10000,
                   help="env steps before an episode is truncated (default 10000)")
    r.add_argument("--transport", choices=("http", "socket"), default="socket",
                   help="RPC transport to the env server (default socket)")
    r.add_argument("--cuda-device", type=int, default=None,
                   help="GPU for the spawned env server (EGL device for MuJoCo), as for rpent")
    r.add_argument("--planner-timeout-s", type=float, default=None, help="per-episode limit (s)")
    r.add_argument("--run-dir", action="append", default=[], metavar="SEED=DIR",
                   help="write the episode of SEED into DIR (new or empty) instead of <output-root>/<tag>/; "
                        "repeat for every seed")
    r.add_argument("--fresh-env-per-seed", action="store_true",
                   help="start a new env server for every seed (as plain rpent runs do) instead of sharing one")
    return p


def _replay(args) -> int:
    import json

    import trio

    from rpent.flash.batch import ReplayOptions, check_options, replay_seeds

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s", stream=sys.stderr)
    run_dirs = None
    if args.run_dir:
        run_dirs = {}
        for item in args.run_dir:
            seed, sep, path = item.partition("=")
            if not sep or not seed.strip().isdigit() or not path:
                print(f"rpent-flash: error: --run-dir {item!r}: write it SEED=DIR, e.g. 3=runs/t0_s3", file=sys.stderr)
                return 2
            run_dirs[int(seed)] = path
    opts = ReplayOptions(flash_dir=args.flash_dir, suite=args.suite, task=args.task, seeds=list(args.seeds),
                         output_root=args.output_root, libero_type=args.libero_type,
                         max_episode_steps=args.max_episode_steps, transport=args.transport,
                         cuda_device=args.cuda_device, timeout_s=args.planner_timeout_s,
                         fresh_env=args.fresh_env_per_seed, run_dirs=run_dirs)
    if args.max_episode_steps < 1:
        print("rpent-flash: error: --max-episode-steps must be >= 1", file=sys.stderr)
        return 2
    try:
        from rpent.cli.paths import check_output_dir

        check_output_dir(args.output_root, "--output-root")
        check_options(opts)
    except ValueError as exc:
        print(f"rpent-flash: error: {exc}", file=sys.stderr)
        return 2
    try:  # before any env server starts: an uncreatable place is a one-line refusal, not a traceback later
        Path(args.output_root).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"rpent-flash: error: --output-root {args.output_root} cannot be created ({exc.strerror or exc}); "
              "choose a directory you can write to", file=sys.stderr)
        return 2
    rows = trio.run(lambda: replay_seeds(opts, on_row=lambda r: print(json.dumps(r), flush=True)))
    eps = [r for r in rows if r["kind"] == "episode"]
    ok = sum(bool(r["success"]) for r in eps)
    ran = "" if len(eps) == len(opts.seeds) else f" (of the {len(eps)} that ran; {len(opts.seeds)} asked)"
    print(f"rpent-flash: {ok}/{len(eps)} seeds solved{ran}; records in {args.output_root}", file=sys.stderr)
    cancelled = [r for r in eps if r.get("label") == "cancelled"]
    stopped = [r for r in rows if r["kind"] == "stopped"]
    if cancelled or stopped:  # a cancelled episode is the last one: no seed starts after it
        why = (cancelled and cancelled[0].get("error")) or (stopped and stopped[0]["reason"]) or "interrupted"
        after = f" after seed {eps[-1]['seed']}" if eps else ""
        print(f"rpent-flash: {why}; replay stopped{after} ({len(opts.seeds) - len(eps)} seed(s) not started)",
              file=sys.stderr)
    if any(r.get("label") in ("error", "cancelled") for r in eps) or len(eps) < len(opts.seeds):
        return 2
    return 0 if ok == len(eps) else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0 or 2."""
    args = build_parser().parse_args(argv)
    if args.command == "replay":
        return _replay(args)
    from rpent.flash.generate import BIND_RADIUS_M, FlashGenerateError, generate

    try:
        plan, anchors = generate(args.audit, args.recipe, args.destination,
                                 bind_radius_m=args.bind_radius_m if args.bind_radius_m is not None else BIND_RADIUS_M,
                                 replace=args.replace,
                                 argv=list(sys.argv) if argv is None else ["rpent-flash", *argv])
    except (FlashGenerateError, OSError) as exc:
        print(f"rpent-flash: error: {exc}", file=sys.stderr)
        return 2
    print(f"rpent-flash: wrote {plan} and {anchors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
