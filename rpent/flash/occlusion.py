"""A re-look at an anchor hidden in part by what the plan set down on it (see :mod:`rpent.flash.replay`).

libero_10_task t6 ("put the red mug on the plate and put the chocolate pudding to the right of the
plate"): the plan looks at the plate again after the mug is on it; the mug hides part of the plate,
so the mask's centre moves toward the visible part (1.7 cm in the source run, 4-5 cm on some seeds
where the mug stands elsewhere on it) and the pudding, placed relative to that look, misses.

Rule (:func:`occluded_relook`): a re-observation of an anchor whose live footprint (major x minor
extent) is smaller than :data:`SHRINK_RATIO` times that of the anchor's latest earlier live look
with the same camera (a wrist look shows another part of it than the front camera), where
the plan has set something down on that anchor since (a gripper opening whose place, the last
motion before it, is bound to the anchor), is not used: the replay keeps the earlier look, and the
waypoints of the re-observation are rebuilt from it by the recorded difference between the two
observations (:meth:`rpent.flash.replay.FlashPlanner._rebuild`). The look stays a tool call of the
transcript; its ``locate`` entry says ``"kept_earlier": true`` and ``"occluded_by_place"`` (the
plan step of that place, the footprints compared).
"""

from __future__ import annotations

from rpent.flash.regrasp import gripper_command

__all__ = ["SHRINK_RATIO", "footprint", "place_on", "occluded_relook"]

#: A re-look whose footprint is below this fraction of the earlier one's was partly hidden.
SHRINK_RATIO = 0.9


def footprint(est: dict) -> float:
    """Footprint area (m^2, major x minor extent) of an object estimate; 0 when unknown."""
    return float(est.get("major_extent") or 0.0) * float(est.get("minor_extent") or 0.0)


def place_on(steps: list[dict], aid: str, start: int, end: int) -> int | None:
    """The plan step of the last place on anchor ``aid`` between plan steps ``start`` and ``end``:
    a gripper opening (``release``, ``set_gripper`` or a motion opening it) after the gripper was
    closed, whose preceding motion is bound to ``aid``; else None."""
    found, closed, last_motion = None, False, None
    for j in range(0, end):
        s = steps[j]
        if s.get("op") != "tool":
            continue
        g = gripper_command(s)
        if g is not None and g <= 0 and closed and j > start and last_motion is not None \
                and steps[last_motion].get("anchor") == aid:
            found = j
        if isinstance((s.get("args") or {}).get("xyz"), list):
            last_motion = j
        if g is not None:
            closed = g > 0
    return found


def occluded_relook(steps: list[dict], i: int, aid: str, est: dict, earlier: dict | None,
                    earlier_step: int | None) -> dict | None:
    """Why the live look ``est`` at plan step ``i`` of anchor ``aid`` is not used (a dict for the
    replay's log: the place step and the two footprints), else None (see the module docstring).
    ``earlier``: the anchor's latest earlier live estimate, located at plan step ``earlier_step``."""
    if earlier is None or earlier_step is None:
        return None
    before, now = footprint(earlier), footprint(est)
    if before <= 0 or now >= SHRINK_RATIO * before:
        return None
    j = place_on(steps, aid, earlier_step, i)
    if j is None:
        return None
    return {"place_step": j, "footprint_m2": round(now, 5), "earlier_footprint_m2": round(before, 5)}
