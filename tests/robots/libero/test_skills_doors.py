"""Pure tests of the hinged-door geometry (:mod:`rpent.robots.libero.skills.doors`) on the
``view_fixtures`` answers of LIBERO's microwave (recorded from the simulator: libero_90
``KITCHEN_SCENE6`` "close the microwave", door open at -1.502 rad, and ``KITCHEN_SCENE7`` "open
the microwave", door shut)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills.doors import HANDLE_INSET, door_angle, door_frame, handle_grip, push_start
from rpent.robots.libero.skills.grasp import HAND_HALF_THICKNESS

OPEN_DOOR = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -1.502, "range": [-2.094, 0.0],
             "axis": [0.0, 0.0, 1.0], "pos": [-0.181, 0.252, 1.016], "handle": None,
             "min": [-0.229, -0.007, 0.925], "max": [-0.165, 0.252, 1.107]}
SHUT_DOOR = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -0.005, "range": [-2.094, 0.0],
             "axis": [0.0, 0.0, 1.0], "pos": [0.17, -0.156, 1.016], "handle": None,
             "min": [-0.088, -0.154, 0.925], "max": [0.17, -0.091, 1.107]}


def test_frame_of_the_open_door():
    f = door_frame(OPEN_DOOR)
    assert f["q_closed"] == 0.0 and f["q_open"] == -2.094
    assert f["phi"] == pytest.approx(-math.pi / 2)  # the door sticks out toward -y from its hinge
    assert f["length"] == pytest.approx(0.259, abs=1e-3)
    # its handle faces the robot (-x): the right of the line hinge -> free edge
    assert f["out"] == -1.0 and f["out_extent"] == pytest.approx(0.048, abs=1e-3)
    # shut (qpos 0) the door lies along +x from the hinge, across the microwave's front
    assert door_angle(f, 0.0) == pytest.approx(-math.pi / 2 + 1.502)


def test_close_push_comes_down_beside_the_handle_face():
    f = door_frame(OPEN_DOOR)
    xy, ang = push_start(f, f["q"], f["q_closed"], 0.72 * f["length"])
    # closing turns the door counter-clockwise: its free edge moves +x, so the hand stands on the
    # -x side, clear of the handle (box x from -0.229) by the hand's half thickness and a gap
    assert xy[0] < OPEN_DOOR["min"][0] - HAND_HALF_THICKNESS
    assert OPEN_DOOR["min"][1] < xy[1] < OPEN_DOOR["max"][1]
    assert -math.pi < ang < -math.pi / 2


def test_open_grip_on_the_handle_and_push_on_the_inner_face():
    f = door_frame(SHUT_DOOR)
    assert f["phi"] == pytest.approx(math.pi) and f["out"] == -1.0  # handle toward +y (the table's centre)
    grip, yaw = handle_grip(f)
    # microwave.xml: the bar at (-0.0675, -0.102), 2.2 cm from the free edge (x -0.088)
    assert grip[0] == pytest.approx(-0.088 + HANDLE_INSET, abs=0.003)
    assert -0.106 < grip[1] < -0.09 and grip[2] == pytest.approx(1.016 + 0.058)
    closing = np.array([-math.sin(yaw), math.cos(yaw)])
    assert abs(closing @ np.array([1.0, 0.0])) == pytest.approx(1.0)  # fingers close along the door
    # once pulled 0.9 rad open, the hand comes down on the inner side: counter-clockwise of the door's line,
    # between it and the microwave's front (the door opens clockwise)
    xy, _ = push_start(f, -0.9, -1.47, 0.72 * f["length"])
    phi = door_angle(f, -0.9)
    u = np.array([math.cos(phi), math.sin(phi)])
    rel = xy - f["c"]
    assert float(u[0] * rel[1] - u[1] * rel[0]) > 0


def test_a_door_on_a_tilted_hinge_is_refused():
    with pytest.raises(ValueError, match="not vertical"):
        door_frame({**OPEN_DOOR, "axis": [1.0, 0.0, 0.0]})
