"""Flash files: ``<cell>_plan.json`` and ``<cell>_anchors.json`` (RPent reference §6.4).

A flash plan is one solved run turned into a replayable tool sequence. Its *anchors* are the
objects the run localised with ``segment`` (one anchor per prompt); its *steps* are the run's
successful commands in order, where every waypoint near an anchor is stored as an XY offset
from that anchor (z stays absolute, world frame, metres) so the plan can be replayed on any
seed of the same task after re-localising the anchors.

``<cell>`` is the source run's recipe tag (reference §6.1): the suite without its ``libero_``
prefix, ``_t<task>_s<seed>`` (e.g. ``object_t0_s0``). A replay on seed N of the task looks for
the plan of seed 0 first, then any other seed of the same task (:func:`find_plan`).

``<cell>_anchors.json``::

    {"schema": "rpent.flash.anchors/1", "cell", "suite", "task", "seed", "task_language",
     "anchors": [{"id": "a0", "prompt": "alphabet soup", "object": "alphabet_soup_1" | null,
                  "observations": [{"camera": "agentview", "estimate": {center [x,y,z] (m),
                                    top_z, bottom_z (m), major_yaw (rad), major_extent,
                                    minor_extent (m), ridge_yaw (rad) | null, support [x,y,z]
                                    (m, optional: the largest flat surface)}}, ...]},
                 {"id": "f1", "prompt": "wooden_cabinet_1/cabinet_middle", "object": "wooden_cabinet_1",
                  "kind": "fixture_part", "part": "cabinet_middle",
                  "observations": [{"camera": "view_fixtures", "estimate": {center (m): the part's
                                    handle or box centre; the other keys null}}]}]}

A ``fixture_part`` anchor is a fixture part the source run read with ``view_fixtures`` before it
moved (:func:`rpent.flash.generate.fixture_anchors`); the replay re-reads it with ``view_fixtures``.
A ``"kind": "points"`` anchor (``prompt`` null) is a thing the source run knew only by its
``back_project`` points (:mod:`rpent.flash.points`); each observation keeps the look's arguments as
``"back_project"`` and the replay repeats that call.

``<cell>_plan.json``::

    {"schema": "rpent.flash.plan/1", "cell", "suite", "task", "seed", "task_language",
     "source": {"audit", "recipe", "planner", "model", "env_steps", "label", "label_source",
                "environment_success", "operator_verdict", "provenance"},
     "generated_by": {...provenance of the rpent-flash generate invocation...},
     "steps": [{"op": "locate", "anchor": "a0", "camera": "agentview", "observation": 0},
               {"op": "tool", "tool": "move_to", "args": {...}, "anchor": "a0" | null,
                "observation": k | null, "offset_xy": [dx, dy] (m) | null,
                "ref": "support" (optional), "interp": [prev_step, next_step, t] (optional),
                "source_stop_z": z (m, optional: where the source run's motion stopped short of its
                target, the eef's final height)}, ...]}

``op: locate`` re-localises an anchor (``segment`` with the anchor's prompt on that camera;
with ``"instances": n`` > 1, the source look found n instances and the observation is the one the
run used: the replay asks for all instances and keeps the one the instruction's spatial qualifier
designates in the live scene, else the one nearest the recorded centre).
In an ``op: tool`` step bound to an anchor, ``args["xyz"]`` is rebuilt as
``live_center_xy + offset_xy`` with the stored absolute z (``"ref": "support"``: the offset is
from the observation's ``support`` point, the object's largest flat surface, e.g. where a plate
goes down on a stove; a live look without one uses the recorded support's offset from the centre), and a stored ``target_yaw`` is
turned by the change of the anchor's grasp axis (only for elongated footprints, the rule of
:func:`rpent.robots.libero.strategy.plan_grasp`). An unbound waypoint between two anchored
ones (``interp``) is placed at fraction ``t`` of the way between their rebuilt XY positions.

A plan is accepted only from a run labelled ``succeeded``: :func:`load_flash` refuses a plan whose
``source.label`` says otherwise (``flash_plan_rejected``; plans written before labels were
recorded have none and were generated from runs whose predicate held).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from rpent.recording.atomic import write_bytes_atomic
from rpent.toolkit.registry import ToolArgumentError

__all__ = ["PLAN_SCHEMA", "ANCHORS_SCHEMA", "FlashFileError", "plan_path", "anchors_path", "find_plan",
           "load_flash", "save_flash", "cell_tag", "task_prefix"]

PLAN_SCHEMA = "rpent.flash.plan/1"
ANCHORS_SCHEMA = "rpent.flash.anchors/1"


class FlashFileError(ValueError):
    """A flash file is missing, unreadable or inconsistent; the message names the file and the fix.

    Attributes:
        code: ``flash_plan_missing`` | ``flash_plan_invalid`` | ``flash_anchors_missing``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def task_prefix(suite: str, task: int) -> str:
    """``<suite without libero_>_t<task>`` (e.g. ``object_t0``)."""
    return f"{suite.removeprefix('libero_')}_t{int(task)}"


def cell_tag(suite: str, task: int, seed: int) -> str:
    """The recipe tag of a cell, ``<suite without libero_>_t<task>_s<seed>`` (reference §6.1)."""
    return f"{task_prefix(suite, task)}_s{int(seed)}"


def plan_path(directory: str | Path, cell: str) -> Path:
    """``DIR/<cell>_plan.json``."""
    return Path(directory) / f"{cell}_plan.json"


def anchors_path(directory: str | Path, cell: str) -> Path:
    """``DIR/<cell>_anchors.json``."""
    return Path(directory) / f"{cell}_anchors.json"


def find_plan(directory: str | Path, suite: str, task: int) -> str:
    """The cell whose plan replays ``(suite, task)``: seed 0's if present, else the lowest seed.

    Raises:
        FlashFileError: (``flash_plan_missing``) the directory or every plan of the task is missing.
    """
    d = Path(directory)
    prefix = task_prefix(suite, task)
    if d.exists() and not d.is_dir():
        raise FlashFileError("flash_plan_missing", f"flash directory {d} is a file; pass the directory that holds "
                                                   "<cell>_plan.json")
    if not d.is_dir():
        raise FlashFileError("flash_plan_missing", f"flash directory {d} does not exist; generate a plan with "
                                                   f"`rpent-flash generate --audit A --recipe R --destination {d}`")
    if plan_path(d, f"{prefix}_s0").is_file():
        return f"{prefix}_s0"
    pat = re.compile(rf"^{re.escape(prefix)}_s(\d+)_plan\.json$")
    seeds = sorted(int(m.group(1)) for p in d.iterdir() if (m := pat.match(p.name)))
    if not seeds:
        raise FlashFileError("flash_plan_missing", f"no flash plan for {suite} task {task} in {d} (looked for "
                                                   f"{prefix}_s<seed>_plan.json); generate one with `rpent-flash "
                                                   f"generate --audit A --recipe R --destination {d}`")
    return f"{prefix}_s{seeds[0]}"


def _read(path: Path, code: str, schema: str) -> dict:
    if not path.is_file():
        raise FlashFileError(code, f"{path} does not exist; regenerate the flash files with `rpent-flash generate`")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FlashFileError("flash_plan_invalid", f"{path} is not readable JSON ({exc}); regenerate it") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise FlashFileError("flash_plan_invalid", f"{path} is not a {schema} file (schema "
                                                   f"{doc.get('schema') if isinstance(doc, dict) else None!r})")
    return doc


def load_flash(directory: str | Path, cell: str) -> tuple[dict, dict]:
    """Read and cross-check ``(plan, anchors)`` of ``cell``.

    Raises:
        FlashFileError: a file is missing (``flash_plan_missing`` / ``flash_anchors_missing``),
            the plan comes from a run not labelled succeeded (``flash_plan_rejected``),
            not JSON, of another schema, made for another cell (its ``cell`` field: a renamed or
            copied file), a step is not an object, names an anchor/observation the anchors
            file lacks, or calls a tool the LIBERO toolkit does not have or with arguments its
            schema refuses (``flash_plan_invalid``).
    """
    plan = _read(plan_path(directory, cell), "flash_plan_missing", PLAN_SCHEMA)
    label = (plan.get("source") or {}).get("label") if isinstance(plan.get("source"), dict) else None
    if label is not None and label != "succeeded":
        raise FlashFileError("flash_plan_rejected", f"{plan_path(directory, cell)} comes from a run labelled "
                                                    f"{label!r}; plans are replayed only from runs labelled succeeded: "
                                                    "regenerate it from a succeeded run with `rpent-flash generate`")
    anchors = _read(anchors_path(directory, cell), "flash_anchors_missing", ANCHORS_SCHEMA)
    for path, doc in ((plan_path(directory, cell), plan), (anchors_path(directory, cell), anchors)):
        made_for = doc.get("cell")
        if made_for is not None and made_for != cell:
            raise FlashFileError("flash_plan_invalid", f"{path} was made for {made_for} ({doc.get('suite')} task "
                                                       f"{doc.get('task')}), not {cell}: a renamed or copied file; "
                                                       f"replay the task it was made for, or generate one for {cell} "
                                                       "with `rpent-flash generate`")
    by_id = {a.get("id"): a for a in anchors.get("anchors", [])}
    steps = plan.get("steps")
    if not isinstance(steps, list) or not steps:
        raise FlashFileError("flash_plan_invalid", f"{plan_path(directory, cell)} has no steps")
    tools = _motion_tools()
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} is a {type(s).__name__}, not a JSON "
                                                       "object; regenerate the plan with `rpent-flash generate`")
        op = s.get("op")
        if op not in ("locate", "tool"):
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} has unknown op {op!r}")
        aid = s.get("anchor")
        if aid is not None and aid not in by_id:
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} names anchor {aid!r}, which "
                                                       f"{anchors_path(directory, cell).name} does not define")
        if op == "locate" and aid is None:
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} is a locate step that names no anchor")
        obs = s.get("observation")
        if aid is not None and (isinstance(obs, bool) or not isinstance(obs, int)
                                or not 0 <= obs < len(by_id[aid].get("observations", []))):
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} names observation {obs!r} of anchor "
                                                       f"{aid!r}, which is missing (an index into its observations)")
        interp = s.get("interp")
        if interp is not None and not (isinstance(interp, list) and len(interp) == 3
                                       and all(0 <= int(j) < len(steps) and steps[int(j)].get("anchor")
                                               for j in interp[:2])):
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} has a bad interp {interp!r}")
        if op == "tool":
            name, args = s.get("tool"), s.get("args")
            if not isinstance(name, str):
                raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} has no tool name")
            if name not in tools:
                raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} calls {name!r}, which is not a motion "
                                                           f"tool of the LIBERO toolkit ({', '.join(sorted(tools))})")
            if not isinstance(args, dict):
                raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} ({name}) has args {args!r}; a JSON "
                                                           "object of the tool's parameters is needed")
            try:
                tools[name].validate(args)
            except ToolArgumentError as exc:
                raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} ({name}): {exc}") from None
        stop = s.get("source_stop_z")
        if stop is not None and (isinstance(stop, bool) or not isinstance(stop, (int, float))
                                 or not math.isfinite(stop)):
            raise FlashFileError("flash_plan_invalid", f"step {i} of {cell} has a bad source_stop_z {stop!r} "
                                                       "(a height in m)")
    return plan, anchors


def _motion_tools() -> dict:
    """The LIBERO toolkit's tools a plan step may call (the non-readonly ones), by name, each with
    its argument validation (:class:`rpent.toolkit.registry.BoundTool`), from the class's
    ``@tool`` declarations (:meth:`rpent.toolkit.base.Toolkit.declared_tools`) without starting
    anything."""
    from rpent.robots.libero.toolkit import LiberoToolkit

    return {bound.spec.name: bound for _, bound in LiberoToolkit.declared_tools() if not bound.spec.readonly}


def _dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode("utf-8")


def save_flash(directory: str | Path, cell: str, plan: dict, anchors: dict) -> tuple[Path, Path]:
    """Write both files atomically (anchors first, so a plan never points at a missing file).

    Raises:
        OSError: the directory cannot be created or written.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    a, p = anchors_path(d, cell), plan_path(d, cell)
    write_bytes_atomic(a, _dump(anchors))
    write_bytes_atomic(p, _dump(plan))
    return p, a
