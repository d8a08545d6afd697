"""A flash replay's grasp descent that the hand could not finish: find it and retry it once.

A grasp descent (an anchored ``move_to`` right before the gripper closes) that stops more than
:data:`BLOCKED_DESCENT_M` above its target, ``reached: false``, met a neighbouring object that was
farther away in the source scene, or could not go that low there (:func:`blocked_grasp_descent`).
:func:`retry_descent` repairs it once: rise, look at the object again, shift the grasp point along
its long axis away from the push and descend again (:class:`rpent.flash.replay.FlashPlanner`).
"""

from __future__ import annotations

import math

__all__ = ["BLOCKED_DESCENT_M", "GRASP_SHIFT_M", "MIN_ELONGATION_M", "LEVEL_PITCH_MAX", "grasp_axis",
           "same_footprint", "eef_pitch", "blocked_grasp_descent", "retry_descent"]

#: A grasp descent that stops more than this (m) above its target without reaching it was
#: blocked (the hand met a neighbouring object): the replay retries it once, shifted.
BLOCKED_DESCENT_M = 0.008
#: How far (m) a blocked grasp is shifted on its retry; at most a quarter of the object's long
#: side, so the fingers still close on it. 1.5 cm clears the neighbour of libero_object task 1
#: (cream cheese next to the tomato sauce) on the seeds where the seed-0 grasp point is blocked.
GRASP_SHIFT_M = 0.015
#: A footprint whose long and short extents (m) differ by less than this has no grasp axis the
#: replay turns a recorded yaw by (:func:`grasp_axis`): a 1 cm difference is about what the
#: gripper's 8 cm opening cannot tell apart anyway.
MIN_ELONGATION_M = 0.01
#: A blocked descent's retry servoes the hand back to its earlier pitch only from a pitch within
#: this many rad of pointing straight down (0); a reading farther off (near +/- pi on a hand turned
#: about 90 degrees in yaw after a long carry) is no pose to go back to: the retry then keeps the
#: hand's orientation (``move_to``).
LEVEL_PITCH_MAX = math.pi / 4



def grasp_axis(est: dict) -> float | None:
    """Grasp axis of an object estimate (rad), or None for a round footprint.

    The rule of :func:`rpent.robots.libero.strategy.plan_grasp`: a ridge closes along the
    ridge (axis = ridge_yaw - pi/2); else the major axis when major/minor >= ``round_ratio`` and
    the two extents differ by at least :data:`MIN_ELONGATION_M` (a bottle's cap seen from above,
    7.6 x 4.5 mm, has a ratio of 1.7 but no axis to turn a grasp by: on libero_10_task t3 the
    hover turned by 1.7 rad with it while the descent, from a rounder wrist look, did not, and the
    hand knocked the bottle over).
    """
    from rpent.robots.libero.strategy import StrategyParams

    if est.get("ridge_yaw") is not None:
        return float(est["ridge_yaw"]) - math.pi / 2
    major, minor = float(est.get("major_extent") or 0.0), float(est.get("minor_extent") or 0.0)
    if minor > 1e-6 and major / minor >= StrategyParams().round_ratio and major - minor >= MIN_ELONGATION_M:
        return float(est["major_yaw"])
    return None


def same_footprint(est: dict, ref: dict, rel_tol: float = 0.2) -> bool:
    """The estimate's footprint (major and minor extent, m) is within ``rel_tol`` of the
    recorded one: the whole object is in view, so its centre can be trusted."""
    for key in ("major_extent", "minor_extent"):
        a, b = float(est.get(key) or 0.0), float(ref.get(key) or 0.0)
        if b <= 1e-6 or abs(a - b) > rel_tol * b:
            return False
    return True


def eef_pitch(res: dict, default: float | None) -> float | None:
    """The eef pitch (rad, about world x; 0 = gripper down, :func:`rpent.robots.libero.control.eef_pitch`)
    in a motion result's ``state_after``, else ``default``."""
    pitch = ((res.get("state_after") or {}).get("state") or {}).get("eef_pitch")
    return default if pitch is None else float(pitch)



def blocked_grasp_descent(steps: list[dict], i: int, args: dict, res: dict) -> bool:
    """Step ``i`` is an anchored ``move_to`` straight before a gripper close (the grasp
    descent) that stopped more than :data:`BLOCKED_DESCENT_M` above its target without
    reaching it: the hand hit something (a neighbouring object) on the way down. Where the
    source run's own descent stopped short too (the plan step's ``source_stop_z``: it came down
    on the handle it then took, libero_10_swap t8's second moka pot), the height is measured
    from that stop instead."""
    step = steps[i]
    if step.get("tool") != "move_to" or step.get("anchor") is None or res.get("reached", True):
        return False
    nxt = next((s for s in steps[i + 1:] if s["op"] == "tool"), None)
    if nxt is None or nxt.get("tool") != "set_gripper" or float((nxt.get("args") or {}).get("gripper", -1)) <= 0:
        return False
    final, target = res.get("final_eef_pos"), args.get("xyz")
    if not (final and target):
        return False
    floor = max(float(target[2]), float(step.get("source_stop_z", target[2])))
    return float(final[2]) - floor > BLOCKED_DESCENT_M


def retry_descent(steps: list[dict], i: int, args: dict, res: dict, anchors: dict, live: dict, *, call, say,
                  locate, failure, args_of, log: list[dict], shifts: dict, pitch_before: float | None = None) -> dict:
    """One bounded repair of a blocked grasp descent: rise back to the hover height of the
    preceding waypoint, re-localise the anchor (same camera; a partial view falls back to the
    camera of the anchor's first observation, whose estimate the rebuild corrects by the
    recorded difference between the observations; else the earlier estimate), shift the grasp point by
    :data:`GRASP_SHIFT_M` (at most a quarter of the object's long side) away from where the
    hand was pushed, along the object's long axis when it is elongated, and descend again. Later waypoints bound to the same anchor
    keep the shift (the lift stays vertical). The blocked hand is often tilted by the contact
    (libero_object task 1: 0.13 rad about world x, and ``move_to`` holds whatever orientation the
    hand has, so the fingers then close askew on the box and it slips): when ``pitch_before``
    (rad, the hand's pitch before the blocked descent) is known, the re-alignment and the
    retried descent are ``move_pose`` calls that servo the pitch back to it (only from within
    :data:`LEVEL_PITCH_MAX` of pointing down).

    ``call``/``say``: the planner's tool call and transcript line; ``locate``:
    :func:`rpent.flash.locate.locate_anchor`; ``failure(code, message)``: the exception that ends
    the replay; ``args_of(steps, i, anchors, live)``: a step's live arguments; ``log``: the replay
    report's step log (one ``blocked_grasp_descent`` repair entry is appended); ``shifts``: anchor
    -> XY shift (m) that later waypoints of the anchor keep. Returns the retried descent's result."""
    step = steps[i]
    aid = step["anchor"]
    target, final = args["xyz"], res["final_eef_pos"]
    drift = (float(final[0]) - float(target[0]), float(final[1]) - float(target[1]))
    est = live[aid].get(int(step["observation"])) or next(iter(live[aid].values()))
    axis = grasp_axis(est)
    if axis is not None:  # elongated: along the long axis (the grasp closes across it)
        ux, uy = math.cos(float(est.get("major_yaw") or 0.0)), math.sin(float(est.get("major_yaw") or 0.0))
        along = drift[0] * ux + drift[1] * uy
        direction = (-ux, -uy) if along >= 0 else (ux, uy)
    else:
        norm = math.hypot(*drift)
        direction = (-drift[0] / norm, -drift[1] / norm) if norm > 1e-4 else (-1.0, 0.0)
    size = min(GRASP_SHIFT_M, 0.25 * float(est.get("major_extent") or 0.0) or GRASP_SHIFT_M)
    shift = (direction[0] * size, direction[1] * size)
    hover = next((steps[j]["args"]["xyz"][2] for j in range(i - 1, -1, -1)
                  if steps[j]["op"] == "tool" and steps[j].get("tool") == "move_to"
                  and isinstance((steps[j].get("args") or {}).get("xyz"), list)), float(target[2]) + 0.08)
    say(f"Grasp descent of step {i} was blocked {float(final[2]) - float(target[2]):.3f} m above its target "
        f"(pushed by {drift[0]:+.3f}, {drift[1]:+.3f} m): rising and shifting the grasp by "
        f"{shift[0]:+.3f}, {shift[1]:+.3f} m.")
    # rise a little above the hover height (where the source run took its close look), precisely
    up = call("move_to", {"xyz": [round(float(final[0]), 5), round(float(final[1]), 5), float(hover) + 0.01],
                          "gripper": -1.0, "tol": 0.004, "max_steps": 60})
    if "error" in up:
        raise failure("flash_step_failed", f"rising after the blocked descent of step {i} failed: {up['error']}")
    # the blocked hand may have pushed the object: look again (same camera as the step's observation)
    k = int(step["observation"])
    camera = anchors[aid]["observations"][k].get("camera") or "agentview"
    # several instances in the source look (two black bowls): the one nearest this estimate
    near = est.get("center") if any(int(o.get("instances") or 1) > 1 for o in anchors[aid]["observations"]) \
        else None
    again_est = locate(call, anchors[aid]["prompt"], camera, near)
    relook, looks = None, 1
    if again_est is not None and same_footprint(again_est, anchors[aid]["observations"][k]["estimate"]):
        live[aid][k] = again_est
        relook = camera
    else:
        # only part of it in view (the hand hides it from the wrist camera): the blocked hand
        # may have moved it, so the earlier estimate is stale; look with the camera of the
        # anchor's first observation, which the rebuild then corrects by the recorded
        # difference between the two observations
        first = anchors[aid]["observations"][0]
        cam0 = first.get("camera") or "agentview"
        est0 = None
        if cam0 != camera or k != 0:
            est0, looks = locate(call, anchors[aid]["prompt"], cam0, near), 2
        if est0 is not None and same_footprint(est0, first["estimate"]):
            live[aid] = {0: est0}
            relook = cam0
        else:  # not found, or only part of it in view (a biased centre): keep the earlier estimate
            say(f"The new look at '{anchors[aid]['prompt']}' does not show all of it; keeping the earlier "
                "estimate.")
    shifts[aid] = shift
    log.append({"plan_step": i, "op": "repair", "kind": "blocked_grasp_descent", "anchor": aid,
                      "blocked_above_m": round(float(final[2]) - float(target[2]), 4),
                      "push_xy": [round(drift[0], 4), round(drift[1], 4)],
                      "grasp_shift_xy": [round(shift[0], 4), round(shift[1], 4)],
                      "relocalised": relook is not None, "relocalised_camera": relook, "looks": looks,
                      "pitch_before_rad": pitch_before, "pitch_blocked_rad": eef_pitch(res, None)})
    descent = args_of(steps, i, anchors, live)
    tool = "move_to"
    if pitch_before is not None and abs(float(pitch_before)) <= LEVEL_PITCH_MAX:  # level the hand again
        tool = "move_pose"
        descent = {k2: v for k2, v in descent.items() if k2 in ("xyz", "target_yaw", "gripper", "tol", "step_clip",
                                                                "max_steps", "action_scale")}
        descent["target_pitch"] = round(float(pitch_before), 4)
    over = {k2: v for k2, v in descent.items() if k2 not in ("tol", "step_clip", "max_steps")}
    over["xyz"] = [descent["xyz"][0], descent["xyz"][1], float(hover)]
    over.update(tol=0.004, max_steps=60)
    log[-1]["level_pitch"] = descent.get("target_pitch")
    res2 = call(tool, over)
    if "error" in res2:
        raise failure("flash_step_failed", f"re-aligning after the blocked descent of step {i} failed: "
                                            f"{res2['error']}")
    res3 = call(tool, descent)
    if "error" in res3:
        raise failure("flash_step_failed", f"the retried descent of step {i} failed: {res3['error']}")
    return res3

