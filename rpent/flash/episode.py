"""The live episode of a flash replay: which suite, task and seed it is, which env server served it,
and its ``flash_replay.json`` run artifact (:class:`rpent.flash.replay.FlashPlanner`)."""

from __future__ import annotations

import re

from rpent.flash.files import FlashFileError

__all__ = ["REPORT_NAME", "episode_identity", "qualified_instances", "server_identity", "task_instruction", "write_report"]

REPORT_NAME = "flash_replay.json"
"""Run artifact of every flash replay: what was replayed and what was re-localised."""


def server_identity(toolkit) -> dict:
    """Which env server served the episode (its ``get_env_meta``: init state, and for the shared
    server of :mod:`rpent.flash.env_server` its pid and how often it moved to another seed)."""
    meta = getattr(getattr(toolkit, "env", None), "meta", None) or {}
    keys = ("suite", "task", "seed", "init_state_id", "init_state_sha256", "server_pid", "seed_switches")
    out = {k: meta[k] for k in keys if k in meta}
    out["shared"] = "seed_switches" in meta
    return out


def write_report(toolkit, report: dict) -> None:
    """Write ``flash_replay.json`` into the run directory (a run artifact); never raises."""
    record = getattr(toolkit, "record", None)
    if record is None:
        return
    try:
        from rpent.recording.atomic import write_bytes_atomic
        from rpent.run.record import dumps_json

        write_bytes_atomic(record.dir / REPORT_NAME, dumps_json(report).encode("utf-8"))
        record.add_run_artifact(REPORT_NAME)
    except Exception:  # noqa: BLE001 — the transcript still holds every call
        pass


_IDENT = re.compile(r"suite (\S+?), task (\d+), seed (\d+)")


def episode_identity(toolkit, user_message: str) -> tuple[str, int, int]:
    """(suite, task, seed) of the live episode: the env server's meta, else the task message."""
    meta = getattr(getattr(toolkit, "env", None), "meta", None) or {}
    if all(k in meta for k in ("suite", "task", "seed")):
        return str(meta["suite"]), int(meta["task"]), int(meta["seed"])
    m = _IDENT.search(user_message)
    if not m:
        raise FlashFileError("flash_plan_missing", "cannot tell the suite and task of this episode (no env meta, "
                                                   "no 'suite S, task T, seed N' in the task message)")
    return m.group(1), int(m.group(2)), int(m.group(3))


_TASK_LINE = re.compile(r"^Task: (.+)$", re.MULTILINE)


def task_instruction(user_message: str) -> str:
    """The instruction of the runner's task message (its ``Task: ...`` line); "" when absent."""
    m = _TASK_LINE.search(user_message or "")
    return m.group(1).strip() if m else ""


def qualified_instances(call, instruction: str) -> dict[str, str]:
    """``{segment prompt: instance name}`` for each object phrase of ``instruction`` that a spatial
    qualifier singles out among several instances ("the akita black bowl not between the plate and
    the ramekin" -> ``{"akita black bowl": "akita_black_bowl_2"}``), resolved on the scene as it is
    now with the offline planner's own rules (:func:`rpent.robots.libero.skills.scene.bind_qualified`).

    ``call(tool, args) -> dict`` is the planner's tool call. A phrase that two qualifiers bind to
    different instances ("the left plate", "the right plate") is left out, as is everything when
    the instruction cannot be read or a look fails: the replay then keeps the instance nearest the
    recorded centre. Never raises."""
    if not instruction:
        return {}
    try:
        from rpent.robots.libero.skills import language, scene

        plan = language.parse_task(instruction)
        if isinstance(plan, language.Unsupported):
            return {}
        goals = [g for g in plan.steps if isinstance(g, language.PickPlaceGoal)]
        bound = scene.bind_qualified(call, goals)
    except Exception:  # noqa: BLE001 - a replay without the binding still runs (nearest instance)
        return {}
    names: dict[str, set[str]] = {}
    for (phrase, _qualifier), name in bound.items():
        names.setdefault(phrase, set()).add(name)
    return {phrase: next(iter(ns)) for phrase, ns in names.items() if len(ns) == 1}
