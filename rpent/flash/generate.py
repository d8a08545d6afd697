"""Turn one solved run into flash files (RPent reference §6.4 ``flash.generate``).

Inputs are the run's *audit* and *recipe*:

* audit: the run's ``transcript_<tag>.json`` (any planner: scripted, api, claude_code, codex),
  or a run directory holding exactly one. It must say ``environment_success: true``; its
  messages give the order of the tool calls and the ``segment`` results (object estimates).
* recipe: the run's ``<tag>_recipe.jsonl`` (written only for solved runs): the successful
  commands, one JSON object per line, ``{"action": tool, **args}``; optional
  ``{"action": "segment", "prompt", "camera"}`` lines are accepted too.

The transcript's successful ``segment`` calls become anchor observations; each recipe command
becomes a plan step, matched in order to the transcript's non-error call of that tool.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rpent.flash.files import ANCHORS_SCHEMA, PLAN_SCHEMA, cell_tag, save_flash

__all__ = ["FlashGenerateError", "generate", "BIND_RADIUS_M", "read_audit", "read_recipe"]

#: A waypoint is stored relative to the nearest localised anchor within this XY distance (m);
#: farther waypoints (e.g. the first rise above the robot's start pose) stay absolute.
BIND_RADIUS_M = 0.15
#: Estimate keys kept in the anchors file (the ``object_estimate`` of a ``segment`` result).
_ESTIMATE_KEYS = ("center", "top_z", "bottom_z", "major_yaw", "major_extent", "minor_extent", "ridge_yaw")
#: Read-only tools: never part of a recipe.
_READONLY = {"view_env_state", "view_camera_meta", "back_project", "segment", "finish",
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
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
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


def _interpolate_free_waypoints(steps: list[dict]) -> None:
    """Mark unbound waypoints lying between two anchored ones (e.g. the intermediate points of a
    long transport) as ``"interp": [prev step, next step, t]`` so they follow both anchors:
    ``xy = (1 - t) * xy_prev + t * xy_next`` of the rebuilt neighbours (t from the recorded XY)."""
    xyz_steps = [i for i, s in enumerate(steps) if s["op"] == "tool" and isinstance(s["args"].get("xyz"), list)]
    for n, i in enumerate(xyz_steps):
        if steps[i]["anchor"] is not None:
            continue
        prev = next((j for j in reversed(xyz_steps[:n]) if steps[j]["anchor"] is not None), None)
        nxt = next((j for j in xyz_steps[n + 1:] if steps[j]["anchor"] is not None), None)
        if prev is None or nxt is None:
            continue
        a, b, p = (steps[k]["args"]["xyz"] for k in (prev, nxt, i))
        dx, dy = b[0] - a[0], b[1] - a[1]
        norm = dx * dx + dy * dy
        if norm < 1e-8:
            continue
        t = min(1.0, max(0.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / norm))
        steps[i]["interp"] = [prev, nxt, round(t, 5)]


def generate(audit: str | Path, recipe: str | Path, destination: str | Path,
             bind_radius_m: float = BIND_RADIUS_M) -> tuple[Path, Path]:
    """Write ``<cell>_plan.json`` and ``<cell>_anchors.json`` for the audited run into ``destination``.

    Args:
        audit: transcript file or run directory (see module docstring).
        recipe: the run's recipe file.
        destination: output directory (created).
        bind_radius_m: see :data:`BIND_RADIUS_M`.
    Returns:
        (plan path, anchors path).
    Raises:
        FlashGenerateError: the run was not solved, localised nothing, or audit and recipe
            disagree (the message says which command could not be matched).
        OSError: the destination cannot be written.
    """
    audit_path, doc = read_audit(audit)
    if doc.get("environment_success") is not True:
        raise FlashGenerateError(f"--audit {audit_path}: the run was not solved (environment_success="
                                 f"{doc.get('environment_success')!r}); flash plans come only from solved runs")
    commands = read_recipe(recipe)
    calls = _calls(doc["messages"])
    resets = [i for i, c in enumerate(calls) if c["name"] in ("reset", "request_scene_reset") and not c["error"]]
    if resets:
        calls = calls[resets[-1] + 1:]  # the recipe covers only the attempt after the last reset
    anchors: list[dict] = []
    by_prompt: dict[str, dict] = {}
    steps: list[dict] = []
    ci = 0  # next recipe command to match
    current_anchor: str | None = None
    for call in calls:
        if ci < len(commands) and commands[ci]["action"] == "segment" and call["name"] == "segment" \
                and not call["error"]:
            ci += 1  # an upstream-style recipe lists the segment calls too
        if call["name"] == "segment":
            res = call["result"] or {}
            prompt = call["input"].get("prompt")
            if call["error"] or not res.get("found") or not res.get("object_estimate") or not prompt:
                continue
            est = {k: res["object_estimate"].get(k) for k in _ESTIMATE_KEYS}
            camera = call["input"].get("camera") or res.get("camera") or "agentview"
            anchor = by_prompt.get(prompt)
            if anchor is None:
                anchor = {"id": f"a{len(anchors)}", "prompt": prompt, "object": res.get("object"),
                          "observations": []}
                anchors.append(anchor)
                by_prompt[prompt] = anchor
            anchor["observations"].append({"camera": camera, "estimate": est})
            steps.append({"op": "locate", "anchor": anchor["id"], "camera": camera,
                          "observation": len(anchor["observations"]) - 1})
            continue
        if call["error"] or call["name"] in _READONLY or ci >= len(commands):
            continue
        cmd = commands[ci]
        if not _same_command(cmd, call):
            continue  # a call the recipe left out (e.g. before a reset)
        ci += 1
        args = {k: v for k, v in cmd.items() if k != "action"}
        step: dict[str, Any] = {"op": "tool", "tool": cmd["action"], "args": args, "anchor": None,
                                "observation": None, "offset_xy": None}
        if isinstance(args.get("xyz"), list) and len(args["xyz"]) == 3:
            best, best_d = None, bind_radius_m
            for a in anchors:
                c = a["observations"][-1]["estimate"]["center"]
                d = math.hypot(args["xyz"][0] - c[0], args["xyz"][1] - c[1])
                if d <= best_d:
                    best, best_d = a, d
            if best is not None:
                c = best["observations"][-1]["estimate"]["center"]
                step.update(anchor=best["id"], observation=len(best["observations"]) - 1,
                            offset_xy=[round(args["xyz"][0] - c[0], 5), round(args["xyz"][1] - c[1], 5)])
                current_anchor = best["id"]
            else:
                current_anchor = None
        elif args.get("target_yaw") is not None and current_anchor is not None:
            a = next(x for x in anchors if x["id"] == current_anchor)
            step.update(anchor=a["id"], observation=len(a["observations"]) - 1)
        steps.append(step)
    _interpolate_free_waypoints(steps)
    if ci < len(commands):
        raise FlashGenerateError(f"--recipe {recipe}: command {ci + 1} ({commands[ci]['action']}) has no matching "
                                 f"successful call in the audit {audit_path}; pass the recipe of the same run")
    if not anchors:
        raise FlashGenerateError(f"--audit {audit_path}: the run localised no object with segment, so the plan "
                                 "would have nothing to re-localise")
    suite, task, seed = str(doc["suite"]), int(doc["task"]), int(doc["seed"])
    cell = cell_tag(suite, task, seed)
    ident = {"cell": cell, "suite": suite, "task": task, "seed": seed, "task_language": doc.get("task_language")}
    plan = {"schema": PLAN_SCHEMA, **ident,
            "source": {"audit": str(audit_path), "recipe": str(recipe), "planner": doc.get("planner"),
                       "model": doc.get("model"), "env_steps": doc.get("env_steps")},
            "bind_radius_m": bind_radius_m, "steps": steps}
    return save_flash(destination, cell, plan, {"schema": ANCHORS_SCHEMA, **ident, "anchors": anchors})
