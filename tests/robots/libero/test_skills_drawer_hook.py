"""Pure tests of the front hook that drags open a drawer whose handle cannot be gripped: the
hand's pose and the grip site's aim on the recorded ``view_fixtures`` bottom drawer of
libero_goal_task t0 seed 0 (``wooden_cabinet``, opening toward +y, handle 4.2 cm above the table)."""

from __future__ import annotations

import math

import pytest

from rpent.robots.libero.skills.drawer_hook import (
    HOOK_ABOVE_BAR,
    HOOK_PAST_BAR,
    HOOK_PITCH,
    HOOK_YAW,
    hook_point,
    hook_pose,
)

BOTTOM = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": 0.0, "range": [-0.16, 0.01],
          "axis": [-1.2246467991473532e-16, -1.0, 0.0], "pos": [0.0396, -0.2340, 0.905],
          "handle": [0.04217516979165747, -0.14255442983786415, 0.9465552040636507],
          "min": [-0.07560921873756433, -0.3292977159093827, 0.913341531942859],
          "max": [0.14678096545641928, -0.1237530981703291, 0.9840544728243987]}


def test_pose_leans_the_fingertips_into_the_drawer():
    assert hook_pose(BOTTOM) == (pytest.approx(-HOOK_PITCH), pytest.approx(HOOK_YAW))
    # the same cabinet turned to open toward -y: the lean mirrors
    mirrored = {**BOTTOM, "axis": [0.0, 1.0, 0.0]}
    assert hook_pose(mirrored)[0] == pytest.approx(HOOK_PITCH)
    # the fingers close along world x: across a drawer that opens along y
    assert (-math.sin(HOOK_YAW), math.cos(HOOK_YAW)) == pytest.approx((-1.0, 0.0))


def test_no_pose_for_a_drawer_not_along_world_y():
    assert hook_pose({**BOTTOM, "axis": [1.0, 0.0, 0.0]}) is None


def test_point_is_behind_the_bar_and_above_its_centre():
    p = hook_point(BOTTOM)
    assert p[0] == pytest.approx(BOTTOM["handle"][0])
    assert p[1] == pytest.approx(BOTTOM["max"][1] - HOOK_PAST_BAR)  # past the ~1.6 cm bar, short of the front
    assert BOTTOM["max"][1] - 0.035 < p[1] < BOTTOM["max"][1] - 0.016
    assert p[2] == pytest.approx(BOTTOM["handle"][2] + HOOK_ABOVE_BAR)


def test_point_follows_the_bar_as_the_drawer_opens():
    opened = {**BOTTOM, "qpos": -0.05, "handle": [0.0422, -0.0926, 0.9466],
              "min": [-0.0756, -0.2793, 0.9133], "max": [0.1468, -0.0738, 0.9841]}
    assert hook_point(opened)[1] - hook_point(BOTTOM)[1] == pytest.approx(0.05, abs=1e-4)
