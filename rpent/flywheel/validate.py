"""``rpent-flywheel validate ROOT``: check raw trajectory records and say what is wrong per episode.

One raw record is one episode of one run (``trajectories/<task_id>/``). Checks, each named in
the findings (``check``):

- ``files``: ``task.json``, ``planners.jsonl``, ``actions.jsonl``, ``predictions.jsonl`` exist.
- ``task_json``: readable object, ``schema_version`` 1, a final ``status`` (``running`` means the
  run was killed), ``environment_success`` a boolean (null = unknown).
- ``lines``: no truncated or corrupt JSONL line; ``seq`` of actions is 0,1,2,...; every action
  and prediction line has its fields with the right shapes (7-D action, 8-D state).
- ``links``: every VLA action links to exactly one prediction of the same tool call, the row is
  listed as executed and claimed once, and the prediction's executed row equals the action;
  every prediction's ``n_executed`` equals the actions that claim it; every action's ``call_id``
  has a ``tool_call`` line in ``planners.jsonl``.
- ``observations``: each image an action references exists and decodes as square RGB of the record's one size; with
  ``capture.observations == "all"`` every action references both images.
- ``success``: ``environment_success == true`` has a step with ``terminated == true`` (the
  evidence rule set v2 cuts at); ``false`` has none.
- ``transcript`` also checks that the transcript's ``label`` equals ``task.json``'s. Each record's
  result names its label, the operator's verdict, any disagreement and, when the label policy
  keeps the run out of every export, the reason (``label_exclusion``): a sound record of a run
  the operator rejected is ``ok`` and not exportable.
- ``transcript``, ``states``: the run record next to it (``<run>/transcript_<tag>.json``,
  ``<run>/states.json``) is well formed and agrees with the trajectory record
  (:mod:`rpent.flywheel.runcheck`).

A run directory with a transcript but no trajectory record is listed too (check ``files``), and
so is a run that never ended: a run directory with a run's ``states.json`` (``schema_version``
1) but no transcript and no trajectory record, as a run killed mid-episode leaves it (check
``transcript``: "run never ended: no transcript (killed?)"; a run still in progress looks the
same).

The records are only read.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from rpent.flywheel import runcheck
from rpent.flywheel.selection import check_action_line, check_prediction_line, image_shape_problem
from rpent.recording import layout
from rpent.recording.jsonl import read_jsonl
from rpent.recording.outcome import label_exclusion, trajectory_outcome
from rpent.recording.reader import find_record_dirs, load_record

CHECKS = ("files", "task_json", "lines", "links", "observations", "success", "transcript", "states")
"""The check names used in findings (module docstring)."""

_MAX_PER_CHECK = 20


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def validate_record(record_dir: str | Path) -> dict:
    """Check one record (read-only).

    Returns:
        ``{"ok": bool, "summary": str, "problems": [{"check", "detail"}], "actions": n,
        "predictions": n, "status", "environment_success", "label", "label_source",
        "operator_verdict", "disagreement", "label_exclusion": {"reason", "detail"} | None,
        "run_record": str | None}`` (``run_record``: the run directory whose transcript and
        ``states.json`` were checked; ``label_exclusion``: why the label policy keeps the run out
        of every export, :func:`rpent.recording.outcome.label_exclusion`). ``ok`` is about the
        files being sound, not about the run's outcome. At most 20 problems per check are
        listed, then one line with the count of the rest.

    Raises:
        OSError: a file exists but cannot be read.
    """
    rd = Path(record_dir)
    problems: list[dict] = []
    counts: Counter = Counter()

    def add(check: str, detail: str) -> None:
        counts[check] += 1
        if counts[check] <= _MAX_PER_CHECK:
            problems.append({"check": check, "detail": detail})

    for name in layout.RECORD_FILES:
        if not (rd / name).is_file():
            add("files", f"{name} is missing")
    rec = load_record(rd)
    task = rec.task
    if task is None and rec.task_problem != "missing":
        add("task_json", f"task.json cannot be read: {rec.task_problem}")
    if task is not None:
        if task.get("schema_version") != layout.SCHEMA_VERSION:
            add("task_json", f"schema_version {task.get('schema_version')!r}, expected {layout.SCHEMA_VERSION}")
        if task.get("status") not in layout.FINAL_STATUSES:
            add("task_json", f"status {task.get('status')!r}: the run never closed its record (killed?)")
        if not isinstance(task.get("environment_success"), bool):
            add("task_json", f"environment_success is {task.get('environment_success')!r}, not true/false (unknown)")
    for p in rec.actions.problems:
        add("lines", p.detail)
    for p in rec.predictions.problems:
        add("lines", p.detail)
    planners = read_jsonl(rd / layout.PLANNERS_JSONL)
    for p in planners.problems:
        add("lines", p.detail)

    actions, preds = rec.actions.records, rec.predictions.records
    good_actions = []
    for i, a in enumerate(actions):
        problem = check_action_line(i, a, (task or {}).get("robot"))
        if problem:
            add("lines", f"actions.jsonl {problem}")
        else:
            good_actions.append(a)
    good_preds = []
    for i, p in enumerate(preds):
        problem = check_prediction_line(i, p)
        if problem:
            add("lines", f"predictions.jsonl {problem}")
        else:
            good_preds.append(p)

    # links
    pred_count = Counter(p["pred_id"] for p in good_preds)
    by_id = {p["pred_id"]: p for p in good_preds}
    for pid, n in pred_count.items():
        if n > 1:
            add("links", f"pred_id {pid} appears {n} times in predictions.jsonl")
    tool_calls = {x.get("call_id") for x in planners.records if x.get("kind") == "tool_call"}
    claims: Counter = Counter()
    for a in good_actions:
        if planners.exists and a["call_id"] not in tool_calls:
            add("links", f"action seq {a['seq']}: call_id {a['call_id']!r} has no tool_call line in planners.jsonl")
        if a["source"] != layout.SOURCE_VLA:
            if a["source"] not in layout.ACTION_SOURCES:
                add("lines", f"action seq {a['seq']}: unknown source {a['source']!r}")
            continue
        pid, idx = a.get("pred_id"), a.get("index_in_chunk")
        if pid is None or idx is None:
            add("links", f"action seq {a['seq']}: VLA action without pred_id/index_in_chunk")
            continue
        pred = by_id.get(pid)
        if pred is None:
            add("links", f"action seq {a['seq']}: pred_id {pid} is not in predictions.jsonl")
            continue
        claims[(pid, idx)] += 1
        if pred["call_id"] != a["call_id"]:
            add("links", f"action seq {a['seq']}: prediction {pid} belongs to call {pred['call_id']!r}, "
                         f"the action to {a['call_id']!r}")
        if not 0 <= idx < pred["n_executed"]:
            add("links", f"action seq {a['seq']}: row {idx} of {pid} is not listed as executed "
                         f"(n_executed {pred['n_executed']})")
        elif not np.array_equal(np.asarray(pred["actions"][idx], np.float32), np.asarray(a["action"], np.float32)):
            add("links", f"action seq {a['seq']}: differs from row {idx} of prediction {pid}")
        if not pred["instruction"].strip():
            add("links", f"action seq {a['seq']}: prediction {pid} has an empty instruction")
    for (pid, idx), n in claims.items():
        if n > 1:
            add("links", f"row {idx} of prediction {pid} is claimed by {n} actions")
    for p in good_preds:
        claimed = sum(1 for (pid, _), n in claims.items() if pid == p["pred_id"])
        if claimed != p["n_executed"]:
            add("links", f"prediction {p['pred_id']}: n_executed {p['n_executed']} but {claimed} action(s) claim it")

    # observations
    all_obs = ((task or {}).get("capture") or {}).get("observations") == layout.OBSERVATIONS_ALL
    shape = None  # every image of a record has the size of its first one
    for a in good_actions:
        for cam in layout.CAMERAS:
            ref = a["obs"].get(cam)
            if ref is None:
                if a["source"] == layout.SOURCE_VLA or all_obs:
                    add("observations", f"action seq {a['seq']}: no {cam} image")
                continue
            problem, seen = image_shape_problem(rd, ref, shape)
            shape = shape or (seen if problem is None else None)
            if problem:
                add("observations", f"action seq {a['seq']}: {problem}")

    # success evidence
    success = (task or {}).get("environment_success")
    first = next((a["seq"] for a in good_actions if a.get("terminated") is True), None)
    if success is True and first is None and good_actions:
        add("success", "environment_success is true but no action has terminated=true (success step unknown)")
    elif success is True and not good_actions:
        add("success", "environment_success is true but the record has no readable action (actions.jsonl emptied "
                       "or unreadable): nothing shows how the task was solved")
    if success is False and first is not None:
        add("success", f"environment_success is false but action seq {first} has terminated=true")

    # the run record (transcript, states.json) next to the trajectory record
    run_dir = runcheck.run_dir_of(rd)
    if run_dir is not None:
        for check, detail in runcheck.check_run_record(run_dir, task, good_actions):
            add(check, detail)

    for check, n in counts.items():
        if n > _MAX_PER_CHECK:
            problems.append({"check": check, "detail": f"... and {n - _MAX_PER_CHECK} more {check} problem(s)"})
    outcome = trajectory_outcome(rd, task)
    excluded = label_exclusion(outcome) if task is not None else None
    sources = Counter(a.get("source") for a in good_actions)
    summary = (f"{len(actions)} action(s) ({', '.join(f'{k} {v}' for k, v in sorted(sources.items())) or 'none'}), "
               f"{len(preds)} prediction(s), status {(task or {}).get('status')!r}, "
               f"environment_success {success!r}" + (f", first success at seq {first}" if first is not None else "")
               + f", label {outcome.label!r}" + (" (derived)" if outcome.label_source == "derived" else "")
               + (f", operator verdict {outcome.verdict!r}" if outcome.verdict else "")
               + (f", disagreement: {outcome.disagreement}" if outcome.disagreement else ""))
    return {
        "ok": not problems,
        "summary": summary,
        "problems": problems,
        "actions": len(actions),
        "predictions": len(preds),
        "status": (task or {}).get("status"),
        "environment_success": success,
        "label": outcome.label,
        "label_source": outcome.label_source,
        "operator_verdict": outcome.verdict,
        "disagreement": outcome.disagreement,
        "label_exclusion": None if excluded is None else {"reason": excluded[0], "detail": excluded[1]},
        "run_record": str(run_dir) if run_dir is not None else None,
    }


def validate_root(root: str | Path) -> dict:
    """Validate every record at or below ``root`` (read-only).

    Returns:
        ``{"root", "records": [{"record": relpath, **validate_record(...)}], "counts": {"records",
        "ok", "with_problems", "by_check": {check: records}}}``; a run directory without a
        trajectory record is one more entry (``record`` = the run's path; a ``files`` problem, or
        a ``transcript`` problem when it has no transcript either: the run never ended).

    Raises:
        FileNotFoundError: ``root`` does not exist or is not a directory.
    """
    root = Path(root).absolute()
    out = []
    dirs = find_record_dirs(root)
    for d in dirs:
        out.append({"record": _rel(d, root), **validate_record(d)})
    scan = runcheck.scan_run_dirs(root)
    bare = [(run, "run directory without a trajectory record", runcheck.unrecorded_run_problems(run))
            for run in runcheck.find_unrecorded_runs(root, dirs, scan)]
    bare += [(run, "run directory without a transcript or trajectory record", runcheck.unended_run_problems(run))
             for run in runcheck.find_unended_runs(root, dirs, scan)]
    for run, summary, found in bare:
        out.append({"record": _rel(run, root), "ok": False, "summary": summary,
                    "problems": [{"check": c, "detail": t} for c, t in found], "actions": 0, "predictions": 0,
                    "status": None, "environment_success": None, "label": None, "label_source": None,
                    "operator_verdict": None, "disagreement": None, "label_exclusion": None, "run_record": str(run)})
    out.sort(key=lambda r: r["record"])
    by_check: Counter = Counter()
    for r in out:
        by_check.update({p["check"] for p in r["problems"]})
    return {
        "root": str(root),
        "records": out,
        "counts": {
            "records": len(out),
            "ok": sum(1 for r in out if r["ok"]),
            "with_problems": sum(1 for r in out if not r["ok"]),
            "by_check": dict(sorted(by_check.items())),
        },
    }
