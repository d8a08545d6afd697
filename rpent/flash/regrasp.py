"""The flash replay's repair of a grasp that came up empty (see :mod:`rpent.flash.replay`).

A grasp *came up empty* when the motion right after the gripper closed (the lift) ends with the
fingers closed on nothing (opening < :data:`EMPTY_GRASP_M`). Where the source run's grasp held
(:func:`source_grasp_held`), the replay repairs it once per grasp: open the gripper, look at the
object again with the camera of the anchor's first observation (a fresh whole view: the fingers
may have pushed it; for a prompt whose looks found several instances, the camera of the descent's
observation, keeping the instance nearest its live estimate: libero_10_swap t8, where the nearest
to the first look's recorded centre was the first moka pot, already on the stove), go back over the grasp point at the hover height of the approach, and replay
the plan's descent, close and lift from the new estimate. Every call is a tool call of the
transcript; the repair is one ``"op": "repair", "kind": "empty_grasp"`` entry of
``flash_replay.json`` (the looks, the new centre, the opening after the retried lift).

A grasp that holds where the source run gave it up is not let go (:func:`kept_grasp_resume`: the
replay goes on with the carry of the source's grasp that held; ``"kind": "kept_grasp"``).

It also holds the gripper-opening rules the replay's other repairs read: a stalled ``release``
(:func:`stalled_release`) and a plan that ends holding its object (:func:`ends_holding`).
"""

from __future__ import annotations

import math

#: A gripper closed to less than this (m) after the motion that follows a grasp holds nothing.
EMPTY_GRASP_M = 0.003
#: A waypoint this much (m) above the grasp descent's target is the approach's hover.
HOVER_ABOVE_M = 0.03
#: A release whose fingers grew less than this (m) and ended below :data:`RELEASE_OPEN_M` (m)
#: stalled; the replay drives the gripper open for :data:`REOPEN_STEPS` env steps.
RELEASE_STALL_M = 0.002
RELEASE_OPEN_M = 0.07
REOPEN_STEPS = 20


def stalled_release(res: dict) -> bool:
    """A ``release`` whose fingers did not open (grew < :data:`RELEASE_STALL_M`) and ended
    below :data:`RELEASE_OPEN_M`: ``release`` stops after 6 env steps without growth, which a
    hand still squeezing a heavy object can take to start opening."""
    if "error" in res or res.get("terminated") or res.get("truncated"):
        return False
    start, peak = res.get("start_gripper_opening"), res.get("peak_gripper_opening")
    final = res.get("final_gripper_opening")
    if start is None or peak is None or final is None:
        return False
    return float(peak) - float(start) < RELEASE_STALL_M and float(final) < RELEASE_OPEN_M


def ends_holding(steps: list[dict]) -> bool:
    """The plan's last gripper command closes it (``set_gripper`` or a motion's ``gripper``
    argument > 0, no ``release`` after it): the source run's predicate came true during the last
    motion (e.g. a bowl held down onto a plate), so it never opened the gripper."""
    last = next((g for g in (gripper_command(s) for s in reversed(steps)) if g is not None), None)
    return last is not None and last > 0


def opening(res: dict) -> float | None:
    """Gripper opening (m) in a tool result's ``state_after``, else None."""
    v = ((res.get("state_after") or {}).get("state") or {}).get("gripper_opening")
    return None if v is None else round(float(v), 4)


def diagnosis(log: list[dict]) -> str:
    """What went wrong in a replay that ran every step unsolved, from its plan-step log: a grasp
    whose next motion found the fingers closed on nothing (< :data:`EMPTY_GRASP_M`), else the
    anchored waypoints that were not reached; empty when neither. A fixture or push skill that
    finished the replay (:mod:`rpent.flash.finish`) and did not reach its goal is named after it."""
    skills = [f"the {e['kind'].split('_')[0]} skill for '{e['goal']}' ended at {e.get('stage') or 'its start'}"
              + (f": {e['reason']}" if e.get("reason") else "")
              for e in log if e["op"] == "repair" and e.get("kind") in ("fixture_skill", "push_skill")
              and not e.get("done")]
    why = _motion_diagnosis(log)
    return "; ".join([*([why] if why else []), *skills])


def _motion_diagnosis(log: list[dict]) -> str:
    tools = [e for e in log if e["op"] == "tool"]
    for a, b in zip(tools, tools[1:]):
        closing = a["tool"] == "set_gripper" and float((a.get("live_args") or {}).get("gripper", -1)) > 0
        if closing and b.get("gripper_opening_m") is not None and b["gripper_opening_m"] < EMPTY_GRASP_M:
            return (f"the grasp of plan step {a['plan_step']} came up empty: gripper opening "
                    f"{b['gripper_opening_m']:.3f} m after plan step {b['plan_step']}")
    missed = [e["plan_step"] for e in tools if e.get("reached") is False and e["mode"] == "anchored"]
    if missed:
        return "anchored waypoints not reached at plan steps " + ", ".join(map(str, missed))
    return ""


def gripper_command(step: dict) -> float | None:
    """The gripper command of a plan tool step (``release``: -1; ``set_gripper`` or a motion's
    ``gripper`` argument), None when it leaves the gripper as it is."""
    if step.get("op") != "tool":
        return None
    if step.get("tool") == "release":
        return -1.0
    g = (step.get("args") or {}).get("gripper")
    return None if g is None else float(g)


def closing_step(steps: list[dict], i: int) -> int | None:
    """The step that closed the gripper, when tool step ``i`` is the first motion after it (the
    lift; a motion that itself closes it is the close, not the lift), else None."""
    if steps[i].get("op") != "tool" or not isinstance((steps[i].get("args") or {}).get("xyz"), list):
        return None
    tools = [j for j in range(i) if steps[j]["op"] == "tool"]
    if not tools:
        return None
    c = tools[-1]
    g = gripper_command(steps[c])
    if g is None or g <= 0:
        return None
    before = next((gripper_command(steps[j]) for j in reversed(tools[:-1]) if gripper_command(steps[j]) is not None),
                  -1.0)
    if before > 0:
        return None  # it was closed already: a carry, not a grasp
    if steps[c].get("tool") != "set_gripper" and gripper_command(steps[i]) is not None and gripper_command(steps[i]) <= 0:
        return None
    return c


def source_grasp_held(steps: list[dict], c: int) -> bool:
    """The source run's grasp at step ``c`` held its object: the next command that opens the gripper
    is a ``release`` (a place), or there is none and the close was a ``set_gripper`` (the plan ends
    holding what it grasped). The scripted planner's own retry after an empty grasp opens it with the
    next motion instead (libero_10_task t7: the cream cheese grasped three times); such a recorded
    retry is replayed as it is. Fingers closed by a motion and never opened again are a push with
    the closed fingertips (a drawer pushed shut at the end of libero_10_task t3), not a grasp: the
    fingers close on nothing by design, so there is nothing to retry."""
    for s in steps[c + 1:]:
        g = gripper_command(s)
        if g is not None and g <= 0:
            return s.get("tool") == "release"
    return steps[c].get("tool") == "set_gripper"


#: A closed hand whose recorded waypoints stay within this (m, XY) of its grasp descent has not
#: carried anything (the lift of a grasp the source run then gave up).
GAVE_UP_XY_M = 0.03


def kept_grasp_resume(steps: list[dict], c: int) -> int | None:
    """Where to go on when this replay's grasp at ``set_gripper`` step ``c`` held but the source
    run gave that grasp up: the plan step right after the lift of the source's next grasp of the
    same anchor that held (its carry), else None.

    The source gave a grasp up when the next command that opens the gripper is a motion, not a
    ``release``, and every recorded waypoint before it stays within :data:`GAVE_UP_XY_M` of the
    grasp descent (lifted in place, then let go: the scripted planner's empty or slipping grasp,
    retried from a new look). Replaying that opening would drop what this replay holds, and the
    source's retries after it would grasp it again from where it fell (libero_10_task t7: the
    cream cheese box grasped three times at seed 0; at seeds 6 and 7 the first grasp held, the
    replayed opening dropped it and the third came up empty). The held grasp found is a
    ``set_gripper`` close whose descent binds to the same anchor, with no ``release`` in between."""
    if steps[c].get("tool") != "set_gripper" or (gripper_command(steps[c]) or -1.0) <= 0 \
            or source_grasp_held(steps, c):
        return None
    d = descent_step(steps, c)
    if d is None:
        return None
    anchor, at = steps[d].get("anchor"), (steps[d].get("args") or {}).get("xyz")
    opened = next((j for j in range(c + 1, len(steps)) if (gripper_command(steps[j]) or 0.0) < 0), None)
    if anchor is None or not isinstance(at, list) or opened is None or steps[opened].get("tool") == "release":
        return None
    for j in range(c + 1, opened):
        xyz = (steps[j].get("args") or {}).get("xyz") if steps[j].get("op") == "tool" else None
        if isinstance(xyz, list) and math.hypot(xyz[0] - at[0], xyz[1] - at[1]) > GAVE_UP_XY_M:
            return None  # it carried: not a lift in place
    for c2 in range(opened + 1, len(steps)):
        if steps[c2].get("tool") == "release":
            return None
        if steps[c2].get("tool") != "set_gripper" or (gripper_command(steps[c2]) or -1.0) <= 0:
            continue
        d2 = descent_step(steps, c2)
        if d2 is None or steps[d2].get("anchor") != anchor:
            return None
        if not source_grasp_held(steps, c2):
            continue  # given up too: on to the next
        lift = next((j for j in range(c2 + 1, len(steps)) if steps[j].get("op") == "tool"), None)
        return None if lift is None or lift + 1 >= len(steps) else lift + 1
    return None


def descent_step(steps: list[dict], c: int) -> int | None:
    """The grasp descent of the close at step ``c``: the close itself when it is a motion, else the
    last motion before it (anchored)."""
    if isinstance((steps[c].get("args") or {}).get("xyz"), list):
        return c
    return next((j for j in range(c - 1, -1, -1) if steps[j]["op"] == "tool"
                 and isinstance((steps[j].get("args") or {}).get("xyz"), list)), None)


def retry_empty_grasp(steps: list[dict], i: int, c: int, res: dict, anchors: dict, live: dict, *, call, say,
                      locate, failure, args_of, log: list[dict]) -> dict:
    """One bounded repair of the empty grasp closed at step ``c`` and found empty after the lift
    ``i`` (see the module docstring). ``call(tool, args)`` runs a tool, ``say(text)`` narrates,
    ``locate(call, prompt, camera, near)`` is the replay's look, ``failure(code, message)`` its
    exception, ``args_of(steps, j, anchors, live)`` the replay's arguments for plan step ``j`` and
    ``log`` its step log (the repair is appended to it). Returns the retried lift's result."""
    d = descent_step(steps, c)
    aid = steps[d].get("anchor") if d is not None else None
    if aid is None:
        return res
    anchor = anchors[aid]
    target_z = float(steps[d]["args"]["xyz"][2])
    first = next((j for j in range(d, -1, -1) if steps[j]["op"] == "tool"
                  and isinstance((steps[j].get("args") or {}).get("xyz"), list)
                  and float(steps[j]["args"]["xyz"][2]) > target_z + HOVER_ABOVE_M), None)
    hover = float(steps[first]["args"]["xyz"][2]) if first is not None else target_z + 0.1
    start = (first + 1) if first is not None else d
    say(f"The grasp of step {c} came up empty (gripper opening {opening(res) or 0.0:.4f} m after step {i}): "
        f"opening, looking at '{anchor['prompt']}' again and grasping once more.")
    opened = call("set_gripper", {"gripper": -1.0, "steps": 10})
    if "error" in opened:
        raise failure("flash_step_failed", f"opening after the empty grasp of step {c} failed: {opened['error']}")
    obs0 = anchor["observations"][0]
    if any(int(o.get("instances") or 1) > 1 for o in anchor["observations"]):
        # one prompt, several objects (two moka pots, one already on the stove): the observations
        # are of different instances, so look again with the descent's observation and keep the
        # instance nearest where the replay last put it
        k = int(steps[d].get("observation") or 0)
        cur = live[aid].get(k) or (live[aid][max(live[aid])] if live[aid] else None)
        near = (cur or anchor["observations"][k]["estimate"]).get("center")
        est = locate(call, anchor["prompt"], anchor["observations"][k].get("camera") or "agentview", near)
        if est is not None:
            live[aid][k] = est
    else:
        est = locate(call, anchor["prompt"], obs0.get("camera") or "agentview", None)
        if est is not None:
            live[aid] = {0: est}  # the later observations are rebuilt from it by the recorded differences
    if est is None:
        say(f"'{anchor['prompt']}' was not found again; retrying at the earlier estimate.")
    entry = {"plan_step": c, "op": "repair", "kind": "empty_grasp", "anchor": aid, "lift_step": i,
             "opening_before_m": opening(res), "relocalised": est is not None,
             "live_center": None if est is None else est.get("center")}
    log.append(entry)
    over = args_of(steps, d, anchors, live)
    over = {k: v for k, v in over.items() if k in ("xyz", "target_yaw")}
    over.update(xyz=[over["xyz"][0], over["xyz"][1], hover], gripper=-1.0, max_steps=120)
    last = call("move_to", over)
    if "error" in last:
        raise failure("flash_step_failed", f"going back over the grasp of step {c} failed: {last['error']}")
    for j in [*range(start, c + 1), i]:  # the descent, the close and the lift again, from the new look
        if steps[j]["op"] != "tool":
            continue
        last = call(steps[j]["tool"], args_of(steps, j, anchors, live))
        if "error" in last:
            raise failure("flash_step_failed", f"the retried grasp of step {c} failed at step {j}: {last['error']}")
    entry["opening_after_m"] = opening(last)
    return last
