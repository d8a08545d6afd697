"""Clutter point clouds and carry routes round them (pure geometry on synthetic clouds shaped
like libero_goal_swap t1's scene; the carry itself runs in ``test_scripted_skills_sim.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills.clutter import (
    CARRY_MARGIN,
    CARRY_RISE,
    carry_route,
    clutter_points,
    path_clearance,
    route_top,
    scene_points,
)
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import Box

TABLE_Z = 0.90


def _box_points(x0, x1, y0, y1, z0, z1, step=0.01):
    """Surface-ish points filling an axis-aligned box (m), float64[N, 3]."""
    xs, ys, zs = (np.arange(a, b + 1e-9, step) for a, b in ((x0, x1), (y0, y1), (z0, z1)))
    return np.stack(np.meshgrid(xs, ys, zs, indexing="ij"), axis=-1).reshape(-1, 3)


# libero_goal_swap t1 (seed 0), agentview points: the wine rack stands behind the stove, its front
# corner at (-0.123, -0.128), 1.22 m tall (above the cloud's band: inf); the wine bottle beside
# the bowl, 1.058 m tall; the bowl and the stove's burner from the planner's estimates
RACK = _box_points(-0.39, -0.123, -0.31, -0.128, 0.93, 1.11)
RACK[RACK[:, 2] >= 1.10, 2] = np.inf
BOTTLE = _box_points(-0.11, -0.07, -0.029, 0.016, 0.92, 1.058)
BOWL = ObjectEstimate(center=(-0.1909, -0.0679, 0.926), top_z=0.9508, bottom_z=0.9011, major_yaw=0.0378,
                      major_extent=0.1013, minor_extent=0.0855)
BURNER = ObjectEstimate(center=(-0.0591, -0.2342, 0.9303), top_z=0.9259, bottom_z=0.9009, major_yaw=-0.0727,
                        major_extent=0.0683, minor_extent=0.0208)
BOWL_PTS = _box_points(-0.23, -0.15, -0.11, -0.03, 0.92, 0.95)
BURNER_PTS = _box_points(-0.09, -0.03, -0.26, -0.21, 0.92, 0.93)


def test_clutter_points_drop_the_moved_object_the_target_and_the_base():
    base = _box_points(-0.70, -0.62, -0.04, 0.04, 0.92, 1.0)
    tall_on_target = _box_points(-0.07, -0.05, -0.24, -0.22, 0.96, 1.0)  # e.g. a board over the burner
    pts = np.concatenate([RACK, BOTTLE, BOWL_PTS, BURNER_PTS, base, tall_on_target])
    out = clutter_points(pts, BOWL, BURNER)
    kept = {tuple(p) for p in out}
    # the rack's corner within the bowl's footprint radius stays where it is taller than the bowl
    assert all(tuple(p) in kept for p in RACK if p[2] > BOWL.top_z + 0.015)
    assert all(tuple(p) in kept for p in BOTTLE)
    assert all(tuple(p) in kept for p in tall_on_target)
    assert not any(tuple(p) in kept for p in BOWL_PTS)
    assert not any(tuple(p) in kept for p in BURNER_PTS)
    assert not any(tuple(p) in kept for p in base)
    assert clutter_points(np.zeros((0, 3)), BOWL).shape == (0, 3)


def test_path_clearance_and_route_top():
    pts = np.array([[0.0, 0.1, 1.0], [0.0, -0.3, 0.95]])
    assert path_clearance(pts, [(-0.2, 0.0), (0.2, 0.0)], 0.9) == pytest.approx(0.1)
    assert path_clearance(pts, [(-0.2, 0.0), (0.2, 0.0)], 1.01) == math.inf  # both lower than the bottom
    assert route_top(pts, [(-0.2, 0.0), (0.2, 0.0)], 0.15) == pytest.approx(1.0)
    assert route_top(pts, [(-0.2, 0.0), (0.2, 0.0)], 0.05) == -math.inf
    assert route_top(np.zeros((0, 3)), [(0, 0), (1, 0)], 0.1) == -math.inf


def test_carry_route_round_the_rack_and_over_the_bottle():
    clutter = clutter_points(np.concatenate([RACK, BOTTLE, BOWL_PTS, BURNER_PTS]), BOWL, BURNER)
    r = max(BOWL.major_extent, BOWL.minor_extent) / 2
    bottom = 0.994  # the carried bowl's bottom at the usual carry height
    corners, z = carry_route(clutter, BOWL.center[:2], BURNER.center[:2], r, bottom, 1.24)
    # straight, the bowl would pass 1.6 cm from the rack's front corner (it caught there and fell
    # off the burner tipped); round it: first along +x to the burner's x, then along -y; the
    # bottle beside that first leg is passed over
    assert corners == [pytest.approx((BURNER.center[0], BOWL.center[1]))]
    assert z == pytest.approx(BOTTLE[:, 2].max() + CARRY_RISE)
    # without the bottle the corner route needs no rise
    alone = clutter_points(np.concatenate([RACK, BOWL_PTS]), BOWL, BURNER)
    assert carry_route(alone, BOWL.center[:2], BURNER.center[:2], r, bottom, 1.24) == (
        [pytest.approx((BURNER.center[0], BOWL.center[1]))], pytest.approx(bottom))
    # nothing near the straight line: straight, at the given height
    far = RACK + np.array([-1.0, -1.0, 0.0])
    assert carry_route(far, BOWL.center[:2], BURNER.center[:2], r, bottom, 1.24) == ([], pytest.approx(bottom))
    # every route would need more than the cap: straight, unchanged
    wall = _box_points(-0.3, 0.1, -0.16, -0.15, 0.92, 1.11)
    wall[wall[:, 2] >= 1.10, 2] = np.inf
    assert carry_route(wall, BOWL.center[:2], BURNER.center[:2], r, bottom, 1.24) == ([], pytest.approx(bottom))


def test_carry_route_keeps_the_margin_it_starts_with():
    # an object picked from 4 cm beside a tall wall, carried along it: not a detour
    wall = _box_points(-0.3, 0.3, 0.10, 0.11, 0.92, 1.11)
    wall[wall[:, 2] >= 1.10, 2] = np.inf
    assert path_clearance(wall, [(-0.2, 0.05), (-0.2, 0.05)], 0.95) < 0.04 + CARRY_MARGIN  # closer than wanted
    corners, z = carry_route(wall, (-0.2, 0.05), (0.2, 0.05), 0.04, 0.95, 1.24)
    assert corners == [] and z == pytest.approx(0.95)
    # ...nor one set down closer to it (2 cm) than it starts: the goal's own clearance sets what is wanted
    corners, z = carry_route(wall, (-0.2, 0.05), (0.2, 0.08), 0.04, 0.95, 1.24)
    assert corners == [] and z == pytest.approx(0.95)


def test_scene_points_reads_one_back_project_cloud():
    calls = []

    def call(tool, args):
        calls.append((tool, args))
        return {"center_xyz": [0, 0, 1], "points": [[0.1, 0.2, 0.95], [0.1, 0.2, 1.115], [0.0, 0.0, 1.0]]}

    pts = scene_points(call, TABLE_Z, 1.17)
    assert calls[0][0] == "back_project"
    a = calls[0][1]
    assert a["z_min"] == pytest.approx(TABLE_Z + 0.02) and a["z_max"] == pytest.approx(1.12) and a["max_points"] > 0
    assert pts.shape == (3, 3) and pts[0, 2] == pytest.approx(0.95) and pts[1, 2] == math.inf
    assert scene_points(lambda t, a: {"error": "too few valid pixels"}, TABLE_Z, 1.17).shape == (0, 3)


# libero_goal_swap t4 (seed 0): the bowl goes on top of the cabinet (drawer boxes from view_fixtures,
# top 1.1236 m); the arm's start pose puts the cloud's top at 1.123 m, so the cabinet's top edge is cut
# (its case stands 0.8-2 cm out of the drawers' boxes); the wine rack stands in front of it, 1.09 m tall
CABINET = tuple(Box(center=(-0.2541, -0.2465), yaw=-math.pi / 2, half_length=0.1028, half_width=0.1112, z_lo=lo, z_hi=hi)
                for lo, hi in ((0.913, 0.984), (0.983, 1.054), (1.053, 1.1236)))
CABINET_EDGE = np.array([[-0.373, -0.175, 1.117], [-0.351, -0.176, 1.116], [-0.2, -0.176, 1.115],
                         [-0.179, -0.176, 1.116], [-0.127, -0.361, 1.123]])
CABINET_FRONT = _box_points(-0.15, -0.14, -0.34, -0.15, 0.93, 1.10)
LOW_RACK = _box_points(-0.10, 0.15, -0.30, -0.02, 0.93, 1.088, step=0.02)
CAB_TOP = ObjectEstimate(center=(-0.2839, -0.2453, 1.1274), top_z=1.1276, bottom_z=0.4026, major_yaw=0.859,
                         major_extent=0.2174, minor_extent=0.1369)
BOWL4 = ObjectEstimate(center=(-0.0627, 0.1306, 0.9258), top_z=0.9507, bottom_z=0.901, major_yaw=-0.13,
                       major_extent=0.1014, minor_extent=0.0957)
EEF_Z4 = 1.1733  # the start pose's eef height: the cloud's top is 5 cm under it


def _cloud_call(points):
    def call(tool, args):
        assert tool == "back_project"
        p = [q for q in np.asarray(points).tolist() if args["z_min"] <= q[2] <= args.get("z_max", math.inf)]
        return {"points": p} if p else {"error": "too few valid pixels"}
    return call


def test_scene_points_give_a_cut_furniture_top_its_box_height():
    scene = np.concatenate([CABINET_EDGE, CABINET_FRONT, LOW_RACK, [[0.05, 0.25, 1.12]]])
    blind = scene_points(_cloud_call(scene), TABLE_Z, EEF_Z4)
    assert np.isinf(blind[:, 2]).sum() == len(CABINET_EDGE) + 1  # the cut edge and the far point: unknown
    seen = scene_points(_cloud_call(scene), TABLE_Z, EEF_Z4, boxes=CABINET)
    cut = seen[np.isclose(seen[:, 0], CABINET_EDGE[:, 0][:, None]).any(axis=0)
               & np.isclose(seen[:, 1], CABINET_EDGE[:, 1][:, None]).any(axis=0)]
    assert len(cut) == len(CABINET_EDGE) and np.allclose(cut[:, 2], 1.1236)  # the highest drawer's top
    # a cut point away from furniture stays unknown; finite points keep their height
    assert np.isinf(seen[(seen[:, 0] == 0.05) & (seen[:, 1] == 0.25), 2]).all()
    assert np.isfinite(seen[:, 2]).sum() == len(seen) - 1
    # over a box lower than the cut (something standing on a low drawer) a cut point stays unknown
    low = (Box(center=(0.05, 0.25), yaw=0.0, half_length=0.05, half_width=0.05, z_lo=0.91, z_hi=1.0),)
    assert np.isinf(scene_points(_cloud_call(scene), TABLE_Z, EEF_Z4, boxes=low)[:, 2]).sum() == len(CABINET_EDGE) + 1


def test_carry_onto_a_cabinet_top_goes_straight_over_it():
    scene = np.concatenate([CABINET_EDGE, CABINET_FRONT, LOW_RACK, BOWL_PTS + np.array([0.13, 0.2, 0.0])])
    r = max(BOWL4.major_extent, BOWL4.minor_extent) / 2
    bottom = 1.186  # the bowl's bottom at the carry height (above the cabinet's top)
    start, goal = (-0.065, 0.130), CAB_TOP.center[:2]
    # the cabinet's cut top taken for something of unknown height: the carry went round its own target
    blind = clutter_points(scene_points(_cloud_call(scene), TABLE_Z, EEF_Z4), BOWL4, CAB_TOP)
    assert carry_route(blind, start, goal, r, bottom, 1.21)[0] != []
    # its height known from the fixture's boxes: under the carried bottom, straight over the rack too
    seen = clutter_points(scene_points(_cloud_call(scene), TABLE_Z, EEF_Z4, boxes=CABINET), BOWL4, CAB_TOP)
    assert carry_route(seen, start, goal, r, bottom, 1.21) == ([], pytest.approx(bottom))
    # the cut points are not dropped: a bottom lower than the cabinet's top still meets them
    # (the one outside the target's own disc: the case's corner beside the rack)
    beside = [(-0.05, -0.36), (0.0, -0.36)]
    assert path_clearance(seen, beside, 1.11) == pytest.approx(0.077, abs=1e-3)
    assert path_clearance(seen, beside, 1.13) == math.inf
    assert path_clearance(seen, [start, goal], bottom) == math.inf


# ...the wine rack in front of the cabinet rises in steps of slats, 1.03 m at its front (y -0.1) to
# 1.24 m at its back (y -0.3): above the cloud's 1.123 m top but for its front row; the arm at its
# start pose stands above the band along the line from its base to the hand
RACK_STEPS = np.concatenate([_box_points(-0.11, 0.15, y0, y0 + 0.04, z - 0.02, z, step=0.02)
                             for y0, z in ((-0.14, 1.03), (-0.19, 1.16), (-0.24, 1.19), (-0.30, 1.24))])
ARM = np.concatenate([_box_points(-0.64, -0.16, -0.10, 0.10, 1.30, 1.34, step=0.02),
                      _box_points(-0.26, -0.16, -0.05, 0.05, 1.17, 1.30, step=0.02)])


def test_scene_points_see_what_stands_above_the_band_off_the_arm():
    call = _cloud_call(np.concatenate([RACK_STEPS, ARM, CABINET_EDGE]))
    band = scene_points(call, TABLE_Z, EEF_Z4)
    assert band[np.isfinite(band[:, 2]), 2].max() < 1.05  # the band alone: a 1.03 m rack, no arm
    seen = scene_points(call, TABLE_Z, EEF_Z4, boxes=CABINET, eef_xy=(-0.208, 0.0), base_xy=(-0.66, 0.0))
    high = seen[seen[:, 2] > EEF_Z4 - 0.05]
    assert len(high) and high[:, 2].max() == pytest.approx(1.24)
    assert not (np.abs(high[:, 1]) <= 0.10).any()  # nothing of the arm
    assert np.isfinite(seen[:, 2]).all()  # the cabinet's cut top has its box's height
    assert scene_points(lambda t, a: {"error": "too few valid pixels"}, TABLE_Z, EEF_Z4, eef_xy=(-0.2, 0.0)).shape == (0, 3)


def test_carry_route_keeps_off_a_rack_taller_than_the_band():
    r = max(BOWL4.major_extent, BOWL4.minor_extent) / 2
    start, goal, bottom = (-0.065, 0.130), CAB_TOP.center[:2], 1.186
    call = _cloud_call(np.concatenate([RACK_STEPS, ARM, CABINET_EDGE]))
    blind = clutter_points(scene_points(call, TABLE_Z, EEF_Z4, boxes=CABINET), BOWL4, CAB_TOP)
    seen = clutter_points(scene_points(call, TABLE_Z, EEF_Z4, boxes=CABINET, eef_xy=(-0.208, 0.0)), BOWL4, CAB_TOP)
    corner = [start, (start[0], goal[1]), goal]  # the L whose first leg ran into the rack (seed 0)
    assert route_top(blind, corner, r + CARRY_MARGIN) < bottom  # the band alone: looks clear
    assert route_top(seen, corner, r + CARRY_MARGIN) == pytest.approx(1.24)
    assert carry_route(seen, start, goal, r, bottom, 1.21) == ([], pytest.approx(bottom))
