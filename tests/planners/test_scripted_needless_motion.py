"""The scripted planner leaves out motion calls that would not move the arm (pure logic, no simulator)."""

from __future__ import annotations

import math

from rpent.planners.scripted import _Latest, _ToolExecutor, needless_motion

# eef pointing down at yaw 0 (xyzw quaternion of a 180 deg turn about world x, as LIBERO's start pose)
DOWN = [1.0, 0.0, 0.0, 0.0]


def _state(xyz, quat=DOWN):
    return {"robot0_eef_pos": list(xyz), "robot0_eef_quat": list(quat), "robot0_gripper_qpos": [0.039, -0.039],
            "terminated": False, "truncated": False, "success": False}


def _yawed(yaw):
    # quaternion of R_z(yaw) * R_x(pi): pointing down, turned by yaw about world z
    return [math.cos(yaw / 2.0), math.sin(yaw / 2.0), 0.0, 0.0]


def test_move_to_within_tol_with_same_gripper_is_left_out():
    s = _state([0.1, 0.2, 1.0])
    assert needless_motion("move_to", {"xyz": [0.1, 0.2, 1.005], "gripper": -1.0}, s, -1.0)["steps_used"] == 0
    # farther than tol, another gripper command, or no known gripper command: made
    assert needless_motion("move_to", {"xyz": [0.1, 0.2, 1.02], "gripper": -1.0}, s, -1.0) is None
    assert needless_motion("move_to", {"xyz": [0.1, 0.2, 1.005], "gripper": 1.0}, s, -1.0) is None
    assert needless_motion("move_to", {"xyz": [0.1, 0.2, 1.005]}, s, None) is None
    assert needless_motion("move_to", {"xyz": [0.1, 0.2, 1.02], "tol": 0.03}, s, -1.0) is not None  # default gripper -1
    # never a gripper or release call
    assert needless_motion("set_gripper", {"gripper": -1.0}, s, -1.0) is None
    assert needless_motion("release", {}, s, -1.0) is None


def test_yaw_must_match_too():
    s = _state([0.0, 0.0, 1.0], _yawed(0.5))
    assert needless_motion("move_to", {"xyz": [0.0, 0.0, 1.0], "target_yaw": 0.5}, s, -1.0) is not None
    assert needless_motion("move_to", {"xyz": [0.0, 0.0, 1.0], "target_yaw": 0.6}, s, -1.0) is None
    assert needless_motion("rotate_wrist", {"target_yaw": 0.51, "gripper": -1.0, "tol": 0.03}, s, -1.0) is not None
    assert needless_motion("rotate_wrist", {"target_yaw": 0.6, "gripper": -1.0, "tol": 0.03}, s, -1.0) is None
    assert needless_motion("rotate_wrist", {"delta_yaw": 0.0, "gripper": -1.0}, s, -1.0) is None


def test_executor_skips_and_tracks_state_from_answers():
    calls = []
    after = {"state": _state([0.3, 0.0, 1.1]), "terminated": False, "truncated": False, "success": False}

    def call(name, args):
        calls.append(name)
        if name == "view_env_state":
            return {"state": _state([0.0, 0.0, 1.2]), "terminated": False, "truncated": False, "success": False}
        return {"steps_used": 5, "state_after": after}

    latest = _Latest()

    def tracked(name, args):
        res = call(name, args)
        latest.note(name, args, res)
        return res

    tracked.latest = latest
    ex = _ToolExecutor(tracked)
    assert ex.current_state()["robot0_eef_pos"] == [0.0, 0.0, 1.2]  # one view_env_state
    ex.run("move_to", {"xyz": [0.3, 0.0, 1.1], "gripper": -1.0})
    assert ex.current_state()["robot0_eef_pos"] == [0.3, 0.0, 1.1]  # from state_after, no new view
    out = ex.run("move_to", {"xyz": [0.3, 0.0, 1.105], "gripper": -1.0})
    assert out["skipped"] and latest.skipped == 1
    assert calls == ["view_env_state", "move_to"]
    # a second executor over the same call shares the state
    assert _ToolExecutor(tracked).current_state()["robot0_eef_pos"] == [0.3, 0.0, 1.1]


def test_a_lost_object_is_looked_for_again_other_failures_are_not():
    from rpent.planners.scripted import _lost

    assert _lost({"stage": "lift", "reason": "grasp came up empty (gripper opening 0.0010 m)"})
    assert _lost({"stage": "transport", "reason": "the object slipped out of the gripper on the way (gripper opening 0.0019 m)"})
    assert _lost({"stage": "lift", "reason": "the gripper did not close (opening 0.0755 m): nothing between the fingers"})
    assert not _lost({"stage": "retreat", "reason": "task predicate not satisfied"})
    assert not _lost({"stage": "transport", "reason": "episode truncated (max_episode_steps reached)"})
    assert not _lost({"stage": "descend", "reason": "grasp came up empty"})
