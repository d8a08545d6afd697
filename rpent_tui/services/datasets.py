"""Exported LeRobot datasets (``rpent-flywheel`` output) as episodes for the Trajectories screen.

A dataset is a directory holding ``meta/info.json`` (LeRobot v3.0: ``data/chunk-*/file-*.parquet``,
``meta/episodes/chunk-*/file-*.parquet``, ``videos/<key>/chunk-*/file-*.mp4`` for video
features; layout from lerobot 0.4.4's writer). Each episode is listed as a
:class:`DatasetEpisode` row; its frames become :class:`~.readers.StepRecord` entries whose
``frames`` hold PNG bytes (PNG features: the bytes stored in the parquet; video features: the
episode's frames decoded with PyAV and re-encoded as PNG for display). Read with pyarrow and
PyAV only (no lerobot import, so listing stays fast). No Textual imports.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rpent.recording.run_readers import RunSummary, StepRecord

__all__ = ["DatasetEpisode", "episode_steps", "is_dataset_dir", "list_dataset_episodes"]

CAMERAS = {"main": "image", "wrist": "wrist_image"}
"""StepRecord frame label -> dataset feature (``rpent.flywheel.dataset``)."""


@dataclass
class DatasetEpisode(RunSummary):
    """One episode of an exported dataset as a row of the Trajectories screen.

    Attributes:
        episode: episode index within the dataset (``path`` is the dataset directory).
        task_text: the episode's task string(s).
    """

    episode: int = 0
    task_text: str = ""

    @property
    def task_label(self) -> str:
        """``dataset <export>/<split> ep K``."""
        return f"dataset {self.path.parent.name}/{self.path.name} ep {self.episode}"


def is_dataset_dir(path: Path) -> bool:
    """True if ``path`` holds a LeRobot dataset (``meta/info.json`` with a ``codebase_version``)."""
    try:
        info = json.loads((path / "meta" / "info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and "codebase_version" in info


def _find(root: Path, depth: int) -> list[Path]:
    if is_dataset_dir(root):
        return [root]
    if depth <= 0 or not root.is_dir():
        return []
    out: list[Path] = []
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except (PermissionError, OSError):
        return []
    for child in children:
        if child.name in ("trajectories", "artifacts"):
            continue
        out.extend(_find(child, depth - 1))
    return out


def _episodes_table(ds: Path) -> list[dict]:
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for f in sorted((ds / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return sorted(rows, key=lambda r: r["episode_index"])


def list_dataset_episodes(root: str | Path, depth: int = 4) -> list[DatasetEpisode]:
    """Every episode of every dataset at or below ``root`` (newest dataset first).

    Unreadable datasets are skipped (they are not run records either).
    """
    out: list[DatasetEpisode] = []
    for ds in _find(Path(root), depth):
        try:
            episodes = _episodes_table(ds)
            date = datetime.fromtimestamp((ds / "meta" / "info.json").stat().st_mtime)
            info = json.loads((ds / "meta" / "info.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError):
            continue
        for ep in episodes:
            tasks = ep.get("tasks") or []
            out.append(DatasetEpisode(path=ds, name=f"{ds.parent.name}/{ds.name}", planner="dataset",
                                      success=None, steps=int(ep.get("length", 0)), date=date,
                                      model=info.get("robot_type"), episode=int(ep["episode_index"]),
                                      task_text=" | ".join(map(str, tasks))))
    out.sort(key=lambda e: (e.date or datetime.min, e.name, -e.episode), reverse=True)
    return out


def _video_frames(ds: Path, info: dict, key: str, ep: dict) -> list[bytes]:
    import av
    from PIL import Image

    chunk, file = ep[f"videos/{key}/chunk_index"], ep[f"videos/{key}/file_index"]
    path = ds / info["video_path"].format(video_key=key, chunk_index=chunk, file_index=file)
    t0, t1 = float(ep[f"videos/{key}/from_timestamp"]), float(ep[f"videos/{key}/to_timestamp"])
    half = 0.5 / float(info["fps"])
    out: list[bytes] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base)
            if t < t0 - half:
                continue
            if t >= t1 - half:
                break
            buf = io.BytesIO()
            Image.fromarray(frame.to_ndarray(format="rgb24")).save(buf, format="PNG", compress_level=1)
            out.append(buf.getvalue())
    return out


def episode_steps(dataset: str | Path, episode: int) -> list[StepRecord]:
    """The frames of ``episode`` as steps: action, ``task``, ``source`` of the frame, camera PNG bytes.

    Raises:
        OSError, ValueError, KeyError: the dataset cannot be read (the caller shows the message).
    """
    import pyarrow.parquet as pq

    ds = Path(dataset)
    info = json.loads((ds / "meta" / "info.json").read_text(encoding="utf-8"))
    ep = next(e for e in _episodes_table(ds) if e["episode_index"] == episode)
    data_file = ds / info["data_path"].format(chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"])
    table = pq.read_table(data_file).to_pylist()
    rows = [r for r in table if r["episode_index"] == episode]
    tasks = {}
    for f in (ds / "meta").glob("tasks.parquet"):
        t = pq.read_table(f).to_pandas()
        tasks = {int(i): str(name) for name, i in zip(t.index, t["task_index"])}
    video = {label: _video_frames(ds, info, key, ep) for label, key in CAMERAS.items()
             if info["features"].get(key, {}).get("dtype") == "video"}
    steps = []
    for j, r in enumerate(rows):
        sr = StepRecord(step=int(r["frame_index"]), tool="dataset", action=[float(a) for a in r.get("actions") or []],
                        raw={"task": tasks.get(int(r["task_index"]), "?"), "state": r.get("state"),
                             "episode_index": episode, "timestamp": r.get("timestamp")})
        for label, key in CAMERAS.items():
            if label in video:
                if j < len(video[label]):
                    sr.frames[label] = video[label][j]
            elif isinstance(r.get(key), dict) and r[key].get("bytes"):
                sr.frames[label] = r[key]["bytes"]
        steps.append(sr)
    return steps
