"""Room for the hand at a set-down pose (pure geometry on synthetic clouds shaped like
libero_10_task t6's mug on its plate and libero_10_swap t8's moka pot on the stove)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills.grasp import HAND_BOTTOM
from rpent.robots.libero.skills.handroom import FINGER_BELOW, HAND_ROOM_RISE, MAX_RELEASE_RISE, hand_top, hover_z, release_plan

TABLE_Z = 0.425


def _cylinder_points(cx, cy, r, z0, z1, step=0.01):
    """Points filling an upright cylinder (m), float64[N, 3]."""
    xs = np.arange(cx - r, cx + r + 1e-9, step)
    ys = np.arange(cy - r, cy + r + 1e-9, step)
    zs = np.arange(z0, z1 + 1e-9, step)
    g = np.stack(np.meshgrid(xs, ys, zs, indexing="ij"), axis=-1).reshape(-1, 3)
    return g[np.hypot(g[:, 0] - cx, g[:, 1] - cy) <= r]


# a mug 0.15 m tall on a plate at (0.10, 0.01); a box is set down right of the plate at (0.126, 0.114)
MUG = _cylinder_points(0.10, 0.01, 0.04, TABLE_Z + 0.03, TABLE_Z + 0.175)
SPOT = (0.126, 0.114)
RELEASE_Z = TABLE_Z + 0.035


def test_hand_top_empty_cloud():
    assert hand_top(np.zeros((0, 3)), (0.0, 0.0), 0.0) == -math.inf


def test_hand_top_follows_the_closing_axis():
    # at yaw 0 the hand's long side lies along y and reaches the mug; at yaw pi/2 it lies along x and does not
    assert hand_top(MUG, SPOT, 0.0) == pytest.approx(TABLE_Z + 0.175, abs=0.011)
    assert hand_top(MUG, SPOT, math.pi / 2) == -math.inf


def test_release_plan_clear_as_planned():
    plan = release_plan(MUG, (0.126, 0.30), 0.0, RELEASE_Z, may_turn=True)
    assert plan.turn == 0.0 and plan.rise == 0.0


def test_release_plan_turns_a_centre_grasped_object():
    plan = release_plan(MUG, SPOT, 0.0, RELEASE_Z, may_turn=True)
    assert plan.turn == pytest.approx(math.pi / 2)
    assert plan.rise == 0.0


def test_release_plan_raises_when_it_may_not_turn():
    # a pot held by its handle: its yaw is fixed; the hand lets go higher, by at most MAX_RELEASE_RISE
    plan = release_plan(MUG, SPOT, 0.0, RELEASE_Z, may_turn=False)
    assert plan.turn == 0.0
    assert plan.rise == pytest.approx(MAX_RELEASE_RISE)
    low = _cylinder_points(0.10, 0.01, 0.04, TABLE_Z, RELEASE_Z + HAND_BOTTOM + 0.02)
    plan = release_plan(low, SPOT, 0.0, RELEASE_Z, may_turn=False)
    assert plan.rise == pytest.approx(0.02 + HAND_ROOM_RISE, abs=0.011)


def test_release_plan_turn_that_does_not_clear_keeps_the_lower_neighbour():
    # a wall of clutter on both sides: neither yaw clears; the yaw with the lower top is kept
    tall_y = _cylinder_points(0.0, 0.09, 0.02, TABLE_Z, TABLE_Z + 0.20)
    short_x = _cylinder_points(0.09, 0.0, 0.02, TABLE_Z, RELEASE_Z + HAND_BOTTOM + 0.03)
    cloud = np.concatenate([tall_y, short_x])
    plan = release_plan(cloud, (0.0, 0.0), 0.0, RELEASE_Z, may_turn=True)
    assert plan.turn == pytest.approx(math.pi / 2)
    assert 0.0 < plan.rise < MAX_RELEASE_RISE


def test_hover_z_clears_a_can_beside_a_flat_box():
    # libero_10_swap t1: a soup can 9 cm tall whose edge stands 4 cm from a cream cheese box lying flat
    can = _cylinder_points(-0.112, -0.169, 0.035, TABLE_Z, TABLE_Z + 0.093)
    z = hover_z(can, (-0.037, -0.220))  # above the box, where the wrist camera looks from
    assert z >= TABLE_Z + 0.093 + FINGER_BELOW
    assert hover_z(can, (0.2, 0.2)) == -math.inf
    assert hover_z(np.zeros((0, 3)), (0.0, 0.0)) == -math.inf
    # a neighbour only the hand (not the fingertips) passes over: the hand's underside clears it
    far = _cylinder_points(0.0, 0.09, 0.01, TABLE_Z, TABLE_Z + 0.10)
    assert hover_z(far, (0.0, 0.0)) == pytest.approx(TABLE_Z + 0.10 - HAND_BOTTOM + HAND_ROOM_RISE + 0.005, abs=0.011)
