"""Point anchors: a thing the source run knew only by its world points (``back_project``).

The scripted planner sets aside what stands in the way of a push without naming it
(:func:`rpent.robots.libero.skills.pathclear.clear_push_path`: libero_goal_swap t5, a cream cheese
box beside the plate's way, found in one ``back_project`` point cloud of the table and looked at
again from above with the wrist camera). No ``segment`` call names it, so without a point anchor
its pick is replayed at the recorded spot and closes on nothing on seeds where it stands a few cm
away.

Generation (:func:`observe`, called for each successful ``back_project`` of the source run that
returned points above a ``z_min``): when the next gripper close of the run grasps where no
segmented object and no fixture part would bind its descent, the look's cluster of points
(:func:`rpent.robots.libero.skills.pathclear.blocking_blobs` growth) nearest the descent's XY
(first look) or the previous look's centre (later looks) becomes an observation of a ``"kind":
"points"`` anchor (``prompt`` null), its estimate from the cluster
(:meth:`rpent.robots.libero.skills.estimate.ObjectEstimate.from_points`, floor = the look's
``z_min``), the look's arguments kept as ``"back_project"``. Once the grasp's object is let go the
anchor is *retired*: it was carried elsewhere, so later waypoints never bind to where it stood.

Replay (:func:`relocate`): the same ``back_project`` call on the live scene and the same growth
from the recorded centre shifted by what earlier live looks at the anchor found, leaving out points
more than :data:`TOP_MARGIN_M` above the recorded top (later looks at generation likewise, above the
previous look's top); a cluster farther than :data:`MAX_SHIFT_M` from that seed, or none, is *not found* (the replay then keeps
the earlier look, or for a first look the recorded estimate: the pick as recorded).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_SHIFT_M", "POINTS_KIND", "observe", "relocate", "cluster_estimate"]

POINTS_KIND = "points"
#: A live cluster whose centre is farther than this (m, XY) from where the anchor is expected is
#: another thing: the anchor is not found there (the seeds of libero_goal_swap t5 move the bowl in
#: the plate's way by up to 9.7 cm).
MAX_SHIFT_M = 0.10
#: Points higher than this (m) above the top of the anchor's expected estimate are left out of its
#: cluster: a taller neighbour (a bottle beside the bowl) would otherwise merge in and its top would
#: make the estimate.
TOP_MARGIN_M = 0.015
_ARG_KEYS = ("row_range", "col_range", "camera", "resolution", "z_min", "z_max", "max_points", "step")
_EST_KEYS = ("center", "top_z", "bottom_z", "major_yaw", "major_extent", "minor_extent", "ridge_yaw")


def cluster_estimate(points: list, seed_xy: list[float], radius: float, floor_z: float,
                     top_z: float | None = None) -> dict | None:
    """Estimate (the flash anchors' estimate keys) of the cluster of ``points`` (those no higher
    than ``top_z`` when given) that reaches within ``radius`` + the path margin of ``seed_xy``
    (nearest it first), else None."""
    import numpy as np

    from rpent.robots.libero.skills.estimate import ObjectEstimate
    from rpent.robots.libero.skills.pathclear import blocking_blobs

    if not points:
        return None
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if top_z is not None:
        p = p[p[:, 2] <= float(top_z)]
    blobs = blocking_blobs(p, [list(seed_xy[:2])], float(radius), float(floor_z))
    if not blobs:
        return None
    est = ObjectEstimate.from_points(blobs[0], floor_z=float(floor_z), source="back_project_points")
    out = {k: getattr(est, k) for k in _EST_KEYS}
    out["center"] = [round(float(v), 4) for v in out["center"]]
    for k in ("top_z", "bottom_z", "major_yaw", "major_extent", "minor_extent"):
        out[k] = round(float(out[k]), 4)
    return out


def _radius(est: dict) -> float:
    return max(float(est.get("major_extent") or 0.0), float(est.get("minor_extent") or 0.0)) / 2.0


def _next_grasp_xy(commands: list[dict]) -> tuple[int, list[float]] | None:
    """(index in ``commands``, descent XY) of the next gripper close, else None."""
    last_xyz = None
    for j, c in enumerate(commands):
        if c.get("action") == "segment":
            continue
        xyz = c.get("xyz") if isinstance(c.get("xyz"), list) and len(c["xyz"]) == 3 else None
        g = c.get("gripper")
        if c.get("action") == "release" or (g is not None and float(g) <= 0 and c.get("action") == "set_gripper"):
            return None  # an opening first: nothing is grasped next
        if g is not None and float(g) > 0:
            xy = xyz or last_xyz
            return (j, [float(xy[0]), float(xy[1])]) if xy is not None else None
        if xyz is not None:
            last_xyz = xyz
    return None


def observe(builder, args: dict, result: dict | None, upcoming: list[dict]) -> None:
    """A successful ``back_project`` of the source run (``args``, ``result``) before the recipe
    commands ``upcoming``: add it to ``builder`` as an observation of the point anchor of the
    next grasp when that grasp binds to nothing else (see the module docstring)."""
    if not isinstance(result, dict) or "error" in result or not result.get("points") or args.get("z_min") is None:
        return
    if builder.gripper_closed:
        return  # carrying something: the next close is not a grasp from the table
    nxt = _next_grasp_xy(upcoming)
    if nxt is None:
        return
    j, xy = nxt
    close_key = sum(1 for s in builder.steps if s["op"] == "tool") + sum(
        1 for c in upcoming[:j] if c.get("action") != "segment")
    pool = [(a, len(a["observations"]) - 1) for a in builder.anchors
            if a.get("kind") != POINTS_KIND and a["id"] not in builder.retired]
    if builder._nearest_point(pool, [*xy, 0.0]) is not None or builder._nearest(
            builder.fixtures, [*xy, 0.0], lambda c: math.hypot(xy[0] - c[0], xy[1] - c[1])) is not None:
        return  # a segmented object or a fixture part binds that grasp
    anchor = builder.points_for_grasp.get(close_key)
    if anchor is None:
        est = cluster_estimate(result["points"], xy, 0.0, float(args["z_min"]))
    else:
        prev = anchor["observations"][-1]["estimate"]
        est = cluster_estimate(result["points"], prev["center"], _radius(prev), float(args["z_min"]),
                               float(prev["top_z"]) + TOP_MARGIN_M)
        if est is not None and math.hypot(est["center"][0] - prev["center"][0],
                                          est["center"][1] - prev["center"][1]) > MAX_SHIFT_M:
            est = None
    if est is None:
        return
    if anchor is None:
        anchor = {"id": f"a{len(builder.anchors)}", "prompt": None, "object": None, "kind": POINTS_KIND,
                  "observations": []}
        builder.anchors.append(anchor)
        builder.points_for_grasp[close_key] = anchor
    camera = str(args.get("camera") or "agentview")
    look = {k: args[k] for k in _ARG_KEYS if k in args and k != "step"}
    anchor["observations"].append({"camera": camera, "estimate": est, "back_project": look})
    builder.steps.append({"op": "locate", "anchor": anchor["id"], "camera": camera,
                          "observation": len(anchor["observations"]) - 1})


def relocate(call, anchor: dict, k: int, live: dict[int, dict]) -> dict | None:
    """Live estimate of observation ``k`` of point anchor ``anchor`` (see the module docstring):
    one ``back_project`` call with the recorded arguments; ``live`` holds the anchor's earlier
    live estimates (observation -> estimate)."""
    obs = anchor["observations"][k]
    ref = obs["estimate"]
    seed = [float(ref["center"][0]), float(ref["center"][1])]
    earlier = [j for j in live if j < k] or list(live)
    if earlier:  # where the earlier live looks found it, by the recorded difference
        j = max(earlier)
        ref_j = anchor["observations"][j]["estimate"]["center"]
        seed = [seed[n] + float(live[j]["center"][n]) - float(ref_j[n]) for n in (0, 1)]
    look = dict(obs.get("back_project") or {})
    bp = call("back_project", look)
    if not isinstance(bp, dict) or "error" in bp or not bp.get("points"):
        return None
    est = cluster_estimate(bp["points"], seed, _radius(ref), float(look.get("z_min") or ref.get("bottom_z") or 0.0),
                           float(ref["top_z"]) + TOP_MARGIN_M)
    if est is None or math.hypot(est["center"][0] - seed[0], est["center"][1] - seed[1]) > MAX_SHIFT_M:
        return None
    est["source"] = "back_project_points"
    return est
