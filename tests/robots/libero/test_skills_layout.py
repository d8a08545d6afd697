"""Pure tests of placing several objects on one target and beside a reference (libero_10 plans).

The estimates are recorded from real runs (``libero_10`` seed 0, sim-oracle ``segment`` answers
on the agentview camera): t1's basket, t4's plates, t6's plate and chocolate pudding.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from rpent.planners.scripted import ScriptedPlanner
from rpent.robots.libero.skills import layout
from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import TaskPlan, Unsupported, parse_task
from rpent.robots.libero.skills.layout import (BESIDE_MIN_OFFSET, SLOT_MAX_OFFSET, SLOT_MAX_OFFSET_IN, beside_target, extent_along,
                                               slot_axis, slot_offset, slot_target)


def est(center, top, bottom, major, minor, yaw=0.0, support=None):
    return ObjectEstimate(center=tuple(center), top_z=top, bottom_z=bottom, major_yaw=yaw, major_extent=major,
                          minor_extent=minor, source="recorded", support=support)


# libero_10 t1 s0, agentview, recorded
BASKET = est((0.008, 0.231, 0.501), 0.577, 0.426, 0.166, 0.108, -0.32)
CREAM_CHEESE = est((0.104, -0.179, 0.441), 0.456, 0.426, 0.071, 0.036, -0.02)
# libero_10 t8 s0: a moka pot (long along y: handle and spout) and the stove, seen mostly as its knob
MOKA_POT = est((0.051, 0.031, 0.973), 1.045, 0.901, 0.103, 0.05, 1.51)
STOVE = est((-0.188, -0.196, 0.928), 0.956, 0.901, 0.071, 0.013, 1.43, support=(-0.0251, -0.1889, 0.9259))
# libero_10 t4 s0: the right plate, cut by the image edge
PLATE = est((-0.006, 0.288, 0.439), 0.4528, 0.4258, 0.105, 0.064, -0.36)


@pytest.mark.parametrize("text, sides", [
    ("put the white mug on the plate and put the chocolate pudding to the right of the plate", [None, "right"]),
    ("pick up the chocolate pudding and place it to the left of the plate", ["left"]),
    ("put the ketchup in front of the basket", ["front"]),
    ("place the cream cheese behind the bowl", ["back"]),
    ("put the bowl on the right side of the plate", ["right"]),
    ("place white mug on plate and chocolate pudding to right", [None, "right"]),  # libero_10_lan t6
])
def test_beside_plans(text, sides):
    plan = parse_task(text)
    assert isinstance(plan, TaskPlan)
    assert [g.target_side for g in plan.steps] == sides
    assert all(g.relation == "on" for g in plan.steps)
    assert plan.steps[-1].target_phrase in ("plate", "basket", "bowl")
    assert "of" not in plan.steps[-1].target_phrase


def test_beside_keeps_object_qualifiers_and_refuses_odd_target_ones():
    plan = parse_task("put the black bowl next to the ramekin to the right of the plate")
    assert isinstance(plan, TaskPlan) and plan.steps[0].object_qualifier.relation == "next_to"
    assert isinstance(parse_task("put the bowl to the right of the plate between the mugs"), Unsupported)


def test_extent_along_rotated_box():
    box = est((0, 0, 0), 0.1, 0.0, 0.2, 0.1, math.pi / 2)  # long side along world y
    assert extent_along(box, (0.0, 1.0)) == pytest.approx(0.2)
    assert extent_along(box, (1.0, 0.0)) == pytest.approx(0.1)


def test_two_slots_on_one_target_are_apart_and_inside():
    a, b = slot_offset(BASKET, CREAM_CHEESE, 0, 2), slot_offset(BASKET, CREAM_CHEESE, 1, 2)
    assert a[0] == b[0] == 0.0 and a[1] < 0 < b[1]
    assert b[1] - a[1] >= 0.06  # two boxes side by side, not on each other (on a support)
    assert abs(a[1]) <= SLOT_MAX_OFFSET and abs(b[1]) <= SLOT_MAX_OFFSET
    assert slot_offset(BASKET, CREAM_CHEESE, 0, 1) == (0.0, 0.0)
    stove = est((-0.2, -0.2, 0.93), 0.97, 0.9, 0.3, 0.2, 0.0, support=(-0.21, -0.19, 0.92))
    moved = slot_target(stove, CREAM_CHEESE, 1, 2)
    assert moved.support[1] - stove.support[1] == pytest.approx(moved.center[1] - stove.center[1]) == SLOT_MAX_OFFSET
    small = slot_offset(BASKET, CREAM_CHEESE, 1, 2, max_offset=SLOT_MAX_OFFSET_IN)
    assert small == (0.0, SLOT_MAX_OFFSET_IN)  # in a container: near its centre (the basket counts +/-6.1 cm)
    with pytest.raises(ValueError, match="slot 2"):
        slot_offset(BASKET, CREAM_CHEESE, 2, 2)


def test_moka_pots_go_side_by_side_across_their_long_axis_on_a_stove_seen_as_its_knob():
    assert slot_axis(MOKA_POT) == (1.0, 0.0) and slot_axis(CREAM_CHEESE) == (0.0, 1.0)
    first, second = slot_target(STOVE, MOKA_POT, 0, 2), slot_target(STOVE, MOKA_POT, 1, 2)
    assert first.support[1] == second.support[1] == STOVE.support[1]
    dx1, dx2 = first.support[0] - STOVE.support[0], second.support[0] - STOVE.support[0]
    assert dx1 > 0 > dx2  # the far side first: the second pot is not carried past the first
    assert dx1 - dx2 >= MOKA_POT.minor_extent + 0.015  # apart, not touching
    assert max(abs(dx1), abs(dx2)) <= SLOT_MAX_OFFSET + 1e-9  # both on the 0.15 m cook region


def test_beside_target_is_on_the_table_clear_of_the_reference():
    spot = beside_target(PLATE, CREAM_CHEESE, "right")
    assert spot.top_z == PLATE.bottom_z  # set down on the table the plate stands on
    assert spot.center[0] == pytest.approx(PLATE.center[0])
    d = spot.center[1] - PLATE.center[1]
    assert d >= BESIDE_MIN_OFFSET and d >= extent_along(PLATE, (0, 1)) / 2 + extent_along(CREAM_CHEESE, (0, 1)) / 2
    left = beside_target(PLATE, CREAM_CHEESE, "left")
    assert left.center[1] == pytest.approx(PLATE.center[1] - d)
    # behind = world -x (LIBERO's back regions lie toward the robot, front ones toward the camera)
    assert beside_target(PLATE, CREAM_CHEESE, "back").center[0] < PLATE.center[0]
    assert beside_target(PLATE, CREAM_CHEESE, "front").center[0] > PLATE.center[0]
    with pytest.raises(ValueError, match="side must be"):
        beside_target(PLATE, CREAM_CHEESE, "above")


@pytest.mark.parametrize("text, slots", [
    ("put both the alphabet soup and the tomato sauce in the basket", {0: (0, 2), 1: (1, 2)}),
    ("put both moka pots on the stove", {0: (0, 2), 1: (1, 2)}),
    ("put the white mug on the left plate and put the yellow and white mug on the right plate", {}),
    ("put the white mug on the plate and put the chocolate pudding to the right of the plate", {}),
    ("turn on the stove and put the moka pot on it", {}),
])
def test_steps_sharing_a_target_get_slots(text, slots):
    assert ScriptedPlanner._slots(parse_task(text)) == slots


def _recorded_segment(box, image_size=(256, 256)):
    """A ``segment(all_instances=True)`` answer recorded on libero_10 t4 s0 (the right plate), with its box."""
    e = {"center": [-0.006, 0.288, 0.439], "top_z": 0.4528, "bottom_z": 0.4258, "major_yaw": -0.36,
         "major_extent": 0.105, "minor_extent": 0.064, "ridge_yaw": None, "source": "sim_oracle_agentview_mask",
         "support": None}
    seg = {"found": True, "camera": "agentview", "object": "plate_2", "box": box, "object_estimate": e,
           "instances": [{"object": "plate_2", "box": box, "pixel_count": 900, "object_estimate": e}]}
    if image_size is not None:
        seg["image_size"] = list(image_size)
    return seg


@pytest.mark.parametrize("box, image_size, cut", [
    ([223, 156, 255, 190], (256, 256), True),   # the plate at the right edge (recorded)
    ([30, 117, 99, 185], (256, 256), False),    # libero_10 t8's stove, whole in view
    ([0, 10, 40, 50], (256, 256), True),
    ([223, 156, 255, 190], None, False),        # an answer without image_size: not known to be cut
])
def test_find_instances_flags_a_mask_cut_by_the_image_border(box, image_size, cut):
    from rpent.robots.libero.skills import scene

    (inst,) = scene.find_instances(lambda name, args: _recorded_segment(box, image_size), "plate")
    assert inst.name == "plate_2" and inst.cut is cut


def test_drawer_target_sets_things_down_on_the_drawer_floor():
    from rpent.robots.libero.skills.scene import DRAWER_FLOOR, drawer_target

    # libero_10 t3 s0, view_fixtures (recorded): the open bottom drawer of the white cabinet
    part = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": -0.1460353727890157,
            "range": [-0.16, 0.01], "axis": [0.0, 1.0, 0.0], "pos": [-0.0022, 0.1582, 0.905],
            "handle": [-0.0048, 0.0667, 0.9466], "min": [-0.1094, 0.0479, 0.9133], "max": [0.1130, 0.2535, 0.9841]}
    t = drawer_target(part)
    assert t.top_z == pytest.approx(0.9841) and t.support[2] == pytest.approx(0.9133 + DRAWER_FLOOR)
    assert t.support[:2] == t.center[:2]
    # in the part of the drawer outside the cabinet (front at y 0.048 now, 0.194 when closed)
    assert 0.048 + 0.05 < t.center[1] < 0.194
    # a 5 cm bowl set down on the floor stays under the opening (the middle drawer starts at 0.983 m)
    assert t.support[2] + 0.05 < 0.983


# ---------------------------------------------------------------------- wine rack cradle
# the rack's segment(all_instances=True) estimate as recorded on libero_goal t9 and libero_goal_swap t9
# (seed 0, agentview, step 0), and the box where LIBERO's top_region check (``SiteObject.under``
# of wine_rack_1_top_region) holds for a bottle's base 1.15 m high there (scanned in the simulator)
RACK_GOAL = dict(center=(-0.242, -0.2553, 0.8523), top_z=1.2162, bottom_z=0.4884, major_yaw=-0.0602,
                 major_extent=0.2462, minor_extent=0.1145, source="sim_oracle_agentview_mask",
                 support=(-0.2259, -0.2851, 1.1904))
RACK_SWAP = dict(center=(0.0443, -0.2239, 1.0555), top_z=1.2101, bottom_z=0.9009, major_yaw=0.0702,
                 major_extent=0.2467, minor_extent=0.1117, source="sim_oracle_agentview_mask",
                 support=(0.1015, -0.2589, 0.9405))
REGION_GOAL = ((-0.365, -0.17), (-0.245, -0.17))
REGION_SWAP = ((-0.07, 0.125), (-0.235, -0.16))


@pytest.mark.parametrize("rack,region", [(RACK_GOAL, REGION_GOAL), (RACK_SWAP, REGION_SWAP)])
def test_rack_cradle_lies_in_the_racks_top_region(rack, region):
    from rpent.robots.libero.skills.layout import rack_cradle

    c = rack_cradle(ObjectEstimate(**rack))
    (x0, x1), (y0, y1) = region
    assert x0 + 0.02 < c.center[0] < x1 - 0.02
    assert y0 + 0.01 < c.center[1] < y1 - 0.01  # >= 1 cm inside across the 7 cm slab
    assert 1.12 < c.top_z < 1.17
    assert c.major_extent == 0.0 and c.minor_extent == 0.0


def test_rack_cradle_faces_the_table_centre_and_rack_phrases():
    from rpent.robots.libero.skills.layout import is_rack, rack_cradle

    mirrored = ObjectEstimate(**{**RACK_GOAL, "center": (-0.242, 0.2553, 0.8523)})
    assert rack_cradle(mirrored).center[1] < 0.2553  # a rack on the other side: its cradle toward y = 0
    assert rack_cradle(ObjectEstimate(**RACK_GOAL)).center[1] > -0.2553
    assert is_rack("wine rack") and is_rack("rack") and not is_rack("racket") and not is_rack("plate")


# libero_10 t5 s0 (agentview, recorded 2026-12-01): the desk caddy, yaw pi in the scene (its long side
# along world y), and the upright black book beside it (11 cm wide, 2.9 cm thick, turned ~-0.7 rad)
CADDY = ObjectEstimate(center=(-0.405, -0.136, 0.95), top_z=1.055, bottom_z=0.887, major_yaw=1.5708,
                       major_extent=0.43, minor_extent=0.134, source="recorded")
BOOK = ObjectEstimate(center=(-0.215, 0.155, 0.95), top_z=1.019, bottom_z=0.883, major_yaw=-0.706,
                      major_extent=0.11, minor_extent=0.03, source="recorded")


def test_compartment_targets_of_a_caddy():
    back = layout.compartment_target(CADDY, "back")
    # LIBERO's back_contain_region lies 3.4 cm toward the robot (world -x, away from the camera)
    assert back.center[0] == pytest.approx(CADDY.center[0] - 0.0335, abs=0.002)
    assert back.center[1] == pytest.approx(CADDY.center[1], abs=1e-6)
    assert back.support[2] == CADDY.bottom_z and back.top_z == CADDY.top_z
    front = layout.compartment_target(CADDY, "front")
    assert front.center[0] > CADDY.center[0]
    left, right = layout.compartment_target(CADDY, "left"), layout.compartment_target(CADDY, "right")
    assert left.center[1] == pytest.approx(CADDY.center[1] - 0.143, abs=0.002)  # site at 0.144 of 0.43
    assert right.center[1] == pytest.approx(CADDY.center[1] + 0.143, abs=0.002)
    # the same caddy turned by pi: the back is still the side toward the robot
    flipped = dataclasses.replace(CADDY, major_yaw=CADDY.major_yaw - math.pi)
    assert layout.compartment_target(flipped, "back").center == pytest.approx(back.center)
    with pytest.raises(ValueError, match="side must be one of"):
        layout.compartment_target(CADDY, "middle")


def test_book_is_turned_to_lie_along_the_back_compartment():
    back = layout.compartment_target(CADDY, "back")
    turn = layout.compartment_turn(BOOK, back)
    assert -math.pi / 2 <= turn <= math.pi / 2
    turned = BOOK.major_yaw + turn
    # the book's width along the caddy's long side (mod pi)
    assert abs(math.sin(turned - CADDY.major_yaw)) < 1e-9
    assert abs(turn) == pytest.approx(math.pi - abs(CADDY.major_yaw - BOOK.major_yaw), abs=1e-9)


# libero_10_swap t8 s0: a moka pot seen by the front camera (its lid, ``support``, 2 cm off toward the spout)
# and the stove seen from above
SWAP_POT = est((-0.046, 0.242, 0.969), 1.037, 0.901, 0.1045, 0.048, 1.4566, support=(-0.048, 0.253, 1.033))
SWAP_STOVE = est((0.184, 0.063, 0.915), 0.925, 0.90, 0.172, 0.167, 0.0, support=(0.184, 0.063, 0.925))


def test_handle_offset_points_at_the_handle_of_a_pot_and_is_none_for_a_box():
    off = layout.handle_offset(SWAP_POT)
    assert off is not None and off[1] < -0.04  # the handle lies on the side away from the lid's shift
    assert layout.handle_offset(CREAM_CHEESE) is None


def test_two_pots_held_by_their_handles_are_set_apart_across_the_slot_axis_too():
    off = layout.handle_offset(SWAP_POT)
    a = slot_offset(SWAP_STOVE, SWAP_POT, 0, 2, grasp_offset=off)
    b = slot_offset(SWAP_STOVE, SWAP_POT, 1, 2, grasp_offset=off)
    plain = slot_offset(SWAP_STOVE, SWAP_POT, 1, 2)
    assert b[0] == pytest.approx(plain[0])  # along the slot axis (x) as before
    assert a[1] > 0 > b[1]  # the second pot on the side its handle (the hand) points to: -y here
    assert max(abs(a[1]), abs(b[1])) <= layout.SLOT_SIDE_OFFSET + 1e-9
    assert math.hypot(a[0] - b[0], a[1] - b[1]) >= 0.095
    # handles the other way round: mirrored
    flipped = slot_offset(SWAP_STOVE, SWAP_POT, 1, 2, grasp_offset=(off[0], -off[1]))
    assert flipped[1] == pytest.approx(-b[1])
    # a grasp at the centre, or a single object: no offset across
    assert slot_offset(SWAP_STOVE, SWAP_POT, 1, 2, grasp_offset=(0.0, 0.005)) == plain
    assert slot_offset(SWAP_STOVE, SWAP_POT, 0, 1, grasp_offset=off) == (0.0, 0.0)


def test_no_offset_across_where_the_target_leaves_no_room():
    # the stove seen from the front as its knob: narrower than the pot across the axis
    off = layout.handle_offset(SWAP_POT)
    assert slot_offset(STOVE, MOKA_POT, 1, 2, grasp_offset=off)[1] == 0.0
