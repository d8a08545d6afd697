"""Clutter: what stands on the table besides the object being moved and its target, as a point
cloud, and carry routes that keep a carried object off it.

The planner reads one ``back_project`` point cloud of the whole agentview image (everything
seen between :data:`CLUTTER_FLOOR` above the table and just under the hand at the time of
the look) and a second one of what stands higher, off the arm (:func:`scene_points`), and
drops the points of the object it moves, the low part of its target and the robot's base
(:func:`clutter_points`). A carry whose straight line would bring the carried
object's footprint closer to a point taller than its bottom than it already is at either
end gets an L-shaped route with one corner instead (:func:`carry_route`): on libero_goal_swap
t1 (seed 0) a bowl carried straight to the stove's burner caught on the front corner of the
wine rack that stands over the stove's back and fell tipped off the burner's edge.

Frames: world, m. Points are ``float64[N, 3]``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY, Box

__all__ = ["CLUTTER_FLOOR", "CLIP_BAND", "FIXTURE_MARGIN", "ARM_CORRIDOR", "CARRY_MARGIN", "CARRY_RISE", "scene_points", "clutter_points", "path_clearance",
           "route_top", "carry_route"]

Call = Callable[[str, dict], dict]

#: points lower than this (m) above the table's top are the table (or flat things a carried
#: object passes over anyway).
CLUTTER_FLOOR = 0.02
#: points higher than this (m) below the eef at the time of the look are left out: the hand and
#: the arm above it (at the start pose the fingertips are ~1 cm below the eef point).
HAND_ROOM = 0.05
#: points within this distance (m, xy) of the robot's base are its own links and pedestal.
BASE_RADIUS = 0.25
#: points within this (m) of the band's top are clipped: their height is unknown.
CLIP_BAND = 0.01
#: a clipped point within this (m, xy) of a furniture box's footprint is that box's top: the
#: cabinet's case stands ~1-2 cm out of its drawers' boxes (libero_goal_swap t4: 0.8 and 2.0 cm).
FIXTURE_MARGIN = 0.025
#: points above the band within this (m, xy) of the segment from the robot's base to the hand
#: are the arm (at libero's start pose its links reach 0.12 m off that line, measured on
#: libero_goal_swap t4's agentview segmentation).
ARM_CORRIDOR = 0.14
#: points the ``back_project`` call returns at most (a stride over the image's points: ~1 in
#: 10 above the table on libero_goal_swap, ~300 on the wine rack).
CLOUD_POINTS = 1500
#: free distance (m) the carried object's footprint should keep from clutter.
CARRY_MARGIN = 0.02
#: the carried object's own points are those within its footprint radius plus this (m).
OWN_MARGIN = 0.025
#: ...and no higher than this (m) over its estimated top.
OWN_RISE = 0.015
#: a carried object's bottom passes this far (m) above clutter it crosses over.
CARRY_RISE = 0.02
#: a route counts as no closer to the clutter than the ends when within this (m).
ROUTE_SLACK = 0.005


def scene_points(call: Call, table_z: float, eef_z: float, max_points: int = CLOUD_POINTS,
                 boxes: Sequence[Box] = (), eef_xy: Sequence[float] | None = None,
                 base_xy: Sequence[float] = ROBOT_BASE_XY) -> np.ndarray:
    """The agentview camera's world points (latest step) between :data:`CLUTTER_FLOOR` above
    ``table_z`` and :data:`HAND_ROOM` below ``eef_z`` (m), at most ``max_points`` of them
    (``back_project`` region mode over the whole low-resolution image); an empty ``(0, 3)``
    array when the tool answers an error (nothing in that band) or is missing. A point within
    :data:`CLIP_BAND` of the band's top gets z = ``inf``: what it belongs to may reach higher
    (the wine rack's 1.27 m top is above the band) -- except where its height is known: one
    within :data:`FIXTURE_MARGIN` (xy) of the footprint of one of ``boxes`` (furniture parts
    from ``view_fixtures``, :class:`~rpent.robots.libero.skills.grasp.Box`) whose top reaches
    the clipped band gets that top (the highest such box's ``z_hi``): on libero_goal_swap t4
    (seed 0) the 1.124 m top of the cabinet a bowl was to be set on was cut by the band's
    1.123 m top, counted as clutter of unknown height, and the carry went round its own target
    by an L whose corner leg ran into the wine rack's 1.24 m top, which the band did not show.

    With ``eef_xy`` (the hand's world xy now, m) a second look returns the points above the
    band too (at most ``max_points``, their own heights), less those within
    :data:`ARM_CORRIDOR` (xy) of the segment from ``base_xy`` (the robot's base; default
    :data:`~rpent.robots.libero.skills.grasp.ROBOT_BASE_XY`) to ``eef_xy``: the arm itself. On
    libero_goal_swap t4 the wine rack's slats rise in steps from 1.03 to 1.24 m and show
    (almost) no point in the band's clipped top centimetre, so the band alone saw a 1.09 m rack.
    """
    z_max = float(eef_z) - HAND_ROOM
    p = _cloud(call, max_points, float(table_z) + CLUTTER_FLOOR, z_max)
    high = _above_band(call, z_max, eef_xy, base_xy, max_points) if eef_xy is not None else np.zeros((0, 3))
    if len(p) == 0:
        return high
    clipped = p[:, 2] >= z_max - CLIP_BAND
    known = np.full(len(p), -np.inf)
    for b in boxes:
        if b.z_hi < z_max - CLIP_BAND:
            continue  # a clipped point over a lower box is something standing on it
        inside = np.array([b.signed_distance(float(x), float(y)) <= FIXTURE_MARGIN for x, y in p[:, :2]], dtype=bool)
        known = np.where(clipped & inside, np.maximum(known, float(b.z_hi)), known)
    p[clipped, 2] = np.where(np.isfinite(known[clipped]), known[clipped], np.inf)
    return np.concatenate([p, high]) if len(high) else p


def _cloud(call: Call, max_points: int, z_min: float, z_max: float | None = None) -> np.ndarray:
    """At most ``max_points`` agentview world points (latest step, float64[N, 3], m) with z in
    [``z_min``, ``z_max``] (no upper bound when None): one ``back_project`` region call over the
    whole low-resolution image; an empty ``(0, 3)`` array when the tool answers an error (nothing
    in that band) or gives no points."""
    args = {"row_range": [0, 255], "col_range": [0, 255], "camera": "agentview", "resolution": "low",
            "z_min": z_min, "max_points": int(max_points)}
    if z_max is not None:
        args["z_max"] = z_max
    res = call("back_project", args)
    pts = res.get("points") if isinstance(res, dict) and "error" not in res else None
    if not pts:
        return np.zeros((0, 3), dtype=np.float64)
    return np.asarray(pts, dtype=np.float64).reshape(-1, 3)


def _above_band(call: Call, z_max: float, eef_xy: Sequence[float], base_xy: Sequence[float],
                max_points: int) -> np.ndarray:
    """The agentview points (latest step) above ``z_max`` (m) outside the arm's corridor (see
    :func:`scene_points`), float64[N, 3]; empty when the tool answers an error."""
    p = _cloud(call, max_points, float(z_max))
    if len(p) == 0:
        return p
    a = np.asarray(base_xy[:2], dtype=np.float64)
    d = np.asarray(eef_xy[:2], dtype=np.float64) - a
    t = np.clip(((p[:, :2] - a) @ d) / max(float(d @ d), 1e-12), 0.0, 1.0)
    off = p[:, :2] - (a + t[:, None] * d)
    return p[np.hypot(off[:, 0], off[:, 1]) > ARM_CORRIDOR]


def clutter_points(points: np.ndarray, moved: ObjectEstimate, target: ObjectEstimate | None = None,
                   base_xy: Sequence[float] = ROBOT_BASE_XY) -> np.ndarray:
    """``points`` (N, 3) without the moved object's and the target's own (within its footprint
    radius + :data:`OWN_MARGIN` of its centre, xy, and no more than :data:`OWN_RISE` over its
    top: whatever stands higher there, like a wine rack's corner beside the bowl or its board
    over a stove, stays) and the robot base's (:data:`BASE_RADIUS`; ``base_xy`` default:
    :data:`~rpent.robots.libero.skills.grasp.ROBOT_BASE_XY`)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        return p
    keep = np.hypot(p[:, 0] - base_xy[0], p[:, 1] - base_xy[1]) > BASE_RADIUS
    for est in (moved, target):
        if est is None:
            continue
        r = max(est.major_extent, est.minor_extent) / 2.0 + OWN_MARGIN
        own = (np.hypot(p[:, 0] - est.center[0], p[:, 1] - est.center[1]) <= r) & (p[:, 2] <= est.top_z + OWN_RISE)
        keep &= ~own
    return p[keep]


def _sample(path: Sequence[Sequence[float]], step: float = 0.01) -> np.ndarray:
    """Points (M, 2) every ``step`` m along the polyline ``path`` (xy)."""
    out = []
    for a, b in zip(path[:-1], path[1:]):
        n = max(2, int(math.ceil(math.hypot(b[0] - a[0], b[1] - a[1]) / step)) + 1)
        t = np.linspace(0.0, 1.0, n)[:, None]
        out.append(np.asarray(a[:2], dtype=np.float64) * (1 - t) + np.asarray(b[:2], dtype=np.float64) * t)
    return np.concatenate(out) if out else np.zeros((0, 2))


def path_clearance(points: np.ndarray, path: Sequence[Sequence[float]], z_lo: float) -> float:
    """Least xy distance (m) between the polyline ``path`` (the carried object's centre) and
    any of ``points`` at least as high as ``z_lo`` (its bottom, m); ``inf`` when none is."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    p = p[p[:, 2] >= z_lo]
    if len(p) == 0:
        return math.inf
    s = _sample(path)
    d = np.hypot(s[:, None, 0] - p[None, :, 0], s[:, None, 1] - p[None, :, 1])
    return float(d.min())


def route_top(points: np.ndarray, path: Sequence[Sequence[float]], reach: float) -> float:
    """Highest z (m) of ``points`` within ``reach`` (m, xy) of the polyline ``path``; ``-inf``
    when none is (``inf`` when one of unknown height is)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        return -math.inf
    s = _sample(path)
    d = np.hypot(s[:, None, 0] - p[None, :, 0], s[:, None, 1] - p[None, :, 1]).min(axis=0)
    near = p[d < reach]
    return float(near[:, 2].max()) if len(near) else -math.inf


def carry_route(points: np.ndarray, start: Any, goal: Any, radius: float, z_lo: float, z_cap: float,
                margin: float = CARRY_MARGIN, rise: float = CARRY_RISE) -> tuple[list[tuple[float, float]], float]:
    """A route for a carried object's centre from ``start`` to ``goal`` (world xy, m) and the
    height of its bottom on the way that keep its footprint (``radius`` m) ``margin`` clear of
    every clutter point (or as clear as it is at the start and at the goal already: an object
    picked from beside a rack starts closer), or ``rise`` above the ones it passes over.

    Routes, in order: straight, an L with its corner at ``(goal x, start y)``, one at
    ``(start x, goal y)``; heights from ``z_lo`` (the bottom's carry height) up to ``z_cap``.
    The first route that needs no rise is taken, else the one that needs the least; where
    every route would need more than ``z_cap``, the straight line at ``z_lo``.

    Args:
        points: clutter (:func:`clutter_points`), (N, 3).
        start, goal: (2,) xy of the object's centre (m); z_lo, z_cap: m.
    Returns:
        ``(corners, bottom_z)``: ``[]`` or ``[(x, y)]``, and the carried bottom's height (m).
    """
    s = (float(start[0]), float(start[1]))
    g = (float(goal[0]), float(goal[1]))
    need = min(float(radius) + margin, path_clearance(points, [s, s], z_lo), path_clearance(points, [g, g], z_lo)) \
        - ROUTE_SLACK
    best: tuple[float, list[tuple[float, float]]] | None = None
    for corners in ([], [(g[0], s[1])], [(s[0], g[1])]):
        z = max(float(z_lo), route_top(points, [s, *corners, g], need) + rise)
        if z <= z_lo:
            return corners, float(z_lo)
        if z <= z_cap and (best is None or z < best[0] - 1e-9):
            best = (z, corners)
    if best is None:
        return [], float(z_lo)
    return best[1], float(best[0])
