"""Turn one solved run into flash files (RPent reference §6.4 ``flash.generate``).

Inputs are the run's *audit* and *recipe*:

* audit: the run's ``transcript_<tag>.json`` (any planner: scripted, api, claude_code, codex),
  or a run directory holding exactly one. Its run must be labelled ``succeeded`` with
  ``environment_success: true`` (:func:`rpent.recording.outcome.label_exclusion`: a run the
  operator rejected, aborted or cancelled is refused, naming the reason); its messages give the
  order of the tool calls and the ``segment`` results (object estimates).
* recipe: the run's ``<tag>_recipe.jsonl`` (written only for such runs): the successful
  commands, one JSON object per line, ``{"action": tool, **args}``, and the successful
  ``segment`` calls, ``{"action": "segment", "prompt" | "point", "camera", "artifact"?}``, in
  (step, segment index) order (reference §6.1; :meth:`rpent.run.record.RunRecord.recipe_commands`).

With ``segment`` lines the recipe gives the order of the plan: each text-prompt segment becomes
an observation of its anchor (the prompt), its reference estimate read from the line's
``artifact`` in the recipe's run directory, else from the transcript's matching segment call.
Fixture parts (drawers, doors, knobs) that the run read with ``view_fixtures`` before its first
motion are anchors too (:func:`fixture_anchors`), bound only by waypoints with no segmented object
within the radius; while the gripper is closed on a part (a drawer pull), every farther waypoint
follows that part too. A plan keeps only the parts some waypoint is bound to.
A thing the run knew only by its ``back_project`` points (set aside from a push's way) is a point
anchor of the grasp that picks it when that grasp binds to nothing else (:mod:`rpent.flash.points`).
An object the gripper let go of after carrying it is retired: its looks show where it stood before
the grasp, so later waypoints (the retreat, a drawer pushed shut after the bottle went in) bind to
other anchors until a new look at it.
A waypoint binds to the nearest centre of the latest observations within the radius, else to
the nearest ``support`` point (the largest flat surface, where a look gave one: the scripted
planner sets a plate down on a stove's burner plate, 17 cm from the centre of the stove's mask;
the step then says ``"ref": "support"``). While the gripper is closed on a segmented
object (closed by ``set_gripper`` or by a motion's ``gripper`` argument), that object moves with the
hand: waypoints bind to it, through the observation it was grasped from, only where no other object
is near (the lift), and a look at it while carried binds nothing.
A look that found several instances of its prompt (``segment(all_instances=True)``: both black
bowls of a libero_spatial scene) stands for the instance the run went on to use, the one some
following waypoint comes nearest (XY, within the bind radius: the grasp or the place over it;
:func:`pick_instance`), not for the top-scored one; its ``locate`` step says ``"instances": n`` so
the replay looks at all of them too and keeps the one the instruction's qualifier designates in the
live scene, else the one nearest the recorded centre.
The plan's ``source`` names the audit and recipe, the run's label, predicate and verdict and the
short form of its provenance (:func:`rpent.recording.provenance.provenance_summary`);
``generated_by`` is the provenance of the ``rpent-flash generate`` invocation itself.
An older recipe without ``segment`` lines is still read: the transcript's successful segment
calls (after its last reset) are then interleaved with the recipe commands in call order, each
command matched in order to the transcript's non-error call of that tool.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from rpent.flash import points
from rpent.flash.builder import _ESTIMATE_KEYS, FIXTURE_CAMERA, HELD_LIFT_RADIUS_M, PlanBuilder  # noqa: F401 (re-exported)
from rpent.paths import file_blocker
from rpent.flash.files import ANCHORS_SCHEMA, PLAN_SCHEMA, anchors_path, cell_tag, plan_path, save_flash
from rpent.recording.outcome import EXCLUSION_TEXT, label_exclusion, outcome_from_doc
from rpent.recording.provenance import provenance_summary, run_provenance

POINTS_KIND = points.POINTS_KIND

__all__ = ["FlashGenerateError", "generate", "BIND_RADIUS_M", "FIXTURE_CAMERA", "fixture_anchors",
           "fixture_estimate", "read_audit",
           "read_recipe"]

#: A waypoint is stored relative to the nearest localised anchor within this XY distance (m);
#: farther waypoints (e.g. the first rise above the robot's start pose) stay absolute.
BIND_RADIUS_M = 0.15
#: Read-only tools: never part of a recipe.
_READONLY = {"view_env_state", "view_fixtures", "view_camera_meta", "back_project", "segment", "finish",
             "request_operator_verdict", "write_memory_draft"}


class FlashGenerateError(ValueError):
    """The audit or recipe cannot make a flash plan; the message names the file and the reason."""


def read_audit(path: str | Path) -> tuple[Path, dict]:
    """Load the audit (a ``transcript_*.json`` or a run directory with exactly one).

    Raises:
        FlashGenerateError: missing, ambiguous, not JSON, or without the run identity.
    """
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("transcript_*.json"))
        if len(found) != 1:
            raise FlashGenerateError(f"--audit {p}: expected one transcript_*.json in the run directory, found "
                                     f"{len(found)}; pass the file itself")
        p = found[0]
    if not p.is_file():
        raise FlashGenerateError(f"--audit {p} does not exist")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FlashGenerateError(f"--audit {p} is not a JSON document ({exc})") from None
    missing = [k for k in ("suite", "task", "seed", "messages") if k not in doc]
    if not isinstance(doc, dict) or missing:
        raise FlashGenerateError(f"--audit {p} lacks {', '.join(missing)}; pass a run's transcript_<tag>.json")
    return p, doc


def read_recipe(path: str | Path) -> list[dict]:
    """Load a recipe (JSON lines with an ``action`` each).

    Raises:
        FlashGenerateError: missing, empty, or a line that is not a command object.
    """
    p = Path(path)
    if not p.is_file():
        raise FlashGenerateError(f"--recipe {p} does not exist (a recipe is written only for solved runs)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FlashGenerateError(f"--recipe {p} is not UTF-8 text ({exc.reason} at byte {exc.start}); pass the "
                                 "run's <tag>_recipe.jsonl") from None
    except OSError as exc:
        raise FlashGenerateError(f"--recipe {p} cannot be read ({exc.strerror or exc})") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FlashGenerateError(f"--recipe {p} line {n} is not JSON ({exc})") from None
        if not isinstance(cmd, dict) or not isinstance(cmd.get("action"), str):
            raise FlashGenerateError(f"--recipe {p} line {n} has no \"action\"")
        out.append(cmd)
    if not out:
        raise FlashGenerateError(f"--recipe {p} is empty")
    return out


def _calls(messages: list[dict]) -> list[dict]:
    """Tool calls of a transcript in order: ``{"name", "input", "result" (dict|None), "error" (bool)}``."""
    results: dict[str, dict] = {}
    for m in messages:
        if m.get("role") == "tool" and m.get("tool_call_id"):
            results[m["tool_call_id"]] = m
    calls = []
    for m in messages:
        if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for block in m["content"]:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            res = results.get(block.get("id"))
            content = res.get("content") if res else None
            if isinstance(content, str):
                try:
                    content = json.loads(content)
                except json.JSONDecodeError:
                    content = {"text": content}
            error = res is None or bool(res.get("is_error")) or (isinstance(content, dict) and "error" in content)
            calls.append({"name": block.get("name"), "input": block.get("input") or {},
                          "result": content if isinstance(content, dict) else None, "error": error})
    return calls


def _same_command(cmd: dict, call: dict) -> bool:
    """A recipe command and a transcript call agree on the tool and on the given arguments."""
    if cmd["action"] != call["name"]:
        return False
    for k, v in call["input"].items():
        if k in cmd and isinstance(v, (int, float)) and isinstance(cmd[k], (int, float)):
            if abs(float(v) - float(cmd[k])) > 1e-6:
                return False
        elif k in cmd and isinstance(v, list) and isinstance(cmd[k], list):
            if len(v) != len(cmd[k]) or any(abs(float(a) - float(b)) > 1e-6 for a, b in zip(v, cmd[k])):
                return False
    return True


#: An unbound waypoint farther than this (m, XY, world frame) from the segment between its two
#: anchored neighbours is replayed as recorded instead of interpolated. The scripted planner's
#: transport midpoints lie on the segment (< 1 mm); 5 cm leaves room for an LLM's hand-picked ones.
INTERP_MAX_OFF_M = 0.05


def _interpolate_free_waypoints(steps: list[dict]) -> None:
    """Mark unbound waypoints lying between two anchored ones (e.g. the intermediate points of a
    long transport) as ``"interp": [prev step, next step, t]`` so they follow both anchors:
    ``xy = (1 - t) * xy_prev + t * xy_next`` of the rebuilt neighbours (t from the recorded XY).
    A waypoint farther than :data:`INTERP_MAX_OFF_M` (XY) from the recorded segment between the
    two is not on the way from one to the other (libero_goal task 3: the bowl set aside on a free
    spot 14 cm off the line before the drawer is opened) and is replayed as recorded."""
    xyz_steps = [i for i, s in enumerate(steps) if s["op"] == "tool" and isinstance(s["args"].get("xyz"), list)]
    for n, i in enumerate(xyz_steps):
        if steps[i]["anchor"] is not None:
            continue
        located = {s["anchor"] for s in steps[:i] if s["op"] == "locate"}
        prev = next((j for j in reversed(xyz_steps[:n]) if steps[j]["anchor"] is not None), None)
        # the next anchored waypoint, if its anchor is located before this step (the replay
        # cannot rebuild a waypoint of an object it has not looked at yet)
        nxt = next((j for j in xyz_steps[n + 1:] if steps[j]["anchor"] is not None), None)
        if nxt is not None and steps[nxt]["anchor"] not in located:
            nxt = None
        if prev is None or nxt is None:
            continue
        a, b, p = (steps[k]["args"]["xyz"] for k in (prev, nxt, i))
        dx, dy = b[0] - a[0], b[1] - a[1]
        norm = dx * dx + dy * dy
        if norm < 1e-8:
            continue
        t = min(1.0, max(0.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / norm))
        off = math.hypot(p[0] - (a[0] + t * dx), p[1] - (a[1] + t * dy))
        if off > INTERP_MAX_OFF_M:
            continue
        steps[i]["interp"] = [prev, nxt, round(t, 5)]


def pick_instance(res: dict, later: list[dict], bind_radius_m: float) -> tuple[dict, str | None, int]:
    """The instance of a ``segment`` result that the run used: ``(object_estimate, object, n)``.

    With one instance (or no ``instances`` list) that is the result's own estimate, ``n`` 1. With
    ``n`` > 1 instances it is the instance whose estimate centre comes nearest (XY, m, world frame)
    to any ``xyz`` waypoint of ``later`` (the recipe commands after the look) within
    ``bind_radius_m``: a grasp goes down over the centre of the object it picks, a place over the
    centre of its target, while a carry passing an unused instance rarely crosses its centre.
    No waypoint within the radius: the result's own (top) estimate.
    """
    insts = [i for i in (res.get("instances") or []) if isinstance(i, dict) and i.get("object_estimate")]
    if len(insts) < 2:
        return res["object_estimate"], res.get("object"), 1
    best, best_d = None, bind_radius_m
    for cmd in later:
        xyz = cmd.get("xyz")
        if not (isinstance(xyz, list) and len(xyz) == 3):
            continue
        for inst in insts:
            c = inst["object_estimate"]["center"]
            d = math.hypot(xyz[0] - c[0], xyz[1] - c[1])
            if d <= best_d:
                best, best_d = inst, d
    if best is None:
        return res["object_estimate"], res.get("object"), len(insts)
    return best["object_estimate"], best.get("object"), len(insts)


def fixture_estimate(view: dict, fixture: str, part: str) -> dict | None:
    """The estimate of one fixture part in a ``view_fixtures`` result: ``center`` (m, world
    frame) is the part's ``handle``, else for a hinge its ``pos`` (the part's origin, on the hinge
    axis: a microwave door without a handle, whose box centre moves with the door's angle, 3 cm
    between two init states of libero_10_swap t9), else the centre of its box (``min``/``max``);
    the other estimate keys are None (no footprint, no yaw). None when the part is absent or has
    none of them."""
    parts = (view.get("fixtures") or {}).get(fixture)
    hit = next((x for x in parts if isinstance(x, dict) and x.get("part") == part), None) \
        if isinstance(parts, list) else None
    if hit is None:
        return None
    c = hit.get("handle")
    if not (isinstance(c, list) and len(c) == 3) and hit.get("type") == "hinge":
        c = hit.get("pos")  # on the hinge axis: the box of a door swings with the door's angle
    if not (isinstance(c, list) and len(c) == 3):
        lo, hi = hit.get("min"), hit.get("max")
        if not (isinstance(lo, list) and isinstance(hi, list) and len(lo) == len(hi) == 3):
            return None
        c = [(float(a) + float(b)) / 2.0 for a, b in zip(lo, hi)]
    est: dict = {k: None for k in _ESTIMATE_KEYS}
    est.update(center=[round(float(v), 5) for v in c], source="view_fixtures")
    return est


def fixture_anchors(calls: list[dict]) -> list[dict]:
    """Anchors of the fixture parts (drawers, doors, knobs, buttons) that the run read with
    ``view_fixtures`` before its first motion: one anchor per part, ``id`` ``f<n>``, ``prompt``
    ``<fixture>/<part>``, one observation on the pseudo-camera :data:`FIXTURE_CAMERA` whose
    estimate centre is the part's ``handle`` (m, world frame), else the centre of its box
    (``min``/``max``). The scripted planner reads drawers and knobs this way, not with
    ``segment``; the replay re-reads them with ``view_fixtures`` (simulator state). Empty when the
    run read no fixtures before moving."""
    out: list[dict] = []
    for call in calls:
        if call["name"] not in _READONLY and not call["error"]:
            break  # the first motion: later reads see parts the run itself moved
        if call["name"] != "view_fixtures" or call["error"] or not isinstance(call["result"], dict):
            continue
        for fixture, parts in sorted((call["result"].get("fixtures") or {}).items()):
            for part in parts if isinstance(parts, list) else []:
                est = fixture_estimate(call["result"], fixture, part.get("part"))
                if est is None:
                    continue
                out.append({"id": f"f{len(out)}", "prompt": f"{fixture}/{part.get('part')}", "object": fixture,
                            "kind": "fixture_part", "part": part.get("part"),
                            "observations": [{"camera": FIXTURE_CAMERA, "estimate": est}]})
        break
    return out


def _align(calls: list[dict], tools: list[dict]) -> tuple[list[dict | None], dict[int, list[tuple[dict, dict]]]]:
    """The recipe's tool lines ``tools`` (in order) matched in order to the transcript's successful
    calls, as :func:`_from_transcript` matches them.

    Returns:
        ``(results, looks)``: the source run's answer to each of ``tools`` (None where no call
        matches), and its successful ``back_project`` calls that returned points, keyed by how
        many of ``tools`` came before each (:mod:`rpent.flash.points`).
    """
    results: list[dict | None] = [None] * len(tools)
    looks: dict[int, list[tuple[dict, dict]]] = {}
    ci = 0
    for c in calls:
        if c["name"] == "back_project":
            if not c["error"] and isinstance(c["result"], dict) and c["result"].get("points"):
                looks.setdefault(ci, []).append((c["input"], c["result"]))
            continue
        if not c["error"] and ci < len(tools) and _same_command(tools[ci], c):
            results[ci] = c["result"]
            ci += 1
    return results, looks


def _from_segment_recipe(builder: PlanBuilder, commands: list[dict], calls: list[dict], run_dir: Path,
                         recipe, audit_path: Path) -> None:
    """A recipe that lists its ``segment`` calls (reference §6.1; written by
    :meth:`rpent.run.record.RunRecord.recipe_commands`): the recipe gives the order of
    everything; each segment's result (the reference observation) is read from the line's
    ``artifact`` in the recipe's run directory, else from the transcript's next successful
    ``segment`` call with the same prompt and camera. Point-prompt segments are kept out of the
    plan (a pixel of the source scene names nothing in another scene)."""
    seg_calls = [c for c in calls if c["name"] == "segment" and not c["error"]]
    tools = [c for c in commands if c["action"] not in _READONLY]
    results, looks = _align(calls, tools)  # the source's answers; back_project point clouds
    used, ti = 0, 0
    for n, cmd in enumerate(commands, 1):
        if cmd["action"] != "segment":
            if cmd["action"] not in _READONLY:
                for args, res in looks.get(ti, []):
                    points.observe(builder, args, res, [c for c in commands[n - 1:] if c["action"] not in _READONLY])
                builder.tool(cmd, results[ti])
                ti += 1
            continue
        prompt, camera = cmd.get("prompt"), cmd.get("camera") or "agentview"
        if not isinstance(prompt, str) or not prompt:
            continue  # a point prompt: nothing to re-localise in another scene
        res = None
        if isinstance(cmd.get("artifact"), str):
            path = run_dir / cmd["artifact"]
            try:
                res = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                res = None
        if res is None:
            j = next((k for k in range(used, len(seg_calls))
                      if seg_calls[k]["input"].get("prompt") == prompt
                      and (seg_calls[k]["input"].get("camera") or "agentview") == camera), None)
            if j is None:
                raise FlashGenerateError(f"--recipe {recipe} line {n} (segment {prompt!r} on "
                                         f"{camera}) has neither its artifact nor a matching segment call in the "
                                         f"audit {audit_path}; pass the recipe of the same run, in its run directory")
            used = j + 1
            res = seg_calls[j]["result"] or {}
        if not res.get("found") or not res.get("object_estimate"):
            continue
        est, obj, k = pick_instance(res, commands[n:], builder.bind_radius_m)
        builder.locate(prompt, camera, est, obj, k)


def _from_transcript(builder: PlanBuilder, commands: list[dict], calls: list[dict], recipe, audit_path) -> None:
    """An older recipe without ``segment`` lines: the transcript's successful segment calls are
    interleaved with the recipe commands in call order (each command matched in order to the
    transcript's non-error call of that tool)."""
    ci = 0  # next recipe command to match
    for call in calls:
        if call["name"] == "back_project" and not call["error"]:
            points.observe(builder, call["input"], call["result"], commands[ci:])
            continue
        if call["name"] == "segment":
            res = call["result"] or {}
            prompt = call["input"].get("prompt")
            if call["error"] or not res.get("found") or not res.get("object_estimate") or not prompt:
                continue
            camera = call["input"].get("camera") or res.get("camera") or "agentview"
            builder.locate(prompt, camera, res["object_estimate"], res.get("object"))
            continue
        if call["error"] or call["name"] in _READONLY or ci >= len(commands):
            continue
        cmd = commands[ci]
        if not _same_command(cmd, call):
            continue  # a call the recipe left out (e.g. before a reset)
        ci += 1
        builder.tool(cmd, call["result"])
    if ci < len(commands):
        raise FlashGenerateError(f"--recipe {recipe}: command {ci + 1} ({commands[ci]['action']}) has no matching "
                                 f"successful call in the audit {audit_path}; pass the recipe of the same run")


def generate(audit: str | Path, recipe: str | Path, destination: str | Path,
             bind_radius_m: float = BIND_RADIUS_M, replace: bool = False,
             argv: list[str] | None = None) -> tuple[Path, Path]:
    """Write ``<cell>_plan.json`` and ``<cell>_anchors.json`` for the audited run into ``destination``.

    Args:
        audit: transcript file or run directory (see module docstring).
        recipe: the run's recipe file.
        destination: output directory (created).
        bind_radius_m: see :data:`BIND_RADIUS_M`.
        replace: overwrite the cell's existing plan and anchors in ``destination`` (else refused).
        argv: the command line recorded in the plan's ``generated_by`` provenance (default ``sys.argv``).
    Returns:
        (plan path, anchors path).
    Raises:
        FlashGenerateError: the run is not labelled succeeded (the operator rejected or aborted it,
            it was cancelled or ended in an error: the reason is named) or its predicate did not
            hold, it localised nothing, audit and recipe
            disagree (the message says which command could not be matched), or ``destination``
            already holds a plan of the cell and ``replace`` is false.
        OSError: the destination cannot be written.
    """
    blocker = file_blocker(destination)
    if blocker is not None:
        raise FlashGenerateError(f"--destination {destination}: {blocker} is a file, not a directory; "
                                 "choose a directory for the flash files")
    audit_path, doc = read_audit(audit)
    outcome = outcome_from_doc(doc, str(audit_path))
    excluded = label_exclusion(outcome)
    if excluded is not None and excluded[0] != "not_successful":  # that one: the predicate check below says it
        reason, detail = excluded
        raise FlashGenerateError(f"--audit {audit_path}: refused ({reason}): {EXCLUSION_TEXT[reason]}; {detail}. "
                                 "Flash plans come only from runs labelled succeeded whose environment predicate held")
    if doc.get("environment_success") is not True:
        raise FlashGenerateError(f"--audit {audit_path}: the run was not solved (environment_success="
                                 f"{doc.get('environment_success')!r}); flash plans come only from solved runs")
    commands = read_recipe(recipe)
    suite, task, seed = str(doc["suite"]), int(doc["task"]), int(doc["seed"])
    cell = cell_tag(suite, task, seed)
    m = re.match(r"^(.+)_recipe\.jsonl$", Path(recipe).name)
    if m and m.group(1) != cell:
        raise FlashGenerateError(f"--recipe {recipe} is the recipe of {m.group(1)}, but the audit {audit_path} is "
                                 f"the run of {cell}; pass the recipe of the same run")
    existing = [q for q in (plan_path(destination, cell), anchors_path(destination, cell)) if q.exists()]
    if existing and not replace:
        raise FlashGenerateError(f"--destination {destination} already holds the flash plan of {cell} ({existing[0]}); "
                                 "pass --replace to overwrite it, or choose another --destination")
    calls = _calls(doc["messages"])
    resets = [i for i, c in enumerate(calls) if c["name"] in ("reset", "request_scene_reset") and not c["error"]]
    if resets:
        calls = calls[resets[-1] + 1:]  # the recipe covers only the attempt after the last reset
    builder = PlanBuilder(bind_radius_m, fixture_anchors(calls))
    if any(c["action"] == "segment" for c in commands):
        _from_segment_recipe(builder, commands, calls, Path(recipe).parent, recipe, audit_path)
    else:
        _from_transcript(builder, commands, calls, recipe, audit_path)
    builder.finish()
    anchors, steps = builder.anchors, builder.steps
    _interpolate_free_waypoints(steps)
    if not anchors:
        raise FlashGenerateError(f"--audit {audit_path}: the run localised no object with segment and read no "
                                 "fixture part near its waypoints, so the plan would have nothing to re-localise")
    ident = {"cell": cell, "suite": suite, "task": task, "seed": seed, "task_language": doc.get("task_language")}
    plan = {"schema": PLAN_SCHEMA, **ident,
            "source": {"audit": str(audit_path), "recipe": str(recipe), "planner": doc.get("planner"),
                       "model": doc.get("model"), "env_steps": doc.get("env_steps"), "label": outcome.label,
                       "label_source": outcome.label_source, "environment_success": outcome.environment_success,
                       "operator_verdict": outcome.verdict, "provenance": provenance_summary(doc.get("provenance"))},
            "generated_by": run_provenance(argv=argv, config={"audit": str(audit_path), "recipe": str(recipe),
                                                              "destination": str(destination)}),
            "bind_radius_m": bind_radius_m, "steps": steps}
    return save_flash(destination, cell, plan, {"schema": ANCHORS_SCHEMA, **ident, "anchors": anchors})
