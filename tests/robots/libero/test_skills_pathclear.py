"""Pure tests of clearing a push's path (:mod:`rpent.robots.libero.skills.pathclear`): which
points stand in the way, how they are grouped into things, where a thing is set aside."""

from __future__ import annotations

import math

import numpy as np

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.pathclear import BLOB_MAX, MOVABLE_MAX, blocking_blobs, spot_candidates

TABLE = 0.90


def disc(cx, cy, r, top, n=60, seed=0):
    """Points on a cylinder's side and top (a bowl or a box seen by a camera)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 2 * math.pi, n)
    rr = r * np.sqrt(rng.uniform(0, 1, n))
    z = rng.uniform(TABLE + 0.02, top, n)
    return np.stack([cx + rr * np.cos(a), cy + rr * np.sin(a), z], axis=1)


def test_things_in_the_way_are_grouped_and_things_beside_it_left():
    path = [(-0.2, -0.04), (-0.055, -0.04), (-0.055, 0.19)]  # an L: +x, then +y (libero_goal_swap t5)
    bowl = disc(-0.06, 0.02, 0.05, TABLE + 0.05, seed=1)  # on the second leg
    cheese = disc(-0.045, 0.14, 0.03, TABLE + 0.035, seed=2)  # beside the end
    far = disc(0.15, -0.25, 0.04, TABLE + 0.1, seed=3)  # nowhere near
    blobs = blocking_blobs(np.concatenate([bowl, cheese, far]), path, radius=0.08, table_z=TABLE)
    assert len(blobs) == 2
    centres = sorted((round(float(b[:, 1].mean()), 2) for b in blobs))
    assert abs(centres[0] - 0.02) < 0.02 and abs(centres[1] - 0.14) < 0.02
    for b in blobs:  # one thing each, grown whole
        assert len(b) == 60 and np.ptp(b[:, :2], axis=0).max() <= BLOB_MAX * 2


def test_furniture_and_the_reference_are_left_alone():
    path = [(-0.2, 0.0), (0.1, 0.0)]
    # a long wall across the way: wider than anything that is set aside
    wall = np.stack([np.full(200, -0.05), np.linspace(-0.2, 0.2, 200), np.full(200, TABLE + 0.1)], axis=1)
    assert blocking_blobs(wall, path, radius=0.08, table_z=TABLE) == []
    assert np.ptp(wall[:, 1]) > MOVABLE_MAX
    # the reference itself (its box kept out)
    ref = disc(0.05, 0.0, 0.05, TABLE + 0.06)
    assert blocking_blobs(ref, path, radius=0.08, table_z=TABLE, keep_out=[(-0.02, 0.12, -0.08, 0.08)]) == []
    # a few stray points are not a thing to pick up
    assert blocking_blobs(disc(0.0, 0.0, 0.02, TABLE + 0.03, n=5), path, radius=0.08, table_z=TABLE) == []


def test_spots_keep_off_the_way_and_nearest_first():
    path = [(-0.2, -0.04), (-0.055, -0.04), (-0.055, 0.19)]
    bowl = ObjectEstimate(center=(-0.06, 0.02, 0.925), top_z=0.95, bottom_z=TABLE, major_yaw=0.0, major_extent=0.1,
                          minor_extent=0.1, source="test")
    spots = spot_candidates(bowl, path, radius=0.08, keep_out=[(-0.47, -0.32, 0.12, 0.27)])
    assert spots
    d = [math.hypot(x - bowl.center[0], y - bowl.center[1]) for x, y in spots]
    assert d == sorted(d)
    for x, y in spots:  # each spot's disc keeps 6 cm off the plate's way (its radius 0.08 m + the bowl's 0.05 m)
        assert seg_dist((x, y), path) >= 0.08 + 0.05 + 0.06 - 1e-9


def seg_dist(p, path):
    best = math.inf
    for a, b in zip(path[:-1], path[1:]):
        ax, ay, bx, by = *a, *b
        t = max(0.0, min(1.0, ((p[0] - ax) * (bx - ax) + (p[1] - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)))
        best = min(best, math.hypot(p[0] - ax - t * (bx - ax), p[1] - ay - t * (by - ay)))
    return best
