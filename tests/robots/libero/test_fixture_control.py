"""Pure tests of the closed-loop control of articulated fixtures: the drawer pull's
verdicts and its next hold, the hook pull's geometry, and the stove knob push's verdicts.

The traces are recorded from real runs at seed 0 on libero_goal_swap: task 0 ("open the middle
drawer": the horizontal hand met the stove behind it at -0.124 m, short of LIBERO's -0.14 m) and
task 7 ("turn on the stove": the fingers rode onto the knob's grip and dragged it back; seed 1 on
main, which turned it on after losing it back once). The
``view_fixtures`` parts are copied from the same runs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills import fixtures
from rpent.robots.libero.skills.grasp import WRIST_LIMIT, wrist_angle
from rpent.robots.libero.skills.fixtures import (
    DRAWER_FRONT_DEPTH,
    DRAWER_HOOK_HEIGHT,
    hook_plan,
    knob_descent_yaw,
    knob_push_verdict,
    next_hold,
    open_amount,
    open_direction,
    open_goal,
    pull_verdict,
)

# libero_goal_swap t0 seed 0: the middle drawer closed, and after the first (stalled) pull
MIDDLE_CLOSED = {"part": "cabinet_middle", "joint": "middle_level", "type": "slide", "qpos": 0.0,
                 "range": [-0.16, 0.01], "axis": [-1.2246467991473532e-16, -1.0, 0.0],
                 "handle": [-0.2478248296379003, -0.16255442919990873, 1.0154616024029002],
                 "min": [-0.36544822179163283, -0.3492980595137668, 0.9829046581640234],
                 "max": [-0.1430579535777095, -0.14375309855536808, 1.0536176224650973]}
MIDDLE_STALLED = {**MIDDLE_CLOSED, "qpos": -0.12345618371485892,
                  "handle": [-0.2478248296379003, -0.03909833017491394, 1.0154616024029002],
                  "min": [-0.36544822179163283, -0.22584196048877203, 0.9829046581640234],
                  "max": [-0.1430579535777095, -0.020296999530373287, 1.0536176224650973]}
# (hand position along the opening direction, opening) before the pull and after each 3 cm leg
HANDLE_PULL = [(-0.140, 0.002), (-0.121, 0.018), (-0.101, 0.037), (-0.082, 0.057), (-0.062, 0.076),
               (-0.043, 0.096), (-0.024, 0.115), (-0.014, 0.124), (-0.014, 0.124)]


def test_open_goal_is_near_the_open_end_of_the_joint_range():
    assert open_direction(MIDDLE_CLOSED) == pytest.approx([0.0, 1.0, 0.0])
    assert open_amount(MIDDLE_CLOSED) == 0.0
    assert open_amount(MIDDLE_STALLED) == pytest.approx(0.1235, abs=1e-4)
    goal = open_goal(MIDDLE_CLOSED)
    assert goal == pytest.approx(0.16 - 0.06 * 0.17)
    assert goal > 0.14  # past LIBERO's open threshold (-0.14 m) without being told it
    assert open_amount(MIDDLE_STALLED) < goal  # the failure this fixes
    # a drawer whose range opens along +axis: the same rule on its own range
    plus = {**MIDDLE_CLOSED, "axis": [1.0, 0.0, 0.0], "range": [0.0, 0.3], "qpos": 0.1}
    assert open_direction(plus) == pytest.approx([1.0, 0.0, 0.0])
    assert open_amount(plus) == pytest.approx(0.1) and open_goal(plus) == pytest.approx(0.3 - 0.06 * 0.3)


def test_recorded_handle_pull_goes_on_while_it_opens_and_stalls_behind_the_stove():
    goal = open_goal(MIDDLE_CLOSED)
    verdicts = [pull_verdict(HANDLE_PULL[:i], goal) for i in range(1, len(HANDLE_PULL) + 1)]
    assert verdicts[:-1] == ["moving"] * (len(HANDLE_PULL) - 1)
    assert verdicts[-1] == "stalled"
    # stopped while holding, 12 cm open: hook inside the drawer front from above
    assert next_hold("stalled", HANDLE_PULL[-1][1]) == "hook"


def test_pull_verdicts_on_synthetic_traces():
    goal = 0.15
    assert pull_verdict([(0.0, 0.10), (0.03, 0.13), (0.06, 0.151)], goal) == "open"
    # the hand runs on, the drawer stays: it lost the handle
    slipped = [(0.0, 0.02), (0.03, 0.045), (0.06, 0.06), (0.09, 0.062)]
    assert pull_verdict(slipped[:3], goal) == "moving"
    assert pull_verdict(slipped, goal) == "slipped"
    assert next_hold("slipped", 0.062) == "handle"
    # stalled before the drawer is open far enough for the fingers to fit behind its front
    assert next_hold("stalled", 0.03) == "handle"
    assert pull_verdict([(0.0, 0.0)], goal) == "moving"  # nothing pulled yet


def test_hook_goes_behind_the_front_of_the_stalled_drawer_with_the_fingers_along_it():
    plan = hook_plan(MIDDLE_STALLED)
    front = MIDDLE_STALLED["max"][1]  # the handle's outer face, the drawer opening along +y
    p = plan["point"]
    assert p[1] == pytest.approx(front - DRAWER_FRONT_DEPTH - 0.02)
    assert p[0] == pytest.approx(MIDDLE_STALLED["handle"][0])
    assert p[2] == pytest.approx(MIDDLE_STALLED["min"][2] + DRAWER_HOOK_HEIGHT)
    # between the cabinet's face (the closed drawer's front panel, 3.2 cm behind the handle) and
    # the drawer front's inner face, with >= 1 cm either side of the ~2 cm thick closed fingers
    cabinet_face = MIDDLE_CLOSED["max"][1] - 0.032
    assert cabinet_face + 0.02 < p[1] < front - DRAWER_FRONT_DEPTH - 0.01
    # Panda closes along the eef y axis (-sin yaw, cos yaw): across the pull, along the front
    closing = np.array([-math.sin(plan["yaw"]), math.cos(plan["yaw"]), 0.0])
    assert abs(float(closing @ plan["d_open"])) < 1e-9
    assert -math.pi / 2 <= plan["yaw"] < math.pi / 2
    assert plan["above_z"] > MIDDLE_STALLED["max"][2]


def test_knob_push_verdicts_on_recorded_traces():
    # goal_swap t7 seed 0 before the fix: the knob turned to 0.166 rad, then the fingers rode onto
    # the grip (eef 1.7-2.1 cm above the push height) and dragged it back to the stop, 25 pushes long
    trace = [0.003, -0.006, -0.000, 0.055, 0.166, 0.082, -0.005, -0.005]
    heights = [0.005, 0.007, 0.009, 0.021, 0.0205, 0.0175, 0.0175]
    assert [knob_push_verdict(trace[:i + 1], heights[:i], 0.003) for i in range(1, 6)] == ["pushing"] * 5
    assert knob_push_verdict(trace[:7], heights[:6], 0.003) == "riding"
    # goal_swap t7 seed 1 on main (it turned the knob on): two pushes 1.5-1.8 cm high, then down; the
    # knob lost back from 0.094 to -0.005 rad and passed 0.104 rad 7 pushes later
    s1_q = [0.0, -0.003, 0.006, 0.094, 0.01, -0.005, 0.004, 0.009, 0.011, 0.028, 0.057, 0.096, 0.138, 0.184,
            0.228, 0.267, 0.301, 0.334, 0.364, 0.393, 0.421, 0.447, 0.473, 0.499]
    s1_h = [0.005, 0.007, 0.018, 0.015, 0.014, 0.013, 0.012, 0.011, 0.009, 0.008, 0.008, 0.008, 0.008, 0.008,
            0.008, 0.008, 0.008, 0.008, 0.008, 0.007, 0.007, 0.007, 0.007]
    assert [knob_push_verdict(s1_q[:i + 1], s1_h[:i], 0.0) for i in range(1, len(s1_q))] == ["pushing"] * 23
    # no new best turn for KNOB_STALL_PUSHES pushes: stalled (comes down again)
    flat = [0.0, 0.2, 0.33] + [0.33, 0.32, 0.31] * 4
    assert knob_push_verdict(flat, [0.003] * (len(flat) - 1), 0.0) == "stalled"
    assert knob_push_verdict(flat, [0.003] * (len(flat) - 1), 0.035) == "slipped"
    # turning off: progress is toward lower qpos
    down = [1.0 - 0.05 * i for i in range(12)]
    assert knob_push_verdict(down, [0.0] * 11, 0.0, sign=-1.0) == "pushing"
    assert knob_push_verdict(down, [0.0] * 11, 0.0, sign=1.0) == "stalled"


def test_constants_keep_their_documented_relations():
    assert fixtures.DRAWER_HOOK_MIN_OPEN > DRAWER_FRONT_DEPTH - 0.032 + 0.04  # room for the fingers
    assert 0 < fixtures.DRAWER_OPEN_MARGIN < 0.1 and fixtures.DRAWER_PULL_TRIES >= 2


def test_a_bottom_drawers_handle_too_near_the_table_cannot_be_gripped():
    # libero_goal_task t0 s0: the wooden cabinet's bottom drawer (view_fixtures), handle 4.6 cm above
    # its box's bottom; the middle drawer's (libero_goal_swap t0) is 11 cm higher
    bottom = {**MIDDLE_CLOSED, "part": "cabinet_bottom", "handle": [0.0422, -0.1426, 0.9461],
              "min": [-0.067, -0.349, 0.9133], "max": [0.139, -0.1438, 0.9841]}
    floor = 0.9133 - 0.01
    assert not fixtures.handle_reachable(bottom, floor)
    assert fixtures.handle_reachable(MIDDLE_CLOSED, floor)
    assert fixtures.handle_reachable(bottom, None)  # nothing known about the floor: try it


# libero_10_task t2 seed 5: the stove's knob (view_fixtures) before it was turned
STOVE_KNOB = {"part": "button", "joint": "button", "type": "hinge", "qpos": 0.0, "range": [-0.005, 2.1],
              "axis": [0.0, 0.0, 1.0], "pos": [-0.20838517462470252, 0.20476880592397942, 0.905], "handle": None,
              "min": [-0.26443868047881125, 0.15568985890547674, 0.8961638609964263],
              "max": [-0.15866336801573167, 0.2522983031984553, 0.9642774369757463]}
#: flat_stove.xml: the top of the ring of collision boxes around the knob grip's foot (z 0.00657 +
#: 0.00621 m above the hinge origin); the closed fingertips' depth below the eef, measured where the
#: outer finger sat on that ring (eef 0.933 m over a ring top at 0.9178 m)
RING_TOP = 0.0128
FINGERTIPS_BELOW_EEF = 0.015


def test_the_knob_push_keeps_the_fingertips_above_the_ring_and_on_the_grip():
    c_z, top = STOVE_KNOB["pos"][2], STOVE_KNOB["max"][2]
    z_push = c_z + fixtures.KNOB_PUSH_HEIGHT * (top - c_z)
    tips = z_push - FINGERTIPS_BELOW_EEF
    # at 0.38 of the knob's height the tips stood 0.5 cm into the ring: the outer finger sat on it and
    # the knob crept 0.013 rad per push (seeds 5, 6 failed); at 0.55 they clear it
    assert tips > c_z + RING_TOP + 0.003
    assert top - tips > 0.03  # still 3 cm of the grip beside the fingers
    # a probe that stops on the grip's top (eef 0.966 m at seed 5) must not pass for a free descent
    assert 0.966 > z_push + 0.012


def test_the_descent_yaw_keeps_the_wrist_inside_its_limits():
    # seed 5: the probe found the grip at pi (the robot's side) with the hand at yaw -1.557; the push
    # descent comes down at pi/2 + 0.1. The radial yaw nearest -1.557 is -3.042 (the wrist's last
    # joint at 4.3 rad): the arm swung 16 cm away; 0.100 is the one the wrist can make.
    angle = math.pi / 2 + 0.1
    xy = (STOVE_KNOB["pos"][0] + 0.042 * math.cos(angle), STOVE_KNOB["pos"][1] + 0.042 * math.sin(angle))
    assert fixtures.knob_radial_yaw(angle, -1.557) == pytest.approx(-3.0416, abs=1e-3)
    yaw = knob_descent_yaw(angle, -1.557, xy)
    assert yaw == pytest.approx(0.1, abs=1e-6)
    assert abs(wrist_angle(yaw, xy)) < WRIST_LIMIT
    # the first probe (angle pi, from the start yaw 0): -pi/2 leaves the joint 0.08 rad from its limit
    probe_xy = (STOVE_KNOB["pos"][0] - 0.042, STOVE_KNOB["pos"][1])
    assert knob_descent_yaw(math.pi, 0.0, probe_xy) == pytest.approx(math.pi / 2)
    # where the nearest yaw is well inside the limits it is kept (the push's own small turns)
    assert knob_descent_yaw(angle, 0.3, xy) == pytest.approx(0.1, abs=1e-6)


class _KnobWorld:
    """A kinematic stand-in for the robot and the knob (no physics): ``move_to`` / ``rotate_wrist``
    put the hand where they are sent, except that a descent at the first grip probe's angle stops
    on the grip's top, and each short push turns the knob ``step`` rad and the hand's yaw with it."""

    def __init__(self, part: dict, yaw: float = 0.0, step: float = 0.2):
        self.part, self.step = dict(part), step
        self.pos = np.array([-0.208, 0.0, 1.173])
        self.yaw = yaw
        self.calls: list[tuple[str, dict]] = []
        c = np.asarray(part["pos"])
        self.grip_xy = c[:2] + 0.042 * np.array([-1.0, 0.0])  # the robot's side (angle pi) holds the grip

    def current_state(self) -> dict:
        quat = [math.cos(self.yaw / 2), math.sin(self.yaw / 2), 0.0, 0.0]  # pointing down at self.yaw (xyzw)
        return {"robot0_eef_pos": self.pos.tolist(), "robot0_eef_quat": quat, "robot0_gripper_qpos": [0.0, 0.0],
                "terminated": False, "truncated": False, "success": False}

    def run(self, tool: str, args: dict) -> dict:
        self.calls.append((tool, dict(args)))
        if tool == "rotate_wrist":
            self.yaw = float(args["target_yaw"])
            return {"steps_used": 10}
        goal = np.asarray(args["xyz"], dtype=float)
        if goal[2] < self.part["max"][2] and np.hypot(*(goal[:2] - self.grip_xy)) < 0.005:
            goal[2] = self.part["max"][2] + 0.003  # stopped on the grip's top
        if args.get("max_steps") == 8:  # a short push
            self.part["qpos"] += self.step
        self.pos = goal
        if args.get("target_yaw") is not None:
            self.yaw = float(args["target_yaw"])
        return {"steps_used": 8, "reached": True}


def test_a_turned_knob_is_left_with_the_wrist_turned_back():
    # the push turns the hand with the grip; seed 4 left it at yaw 1.95, pitch 0.47, and the move home
    # stalled 7 cm low with two wrist joints on their limits
    world = _KnobWorld(STOVE_KNOB)
    out = fixtures.turn_knob(world, STOVE_KNOB, lambda: dict(world.part))
    assert out["done"] and out["stage"] == "knob retreat" and out["qpos"] >= fixtures.KNOB_ON
    pushes = [a for t, a in world.calls if t == "move_to" and a.get("max_steps") == 8]
    assert max(a["target_yaw"] for a in pushes) > 1.0  # the hand turned with the knob
    tool, args = world.calls[-1]
    assert tool == "rotate_wrist" and args["target_yaw"] == pytest.approx(0.0)
    assert world.pos[2] > STOVE_KNOB["max"][2] + 0.05  # turned back above the knob
