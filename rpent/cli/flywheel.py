"""Entry point for ``rpent-flywheel``: export trajectory records to LeRobot datasets, check them, look at them.

Usage::

    rpent-flywheel [export] --input-root RUNS --output-dir NEW [--rules v1|v2] [--video [--vcodec C] [--keyframe-interval G]]
        [--val-fraction F [--split-seed S]] [--image-stats sampled|full] [--image-writer-threads N]
        [--include-disagreements] [--no-progress]
    rpent-flywheel validate ROOT [--json]
    rpent-flywheel view DATASET [--episode K] [--output FILE.rrd] [--image-format jpeg|png]

``export`` is the default command (the product document's form
``rpent-flywheel --input-root ... --output-dir ...`` keeps working).

Exit status: export: 0 when a dataset was written, 3 when no episode qualified (nothing exported:
only ``--output-dir``/``report.json`` is written, with the exclusions; no ``train/``), 2 when
refused (existing output dir, missing input, mixed robots, bad values), 1 when writing failed,
130 when interrupted (SIGINT) and 143 (SIGTERM); nothing is left at ``--output-dir`` in the last
three cases. validate: 0 when every record is sound, 1 when some
has a problem or the root holds no raw record at all, 2 on a missing root. view: 0 written, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
import os
import sys

COMMANDS = ("export", "validate", "view")

#: ``export`` exit status when no episode qualified: nothing exported, only ``report.json`` written.
EXIT_NOTHING_EXPORTED = 3


def _export_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--input-root",
        required=True,
        action="append",
        help="a trajectory directory (with task.json), a run directory, an rpent-batch results root, or any parent "
             "of many runs (searched recursively); repeat it to export several",
    )
    p.add_argument("--output-dir", required=True, help="new directory to create (must not exist)")
    p.add_argument("--rules", choices=("v1", "v2"), default="v1",
                   help="v1 (default): the product document's rules, VLA actions linked to a prediction only; "
                        "v2: every executed action, scripted and VLA, up to and including the first success "
                        "(needs runs recorded with --record-observations all)")
    p.add_argument("--video", action="store_true",
                   help="store the cameras as video (lerobot video features, encoded on the CPU) instead of PNG")
    p.add_argument("--vcodec", choices=("libsvtav1", "h264"), default="libsvtav1",
                   help="video codec with --video (default libsvtav1 = AV1, lerobot's default; h264 = libx264)")
    p.add_argument("--keyframe-interval", type=int, default=2, metavar="G",
                   help="with --video: frames between key frames (default 2, lerobot's: fast random access; "
                        "a larger value, e.g. 240, makes files about 5x smaller for training that decodes whole videos)")
    p.add_argument("--val-fraction", type=float, default=0.0, metavar="F",
                   help="put this share of whole episodes into <output-dir>/val (default 0: train only)")
    p.add_argument("--split-seed", type=int, default=0, metavar="S", help="seed of the episode split (default 0)")
    p.add_argument("--image-stats", choices=("sampled", "full"), default="sampled",
                   help="camera statistics per episode: on every 4th pixel row and column (default, 16x less work) "
                        "or on every pixel")
    p.add_argument(
        "--image-writer-threads",
        type=int,
        default=0,
        metavar="N",
        help="threads of lerobot's image writer (default 0); recorded PNG frames are copied as they are, so this "
             "only matters for images that are not PNG files",
    )
    p.add_argument("--include-disagreements", action="store_true",
                   help="also export runs the operator rejected although the environment predicate held, flagged "
                        "in report.json and the dataset card (for studies of disagreement; never the default: "
                        "only runs labelled succeeded are exported)")
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.epilog = (f"Exit status: 0 dataset written; {EXIT_NOTHING_EXPORTED} no episode qualified (nothing exported, "
                "only OUT/report.json with the exclusions); 2 refused; 1 write failed; 130/143 interrupted.")
    return p


def build_parser() -> argparse.ArgumentParser:
    """Return the ``rpent-flywheel`` argument parser (subcommands export, validate, view)."""
    p = argparse.ArgumentParser(
        prog="rpent-flywheel",
        description=(
            "Export recorded runs (rpent --record-trajectory) to LeRobot v3.0 datasets in <output-dir>/train "
            "(and val) plus <output-dir>/report.json; validate raw records; view a dataset's episode with Rerun. "
            "`rpent-flywheel --input-root ... --output-dir ...` is the export."
        ),
        epilog="Exit codes: see each command's --help (export, validate, view).",
    )
    sub = p.add_subparsers(dest="command")
    _export_parser(sub.add_parser("export", help="export records to a LeRobot dataset (the default command)"))
    v = sub.add_parser("validate", help="check raw trajectory records and the run records beside them (transcript, "
                                         "states.json); say what is wrong per episode; list run directories without "
                                         "a trajectory record and runs that never ended (no transcript: killed?)")
    v.epilog = ("Exit codes: 0 every record valid, 1 a record with problems, a run that never ended, or no record "
                "under ROOT, 2 ROOT does not exist.")
    v.add_argument("root", help="a record, a run directory, a batch results root or any parent")
    v.add_argument("--json", action="store_true", help="print the findings as JSON")
    w = sub.add_parser("view", help="write a Rerun recording (.rrd) of one episode of an exported dataset")
    w.epilog = "Exit codes: 0 written (its path is printed), 2 not a dataset, no such episode, or --output exists."
    w.add_argument("dataset", help="an exported dataset (the directory holding meta/info.json, e.g. OUT/train) or OUT")
    w.add_argument("--episode", type=int, default=0, metavar="K", help="episode index (default 0)")
    w.add_argument("--output", default=None, metavar="FILE.rrd",
                   help="where to write the recording (default <dataset>/../view_<train|val>_episode_<K>.rrd)")
    w.add_argument("--image-format", choices=("jpeg", "png"), default="jpeg",
                   help="camera frames as JPEG (default, quality 90, small) or lossless PNG")
    return p


def _legacy_export_parser() -> argparse.ArgumentParser:
    return _export_parser(argparse.ArgumentParser(
        prog="rpent-flywheel",
        description="Export recorded runs to a LeRobot v3.0 dataset (same as `rpent-flywheel export`); "
                    "other commands: validate, view (see `rpent-flywheel -h`).",
    ))


def _err(msg: str) -> None:
    print(f"rpent-flywheel: {msg}", file=sys.stderr, flush=True)


def _run_export(args: argparse.Namespace) -> int:
    from rpent.flywheel.export import FlywheelError, export_records
    from rpent.flywheel.partial import ExportInterrupted
    from rpent.cli.paths import check_output_dir

    try:
        check_output_dir(args.output_dir, "--output-dir")
    except ValueError as e:
        _err(f"error: {e}")
        return 2
    try:
        report = export_records(
            args.input_root,
            args.output_dir,
            rules=args.rules,
            image_writer_threads=args.image_writer_threads,
            video=args.video,
            vcodec=args.vcodec,
            keyframe_interval=args.keyframe_interval,
            image_stats=args.image_stats,
            val_fraction=args.val_fraction,
            split_seed=args.split_seed,
            progress=not args.no_progress,
            log=lambda m: _err(m),
            include_disagreements=args.include_disagreements,
            argv=list(sys.argv),
        )
    except FlywheelError as e:
        _err(f"error: {e}")
        return 2
    except ExportInterrupted as e:
        _err(f"export {e}; the partial build directory was removed, nothing written to {args.output_dir}")
        return 128 + e.signum
    except KeyboardInterrupt:
        _err(f"export interrupted; the partial build directory was removed, nothing written to {args.output_dir}")
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line instead of a traceback for users
        _err(f"export failed, nothing written to {args.output_dir}: {type(e).__name__}: {e}")
        return 1
    c = report["counts"]
    if report["dataset"] is None:
        reasons = ", ".join(f"{k} x{v}" for k, v in report["exclusion_counts"].items()) or "none"
        _err(
            f"nothing exported: no episode qualifies under rules {report['rules']}: {c['runs_seen']} run(s) seen, "
            f"0 exported (reasons: {reasons}); only {args.output_dir}/report.json was written (see its exclusions)"
        )
        if c["runs_seen"] == 0:
            _err("no trajectory records (trajectories/<task_id>/task.json) under the input root: record runs with "
                 "`rpent ... --record-trajectory --output-dir RUN` and export RUN")
        return EXIT_NOTHING_EXPORTED
    else:
        val = report.get("val_dataset")
        print(
            f"exported {c['frames']} frame(s) in {c['episodes']} episode(s) from {c['runs_exported']} of "
            f"{c['runs_seen']} run(s) under rules {report['rules']} to {args.output_dir}/train"
            + (f" and {args.output_dir}/val ({val['episodes']} episode(s))" if val else "")
            + f" (report: {args.output_dir}/report.json)"
        )
        excluded = Counter(x["reason"] for x in report["exclusions"] if x.get("scope") == "run")
        if excluded:
            print(f"runs excluded (label policy {report['label_policy']} and rules {report['rules']}): "
                  + ", ".join(f"{k} x{v}" for k, v in sorted(excluded.items())))
    return 0


def _run_validate(args: argparse.Namespace) -> int:
    from rpent.flywheel.validate import validate_root

    try:
        result = validate_root(args.root)
    except FileNotFoundError as e:
        _err(f"error: {e}")
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for rec in result["records"]:
            head = f"{rec['record']}: {'ok' if rec['ok'] else 'PROBLEMS'}"
            if rec.get("label_exclusion"):
                head += f", not exportable ({rec['label_exclusion']['reason']})"
            print(f"{head} ({rec['summary']})")
            for prob in rec["problems"]:
                print(f"  - [{prob['check']}] {prob['detail']}")
        c = result["counts"]
        print(f"{c['records']} record(s): {c['ok']} ok, {c['with_problems']} with problems")
    if result["counts"]["records"] == 0:  # a wrong folder must not pass as "all valid"
        _err(f"error: no raw episode records under {args.root} (record them with --record-trajectory, "
             "or rpent-batch with recording on, and point validate at that output or results root)")
        return 1
    return 0 if result["counts"]["with_problems"] == 0 else 1


def _run_view(args: argparse.Namespace) -> int:
    from rpent.flywheel.view import ViewError, write_episode_rrd

    try:
        out = write_episode_rrd(args.dataset, args.episode, args.output, image_format=args.image_format)
    except ViewError as e:
        _err(f"error: {e}")
        return 2
    print(f"wrote {out['path']} ({out['frames']} frame(s) of episode {args.episode}, {out['bytes'] / 1e6:.1f} MB, "
          f"{args.image_format.upper()} frames); open it with `rerun {out['path']}`")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command; return the exit status (see module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS or (argv and argv[0] in ("-h", "--help")):
        args = build_parser().parse_args(argv)
    else:
        args = _legacy_export_parser().parse_args(argv)
        args.command = "export"
    if args.command == "validate":
        try:
            return _run_validate(args)
        except BrokenPipeError:  # `validate --json | head`: the reader left; no traceback, as a pipe expects
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    if args.command == "view":
        return _run_view(args)
    return _run_export(args)


if __name__ == "__main__":
    sys.exit(main())
