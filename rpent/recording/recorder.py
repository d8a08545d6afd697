"""``TrajectoryRecorder``: writes one run's trajectory record (schema_version 1).

The toolkit drives it; the run layer creates and closes it. Call order for one run::

    rec = TrajectoryRecorder(output_dir, TaskInfo(robot="libero", suite="libero_goal", task=0, seed=0,
                             task_language="open the drawer", planner="api", model="anthropic:..."))
    rec.record_planner_event("request", {...})              # api planner: full model messages
    rec.begin_tool_call("call_1", "move_to", {"xyz": [...]})
    rec.record_action(a, obs_before, call_id="call_1", source="scripted", reward=0.0,
                      terminated=False, truncated=False, step=0)
    rec.end_tool_call("call_1", result={...})
    rec.begin_tool_call("call_2", "pi0_pick", {"prompt": "pick up the bowl"})
    pid = rec.begin_prediction("pick up the bowl", "call_2", "pi0_pick", chunk)   # chunk [H,7]
    rec.record_action(chunk[0], obs0, call_id="call_2", source="vla", pred_id=pid, index_in_chunk=0, ...)
    rec.end_prediction(pid, n_executed=1)                   # writes only chunk[:1]
    rec.end_tool_call("call_2", result={...})
    rec.close("finished", environment_success=True)

Thread safety: every method may be called from any thread (one lock). Writes happen on a
background :class:`~rpent.recording.writer.OrderedWriter` in call order; see that module for
the crash-safety guarantee (a line never references an image that is not complete on disk).
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rpent.recording import layout
from rpent.recording.atomic import write_bytes_atomic, write_json_atomic
from rpent.recording.jsonl import dumps_line, to_jsonable
from rpent.recording.png import encode_png
from rpent.recording.versions import collect_versions
from rpent.recording.writer import OrderedWriter

_RESERVED_PLANNER_KINDS = ("tool_call", "tool_result")


@dataclass(frozen=True)
class TaskInfo:
    """What a record is about (copied into ``task.json``).

    Attributes:
        robot: robot package name, e.g. ``"libero"`` (the export maps it to a LeRobot robot type).
        suite: suite name, e.g. ``"libero_goal"``.
        task: task index within the suite (>= 0).
        seed: episode seed / init-state selector (>= 0).
        task_language: the suite's natural-language task description.
        planner: planner name (``api``, ``claude_code``, ``codex``, ``scripted``, ...).
        model: planner model id (``None`` for planners without one).
        reasoning_effort: the planner's reasoning effort setting, if any.
        policy_mode: ``"tools"`` (tool calls) or ``"code"`` (code-as-policy), as the run layer names it.
        init_state_id: the init state actually loaded (task-local index; LIBERO: ``seed mod
            n_init_states`` today), from the env server's ``env.get_env_meta``; None when unknown.
        init_state_sha256: sha256 of that init state (:func:`rpent.robots.libero.suites.init_state_sha256`).
    """

    robot: str
    suite: str
    task: int
    seed: int
    task_language: str
    planner: str
    model: str | None = None
    reasoning_effort: str | None = None
    policy_mode: str = "tools"
    init_state_id: int | None = None
    init_state_sha256: str | None = None


def default_planner_capture(planner: str, policy_mode: str) -> str:
    """Which planner messages a run can capture: ``"full"`` only for ``--planner api`` in tool mode.

    SDK planners (claude_code, codex) hide the model requests inside their SDK, and
    code-as-policy mode executes tool calls from code cells, so only tool calls are available.
    """
    return layout.CAPTURE_FULL if planner == "api" and policy_mode != "code" else layout.CAPTURE_TOOL_CALLS_ONLY


def default_action_capture(robot: str) -> str:
    """Whether executed env actions can be captured for ``robot``: ``"full"`` for the robots with a
    state/action layout (:data:`rpent.recording.layout.ROBOT_SPACES`: LIBERO, Meta-World)."""
    return layout.CAPTURE_FULL if robot in layout.ROBOT_SPACES else layout.CAPTURE_UNAVAILABLE


def _utc_now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _capture_note(planner_capture: str, action_capture: str) -> str:
    missing = []
    if planner_capture != layout.CAPTURE_FULL:
        missing.append(
            "planner model requests and replies (this planner/policy mode exposes only tool calls and results)"
        )
    if action_capture != layout.CAPTURE_FULL:
        missing.append("executed env actions, observations and VLA predictions (no action capture for this robot)")
    if not missing:
        return "all parts captured"
    return "unavailable: " + "; ".join(missing)


def _as_vector(name: str, value: Any, dim: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float32)
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},), got {arr.shape}; pass one {dim}-D vector per env step")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite values {arr.tolist()}; refusing to record NaN/inf")
    return arr.copy()


def _as_image(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"{name} must be a uint8 [H,W,3] RGB image, got {arr.dtype} {arr.shape}")
    return np.ascontiguousarray(arr).copy()  # LIBERO reuses its buffers: copy before queueing


class TrajectoryRecorder:
    """Append-only, crash-safe recorder of one run's planner events, env actions and VLA predictions.

    Creates ``<output_dir>/trajectories/<task_id>/`` (``task_id = <suite>_t<task>_s<seed>``; when
    that directory already holds a record, ``<task_id>-r2``, ``-r3``, ... so nothing recorded is
    ever overwritten) and writes ``task.json`` (status ``running``) immediately.

    Args:
        output_dir: the run's output directory.
        info: what the run is (:class:`TaskInfo`).
        planner_capture: ``"full"`` or ``"tool_calls_only"``; default from :func:`default_planner_capture`.
        action_capture: ``"full"`` or ``"unavailable"``; default from :func:`default_action_capture`.
        observations: ``"vla"`` (default: only VLA actions carry images) or ``"all"`` (every action
            is recorded with its policy images; the caller renders them). Written to ``task.json``
            as ``capture.observations``; :meth:`record_action` refuses an action without images
            in ``"all"`` mode.
        versions: override of ``task.json``'s ``versions`` (default :func:`collect_versions`).
        provenance: the run's provenance (:func:`rpent.recording.provenance.run_provenance`),
            copied into ``task.json`` as ``provenance`` (None when the caller has none).
        png_compress_level: zlib level of observation PNGs (0-9; default 1: fast, ~10x smaller than raw
            for rendered scenes; the export decodes them losslessly either way).
        background: write on a background thread (default) or inline.
        max_pending: bound of the background queue, in write jobs (one image or one line each).

    Raises:
        ValueError: bad ``info`` fields or capture modes (the message names the accepted values).
        OSError: the record directory cannot be created.
    """

    def __init__(
        self,
        output_dir: str | Path,
        info: TaskInfo,
        *,
        planner_capture: str | None = None,
        action_capture: str | None = None,
        observations: str = layout.OBSERVATIONS_VLA,
        versions: dict | None = None,
        provenance: dict | None = None,
        png_compress_level: int = 1,
        background: bool = True,
        max_pending: int = 256,
    ):
        self.info = info
        self.task_id = layout.make_task_id(info.suite, info.task, info.seed)
        if not info.robot:
            raise ValueError("TaskInfo.robot must name the robot package (e.g. 'libero')")
        self.planner_capture = planner_capture or default_planner_capture(info.planner, info.policy_mode)
        self.action_capture = action_capture or default_action_capture(info.robot)
        if self.planner_capture not in layout.PLANNER_CAPTURE_MODES:
            raise ValueError(f"planner_capture must be one of {layout.PLANNER_CAPTURE_MODES}, got {self.planner_capture!r}")
        if self.action_capture not in layout.ACTION_CAPTURE_MODES:
            raise ValueError(f"action_capture must be one of {layout.ACTION_CAPTURE_MODES}, got {self.action_capture!r}")
        if observations not in layout.OBSERVATION_MODES:
            raise ValueError(f"observations must be one of {layout.OBSERVATION_MODES}, got {observations!r}")
        self.observations = observations
        if not 0 <= png_compress_level <= 9:
            raise ValueError(f"png_compress_level must be in 0..9, got {png_compress_level}")
        self._png_level = png_compress_level

        root = Path(output_dir) / layout.TRAJECTORIES_DIRNAME
        root.mkdir(parents=True, exist_ok=True)
        self.record_dir = self._claim_dir(root, self.task_id)
        for cam in layout.CAMERAS:
            (self.record_dir / layout.ARTIFACTS_DIRNAME / cam).mkdir(parents=True, exist_ok=True)

        self._lock = threading.RLock()
        self._writer = OrderedWriter(background=background, max_pending=max_pending)
        self._files = {
            name: open(self.record_dir / name, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            for name in (layout.PLANNERS_JSONL, layout.ACTIONS_JSONL, layout.PREDICTIONS_JSONL)
        }
        self._planner_seq = 0
        self._action_seq = 0
        self._pred_seq = 0
        self._last_step: int | None = None
        self._open_calls: dict[str, dict] = {}
        self._ended_calls: set[str] = set()
        self._open_preds: dict[str, dict] = {}
        self._closed = False
        self._task: dict[str, Any] = {
            "schema_version": layout.SCHEMA_VERSION,
            "task_id": self.task_id,
            **{k: v for k, v in asdict(info).items()},
            "versions": versions if versions is not None else collect_versions(),
            "started_at": _utc_now_iso(),
            "ended_at": None,
            "status": layout.STATUS_RUNNING,
            "environment_success": None,
            "environment_success_unknown": None,
            "label": None,
            "verdict_required": None,
            "operator_verdict": None,
            "operator_verdicts": [],
            "disagreement": None,
            "provenance": provenance,
            "capture": {
                "planner_messages": self.planner_capture,
                "actions": self.action_capture,
                "observations": observations,
                "note": _capture_note(self.planner_capture, self.action_capture),
            },
            "counts": None,
            "error": None,
        }
        write_json_atomic(self.record_dir / layout.TASK_JSON, to_jsonable(self._task))

    @staticmethod
    def _claim_dir(root: Path, task_id: str) -> Path:
        n = 1
        while True:
            name = task_id if n == 1 else f"{task_id}-r{n}"
            try:
                (root / name).mkdir()
                return root / name
            except FileExistsError:
                n += 1

    # ------------------------------------------------------------------ lines
    def _append(self, name: str, record: dict) -> None:
        line = dumps_line(record)  # serialise now: errors surface in the caller, not the thread
        f = self._files[name]

        def job() -> None:
            f.write(line)
            f.flush()

        self._writer.submit(job)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"trajectory recorder for {self.record_dir} is closed; create a new one per run")

    # ---------------------------------------------------------------- planner
    def record_planner_event(self, kind: str, payload: dict | None = None) -> int:
        """Append a planner event (model request, reply, text, thinking, usage, error, ...) to ``planners.jsonl``.

        Line: ``{"seq", "t" (unix s), "kind", "data": payload}``. ``bytes`` inside ``payload`` are
        replaced by ``{"_bytes": n}``; numpy values become JSON numbers.

        Returns:
            the line's ``seq`` (0-based, shared with tool-call lines, in write order).

        Raises:
            ValueError: ``kind`` empty or one of the tool-call kinds (use :meth:`begin_tool_call`).
        """
        if not kind or kind in _RESERVED_PLANNER_KINDS:
            raise ValueError(
                f"planner event kind {kind!r} is empty or reserved; tool calls go through begin_tool_call/end_tool_call"
            )
        with self._lock:
            self._check_open()
            seq = self._planner_seq
            self._planner_seq += 1
            self._append(layout.PLANNERS_JSONL, {"seq": seq, "t": time.time(), "kind": kind, "data": payload or {}})
            return seq

    def begin_tool_call(self, call_id: str, tool: str, args: dict | None = None) -> None:
        """Open tool call ``call_id`` and append its ``tool_call`` line to ``planners.jsonl``.

        Line: ``{"seq", "t", "kind": "tool_call", "call_id", "tool", "args", "first_step"}``.

        Raises:
            ValueError: ``call_id``/``tool`` empty, or ``call_id`` already used in this record.
        """
        if not call_id or not tool:
            raise ValueError("begin_tool_call needs a non-empty call_id and tool name")
        with self._lock:
            self._check_open()
            if call_id in self._open_calls or call_id in self._ended_calls:
                raise ValueError(f"tool call id {call_id!r} was already used in this record; ids must be unique")
            seq = self._planner_seq
            self._planner_seq += 1
            t = time.time()
            self._open_calls[call_id] = {"tool": tool, "t": t, "n_actions": 0, "steps": None}
            self._append(
                layout.PLANNERS_JSONL,
                {"seq": seq, "t": t, "kind": "tool_call", "call_id": call_id, "tool": tool, "args": args or {}},
            )

    def end_tool_call(self, call_id: str, result: dict | None = None, error: str | None = None) -> None:
        """Close tool call ``call_id``; end its open predictions; append its ``tool_result`` line.

        Line: ``{"seq", "t", "kind": "tool_result", "call_id", "tool", "result", "error", "elapsed_s",
        "n_actions", "steps": [first, last] | null}``. ``result["_images"]`` (PNG bytes) is replaced
        by the image labels; other ``bytes`` by their length.

        Raises:
            ValueError: ``call_id`` is not an open tool call.
        """
        with self._lock:
            self._check_open()
            call = self._open_calls.get(call_id)
            if call is None:
                raise ValueError(f"end_tool_call: {call_id!r} is not an open tool call (begin_tool_call first)")
            for pid in [p for p, pred in self._open_preds.items() if pred["call_id"] == call_id]:
                self.end_prediction(pid)
            self._write_tool_result(call_id, call, result, error)

    def _write_tool_result(self, call_id: str, call: dict, result: dict | None, error: str | None) -> None:
        clean = None
        if result is not None:
            clean = dict(result)
            images = clean.pop("_images", None)
            if images:
                clean["_images"] = [str(im.get("label", "")) for im in images if isinstance(im, dict)]
        seq = self._planner_seq
        self._planner_seq += 1
        t = time.time()
        self._append(
            layout.PLANNERS_JSONL,
            {
                "seq": seq,
                "t": t,
                "kind": "tool_result",
                "call_id": call_id,
                "tool": call["tool"],
                "result": clean,
                "error": error,
                "elapsed_s": t - call["t"],
                "n_actions": call["n_actions"],
                "steps": call["steps"],
            },
        )
        del self._open_calls[call_id]
        self._ended_calls.add(call_id)

    # ------------------------------------------------------------ predictions
    def begin_prediction(
        self, instruction: str, call_id: str, tool: str, chunk: Any, *, created_step: int | None = None
    ) -> str:
        """Register a VLA query's action chunk; nothing is written until :meth:`end_prediction`.

        Args:
            instruction: the language instruction sent to the VLA (recorded verbatim, even if empty;
                the export excludes empty ones).
            call_id: the open tool call that queried the VLA.
            tool: that tool's name (must match the call's tool).
            chunk: predicted actions, float [H, 7], environment units (rpent_reference §3.2).
            created_step: env step at which the VLA was queried (default: the step after the last
                recorded action, or 0).

        Returns:
            ``pred_id`` (``"p000000"``, ``"p000001"``, ... unique within the record).

        Raises:
            ValueError: unknown/closed ``call_id``, tool mismatch, bad chunk shape or non-finite values.
        """
        arr = np.asarray(chunk, dtype=np.float32)
        action_dim = layout.robot_spaces(self._task.get("robot"))[1]
        if arr.ndim != 2 or arr.shape[1] != action_dim or arr.shape[0] < 1:
            raise ValueError(f"chunk must be float [H>=1, {action_dim}], got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("chunk has non-finite values; refusing to record NaN/inf actions")
        if not isinstance(instruction, str):
            raise ValueError(f"instruction must be a str, got {type(instruction).__name__}")
        with self._lock:
            self._check_open()
            self._require_actions()
            call = self._open_calls.get(call_id)
            if call is None:
                raise ValueError(f"begin_prediction: {call_id!r} is not an open tool call (begin_tool_call first)")
            if call["tool"] != tool:
                raise ValueError(f"begin_prediction: tool {tool!r} does not match tool call {call_id!r} ({call['tool']!r})")
            pid = f"p{self._pred_seq:06d}"
            self._pred_seq += 1
            if created_step is None:
                created_step = 0 if self._last_step is None else self._last_step + 1
            self._open_preds[pid] = {
                "instruction": instruction,
                "call_id": call_id,
                "tool": tool,
                "chunk": arr.copy(),
                "created_step": int(created_step),
                "executed": [],
                "t": time.time(),
            }
            return pid

    def end_prediction(self, pred_id: str, n_executed: int | None = None) -> None:
        """Close prediction ``pred_id`` and append its line with ONLY the executed actions.

        Line: ``{"pred_id", "instruction", "call_id", "tool", "created_step", "chunk_length",
        "n_executed", "actions": chunk[:n_executed], "t_start", "t_end"}``.

        Args:
            n_executed: how many leading actions of the chunk were executed; default: the number
                recorded with this ``pred_id``. When given it must equal that number.

        Raises:
            ValueError: unknown/ended ``pred_id``, or ``n_executed`` disagrees with the recorded
                actions (which must be indices ``0..n-1`` of the chunk).
        """
        with self._lock:
            self._check_open()
            pred = self._open_preds.get(pred_id)
            if pred is None:
                raise ValueError(f"end_prediction: {pred_id!r} is not an open prediction")
            executed = pred["executed"]
            n = len(executed) if n_executed is None else int(n_executed)
            if sorted(executed) != list(range(n)):
                raise ValueError(
                    f"end_prediction({pred_id!r}, n_executed={n}): recorded chunk indices are {sorted(executed)}; "
                    f"they must be exactly 0..{n - 1} (record each executed action with record_action first)"
                )
            del self._open_preds[pred_id]
            self._append(
                layout.PREDICTIONS_JSONL,
                {
                    "pred_id": pred_id,
                    "instruction": pred["instruction"],
                    "call_id": pred["call_id"],
                    "tool": pred["tool"],
                    "created_step": pred["created_step"],
                    "chunk_length": int(pred["chunk"].shape[0]),
                    "n_executed": n,
                    "actions": pred["chunk"][:n],
                    "t_start": pred["t"],
                    "t_end": time.time(),
                },
            )

    # ---------------------------------------------------------------- actions
    def _require_actions(self) -> None:
        if self.action_capture != layout.CAPTURE_FULL:
            raise RuntimeError(
                f"action capture is {self.action_capture!r} for robot {self.info.robot!r}; "
                "record actions only for robots with action capture"
            )

    def record_action(
        self,
        action: Any,
        obs_before: dict,
        *,
        call_id: str,
        source: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        step: int | None = None,
        pred_id: str | None = None,
        index_in_chunk: int | None = None,
    ) -> int:
        """Record one executed env action and the policy observation before it.

        Args:
            action: float [7], environment units (OSC_POSE delta + gripper, rpent_reference §3.2).
            obs_before: the policy observation the action was chosen from: ``main_image`` and
                ``wrist_image`` uint8 [H,W,3] (VLA orientation, as ``env.policy_obs`` returns them)
                and ``state`` float [8]. Arrays are copied; the caller may reuse its buffers.
                Scripted actions may leave out the images (``None`` or absent; recorded as ``null``)
                when ``observations == "vla"``: rule set v1 never exports them, and rendering two
                cameras every scripted step costs time (measured, benchmarks/flywheel_bench.py).
                VLA actions, and every action with ``observations == "all"``, must carry both images.
            call_id: the open tool call that executed the action.
            source: ``"vla"`` (from a VLA chunk) or ``"scripted"`` (any other controller).
            reward, terminated, truncated: what ``env.step`` returned for this action.
            step: env step index of the action within the episode (default: previous + 1, or 0).
            pred_id, index_in_chunk: for ``source="vla"``: the open prediction and the row of its
                chunk this action is; both ``None`` for scripted actions.

        Line (``actions.jsonl``): ``{"seq", "step", "t", "action"[7], "source", "call_id", "tool",
        "pred_id", "index_in_chunk", "reward", "terminated", "truncated",
        "obs": {"main": "artifacts/main/<seq:06d>.png" | null, "wrist": "artifacts/wrist/<seq:06d>.png" | null,
        "state": [8]}}``. Vectors are float32 values written as exact decimals (lossless).

        Returns:
            the action's ``seq`` (0-based line index; also names its observation images).

        Raises:
            ValueError: bad shapes/dtypes/values, unknown tool call, or an invalid VLA link
                (unknown prediction, prediction of another tool call, index outside the chunk,
                chunk row already executed).
            RuntimeError: the robot has no action capture, or the recorder is closed.
        """
        state_dim, action_dim = layout.robot_spaces(self._task.get("robot"))
        act = _as_vector("action", action, action_dim)
        if source not in layout.ACTION_SOURCES:
            raise ValueError(f"source must be one of {layout.ACTION_SOURCES}, got {source!r}")
        if not isinstance(obs_before, dict) or "state" not in obs_before:
            raise ValueError("obs_before lacks 'state'; pass env.policy_obs() (main_image, wrist_image, state)")
        state = _as_vector("obs_before['state']", obs_before["state"], state_dim)
        images: dict[str, np.ndarray | None] = {}
        for cam in layout.CAMERAS:
            img = obs_before.get(f"{cam}_image")
            if img is None and self.observations == layout.OBSERVATIONS_ALL:
                raise ValueError(
                    f"obs_before lacks '{cam}_image'; this recorder records observations of every action "
                    "(observations='all'): pass env.policy_obs() for scripted actions too"
                )
            if img is None and source == layout.SOURCE_VLA:
                raise ValueError(
                    f"obs_before lacks '{cam}_image'; VLA actions need both policy images "
                    "(they become training frames): pass env.policy_obs() or chunk_step(return_all_frames=True) frames"
                )
            images[cam] = None if img is None else _as_image(f"obs_before['{cam}_image']", img)
        with self._lock:
            self._check_open()
            self._require_actions()
            call = self._open_calls.get(call_id)
            if call is None:
                raise ValueError(f"record_action: {call_id!r} is not an open tool call (begin_tool_call first)")
            if source == layout.SOURCE_VLA:
                pred = self._open_preds.get(pred_id) if pred_id is not None else None
                if pred is None:
                    raise ValueError(f"record_action: VLA action needs an open pred_id, got {pred_id!r}")
                if pred["call_id"] != call_id:
                    raise ValueError(f"record_action: prediction {pred_id} belongs to call {pred['call_id']!r}, not {call_id!r}")
                if index_in_chunk is None or not 0 <= int(index_in_chunk) < pred["chunk"].shape[0]:
                    raise ValueError(
                        f"record_action: index_in_chunk {index_in_chunk!r} outside chunk of length {pred['chunk'].shape[0]}"
                    )
                index_in_chunk = int(index_in_chunk)
                if index_in_chunk in pred["executed"]:
                    raise ValueError(f"record_action: row {index_in_chunk} of {pred_id} was already recorded")
                pred["executed"].append(index_in_chunk)
            elif pred_id is not None or index_in_chunk is not None:
                raise ValueError("record_action: scripted actions take no pred_id/index_in_chunk")
            seq = self._action_seq
            self._action_seq += 1
            if step is None:
                step = 0 if self._last_step is None else self._last_step + 1
            step = int(step)
            self._last_step = step
            call["n_actions"] += 1
            call["steps"] = [step, step] if call["steps"] is None else [call["steps"][0], step]
            refs: dict[str, str | None] = {}
            for cam, img in images.items():
                if img is None:
                    refs[cam] = None
                    continue
                rel = layout.artifact_relpath(cam, seq)
                refs[cam] = rel
                self._writer.submit(self._image_job(self.record_dir / rel, img))
            self._append(
                layout.ACTIONS_JSONL,
                {
                    "seq": seq,
                    "step": step,
                    "t": time.time(),
                    "action": act,
                    "source": source,
                    "call_id": call_id,
                    "tool": call["tool"],
                    "pred_id": pred_id if source == layout.SOURCE_VLA else None,
                    "index_in_chunk": index_in_chunk if source == layout.SOURCE_VLA else None,
                    "reward": float(reward),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                    "obs": {"main": refs["main"], "wrist": refs["wrist"], "state": state},
                },
            )
            return seq

    def _image_job(self, path: Path, image: np.ndarray):
        level = self._png_level

        def job() -> None:
            write_bytes_atomic(path, encode_png(image, level))

        return job

    # ------------------------------------------------------------------ close
    def flush(self) -> None:
        """Block until everything recorded so far is on disk (lines flushed, images renamed in place).

        Raises:
            RecordWriteError: a background write failed.
        """
        self._writer.flush()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def close(self, status: str, environment_success: bool | None, error: str | None = None, *,
              outcome: dict | None = None) -> None:
        """Finish the record: end open predictions and tool calls, drain writes, rewrite ``task.json``.

        Open predictions are ended with the actions recorded for them; open tool calls get a
        ``tool_result`` line with ``error="tool call still open when the record closed"``.
        Idempotent: later calls do nothing.

        Args:
            status: ``"finished"``, ``"error"`` or ``"interrupted"``.
            environment_success: the env's own success predicate (``True``/``False``), or ``None``
                when unknown. The planner's ``finish`` claim must never be passed here.
            error: error text for ``status="error"``.
            outcome: the run's outcome fields (:mod:`rpent.recording.outcome`): ``label``,
                ``operator_verdict``, ``operator_verdicts``, ``verdict_required``,
                ``disagreement``, ``environment_success_unknown``. Without it (a recorder used
                outside the run layer, which saw no operator) the label is derived from
                ``environment_success`` and ``status`` by :func:`rpent.recording.outcome.run_label`
                with no verdict.

        Raises:
            ValueError: bad ``status``, ``environment_success`` type or ``outcome`` label.
            RecordWriteError: a background write failed (``task.json`` is still rewritten with
                ``status="error"`` and the write error).
        """
        from rpent.recording.outcome import record_outcome_fields

        if status not in layout.FINAL_STATUSES:
            raise ValueError(f"close status must be one of {layout.FINAL_STATUSES}, got {status!r}")
        if environment_success is not None and not isinstance(environment_success, (bool, np.bool_)):
            raise ValueError(f"environment_success must be True, False or None, got {environment_success!r}")
        success = None if environment_success is None else bool(environment_success)
        fields = record_outcome_fields(outcome, success=success, status=status, error=error)
        with self._lock:
            if self._closed:
                return
            write_error: BaseException | None = None
            try:
                for pid in list(self._open_preds):
                    self.end_prediction(pid)
                for cid in list(self._open_calls):
                    self._write_tool_result(cid, self._open_calls[cid], None, "tool call still open when the record closed")
                self._writer.close()
            except BaseException as e:  # noqa: BLE001 - recorded in task.json, then re-raised
                write_error = e
            finally:
                self._closed = True
                for f in self._files.values():
                    try:
                        f.close()
                    except OSError:
                        pass
            self._task.update(fields)
            self._task.update(
                ended_at=_utc_now_iso(),
                status=status if write_error is None else layout.STATUS_ERROR,
                environment_success=success,
                error=error if write_error is None else f"{error or ''} record write failed: {write_error!r}".strip(),
                counts={
                    "planner_lines": self._planner_seq,
                    "actions": self._action_seq,
                    "predictions": self._pred_seq,
                },
            )
            write_json_atomic(self.record_dir / layout.TASK_JSON, to_jsonable(self._task))
            if write_error is not None:
                raise write_error

    def __enter__(self) -> TrajectoryRecorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Close if still open: ``interrupted`` (KeyboardInterrupt/cancel), ``error`` (other exception),
        else ``finished`` with ``environment_success=None`` (call :meth:`close` yourself to report it)."""
        if self._closed:
            return
        if exc is None:
            self.close(layout.STATUS_FINISHED, None)
        elif isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Cancelled":
            self.close(layout.STATUS_INTERRUPTED, None, error=f"{type(exc).__name__}: {exc}")
        else:
            self.close(layout.STATUS_ERROR, None, error=f"{type(exc).__name__}: {exc}")
