"""The run record: ``states.json``, per-step artifacts, transcript, recipe and episode video.

Layout under ``<output-dir>`` (RPent reference §6.1; ours where noted):

* ``states.json`` — the step manifest, rewritten atomically after every step::

      {"schema_version": 1, "tag", "episode": {suite, task, seed, init_state_id,
       init_state_global_id, n_init_states, init_state_sha256, max_episode_steps},
       "run_artifacts": [...],
       "steps": [{"step_idx", "env_steps", "state": {robot0_eef_pos, robot0_eef_quat,
                  robot0_gripper_qpos, robot0_joint_pos (LIBERO: the arm's 7 joint angles,
                  rad; absent in older records), object_names}, "terminated", "truncated", "success",
                  "artifacts": [names], "command": {"action": tool, **args}, "result": {...},
                  "elapsed_s", "call_id", "t"}]}

  ``step_idx`` 0 is the initial observation; each motion tool call adds one step. A stateful
  tool call that failed without moving the robot (a service died, the episode was over) adds
  no step; it is listed in ``failed_calls`` (``{"call_id", "tool", "args", "error", "after_step",
  "t"}``) so the record shows it. A call whose result never reached the planner (its MCP
  client disconnected during the tool) is marked ``"result_delivered": false`` with
  ``"undelivered_reason"`` on its step (or failed call).
* ``<artifact-name>/<NN>.<ext>`` — per-step artifacts: the directory is the artifact's logical
  name (``agentview.png``), the file the step number (``agentview.png/03.png``).
* ``transcript_<tag>.json`` — written atomically at the end (and on error); never appended
  to (upstream's append-mode pitfall, reference §6.1).
* ``<tag>_recipe.jsonl`` — only when the run's label is ``succeeded`` and the environment's
  success predicate held (a run the operator rejected, aborted or cancelled has none;
  :mod:`rpent.recording.outcome`).
* ``provenance.json`` — how the run was made (:func:`rpent.recording.provenance.run_provenance`):
  written when the run starts, rewritten with the models' identities once the services are up.
* ``episode.mp4`` — every env frame of the agentview camera at 20 fps (LIBERO control rate), in
  natural orientation like ``agentview.png`` (the video is for people).

``tag`` = suite without ``libero_`` + ``_t<task>_s<seed>`` (e.g. ``object_swap_t2_s0``).
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rpent.recording.atomic import write_bytes_atomic

__all__ = ["RunRecord", "run_tag", "encode_png", "dumps_json", "VIDEO_FPS", "earlier_run_files",
           "check_fresh_output_dir", "fresh_dir_suggestion", "OWNER_FILES"]

#: LIBERO's control frequency (Hz): one env step = 0.05 s, so the video plays in real time.
VIDEO_FPS = 20


#: Files a run's owner may write into its (new) run directory before the run starts: the TUI
#: session's ``taskrun.json`` of the TaskRun it created the directory for.
OWNER_FILES = ("taskrun.json",)


def earlier_run_files(directory: str | Path, ignore: tuple[str, ...] = ()) -> list[str]:
    """The entries of ``directory`` (sorted names) other than ``ignore``; [] when it does not exist.

    Every entry counts: a run writes many kinds of files (``states.json``, ``transcript_*.json``,
    ``run.log``, ``steering.jsonl``, service logs, ``provenance.json``, artifact directories,
    ``trajectories/``, ...) and a cancelled run may have written any subset of them, so a
    directory that holds anything may hold part of an earlier run.
    """
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if p.name not in ignore)


def fresh_dir_suggestion(directory: str | Path) -> Path:
    """``<directory>-2`` (or ``-3``, ...): the first sibling name that does not exist.

    A directory without a name of its own (``.``, ``..``, ``''``, ``/``) is named by its absolute
    path; the root gets ``/run-2``."""
    d = Path(directory)
    if d.name in ("", ".", ".."):
        d = Path(os.path.abspath(d))
        if not d.name:
            d = d / "run"
    n = 2
    while (cand := d.with_name(f"{d.name}-{n}")).exists():
        n += 1
    return cand


def check_fresh_output_dir(directory: str | Path, *, ignore: tuple[str, ...] = (), flag: str = "--output-dir") -> None:
    """Refuse a run directory that holds anything (:func:`earlier_run_files`).

    Raises:
        FileExistsError: naming one of the files found, how many there are, and a fresh directory.
    """
    found = earlier_run_files(directory, ignore)
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise FileExistsError(
            f"{flag} {directory} already holds files ({shown}) of an earlier run, finished or not; refusing to "
            f"write into it, so nothing of it is overwritten or mixed with a new run. Choose a fresh directory, "
            f"e.g. {flag} {fresh_dir_suggestion(directory)} (or omit {flag} for a timestamped one).")


def run_tag(suite: str, task: int, seed: int) -> str:
    """``<suite without libero_>_t<task>_s<seed>`` (reference §6.1 ``recipe_tag``)."""
    short = suite[len("libero_"):] if suite.startswith("libero_") else suite
    return f"{short}_t{task}_s{seed}"


def encode_png(rgb: np.ndarray, compress_level: int = 1) -> bytes:
    """Encode an image as PNG bytes.

    Args:
        rgb: uint8 [H, W, 3] (or [H, W]) image.
        compress_level: zlib level 0-9 (1: fast, a few % larger than 6).
    """
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"_omitted_bytes": len(obj)}
    if isinstance(obj, (set, tuple, Path)):
        return list(obj) if not isinstance(obj, Path) else str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps_json(obj: Any, indent: int | None = 1) -> str:
    """JSON text of ``obj`` with numpy arrays/scalars converted and bytes replaced by a size note."""
    return json.dumps(obj, indent=indent, default=_json_default, ensure_ascii=False)


class RunRecord:
    """Writes one run's record. Thread-safe.

    Args:
        output_dir: the run directory (created). It must hold nothing yet (an earlier run's files,
            finished or not, are never overwritten or mixed with this run's): see
            :func:`earlier_run_files`. ``taskrun.json`` is allowed: the TUI session writes it into
            the directory it has just created for this TaskRun.
        tag: the run tag (see :func:`run_tag`).
        allow_existing: write into the directory whatever it holds (tests and tools that add to
            a record on purpose).

    Raises:
        FileExistsError: ``output_dir`` holds files (the message names one and suggests a
            fresh directory).
    """

    def __init__(self, output_dir: str | Path, tag: str, *, allow_existing: bool = False) -> None:
        self.dir = Path(output_dir)
        self.tag = tag
        if not allow_existing:
            check_fresh_output_dir(self.dir, ignore=OWNER_FILES)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.steps: list[dict] = []
        self.run_artifacts: list[str] = []
        self.episode: dict | None = None
        self.failed_calls: list[dict] = []
        self._video = None
        self._video_frames = 0

    # ------------------------------------------------------------------ steps
    def artifact_path(self, name: str, step_idx: int) -> Path:
        """Path of artifact ``name`` (e.g. ``agentview.png``) of step ``step_idx``."""
        ext = name.rsplit(".", 1)[-1]
        if "/" in name or name == "states.json" or "." not in name:
            raise ValueError(f"bad artifact name {name!r}: use a bare file name with an extension")
        return self.dir / name / f"{step_idx:02d}.{ext}"

    def write_artifact(self, name: str, step_idx: int, data: bytes) -> Path:
        """Write one artifact file atomically; returns its path."""
        path = self.artifact_path(name, step_idx)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
        return path

    def add_step(self, state: dict, artifacts: dict[str, bytes], *, command: dict | None = None,
                 result: dict | None = None, elapsed_s: float | None = None, call_id: str | None = None) -> int:
        """Append a step: write its artifacts, then rewrite ``states.json`` atomically.

        Args:
            state: ``{"robot0_eef_pos", ..., "terminated", "truncated", "success", "env_steps"}``
                (numpy values allowed).
            artifacts: artifact name -> encoded bytes (``.png``, ``.npz``, ``.json``).
            command: ``{"action": tool_name, **args}`` that produced this step (None for step 0).
            result: the tool's result (images removed).
            elapsed_s: wall time of the tool call (s).
            call_id: the planner's id of that tool call (links the step to the transcript).
        Returns:
            the new step index. If writing an artifact fails, nothing is added (rollback).
        """
        with self._lock:
            idx = len(self.steps)
            written = []
            try:
                for name, data in artifacts.items():
                    written.append(self.write_artifact(name, idx, data))
            except BaseException:
                for p in written:
                    p.unlink(missing_ok=True)
                raise
            state = dict(state)
            rec = {
                "step_idx": idx,
                "env_steps": state.pop("env_steps", None),
                "terminated": bool(state.pop("terminated", False)),
                "truncated": bool(state.pop("truncated", False)),
                "success": bool(state.pop("success", False)),
                "state": state,
                "artifacts": sorted(artifacts),
                "t": time.time(),
            }
            if command is not None:
                rec["command"] = command
            if result is not None:
                rec["result"] = result
            if elapsed_s is not None:
                rec["elapsed_s"] = round(float(elapsed_s), 4)
            if call_id is not None:
                rec["call_id"] = call_id
            self.steps.append(json.loads(dumps_json(rec)))
            self._write_states()
            return idx

    def add_artifact_to_step(self, step_idx: int, name: str, data: bytes) -> Path:
        """Add a lazily produced artifact (e.g. a 1024 px view, a segment overlay) to a step."""
        with self._lock:
            if not 0 <= step_idx < len(self.steps):
                raise IndexError(f"state step not available: {step_idx} (have 0..{len(self.steps) - 1})")
            path = self.write_artifact(name, step_idx, data)
            arts = self.steps[step_idx]["artifacts"]
            if name not in arts:
                arts.append(name)
                arts.sort()
            self._write_states()
            return path

    def annotate_step(self, step_idx: int, **fields: Any) -> None:
        """Set extra JSON fields of a recorded step (e.g. ``capture="state_only"``: how its images
        were made) and rewrite ``states.json``; the step's own keys (state, command, result,
        artifacts, ...) cannot be changed this way.

        Raises:
            IndexError: no such step. ValueError: a field names one of the step's own keys.
        """
        own = {"step_idx", "env_steps", "terminated", "truncated", "success", "state", "artifacts", "t",
               "command", "result", "elapsed_s", "call_id"}
        if own & set(fields):
            raise ValueError(f"annotate_step cannot change {sorted(own & set(fields))}")
        with self._lock:
            if not 0 <= step_idx < len(self.steps):
                raise IndexError(f"state step not available: {step_idx} (have 0..{len(self.steps) - 1})")
            self.steps[step_idx].update(json.loads(dumps_json(fields)))
            self._write_states()

    def add_run_artifact(self, name: str) -> None:
        """Note a run-level file (``episode.mp4``, a recipe) in ``states.json``."""
        with self._lock:
            if name not in self.run_artifacts:
                self.run_artifacts.append(name)
                self._write_states()

    def resolve_step(self, step: int) -> int:
        """Map ``step`` (negative counts from the end, ``-1`` = latest) to an index.

        Raises:
            IndexError: ``state step not available: <step>`` with the valid range.
        """
        with self._lock:
            n = len(self.steps)
            idx = step + n if step < 0 else step
            if not 0 <= idx < n:
                raise IndexError(f"state step not available: {step} (valid: 0..{n - 1}, or -1 for the latest)")
            return idx

    def set_episode(self, episode: dict) -> None:
        """Record which episode this is (suite, task, seed, the init state actually loaded and its
        sha256, ...; the env server's ``env.get_env_meta``) at the top of ``states.json``."""
        with self._lock:
            self.episode = json.loads(dumps_json(dict(episode)))
            self._write_states()

    def add_failed_call(self, call_id: str | None, tool: str, args: dict, error: str, **extra: Any) -> None:
        """Note a stateful tool call that ended in an error without a new step (see module doc)."""
        with self._lock:
            rec = {"call_id": call_id, "tool": tool, "args": args, "error": error,
                   "after_step": len(self.steps) - 1, "t": time.time(), **extra}
            self.failed_calls.append(json.loads(dumps_json(rec)))
            self._write_states()

    def mark_undelivered(self, call_id: str, reason: str) -> bool:
        """Mark the step (or failed call) of tool call ``call_id`` as never delivered to the
        planner: ``"result_delivered": false`` and ``"undelivered_reason"``. Returns False when no
        record of that call exists (e.g. a read-only tool, which adds no step)."""
        with self._lock:
            found = False
            for rec in [*self.steps, *self.failed_calls]:
                if rec.get("call_id") == call_id:
                    rec["result_delivered"] = False
                    rec["undelivered_reason"] = reason
                    found = True
            if found:
                self._write_states()
            return found

    def _write_states(self) -> None:
        doc: dict[str, Any] = {"schema_version": 1, "tag": self.tag}
        if self.episode is not None:
            doc["episode"] = self.episode
        doc["run_artifacts"] = self.run_artifacts
        doc["steps"] = self.steps
        doc["failed_calls"] = self.failed_calls  # always present (empty when no call failed)
        write_bytes_atomic(self.dir / "states.json", dumps_json(doc).encode("utf-8"))

    # ------------------------------------------------------------------ video
    def add_video_frame(self, rgb: np.ndarray) -> None:
        """Append one agentview frame (uint8 [H, W, 3], natural orientation) to ``episode.mp4`` (20 fps, H.264).

        The file is written as ``episode.mp4.partial`` and renamed by :meth:`close_video`, so a
        crashed run never leaves a truncated file that looks complete.
        """
        import av

        with self._lock:
            if self._video is None:
                h, w = rgb.shape[:2]
                container = av.open(str(self.dir / "episode.mp4.partial"), mode="w", format="mp4")
                stream = container.add_stream("libx264", rate=VIDEO_FPS)
                stream.width, stream.height = w, h
                stream.pix_fmt = "yuv420p"
                stream.options = {"preset": "veryfast", "crf": "23"}
                self._video = (container, stream)
            container, stream = self._video
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
            self._video_frames += 1

    def close_video(self) -> Path | None:
        """Finish ``episode.mp4`` (flush the encoder, rename into place). Idempotent."""
        with self._lock:
            if self._video is None:
                return None
            container, stream = self._video
            self._video = None
            for packet in stream.encode():
                container.mux(packet)
            container.close()
            final = self.dir / "episode.mp4"
            (self.dir / "episode.mp4.partial").replace(final)
            self.run_artifacts.append("episode.mp4")
            self._write_states()
            return final

    # ------------------------------------------------------------------ documents
    def write_provenance(self, doc: dict) -> Path:
        """Write ``provenance.json`` atomically (this run's own; rewritten as it learns more)."""
        path = self.dir / "provenance.json"
        write_bytes_atomic(path, dumps_json(doc).encode("utf-8"))
        return path

    def write_transcript(self, doc: dict) -> Path:
        """Write ``transcript_<tag>.json`` atomically (overwrites this run's own earlier write)."""
        path = self.dir / f"transcript_{self.tag}.json"
        write_bytes_atomic(path, dumps_json(doc).encode("utf-8"))
        return path

    def write_recipe(self, commands: list[dict]) -> Path:
        """Write ``<tag>_recipe.jsonl`` (one command per line); call only for a run labelled
        ``succeeded`` whose environment predicate held."""
        path = self.dir / f"{self.tag}_recipe.jsonl"
        text = "".join(dumps_json(c, indent=None) + "\n" for c in commands)
        write_bytes_atomic(path, text.encode("utf-8"))
        self.add_run_artifact(path.name)
        return path

    def recipe_commands(self) -> list[dict]:
        """The recipe (reference §6.1): commands of non-error motion steps plus successful
        ``segment`` calls, ordered by (step, segment index), after the last scene reset (the
        trace covers only steps after the last ``reset``).

        A segment call is read from its ``segment_NN.json`` artifact on the step it segmented
        and becomes ``{"action": "segment", "prompt": str | "point": [row, col], "camera",
        "artifact": "segment_NN.json/SS.json"}`` (``artifact``: where its result, e.g. the
        ``object_estimate``, is stored in this run directory). Segment artifacts written before
        the query was recorded in them (older runs) or whose mask was empty are left out.
        """
        with self._lock:
            out: list[dict] = []
            for s in self.steps:
                if (s.get("command") or {}).get("action") in ("reset", "request_scene_reset") \
                        and "error" not in (s.get("result") or {}):
                    out = []
                else:
                    cmd, res = s.get("command"), s.get("result") or {}
                    if cmd and "error" not in res:
                        out.append(dict(cmd))
                out.extend(self._segment_commands(s))
            return out

    def _segment_commands(self, step: dict) -> list[dict]:
        """Recipe lines of the successful ``segment`` calls recorded on ``step`` (by segment index)."""
        found = []
        for name in step.get("artifacts") or []:
            m = _SEGMENT_ARTIFACT.match(name)
            if m:
                found.append((int(m.group(1)), name))
        lines = []
        for _, name in sorted(found):
            rel = f"{name}/{int(step['step_idx']):02d}.json"
            try:
                doc = json.loads((self.dir / rel).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            query = doc.get("query") or {}
            if not doc.get("found") or not (query.get("prompt") or query.get("point")):
                continue
            line: dict[str, Any] = {"action": "segment"}
            if query.get("prompt"):
                line["prompt"] = query["prompt"]
            else:
                line["point"] = query["point"]
            line["camera"] = doc.get("camera") or "agentview"
            line["artifact"] = rel
            lines.append(line)
        return lines


_SEGMENT_ARTIFACT = re.compile(r"^segment_(\d+)\.json$")
