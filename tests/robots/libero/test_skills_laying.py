"""Pure tests of laying a tall object down in an open drawer (``skills/laying.py``): the spot it
is set down upright at, the push direction, and when it does not fit. The drawer and the bottle
estimate are recorded from libero_10_task t3 seed 0 (``view_fixtures`` and the agentview
``segment`` answer)."""

from __future__ import annotations

import math

import pytest

from rpent.robots.libero.skills import laying
from rpent.robots.libero.skills.estimate import ObjectEstimate

# white_cabinet_1's bottom drawer, open 0.144 m toward -y
BOTTOM = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": -0.144,
          "range": [-0.16, 0.01], "axis": [0.0, 1.0, 0.0], "handle": [-0.011, 0.055, 0.947],
          "min": [-0.115, 0.036, 0.913], "max": [0.107, 0.242, 0.984]}
# the wine bottle: 15 cm tall, its footprint seen only at its cap
BOTTLE = ObjectEstimate(center=(-0.1257, 0.0488, 0.9756), top_z=1.05, bottom_z=0.901, major_yaw=1.333,
                        major_extent=0.007, minor_extent=0.002)
BOWL = ObjectEstimate(center=(-0.1, 0.0, 0.93), top_z=0.953, bottom_z=0.901, major_extent=0.10, minor_extent=0.095)


def test_a_bottle_taller_than_the_drawer_is_laid_along_its_width():
    assert laying.free_height(BOTTOM) == pytest.approx(0.984 - 0.913 - 0.012)
    assert laying.needs_laying(BOTTLE, BOTTOM) and not laying.needs_laying(BOWL, BOTTOM)
    target, push = laying.lay_spot(BOTTOM, BOTTLE)
    # along the width (world +x, from the robot's side), set down next to the -x end of the box:
    # 2.6-3.0 cm in tipped it flat in the simulator, 3.5 cm onto the far wall
    assert push == pytest.approx((1.0, 0.0))
    assert 0.026 <= target.center[0] - BOTTOM["min"][0] <= 0.031
    # just behind the front's inner face (the handle's outer face at y 0.036, 4.5 cm deep)
    assert target.center[1] == pytest.approx(0.036 + 0.045 + 0.005 + laying.MIN_RADIUS)
    assert target.support[2] == pytest.approx(0.913 + 0.012)  # set down on the drawer's floor
    # lying, it reaches no farther than the box's other end
    assert target.center[0] - laying.MIN_RADIUS + BOTTLE.height < BOTTOM["max"][0]


def test_an_object_longer_than_the_drawer_is_wide_or_a_drawer_barely_open_gets_no_spot():
    long = ObjectEstimate(center=(0.0, 0.0, 1.0), top_z=1.15, bottom_z=0.90, major_extent=0.05, minor_extent=0.05)
    assert laying.lay_spot(BOTTOM, long) is None
    assert laying.lay_spot({**BOTTOM, "qpos": -0.03}, BOTTLE) is None


def test_a_drawer_opening_along_x_is_laid_along_y():
    part = {**BOTTOM, "axis": [1.0, 0.0, 0.0], "min": [0.036, -0.115, 0.913], "max": [0.242, 0.107, 0.984]}
    target, push = laying.lay_spot(part, BOTTLE)
    assert push == pytest.approx((0.0, 1.0))
    assert math.isclose(target.center[0], 0.036 + 0.045 + 0.005 + laying.MIN_RADIUS)
