"""Clearing a drawer's path: what an opening drawer would overhang, and a free spot to move it to.

On libero_goal "open the top drawer and put the bowl inside" the bowl stands 4 cm under the
path of the top drawer: once it is open, the drawer's bottom (1.053 m) is lower than the
Panda hand would be at any grasp of the bowl (the hand reaches 0.126 m above the grip site
and 0.105 m to each side along the closing axis, measured on robosuite's hand geoms), so
the planner moves such an object to a free spot on the table before opening the drawer.

Free space is read the way any planner can: the spot's disc is projected into the
agentview image (``view_camera_meta``: OpenCV intrinsics and camera-to-world pose) and the
pixels' world points (``back_project`` region mode) are checked for anything standing
above the table there.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import Box, box_from_part

__all__ = ["sweep_box", "in_sweep", "spot_candidates", "project_disc", "spot_is_free", "find_free_spot", "table_target"]

Call = Callable[[str, dict], Mapping[str, Any]]

#: how far past the object's footprint the drawer must stay for the hand to reach it (m):
#: the hand's half thickness (~0.04 m) plus margin.
HAND_MARGIN = 0.05
#: the reachable table area for a spot (world x, y ranges, m; LIBERO tables, robot base at x ~ -0.66).
SPOT_X = (-0.30, 0.20)
SPOT_Y = (-0.30, 0.30)


def sweep_box(part: Mapping[str, Any], travel: float) -> Box | None:
    """The footprint a slide part covers while it opens by ``travel`` m (clipped to its joint
    range) from where it is now: its box stretched along the opening direction."""
    from rpent.robots.libero.skills.fixtures import open_direction

    b = box_from_part(dict(part))
    if b is None:
        return None
    lo = float(part["range"][0]) if abs(part["range"][0]) > abs(part["range"][1]) else float(part["range"][1])
    travel = max(0.0, min(travel, abs(lo - float(part["qpos"]))))
    d = open_direction(part)
    u = np.array([math.cos(b.yaw), math.sin(b.yaw)])
    sign = 1.0 if float(d[:2] @ u) >= 0 else -1.0
    c = np.asarray(b.center) + sign * u * travel / 2.0
    return Box(center=(float(c[0]), float(c[1])), yaw=b.yaw, half_length=b.half_length + travel / 2.0,
               half_width=b.half_width, z_lo=b.z_lo, z_hi=b.z_hi, hollow=False)


def in_sweep(obj: ObjectEstimate, sweep: Box, margin: float = HAND_MARGIN) -> bool:
    """True when ``obj`` (footprint radius = half its major extent) lies within ``margin`` of
    the sweep and below its top (the drawer would overhang it or pin the hand beside it)."""
    return obj.top_z < sweep.z_hi and sweep.signed_distance(obj.center[0], obj.center[1]) < obj.major_extent / 2.0 + margin


def spot_candidates(obj: ObjectEstimate, sweep: Box, clearance: float = 0.09, grid: float = 0.03,
                    limit: int = 60) -> list[tuple[float, float]]:
    """Spots (x, y) to move ``obj`` to, nearest first: the points of a ``grid`` m lattice over
    :data:`SPOT_X` x :data:`SPOT_Y` that leave the object's footprint ``clearance`` m from the
    sweep and do not overlap where it stands now (shift >= its size + 3 cm); at most ``limit``."""
    cx, cy = obj.center[0], obj.center[1]
    r = obj.major_extent / 2.0
    out = []
    for x in np.arange(SPOT_X[0], SPOT_X[1] + 1e-9, grid):
        for y in np.arange(SPOT_Y[0], SPOT_Y[1] + 1e-9, grid):
            d = math.hypot(x - cx, y - cy)
            if d >= obj.major_extent + 0.03 and sweep.signed_distance(x, y) >= r + clearance:
                out.append((d, float(x), float(y)))
    out.sort()
    return [(x, y) for _, x, y in out[:limit]]


def project_disc(meta: Mapping[str, Any], x: float, y: float, z: float, radius: float,
                 size: tuple[int, int] = (256, 256)) -> tuple[list[int], list[int]] | None:
    """Pixel rows and columns ``([r0, r1], [c0, c1])`` of the rectangle inscribed in the image
    of a horizontal disc (centre (x, y, z), ``radius`` m, world): the disc's bounding box
    shrunk by 1/sqrt(2) about the centre's pixel, so it does not reach past the disc, in a
    camera image, from its ``camera_meta`` (``intrinsic_K``, ``extrinsic_cam2world`` 4x4,
    OpenCV: x right, y down, z forward); None when any of it falls outside the image or
    behind the camera."""
    k = np.asarray(meta["intrinsic_K"], dtype=np.float64)
    t = np.asarray(meta["extrinsic_cam2world"], dtype=np.float64)
    ang = np.linspace(0.0, 2.0 * math.pi, 16, endpoint=False)
    pts = np.stack([x + radius * np.cos(ang), y + radius * np.sin(ang), np.full_like(ang, z)], axis=1)
    cam = (pts - t[:3, 3]) @ t[:3, :3]
    if np.any(cam[:, 2] <= 1e-6):
        return None
    u = k[0, 0] * cam[:, 0] / cam[:, 2] + k[0, 2]
    v = k[1, 1] * cam[:, 1] / cam[:, 2] + k[1, 2]
    cen = (np.array([x, y, z]) - t[:3, 3]) @ t[:3, :3]
    uc, vc = k[0, 0] * cen[0] / cen[2] + k[0, 2], k[1, 1] * cen[1] / cen[2] + k[1, 2]
    shrink = 1.0 / math.sqrt(2.0)
    h, w = int(meta.get("height", size[0])), int(meta.get("width", size[1]))
    r0, r1 = int(math.floor(vc + (v.min() - vc) * shrink)), int(math.ceil(vc + (v.max() - vc) * shrink))
    c0, c1 = int(math.floor(uc + (u.min() - uc) * shrink)), int(math.ceil(uc + (u.max() - uc) * shrink))
    if r0 < 0 or c0 < 0 or r1 >= h or c1 >= w:
        return None
    return [r0, r1], [c0, c1]


def spot_is_free(call: Call, meta: Mapping[str, Any], x: float, y: float, table_z: float, radius: float) -> bool:
    """True when nothing stands more than 1.5 cm above the table within the image box of the
    disc (``radius`` m) at (x, y): ``back_project`` finds fewer than its minimum of valid
    points there between 1.5 and 25 cm above ``table_z`` (an error answer). Conservative: a
    tall object in front of the spot, hiding it from the camera, also counts as occupying it."""
    box = project_disc(meta, x, y, table_z, radius)
    if box is None:
        return False
    res = call("back_project", {"row_range": box[0], "col_range": box[1], "camera": "agentview", "resolution": "low",
                                "z_min": table_z + 0.015, "z_max": table_z + 0.25})
    return "error" in res


def find_free_spot(call: Call, obj: ObjectEstimate, sweep: Box, table_z: float, margin: float = 0.07
                   ) -> tuple[float, float] | None:
    """The first of :func:`spot_candidates` whose disc (the object's radius + ``margin`` for
    the fingers and the hand) :func:`spot_is_free`; None when none is."""
    meta = call("view_camera_meta", {"camera": "agentview"}).get("camera_meta") or {}
    if "intrinsic_K" not in meta:
        return None
    for x, y in spot_candidates(obj, sweep):
        if spot_is_free(call, meta, x, y, table_z, obj.major_extent / 2.0 + margin):
            return x, y
    return None


def table_target(x: float, y: float, table_z: float) -> ObjectEstimate:
    """A place target on the bare table at (x, y) (an estimate with zero height, top = ``table_z``)."""
    return ObjectEstimate(center=(x, y, table_z), top_z=table_z, bottom_z=table_z, major_extent=0.0, minor_extent=0.0,
                          source="free_table_spot")
