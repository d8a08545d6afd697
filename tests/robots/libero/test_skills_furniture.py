"""Pure tests of the scripted planner's furniture awareness: drawer boxes from ``view_fixtures``,
rim grasps in and beside a cabinet, crossing heights, and clearing an opening drawer's path.

The scenes are recorded from real runs (seed 0): the ``view_fixtures`` answers and the
``segment(all_instances=True)`` estimates of libero_spatial task 4 (a bowl in the open top
drawer of a cabinet turned ~64 degrees), libero_spatial task 6 (a bowl beside that cabinet)
and libero_goal task 3 (a bowl under the path of the top drawer), and the agentview camera
calibration of libero_goal (``view_camera_meta``).
"""

from __future__ import annotations

import math

import pytest

from rpent.robots.libero.skills import clearing
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import (
    REACH_SOFT,
    ROBOT_BASE_XY,
    HAND_HALF_LENGTH,
    HAND_HALF_THICKNESS,
    RIM_INSET,
    box_from_part,
    column_blocked,
    plan_grasp,
)
from rpent.robots.libero.skills.motion import _furniture_clear_z


def est(center, top, bottom, major, minor):
    return ObjectEstimate(center=tuple(center), top_z=top, bottom_z=bottom, major_extent=major, minor_extent=minor,
                          source="recorded")


def drawer(name, qpos, axis, pos, handle, lo, hi):
    return {"part": name, "joint": name, "type": "slide", "qpos": qpos, "range": [-0.16, 0.01], "axis": axis,
            "pos": pos, "handle": handle, "min": lo, "max": hi}


# libero_spatial t4 s0: the top drawer open (qpos -0.156), the bowl inside it
SP4_TOP = drawer("cabinet_top", -0.1556, [-0.436, -0.9, 0.0], [0.089, -0.138, 0.905], [0.131, -0.057, 1.089],
                 [-0.055, -0.27, 1.053], [0.22, -0.018, 1.124])
SP4_BOWL = est((0.0875, -0.1299, 1.0923), 1.1141, 1.0713, 0.1019, 0.096)
SP4_CABINET = est((0.0857, -0.1563, 1.0141), 1.1274, 0.9009, 0.2548, 0.2412)
SP4_BOWL_2 = est((0.0171, -0.2733, 1.0396), 1.178, 0.9012, 0.0975, 0.0769)
# libero_spatial t6 s0: the closed drawers of the same cabinet, the bowl beside it
SP6_PARTS = [
    drawer("cabinet_top", 0.0, [-0.407, -0.914, 0.0], [0.039, -0.276, 0.905], [0.078, -0.194, 1.089],
           [-0.105, -0.407, 1.053], [0.169, -0.158, 1.124]),
    drawer("cabinet_middle", 0.0, [-0.407, -0.914, 0.0], [0.039, -0.276, 0.905], [0.078, -0.194, 1.015],
           [-0.105, -0.407, 0.983], [0.168, -0.158, 1.054]),
]
SP6_BOWL = est((0.1374, -0.072, 0.9256), 0.9504, 0.9008, 0.1002, 0.0957)
SP6_OTHERS = [est((0.0793, 0.0326, 0.9105), 0.9202, 0.9008, 0.0684, 0.0498),  # cookies
              est((0.0675, 0.195, 0.9093), 0.9178, 0.9009, 0.1065, 0.1047),  # plate
              est((-0.2615, -0.1324, 0.9393), 0.9773, 0.9012, 0.0995, 0.0854)]  # the other bowl
# libero_goal t3 s0: the top drawer closed, and opened (qpos -0.16) over the bowl
G3_TOP = drawer("cabinet_top", 0.0, [0.0, -1.0, 0.0], [0.025, -0.232, 0.905], [0.028, -0.14, 1.089],
                [-0.09, -0.327, 1.053], [0.133, -0.122, 1.124])
G3_TOP_OPEN = drawer("cabinet_top", -0.16, [0.0, -1.0, 0.0], [0.025, -0.072, 0.905], [0.028, 0.02, 1.089],
                     [-0.09, -0.167, 1.053], [0.133, 0.038, 1.124])
G3_BOWL = est((-0.0748, 0.0262, 0.9256), 0.9503, 0.901, 0.1006, 0.0721)
G3_BOWL_BOX = (124, 132, 149, 159)  # its segment box [x0, y0, x1, y1] (px) in the 256 px agentview image
GOAL_CAMERA = {"height": 256, "width": 256,
               "intrinsic_K": [[309.01933598375615, 0.0, 128.0], [0.0, 309.01933598375615, 128.0], [0.0, 0.0, 1.0]],
               "extrinsic_cam2world": [[-7.268184498698815e-08, 0.6282664504107425, -0.7779982437565529, 0.6586131746834771],
                                       [0.9999999999999858, -7.268184498698815e-08, -1.521152659944569e-07, 0.0],
                                       [-1.521152659944569e-07, -0.7779982437565529, -0.6282664504107283, 1.6103500240372424],
                                       [0.0, 0.0, 0.0, 1.0]]}


def test_drawer_box_from_a_turned_aabb():
    b = box_from_part(SP4_TOP)
    # the drawer's own size (from the cabinet MJCF: ~0.17 m deep with its front, ~0.22 m wide)
    assert b.half_length == pytest.approx(0.086, abs=0.004) and b.half_width == pytest.approx(0.111, abs=0.004)
    assert math.cos(b.yaw) * -0.436 + math.sin(b.yaw) * -0.9 == pytest.approx(1.0, abs=1e-3)  # along the joint axis
    assert b.signed_distance(*SP4_BOWL.center[:2]) < -0.05  # the bowl sits well inside
    g = box_from_part(G3_TOP)  # an axis-aligned drawer keeps its AABB
    assert 2 * g.half_length == pytest.approx(0.205, abs=1e-3) and 2 * g.half_width == pytest.approx(0.223, abs=1e-3)


def _outer_finger(grasp, obj):
    dx, dy = grasp["offset"]
    n = math.hypot(dx, dy)
    r = n + RIM_INSET
    return obj.center[0] + dx / n * (r + 0.03), obj.center[1] + dy / n * (r + 0.03)


def test_rim_grasp_in_an_open_drawer_keeps_off_its_walls():
    box = box_from_part(SP4_TOP)
    # without the drawer the cabinet's round footprint pushed the grasp to +y, onto the drawer
    # front: the descent stopped 3.3 cm high and the fingers closed on nothing (recorded run)
    old = plan_grasp(SP4_BOWL, 0.0, obstacles=[SP4_CABINET, SP4_BOWL_2])
    assert box.clearance(*_outer_finger(old, SP4_BOWL)) < 0.005
    g = plan_grasp(SP4_BOWL, 0.0, obstacles=[SP4_CABINET, SP4_BOWL_2], boxes=[box])
    assert g["kind"] == "rim"
    assert box.clearance(*_outer_finger(g, SP4_BOWL)) > 0.03


def _hand_clearance(g, boxes):
    dx, dy = g["offset"]
    n = math.hypot(dx, dy)
    pts = [(g["xyz"][0] + dx / n * t, g["xyz"][1] + dy / n * t) for t in (-HAND_HALF_LENGTH, 0.0, HAND_HALF_LENGTH)]
    return min(b.signed_distance(x, y) for b in boxes for x, y in pts) - HAND_HALF_THICKNESS


def test_rim_grasp_beside_a_cabinet_keeps_the_hand_off_it():
    boxes = [box_from_part(p) for p in SP6_PARTS]
    old = {"xyz": [0.1374, -0.108975, 0.9304], "offset": [0.0, -0.036975]}  # the grasp of the recorded run
    assert _hand_clearance(old, boxes) < 0  # ... whose hand stalled against the cabinet
    g = plan_grasp(SP6_BOWL, 0.0, obstacles=SP6_OTHERS, boxes=boxes)
    assert g["kind"] == "rim" and _hand_clearance(g, boxes) > 0.02
    assert math.hypot(g["xyz"][0] - ROBOT_BASE_XY[0], g["xyz"][1] - ROBOT_BASE_XY[1]) < REACH_SOFT + 0.03


def test_rim_side_within_reach_of_grasp_and_place():
    # libero_spatial t6 seed 1 (recorded): by the far (+x) rim the eef stalled 24 cm above the
    # plate (0.81 m from the robot base); the near (-x) rim has nearly as much clearance
    boxes = [box_from_part(dict(p, axis=[-0.4404, -0.8978, 0.0], min=lo, max=hi)) for p, lo, hi in (
        (SP6_PARTS[0], [-0.1196, -0.4046, 1.0528], [0.1559, -0.1511, 1.1236]),
        (SP6_PARTS[1], [-0.1198, -0.4045, 0.9829], [0.1558, -0.1511, 1.0536]))]
    bowl = est((0.1215, -0.0747, 0.9249), 0.9498, 0.9008, 0.1003, 0.0963)
    others = [est((0.0839, 0.0153, 0.9105), 0.9202, 0.9008, 0.0697, 0.0501),
              est((0.0456, 0.2112, 0.9094), 0.9178, 0.9009, 0.1063, 0.1039),
              est((-0.2471, -0.1363, 0.9393), 0.9775, 0.9012, 0.1008, 0.0813)]
    g = plan_grasp(bowl, 0.0, obstacles=others, boxes=boxes, place_xy=(0.0442, 0.2095))
    assert g["offset"][0] < -0.03  # the rim nearest the robot
    px, py = 0.0442 + g["offset"][0], 0.2095 + g["offset"][1]
    assert math.hypot(px - ROBOT_BASE_XY[0], py - ROBOT_BASE_XY[1]) < REACH_SOFT


def test_no_furniture_no_change():
    for obj, others in ((SP6_BOWL, SP6_OTHERS), (SP4_BOWL, [SP4_BOWL_2])):
        assert plan_grasp(obj, 0.0, obstacles=others) == plan_grasp(obj, 0.0, obstacles=others, boxes=())


def test_crossing_height_clears_furniture_near_the_path():
    boxes = [box_from_part(p) for p in SP6_PARTS]
    # the recorded run crossed at 1.03 m from (-0.04, -0.04) to the bowl and stalled at x = 0.005
    assert _furniture_clear_z(boxes, (-0.04, -0.04), SP6_BOWL.center) == pytest.approx(1.124 + 0.06)
    assert _furniture_clear_z(boxes, (-0.2, 0.2), (0.05, 0.25)) == 0.0
    assert _furniture_clear_z([], (-0.04, -0.04), SP6_BOWL.center) == 0.0


def test_an_open_drawer_overhangs_the_bowl_and_its_path_is_cleared_first():
    open_box = box_from_part(G3_TOP_OPEN)
    approach_z = G3_BOWL.top_z + 0.08
    assert column_blocked(G3_BOWL.center[0], G3_BOWL.center[1], approach_z, [open_box], margin=0.06) == 1.124
    assert column_blocked(G3_BOWL.center[0], G3_BOWL.center[1], approach_z, [box_from_part(G3_TOP)], margin=0.06) is None
    sweep = clearing.sweep_box(G3_TOP, 0.17)
    # opening 0.17 m (clipped to the 0.16 m range) sweeps to the open drawer's front
    assert sweep.signed_distance(-0.0, 0.038 - 0.002) < 0 < sweep.signed_distance(0.0, 0.038 + 0.005)
    assert clearing.in_sweep(G3_BOWL, sweep)
    assert not clearing.in_sweep(est((-0.2, 0.2, 0.92), 0.95, 0.9, 0.1, 0.1), sweep)
    spots = clearing.spot_candidates(G3_BOWL, sweep)
    assert len(spots) >= 3
    for x, y in spots:
        assert sweep.signed_distance(x, y) >= G3_BOWL.major_extent / 2 + 0.09 - 1e-9
        assert math.hypot(x - G3_BOWL.center[0], y - G3_BOWL.center[1]) >= G3_BOWL.major_extent + 0.03 - 1e-9
        assert clearing.SPOT_X[0] <= x <= clearing.SPOT_X[1] and clearing.SPOT_Y[0] <= y <= clearing.SPOT_Y[1]
    dist = [math.hypot(x - G3_BOWL.center[0], y - G3_BOWL.center[1]) for x, y in spots]
    assert dist == sorted(dist) and dist[0] < 0.2  # nearest first


def test_disc_projection_matches_the_recorded_segment_box():
    rows, cols = clearing.project_disc(GOAL_CAMERA, G3_BOWL.center[0], G3_BOWL.center[1], G3_BOWL.center[2], 0.02)
    x0, y0, x1, y1 = G3_BOWL_BOX
    assert x0 <= cols[0] <= cols[1] <= x1 and y0 <= rows[0] <= rows[1] <= y1
    big = clearing.project_disc(GOAL_CAMERA, G3_BOWL.center[0], G3_BOWL.center[1], G3_BOWL.bottom_z, 0.09)
    assert big[1][1] - big[1][0] > cols[1] - cols[0]
    assert clearing.project_disc(GOAL_CAMERA, 2.0, 0.0, 0.9, 0.05) is None  # behind the camera
    assert clearing.project_disc(GOAL_CAMERA, -0.3, 0.9, 0.9, 0.05) is None  # outside the image


def test_free_spot_reads_back_projected_points():
    seen = []

    def call(tool, args):  # the recorded scene: something stands at the first spot only
        if tool == "view_camera_meta":
            return {"camera_meta": GOAL_CAMERA}
        assert tool == "back_project" and args["z_min"] > 0.9 and args["camera"] == "agentview"
        seen.append(args)
        return {"n_valid": 40} if len(seen) == 1 else {"error": "too few valid pixels in region after z-filter (0 < 8)"}

    sweep = clearing.sweep_box(G3_TOP, 0.17)
    spots = clearing.spot_candidates(G3_BOWL, sweep)
    assert clearing.find_free_spot(call, G3_BOWL, sweep, G3_BOWL.bottom_z) == spots[1]
    assert len(seen) == 2


def test_a_hand_well_clear_of_furniture_keeps_the_default_rim_side():
    # libero_goal t4 seed 0 (recorded): the bowl 4.3 cm from the closed cabinet's drawers;
    # the +y rim (the default, fingers along world y) keeps the hand 4.3 cm off the cabinet
    parts = [drawer(n, 0.0, [0.0, -1.0, 0.0], [0.03, -0.24, 0.905], None, [-0.082, -0.343, z0], [0.141, -0.137, z1])
             for n, z0, z1 in (("cabinet_top", 1.053, 1.124), ("cabinet_middle", 0.983, 1.054),
                               ("cabinet_bottom", 0.913, 0.984))]
    bowl = est((-0.1005, 0.0071, 0.9249), 0.9498, 0.901, 0.1011, 0.0942)
    g = plan_grasp(bowl, 0.0, boxes=[box_from_part(p) for p in parts], place_xy=(0.042, -0.2426))
    assert g["kind"] == "rim" and g["offset"][1] > 0.03 and g["yaw"] == 0.0


def test_carry_height_capped_where_the_arm_stalls_but_clears_the_target():
    from rpent.robots.libero.skills.grasp import StrategyParams
    from rpent.robots.libero.skills.motion import _reachable_carry

    p = StrategyParams()
    assert _reachable_carry(1.10, 0.95, p) == 1.10  # below the cap: unchanged
    # libero_goal t2 seed 1: a bottle hanging 0.115 m over a 1.13 m cabinet top -> 1.305 m was not reached
    assert _reachable_carry(1.305, 1.13 + 0.115, p) == p.max_carry_z
    # never so low that the carried object's bottom comes within 2 cm of the target's top
    assert _reachable_carry(1.40, 1.30, p) == 1.32
