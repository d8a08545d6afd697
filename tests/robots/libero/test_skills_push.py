"""Push plans and the push goal beside a reference (pure logic; the push itself runs in
``test_scripted_skills_sim.py``, slow)."""

from __future__ import annotations

import pytest

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import PushGoal, TaskPlan, Unsupported, parse_instruction, parse_task
from rpent.robots.libero.skills.layout import extent_along
from rpent.robots.libero.skills.push import PUSH_GAP, SUPPORT_HALF, push_goal


@pytest.mark.parametrize("text, expected", [
    ("push the plate to the front of the stove", ("plate", "stove", "front")),
    ("Push the plate to the front of the stove.", ("plate", "stove", "front")),
    ("slide the plate to the left side of the black bowl", ("plate", "black bowl", "left")),
    ("push the red mug towards the rear of the cabinet", ("red mug", "cabinet", "back")),
])
def test_push_plans(text, expected):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan) and len(plan.steps) == 1
    g = plan.steps[0]
    assert isinstance(g, PushGoal) and (g.object_phrase, g.target_phrase, g.side) == expected
    assert isinstance(parse_instruction(text), Unsupported)  # one pick-and-place step only


def test_push_without_a_destination_is_declined():
    plan = parse_task("push the plate")
    assert isinstance(plan, Unsupported) and "push" in plan.reason


def test_push_goal_beside_the_reference():
    # libero_goal t5 (seed 0), recorded segment estimates: the stove's covers only its knob end,
    # its support is the burner; LIBERO's stove_front_region is x -0.09..-0.01, y 0.17..0.25
    stove = ObjectEstimate(center=(-0.4118, 0.2138, 0.9282), top_z=0.9554, bottom_z=0.9011, major_yaw=0.0326,
                           major_extent=0.0626, minor_extent=0.0198, support=(-0.2442, 0.2074, 0.9261))
    plate = ObjectEstimate(center=(0.0504, -0.0286, 0.9094), top_z=0.9179, bottom_z=0.9009, major_yaw=-1.4384,
                           major_extent=0.1065, minor_extent=0.1044, support=(0.0498, -0.0315, 0.9091))
    gx, gy = push_goal(stove, plate, "front")
    assert -0.08 < gx < -0.02 and 0.18 < gy < 0.24
    assert gx == pytest.approx(-0.2442 + SUPPORT_HALF + extent_along(plate, (1.0, 0.0)) / 2 + PUSH_GAP)
    # without a support surface: from the centre, half its extent
    box = ObjectEstimate(center=(0.0, 0.0, 0.95), top_z=1.0, bottom_z=0.9, major_extent=0.2, minor_extent=0.1)
    assert push_goal(box, plate, "right")[1] == pytest.approx(0.05 + extent_along(plate, (0.0, 1.0)) / 2 + PUSH_GAP)
    with pytest.raises(ValueError, match="side must be"):
        push_goal(stove, plate, "above")


def test_push_backoff_shortened_within_reach():
    import numpy as np

    from rpent.robots.libero.skills.push import PUSH_BACKOFF, PUSH_BACKOFF_MIN, _backoff

    # goal t5: plate at (0.050, -0.029), pushed toward (-0.068, 0.196): the far side is out of easy reach
    c = np.array([0.050, -0.029])
    u = np.array([-0.068 - 0.050, 0.196 + 0.029])
    u /= np.linalg.norm(u)
    assert _backoff(c, u, 0.053) == pytest.approx(PUSH_BACKOFF_MIN)
    # goal_swap t5: plate at (-0.203, -0.037): the full backoff
    c2 = np.array([-0.203, -0.037])
    u2 = np.array([-0.077 + 0.203, 0.211 + 0.037])
    u2 /= np.linalg.norm(u2)
    assert _backoff(c2, u2, 0.053) == PUSH_BACKOFF


def test_partly_hidden_look_is_not_trusted():
    from rpent.robots.libero.skills.push import partial_view

    # libero_goal t5 (seed 0), recorded agentview estimates of the plate: the first look, and the
    # look after the first leg with the hand hovering above the plate (a 4 x 1 cm sliver 7 cm off)
    first = ObjectEstimate(center=(0.0504, -0.0286, 0.9094), top_z=0.9179, bottom_z=0.9009, major_yaw=-1.4384,
                           major_extent=0.1065, minor_extent=0.1044)
    sliver = ObjectEstimate(center=(0.0057, 0.1857, 0.91), top_z=0.918, bottom_z=0.901, major_extent=0.0412,
                            minor_extent=0.0085)
    cut = ObjectEstimate(center=(-0.0768, 0.1504, 0.91), top_z=0.918, bottom_z=0.901, major_extent=0.1145,
                         minor_extent=0.046)
    whole = ObjectEstimate(center=(-0.05, 0.2, 0.91), top_z=0.918, bottom_z=0.901, major_extent=0.101,
                           minor_extent=0.098)
    assert partial_view(sliver, first) and partial_view(cut, first)
    assert not partial_view(whole, first)


def test_look_pose_stands_clear_of_the_cameras_view():
    import numpy as np

    from rpent.robots.libero.skills.push import look_pose

    # the agentview camera looks from +x (LIBERO's agentview, ~(0.66, 0, 1.61)) down toward -x:
    # the eef must stand on the robot's side of the object, off the segment camera -> object
    cam = np.array([0.6586, 0.0, 1.6103])
    for c in [(0.05, -0.03), (-0.05, 0.2), (-0.2, -0.04)]:
        eef = np.array(look_pose(c, 0.053, 0.918))
        assert eef[0] < c[0] - 0.053 - 0.1 and eef[2] > 0.918 + 0.05
        # the ray from the camera to the object's far edge passes below the eef's height there
        far = np.array([c[0] - 0.08, c[1], 0.91])
        t = (cam[0] - eef[0]) / (cam[0] - far[0])  # past the far edge (t > 1): behind the object
        assert t > 1.0


# libero_goal_swap t5 (seed 0), recorded agentview estimates: the plate behind-left of the
# stove's front edge; LIBERO's stove_front_region is x -0.09..-0.01, y 0.17..0.25
SWAP_STOVE = ObjectEstimate(center=(-0.3991, 0.1998, 0.9281), top_z=0.9552, bottom_z=0.9011, major_yaw=0.0335,
                            major_extent=0.0604, minor_extent=0.0209, support=(-0.2321, 0.194, 0.926))
SWAP_PLATE = ObjectEstimate(center=(-0.2034, -0.0367, 0.909), top_z=0.917, bottom_z=0.9011, major_yaw=-1.2762,
                            major_extent=0.1056, minor_extent=0.0968)


def test_reference_box_from_the_support_surface():
    from rpent.robots.libero.skills.push import reference_box

    x0, x1, y0, y1 = reference_box(SWAP_STOVE)
    # the burner +- SUPPORT_HALF (the stove's knob-end estimate is narrower); the real stove's
    # front edge (agentview points) is at x -0.165, its -y side at y 0.114
    assert (x0, x1) == pytest.approx((-0.2321 - SUPPORT_HALF, -0.2321 + SUPPORT_HALF))
    assert (y0, y1) == pytest.approx((0.194 - SUPPORT_HALF, 0.194 + SUPPORT_HALF))
    box = ObjectEstimate(center=(0.1, 0.2, 0.95), top_z=1.0, bottom_z=0.9, major_yaw=0.0, major_extent=0.3,
                         minor_extent=0.1)
    assert reference_box(box) == pytest.approx((-0.05, 0.25, 0.15, 0.25))


def test_push_route_goes_round_the_reference():
    from rpent.robots.libero.skills.push import PUSH_ROUTE_MARGIN, _box_distance, push_route, reference_box

    box = reference_box(SWAP_STOVE)
    goal = push_goal(SWAP_STOVE, SWAP_PLATE, "front")
    r = max(SWAP_PLATE.major_extent, SWAP_PLATE.minor_extent) / 2
    route = push_route(SWAP_PLATE.center[:2], goal, r, box, "front")
    # straight, the plate's footprint would cross the stove's front corner: first along +x to the
    # goal's x (in front of the stove), then across to the goal
    assert len(route) == 2 and route[-1] == pytest.approx(goal)
    corner = route[0]
    assert corner == pytest.approx((goal[0], SWAP_PLATE.center[1]))
    assert _box_distance(box, *corner) > r + PUSH_ROUTE_MARGIN
    # libero_goal t5 (seed 0): the plate in front of the stove already: straight
    stove = ObjectEstimate(center=(-0.4118, 0.2138, 0.9282), top_z=0.9554, bottom_z=0.9011, major_yaw=0.0326,
                           major_extent=0.0626, minor_extent=0.0198, support=(-0.2442, 0.2074, 0.9261))
    plate = ObjectEstimate(center=(0.0504, -0.0286, 0.9094), top_z=0.9179, bottom_z=0.9009, major_yaw=-1.4384,
                           major_extent=0.1065, minor_extent=0.1044)
    g2 = push_goal(stove, plate, "front")
    assert push_route(plate.center[:2], g2, 0.053, reference_box(stove), "front") == [pytest.approx(g2)]
    # an object behind the reference (every route crosses it): the straight push is kept
    assert push_route((-0.45, 0.19), goal, r, box, "front") == [pytest.approx(goal)]
    with pytest.raises(ValueError, match="side must be"):
        push_route((0, 0), (1, 1), 0.05, box, "above")


def test_push_route_to_the_right_side():
    from rpent.robots.libero.skills.push import push_route

    box = (0.0, 0.2, 0.0, 0.2)  # reference x 0..0.2, y 0..0.2; pushed to its right (+y) side
    # from the back-left (-x, -y): straight would cut the box's corner; along +y first, then across
    assert push_route((-0.15, -0.15), (0.1, 0.35), 0.05, box, "right") == [pytest.approx((-0.15, 0.35)),
                                                                           pytest.approx((0.1, 0.35))]
    # from straight behind it (left): every corner's leg crosses the box, the straight push is kept
    assert push_route((0.1, -0.15), (0.1, 0.35), 0.05, box, "right") == [pytest.approx((0.1, 0.35))]
    # from its front-right already: straight
    assert push_route((0.35, 0.4), (0.1, 0.35), 0.05, box, "right") == [pytest.approx((0.1, 0.35))]



def test_an_object_narrower_than_the_open_fingers_is_pushed_with_them_closed():
    from rpent.robots.libero import control
    from rpent.robots.libero.skills.push import push_gripper

    # libero_goal_task t5 seed 4: the cream cheese's first look; its goal at (-0.108, 0.211). After
    # the first leg the open fingers swept past either side of it
    cheese = ObjectEstimate(center=(-0.0533, 0.1438, 0.9102), top_z=0.9195, bottom_z=0.9009, major_yaw=0.014,
                            major_extent=0.0646, minor_extent=0.034, source="test")
    for u in [(-0.634, 0.773), (-0.553, 0.833)]:  # the first leg's direction, the second's
        assert extent_along(cheese, (-u[1], u[0])) < 0.079  # fits between the open pads
        assert push_gripper(cheese, u) == control.GRIPPER_CLOSE
    # a plate (libero_goal_object t5's estimate) is pushed with the fingers spread across it
    plate = ObjectEstimate(center=(0.0442, -0.032, 0.9093), top_z=0.9178, bottom_z=0.9009, major_yaw=-1.4062,
                           major_extent=0.1063, minor_extent=0.1039, source="test")
    for u in [(1.0, 0.0), (0.0, 1.0), (-0.408, 0.913)]:
        assert push_gripper(plate, u) == control.GRIPPER_OPEN


def test_a_plate_is_dragged_from_inside_its_rim_within_the_arms_reach():
    """libero_goal t5 (seed 0): the plate at the table's far side, its goal in front of the stove.
    Pushed from behind its edge, the fingers had to come down at the arm's reach limit (0.755 m
    from the base); dragged, they come down inside the rim, 2 cm behind its centre, and meet
    the far inner wall after that plus the estimate's radius."""
    import numpy as np

    from rpent.robots.libero.skills.grasp import ROBOT_BASE_XY
    from rpent.robots.libero.skills.push import DRAG_BACK, PUSH_REACH, drags, leg_points

    plate = ObjectEstimate(center=(0.05, -0.029, 0.909), top_z=0.918, bottom_z=0.9009, major_yaw=0.0,
                           major_extent=0.107, minor_extent=0.104, source="test")
    cheese = ObjectEstimate(center=(-0.0533, 0.1438, 0.9102), top_z=0.9195, bottom_z=0.9009, major_yaw=0.014,
                            major_extent=0.0646, minor_extent=0.034, source="test")
    assert drags(plate) and not drags(cheese)
    c, radius = np.array(plate.center[:2]), plate.major_extent / 2.0
    u = np.array([-0.43, 0.9]) / np.hypot(-0.43, 0.9)  # toward (-0.058, 0.194)
    start, end, backoff = leg_points(c, u, radius, 0.1, inside=True)
    assert np.linalg.norm(start - c) == pytest.approx(DRAG_BACK)  # inside the rim
    assert backoff == pytest.approx(DRAG_BACK + radius)
    assert (end - start) @ u == pytest.approx(backoff + 0.1)  # meets the wall, then moves the plate 0.1 m
    behind, _, _ = leg_points(c, u, radius, 0.1, inside=False)
    base = np.array(ROBOT_BASE_XY)
    assert np.linalg.norm(start - base) < np.linalg.norm(behind - base) - 0.03  # 3.3 cm nearer the base
    assert np.linalg.norm(behind - base) == pytest.approx(PUSH_REACH, abs=0.005)  # pushed: at the reach limit
