"""When the scripted planner leaves out the wrist's second look at a target cut by the image
border (:meth:`ScriptedPlanner._look_overreaches`), on recorded agentview estimates."""

from __future__ import annotations

import pytest

from rpent.planners.scripted import LOOK_HEIGHT, LOOK_REACH_Z, ScriptedPlanner
from rpent.robots.libero.skills.estimate import ObjectEstimate


def _est(center, top, major, minor):
    return ObjectEstimate(center=center, top_z=top, bottom_z=0.9009, major_extent=major, minor_extent=minor)


@pytest.mark.parametrize("est", [
    # libero_goal's wooden cabinet, agentview mask cut by the left border: t4 seed 1, t2 seed 1, t4 seed 2
    _est((0.0455, -0.2331, 1.0141), 1.1274, 0.2288, 0.1526),
    _est((0.0330, -0.2280, 1.0141), 1.1274, 0.2282, 0.1639),
    _est((0.0457, -0.2345, 1.0141), 1.1274, 0.2294, 0.1504),
])
def test_far_tall_wide_target_is_not_looked_at_again(est):
    assert est.top_z + LOOK_HEIGHT > LOOK_REACH_Z
    assert ScriptedPlanner._look_overreaches(est)


@pytest.mark.parametrize("est", [
    # libero_goal t5's plate (0.107 x 0.104 m seen): too small to place on blind
    _est((0.0504, -0.0286, 0.9094), 0.9179, 0.1065, 0.1044),
    # the same cabinet, but within easy reach of the robot (0.45 m out)
    _est((-0.25, -0.2, 1.0141), 1.1274, 0.2288, 0.1526),
    # a wide low target far out: the look pose is low enough
    _est((0.05, -0.2, 0.93), 0.96, 0.2, 0.2),
])
def test_other_cut_targets_are_looked_at_again(est):
    assert not ScriptedPlanner._look_overreaches(est)
