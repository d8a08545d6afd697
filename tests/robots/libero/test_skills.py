"""Pure tests of the scripted planner's skills: instruction plans, spatial qualifiers, grasp choice.

The scene estimates are recorded from a real run (``libero_spatial`` task 0, seed 0: the
``segment(all_instances=True)`` answers of the sim-oracle segmenter on the agentview camera).
"""

from __future__ import annotations

import math

import numpy as np

import pytest

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import GRIPPER_MAX_OPENING, needs_rim_grasp, plan_grasp
from rpent.robots.libero.skills.language import Qualifier, TaskPlan, Unsupported, parse_task
from rpent.robots.libero.skills.spatial import resolve_qualifier


def est(center, top, bottom, major, minor, yaw=0.0):
    return ObjectEstimate(center=tuple(center), top_z=top, bottom_z=bottom, major_yaw=yaw, major_extent=major,
                          minor_extent=minor, source="recorded")


# libero_spatial t0 s0, agentview, recorded
BOWL_1 = est((-0.0622, 0.2013, 0.9255), 0.9501, 0.901, 0.1011, 0.0956, -0.3052)
BOWL_2 = est((-0.1873, 0.3206, 0.9258), 0.9505, 0.9011, 0.1009, 0.0935, -0.3203)
PLATE = est((0.0517, 0.2063, 0.9095), 0.918, 0.9009, 0.1071, 0.1037, 1.2231)
RAMEKIN = est((-0.1949, 0.189, 0.9219), 0.9428, 0.9011, 0.08, 0.072, -0.2282)


@pytest.mark.parametrize("text, steps", [
    ("pick up the black bowl between the plate and the ramekin and place it on the plate",
     [("black bowl", "plate", "on", Qualifier("between", ("plate", "ramekin"), "between the plate and the ramekin"))]),
    ("pick up the black bowl from table center and place it on the plate",
     [("black bowl", "plate", "on", Qualifier("center", (), "at the table center"))]),
    ("pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate",
     [("black bowl", "plate", "on", Qualifier("in", ("wooden cabinet",), "in the top drawer of the wooden cabinet"))]),
    ("put both the alphabet soup and the tomato sauce in the basket",
     [("alphabet soup", "basket", "in", None), ("tomato sauce", "basket", "in", None)]),
    ("put both moka pots on the stove", [("moka pot", "stove", "on", None), ("moka pot", "stove", "on", None)]),
    ("put the bowl on top of the cabinet", [("bowl", "cabinet", "on", None)]),
])
def test_plans(text, steps):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan)
    assert [(g.object_phrase, g.target_phrase, g.relation, g.object_qualifier) for g in plan.steps] == steps


def test_target_qualifiers_and_two_sentences():
    plan = parse_task("put the white mug on the left plate and put the yellow and white mug on the right plate")
    assert isinstance(plan, TaskPlan) and len(plan.steps) == 2
    assert [(g.object_phrase, g.target_qualifier.relation) for g in plan.steps] == [
        ("white mug", "left"), ("yellow and white mug", "right")]


@pytest.mark.parametrize("text, why", [
    ("pick up the book and place it in the middle compartment of the caddy", "region or a drawer"),
    ("pick up the black bowl under the ramekin and place it on the plate", "spatial qualifier"),
    ("put the frying pan under the cabinet shelf", "placing under the cabinet shelf"),
    ("stack the bowl on the middle", "spatial qualifier"),
])
def test_unsupported_reasons(text, why):
    plan = parse_task(text)
    assert isinstance(plan, Unsupported) and why in plan.reason


@pytest.mark.parametrize("qualifier, expected", [
    (Qualifier("between", ("plate", "ramekin")), 0),   # the task's bowl (solved in the recorded run)
    (Qualifier("next_to", ("ramekin",)), 1),
    (Qualifier("next_to", ("plate",)), 0),
    (Qualifier("left"), 0),                            # smaller y: left as the agentview camera sees it
    (Qualifier("right"), 1),
    (Qualifier("center"), 0),
    (Qualifier("behind", ("ramekin",)), 1),            # behind = world -x (the robot's side): BOWL_2
    (Qualifier("front_of", ("ramekin",)), 0),
    (Qualifier("front"), 0),                           # larger x: nearer the agentview camera
    (Qualifier("back"), 1),
    (Qualifier("between", ("plate", "ramekin"), negated=True), 1),
])
def test_resolver_on_recorded_scene(qualifier, expected):
    refs = {"plate": PLATE, "ramekin": RAMEKIN}
    assert resolve_qualifier(qualifier, [BOWL_1, BOWL_2], refs) == expected


def test_resolver_prefers_raised_instance_for_on():
    on_box = est((0.05, 0.03, 0.95), 0.975, 0.921, 0.10, 0.095)   # bowl resting on a 2 cm box
    cookie = est((0.06, 0.03, 0.91), 0.921, 0.90, 0.09, 0.06)
    near = est((0.02, 0.10, 0.925), 0.95, 0.901, 0.10, 0.095)      # on the table, nearer in xy to nothing
    assert resolve_qualifier(Qualifier("on", ("cookie box",)), [near, on_box], {"cookie box": cookie}) == 1
    assert resolve_qualifier(Qualifier("next_to", ("cookie box",)), [near, on_box], {"cookie box": cookie}) == 0
    with pytest.raises(ValueError, match="not localised"):
        resolve_qualifier(Qualifier("on", ("stove",)), [near], {})


def test_grasp_choice_from_shape():
    # the bowl is wider than the gripper opens: a rim grasp with the finger gap on the wall
    assert BOWL_1.minor_extent > GRIPPER_MAX_OPENING and needs_rim_grasp(BOWL_1)
    g = plan_grasp(BOWL_1, 0.0, obstacles=[PLATE, RAMEKIN, BOWL_2])
    assert g["kind"] == "rim"
    off = math.hypot(*g["offset"])
    assert 0.03 < off < 0.05  # inside the ~0.05 m rim radius
    # the fingers close radially: the gripper's closing axis (-sin yaw, cos yaw) is parallel to the offset
    closing = (-math.sin(g["yaw"]), math.cos(g["yaw"]))
    assert abs(abs(closing[0] * g["offset"][0] + closing[1] * g["offset"][1]) - off) < 1e-6
    assert g["xyz"][2] == pytest.approx(BOWL_1.top_z - 0.02)
    # the side chosen keeps the outer finger away from the plate (+x) and the ramekin (-x, -y)
    assert g["offset"][1] > 0
    # a narrow box keeps the centre grasp, turned across its narrow side
    box = est((0.0, 0.0, 0.93), 0.96, 0.90, 0.09, 0.04, yaw=0.3)
    g = plan_grasp(box, 0.0)
    assert g["kind"] == "centre" and g["offset"] == [0.0, 0.0] and g["yaw"] == pytest.approx(0.3)
    # a plate (1.7 cm tall, 0.10 m seen) is taken at its lip: the finger gap on its visible rim,
    # pressed toward the table while the fingers close
    assert needs_rim_grasp(PLATE)
    g = plan_grasp(PLATE, 0.0, obstacles=[BOWL_1])
    assert g["kind"] == "flat"
    assert math.hypot(*g["offset"]) == pytest.approx((PLATE.major_extent + PLATE.minor_extent) / 4.0)
    assert g["xyz"][2] == pytest.approx(PLATE.bottom_z + 0.018) and g["press_z"] < PLATE.bottom_z
    # a flatter thing (a book lying flat, 1 cm) gets no rim grasp
    assert not needs_rim_grasp(est((0.0, 0.0, 0.905), 0.91, 0.90, 0.15, 0.10))


@pytest.mark.parametrize("text, steps", [
    ("open the middle drawer of the cabinet", ["open the middle drawer of the cabinet"]),
    ("turn on the stove", ["turn on the stove"]),
    ("open the top drawer and put the bowl inside", ["open the top drawer of the cabinet", "bowl in top drawer of the cabinet"]),
    ("turn on the stove and put the moka pot on it", ["turn on the stove", "moka pot on stove"]),
    ("put the black bowl in the bottom drawer of the cabinet and close it",
     ["black bowl in bottom drawer of the cabinet", "close the bottom drawer of the cabinet"]),
    ("pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate",
     ["black bowl (in the top drawer of the wooden cabinet) on plate"]),
])
def test_fixture_plans(text, steps):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan), plan
    assert [g.describe() for g in plan.steps] == steps


def test_fixture_geometry_helpers():
    from rpent.robots.libero.skills.fixtures import open_direction, part_by_words
    from rpent.robots.libero.skills.scene import drawer_target

    # libero_goal t7 s0, view_fixtures answer (recorded): the bottom drawer, closed, and the knob
    bottom = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": 0.0, "range": [-0.16, 0.01],
              "axis": [0.0, -1.0, 0.0], "pos": [0.031, -0.241, 0.905], "handle": [0.033, -0.15, 0.947],
              "min": [-0.084, -0.337, 0.913], "max": [0.138, -0.131, 0.984]}
    knob = {"part": "button", "joint": "button", "type": "hinge", "qpos": 0.0, "range": [-0.005, 2.1],
            "axis": [0.0, 0.0, 1.0], "pos": [-0.414, 0.21, 0.905], "handle": None,
            "min": [-0.471, 0.161, 0.896], "max": [-0.365, 0.257, 0.964]}
    parts = {"wooden_cabinet_1": [bottom], "flat_stove_1": [knob]}
    assert open_direction(bottom).tolist() == [0.0, 1.0, 0.0]  # negative open range: along -axis = +y
    assert part_by_words(parts, ("cabinet",), ("bottom",), "slide") == ("wooden_cabinet_1", bottom)
    assert part_by_words(parts, ("stove",), (), "hinge") == ("flat_stove_1", knob)
    assert part_by_words(parts, ("cabinet",), ("top",), "slide") is None
    opened = dict(bottom, qpos=-0.15, min=[-0.084, -0.187, 0.913], max=[0.138, 0.019, 0.984])
    t = drawer_target(opened)
    # the exposed part of the open drawer lies between the cabinet front (y -0.131) and the drawer front (y 0.019)
    assert -0.131 < t.center[1] < 0.019 and t.top_z == pytest.approx(0.984)


def test_support_surface_is_the_burner_not_the_knob():
    from rpent.robots.libero.skills.estimate import ObjectEstimate, support_surface

    rng = np.random.default_rng(0)
    # a 15 cm burner plate at z 0.92 centred at (-0.26, 0.21) and a 4 cm knob rising to 0.964 at (-0.414, 0.21)
    plate = np.c_[rng.uniform(-0.335, -0.185, 600), rng.uniform(0.135, 0.285, 600), np.full(600, 0.92)]
    knob = np.c_[rng.uniform(-0.43, -0.40, 300), rng.uniform(0.20, 0.22, 300), rng.uniform(0.905, 0.964, 300)]
    pts = np.r_[plate, knob]
    est = ObjectEstimate.from_points(pts, floor_z=0.90)
    assert est.center[0] < -0.39  # the top band (what a grasp needs) is the knob
    sx, sy, sz = support_surface(pts, 0.90)
    assert sx == pytest.approx(-0.26, abs=0.015) and sy == pytest.approx(0.21, abs=0.01) and sz == pytest.approx(0.92)
    assert est.support == pytest.approx((sx, sy, sz))


@pytest.mark.parametrize("text, steps", [  # LIBERO-PRO paraphrases (_lan) and variants (_swap, _task)
    ("take the black bowl from the top drawer and put it on plate", ["black bowl (in the top drawer) on plate"]),
    ("lift bowl from stove and set on plate", ["bowl (on stove) on plate"]),
    ("open the cabinet\u2019s middle drawer", ["open the middle drawer of the cabinet"]),
    ("slide open the top drawer and place the bowl in it", ["open the top drawer of the cabinet", "bowl in top drawer of the cabinet"]),
    ("switch stove on and put moka pot on it", ["turn on the stove", "moka pot on stove"]),
    ("place cream cheese box and butter into basket", ["cream cheese box in basket", "butter in basket"]),
    ("place white mug on left plate and yellow-white mug on right plate", ["white mug on plate (left)", "yellow white mug on plate (right)"]),
    ("put the yellow and white mug on the plate", ["yellow and white mug on plate"]),
    ("open the middle layer of the drawer", ["open the middle drawer of the cabinet"]),
    ("put the bowl on the top of the drawer", ["bowl on cabinet"]),
    ("pick orange juice and put into basket", ["orange juice in basket"]),
    ("pick up the book and place it in the back compartment of the caddy", ["book in back compartment of the caddy"]),
    ("put the black book into the rear compartment of the desk caddy", ["black book in back compartment of the desk caddy"]),
    ("pick up the book and place it in the left compartment of the caddy", ["book in left compartment of the caddy"]),
    ("pick the akita black bowl not between the plate and the ramekin and place it on the plate",
     ["akita black bowl (not between the plate and the ramekin) on plate"]),
])
def test_paraphrases(text, steps):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan), plan
    assert [g.describe() for g in plan.steps] == steps


def test_negated_qualifier_picks_the_other_instance():
    refs = {"plate": PLATE, "ramekin": RAMEKIN}
    q = Qualifier("between", ("plate", "ramekin"), negated=True)
    assert resolve_qualifier(q, [BOWL_1, BOWL_2], refs) == 1


def test_white_mug_is_the_porcelain_one():
    from rpent.robots.libero.skills.naming import match_object_names

    names = ["porcelain_mug_1", "white_yellow_mug_1", "red_coffee_mug_1", "plate_1", "plate_2"]
    assert match_object_names("white mug", names) == ["porcelain_mug_1"]
    assert match_object_names("yellow and white mug", names) == ["white_yellow_mug_1"]


def _support_scene(with_ramekin: bool):
    """A 40x40 world map: table z 0.90 (id 0); a bowl (id 2, rows 5-24, x and y in [-0.05, 0.05] m) whose
    lowest visible part is at z 0.935; below it in the image (rows 25-34) either a ramekin
    (id 3, z 0.90-0.93, under the bowl's centre) or table."""
    world = np.zeros((40, 40, 3))
    seg = np.zeros((40, 40), dtype=int)
    xs = np.linspace(-0.1, 0.1, 40)
    world[..., 0] = xs[None, :]
    world[..., 1] = np.linspace(0.1, -0.1, 40)[:, None]
    world[..., 2] = 0.90
    mask = np.zeros((40, 40), dtype=bool)
    mask[5:25, 10:30] = True
    world[5:25, 10:30, 1] = np.linspace(0.05, -0.05, 20)[:, None]
    world[5:25, 10:30, 2] = np.linspace(0.99, 0.935, 20)[:, None]
    seg[mask] = 2
    if with_ramekin:
        seg[25:35, 15:25] = 3
        world[25:35, 15:25, 1] = -0.035  # the ramekin's front face, under the bowl (centre y 0)
        world[25:35, 15:25, 2] = np.r_[np.full(5, 0.93), np.linspace(0.925, 0.90, 5)][:, None]  # top rim, then side
    return mask, world, seg


@pytest.mark.parametrize("with_ramekin,expected", [(False, 0.90), (True, 0.93)])
def test_support_height_finds_the_object_an_object_rests_on(with_ramekin, expected):
    from rpent.robots.libero.skills.naming import support_height
    mask, world, seg = _support_scene(with_ramekin)
    assert support_height(mask, world, seg) == pytest.approx(expected, abs=0.004)


def test_on_qualifier_takes_the_instance_on_a_low_reference_over_a_far_raised_one():
    # libero_spatial t7 seed 1, recorded agentview estimates: "the black bowl on the stove"; the bowl
    # on the burner (2.5 cm above the table) is not seen raised, the one on the cabinet top is
    on_stove = ObjectEstimate(center=(-0.257, -0.1225, 0.9394), top_z=0.9776, bottom_z=0.9011,
                              major_extent=0.101, minor_extent=0.09)
    on_cabinet = ObjectEstimate(center=(0.0367, -0.2846, 1.1528), top_z=1.1785, bottom_z=1.1271,
                                major_extent=0.1024, minor_extent=0.0473)
    stove = ObjectEstimate(center=(-0.4109, -0.1288, 0.9305), top_z=0.9599, bottom_z=0.9011, major_extent=0.0602,
                           minor_extent=0.0197, support=(-0.2145, -0.0833, 0.926))
    assert resolve_qualifier(Qualifier("on", ("stove",)), [on_cabinet, on_stove], {"stove": stove}) == 1
    assert resolve_qualifier(Qualifier("on", ("stove",)), [on_stove, on_cabinet], {"stove": stove}) == 0
    # a raised instance near the reference still wins over one on the table beside it
    cabinet = ObjectEstimate(center=(0.0455, -0.2331, 1.0141), top_z=1.1274, bottom_z=0.9009, major_extent=0.2288,
                             minor_extent=0.1526, support=(0.046, -0.2419, 1.127))
    beside = ObjectEstimate(center=(-0.05, -0.12, 0.925), top_z=0.95, bottom_z=0.901, major_extent=0.1, minor_extent=0.1)
    assert resolve_qualifier(Qualifier("on", ("cabinet",)), [beside, on_cabinet], {"cabinet": cabinet}) == 1


def test_between_is_the_instance_nearest_the_segment_not_its_midpoint():
    # libero_spatial_task t0 seed 0 (simulator poses): the bowl LIBERO places "between the plate and
    # the ramekin" settled beyond the ramekin's end; the other stands beside the segment's middle
    plate, ramekin = est((0.089, 0.201, 0.91), 0.918, 0.90, 0.13, 0.13), est((-0.2, 0.195, 0.92), 0.943, 0.90, 0.08, 0.07)
    beyond = est((-0.276, 0.23, 0.925), 0.95, 0.90, 0.10, 0.10)
    beside = est((-0.172, 0.324, 0.925), 0.95, 0.90, 0.10, 0.10)
    refs = {"plate": plate, "ramekin": ramekin}
    assert resolve_qualifier(Qualifier("between", ("plate", "ramekin")), [beside, beyond], refs) == 1
    assert resolve_qualifier(Qualifier("between", ("plate", "ramekin"), negated=True), [beside, beyond], refs) == 0


def test_on_takes_the_instance_above_the_references_top_not_one_inside_it():
    # libero_spatial_task t4 seed 0 (recorded agentview estimates): one bowl in the open top drawer
    # (raised, but below the cabinet's top), the one on the cabinet cut by the image border (its
    # bottom seen on the table)
    in_drawer = est((0.0873, -0.1294, 1.0928), 1.114, 1.071, 0.101, 0.096)
    on_top = est((0.0322, -0.2709, 1.0398), 1.178, 0.901, 0.098, 0.074)
    cabinet = ObjectEstimate(center=(0.0909, -0.1552, 1.0141), top_z=1.127, bottom_z=0.901, major_extent=0.262,
                             minor_extent=0.249, support=(0.0775, -0.2236, 1.1269))
    q = Qualifier("on", ("wooden cabinet",))
    assert resolve_qualifier(q, [in_drawer, on_top], {"wooden cabinet": cabinet}) == 1
    assert resolve_qualifier(Qualifier("in", ("wooden cabinet",)), [in_drawer, on_top], {"wooden cabinet": cabinet}) == 0


def test_a_bowl_seen_in_part_is_not_taken_for_a_pan():
    # libero_goal_swap t1 s3, agentview: akita_black_bowl_1 seen 0.103 x 0.071 m (longer than wide by
    # the pan ratio, its floor 2 cm off centre); as a pan its "handle" was the rim at +x, and the
    # descent onto it stopped 5 cm high on all three tries
    bowl = ObjectEstimate(center=(-0.1921, -0.0553, 0.9259), top_z=0.9507, bottom_z=0.9011, major_yaw=0.0025,
                          major_extent=0.103, minor_extent=0.0712, support=(-0.2114, -0.0454, 0.9098))
    assert plan_grasp(bowl, 0.0)["kind"] == "rim"
    # a frypan seen 0.265 x 0.19 m (libero_10_task t2; a handle 7.5 cm past the body as seen)
    pan = ObjectEstimate(center=(-0.0547, -0.1794, 0.9255), top_z=0.948, bottom_z=0.901, major_yaw=1.569,
                         major_extent=0.265, minor_extent=0.19, support=(-0.1036, -0.2492, 0.9093))
    assert plan_grasp(pan, 0.0)["kind"] == "handle"


def test_pan_is_taken_by_its_handle_with_the_body_carried_over_the_target():
    # libero_10_task t2 s0, agentview: chefmate_8_frypan (body 0.18 m, handle toward +y; the
    # simulator puts the body's centre at y -0.232 and the handle bar from y -0.106 to 0.027)
    pan = ObjectEstimate(center=(-0.0547, -0.1794, 0.9255), top_z=0.95, bottom_z=0.901, major_yaw=1.569,
                         major_extent=0.275, minor_extent=0.188, support=(-0.1036, -0.2492, 0.9093))
    g = plan_grasp(pan, 0.0)
    assert g["kind"] == "handle"
    assert -0.106 < g["xyz"][1] < -0.05  # on the bar, 3.5-6 cm out from the body (measured to hold)
    assert g["xyz"][2] == pytest.approx(0.95 - 0.015)
    body_y = g["xyz"][1] - g["offset"][1]
    assert body_y == pytest.approx(-0.232, abs=0.015)
    # the fingers close across the bar (the eef y axis (-sin yaw, cos yaw) across the long axis)
    assert abs(math.cos(g["yaw"] - pan.major_yaw)) == pytest.approx(1.0, abs=1e-6)
    # a bowl is round: no handle
    assert plan_grasp(BOWL_1, 0.0)["kind"] == "rim"


def test_an_instance_a_qualifier_settled_stays_settled_in_later_steps():
    from rpent.robots.libero.skills.scene import Instance, _pinned

    left, right = Instance("akita_black_bowl_1", BOWL_1), Instance("akita_black_bowl_2", BOWL_2)
    pins = {("bowl", Qualifier("right")): "akita_black_bowl_2"}
    # the right bowl, moved into the tray, is still "the right bowl"
    assert _pinned([left, right], "bowl", Qualifier("right"), pins)[1] == right
    # and "the left bowl" is the other one, wherever the right one now stands
    assert _pinned([left, right], "bowl", Qualifier("left"), pins) == ([left], None)
    assert _pinned([left, right], "plate", None, pins) == ([left, right], None)


def test_grasp_yaw_turns_by_pi_where_the_wrist_would_reach_its_limit():
    from rpent.robots.libero.skills.grasp import WRIST_LIMIT, base_from_home, wrist_angle, wrist_fold

    # libero_10_task t4 s0 (living-room scene: the eef starts at x -0.058, its base at -0.51): the white
    # mug grasped by its -x rim at yaw -pi/2 and carried to the right plate at y +0.29
    base = base_from_home((-0.0585, 0.0))
    assert base == pytest.approx((-0.5105, 0.0))
    grasp_xy, place_xy = (-0.1221, -0.1763), (-0.0155, 0.2948)
    assert abs(wrist_angle(-math.pi / 2, place_xy, base)) > WRIST_LIMIT - 0.01  # where the arm stalled
    assert wrist_fold(-math.pi / 2, [grasp_xy, place_xy], base) == pytest.approx(math.pi / 2)
    # a grasp well inside the limits keeps its yaw (the start pose: yaw 0, the wrist at 0.785 rad)
    assert wrist_angle(0.0, (-0.0585, 0.0), base) == pytest.approx(0.785)
    assert wrist_fold(-math.pi / 2, [grasp_xy], base) == -math.pi / 2
