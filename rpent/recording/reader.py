"""Reading trajectory records back: discovery, ``task.json``, JSONL files, observations.

The reader never modifies a record and never raises on damaged content: problems are
returned so the caller (the flywheel export) can exclude with a reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rpent.recording import layout
from rpent.recording.jsonl import JsonlContent, read_jsonl
from rpent.recording.png import decode_png


def is_record_dir(path: Path) -> bool:
    """Whether ``path`` looks like a trajectory record (holds any of the record files)."""
    return path.is_dir() and any((path / name).is_file() for name in layout.RECORD_FILES)


def find_record_dirs(root: str | Path) -> list[Path]:
    """Return every trajectory record directory at or below ``root``, sorted.

    ``root`` may be one record directory, a run's output directory (``<run>/trajectories/*``)
    or any parent of many runs. Hidden directories (``.name``, e.g. temporary build dirs) and
    symlinked directories are skipped; the walk does not descend into a record.

    Raises:
        FileNotFoundError: ``root`` does not exist or is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"input root {root} does not exist or is not a directory")
    if is_record_dir(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root, followlinks=False):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            sub = here / d
            if d.startswith(".") or sub.is_symlink():
                continue
            if is_record_dir(sub):
                found.append(sub)
            else:
                keep.append(d)
        dirnames[:] = keep
    return sorted(found)


@dataclass
class TrajectoryRecord:
    """A record as read from disk.

    Attributes:
        record_dir: the record directory.
        task: parsed ``task.json`` (``None`` when missing or unreadable).
        task_problem: why ``task`` is ``None`` (``"missing"`` or ``"invalid: ..."``), else ``None``.
        actions: ``actions.jsonl`` lines in file order plus bad lines.
        predictions: ``predictions.jsonl`` lines plus bad lines.
    """

    record_dir: Path
    task: dict | None
    task_problem: str | None
    actions: JsonlContent
    predictions: JsonlContent


def load_record(record_dir: str | Path) -> TrajectoryRecord:
    """Read ``task.json``, ``actions.jsonl`` and ``predictions.jsonl`` of one record (read-only).

    Raises:
        OSError: a file exists but cannot be read (permissions, I/O error).
    """
    record_dir = Path(record_dir)
    task_path = record_dir / layout.TASK_JSON
    task: dict | None = None
    problem: str | None = None
    if not task_path.is_file():
        problem = "missing"
    else:
        try:
            loaded = json.loads(task_path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                task = loaded
            else:
                problem = f"invalid: task.json holds a {type(loaded).__name__}, not an object"
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problem = f"invalid: {e}"
    return TrajectoryRecord(
        record_dir=record_dir,
        task=task,
        task_problem=problem,
        actions=read_jsonl(record_dir / layout.ACTIONS_JSONL),
        predictions=read_jsonl(record_dir / layout.PREDICTIONS_JSONL),
    )


def load_observation(record_dir: Path, obs: dict, state_dim: int = layout.STATE_DIM
                     ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Load the observation an ``actions.jsonl`` line refers to.

    Args:
        record_dir: the record directory.
        obs: the line's ``obs`` field ``{"main": relpath, "wrist": relpath, "state": [8]}``.

    Returns:
        ``(main_image uint8 [H,W,3], wrist_image uint8 [H,W,3], state float32 [8])``; an image is
        ``None`` where the line's reference is ``null`` (scripted action recorded without images).

    Raises:
        ValueError: malformed ``obs`` (missing keys, bad state length, path escaping the record).
        OSError: an image is missing or cannot be decoded.
    """
    if not isinstance(obs, dict) or not all(k in obs for k in ("main", "wrist", "state")):
        raise ValueError(f"obs must be an object with main, wrist and state, got {obs!r:.200}")
    main, wrist = (
        None if obs[cam] is None else decode_png(layout.resolve_artifact(record_dir, obs[cam])) for cam in layout.CAMERAS
    )
    state = np.asarray(obs["state"], dtype=np.float32)
    if state.shape != (state_dim,):
        raise ValueError(f"obs.state must have {state_dim} numbers, got shape {state.shape}")
    return main, wrist, state
