"""Pure tests of the libero_10 skills: the handle grasp of a tall pot, the spacing of two pots on
a stove, and where a drawer is pushed shut.

The scenes are recorded from real runs: ``segment(all_instances=True)`` estimates of the two moka
pots and the stove of libero_10 task 8 (seed 0) and libero_10_swap task 8 (seed 0), and the
``view_fixtures`` answer of libero_10 task 3 (seed 0: the bottom drawer of the white cabinet open
at qpos -0.146 m). The moka pot's true handle bar (x -0.061..-0.048 m, y 0.167..0.214 m, z
0.956..1.034 m) and body (x -0.095..-0.015 m, y 0.223..0.289 m) are the world boxes of its
collision geoms in libero_10 t8 s0, read from the simulator once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills import fixtures, layout
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY, handle_point, plan_grasp


def est(center, top, bottom, yaw, major, minor, support=None):
    return ObjectEstimate(center=tuple(center), top_z=top, bottom_z=bottom, major_yaw=yaw, major_extent=major,
                          minor_extent=minor, source="recorded", support=support)


# libero_10 t8 s0 (agentview masks)
POT_1 = est((-0.0444, 0.2415, 0.9692), 1.0375, 0.901, 1.4652, 0.1052, 0.0477, (-0.0464, 0.2527, 1.0327))
POT_2 = est((0.0511, 0.031, 0.9728), 1.0447, 0.9009, 1.5071, 0.1031, 0.0497, (0.0493, 0.0388, 1.0327))
HANDLE_BAR = ((-0.061, -0.048), (0.167, 0.214), (0.956, 1.034))  # POT_1's handle (x, y, z ranges)
BODY_Y_MIN = 0.223  # POT_1's body starts here (its handle side)
# libero_10_swap t8 s0
SWAP_POT_1 = est((-0.0458, 0.2416, 0.9692), 1.037, 0.901, 1.457, 0.104, 0.048, (-0.0478, 0.2529, 1.0329))
SWAP_STOVE = est((0.1977, 0.04, 0.9153), 0.93, 0.9, 0.024, 0.175, 0.166, (0.1911, 0.0389, 0.925))
# libero_10 t3 s0: the white cabinet's bottom drawer, open, and the middle one above it
T3_BOTTOM = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": -0.1460353727890157,
             "range": [-0.16, 0.01], "axis": [0.0, 1.0, 0.0], "pos": [-0.0012, 0.1476, 0.905],
             "handle": [-0.0038, 0.0561, 0.9466], "min": [-0.1084, 0.0373, 0.9133], "max": [0.1140, 0.2429, 0.9841]}
T3_MIDDLE_MIN_Z = 0.9829


def test_handle_point_lands_on_the_recorded_handle_bar():
    (x0, x1), (y0, y1), _ = HANDLE_BAR
    for pot in (POT_1, SWAP_POT_1):
        hx, hy = handle_point(pot)
        assert y0 <= hy <= y1 - 0.01  # on the bar, the finger pads (~2 cm wide) off the body
        assert hy + 0.01 < BODY_Y_MIN
        assert x0 - 0.015 <= hx <= x1 + 0.015  # the open fingers (7.9 cm) straddle the 1.3 cm bar


def test_handle_grasp_closes_across_the_bar_and_puts_the_body_over_the_target():
    g = plan_grasp(POT_1, current_yaw=0.0)
    assert g["kind"] == "handle"
    # fingers close along (-sin yaw, cos yaw): across the long (handle-spout) axis
    closing = (-math.sin(g["yaw"]), math.cos(g["yaw"]))
    along = (math.cos(POT_1.major_yaw), math.sin(POT_1.major_yaw))
    assert abs(closing[0] * along[0] + closing[1] * along[1]) < 0.05
    lo, hi = HANDLE_BAR[2]
    assert lo + 0.013 < g["xyz"][2] < hi  # the pads (1.3 cm below the grip site) on the bar
    # carried with this offset, the lid (over the body) ends at the target's centre
    target = (0.2, 0.04)
    eef = (target[0] + g["offset"][0], target[1] + g["offset"][1])
    lid = (eef[0] - (g["xyz"][0] - POT_1.support[0]), eef[1] - (g["xyz"][1] - POT_1.support[1]))
    assert lid == pytest.approx(target, abs=1e-9)
    # the other pot, its handle toward -y too
    g2 = plan_grasp(POT_2, current_yaw=0.0)
    assert g2["kind"] == "handle" and g2["xyz"][1] < POT_2.center[1] - 0.04


def test_no_handle_side_no_handle_grasp():
    centred = est(POT_1.center, POT_1.top_z, POT_1.bottom_z, POT_1.major_yaw, POT_1.major_extent,
                  POT_1.minor_extent, (POT_1.center[0], POT_1.center[1] + 0.003, 1.03))
    assert handle_point(centred) is None
    assert plan_grasp(centred, 0.0)["kind"] == "rim"  # as before: the oblong rule
    no_support = est(POT_1.center, POT_1.top_z, POT_1.bottom_z, POT_1.major_yaw, POT_1.major_extent,
                     POT_1.minor_extent)
    assert handle_point(no_support) is None
    bowl = est((0.1374, -0.072, 0.9256), 0.9504, 0.9008, 0.0, 0.1002, 0.0957, (0.14, -0.07, 0.91))
    assert plan_grasp(bowl, 0.0)["kind"] == "rim"  # short: a bowl, not a pot
    bottle = est((0.0, 0.0, 1.0), 1.2, 0.9, 0.0, 0.075, 0.07, (0.01, 0.0, 1.2))
    assert handle_point(bottle) is None  # tall but not oblong


def test_two_pots_on_the_stove_stand_a_pot_width_apart_on_the_cook_region():
    a = layout.slot_offset(SWAP_STOVE, SWAP_POT_1, 0, 2)
    b = layout.slot_offset(SWAP_STOVE, SWAP_POT_1, 1, 2)
    assert a[1] == b[1] == 0.0 and a[0] > 0 > b[0]  # along x (across the pots' handle axis), far one first
    assert a[0] - b[0] >= 0.08  # the moka pot's body is 0.08 m wide across its handle axis
    assert max(abs(a[0]), abs(b[0])) <= 0.075 - 0.03  # 3 cm of error left inside the 0.15 m cook region


def test_drawer_push_plan_on_the_recorded_bottom_drawer():
    plan = fixtures.drawer_push_plan(T3_BOTTOM)
    assert np.allclose(plan["d_open"], [0.0, -1.0, 0.0])
    lo_x = T3_BOTTOM["min"][0]
    # pushed near the end of the front nearest the robot base (x = -0.66): the forearm stays off the cabinet
    assert ROBOT_BASE_XY[0] < lo_x
    assert plan["start"][0] == pytest.approx(lo_x + fixtures.DRAWER_PUSH_EDGE)
    assert plan["goal"][0] == pytest.approx(plan["start"][0])
    # starts 5 cm in front of the open drawer's front, ends past where the front is when shut
    assert plan["start"][1] == pytest.approx(T3_BOTTOM["min"][1] - 0.05)
    shut_front = T3_BOTTOM["min"][1] - T3_BOTTOM["qpos"]
    assert plan["goal"][1] == pytest.approx(shut_front + fixtures.DRAWER_PUSH_PAST)
    # low on the drawer, below the drawer above, fingertips leaning into the push (+y: pitch > 0)
    assert T3_BOTTOM["min"][2] < plan["z"] < T3_MIDDLE_MIN_Z - 0.04
    assert plan["tilt"] == pytest.approx(fixtures.DRAWER_PUSH_TILT)
    assert plan["above_z"] > T3_BOTTOM["max"][2]


def test_drawer_push_plan_mirrors_for_a_drawer_opening_toward_plus_y():
    part = dict(T3_BOTTOM, axis=[0.0, -1.0, 0.0], min=[-0.1084, -0.2429, 0.9133], max=[0.1140, -0.0373, 0.9841])
    plan = fixtures.drawer_push_plan(part)
    assert np.allclose(plan["d_open"], [0.0, 1.0, 0.0])
    assert plan["tilt"] == pytest.approx(-fixtures.DRAWER_PUSH_TILT)
    assert plan["goal"][1] < plan["start"][1]
    assert plan["start"][0] == pytest.approx(part["min"][0] + fixtures.DRAWER_PUSH_EDGE)
    # a drawer along world x: no lean (the tilt turns about world x only)
    along_x = dict(T3_BOTTOM, axis=[1.0, 0.0, 0.0], min=[0.0, -0.11, 0.9133], max=[0.2, 0.11, 0.9841])
    assert fixtures.drawer_push_plan(along_x)["tilt"] == 0.0


# libero_10_lan t3 s0, before the close: the bottom drawer (open at qpos -0.150 m, with the bowl in
# it) and agentview clutter-cloud points (``clutter.scene_points``, the arm at its start pose):
# the wine bottle standing 4 mm beside the drawer's -x side, the drawer's own +x wall, and the
# cabinet's +x side behind the shut front.
LAN_T3_BOTTOM = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": -0.15039539378863145,
                 "range": [-0.16, 0.01], "axis": [0.0, 1.0, 0.0], "pos": [-0.0083, 0.1400, 0.905],
                 "handle": [-0.0109, 0.0485, 0.9466], "min": [-0.1155, 0.0297, 0.9133], "max": [0.1069, 0.2353, 0.9841]}
LAN_T3_BOTTLE = [[-0.142, 0.052, 1.058], [-0.141, 0.039, 1.048], [-0.136, 0.042, 1.048], [-0.139, 0.04, 1.042],
                 [-0.137, 0.052, 1.035], [-0.136, 0.053, 1.012], [-0.133, 0.05, 1.006], [-0.134, 0.053, 1.001],
                 [-0.138, 0.034, 0.99], [-0.135, 0.061, 0.984], [-0.13, 0.057, 0.984], [-0.126, 0.047, 0.983],
                 [-0.127, 0.034, 0.97], [-0.128, 0.061, 0.969], [-0.124, 0.038, 0.968], [-0.121, 0.044, 0.966],
                 [-0.12, 0.044, 0.958], [-0.122, 0.038, 0.952], [-0.126, 0.032, 0.944], [-0.123, 0.058, 0.947],
                 [-0.14, 0.025, 0.928], [-0.121, 0.051, 0.945], [-0.12, 0.045, 0.941], [-0.121, 0.042, 0.927]]
LAN_T3_DRAWER_WALL = [[0.103, 0.163, 0.949], [0.103, 0.077, 0.965], [0.104, 0.188, 0.949], [0.106, 0.065, 0.935]]
LAN_T3_CABINET_SIDE = [[0.115, 0.212, 1.1], [0.115, 0.237, 0.95], [0.115, 0.286, 1.108], [0.115, 0.334, 0.975]]
LAN_T3_BOTTLE_X_MAX = -0.12  # the bottle's side nearest the drawer (its collision box: x -0.163..-0.119 m)


def test_drawer_push_keeps_the_hand_off_what_stands_beside_the_drawer():
    from rpent.robots.libero.skills.grasp import HAND_HALF_LENGTH

    points = np.array(LAN_T3_BOTTLE + LAN_T3_DRAWER_WALL + LAN_T3_CABINET_SIDE)
    usual = fixtures.drawer_push_plan(LAN_T3_BOTTOM)
    # the usual push point (4 cm in from the -x end) puts the hand's -x end over the bottle
    assert usual["start"][0] == pytest.approx(LAN_T3_BOTTOM["min"][0] + fixtures.DRAWER_PUSH_EDGE)
    assert usual["start"][0] - HAND_HALF_LENGTH < LAN_T3_BOTTLE_X_MAX
    plan = fixtures.drawer_push_plan(LAN_T3_BOTTOM, points)
    x = plan["start"][0]
    assert plan["goal"][0] == pytest.approx(x)
    assert x - HAND_HALF_LENGTH >= LAN_T3_BOTTLE_X_MAX + 0.005  # the hand's end clears the bottle
    assert x + HAND_HALF_LENGTH < LAN_T3_BOTTOM["max"][0] + 0.05  # as near the usual end as that allows
    # everything else as planned without points
    for key in ("z", "tilt", "above_z"):
        assert plan[key] == pytest.approx(usual[key])
    assert plan["start"][1] == pytest.approx(usual["start"][1]) and plan["goal"][1] == pytest.approx(usual["goal"][1])
    # the drawer's own wall and the cabinet's side behind the shut front do not move the push
    own = fixtures.drawer_push_plan(LAN_T3_BOTTOM, np.array(LAN_T3_DRAWER_WALL + LAN_T3_CABINET_SIDE))
    assert own["start"][0] == pytest.approx(usual["start"][0])
    # nor does something beside it lower than the fingertips, or a top drawer's push over the bottle
    low = np.array(LAN_T3_BOTTLE) * [1, 1, 0] + [0, 0, 0.908]
    assert fixtures.drawer_push_plan(LAN_T3_BOTTOM, low)["start"][0] == pytest.approx(usual["start"][0])
    top = dict(LAN_T3_BOTTOM, min=[-0.1155, 0.0297, 1.1], max=[0.1069, 0.2353, 1.17])
    assert fixtures.drawer_push_plan(top, points)["start"][0] == pytest.approx(usual["start"][0])
