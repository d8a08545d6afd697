"""Clearing a push's path: what stands where a pushed object will pass or end is first set aside.

A pushed object cannot be lifted over what is in its way (a plate is pushed because it cannot be
gripped). Before the push, one point cloud of what stands on the table
(:func:`rpent.robots.libero.skills.clutter.scene_points`, the arm at its start pose) is searched
along the route the object's centre will take (:func:`rpent.robots.libero.skills.push.push_route`):
points within the object's footprint radius + :data:`PATH_MARGIN` of it, and of its end, belong
to things in the way (:func:`blocking_blobs`: grown into one cluster per thing). Each is picked up
by its own points (no name is needed: the instruction does not mention it) and set down on a free
spot of the table away from the route (:func:`spot_candidates`, checked free by
:func:`rpent.robots.libero.skills.clearing.spot_is_free`); a second look from the wrist camera,
above it, re-estimates it from its points seen from above (:func:`point_relocator`).

libero_goal_swap t5 ("push the plate to the front of the stove"): the cream cheese stands 3 cm
from the goal region and the black bowl beside the way there; pushed through, the 16 cm plate
stalled against them (seed 0) or ended propped on the cream cheese (seed 1).

Frames: world, m. Points are ``float64[N, 3]``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rpent.robots.libero.skills.estimate import ObjectEstimate

__all__ = ["PATH_MARGIN", "BLOB_GROW", "BLOB_MAX", "MOVABLE_MAX", "blocking_blobs", "spot_candidates",
           "point_relocator"]

Call = Callable[[str, dict], Mapping[str, Any]]

#: free gap (m) kept between the pushed object's footprint and what stands beside its way.
PATH_MARGIN = 0.02
#: points within this (m, xy) of a cluster belong to it.
BLOB_GROW = 0.03
#: a cluster reaches at most this far (m, xy) from the point it grew from (one object).
BLOB_MAX = 0.12
#: largest footprint (m) of a thing that is picked up and set aside (larger: furniture, left alone).
MOVABLE_MAX = 0.16
#: tallest (m above the table) a thing that is set aside may be.
MOVABLE_HEIGHT = 0.25
#: fewest points a cluster needs (``ObjectEstimate.from_points`` needs 10).
MIN_POINTS = 10
#: where spots are looked for (world x, y ranges, m; LIBERO tables, the robot's base at x ~ -0.66).
SPOT_X = (-0.30, 0.20)
SPOT_Y = (-0.30, 0.30)


def _dist_to_path(xy: np.ndarray, path: Sequence[Sequence[float]]) -> np.ndarray:
    """Distance (m) of each point of ``xy`` (N, 2) to the polyline ``path`` (xy)."""
    best = np.full(len(xy), np.inf)
    pts = [np.asarray(p[:2], dtype=np.float64) for p in path]
    if len(pts) == 1:
        return np.hypot(*(xy - pts[0]).T)
    for a, b in zip(pts[:-1], pts[1:]):
        d = b - a
        t = np.clip(((xy - a) @ d) / max(float(d @ d), 1e-12), 0.0, 1.0)
        off = xy - (a + t[:, None] * d)
        best = np.minimum(best, np.hypot(off[:, 0], off[:, 1]))
    return best


def blocking_blobs(points: np.ndarray, path: Sequence[Sequence[float]], radius: float, table_z: float,
                   keep_out: Sequence[tuple[float, float, float, float]] = ()) -> list[np.ndarray]:
    """The clusters of ``points`` that stand in the way of an object of footprint ``radius`` (m)
    whose centre follows ``path`` (the start, corners and end, xy): each grown (by
    :data:`BLOB_GROW`, at most :data:`BLOB_MAX` from its seed) from a point within ``radius`` +
    :data:`PATH_MARGIN` of the path, among all ``points`` (so a thing reaching into the way
    comes whole); points inside one of the ``keep_out`` boxes ``(x_min, x_max, y_min, y_max)``
    (the reference the object is pushed beside) are left out. Clusters of fewer than
    :data:`MIN_POINTS`, wider than :data:`MOVABLE_MAX` or taller than :data:`MOVABLE_HEIGHT`
    above ``table_z`` are not returned (furniture, or too little seen to pick up). Nearest the
    path's start first."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    p = p[np.all(np.isfinite(p), axis=1)]
    for x0, x1, y0, y1 in keep_out:
        p = p[~((p[:, 0] >= x0) & (p[:, 0] <= x1) & (p[:, 1] >= y0) & (p[:, 1] <= y1))]
    if len(p) == 0:
        return []
    near = _dist_to_path(p[:, :2], path) <= radius + PATH_MARGIN
    free = np.ones(len(p), dtype=bool)
    out: list[np.ndarray] = []
    start = np.asarray(path[0][:2], dtype=np.float64)
    order = np.argsort(np.hypot(*(p[:, :2] - start).T))
    for i in order:
        if not (near[i] and free[i]):
            continue
        members = np.zeros(len(p), dtype=bool)
        members[i] = True
        seed = p[i, :2]
        for _ in range(20):
            cand = free & ~members & (np.hypot(*(p[:, :2] - seed).T) <= BLOB_MAX)
            if not cand.any():
                break
            cp = p[cand, :2]
            mp = p[members, :2]
            d = np.min(np.hypot(cp[:, None, 0] - mp[None, :, 0], cp[:, None, 1] - mp[None, :, 1]), axis=1)
            grow = np.flatnonzero(cand)[d <= BLOB_GROW]
            if len(grow) == 0:
                break
            members[grow] = True
        free &= ~members
        blob = p[members]
        span = float(np.max(np.ptp(blob[:, :2], axis=0))) if len(blob) > 1 else 0.0
        if len(blob) >= MIN_POINTS and span <= MOVABLE_MAX and float(blob[:, 2].max()) <= table_z + MOVABLE_HEIGHT:
            out.append(blob)
    return out


def spot_candidates(obj: ObjectEstimate, path: Sequence[Sequence[float]], radius: float,
                    keep_out: Sequence[tuple[float, float, float, float]] = (), clearance: float = 0.06,
                    grid: float = 0.03, limit: int = 40) -> list[tuple[float, float]]:
    """Spots (x, y) to set ``obj`` down on, nearest it first: points of a ``grid`` m lattice over
    :data:`SPOT_X` x :data:`SPOT_Y` whose disc (``obj``'s footprint radius) keeps ``clearance``
    from the pushed object's way (its centre's ``path`` widened by its ``radius``), from the
    ``keep_out`` boxes, and does not overlap where ``obj`` stands; at most ``limit``."""
    r = max(obj.major_extent, obj.minor_extent) / 2.0
    out = []
    for x in np.arange(SPOT_X[0], SPOT_X[1] + 1e-9, grid):
        for y in np.arange(SPOT_Y[0], SPOT_Y[1] + 1e-9, grid):
            d = math.hypot(x - obj.center[0], y - obj.center[1])
            if d < 2 * r + 0.03:
                continue
            if float(_dist_to_path(np.array([[x, y]]), path)[0]) < radius + r + clearance:
                continue
            if any(x0 - r - clearance < x < x1 + r + clearance and y0 - r - clearance < y < y1 + r + clearance
                   for x0, x1, y0, y1 in keep_out):
                continue
            out.append((d, float(x), float(y)))
    out.sort()
    return [(x, y) for _, x, y in out[:limit]]


def point_relocator(call: Call, chosen: ObjectEstimate, table_z: float, max_shift: float = 0.05):
    """A ``relocate(state)`` callback for :func:`~rpent.robots.libero.skills.motion.pick_and_place`
    for a thing known only by its points: the wrist camera's world points (latest step, one
    ``back_project`` region call over its image) between 1.2 cm above ``table_z`` and 3 cm under
    the hand, the cluster (:func:`blocking_blobs` growth) nearest ``chosen``'s centre, as an
    estimate seen from above; None when nothing lies within ``max_shift`` m of it."""

    def relocate(state: Mapping[str, Any]) -> ObjectEstimate | None:
        eef = state.get("robot0_eef_pos")
        if eef is None:
            return None
        res = call("back_project", {"row_range": [0, 255], "col_range": [0, 255], "camera": "wrist",
                                    "resolution": "low", "z_min": float(table_z) + 0.012,
                                    "z_max": float(eef[2]) - 0.03, "max_points": 1500})
        pts = res.get("points") if isinstance(res, dict) and "error" not in res else None
        if not pts:
            return None
        p = np.asarray(pts, dtype=np.float64).reshape(-1, 3)
        blobs = blocking_blobs(p, [chosen.center[:2]], max(chosen.major_extent, chosen.minor_extent) / 2.0, table_z)
        if not blobs:
            return None
        est = ObjectEstimate.from_points(blobs[0], floor_z=table_z, source="wrist_points")
        if math.hypot(est.center[0] - chosen.center[0], est.center[1] - chosen.center[1]) > max_shift:
            return None
        return est

    return relocate


def clear_push_path(call: Call, say: Callable[[str], None], ex, obj: ObjectEstimate, path: Sequence[Sequence[float]],
                    keep_out: Sequence[tuple[float, float, float, float]] = (), max_moves: int = 2) -> int:
    """Set aside what stands in the way of pushing ``obj`` along ``path`` (its centre's start,
    corners and end, xy): one point cloud now (the arm at its start pose), :func:`blocking_blobs`,
    then for each (at most ``max_moves``) a pick-and-place to the nearest free spot
    (:func:`spot_candidates`, :func:`~rpent.robots.libero.skills.clearing.spot_is_free`) by its
    points, looked at again from above (:func:`point_relocator`). ``ex``: the planner's executor.
    Returns how many things were moved (successfully or not: the push re-looks as it goes)."""
    from rpent.robots.libero.skills import clearing, clutter
    from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY
    from rpent.robots.libero.skills.motion import pick_and_place
    from rpent.robots.libero.skills.scene import furniture_boxes

    state = ex.current_state()
    eef = state.get("robot0_eef_pos")
    if eef is None:
        return 0
    table_z = float(obj.bottom_z)
    boxes = furniture_boxes(call)
    pts = clutter.scene_points(call, table_z, float(eef[2]), boxes=boxes, eef_xy=eef[:2], base_xy=ROBOT_BASE_XY)
    pts = clutter.clutter_points(pts, obj, None, ROBOT_BASE_XY)
    radius = max(obj.major_extent, obj.minor_extent) / 2.0
    blobs = blocking_blobs(pts, path, radius, table_z, keep_out)
    if not blobs:
        return 0
    meta = call("view_camera_meta", {"camera": "agentview"}).get("camera_meta") or {}
    moved = 0
    for blob in blobs[:max_moves]:
        est = ObjectEstimate.from_points(blob, floor_z=table_z, source="agentview_points")
        spot = None
        if "intrinsic_K" in meta:
            for x, y in spot_candidates(est, path, radius, keep_out)[:12]:
                if clearing.spot_is_free(call, meta, x, y, table_z, max(est.major_extent, est.minor_extent) / 2.0 + 0.05):
                    spot = (x, y)
                    break
        if spot is None:
            say(f"Something {est.height * 100:.0f} cm tall stands in the way of the push at ({est.center[0]:.3f}, "
                f"{est.center[1]:.3f}), but I found no free spot to set it down on; pushing anyway.")
            continue
        say(f"Something {est.height * 100:.0f} cm tall ({est.major_extent * 100:.0f} x {est.minor_extent * 100:.0f} cm "
            f"seen) stands in the way of the push at ({est.center[0]:.3f}, {est.center[1]:.3f}); moving it to the free "
            f"spot ({spot[0]:.3f}, {spot[1]:.3f}) first.")
        out = pick_and_place(ex, est, clearing.table_target(spot[0], spot[1], table_z), "on",
                             relocate=point_relocator(call, est, table_z), obstacles=(obj,), boxes=boxes)
        if out.get("stage") != "retreat":
            say(f"Setting it aside stopped at {out.get('stage')}: {out.get('reason') or 'unknown'}; carrying on.")
        moved += 1
    return moved
