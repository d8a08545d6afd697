"""Action convention, motion loops (on the real simulator) and the scripted pick-and-place strategy."""

from __future__ import annotations

import math
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from rpent.robots.libero import control, geometry, strategy
from rpent.robots.libero.sim import LiberoSim


def _quat_about(axis: str, angle: float, base_xyzw=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """xyzw quaternion of a world-axis rotation applied to a base orientation (default: gripper down)."""
    half = angle / 2
    q_axis = {"x": (math.sin(half), 0, 0), "y": (0, math.sin(half), 0), "z": (0, 0, math.sin(half))}[axis]
    ax, ay, az, aw = *q_axis, math.cos(half)
    bx, by, bz, bw = base_xyzw
    return np.array([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])


# ---------------------------------------------------------------------- pure functions
def test_yaw_and_pitch_conventions():
    down = np.array([1.0, 0, 0, 0])  # 180 degrees about x: gripper z-axis points down
    assert control.eef_yaw(down) == pytest.approx(0.0, abs=1e-12)
    assert control.eef_pitch(down) == pytest.approx(0.0, abs=1e-12)
    for yaw in (-2.5, -0.7, 0.4, 1.5, 3.0):
        q = _quat_about("z", yaw)
        assert control.eef_yaw(q) == pytest.approx(yaw, abs=1e-9)
        assert control.eef_pitch(q) == pytest.approx(0.0, abs=1e-9)
    for pitch in (-0.6, 0.3, math.pi / 2):
        assert control.eef_pitch(_quat_about("x", pitch)) == pytest.approx(pitch, abs=1e-9)
    # +pi/2 pitch: gripper z-axis along world +y
    r = geometry.quat_xyzw_to_matrix(_quat_about("x", math.pi / 2))
    np.testing.assert_allclose(r[:, 2], [0, 1, 0], atol=1e-12)


def test_position_and_angle_actions():
    a = control.position_action([0, 0, 0], [0.1, -0.004, 0.02], step_clip=0.025)
    np.testing.assert_allclose(a, [0.5, -0.08, 0.4])
    assert np.all(np.abs(control.position_action([0, 0, 0], [5, -5, 0], 0.2)) == [1, 1, 0])
    # wrapped error: from -3.1 to 3.1 is -0.083 rad, not +6.2
    assert control.angle_action(-3.1, 3.1, step_clip=0.1) == pytest.approx((2 * math.pi - 6.2) * -1 / 0.1)
    assert control.angle_action(0.0, 1.0, step_clip=0.1) == 1.0
    assert control.angle_action(0.0, 0.05, step_clip=0.1) == pytest.approx(0.5)
    state = {"robot0_eef_pos": [0, 0, 0.2], "robot0_eef_quat": _quat_about("z", 0.02), "robot0_gripper_qpos": [0.04, -0.04]}
    act = control.servo_action(state, [0, 0.01, 0.2], target_yaw=0.0, gripper=1.0)
    np.testing.assert_allclose(act, [0, 0.2, 0, 0, 0, -0.2, 1.0], atol=1e-9)
    assert control.gripper_opening([0.039, -0.04]) == pytest.approx(0.079)
    assert control.position_reached([0, 0, 0], [0.01, 0, 0], 0.012)
    assert not control.angle_reached(0.0, 0.03, 0.02)


def test_axis_angle_keeps_openpi_convention_for_negative_w():
    q = np.array([0.9995, 0.0, -0.029, -0.0005])  # gripper down, w slightly negative
    q /= np.linalg.norm(q)
    aa = geometry.quat_to_axis_angle(q)
    assert np.linalg.norm(aa) > math.pi  # angle 2*acos(w) > pi: no canonicalisation
    assert aa[0] > 3.1
    np.testing.assert_array_equal(geometry.quat_to_axis_angle([0, 0, 0, 1.0]), np.zeros(3))


def test_argument_errors_name_the_fix():
    state = {"robot0_eef_pos": [0, 0, 0.2], "robot0_eef_quat": [1.0, 0, 0, 0], "robot0_gripper_qpos": [0.04, -0.04]}
    step = lambda a: pytest.fail("must not step on bad arguments")  # noqa: E731
    with pytest.raises(control.MotionArgumentError, match="xyz must be a JSON array of three numbers"):
        control.move_to(step, state, [0.1, 0.2])
    with pytest.raises(control.MotionArgumentError, match="max_steps must be a positive integer"):
        control.move_to(step, state, [0.1, 0.2, 0.3], max_steps=0)
    with pytest.raises(control.MotionArgumentError, match=r"gripper must be a number in \[-1, 1\]"):
        control.set_gripper(step, state, gripper=2)
    with pytest.raises(control.MotionArgumentError, match="need target_yaw or delta_yaw"):
        control.rotate_wrist(step, state)
    with pytest.raises(control.MotionArgumentError, match="only one of target_pitch or delta_pitch"):
        control.rotate_pitch(step, state, target_pitch=0.1, delta_pitch=0.1)
    with pytest.raises(control.MotionArgumentError, match="lacks 'robot0_eef_quat'"):
        control.move_to(step, {"robot0_eef_pos": [0, 0, 0]}, [0, 0, 0])


def test_loops_never_step_an_ended_episode():
    state = {"robot0_eef_pos": [0, 0, 0.2], "robot0_eef_quat": [1.0, 0, 0, 0], "robot0_gripper_qpos": [0.04, -0.04],
             "terminated": True}
    step = lambda a: pytest.fail("stepped after the episode ended")  # noqa: E731
    r = control.move_to(step, state, [0.1, 0.1, 0.1])
    assert r["steps_used"] == 0 and r["terminated"] is True and r["reached"] is False
    assert control.release(step, dict(state, terminated=False, truncated=True))["steps_used"] == 0


# ---------------------------------------------------------------------- strategy (pure)
@pytest.mark.parametrize("text, expected", [
    ("pick up the alphabet soup and place it in the basket", ("alphabet soup", "basket", "in")),
    ("Pick the cream cheese and place it in the basket", ("cream cheese", "basket", "in")),
    ("grab milk and put into basket", ("milk", "basket", "in")),
    ("put the wine bottle on top of the cabinet", ("wine bottle", "cabinet", "on")),
    ("place the cream cheese inside the bowl", ("cream cheese", "bowl", "in")),
    ("put the bowl on the plate", ("bowl", "plate", "on")),
])
def test_parse_supported(text, expected):
    goal = strategy.parse_instruction(text)
    assert isinstance(goal, strategy.PickPlaceGoal)
    assert (goal.object_phrase, goal.target_phrase, goal.relation) == expected


@pytest.mark.parametrize("text, why", [
    ("open the middle drawer of the cabinet", "'open' skill"),
    ("turn on the stove", "'turn on' skill"),
    ("put both the alphabet soup and the tomato sauce in the basket", "two objects"),
    ("put the black bowl in the bottom drawer of the cabinet and close it", "'close' skill"),
    ("pick up the black bowl under the ramekin and place it on the plate", "spatial qualifier"),
    ("pick up the book and place it in the middle compartment of the caddy", "region"),
    ("push the plate to the front of the stove", "'push' skill"),
    ("wave hello", "not a pick-and-place"),
])
def test_parse_unsupported(text, why):
    goal = strategy.parse_instruction(text)
    assert isinstance(goal, strategy.Unsupported) and why in goal.reason


def test_parse_a_named_compartment_of_a_caddy():
    goal = strategy.parse_instruction("pick up the book and place it in the back compartment of the caddy")
    assert isinstance(goal, strategy.PickPlaceGoal)
    assert (goal.object_phrase, goal.target_phrase, goal.relation, goal.target_compartment) == ("book", "caddy", "in", "back")


def test_name_matching_rule():
    names = ["alphabet_soup_1", "cream_cheese_1", "basket_1", "akita_black_bowl_1", "akita_black_bowl_2",
             "white_yellow_mug_1", "porcelain_mug_1", "wine_bottle_1", "wine_rack_1", "robot"]
    assert strategy.match_object_names("alphabet soup", names) == ["alphabet_soup_1"]
    assert strategy.match_object_names("the cream cheese box", names) == ["cream_cheese_1"]
    assert strategy.match_object_names("black bowl", names) == ["akita_black_bowl_1", "akita_black_bowl_2"]
    assert strategy.match_object_names("yellow and white cup", names) == ["white_yellow_mug_1"]
    assert strategy.match_object_names("wine bottle", names) == ["wine_bottle_1"]
    assert strategy.match_object_names("rack", names) == ["wine_rack_1"]
    assert strategy.match_object_names("robot", names) == []
    assert strategy.match_object_names("soup bowl", names) == ["akita_black_bowl_1", "akita_black_bowl_2"]


def test_segment_by_name_and_erosion():
    seg = np.zeros((12, 12), dtype=np.int32)
    seg[2:8, 2:8] = 3
    seg[9:11, 9:11] = 4
    table = {"3": "alphabet_soup_1", "4": "basket_1", "5": "robot"}
    mask, names = strategy.segment_by_name("Alphabet Soup", seg, table)
    assert names == ["alphabet_soup_1"] and mask.sum() == 16 and mask[3:7, 3:7].all()
    mask, _ = strategy.segment_by_name("alphabet soup", seg, table, erode=False)
    assert mask.sum() == 36
    mask, names = strategy.segment_by_name("basket", seg, table)
    assert names == ["basket_1"] and mask.sum() == 4  # too small to erode: kept whole
    mask, names = strategy.segment_by_name("ketchup", seg, table)
    assert names == [] and not mask.any()


def test_object_estimates_and_grasp_plan():
    rot = geometry.quat_xyzw_to_matrix([0, 0, math.sin(0.3), math.cos(0.3)])  # yaw 0.6 rad
    est = strategy.ObjectEstimate.from_box([0.1, 0.2, 0.01], rot, [0.04, 0.02, 0.01])
    assert est.major_yaw == pytest.approx(0.6) and est.major_extent == pytest.approx(0.08)
    assert est.top_z == pytest.approx(0.02) and est.bottom_z == pytest.approx(0.0)
    grasp = strategy.plan_grasp(est, current_yaw=0.0)
    assert grasp["yaw"] == pytest.approx(0.6)  # fingers close across the 4 cm side
    assert grasp["xyz"][2] == pytest.approx(0.012)  # short object: fingertips just above the table
    # the same box turned by pi is the same grasp: folded near the current yaw (0.6 + pi from 2.5), then
    # turned back where that would leave the wrist's last joint less than WRIST_MARGIN from its limit
    from rpent.robots.libero.skills.grasp import _plan_grasp

    assert _plan_grasp(est, current_yaw=2.5)["yaw"] == pytest.approx(0.6 + math.pi)
    assert strategy.plan_grasp(est, current_yaw=2.5)["yaw"] == pytest.approx(0.6)
    # a round footprint keeps the current yaw
    can = strategy.ObjectEstimate.from_box([0, 0, 0.04], np.eye(3), [0.03, 0.031, 0.04])
    assert strategy.plan_grasp(can, current_yaw=0.2)["yaw"] == pytest.approx(0.2)
    # points on a box: footprint from the top band, ridge detection on a gable top
    rng = np.random.default_rng(0)
    body = rng.uniform([-0.03, -0.03, 0.0], [0.03, 0.03, 0.11], size=(3000, 3))
    ridge = np.column_stack([rng.uniform(-0.022, 0.022, 400), rng.normal(0, 0.0005, 400), np.full(400, 0.14)])
    carton = strategy.ObjectEstimate.from_points(np.vstack([body, ridge]) + [0.05, -0.1, 0.0], floor_z=0.0)
    assert carton.ridge_yaw is not None and abs(carton.ridge_yaw) < 0.05  # ridge along world x
    assert strategy.plan_grasp(carton, current_yaw=0.0)["yaw"] == pytest.approx(carton.ridge_yaw - math.pi / 2 + math.pi, abs=1e-9) or \
        strategy.plan_grasp(carton, current_yaw=0.0)["yaw"] == pytest.approx(carton.ridge_yaw - math.pi / 2, abs=1e-9)
    assert carton.center[0] == pytest.approx(0.05, abs=0.005) and carton.center[1] == pytest.approx(-0.1, abs=0.005)
    with pytest.raises(ValueError, match="at least 10 valid world points"):
        strategy.ObjectEstimate.from_points(np.full((20, 3), np.nan))


def test_xy_waypoints_respect_the_travel_limit():
    wps = strategy.xy_waypoints([0, 0, 0.3], [0.5, 0.4, 0.1], max_xy=0.25)
    assert len(wps) == 3
    prev = np.array([0, 0, 0.3])
    for wp in wps:
        assert np.linalg.norm(wp[:2] - prev[:2]) <= 0.25 + 1e-12
        prev = wp
    np.testing.assert_allclose(wps[-1], [0.5, 0.4, 0.1])


# ---------------------------------------------------------------------- loops on the real simulator
@pytest.fixture(scope="module")
def sim():
    s = LiberoSim("libero_object", 1, seed=0, max_episode_steps=400)
    yield s
    s.close()


def test_move_to_reaches_and_reports(sim):
    state = sim.reset()
    start = state["robot0_eef_pos"]
    target = (start + [0.06, -0.05, -0.04]).tolist()
    r = control.move_to(sim.step, state, target)
    assert r["reached"] and r["final_dist_m"] <= 0.012 and 0 < r["steps_used"] < 80
    assert set(r) >= {"target_xyz", "final_eef_pos", "final_dist_m", "steps_used", "terminated", "truncated"}
    assert r["steps_used"] == sim.status()["steps"]
    np.testing.assert_allclose(r["final_eef_pos"], sim.robot_obs()["robot0_eef_pos"])
    far = control.move_to(sim.step, sim.robot_obs(), [start[0] + 0.35, start[1], start[2]], max_steps=1)
    assert "warning" in far and far["steps_used"] == 1


def test_rotations_and_gripper(sim):
    tracker = control.StateTracker(sim.step, sim.reset())
    r = control.rotate_wrist(tracker.step, tracker.state, delta_yaw=0.5, gripper=-1)
    assert r["final_err"] <= 0.02 and r["target_yaw"] == pytest.approx(r["start_yaw"] + 0.5)
    assert control.eef_yaw(sim.robot_obs()["robot0_eef_quat"]) == pytest.approx(r["start_yaw"] + 0.5, abs=0.02)
    r = control.rotate_pitch(tracker.step, tracker.state, target_pitch=0.25, gripper=-1)
    assert r["final_err"] <= 0.02
    r = control.move_pose(tracker.step, tracker.state, control.robot_state(tracker.state)["eef_pos"].tolist(),
                          target_pitch=0.0, target_yaw=0.0)
    assert r["reached"] and abs(r["final_pitch"]) <= 0.05 and abs(r["final_yaw"]) <= 0.05
    r = control.set_gripper(tracker.step, tracker.state, gripper=1, steps=12)
    assert r["steps"] == 12 and r["gripper_opening"] < 0.02
    r = control.release(tracker.step, tracker.state)
    assert r["final_gripper_opening"] > 0.07 and r["start_gripper_opening"] < 0.02 and r["steps_used"] <= 20
    assert tracker.steps == sim.status()["steps"]


def test_cancel_stops_between_env_steps(sim):
    state = sim.reset()
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 3

    r = control.move_to(sim.step, state, (state["robot0_eef_pos"] + [0.2, 0, 0]).tolist(), cancelled=cancelled)
    assert r["code"] == "tool_cancelled" and r["interrupted"] is True and "cancelled" in r["error"]
    assert r["steps_used"] == 3 and sim.status()["steps"] == 3


def test_scripted_pick_and_place_succeeds_end_to_end():
    """libero_object task 1: 'pick up the cream cheese and place it in the basket', oracle geometry."""
    with LiberoSim("libero_object", 1, seed=0, max_episode_steps=500) as sim:
        goal = strategy.parse_instruction(sim.task_language)
        names = sim.object_names()["objects"]
        (obj_name,) = strategy.match_object_names(goal.object_phrase, names)
        (tgt_name,) = strategy.match_object_names(goal.target_phrase, names)
        boxes = {n: sim.object_bbox(n) for n in (obj_name, tgt_name)}
        obj, tgt = (strategy.ObjectEstimate.from_box(b["center"], b["axes"], b["half_extents"]) for b in boxes.values())
        result = strategy.pick_and_place(strategy.InProcessExecutor(sim.step, sim.robot_obs()), obj, tgt, goal.relation)
        assert result["success"] is True, result.get("reason")
        assert sim.success() is True and sim.status()["terminated"] is True
        assert result["env_steps"] == sim.status()["steps"] < 300
        phases = [p["phase"] for p in result["phases"]]
        assert phases[:2] == ["approach", "approach"] and "close" in phases and "release" in phases


def test_joints_at_their_limits_are_named_from_the_recorded_joint_angles():
    from rpent.robots.libero.control import joints_at_limit

    # libero_10_task t7 seed 2, during the lift that stalled 20 cm short: joints 5 and 6 at their limits
    stalled = {"robot0_joint_pos": [-0.179, 0.071, 0.485, -2.39, 2.898, 3.753, -1.943]}
    assert joints_at_limit(stalled) == [(5, 2.898), (6, 3.753)]
    # the start pose (robosuite's Panda init qpos) is well inside every range
    assert joints_at_limit({"robot0_joint_pos": [0.0, 0.196, 0.0, -2.618, 0.0, 2.94, 0.785]}) == []
    assert joints_at_limit({}) == []  # a state recorded without joint angles
