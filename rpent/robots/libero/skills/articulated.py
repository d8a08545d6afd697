"""Shared pieces of the articulated-fixture skills (:mod:`~rpent.robots.libero.skills.fixtures`,
:mod:`~rpent.robots.libero.skills.drawers`, the push skill): finding a part in a ``view_fixtures``
answer, a slide part's opening direction, and the phase runner and result dict the skills share.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero import control
from rpent.robots.libero.skills.motion import Executor, xy_waypoints

__all__ = ["PartsFn", "part_by_words", "open_direction", "phase_runner", "phase_result"]


PartsFn = Callable[[], Mapping[str, list]]


def part_by_words(parts: Mapping[str, list], fixture_words: tuple[str, ...], part_words: tuple[str, ...] = (),
                  joint_type: str | None = None) -> tuple[str, dict] | None:
    """Find a fixture part: the fixture whose name contains any of ``fixture_words`` and its
    part whose part/joint name contains all ``part_words`` (e.g. ``("top",)``), of
    ``joint_type`` when given. Returns ``(fixture name, part dict)`` or None."""
    for fx, plist in parts.items():
        if not any(w in fx for w in fixture_words):
            continue
        for p in plist:
            if joint_type is not None and p.get("type") != joint_type:
                continue
            name = f"{p.get('part', '')} {p.get('joint', '')}"
            if all(w in name for w in part_words):
                return fx, p
    return None


def open_direction(part: Mapping[str, Any]) -> np.ndarray:
    """World unit vector (3,) along which a slide part opens: ``-axis`` when its range is
    mostly negative (LIBERO cabinets), else ``+axis``."""
    axis = np.asarray(part["axis"], dtype=np.float64)
    lo, hi = part["range"]
    return -axis if abs(lo) > abs(hi) else axis


def phase_runner(ex: Executor, phases: list[dict]):
    """``(run, travel)`` over ``ex``: ``run(phase, tool, **args)`` makes one tool call and appends
    its answer (less images and state) to ``phases``; ``travel(phase, goal, gripper, **kw)`` moves
    there in <= 0.25 m ``move_to`` legs, False when a leg failed or the episode ended."""
    def run(phase: str, tool: str, **args: Any) -> dict:
        r = ex.run(tool, args)
        phases.append({"phase": phase, "tool": tool,
                       **{k: v for k, v in r.items() if k not in ("_images", "state_after")}})
        return r

    def travel(phase: str, goal, gripper: float, **kw: Any) -> bool:
        pos = control.robot_state(ex.current_state())["eef_pos"]
        for wp in xy_waypoints(pos, goal, 0.25):
            r = run(phase, "move_to", xyz=[float(v) for v in wp], gripper=gripper, **kw)
            if "error" in r or control.episode_over(ex.current_state()):
                return False
        return True

    run.phases = phases  # type: ignore[attr-defined]
    return run, travel


def phase_result(ex: Executor, phases: list[dict], stage: str, ok: bool, reason: str | None = None) -> dict:
    """``{"success": the env's predicate now, "done": ok, "stage", "phases", "reason"?}``."""
    s = ex.current_state()
    out = {"success": bool(s.get("success")), "done": ok, "stage": stage, "phases": phases}
    if reason:
        out["reason"] = reason
    return out
