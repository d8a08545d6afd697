"""Pure tests of placing into a cavity through its door (:mod:`rpent.robots.libero.skills.cavity`)
and of the instructions that ask for it (:func:`rpent.robots.libero.skills.language.through_door`):
the microwave's ``view_fixtures`` answer recorded on libero_10 t9 (door open at -1.579 rad) and a
point cloud of a mug made to LIBERO's ``white_yellow_mug`` (body 0.048 m in radius, handle
reaching 0.086 m from its axis)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills import cavity
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import FixtureGoal, PickPlaceGoal, TaskPlan, parse_task, through_door

MICROWAVE = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -1.579, "range": [-2.094, 0.0],
             "axis": [0.0, 0.0, 1.0], "pos": [-0.1808, 0.2524, 1.016], "handle": None,
             "min": [-0.2468, -0.0062, 0.9247], "max": [-0.1832, 0.2524, 1.1069]}


def _mug(axis=(0.0, 0.0), handle_dir=(0.0, -1.0), radius=0.048, reach=0.086, seed=0):
    """Points of a mug seen from above: the rim ring, some of its inside, and a handle bar."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-math.pi, math.pi, 600)
    rr = radius - rng.uniform(0.0, 0.006, 600)
    body = np.column_stack([np.cos(a) * rr, np.sin(a) * rr])
    inside = rng.uniform(-0.03, 0.03, (200, 2))
    h = np.asarray(handle_dir, dtype=float) / np.linalg.norm(handle_dir)
    t = rng.uniform(radius, reach, 80)
    s = rng.uniform(-0.008, 0.008, 80)
    bar = t[:, None] * h + s[:, None] * np.array([-h[1], h[0]])
    xy = np.concatenate([body, inside, bar]) + np.asarray(axis)
    return np.column_stack([xy, rng.uniform(0.91, 1.0, len(xy))])


@pytest.mark.parametrize("text, obj", [
    ("put the yellow and white mug in the microwave and close it", "yellow and white mug"),
    ("place yellow and white mug in microwave and close door", "yellow and white mug"),
    ("put the white mug in the microwave and close it", "white mug"),
])
def test_put_into_the_microwave_and_close_it_parses(text, obj):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan)
    put, close = plan.steps
    assert isinstance(put, PickPlaceGoal) and (put.object_phrase, put.target_phrase, put.relation) == (obj, "microwave", "in")
    assert through_door(put) and put.target_part is None
    assert isinstance(close, FixtureGoal) and (close.action, close.fixture_phrase) == ("close", "microwave")


def test_open_then_put_inside_goes_through_the_door():
    plan = parse_task("open the microwave and put the mug inside")
    assert isinstance(plan, TaskPlan) and through_door(plan.steps[1]) and plan.steps[1].target_part is None
    assert not through_door(parse_task("put the bowl on the microwave").steps[0])


def test_cavity_frame_of_the_open_microwave():
    cav = cavity.cavity_frame(MICROWAVE)
    # the door shuts along +x from its hinge; the front faces -y (toward the table's centre)
    assert cav["u"] == pytest.approx([1.0, 0.0], abs=0.02) and cav["n"] == pytest.approx([0.0, -1.0], abs=0.02)
    assert cav["floor_z"] == pytest.approx(0.944) and cav["ceiling_z"] == pytest.approx(1.088)
    assert cavity.door_open_enough(cav)
    assert not cavity.door_open_enough(cavity.cavity_frame({**MICROWAVE, "qpos": -1.0}))


@pytest.mark.parametrize("handle_dir", [(0.0, -1.0), (1.0, 0.0), (-0.6, 0.8)])
def test_find_handle(handle_dir):
    h = cavity.find_handle(_mug(axis=(0.1, -0.2), handle_dir=handle_dir), (0.11, -0.21))
    assert h is not None
    assert h.axis == pytest.approx((0.1, -0.2), abs=0.004) and h.radius == pytest.approx(0.048, abs=0.004)
    d = np.asarray(handle_dir) / np.linalg.norm(handle_dir)
    assert float(np.dot(h.direction, d)) > 0.99 and h.reach == pytest.approx(0.086, abs=0.005)


def test_a_round_object_has_no_handle():
    assert cavity.find_handle(_mug(reach=0.05), (0.0, 0.0)) is None


def test_insertion_plan_puts_the_body_in_and_keeps_the_hand_out():
    cav = cavity.cavity_frame(MICROWAVE)
    handle = cavity.Handle((0.0, 0.0), 0.048, (0.0, -1.0), 0.086)
    obj = ObjectEstimate(center=(0.0, 0.0, 0.95), top_z=1.005, bottom_z=0.901)
    grasp = cavity.handle_grasp(obj, handle)
    assert grasp["xyz"][:2] == pytest.approx([0.0, -0.081]) and grasp["xyz"][2] == pytest.approx(0.985)
    plan = cavity.insertion_plan(cav, obj, handle, grasp)
    n = cav["n"]
    front = cav["c"] @ n  # the front plane along n
    final = np.asarray(plan["final"][:2])
    # the hand's inner face stays out of the front; the body's axis is inside, over the floor
    assert final @ n - 0.035 - front == pytest.approx(cavity.FRONT_GAP, abs=1e-6)
    assert plan["axis_depth"] >= cavity.AXIS_MIN_DEPTH
    assert np.asarray(plan["stage"][:2]) @ n - front > grasp["grip_r"] + handle.radius  # wholly out in front first
    assert plan["release_z"] - (grasp["xyz"][2] - obj.bottom_z) == pytest.approx(cav["floor_z"] + cavity.RELEASE_LIFT)
    assert plan["yaw"] == pytest.approx(math.atan2(n[1], n[0]))


def test_insertion_plan_refuses_what_does_not_fit():
    cav = cavity.cavity_frame(MICROWAVE)
    handle = cavity.Handle((0.0, 0.0), 0.048, (0.0, -1.0), 0.086)
    tall = ObjectEstimate(center=(0.0, 0.0, 0.98), top_z=1.06, bottom_z=0.90)
    assert "ceiling" in cavity.insertion_plan(cav, tall, handle, cavity.handle_grasp(tall, handle))["error"]
    stub = cavity.Handle((0.0, 0.0), 0.048, (0.0, -1.0), 0.06)
    obj = ObjectEstimate(center=(0.0, 0.0, 0.95), top_z=1.005, bottom_z=0.901)
    assert "too short" in cavity.insertion_plan(cav, obj, stub, cavity.handle_grasp(obj, stub))["error"]


def _porcelain(seed=0):
    """Points of a mug made to LIBERO's ``porcelain_mug`` (rim 0.108 m up, handle toward -y): a
    vertical outer bar 7.3-8.0 cm from the axis from 3.6 to 7.6 cm up, and above it a piece
    slanting in to the wall at 9.5 cm up."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-math.pi, math.pi, 600)
    rr = 0.045 - rng.uniform(0.0, 0.005, 600)
    body = np.column_stack([np.cos(a) * rr, np.sin(a) * rr, rng.uniform(0.905, 1.008, 600)])
    bar = np.column_stack([rng.uniform(-0.008, 0.008, 60), -rng.uniform(0.073, 0.080, 60), rng.uniform(0.936, 0.976, 60)])
    t = rng.uniform(0.0, 1.0, 60)
    slant = np.column_stack([rng.uniform(-0.008, 0.008, 60), -(0.078 - 0.033 * t), 0.976 + 0.019 * t])
    return np.concatenate([body, bar, slant])


def test_handle_grasp_takes_the_outer_bar_below_the_slanting_top():
    obj = ObjectEstimate(center=(0.0, 0.0, 0.956), top_z=1.008, bottom_z=0.9)
    handle = cavity.Handle((0.0, 0.0), 0.045, (0.0, -1.0), 0.080)
    g = cavity.handle_grasp(obj, handle, _porcelain())
    # below the top of the outer bar (where the slanting piece begins), not at the rim's height less 2 cm
    assert 0.964 <= g["xyz"][2] <= 0.974
    assert g["grip_r"] == pytest.approx(0.080 - cavity.HANDLE_GRIP_INSET, abs=0.003)
    assert g["xyz"][:2] == pytest.approx([0.0, -g["grip_r"]])


def test_the_carry_goes_over_the_fixture_when_its_body_stands_in_the_way():
    cav = cavity.cavity_frame(MICROWAVE)  # hinge at (-0.181, 0.252), front toward -y, top at 1.107
    stage = cav["c"] + cav["u"] * cavity.AXIS_U + cav["n"] * 0.16
    # from the table in front: the low carry
    assert not cavity.crosses_body(cav, (-0.02, -0.08), stage, 0.13)
    assert cavity.carry_height(cav, (-0.02, -0.08), stage, 0.08, 0.13, 1.118) == 1.118
    # from behind the microwave (its front faces away): the mug's bottom clears its top
    behind = (-0.03, 0.55)
    assert cavity.crosses_body(cav, behind, stage, 0.13)
    z = cavity.carry_height(cav, behind, stage, 0.08, 0.13, 1.118)
    assert z - 0.08 == pytest.approx(1.016 + cavity.BODY_TOP_ABOVE_HINGE + cavity.OVER_BODY_GAP)


#: the microwave's door as ``view_fixtures`` read it on libero_10_task t9 seed 2 after it was
#: pushed open (its free edge ~1 cm from the arm's start at (-0.2, 0.0))
PUSHED_OPEN = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -1.6983, "range": [-2.094, 0.0],
               "axis": [0.0, 0.0, 1.0], "pos": [-0.16679, 0.26908, 1.016], "handle": None,
               "min": [-0.26174, 0.01284, 0.92472], "max": [-0.16920, 0.27172, 1.10691],
               "footprint": [[-0.263152, 0.020667], [-0.202052, 0.012837], [-0.169200, 0.269178],
                             [-0.230301, 0.277008]]}


def test_the_approach_to_the_grip_goes_over_the_door_where_it_stands_in_the_way():
    cav = cavity.cavity_frame(PUSHED_OPEN)
    home, grip = (-0.2, 0.0), (-0.097, -0.197)
    low = 1.0923  # 8 cm over the mug's top: the open fingertips 1.5 cm below the door's top
    assert cavity.crosses_door(cav, home, grip, cavity.HAND_REACH)
    z = cavity.approach_height(cav, home, grip, low)
    assert z - cavity.FINGER_BELOW_EEF == pytest.approx(1.107 + cavity.OVER_DOOR_GAP, abs=1e-3)
    # from a start clear of the door and the body: the low approach
    assert not cavity.crosses_door(cav, (0.05, -0.1), grip, cavity.HAND_REACH)
    assert cavity.approach_height(cav, (0.05, -0.1), grip, low) == low
    # from behind the microwave: over its body
    assert cavity.approach_height(cav, (0.0, 0.55), (0.1, 0.7), low) > 1.107 + cavity.FINGER_BELOW_EEF


def test_a_retry_carries_the_tilted_object_in_between_floor_and_ceiling():
    # libero_10_task t9 seed 3: the hand's quaternion (xyzw) when its fingers closed on the mug's
    # handle and where the carried mug stopped 5 cm short of its place (hand tilted 18 degrees)
    grasped = [0.71647, 0.69563, 0.04788, 0.02174]
    stalled = [0.70630, -0.69014, -0.15349, -0.03604]
    from rpent.robots.libero.geometry import quat_xyzw_to_matrix
    rel = quat_xyzw_to_matrix(np.array(stalled)) @ quat_xyzw_to_matrix(np.array(grasped)).T
    obj = ObjectEstimate(center=(-0.0757, -0.2819, 0.9567), top_z=1.0124, bottom_z=0.901)
    handle = cavity.Handle(axis=(-0.076, -0.283), radius=0.045, direction=(0.03, 1.0), reach=0.081)
    grasp = {"xyz": [-0.0734, -0.2085, 0.9704], "yaw": 1.54, "grip_r": 0.0755}
    cav = cavity.cavity_frame(MICROWAVE)  # floor 0.944, ceiling 1.088
    # untilted: the plan's own heights (the object's bottom IN_LIFT over the floor)
    below, above = cavity.carried_extent(obj, handle, grasp, np.eye(3))
    assert below == pytest.approx(0.9704 - 0.901) and above == pytest.approx(1.0124 - 0.9704)
    assert cavity.tilted_in_heights(cav, below, above)[0] == pytest.approx(0.944 + cavity.IN_LIFT + below)
    # turned with the hand, its far top rises: at the plan's height it would reach past the ceiling
    below_t, above_t = cavity.carried_extent(obj, handle, grasp, rel)
    assert 0.944 + cavity.IN_LIFT + below + above_t > 1.088
    in_z, release_z = cavity.tilted_in_heights(cav, below_t, above_t)
    assert in_z + above_t <= 1.088 - cavity.CEILING_GAP + 1e-9 and in_z - below_t >= 0.944
    assert in_z < 0.944 + cavity.IN_LIFT + below and release_z <= in_z


def test_a_retry_goes_up_when_the_floor_pushed_the_object_up_and_down_when_the_ceiling_did():
    cav = cavity.cavity_frame(MICROWAVE)  # floor 0.944, ceiling 1.088
    below, above = 0.069, 0.042  # a mug held 6.9 cm over its bottom, 4.2 cm under its top
    in_z = 0.944 + cavity.IN_LIFT + below
    # libero_10_swap t9 seed 1: the hand stopped 8 mm above the carry-in height (the bottom on the floor's edge)
    z, release_z = cavity.retry_in_heights(cav, below, above, in_z, 0.008)
    assert z > in_z and z + above == pytest.approx(1.088 - cavity.CEILING_GAP)
    assert release_z == pytest.approx(0.944 + cavity.RELEASE_LIFT + below)
    # libero_10_task t9 seed 3: pushed 5 mm down (the top on the ceiling's edge): the tilted heights
    assert cavity.retry_in_heights(cav, 0.062, 0.071, in_z, -0.005) == cavity.tilted_in_heights(cav, 0.062, 0.071)
    assert cavity.retry_in_heights(cav, 0.062, 0.071, in_z, -0.005)[0] < in_z
