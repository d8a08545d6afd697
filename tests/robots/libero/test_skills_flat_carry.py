"""Pure tests of carrying a flat object pinched at its lip: how far it may swing down, the
release height from a look at it while held, and the look itself (a fake ``segment`` answer
recorded from libero_goal_task task 4, seed 0: the plate over the cabinet, eef at 1.265 m)."""

from __future__ import annotations

import math

import pytest

from rpent.robots.libero.skills.motion import FLAT_CARRY_TILT, flat_tilt_drop, release_hang
from rpent.robots.libero.skills.scene import carried_looker


def test_tilt_drop_is_the_lip_to_lip_span_times_the_sine():
    assert flat_tilt_drop((0.054, 0.0), math.pi / 2) == pytest.approx(0.108)
    assert flat_tilt_drop((0.0, -0.054), 0.0) == pytest.approx(0.0)
    assert flat_tilt_drop((0.03, 0.04)) == pytest.approx(0.1 * math.sin(FLAT_CARRY_TILT))


def test_release_hang_takes_a_lower_reading_only():
    # the plate seen hanging 11.3 cm below the eef, planned 1.9 cm: the reading wins
    assert release_hang(0.019, 1.2646, 1.1519) == pytest.approx(0.1127)
    # level in the grip (within a cm): the plan stands
    assert release_hang(0.019, 1.2646, 1.2500) == pytest.approx(0.019)
    # seen higher than planned (the fingers hide the pinched side): the plan stands
    assert release_hang(0.019, 1.2646, 1.2600) == pytest.approx(0.019)
    assert release_hang(0.019, 1.2646, None) == pytest.approx(0.019)


def _segment_answer(instances):
    return {"found": bool(instances), "instances": instances}


def _plate(center, low):
    est = {"center": list(center), "top_z": low + 0.1, "bottom_z": 0.9, "major_yaw": 0.0, "major_extent": 0.1,
           "minor_extent": 0.1}
    return {"object": "plate_1", "box": [10, 10, 50, 50], "pixel_count": 900, "object_estimate": est, "lowest_z": low}


STATE = {"robot0_eef_pos": [0.0924, -0.2302, 1.2646], "robot0_eef_quat": [1.0, 0.0, 0.0, 0.0],
         "robot0_gripper_qpos": [0.003, -0.003]}


def test_carried_look_picks_the_instance_under_the_hand():
    calls = []

    def call(name, args):
        calls.append((name, args))
        return _segment_answer([_plate((0.04, 0.2, 0.91), 0.905), _plate((0.05, -0.23, 1.2), 1.1519)])

    assert carried_looker(call, "plate")(STATE) == pytest.approx(1.1519)
    assert calls == [("segment", {"prompt": "plate", "camera": "agentview", "all_instances": True})]


def test_carried_look_finds_nothing_near_the_hand():
    def call(name, args):
        return _segment_answer([_plate((0.04, 0.2, 0.91), 0.905)])

    assert carried_looker(call, "plate")(STATE) is None
    assert carried_looker(lambda n, a: {"found": False, "reason": "empty mask"}, "plate")(STATE) is None
