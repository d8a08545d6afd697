"""``export_records``: trajectory records -> LeRobot dataset ``<output-dir>/train/`` + ``report.json``.

Steps: find every record under ``input_root``; refuse a mix of robots; apply the rules of
:mod:`rpent.flywheel.selection`; write the dataset with lerobot's writer into a hidden
temporary sibling of ``output_dir`` (``.<name>.partial-<hex>``); write ``report.json``; rename
the temporary directory to ``output_dir``. A failed export removes the temporary directory, so
``output_dir`` either does not exist or is complete. Input records are only read.
"""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import shutil
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from rpent.flywheel import dataset as _dataset
from rpent.flywheel.selection import ROBOT_TYPES, RunSelection, select_run
from rpent.recording.atomic import write_json_atomic
from rpent.recording.reader import find_record_dirs, load_record

REPORT_SCHEMA_VERSION = 1
DATASET_DIRNAME = "train"
REPORT_NAME = "report.json"


class FlywheelError(Exception):
    """The export was refused (bad arguments or inputs); nothing was written."""


def _rel(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root).as_posix()
        return rel or "."
    except ValueError:
        return str(path)


def _check_single_robot(records, root: Path) -> str | None:
    by_robot: dict[str, list[str]] = {}
    for rec in records:
        robot = (rec.task or {}).get("robot")
        if isinstance(robot, str) and robot:
            by_robot.setdefault(robot, []).append(_rel(rec.record_dir, root))
    if len(by_robot) > 1:
        parts = "; ".join(f"{r}: {len(d)} run(s), e.g. {d[0]}" for r, d in sorted(by_robot.items()))
        raise FlywheelError(
            f"runs of different robots under {root} ({parts}); export each robot separately "
            "with an --input-root that holds only that robot's runs"
        )
    return next(iter(by_robot), None)


def _build_report(
    input_root: Path,
    output_dir: Path,
    selections: list[RunSelection],
    robot: str | None,
    dataset_info: dict | None,
    image_writer_threads: int,
) -> dict:
    import rpent

    runs, exclusions = [], []
    episode_index = 0
    for sel in selections:
        rel = _rel(sel.record_dir, input_root)
        eps = []
        for ep in sel.episodes:
            eps.append(
                {
                    "episode_index": episode_index,
                    "frames": len(ep),
                    "seqs": [ep[0].seq, ep[-1].seq],
                    "tasks": list(dict.fromkeys(f.task for f in ep)),
                }
            )
            episode_index += 1
        runs.append(
            {
                "record": rel,
                "task_id": sel.task_id,
                "robot": sel.robot,
                "exported": sel.exported,
                "actions": sel.n_actions,
                "frames": sum(e["frames"] for e in eps),
                "episodes": eps,
            }
        )
        for ex in sel.exclusions:
            exclusions.append({"record": rel, "task_id": sel.task_id, **ex})
    frames = sum(r["frames"] for r in runs)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "rpent_version": getattr(rpent, "__version__", None),
        "input_root": str(input_root),
        "output_dir": str(output_dir),
        "robot": robot,
        "dataset": (
            {
                "path": DATASET_DIRNAME,
                "format": "LeRobot v3.0 (LeRobotDataset writer)",
                "repo_id": dataset_info["repo_id"],
                "robot_type": dataset_info["robot_type"],
                "fps": _dataset.FPS,
                "use_videos": False,
                "features": sorted(_dataset.FEATURES),
                "tasks": dataset_info["tasks"],
                "image_writer_threads": image_writer_threads,
                "validation_split": None,
            }
            if dataset_info
            else None
        ),
        "counts": {
            "runs_seen": len(selections),
            "runs_exported": sum(1 for s in selections if s.exported),
            "episodes": episode_index,
            "frames": frames,
            "actions_seen": sum(s.n_actions for s in selections),
        },
        "runs": runs,
        "exclusions": exclusions,
    }


def export_records(
    input_root: str | Path | Sequence[str | Path],
    output_dir: str | Path,
    *,
    image_writer_threads: int = 0,
    progress: bool = True,
) -> dict:
    """Export the qualifying VLA frames of every record under ``input_root`` to ``output_dir``.

    Args:
        input_root: one record directory (with ``task.json``), a run directory, or any parent;
            or a list of such paths (their records are merged; a record found twice counts once).
        output_dir: new directory; gets ``train/`` (the LeRobot dataset, the directory holding
            ``meta/info.json`` that RLinf's SFT takes as ``data.train_data_paths``) and
            ``report.json``. When nothing qualifies only ``report.json`` is written.
        image_writer_threads: lerobot image-writer threads (0 = encode and save images one by one).
        progress: show tqdm progress bars on stderr.

    Returns:
        the report (also written to ``<output_dir>/report.json``).

    Raises:
        FlywheelError: ``output_dir`` exists, ``input_root`` is missing, negative thread count,
            or runs of different robots were found (nothing is written).
        FrameLoadError, LeRobotUnavailableError, OSError: writing failed (nothing is left behind).
    """
    roots = [Path(r).absolute() for r in ([input_root] if isinstance(input_root, (str, Path)) else input_root)]
    if not roots:
        raise FlywheelError("--input-root: give at least one run or trajectory directory")
    input_root = Path(os.path.commonpath(roots)) if len(roots) > 1 else roots[0]
    output_dir = Path(output_dir).absolute()
    if image_writer_threads < 0:
        raise FlywheelError(f"--image-writer-threads must be >= 0, got {image_writer_threads}")
    if output_dir.exists() or output_dir.is_symlink():
        raise FlywheelError(f"--output-dir {output_dir} already exists; pass a new directory (the export never overwrites)")
    record_dirs: list[Path] = []
    for root in roots:
        try:
            found = find_record_dirs(root)
        except FileNotFoundError as e:
            raise FlywheelError(f"--input-root: {e}") from e
        record_dirs.extend(d for d in found if d not in record_dirs)
    records = [load_record(d) for d in tqdm(record_dirs, desc="reading records", unit="run", disable=not progress)]
    robot = _check_single_robot(records, input_root)
    selections = [select_run(r) for r in records]
    episodes = [(s.record_dir, ep) for s in selections for ep in s.episodes]
    n_frames = sum(len(ep) for _, ep in episodes)

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_dir.parent / f".{output_dir.name}.partial-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        info = None
        if episodes:
            robot_type = ROBOT_TYPES[robot]
            repo_id = f"rpent/{output_dir.name}"
            with tqdm(total=n_frames, desc="exporting frames", unit="frame", disable=not progress) as bar:
                written = _dataset.write_lerobot_dataset(
                    tmp / DATASET_DIRNAME,
                    episodes,
                    repo_id=repo_id,
                    robot_type=robot_type,
                    image_writer_threads=image_writer_threads,
                    on_frame=lambda: bar.update(1),
                )
            info = {"repo_id": repo_id, "robot_type": robot_type, **written}
        report = _build_report(input_root, output_dir, selections, robot, info, image_writer_threads)
        write_json_atomic(tmp / REPORT_NAME, report)
        if output_dir.exists():
            raise FlywheelError(f"--output-dir {output_dir} appeared while exporting; nothing was written there")
        os.rename(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report
