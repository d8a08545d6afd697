"""Pushing a drawer shut: the further pushes after the legs ended short lean the hand further.

Recorded on libero_10_task t3, seed 2 (white cabinet, bottom drawer with a wine bottle inside):
the push legs, leaning ``DRAWER_PUSH_TILT``, stalled with the drawer at qpos -0.0022 m, the grip
site at (-0.0602, 0.2149, 0.9430) m, the hand's front resting on the middle drawer's handle bar
6.4 cm above the grip site (28.8 N) and the fingers on the bottom drawer's bar and front.
LIBERO counts the drawer closed only at qpos > 0.
"""

from __future__ import annotations

import math

import numpy as np

from rpent.robots.libero.skills import drawers

# the bottom drawer once its push legs had stalled (libero_10_task t3, seed 2, view_fixtures)
S2_STALLED = {"part": "cabinet_bottom", "joint": "bottom_level", "type": "slide", "qpos": -0.0022,
              "range": [-0.16, 0.01], "axis": [0.0, 1.0, 0.0], "pos": [0.0057, 0.3048, 0.905],
              "handle": [0.0031, 0.2134, 0.9466], "min": [-0.1015, 0.1946, 0.9133], "max": [0.1209, 0.4001, 0.9841]}
S2_STALLED_EEF = (-0.0602, 0.2149, 0.9430)
#: height (m) above the grip site at which the hand's front met the drawer above's handle bar
S2_HAND_CONTACT_ABOVE = 0.064


class StalledExecutor:
    """An executor whose hand stays where the recorded push stalled; it logs every call."""

    def __init__(self, eef) -> None:
        self.calls: list[tuple[str, dict]] = []
        # pointing down, yaw -pi/2 (fingers closing along world x): quaternion xyzw
        q = np.array([math.sqrt(0.5), -math.sqrt(0.5), 0.0, 0.0])
        self.state = {"robot0_eef_pos": np.asarray(eef, dtype=np.float64), "robot0_eef_quat": q,
                      "robot0_gripper_qpos": np.zeros(2), "terminated": False, "truncated": False, "success": False}

    def run(self, tool: str, args: dict) -> dict:
        self.calls.append((tool, dict(args)))
        return {"reached": False, "final_eef_pos": list(self.state["robot0_eef_pos"])}

    def current_state(self):
        return self.state


def hand_front_setback(pitch: float, above: float = S2_HAND_CONTACT_ABOVE) -> float:
    """How far (m) behind the fingertips' push line the front of a hand leaning ``pitch`` rad is,
    ``above`` m over the grip site: the hand's axis leans back ``above * tan(pitch)``, its front
    face stands ``HAND_HALF_THICKNESS / cos(pitch)`` in front of the axis."""
    return above * math.tan(pitch) - drawers.HAND_HALF_THICKNESS / math.cos(pitch)


def test_further_pushes_lean_the_hand_off_the_drawer_above():
    ex = StalledExecutor(S2_STALLED_EEF)
    out = drawers.close_drawer(ex, S2_STALLED, lambda: S2_STALLED)
    assert out["done"] is False and "drawer joint at -0.002 m" in out["reason"]  # honest: still short
    pitches = [abs(a["target_pitch"]) for t, a in ex.calls if t == "move_pose" and "target_pitch" in a]
    legs = abs(drawers.DRAWER_PUSH_TILT)
    # the legs lean DRAWER_PUSH_TILT; after them the hand leans further before pushing on
    assert legs in pitches
    steeper = [p for p in pitches if p > legs + 0.1]
    assert steeper, f"the further pushes kept the legs' pitch: {pitches}"
    # leaning that far, the hand's front at the drawer above's bar stands back by more than the
    # 2.2 mm the drawer was short (and the 3-5 mm of seeds 5, 6 and 8)
    assert hand_front_setback(max(steeper)) - hand_front_setback(legs) > 0.005


def test_final_tilt_keeps_the_legs_sign_and_an_upright_push():
    assert drawers.final_tilt(drawers.DRAWER_PUSH_TILT) == drawers.DRAWER_FINAL_TILT
    assert drawers.final_tilt(-drawers.DRAWER_PUSH_TILT) == -drawers.DRAWER_FINAL_TILT
    assert drawers.final_tilt(0.0) == 0.0
