"""Object estimates from back-projected points or boxes (world frame, meters, radians).

Moved out of :mod:`rpent.robots.libero.strategy`; pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ObjectEstimate", "refine_estimate", "half_turn", "PARTIAL_VIEW", "support_surface"]

#: a closer look whose major extent is below this fraction of the coarse one saw only part of the object.
PARTIAL_VIEW = 0.8


@dataclass(frozen=True)
class ObjectEstimate:
    """What the strategy needs to know about an object (world frame, meters, radians).

    Attributes:
        center: (3,) center of the object (xy used for grasping/placing).
        top_z: highest point.
        bottom_z: lowest point (resting surface).
        major_yaw: direction of the longer horizontal axis, rad in [-pi/2, pi/2).
        major_extent, minor_extent: full horizontal sizes along/across ``major_yaw`` (m).
        source: where it came from (``"oracle_bbox"``, ``"points"``).
        ridge_yaw: direction (rad, [-pi/2, pi/2)) of a ridge forming the object's top (the
            gable of a milk / juice carton), or None. A parallel gripper must close *along* a
            ridge: closing across it squeezes the sloped roof and the carton slips out.
        support: (x, y, z) centre and height of the largest horizontal surface
            (:func:`support_surface`), e.g. a stove's burner plate rather than its taller
            knob: where to put things "on" the object; None when no level has enough points.
    """

    center: tuple[float, float, float]
    top_z: float
    bottom_z: float
    major_yaw: float = 0.0
    major_extent: float = 0.0
    minor_extent: float = 0.0
    source: str = "unknown"
    ridge_yaw: float | None = None
    support: tuple[float, float, float] | None = None

    @property
    def height(self) -> float:
        """``top_z - bottom_z`` (m)."""
        return self.top_z - self.bottom_z

    @classmethod
    def from_box(cls, center: Any, axes: Any, half_extents: Any, source: str = "oracle_bbox") -> "ObjectEstimate":
        """From an oriented box (e.g. ``LiberoSim.object_bbox``).

        Args:
            center: (3,) world center; axes: (3, 3) box axes as columns (world);
            half_extents: (3,) half sizes along the axes (m).
        """
        c = np.asarray(center, dtype=np.float64).reshape(3)
        ax = np.asarray(axes, dtype=np.float64).reshape(3, 3)
        he = np.asarray(half_extents, dtype=np.float64).reshape(3)
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
        corners = c + (signs * he) @ ax.T
        # horizontal footprint: the two box axes closest to horizontal
        horiz = sorted(range(3), key=lambda i: abs(ax[2, i]))[:2]
        spans = []
        for i in horiz:
            v = ax[:2, i]
            n = float(np.linalg.norm(v))
            spans.append((2.0 * he[i] * n, math.atan2(v[1], v[0]) if n > 1e-9 else 0.0))
        spans.sort(reverse=True)
        return cls(
            center=tuple(float(x) for x in c),
            top_z=float(corners[:, 2].max()),
            bottom_z=float(corners[:, 2].min()),
            major_yaw=_half_turn(spans[0][1]),
            major_extent=float(spans[0][0]),
            minor_extent=float(spans[1][0]),
            source=source,
        )

    @classmethod
    def from_points(cls, points: Any, floor_z: float | None = None, source: str = "points") -> "ObjectEstimate":
        """From world points on the object (e.g. a segmentation mask back-projected).

        ``top_z`` is the 98th percentile of z; ``bottom_z`` is ``floor_z`` when given (a
        camera sees no bottom), else the 2nd percentile. The footprint (xy center, principal
        axes, extents) comes from the *top band* (points with ``z >= top_z - max(0.015 m,
        25% of the height)``, when at least 10): a camera looking from the front sees the
        front faces of tall objects, whose centroid sits ~1.5 cm in front of the true center,
        while the top band (lid, cap, gable, rim) is centered. The xy center is the midpoint
        of the 5th-95th percentile range along the principal axes (robust to stray pixels).

        Args:
            points: (N, 3) world points (m), N >= 10; non-finite rows are dropped.
            floor_z: z of the supporting surface, if known.
        Raises:
            ValueError: fewer than 10 finite points.
        """
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        p = p[np.all(np.isfinite(p), axis=1)]
        if len(p) < 10:
            raise ValueError(f"need at least 10 valid world points to estimate an object, got {len(p)}")
        top = float(np.percentile(p[:, 2], 98))
        bottom = float(floor_z) if floor_z is not None else float(np.percentile(p[:, 2], 2))
        band = p[p[:, 2] >= top - max(0.015, 0.25 * (top - bottom))]
        xy = (band if len(band) >= 10 else p)[:, :2]
        mean = xy.mean(axis=0)
        cov = np.cov((xy - mean).T)
        evals, evecs = np.linalg.eigh(cov)
        major = evecs[:, int(np.argmax(evals))]
        minor = np.array([-major[1], major[0]])
        a = (xy - mean) @ major
        b = (xy - mean) @ minor
        a_lo, a_hi = np.percentile(a, [5, 95])
        b_lo, b_hi = np.percentile(b, [5, 95])
        cxy = mean + major * (a_lo + a_hi) / 2.0 + minor * (b_lo + b_hi) / 2.0
        return cls(
            center=(float(cxy[0]), float(cxy[1]), (top + bottom) / 2.0),
            top_z=top,
            bottom_z=bottom,
            major_yaw=_half_turn(math.atan2(major[1], major[0])),
            major_extent=float(a_hi - a_lo),
            minor_extent=float(b_hi - b_lo),
            source=source,
            ridge_yaw=_ridge_yaw(p, top),
            support=support_surface(p, bottom),
        )


def refine_estimate(coarse: ObjectEstimate, closer: ObjectEstimate) -> ObjectEstimate:
    """Combine a coarse estimate with a closer look from above (e.g. the wrist camera).

    The footprint (center xy, yaw, extents) and ``top_z`` come from ``closer`` (a top view
    sees the top face centered); ``bottom_z`` stays the coarse one (a top view sees no bottom).
    When the closer look saw only part of the object (its major extent below
    ``PARTIAL_VIEW`` x the coarse one: the wrist camera cut the rim of a wide bowl), its
    footprint is biased: the coarse footprint stays and only ``top_z`` is taken.
    """
    if closer.major_extent < PARTIAL_VIEW * coarse.major_extent:
        return ObjectEstimate(center=(coarse.center[0], coarse.center[1], (closer.top_z + coarse.bottom_z) / 2.0),
                              top_z=closer.top_z, bottom_z=coarse.bottom_z, major_yaw=coarse.major_yaw,
                              major_extent=coarse.major_extent, minor_extent=coarse.minor_extent,
                              source=f"{coarse.source}+{closer.source}(partial: top only)", ridge_yaw=coarse.ridge_yaw)
    return ObjectEstimate(
        center=(closer.center[0], closer.center[1], (closer.top_z + coarse.bottom_z) / 2.0),
        top_z=closer.top_z,
        bottom_z=coarse.bottom_z,
        major_yaw=closer.major_yaw,
        major_extent=closer.major_extent,
        minor_extent=closer.minor_extent,
        source=f"{coarse.source}+{closer.source}",
        ridge_yaw=closer.ridge_yaw,
    )


def support_surface(points: np.ndarray, bottom: float, bin_m: float = 0.005, min_points: int = 20
                    ) -> tuple[float, float, float] | None:
    """The largest horizontal surface of an object's points: (x, y, z) (m, world).

    Points more than 5 mm above ``bottom`` are binned by z (``bin_m``); the fullest bin is the
    level (a flat face seen from above collects many points in one bin, a vertical face
    spreads over many); the median of the points within one bin of it is the answer (robust
    to the few points of taller parts crossing that level). None with fewer than ``min_points`` such points.
    """
    p = np.asarray(points, dtype=np.float64)
    p = p[p[:, 2] > bottom + 0.005]
    if len(p) < min_points:
        return None
    z = p[:, 2]
    edges = np.arange(z.min(), z.max() + bin_m, bin_m)
    if len(edges) < 2:
        edges = np.array([z.min(), z.min() + bin_m])
    counts, edges = np.histogram(z, bins=edges)
    k = int(np.argmax(counts))
    level = (edges[k] + edges[k + 1]) / 2.0
    q = p[np.abs(z - level) <= bin_m]
    if len(q) < min_points:
        return None
    mx, my, mz = np.median(q, axis=0)
    return (float(mx), float(my), float(mz))


def _principal_axes(xy: np.ndarray) -> tuple[float, float, float]:
    """(major direction rad, 5-95 percentile extent along it, across it) of 2-D points."""
    mean = xy.mean(axis=0)
    evals, evecs = np.linalg.eigh(np.cov((xy - mean).T))
    major = evecs[:, int(np.argmax(evals))]
    minor = np.array([-major[1], major[0]])
    a = np.percentile((xy - mean) @ major, [5, 95])
    b = np.percentile((xy - mean) @ minor, [5, 95])
    return math.atan2(major[1], major[0]), float(a[1] - a[0]), float(b[1] - b[0])


def _ridge_yaw(points: np.ndarray, top: float, band: float = 0.01) -> float | None:
    """Direction of a ridge-shaped top: points within ``band`` of the top form a thin line.

    A line means: at least 10 points, across-extent < 12 mm, along-extent > 3x across and
    <= 0.075 m (the gripper must fit along it). Measured on the wrist view of the LIBERO
    milk and orange-juice cartons: 0.044 m x 0.002 m; flat tops (butter, cream cheese,
    pudding) and caps/cans give ratios near 1-2 with across-extents > 2 cm.
    """
    q = points[points[:, 2] >= top - band]
    if len(q) < 10:
        return None
    angle, along, across = _principal_axes(q[:, :2])
    if across < 0.012 and along > 3.0 * across and along <= 0.075:
        return _half_turn(angle)
    return None


def _half_turn(angle: float) -> float:
    """Wrap to [-pi/2, pi/2) (a parallel gripper is symmetric under a half turn)."""
    return float((angle + math.pi / 2) % math.pi - math.pi / 2)



half_turn = _half_turn
