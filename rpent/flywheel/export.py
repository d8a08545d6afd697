"""``export_records``: trajectory records -> LeRobot dataset(s) under ``<output-dir>/`` + ``report.json``.

Steps: remove stale build directories of the same output (a killed earlier export's, see
:mod:`rpent.flywheel.partial`); find every record under each input root (recursively: a run
directory, a batch results root ``<root>/<arm>/<cell>/...``, or any parent); refuse a mix of
robots; apply rule set v1 or v2 of :mod:`rpent.flywheel.selection` (both begin with the label
policy of :mod:`rpent.recording.outcome`: only runs labelled ``succeeded``); write ``train/`` (and
``val/`` when a validation split is asked for) with lerobot's writer into a hidden build
directory ``.<name>.partial-<hex>``; write each dataset's card (``README.md``) and
``report.json``; rename the build directory to ``output_dir``. A failed or interrupted
(SIGTERM, Ctrl-C) export removes the build directory, so ``output_dir`` either does not exist
or is complete. Input records are only read.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import signal
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from rpent.flywheel import card as _card
from rpent.flywheel import dataset as _dataset
from rpent.flywheel import partial as _partial
from rpent.flywheel.selection import (
    IMAGE_SHAPE,
    IMAGE_SIZE_MISMATCH,
    ROBOT_TYPES,
    RULE_SETS,
    RULES_V1,
    RunSelection,
    select_run,
)
from rpent.recording import layout
from rpent.recording.atomic import write_json_atomic
from rpent.recording.outcome import LABEL_POLICY, LABEL_POLICY_WITH_DISAGREEMENTS, label_policy_text
from rpent.recording.provenance import provenance_summary, run_provenance
from rpent.recording.reader import find_record_dirs, load_record

REPORT_SCHEMA_VERSION = 4
"""2: adds ``rules``, ``split``, ``val_dataset``, ``exclusion_counts``, ``stale_partials_removed``,
per-run ``planner`` and per-episode ``sources``/``split``/``dataset_episode_index``.
3: adds ``label_policy``, ``label_policy_description``, ``exported_by`` (provenance of the export),
``counts.disagreements_included``, per-run ``outcome``, ``disagreement_included`` and ``provenance``
(the source run's, short form). 4: adds ``collection`` (the rpent-batch invocations that recorded the
runs) and per-dataset ``image_shape`` / ``keyframe_interval``."""
DATASET_DIRNAME = "train"
VAL_DATASET_DIRNAME = "val"
REPORT_NAME = "report.json"

RULES_DESCRIPTION = {
    "v1": "product document rules: successful runs only, only VLA actions linked to a prediction with an "
          "instruction, one episode per contiguous VLA segment, task = the VLA instruction",
    "v2": "successful runs only, every executed action (scripted and VLA) of the successful attempt up to and "
          "including the first step that achieves success, task = the task language; failures stay raw",
}


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


def _collection_commands(selections: list[RunSelection], roots: list[Path]) -> list[dict]:
    """The ``rpent-batch`` invocations that recorded the exported runs: every ``manifest.json`` of a batch
    results root at or above an exported record (up to its input root), with each invocation's command
    line, working directory and start time, in the order found."""
    out: list[dict] = []
    seen: set[Path] = set()
    for sel in selections:
        if not sel.exported:
            continue
        root = next((r for r in roots if sel.record_dir == r or r in sel.record_dir.parents), None)
        d = sel.record_dir
        while True:
            m = d / "manifest.json"
            if m not in seen and m.is_file():
                seen.add(m)
                try:
                    doc = json.loads(m.read_text(encoding="utf-8"))
                    for inv in doc.get("invocations") or []:
                        out.append({"manifest": str(m), "argv": list(inv.get("argv") or []), "cwd": inv.get("cwd"),
                                    "started": inv.get("started")})
                except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
                    pass  # not a batch manifest: nothing to name
            if d == root or d.parent == d:
                break
            d = d.parent
    return out


def _one_image_shape(selections: list[RunSelection]) -> tuple[int, int, int]:
    """The dataset's image shape: that of most exported runs (ties: the first run's); runs recorded at
    another size are excluded as ``image_size_mismatch`` (in place). :data:`IMAGE_SHAPE` when none is exported."""
    shapes = Counter(s.image_shape for s in selections if s.exported and s.image_shape is not None)
    if not shapes:
        return IMAGE_SHAPE
    shape = shapes.most_common(1)[0][0]
    for sel in selections:
        if sel.exported and sel.image_shape is not None and sel.image_shape != shape:
            sel.exclude_run(IMAGE_SIZE_MISMATCH, f"images {sel.image_shape}, the dataset's {shape} "
                            f"(export runs of each --policy-image-size separately)")
    return shape


def _remove_quietly(tmp: Path) -> None:
    """Remove the build directory with SIGTERM/SIGINT held back, so a second signal cannot stop it halfway."""
    held = threading.current_thread() is threading.main_thread()
    if held:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if held:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _build_report(
    input_root: Path,
    output_dir: Path,
    selections: list[RunSelection],
    planners: list[str | None],
    robot: str | None,
    rules: str,
    split: tuple[list[int], list[int]],
    split_args: dict,
    provenances: list[dict | None] | None = None,
    include_disagreements: bool = False,
    argv: list[str] | None = None,
) -> dict:
    import rpent

    train, val = split
    where = {i: ("train", k) for k, i in enumerate(train)} | {i: ("val", k) for k, i in enumerate(val)}
    runs, exclusions = [], []
    episode_index = 0
    provenances = provenances if provenances is not None else [None] * len(selections)
    for sel, planner, prov in zip(selections, planners, provenances):
        rel = _rel(sel.record_dir, input_root)
        eps = []
        for ep in sel.episodes:
            name, k = where[episode_index]
            eps.append(
                {
                    "episode_index": episode_index,
                    "split": name,
                    "dataset_episode_index": k,
                    "frames": len(ep),
                    "seqs": [ep[0].seq, ep[-1].seq],
                    "tasks": list(dict.fromkeys(f.task for f in ep)),
                    "sources": dict(Counter(f.source for f in ep)),
                }
            )
            episode_index += 1
        runs.append(
            {
                "record": rel,
                "task_id": sel.task_id,
                "robot": sel.robot,
                "planner": planner,
                "exported": sel.exported,
                "actions": sel.n_actions,
                "frames": sum(e["frames"] for e in eps),
                "episodes": eps,
                "outcome": sel.outcome,
                "disagreement_included": sel.disagreement_included,
                "provenance": provenance_summary(prov),
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
        "rules": rules,
        "rules_description": RULES_DESCRIPTION[rules],
        "label_policy": LABEL_POLICY_WITH_DISAGREEMENTS if include_disagreements else LABEL_POLICY,
        "label_policy_description": label_policy_text(include_disagreements),
        "exported_by": provenance_summary(run_provenance(argv=argv, config={"rules": rules})),
        "dataset": None,
        "val_dataset": None,
        "split": {**split_args, "train_episodes": train, "val_episodes": val},
        "counts": {
            "runs_seen": len(selections),
            "runs_exported": sum(1 for s in selections if s.exported),
            "episodes": episode_index,
            "frames": frames,
            "actions_seen": sum(s.n_actions for s in selections),
            "disagreements_included": sum(1 for s in selections if s.exported and s.disagreement_included),
        },
        "exclusion_counts": dict(sorted(Counter(x["reason"] for x in exclusions).items())),
        "runs": runs,
        "exclusions": exclusions,
        "stale_partials_removed": [],
    }


def _dataset_entry(path: str, info: dict, *, video: bool, vcodec: str, image_writer_threads: int,
                   image_stats: str, robot: str | None = None) -> dict:
    return {
        "path": path,
        "format": "LeRobot v3.0 (LeRobotDataset writer)",
        "repo_id": info["repo_id"],
        "robot_type": info["robot_type"],
        "fps": layout.robot_fps(robot),
        "use_videos": video,
        "vcodec": vcodec if video else None,
        "features": sorted(_dataset.features(video, robot)),
        "episodes": info["episodes"],
        "frames": info["frames"],
        "tasks": info["tasks"],
        "image_writer_threads": 0 if video else image_writer_threads,
        "image_stats": image_stats,
        "card": f"{path}/README.md",
    }


def export_records(
    input_root: str | Path | Sequence[str | Path],
    output_dir: str | Path,
    *,
    rules: str = RULES_V1,
    image_writer_threads: int = 0,
    video: bool = False,
    vcodec: str = "libsvtav1",
    keyframe_interval: int = 2,
    image_stats: str = "sampled",
    val_fraction: float = 0.0,
    split_seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    include_disagreements: bool = False,
    argv: list[str] | None = None,
) -> dict:
    """Export the qualifying frames of every record under ``input_root`` to ``output_dir``.

    Args:
        input_root: one record directory (with ``task.json``), a run directory, a batch results
            root, or any parent (searched recursively); or a list of such paths (their records are
            merged; a record found twice counts once).
        output_dir: new directory; gets ``train/`` (the LeRobot dataset, the directory holding
            ``meta/info.json`` that RLinf's SFT takes as ``data.train_data_paths``), ``val/`` with
            ``val_fraction > 0`` and at least 2 episodes, and ``report.json``. When nothing
            qualifies only ``report.json`` is written (its ``exclusions`` say why).
        rules: ``"v1"`` (default) or ``"v2"`` (:mod:`rpent.flywheel.selection`).
        image_writer_threads: lerobot image-writer threads (0 = encode and save images one by one).
        video: store the cameras as video (lerobot streaming encoder, CPU) instead of PNG.
        vcodec: ``"libsvtav1"`` (AV1, default) or ``"h264"``.
        keyframe_interval: frames between video key frames (``g``; 2 = lerobot's default, fast random
            access; larger gives smaller files for sequential decoding).
        image_stats: ``"sampled"`` (default: camera statistics on every 4th pixel row and column,
            :mod:`rpent.flywheel.stats`) or ``"full"`` (every pixel, lerobot's computation).
        val_fraction: share of episodes (whole episodes) put into ``val/``, in [0, 1).
        split_seed: seed of the episode shuffle for the split.
        progress: show tqdm progress bars on stderr.
        log: receives one-line notes (stale build directories removed, ...); default: ignored.
        include_disagreements: also export the runs the operator rejected although the environment
            predicate held (for studies of disagreement; never the default). The report and the
            dataset card name the label policy either way.
        argv: the command line recorded in the report's ``exported_by`` (default ``sys.argv``).

    Returns:
        the report (also written to ``<output_dir>/report.json``).

    Raises:
        FlywheelError: ``output_dir`` exists, ``input_root`` is missing, bad argument values,
            or runs of different robots were found (nothing is written).
        ExportInterrupted: SIGTERM/SIGINT arrived (the build directory was removed).
        FrameLoadError, LeRobotUnavailableError, OSError: writing failed (nothing is left behind).
    """
    log = log or (lambda _msg: None)
    roots = [Path(r).absolute() for r in ([input_root] if isinstance(input_root, (str, Path)) else input_root)]
    if not roots:
        raise FlywheelError("--input-root: give at least one run or trajectory directory")
    input_root = Path(os.path.commonpath(roots)) if len(roots) > 1 else roots[0]
    output_dir = Path(output_dir).absolute()
    if rules not in RULE_SETS:
        raise FlywheelError(f"--rules must be one of {', '.join(RULE_SETS)}, got {rules!r}")
    if image_writer_threads < 0:
        raise FlywheelError(f"--image-writer-threads must be >= 0, got {image_writer_threads}")
    if vcodec not in _dataset.VIDEO_CODECS:
        raise FlywheelError(f"--vcodec must be one of {', '.join(_dataset.VIDEO_CODECS)}, got {vcodec!r}")
    if keyframe_interval < 1:
        raise FlywheelError(f"--keyframe-interval must be >= 1 frame, got {keyframe_interval}")
    if image_stats not in _dataset.IMAGE_STATS:
        raise FlywheelError(f"--image-stats must be one of {', '.join(_dataset.IMAGE_STATS)}, got {image_stats!r}")
    if not 0.0 <= val_fraction < 1.0:
        raise FlywheelError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    if output_dir.exists() or output_dir.is_symlink():
        raise FlywheelError(f"--output-dir {output_dir} already exists; pass a new directory (the export never overwrites)")
    removed, live = _partial.remove_stale_partials(output_dir)
    for r in removed:
        log(f"removed stale build directory {r['path']} ({_partial.human_bytes(r['bytes'])}) left by an earlier "
            "export that was killed")
    for r in live:
        log(f"build directory {r['path']} ({_partial.human_bytes(r['bytes'])}) belongs to a running export "
            f"(pid {r['pid']} on {r['host']}); left alone")
    record_dirs: list[Path] = []
    for root in roots:
        try:
            found = find_record_dirs(root)
        except FileNotFoundError as e:
            raise FlywheelError(f"--input-root: {e}") from e
        record_dirs.extend(d for d in found if d not in record_dirs)
    records = [load_record(d) for d in tqdm(record_dirs, desc="reading records", unit="run", disable=not progress)]
    robot = _check_single_robot(records, input_root)
    selections = [select_run(r, rules, include_disagreements=include_disagreements)
                  for r in tqdm(records, desc="checking runs", unit="run", disable=not progress)]
    image_shape = _one_image_shape(selections)
    planners = [(r.task or {}).get("planner") for r in records]
    provenances = [(r.task or {}).get("provenance") for r in records]
    episodes = [(s.record_dir, ep) for s in selections for ep in s.episodes]
    split = _card.split_episodes(len(episodes), val_fraction, split_seed)
    report = _build_report(input_root, output_dir, selections, planners, robot, rules, split,
                           {"val_fraction": val_fraction, "seed": split_seed}, provenances,
                           include_disagreements=include_disagreements, argv=argv)
    report["stale_partials_removed"] = removed
    report["collection"] = _collection_commands(selections, roots)

    if not progress:
        with contextlib.suppress(ImportError):
            from datasets.utils.logging import disable_progress_bar

            disable_progress_bar()  # lerobot's parquet embedding shows datasets' "Map" bars otherwise
    with _partial.signals_as_interrupt():
        tmp = _partial.make_build_dir(output_dir)
        try:
            if episodes:
                robot_type = ROBOT_TYPES[robot]
                with tqdm(total=sum(len(ep) for _, ep in episodes), desc="exporting frames", unit="frame",
                          disable=not progress) as bar:
                    for name, idx, key in ((DATASET_DIRNAME, split[0], "dataset"), (VAL_DATASET_DIRNAME, split[1], "val_dataset")):
                        if not idx:
                            continue
                        repo_id = f"rpent/{output_dir.name}" + ("" if name == DATASET_DIRNAME else f"-{name}")
                        written = _dataset.write_lerobot_dataset(
                            tmp / name,
                            [episodes[i] for i in idx],
                            repo_id=repo_id,
                            robot_type=robot_type,
                            image_writer_threads=image_writer_threads,
                            video=video,
                            vcodec=vcodec,
                            keyframe_interval=keyframe_interval,
                            image_stats=image_stats,
                            on_frame=lambda: bar.update(1),
                            robot=robot,
                            image_shape=image_shape,
                        )
                        report[key] = _dataset_entry(name, {"repo_id": repo_id, "robot_type": robot_type, **written},
                                                     video=video, vcodec=vcodec, image_writer_threads=image_writer_threads,
                                                     image_stats=image_stats, robot=robot)
                        report[key]["image_shape"] = list(image_shape)
                        report[key]["keyframe_interval"] = keyframe_interval if video else None
                for name, idx in ((DATASET_DIRNAME, split[0]), (VAL_DATASET_DIRNAME, split[1])):
                    if idx:
                        _card.write_dataset_card(tmp / name, report, name, idx)
            write_json_atomic(tmp / REPORT_NAME, report)
            if output_dir.exists():
                raise FlywheelError(f"--output-dir {output_dir} appeared while exporting; nothing was written there")
            with contextlib.suppress(FileNotFoundError):
                (tmp / _partial.OWNER_FILE).unlink()
            os.rename(tmp, output_dir)
        except BaseException:
            _remove_quietly(tmp)
            raise
    return report
