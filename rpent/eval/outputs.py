"""The evaluation log directory and the files in it.

Layout (the product document, shared/seeds/003 "outputs"; the directory name is generated, never
configured)::

    <logs>/<YYYYmmdd-HH:MM:SS>-<config name>/
        eval_embodiment.log     main log: config, reset-state plan, policy, progress, metrics, errors
        env_worker_<W>.log      stdout/stderr of env worker process W (simulator warnings, crashes)
        config.yaml             the merged config with overrides (interpolations as written)
        plan.txt                which (task, reset state) pairs every env runs in every epoch
        episodes.jsonl          one line per finished trajectory, appended as it finishes
        metrics.log             the eval/* metrics and the per-task success table
        metrics.json            the same, machine-readable
        tensorboard/events.out.tfevents.*   every metric as a scalar at step 0
        videos/epoch{E}_env{G}_task{T}_state{S}_{success|failure}.mp4   (env.eval.save_video=true)

Every file except the appended logs is written atomically (temporary file + rename); episode lines
are flushed as they arrive, so a crash loses no finished trajectory.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from rpent.eval.metrics import METRIC_KEYS, EpisodeResult, TaskRow
from rpent.recording.atomic import write_bytes_atomic, write_json_atomic

LOG_FILE = "eval_embodiment.log"
METRICS_FILE = "metrics.log"
EPISODES_FILE = "episodes.jsonl"
TIME_FORMAT = "%Y%m%d-%H:%M:%S"
"""Timestamp of the run directory name (seed: ``20261020-15:30:00-libero_10_apxinf_pi05_eval``)."""


def make_run_dir(logs_dir: str | Path, config_name: str, now: datetime | None = None) -> Path:
    """Create ``<logs_dir>/<YYYYmmdd-HH:MM:SS>-<config_name>/`` (``-2``, ``-3``... if taken).

    Raises:
        OSError: ``logs_dir`` cannot be created or written.
    """
    root = Path(logs_dir).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now()).strftime(TIME_FORMAT)
    base = root / f"{stamp}-{config_name}"
    candidate, n = base, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = Path(f"{base}-{n}")


def setup_eval_logger(run_dir: Path) -> logging.Logger:
    """Logger ``rpent.eval.run`` writing ``eval_embodiment.log`` in ``run_dir`` (INFO, line-buffered).

    Handlers from an earlier run in the same process are closed and replaced.
    """
    logger = logging.getLogger("rpent.eval.run")
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    handler = logging.FileHandler(run_dir / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def close_eval_logger(logger: logging.Logger) -> None:
    """Flush and close every handler of ``logger``."""
    for h in list(logger.handlers):
        h.flush()
        logger.removeHandler(h)
        h.close()


class EpisodeLog:
    """Appends :class:`EpisodeResult` lines to ``episodes.jsonl`` (flushed + fsynced per line)."""

    def __init__(self, run_dir: Path):
        """Open ``run_dir/episodes.jsonl`` for appending."""
        self.path = run_dir / EPISODES_FILE
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, result: EpisodeResult) -> None:
        """Write one line and make it durable."""
        self._f.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        """Close the file."""
        self._f.close()


def read_episodes(run_dir: Path) -> list[EpisodeResult]:
    """Read ``episodes.jsonl`` back (for reports and tests)."""
    path = Path(run_dir) / EPISODES_FILE
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(EpisodeResult.from_dict(json.loads(line)))
    return out


def format_metrics(metrics: Mapping[str, float], table: Sequence[TaskRow]) -> str:
    """The text of ``metrics.log``: one ``key<TAB>value`` line per metric, then the per-task table."""
    lines = [f"{k}\t{_fmt(metrics[k])}" for k in METRIC_KEYS if k in metrics]
    lines += [f"{k}\t{_fmt(v)}" for k, v in metrics.items() if k not in METRIC_KEYS]
    lines.append("")
    lines.append("per-task success (task\tnum_trajectories\tsuccess_once\tsuccess_at_end\tinstruction)")
    for row in table:
        lines.append(
            f"task {row.task_id}\t{row.num_trajectories}\t{row.success_once:.4f}\t{row.success_at_end:.4f}\t"
            f"{row.task_language}"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) >= 1 else f"{value:.6g}"


def write_metrics(run_dir: Path, metrics: Mapping[str, float], table: Sequence[TaskRow], extra: Mapping[str, Any]) -> None:
    """Write ``metrics.log`` and ``metrics.json`` atomically.

    Args:
        metrics: ``eval/*`` values.
        table: per-task rows.
        extra: more JSON-able context for metrics.json (settings, timing, wall time).
    """
    write_bytes_atomic(run_dir / METRICS_FILE, format_metrics(metrics, table).encode("utf-8"))
    write_json_atomic(
        run_dir / "metrics.json",
        {
            "metrics": dict(metrics),
            "per_task": [row.__dict__ | {"init_state_ids": list(row.init_state_ids)} for row in table],
            **extra,
        },
    )


def write_tensorboard(run_dir: Path, metrics: Mapping[str, float], table: Sequence[TaskRow]) -> Path:
    """Write every metric as a scalar at step 0 under ``run_dir/tensorboard`` (TensorBoard's format).

    Per-task rates go to ``eval/task_<id>/success_once`` and ``eval/task_<id>/success_at_end``.

    Returns:
        the tensorboard directory.
    """
    from torch.utils.tensorboard import SummaryWriter  # tensorboard's event writer, via torch

    tb_dir = run_dir / "tensorboard"
    writer = SummaryWriter(log_dir=str(tb_dir))
    try:
        for key, value in metrics.items():
            writer.add_scalar(key, float(value), global_step=0)
        for row in table:
            writer.add_scalar(f"eval/task_{row.task_id}/success_once", row.success_once, global_step=0)
            writer.add_scalar(f"eval/task_{row.task_id}/success_at_end", row.success_at_end, global_step=0)
        writer.flush()
    finally:
        writer.close()
    return tb_dir


def video_name(epoch: int, env_index: int, task_id: int, init_state_id: int, success: bool) -> str:
    """File name of one episode's video (relative to ``videos/``)."""
    tag = "success" if success else "failure"
    return f"epoch{epoch}_env{env_index}_task{task_id}_state{init_state_id}_{tag}.mp4"


def write_video(path: Path, frames: Sequence[np.ndarray], fps: float) -> None:
    """Encode uint8 [H,W,3] frames to an H.264 mp4 atomically (imageio + PyAV).

    Raises:
        ValueError: no frames, or frames of different shapes.
    """
    import imageio.v3 as iio

    if not frames:
        raise ValueError(f"no frames for video {path}")
    stack = np.stack([np.asarray(f, dtype=np.uint8) for f in frames])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{time.monotonic_ns()}.tmp.mp4")
    try:
        iio.imwrite(tmp, stack, plugin="pyav", codec="libx264", fps=fps)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
