"""Scripted pick-and-place for LIBERO instructions (compatibility facade).

The code lives in the :mod:`rpent.robots.libero.skills` package (language, naming,
estimate, grasp, spatial, motion); this module re-exports the names older callers import
(``strategy.parse_instruction``, ``strategy.ObjectEstimate``, ``strategy.pick_and_place``, ...).
"""

from __future__ import annotations

from rpent.robots.libero.skills.estimate import ObjectEstimate, refine_estimate
from rpent.robots.libero.skills.language import (
    FixtureGoal,
    PickPlaceGoal,
    PushGoal,
    Qualifier,
    TaskPlan,
    Unsupported,
    parse_instruction,
    parse_task,
    through_door,
)
from rpent.robots.libero.skills.motion import (
    Executor,
    InProcessExecutor,
    StrategyParams,
    pick_and_place,
    plan_grasp,
    xy_waypoints,
)
from rpent.robots.libero.skills.naming import (
    dilate_mask,
    erode_mask,
    match_object_names,
    name_tokens,
    phrase_tokens,
    segment_by_name,
    support_height,
)

__all__ = [
    "FixtureGoal",
    "PickPlaceGoal",
    "PushGoal",
    "Qualifier",
    "TaskPlan",
    "Unsupported",
    "parse_instruction",
    "parse_task",
    "through_door",
    "name_tokens",
    "phrase_tokens",
    "match_object_names",
    "erode_mask",
    "segment_by_name",
    "dilate_mask",
    "support_height",
    "ObjectEstimate",
    "refine_estimate",
    "StrategyParams",
    "plan_grasp",
    "xy_waypoints",
    "pick_and_place",
    "Executor",
    "InProcessExecutor",
]
