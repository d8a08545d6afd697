"""The evaluation log directory and the files in it.

Layout (the product document's evaluation guide, "outputs"; the directory name is generated, never
configured)::

    <logs>/<YYYYmmdd-HH:MM:SS>-<config name>/
        eval_embodiment.log     main log: config, reset-state plan, policy, progress, metrics, errors
        env_worker_<W>.log      stdout/stderr of env worker process W (simulator warnings, crashes)
        config.yaml             the merged config with overrides (interpolations as written)
        plan.txt                which (task, reset state) pairs every env runs in every epoch
        episodes.jsonl          one line per finished trajectory, appended as it finishes
        metrics.log             the eval/* metrics (rates with k/N and the Wilson 95% interval) and the
                                per-task success table; an incomplete run says INCOMPLETE on every line;
                                the last line names the success basis (the environment predicate: no
                                operator verdicts in an evaluation)
        metrics.json            the same, machine-readable (``success_basis``)
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

from rpent.eval.metrics import METRIC_KEYS, Completeness, EpisodeResult, Rate, TaskRow, rates
from rpent.recording.atomic import write_bytes_atomic, write_json_atomic

LOG_FILE = "eval_embodiment.log"
METRICS_FILE = "metrics.log"
EPISODES_FILE = "episodes.jsonl"
TIME_FORMAT = "%Y%m%d-%H:%M:%S"
"""Timestamp of the run directory name (seed: ``20261020-15:30:00-libero_10_apxinf_pi05_eval``)."""


def make_run_dir(logs_dir: str | Path, config_name: str, now: datetime | None = None) -> Path:
    """Create ``<logs_dir>/<YYYYmmdd-HH:MM:SS>-<config_name>/`` (``-2``, ``-3``... if taken).

    Raises:
        EvalConfigError: ``logs_dir`` is (or lies under) a file, or cannot be created or written (one
            line naming ``--logs-dir`` and the fix).
    """
    from rpent.eval.errors import EvalConfigError
    from rpent.paths import file_blocker

    root = Path(logs_dir).expanduser()
    blocker = file_blocker(root)
    if blocker is not None:
        raise EvalConfigError(f"--logs-dir {logs_dir}: {blocker} is a file, not a directory; choose a directory "
                              "for the evaluation logs")
    stamp = (now or datetime.now()).strftime(TIME_FORMAT)
    base = root / f"{stamp}-{config_name}"
    candidate, n = base, 1
    try:
        root.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                candidate.mkdir()
                return candidate
            except FileExistsError:
                n += 1
                candidate = Path(f"{base}-{n}")
    except OSError as exc:
        raise EvalConfigError(f"--logs-dir {logs_dir}: cannot create {candidate if root.is_dir() else root} "
                              f"({exc.strerror or exc}); choose a directory you can write to") from None


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


#: What every rpent-eval rate counts (``metrics.json`` ``success_basis``, the last line of ``metrics.log``).
SUCCESS_BASIS = {
    "kind": "environment_predicate",
    "operator_verdicts": 0,
    "note": "every rate counts the environment's success predicate: rpent-eval rolls a policy out without an "
            "operator, so no episode has an operator verdict or a label (rpent runs and rpent-batch report count "
            "both where verdicts exist)",
}


def metric_lines(metrics: Mapping[str, float], completeness: Completeness | None = None) -> list[str]:
    """``key<TAB>value[<TAB>k/N [Wilson 95% lo, hi]][<TAB>INCOMPLETE ...]`` per metric.

    Rates (:data:`RATE_KEYS`) always carry k/N and the Wilson interval; when ``completeness`` says
    the run is incomplete, every line carries the INCOMPLETE mark with N and the expected N.
    """
    rate_of = rates(dict(metrics))
    inc = completeness is not None and not completeness.complete
    lines = []
    keys = [k for k in METRIC_KEYS if k in metrics] + [k for k in metrics if k not in METRIC_KEYS]
    for k in keys:
        line = f"{k}\t{_fmt(metrics[k])}"
        if k in rate_of:
            line += f"\t{rate_of[k].text()}"
        if inc:
            what = "expected" if k == "eval/num_trajectories" else f"N={completeness.finished} of expected"
            line += f"\tINCOMPLETE: {what} {completeness.expected}"
        lines.append(line)
    return lines


def format_metrics(metrics: Mapping[str, float], table: Sequence[TaskRow], completeness: Completeness | None = None) -> str:
    """The text of ``metrics.log``: (an INCOMPLETE status line naming the lost episodes,) one line
    per metric (:func:`metric_lines`), then the per-task table (rates as ``0.5000 1/2 [Wilson 95% ...]``)."""
    lines = []
    if completeness is not None and not completeness.complete:
        status = f"status\t{completeness.marker()}; lost (task, init state, epoch): {completeness.lost_text()}"
        if completeness.reason:
            status += f"; stopped by: {completeness.reason.splitlines()[0]}"
        lines.append(status)
    lines += metric_lines(metrics, completeness)
    lines.append("")
    title = "per-task success (task\tnum_trajectories\tsuccess_once k/N [Wilson 95%]\tsuccess_at_end k/N [Wilson 95%]\tinstruction)"
    if completeness is not None and not completeness.complete:
        title += f" - {completeness.marker()}"
    lines.append(title)
    for row in table:
        once, end = row.rate("success_once"), row.rate("success_at_end")
        lines.append(
            f"task {row.task_id}\t{row.num_trajectories}\t{row.success_once:.4f} {once.text()}\t"
            f"{row.success_at_end:.4f} {end.text()}\t{row.task_language}"
        )
    lines += ["", f"success basis\t{SUCCESS_BASIS['kind']}: {SUCCESS_BASIS['note']}"]
    return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) >= 1 else f"{value:.6g}"


def write_metrics(run_dir: Path, metrics: Mapping[str, float], table: Sequence[TaskRow], extra: Mapping[str, Any],
                  completeness: Completeness | None = None) -> None:
    """Write ``metrics.log`` and ``metrics.json`` atomically.

    Args:
        metrics: ``eval/*`` values.
        table: per-task rows.
        extra: more JSON-able context for metrics.json (settings, timing, wall time).
        completeness: planned vs finished trajectories; an incomplete run is marked in both files
            (``metrics.json``: ``complete``, ``num_trajectories``, ``expected_trajectories``,
            ``lost_episodes``, ``status: "INCOMPLETE: ..."``).
    """
    write_bytes_atomic(run_dir / METRICS_FILE, format_metrics(metrics, table, completeness).encode("utf-8"))
    doc: dict[str, Any] = {}
    if completeness is not None and not completeness.complete:
        doc["status"] = completeness.marker()
    doc["metrics"] = dict(metrics)
    doc["success_basis"] = dict(SUCCESS_BASIS)
    doc["rates"] = {k: r.to_dict() for k, r in rates(dict(metrics)).items()}
    doc["per_task"] = [
        row.__dict__ | {"init_state_ids": list(row.init_state_ids),
                        "success_once_rate": row.rate("success_once").to_dict(),
                        "success_at_end_rate": row.rate("success_at_end").to_dict()}
        for row in table
    ]
    doc.update(extra)
    if completeness is not None:
        doc.update(completeness.to_dict())
    write_json_atomic(run_dir / "metrics.json", doc)


def write_tensorboard(run_dir: Path, metrics: Mapping[str, float], table: Sequence[TaskRow],
                      completeness: Completeness | None = None) -> Path:
    """Write every metric as a scalar at step 0 under ``run_dir/tensorboard`` (TensorBoard's format).

    Per-task rates go to ``eval/task_<id>/success_once`` and ``eval/task_<id>/success_at_end``;
    each rate's Wilson 95% bounds to ``<tag>/wilson95_low`` / ``_high``. An incomplete run writes
    under ``eval_INCOMPLETE/...`` instead of ``eval/...`` (so no dashboard shows its rates as a
    finished evaluation's), plus ``eval_INCOMPLETE/expected_trajectories`` and a text ``status``.

    Returns:
        the tensorboard directory.
    """
    from torch.utils.tensorboard import SummaryWriter  # tensorboard's event writer, via torch

    inc = completeness is not None and not completeness.complete

    def tag(key: str) -> str:
        return "eval_INCOMPLETE/" + key.removeprefix("eval/") if inc else key

    def add_rate(key: str, r: Rate) -> None:
        if r.low is not None:
            writer.add_scalar(tag(key) + "/wilson95_low", r.low, global_step=0)
            writer.add_scalar(tag(key) + "/wilson95_high", r.high, global_step=0)

    tb_dir = run_dir / "tensorboard"
    writer = SummaryWriter(log_dir=str(tb_dir))
    try:
        for key, value in metrics.items():
            writer.add_scalar(tag(key), float(value), global_step=0)
        for key, r in rates(dict(metrics)).items():
            add_rate(key, r)
        for row in table:
            for which in ("success_once", "success_at_end"):
                key = f"eval/task_{row.task_id}/{which}"
                writer.add_scalar(tag(key), getattr(row, which), global_step=0)
                add_rate(key, row.rate(which))
        if inc:
            writer.add_scalar(tag("eval/expected_trajectories"), float(completeness.expected), global_step=0)
            writer.add_text("eval_INCOMPLETE/status", f"{completeness.marker()}; lost (task, init state, epoch): "
                            f"{completeness.lost_text()}", global_step=0)
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
