"""Pure tests of the hinged-door geometry (:mod:`rpent.robots.libero.skills.doors`) on the
``view_fixtures`` answers of LIBERO's microwave (recorded from the simulator: libero_90
``KITCHEN_SCENE6`` "close the microwave", door open at -1.502 rad, ``KITCHEN_SCENE7`` "open
the microwave", door shut, and LIBERO-PRO libero_10_object t9, door open at -1.825 rad, with its
footprint) and on synthetic doors made to ``microwave.xml`` at angles on and off the world axes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpent.robots.libero.skills import cavity
from rpent.robots.libero.skills.doors import HANDLE_INSET, door_angle, door_frame, door_line, handle_grip, push_start
from rpent.robots.libero.skills.grasp import HAND_HALF_THICKNESS

OPEN_DOOR = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -1.502, "range": [-2.094, 0.0],
             "axis": [0.0, 0.0, 1.0], "pos": [-0.181, 0.252, 1.016], "handle": None,
             "min": [-0.229, -0.007, 0.925], "max": [-0.165, 0.252, 1.107]}
SHUT_DOOR = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -0.005, "range": [-2.094, 0.0],
             "axis": [0.0, 0.0, 1.0], "pos": [0.17, -0.156, 1.016], "handle": None,
             "min": [-0.088, -0.154, 0.925], "max": [0.17, -0.091, 1.107]}

# libero_10_object t9 seed 0 (LIBERO-PRO): the door stands 1.825 rad open, 0.254 rad past the -y axis
OPEN_OFF_AXIS = {"part": "microdoorroot", "joint": "microjoint", "type": "hinge", "qpos": -1.8249, "range": [-2.094, 0.0],
                 "axis": [0.0, 0.0, 1.0], "pos": [-0.180757, 0.252404, 1.016], "handle": None,
                 "min": [-0.304923, 0.002669, 0.92472], "max": [-0.183133, 0.25784, 1.106911],
                 "footprint": [[-0.307725, 0.018155], [-0.248103, 0.002669], [-0.183133, 0.252806], [-0.242754, 0.268292]]}

# LIBERO's microwave door in its own frame (``microwave.xml``, read from the simulator): the panel
# along +x from the hinge, 0.0002-0.2586 m, between y -0.0224 and -0.0024; the handle bar and its
# stand-offs 0.2275-0.2475 m along, out to y -0.064
PANEL = ((0.0002, 0.2586), (-0.0224, -0.0024))
HANDLE = ((0.2275, 0.2475), (-0.064, -0.0125))


def _door_points(phi: float, hinge=(0.1, -0.2), dense: bool = False) -> np.ndarray:
    """World (x, y) points of the door turned to ``phi`` about its hinge: the corners of its box in
    its own frame (what ``view_fixtures`` gives as the footprint), or points spread over the panel."""
    if dense:
        g = np.stack(np.meshgrid(np.linspace(*PANEL[0], 40), np.linspace(*PANEL[1], 5)), -1).reshape(-1, 2)
    else:
        g = np.array([[x, y] for x in (PANEL[0][0], PANEL[0][1]) for y in (HANDLE[1][0], PANEL[1][1])])
    rot = np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
    return g @ rot.T + np.asarray(hinge)


def _synthetic_part(phi: float, hinge=(0.1, -0.2)) -> dict:
    """A ``view_fixtures`` answer for the door standing at ``phi`` (its closed end of range at
    ``phi`` + 1.5, qpos -1.5): footprint and world box from :func:`_door_points`."""
    foot = _door_points(phi, hinge)
    lo, hi = foot.min(axis=0), foot.max(axis=0)
    return {"part": "door", "joint": "hinge", "type": "hinge", "qpos": -1.5, "range": [-2.094, 0.0],
            "axis": [0.0, 0.0, 1.0], "pos": [hinge[0], hinge[1], 1.0], "handle": None,
            "min": [float(lo[0]), float(lo[1]), 0.91], "max": [float(hi[0]), float(hi[1]), 1.09],
            "footprint": foot.tolist()}


ANGLES = [0.0, 5.0, -8.0, 10.0, 15.0, -15.0, 90.0, 97.0, -75.0, 180.0, -168.0, 45.0]


@pytest.mark.parametrize("deg", ANGLES)
@pytest.mark.parametrize("dense", [False, True])
def test_door_line_fits_the_door_at_any_angle(deg, dense):
    phi = math.radians(deg)
    got = door_line(_door_points(phi, dense=dense), (0.1, -0.2))
    assert math.remainder(got - phi, 2 * math.pi) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("deg", ANGLES)
def test_frame_of_a_door_off_the_world_axes(deg):
    phi = math.radians(deg)
    f = door_frame(_synthetic_part(phi))
    assert math.remainder(f["phi"] - phi, 2 * math.pi) == pytest.approx(0.0, abs=1e-9)
    assert f["length"] == pytest.approx(PANEL[0][1], abs=1e-9)
    # the handle stands on the right of the line hinge -> free edge, reaching 0.064 m out; the panel
    # lies wholly on that side too
    assert f["out"] == -1.0 and f["out_extent"] == pytest.approx(0.064, abs=1e-9) and f["in_extent"] == 0.0
    # shut, the door lies where it would at qpos 0 whatever angle it stands at now
    assert math.remainder(door_angle(f, 0.0) - (phi + 1.5), 2 * math.pi) == pytest.approx(0.0, abs=1e-9)


def test_frame_of_the_door_open_past_the_axis_from_its_footprint():
    f = door_frame(OPEN_OFF_AXIS)
    assert f["phi"] == pytest.approx(-1.8249, abs=2e-3) and f["length"] == pytest.approx(0.2586, abs=1e-3)
    assert f["out"] == -1.0 and f["out_extent"] == pytest.approx(0.064, abs=1e-3)
    cav = cavity.cavity_frame(OPEN_OFF_AXIS)
    # the microwave stands square to the table: shut, its door lies along +x and its front faces -y
    assert cav["u"] == pytest.approx([1.0, 0.0], abs=2e-3) and cav["n"] == pytest.approx([0.0, -1.0], abs=2e-3)
    # its world box alone (no footprint) is more than twice as long as wide: read along the -y axis
    boxed = door_frame({k: v for k, v in OPEN_OFF_AXIS.items() if k != "footprint"})
    assert boxed["phi"] == pytest.approx(-math.pi / 2)


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
