"""A flash replay's look at an anchor: which instance of a ``segment`` result stands for it."""

from __future__ import annotations

import math

__all__ = ["locate_anchor", "distance"]


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
