"""Push plans and the push goal beside a reference (pure logic; the push itself runs in
``test_scripted_skills_sim.py``, slow)."""

from __future__ import annotations

import pytest

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import PushGoal, TaskPlan, Unsupported, parse_instruction, parse_task
from rpent.robots.libero.skills.push import PUSH_GAP, push_goal


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
    # the stove and plate of libero_goal t5 (seed 0): front = +x, as LIBERO's stove_front_region
    stove = ObjectEstimate(center=(-0.32, 0.21, 0.92), top_z=0.96, bottom_z=0.9, major_yaw=0.0, major_extent=0.30,
                           minor_extent=0.19)
    plate = ObjectEstimate(center=(0.05, -0.03, 0.91), top_z=0.92, bottom_z=0.9, major_extent=0.16, minor_extent=0.16)
    gx, gy = push_goal(stove, plate, "front")
    assert gx == pytest.approx(-0.32 + 0.15 + 0.08 + PUSH_GAP) and gy == pytest.approx(0.21)
    assert push_goal(stove, plate, "right")[1] > 0.21 + 0.095 + 0.08
    with pytest.raises(ValueError, match="side must be"):
        push_goal(stove, plate, "above")
