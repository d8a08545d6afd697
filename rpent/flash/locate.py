"""A flash replay's look at an anchor: which instance of a ``segment`` result stands for it."""

from __future__ import annotations

import math

__all__ = ["locate_anchor", "distance", "look_from_above", "LOOK_HEIGHT_M", "LOOK_MAX_OFF_M"]


def distance(center, near) -> float:
    """Distance (m, world frame) between an estimate's centre and ``near``: in 3-D where both have a
    height (a look-alike may stand right above or below), else in XY."""
    dims = 3 if len(center) >= 3 and len(near) >= 3 else 2
    return math.sqrt(sum((float(center[d]) - float(near[d])) ** 2 for d in range(dims)))


def locate_anchor(call, prompt: str, camera: str, near: list | None = None, name: str | None = None) -> dict | None:
    """Live estimate of an anchor: ``segment``'s object estimate, else ``back_project`` of its box.

    ``near`` (m, world frame: the recorded centre of a first look, the anchor's latest live
    centre for a re-look): ``segment(all_instances=True)`` and the instance named ``name`` (the
    one the instruction's qualifier designates, :func:`rpent.flash.episode.qualified_instances`) where it is among
    them, else the one whose estimate centre is nearest ``near`` (:func:`distance`; the seeds of
    a task perturb positions by a few cm, look-alikes stand farther apart)."""
    if not prompt:  # a point anchor (rpent.flash.points) has no prompt to segment
        return None
    args = {"prompt": prompt, "camera": camera}
    if near is not None:
        args["all_instances"] = True
    seg = call("segment", args)
    if "error" in seg or not seg.get("found"):
        return None
    insts = [i for i in (seg.get("instances") or []) if isinstance(i, dict) and i.get("object_estimate")]
    named = [i for i in insts if name is not None and i.get("object") == name]
    if near is not None and named:
        return dict(named[0]["object_estimate"])
    if near is not None and insts:
        best = min(insts, key=lambda i: distance(i["object_estimate"]["center"], near))
        return dict(best["object_estimate"])
    if seg.get("object_estimate"):
        return dict(seg["object_estimate"])
    box = seg.get("box")
    if not box:
        return None
    x0, y0, x1, y1 = box
    bp = call("back_project", {"row_range": [y0, y1], "col_range": [x0, x1], "camera": camera,
                               "step": seg.get("step", -1), "resolution": "low"})
    if "error" in bp or not bp.get("center_xyz"):
        return None
    c = bp["center_xyz"]
    return {"center": c, "top_z": c[2], "bottom_z": c[2], "major_yaw": 0.0, "major_extent": 0.0,
            "minor_extent": 0.0, "ridge_yaw": None, "source": "back_project_box"}


#: eef height (m) above an object's recorded top from which the wrist camera looks down at it when
#: the front camera cannot see it (the offline planner's ``LOOK_HEIGHT``, :mod:`rpent.planners.scripted`:
#: the wrist camera's 256 px then span ~0.39 m).
LOOK_HEIGHT_M = 0.25
#: a look from above counts only for an instance within this XY distance (m) of the recorded centre
#: (the seeds of a task move an object by a few cm).
LOOK_MAX_OFF_M = 0.10


def look_from_above(call, prompt: str, recorded: dict, name: str | None = None) -> tuple[dict | None, dict]:
    """Second chance for an anchor's first look that found nothing usable on the front camera (the
    object hidden behind a taller one: libero_10_swap t1, the cream cheese box behind the orange
    juice, 2 px of it in view): move the open hand :data:`LOOK_HEIGHT_M` above the recorded
    estimate's top, pointing down, and ``segment`` on the wrist camera, keeping the instance nearest
    the recorded centre (or the one named ``name``) if it lies within :data:`LOOK_MAX_OFF_M` of it.

    Returns ``(estimate or None, log entry)``; the motion and the look are ordinary toolkit calls
    (transcript, run record). Never raises; a motion error leaves the estimate None."""
    c = recorded.get("center")
    entry: dict = {"plan_step": None, "op": "repair", "kind": "look_from_above", "prompt": prompt, "found": False}
    if not (isinstance(c, list) and len(c) >= 3):
        return None, entry
    top = recorded.get("top_z")
    z = float(top if isinstance(top, (int, float)) else c[2]) + LOOK_HEIGHT_M
    res = call("move_to", {"xyz": [float(c[0]), float(c[1]), round(z, 4)], "gripper": -1.0, "max_steps": 150})
    if "error" in res:
        entry["error"] = res["error"]
        return None, entry
    est = locate_anchor(call, prompt, "wrist", [float(v) for v in c], name)
    if est is not None and math.hypot(float(est["center"][0]) - float(c[0]),
                                      float(est["center"][1]) - float(c[1])) > LOOK_MAX_OFF_M:
        entry["rejected_center"] = est["center"]
        est = None
    entry.update(found=est is not None, live_center=None if est is None else est["center"])
    return est, entry
