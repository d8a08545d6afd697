"""Read-only access to run records, trajectory records and flywheel reports on disk (no Textual).

Layouts (docs/interfaces.md "Run record", "Trajectory record"):

* run record ``<run>/``: ``run.log``, ``transcript_<tag>.json``, ``states.json``, per-step artifacts
  ``<artifact-name>/<NN>.<ext>`` (e.g. ``agentview.png/03.png``), ``operator_events.jsonl``,
  ``code_policy/cell_NNN.{py,json}``, ``trajectories/<task_id>/`` and, for TaskRuns started by the
  TUI, ``taskrun.json`` (written by ``rpent.session.core``).
* trajectory ``trajectories/<task_id>/``: ``task.json``, ``planners.jsonl``, ``actions.jsonl``,
  ``predictions.jsonl``, ``artifacts/``.
* flywheel output ``<dir>/report.json``.

Readers never modify anything and tolerate partial records (a run still being written, a crashed
run): missing files give empty results, a malformed JSON file raises ``RecordError`` naming the file.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "RecordError",
    "RunSummary",
    "StepRecord",
    "is_run_dir",
    "list_runs",
    "read_json",
    "read_jsonl",
    "read_states",
    "read_transcript",
    "read_taskrun",
    "step_records",
    "step_frames",
    "transcript_until",
    "list_trajectories",
    "read_trajectory",
    "read_report",
    "summarize_report",
]

_TAG_RE = re.compile(r"^(?:\d{4}_)?(?P<suite>libero_[A-Za-z0-9_]+?)_t(?P<task>\d+)_s(?P<seed>\d+)$")
_TRANSCRIPT_RE = re.compile(r"^transcript_(?P<tag>.+)\.json$")
_STEP_FILE_RE = re.compile(r"^(?P<step>\d+)\.(?P<ext>[A-Za-z0-9]+)$")


class RecordError(ValueError):
    """A record file exists but cannot be parsed; the message names the file and the problem."""


def read_json(path: str | Path) -> Any:
    """Parse a JSON file. Returns None when the file does not exist.

    Raises:
        RecordError: invalid JSON (file and position in the message).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Parse a JSON-lines file into a list of objects; a torn last line (a run still writing) is skipped.

    Returns [] when the file does not exist.

    Raises:
        RecordError: an invalid line other than the last one.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                break
            raise RecordError(f"{path}:{i + 1}: invalid JSON line ({exc.msg})") from None
        out.append(value if isinstance(value, dict) else {"value": value})
    return out


@dataclass
class RunSummary:
    """One run directory as listed in the Trajectories screen.

    Attributes:
        path: run directory.
        name: directory name (a TaskRun's is ``NNNN_<suite>_t<task>_s<seed>``).
        suite, task, seed: the LIBERO task (None when unknown).
        planner, model: planner kind and model id (None when unknown).
        success: environment success (None when the run recorded none).
        steps: env steps recorded (None when unknown).
        state: TaskRun state (``running``, ``succeeded``, ``failed``, ``cancelled``, ``error``) if known.
        date: last modification time of the record.
        trajectories: number of recorded trajectories under ``trajectories/``.
    """

    path: Path
    name: str
    suite: str | None = None
    task: int | None = None
    seed: int | None = None
    planner: str | None = None
    model: str | None = None
    success: bool | None = None
    steps: int | None = None
    state: str | None = None
    date: datetime | None = None
    trajectories: int = 0

    @property
    def task_label(self) -> str:
        """``<suite> t<task> s<seed>`` or the directory name."""
        if self.suite is None:
            return self.name
        return f"{self.suite} t{self.task} s{self.seed}"


def is_run_dir(path: Path) -> bool:
    """True if ``path`` looks like a run record (``states.json``, ``taskrun.json``, ``run.log`` or a transcript)."""
    if not path.is_dir():
        return False
    for marker in ("states.json", "taskrun.json", "run.log"):
        if (path / marker).is_file():
            return True
    return any(_TRANSCRIPT_RE.match(p.name) for p in path.glob("transcript_*.json"))


def _iter_run_dirs(root: Path, depth: int) -> Iterator[Path]:
    if is_run_dir(root):
        yield root
        tasks = root / "tasks"  # a TUI session dir is also a record root; its TaskRuns live below
        if tasks.is_dir():
            for child in sorted(tasks.iterdir()):
                if is_run_dir(child):
                    yield child
        return
    if depth <= 0:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for child in children:
        if child.name.endswith(".partial") or child.name == "trajectories":
            continue
        yield from _iter_run_dirs(child, depth - 1)


def _as_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _dig(data: Any, *keys: str) -> Any:
    """First present key among ``keys`` in dict ``data`` or in its ``outcome``/``config``/``task`` sub-dicts."""
    if not isinstance(data, dict):
        return None
    for key in keys:
        if key in data and data[key] is not None:
            return data[key]
    for sub in ("outcome", "config", "task", "meta", "env"):
        inner = data.get(sub)
        if isinstance(inner, dict):
            for key in keys:
                if key in inner and inner[key] is not None:
                    return inner[key]
    return None


def summarize_run(path: Path) -> RunSummary:
    """Build a ``RunSummary`` from whatever ``path`` holds (taskrun.json, states.json, trajectories, name)."""
    summary = RunSummary(path=path, name=path.name)
    m = _TAG_RE.match(path.name)
    if m:
        summary.suite, summary.task, summary.seed = m["suite"], int(m["task"]), int(m["seed"])
    sources: list[Any] = []
    for name in ("taskrun.json", "states.json"):
        try:
            sources.append(read_json(path / name))
        except RecordError:
            sources.append(None)
    trajs = list_trajectories(path)
    summary.trajectories = len(trajs)
    for tdir in trajs[:1]:
        try:
            sources.append(read_json(tdir / "task.json"))
        except RecordError:
            pass
    for data in sources:
        if data is None:
            continue
        summary.suite = summary.suite or _dig(data, "suite")
        if summary.task is None and isinstance(_dig(data, "task", "task_id"), int):
            summary.task = _dig(data, "task", "task_id")
        if summary.seed is None and isinstance(_dig(data, "seed"), int):
            summary.seed = _dig(data, "seed")
        summary.planner = summary.planner or _dig(data, "planner")
        summary.model = summary.model or _dig(data, "model")
        if summary.success is None:
            summary.success = _as_bool(_dig(data, "environment_success", "success"))
        if summary.steps is None:
            steps = _dig(data, "steps", "env_steps", "step_count")
            if isinstance(steps, int):
                summary.steps = steps
            elif isinstance(steps, list):
                summary.steps = len(steps)
        summary.state = summary.state or (_dig(data, "state") if isinstance(_dig(data, "state"), str) else None)
    if summary.steps is None:
        records = step_records(path)
        if records:
            summary.steps = max(r.step for r in records) + 1
    try:
        newest = max((p.stat().st_mtime for p in path.iterdir()), default=path.stat().st_mtime)
        summary.date = datetime.fromtimestamp(newest)
    except FileNotFoundError:
        pass
    return summary


def list_runs(root: str | Path, depth: int = 4) -> list[RunSummary]:
    """Every run record under ``root`` (``root`` itself may be one), newest first.

    Args:
        root: a logs directory, a TUI session directory or a single run directory.
        depth: how many directory levels below ``root`` to search.
    """
    root = Path(root)
    runs = [summarize_run(p) for p in _iter_run_dirs(root, depth)]
    runs.sort(key=lambda r: (r.date or datetime.min, r.name), reverse=True)
    return runs


def read_taskrun(run_dir: str | Path) -> dict[str, Any] | None:
    """The TUI's ``taskrun.json`` of a TaskRun directory, or None."""
    data = read_json(Path(run_dir) / "taskrun.json")
    return data if isinstance(data, dict) else None


def read_states(run_dir: str | Path) -> Any:
    """The run's ``states.json`` (as written by ``rpent.run``), or None if absent."""
    return read_json(Path(run_dir) / "states.json")


def read_transcript(run_dir: str | Path) -> list[dict[str, Any]]:
    """Concatenated entries of the run's ``transcript_<tag>.json`` files (sorted by name).

    Each entry is a planner message, e.g. ``{"role": "assistant", "content": [...]}`` or
    ``{"role": "tool", "name": ..., "tool_call_id": ..., "content": ...}``.
    """
    entries: list[dict[str, Any]] = []
    for path in sorted(Path(run_dir).glob("transcript_*.json")):
        data = read_json(path)
        if isinstance(data, dict):
            data = data.get("messages") or data.get("transcript") or data.get("entries") or []
        if isinstance(data, list):
            entries.extend(e if isinstance(e, dict) else {"role": "note", "content": e} for e in data)
    return entries


@dataclass
class StepRecord:
    """One env step of a run (from the trajectory's ``actions.jsonl`` or ``states.json``).

    Attributes:
        step: env step index (0-based).
        tool: the tool that executed it, if known.
        call_id: planner tool-call id, if known (links to the transcript).
        action: the 7-D action (eef delta xyz, rotation, gripper; environment units) if recorded.
        terminated, truncated, success: env flags after the step (None when unknown).
        prediction: the VLA prediction record linked to this action, if any.
        frames: camera frames of this step, label -> PNG path.
        raw: the source record.
    """

    step: int
    tool: str | None = None
    call_id: str | None = None
    action: list[float] | None = None
    terminated: bool | None = None
    truncated: bool | None = None
    success: bool | None = None
    prediction: dict[str, Any] | None = None
    frames: dict[str, Path] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


def _step_from(rec: dict[str, Any], default_step: int, base: Path | None = None) -> StepRecord:
    step = rec.get("step", rec.get("step_idx", rec.get("env_step", default_step)))
    action = rec.get("action")
    command = rec.get("command") if isinstance(rec.get("command"), dict) else {}
    sr = StepRecord(
        step=int(step) if isinstance(step, (int, float)) else default_step,
        tool=rec.get("tool") or command.get("action") or rec.get("primitive"),
        call_id=rec.get("call_id") or rec.get("tool_call_id"),
        action=[float(a) for a in action] if isinstance(action, list) and all(isinstance(a, (int, float)) for a in action) else None,
        terminated=_as_bool(rec.get("terminated")),
        truncated=_as_bool(rec.get("truncated")),
        success=_as_bool(rec.get("success")),
        raw=rec,
    )
    if base is not None:
        obs = rec.get("obs") if isinstance(rec.get("obs"), dict) else {}
        for label in ("main", "wrist"):
            if isinstance(obs.get(label), str):
                sr.frames[label] = base / obs[label]
        for name in rec.get("artifacts") or []:  # states.json: per-step artifacts <name>/<NN>.<ext>
            if not str(name).lower().endswith((".png", ".jpg", ".jpeg")):
                continue  # depth/segmentation arrays and metadata are not frames
            d = base / str(name)
            if d.is_dir():
                hit = sorted(f for f in d.iterdir() if _STEP_FILE_RE.match(f.name) and int(f.name.split(".")[0]) == sr.step)
                if hit:
                    sr.frames[str(name)] = hit[0]
    return sr


def step_records(run_dir: str | Path) -> list[StepRecord]:
    """The run's step timeline.

    From the first trajectory's ``actions.jsonl`` (one record per env action; linked to
    ``predictions.jsonl`` by ``pred_id``; frames from ``obs.main``/``obs.wrist``, schema in
    ``rpent.recording``) when recorded, else from ``states.json`` ``steps`` (one record per motion
    tool call: ``step_idx``, ``command.action``, flags, ``artifacts``; schema in ``rpent.run.record``).
    """
    run_dir = Path(run_dir)
    trajs = list_trajectories(run_dir)
    if trajs:
        traj = read_trajectory(trajs[0])
        by_id = {p.get("pred_id"): p for p in traj["predictions"] if p.get("pred_id") is not None}
        steps = []
        for i, rec in enumerate(traj["actions"]):
            sr = _step_from(rec, i, trajs[0])
            if rec.get("pred_id") is not None:
                sr.prediction = by_id.get(rec["pred_id"])
            steps.append(sr)
        if steps:
            if any(not sr.frames for sr in steps):
                _frames_from_tool_boundaries(run_dir, steps)
            return steps
    try:
        states = read_states(run_dir)
    except RecordError:
        return []
    if isinstance(states, dict):
        states = states.get("steps") or states.get("states") or []
    if not isinstance(states, list):
        return []
    return [_step_from(s, i, run_dir) for i, s in enumerate(states) if isinstance(s, dict)]


def _frames_from_tool_boundaries(run_dir: Path, steps: list[StepRecord]) -> None:
    """Give actions recorded without observation images their run's nearest earlier camera frame.

    Scripted actions are recorded with ``obs.main``/``obs.wrist`` null (``rpent.recording``: only
    VLA actions, or ``observations="all"``, carry images), but the run record saves the cameras at
    every motion-tool boundary: ``states.json`` step ``k`` (``env_steps`` so far) with
    ``<camera>.png/<k>.png``. An action at env step ``n`` gets the frames of the last boundary with
    ``env_steps <= n`` (what the robot saw when that motion began), labelled by the camera
    directory (e.g. ``agentview.png``)."""
    try:
        states = read_states(run_dir)
    except RecordError:
        return
    if isinstance(states, dict):
        states = states.get("steps") or states.get("states") or []
    if not isinstance(states, list):
        return
    boundaries: list[tuple[int, dict[str, Path]]] = []
    for i, rec in enumerate(states):
        if not isinstance(rec, dict) or not isinstance(rec.get("env_steps"), (int, float)):
            continue
        frames = _step_from(rec, i, run_dir).frames
        if frames:
            boundaries.append((int(rec["env_steps"]), frames))
    if not boundaries:
        return
    boundaries.sort(key=lambda b: b[0])
    keys = [b[0] for b in boundaries]
    for sr in steps:
        if not sr.frames:
            at = bisect.bisect_right(keys, sr.step) - 1
            sr.frames = dict(boundaries[max(at, 0)][1])


def step_frames(run_dir: str | Path) -> dict[str, dict[int, Path]]:
    """Per-step artifacts of a run: ``{artifact name: {step: file}}``.

    Artifact directories are named like files (``agentview.png/``) and hold ``<NN>.<ext>`` files
    (docs/interfaces.md "Run record"). Trajectory ``artifacts/`` directories are searched too.
    """
    run_dir = Path(run_dir)
    out: dict[str, dict[int, Path]] = {}
    candidates = [p for p in run_dir.iterdir() if p.is_dir()] if run_dir.is_dir() else []
    for tdir in list_trajectories(run_dir)[:1]:
        art = tdir / "artifacts"
        if art.is_dir():
            candidates += [p for p in art.iterdir() if p.is_dir()]
    for d in candidates:
        if "." not in d.name:
            continue
        frames = {}
        for f in d.iterdir():
            m = _STEP_FILE_RE.match(f.name)
            if m and f.is_file():
                frames[int(m["step"])] = f
        if frames:
            out.setdefault(d.name, {}).update(frames)
    return out


def transcript_until(entries: list[dict[str, Any]], call_id: str | None, *,
                     initial: bool = False) -> list[dict[str, Any]]:
    """The transcript entries up to and including the tool result of ``call_id`` (all if not found).
    ``initial=True`` (step 0, the observation before any tool call): the entries before the first
    tool call."""
    if initial:
        for i, entry in enumerate(entries):
            content = entry.get("content")
            if entry.get("role") == "tool" or (isinstance(content, list) and any(
                    isinstance(b, dict) and b.get("type") == "tool_use" for b in content)):
                return entries[:i]
        return entries
    if not call_id:
        return entries
    last = None
    for i, entry in enumerate(entries):
        if entry.get("tool_call_id") == call_id or entry.get("call_id") == call_id:
            last = i
        content = entry.get("content")
        if last is None and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("id") == call_id:
                    last = i
    return entries if last is None else entries[: last + 1]


def list_trajectories(run_dir: str | Path) -> list[Path]:
    """Trajectory directories ``<run>/trajectories/<task_id>/`` holding a ``task.json``, sorted."""
    root = Path(run_dir) / "trajectories"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "task.json").is_file())


def read_trajectory(traj_dir: str | Path) -> dict[str, Any]:
    """A trajectory record as ``{"task": dict|None, "planners": [...], "actions": [...], "predictions": [...],
    "artifacts": Path}`` (lists of JSON-lines records, in file order)."""
    traj_dir = Path(traj_dir)
    return {
        "task": read_json(traj_dir / "task.json"),
        "planners": read_jsonl(traj_dir / "planners.jsonl"),
        "actions": read_jsonl(traj_dir / "actions.jsonl"),
        "predictions": read_jsonl(traj_dir / "predictions.jsonl"),
        "artifacts": traj_dir / "artifacts",
    }


def read_report(output_dir: str | Path) -> dict[str, Any] | None:
    """The flywheel's ``<output_dir>/report.json`` or None when not written (yet)."""
    data = read_json(Path(output_dir) / "report.json")
    return data if isinstance(data, dict) else None


def summarize_report(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Readable ``(label, value)`` rows of a flywheel report: counts first, then each exclusion reason."""
    rows: list[tuple[str, str]] = []
    for key, value in report.items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            rows.append((key, str(value)))
    for key in ("exclusions", "excluded", "exclusion_reasons", "reasons"):
        value = report.get(key)
        if isinstance(value, dict):
            for reason, count in value.items():
                rows.append((f"excluded: {reason}", str(count if not isinstance(count, list) else len(count))))
        elif isinstance(value, list):
            counts: dict[str, int] = {}
            for item in value:
                reason = item.get("reason", str(item)) if isinstance(item, dict) else str(item)
                counts[reason] = counts.get(reason, 0) + 1
            for reason, count in counts.items():
                rows.append((f"excluded: {reason}", str(count)))
    for key, value in report.items():
        if isinstance(value, dict) and key not in ("exclusions", "excluded", "exclusion_reasons", "reasons"):
            for sub, subval in value.items():
                if isinstance(subval, (int, float, str, bool)):
                    rows.append((f"{key}.{sub}", str(subval)))
    return rows
