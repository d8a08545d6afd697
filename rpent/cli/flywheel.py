"""Entry point for ``rpent-flywheel``: export trajectory records to a LeRobot dataset.

Usage (product document ``shared/seeds/004``)::

    rpent-flywheel --input-root /path/to/run --output-dir /path/to/lerobot/goal-task-00 \\
        [--image-writer-threads 4]

Exit status: 0 on success (also when nothing qualified: then only ``report.json`` is written),
2 when the export was refused (existing output dir, missing input, mixed robots),
1 when writing failed (nothing is left at ``--output-dir``).
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """Return the ``rpent-flywheel`` argument parser."""
    p = argparse.ArgumentParser(
        prog="rpent-flywheel",
        description=(
            "Export VLA-linked actions of successful runs (recorded with --record-trajectory) "
            "to a LeRobot v3.0 dataset in <output-dir>/train plus <output-dir>/report.json."
        ),
    )
    p.add_argument(
        "--input-root",
        required=True,
        action="append",
        help="a trajectory directory (with task.json), a run directory, or any parent of many runs; "
             "repeat it to export several",
    )
    p.add_argument("--output-dir", required=True, help="new directory to create (must not exist)")
    p.add_argument(
        "--image-writer-threads",
        type=int,
        default=0,
        metavar="N",
        help="threads that compress and save images in parallel (default 0: one by one)",
    )
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the export; return the exit status (see module docstring)."""
    args = build_parser().parse_args(argv)
    from rpent.flywheel.export import FlywheelError, export_records

    try:
        report = export_records(
            args.input_root,
            args.output_dir,
            image_writer_threads=args.image_writer_threads,
            progress=not args.no_progress,
        )
    except FlywheelError as e:
        print(f"rpent-flywheel: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one clear line instead of a traceback for users
        print(f"rpent-flywheel: export failed, nothing written to {args.output_dir}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    c = report["counts"]
    if report["dataset"] is None:
        print(
            f"nothing qualifies: {c['runs_seen']} run(s) seen, 0 exported; "
            f"only {args.output_dir}/report.json was written (see its exclusions)"
        )
        if c["runs_seen"] == 0:
            print("no trajectory records (trajectories/<task_id>/task.json) under the input root: record runs with "
                  "`rpent ... --record-trajectory --output-dir RUN` and export RUN")
    else:
        print(
            f"exported {c['frames']} frame(s) in {c['episodes']} episode(s) from {c['runs_exported']} of "
            f"{c['runs_seen']} run(s) to {args.output_dir}/train (report: {args.output_dir}/report.json)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
