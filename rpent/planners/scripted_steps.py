"""The scripted planner's push and path-clearing steps (:class:`rpent.planners.scripted.ScriptedPlanner`).

Each takes the planner's ``call(tool, **args) -> dict`` (one toolkit call, recorded like an LLM
planner's), ``say(text)`` (a line of the transcript) and the parsed step
(:mod:`rpent.robots.libero.skills.language`).
"""

from __future__ import annotations

from rpent.planners.scripted_executor import ToolExecutor

__all__ = ["FLOOR_BELOW_DRAWER", "clear_drawer_path", "fixture_step", "go_home", "push_if_flat", "push_step",
           "door_place_step", "object_points", "settle"]

#: what a cabinet stands on lies this far (m) under its lowest drawer's box (LIBERO's wooden
#: cabinet: bottom drawer box from 0.913 m, the table at 0.90-0.905 m).
FLOOR_BELOW_DRAWER = 0.01


def go_home(call, home) -> None:
    """Rise 5 cm, then move (in <= 0.25 m legs) to ``home`` (the start eef position, m, world frame)
    with the gripper open, pointing down: the cameras see the table without the arm."""
    from rpent.robots.libero import control
    from rpent.robots.libero.skills.motion import xy_waypoints

    pos = [float(v) for v in ToolExecutor(call).current_state().get("robot0_eef_pos", home)]
    start = [pos[0], pos[1], max(pos[2] + 0.05, float(home[2]))]
    call("move_pose", {"xyz": start, "target_pitch": 0.0, "gripper": control.GRIPPER_OPEN, "max_steps": 80})
    for wp in xy_waypoints(start, [float(v) for v in home], 0.25):
        call("move_to", {"xyz": [float(v) for v in wp], "gripper": control.GRIPPER_OPEN, "max_steps": 80})


def settle(call) -> None:
    """One env step that moves nothing (the gripper held as last commanded, read from
    ``call.latest`` where the caller tracks it, else open): LIBERO judges its goal only after a
    step, so a fixture already in its goal state (a joint read there before any motion) is
    reported solved only then."""
    latest = getattr(call, "latest", None)
    g = latest.gripper if latest is not None and latest.gripper is not None else -1.0
    call("set_gripper", {"gripper": g, "steps": 1})


def fixture_step(call, goal) -> dict:
    """Bring one fixture to the state a :class:`~rpent.robots.libero.skills.language.FixtureGoal`
    names: turn a stove knob on or off, open or close a drawer (a drawer is pushed shut with the
    hand clear of what the agentview cloud shows beside it,
    :func:`rpent.robots.libero.skills.clutter.scene_points`), or, where the fixture has no drawer,
    open or close its hinged door (:mod:`rpent.robots.libero.skills.doors`). Every motion is a
    toolkit call through ``call(tool, args) -> dict``; the part is read live with
    ``view_fixtures`` (simulator state), so the skill starts from wherever the part and the arm are.

    Returns:
        The skill's result: ``{"success": env predicate, "done", "stage", "phases", "reason"?}``.
    Raises:
        rpent.robots.libero.skills.scene.NotFound: no fixture part matches the goal's phrase.
    """
    from rpent.robots.libero.skills import clutter, fixtures, scene

    ex = ToolExecutor(call)
    if goal.action in ("turn_on", "turn_off"):
        _, part, read = scene.find_fixture_part(call, goal.fixture_phrase, (), "hinge")
        return fixtures.turn_knob(ex, part, read, on=goal.action == "turn_on")
    try:
        fx, part, read = scene.find_fixture_part(call, goal.fixture_phrase, goal.part_words, "slide")
    except scene.NotFound:
        if goal.part_words:
            raise
        from rpent.robots.libero.skills import doors

        # no drawer: a hinged door ("open the microwave")
        _, part, read = scene.find_fixture_part(call, goal.fixture_phrase, (), "hinge")
        return (doors.open_door if goal.action == "open" else doors.close_door)(ex, part, read)
    # what the cabinet stands on: just under its lowest drawer's box
    boxes = [p["min"][2] for p in (call("view_fixtures", {}).get("fixtures") or {}).get(fx, []) if p.get("min")]
    floor_z = min(boxes) - FLOOR_BELOW_DRAWER if boxes else None
    if goal.action == "open":
        return fixtures.open_drawer(ex, part, read, floor_z=floor_z)
    # what stands beside the drawer, for the push to keep the hand off it
    eef = ex.current_state().get("robot0_eef_pos")
    points = (clutter.scene_points(call, floor_z, float(eef[2]))
              if floor_z is not None and eef is not None else None)
    return fixtures.close_drawer(ex, part, read, points=points)


def clear_drawer_path(call, say, goal, later) -> bool:
    """Before opening a drawer: move each object a later step picks that stands in the
    drawer's path (:mod:`rpent.robots.libero.skills.clearing`) to a free spot on the table.
    Returns True when something was moved (successfully or not: the steps that follow
    re-localise it)."""
    from rpent.robots.libero import strategy
    from rpent.robots.libero.skills import clearing, fixtures, scene

    if not later:
        return False
    _, part, _ = scene.find_fixture_part(call, goal.fixture_phrase, goal.part_words, "slide")
    sweep = clearing.sweep_box(part, fixtures.DRAWER_TRAVEL)
    if sweep is None:
        return False
    moved = False
    for g in later:
        try:
            insts = scene.find_instances(call, g.object_phrase)
            inst = scene.choose_instance(call, g.object_qualifier, insts)
        except scene.NotFound:
            continue  # the step itself will say so
        if not clearing.in_sweep(inst.est, sweep):
            continue
        spot = clearing.find_free_spot(call, inst.est, sweep, inst.est.bottom_z)
        if spot is None:
            say(f"The {g.object_phrase} stands in the path of the drawer ({goal.describe()}), but I found no "
                "free spot on the table to move it to; opening anyway.")
            continue
        say(f"The {g.object_phrase} at ({inst.est.center[0]:.3f}, {inst.est.center[1]:.3f}) stands in the path "
            f"of the drawer I am about to open (it would end up under it); moving it to the free spot "
            f"({spot[0]:.3f}, {spot[1]:.3f}) first.")
        others = tuple(i.est for i in insts if i.name != inst.name)
        out = strategy.pick_and_place(ToolExecutor(call), inst.est, clearing.table_target(*spot, inst.est.bottom_z),
                                      "on", relocate=scene.wrist_relocator(call, g.object_phrase, inst.est),
                                      obstacles=others, boxes=scene.furniture_boxes(call))
        if out.get("stage") != "retreat":
            say(f"Moving the {g.object_phrase} out of the way stopped at {out.get('stage')}: "
                f"{out.get('reason') or 'unknown'}; carrying on.")
        moved = True
    return moved

def push_step(call, say, goal) -> dict:
    """Push the object to the goal's side of the reference (:mod:`rpent.robots.libero.skills.push`),
    looking at it again on the agentview camera after each leg (the instance nearest where
    it should be, within 0.12 m)."""
    import math

    from rpent.robots.libero.skills import push, scene

    insts = scene.find_instances(call, goal.object_phrase)
    obj = scene.choose_instance(call, goal.object_qualifier, insts).est
    ref = scene.find_instances(call, goal.target_phrase)[0].est
    gx, gy = push.push_goal(ref, obj, goal.side)
    say(f"{goal.describe()}: the {goal.object_phrase} is at ({obj.center[0]:.3f}, {obj.center[1]:.3f}), the "
        f"{goal.target_phrase} at ({ref.center[0]:.3f}, {ref.center[1]:.3f}); pushing it to ({gx:.3f}, {gy:.3f}).")
    # round the reference, not into it (its box from its support surface, push.reference_box)
    route = push.push_route(obj.center[:2], (gx, gy), max(obj.major_extent, obj.minor_extent) / 2.0,
                            push.reference_box(ref), goal.side)
    if len(route) > 1:
        say(f"A straight push would run the {goal.object_phrase} into the {goal.target_phrase}: pushing it to "
            f"({route[0][0]:.3f}, {route[0][1]:.3f}) first, then on to its goal.")
    from rpent.robots.libero.skills import pathclear

    # what stands in its way or where it ends is set aside first (it cannot be lifted over it)
    pathclear.clear_push_path(call, say, ToolExecutor(call), obj, [obj.center[:2], *route], [push.reference_box(ref)])
    def relook(predicted):
        """The instance nearest where the object should be now; the only instance of its
        kind wherever it is; None when several are and none lies within 0.12 m."""
        try:
            seen = scene.find_instances(call, goal.object_phrase)
        except scene.NotFound:
            return None
        best = min(seen, key=lambda i: math.hypot(i.est.center[0] - predicted[0], i.est.center[1] - predicted[1]))
        if len(seen) > 1 and math.hypot(best.est.center[0] - predicted[0], best.est.center[1] - predicted[1]) > 0.12:
            return None
        return best.est

    return push.push_object(ToolExecutor(call), obj, (gx, gy), relook=relook, via=route[:-1],
                            max_legs=push.PUSH_MAX_LEGS + push.PUSH_VIA_LEGS * (len(route) - 1))

def push_if_flat(call, say, goal):
    """A step putting an object beside a reference, as a push when the object is too flat
    and wide to be gripped from above (:func:`~rpent.robots.libero.skills.push.needs_push`:
    "move the plate to the stove's front"); ``goal`` itself otherwise, or when the object
    is not seen (the step then says so)."""
    from rpent.robots.libero import strategy
    from rpent.robots.libero.skills import push, scene

    try:
        obj = scene.choose_instance(call, goal.object_qualifier, scene.find_instances(call, goal.object_phrase)).est
    except scene.NotFound:
        return goal
    if not push.needs_push(obj):
        return goal
    say(f"The {goal.object_phrase} is {obj.height * 100:.1f} cm tall and {obj.minor_extent * 100:.0f} cm across: too "
        "flat and wide to grip from above, so I push it there.")
    return strategy.PushGoal(goal.object_phrase, goal.target_phrase, goal.target_side, goal.instruction,
                             goal.object_qualifier)


#: the object's points come from the front camera within this distance (m) of its estimated
#: centre, from this height (m) above its bottom up (the table and neighbours left out)
DOOR_POINTS_RADIUS = 0.11
DOOR_POINTS_ABOVE = 0.005


def object_points(call, inst):
    """World points (``float[N, 3]``) of one segmented instance: ``back_project`` of its mask's
    box on the front camera, kept within :data:`DOOR_POINTS_RADIUS` of its centre and above
    its bottom."""
    import numpy as np

    from rpent.robots.libero.toolkit.perception import MAX_REGION_POINTS

    seg = call("segment", {"prompt": inst.name, "all_instances": True})
    item = next((i for i in seg.get("instances") or [] if i.get("object") == inst.name), None)
    if item is None:
        return np.zeros((0, 3))
    b = item["box"]
    est = inst.est
    res = call("back_project", {"row_range": [b[1], b[3]], "col_range": [b[0], b[2]], "resolution": "low",
                                "z_min": est.bottom_z + DOOR_POINTS_ABOVE, "z_max": est.top_z + 0.01,
                                "max_points": MAX_REGION_POINTS})
    pts = np.asarray(res.get("points") or [], dtype=np.float64).reshape(-1, 3)
    d = np.hypot(pts[:, 0] - est.center[0], pts[:, 1] - est.center[1])
    return pts[d <= DOOR_POINTS_RADIUS]


def door_place_step(call, say, goal, tag, home=None, go_home=None) -> dict:
    """Put the object into a fixture behind a hinged door (the microwave: :func:`~rpent.robots.libero.skills.language.through_door`):
    open the door first when it stands less than :data:`~rpent.robots.libero.skills.cavity.MIN_DOOR_OPEN`
    open, find the object's handle in its front-camera points
    (:func:`~rpent.robots.libero.skills.cavity.find_handle`) and carry it in by the handle
    (:func:`~rpent.robots.libero.skills.cavity.place_through_door`). ``home`` is the start eef
    position (m, world frame) the arm's base is read from; ``go_home`` (no arguments) takes the
    arm back there after the door was opened, so the cameras see the object without the arm.

    Returns:
        the skill's result (``done``, ``stage``, ``reason``?); an object without a handle ends
        with ``done`` False at stage ``grasp``.
    Raises:
        scene.NotFound: the fixture or the object is not found.
    """
    from rpent.robots.libero.skills import cavity, doors, scene
    from rpent.robots.libero.skills.grasp import base_from_home

    _, part, read = scene.find_fixture_part(call, goal.target_phrase, (), "hinge")
    ex = ToolExecutor(call)
    try:
        cav = cavity.cavity_frame(part)
    except ValueError as exc:
        return {"done": False, "stage": "door check", "reason": str(exc)}
    if not cavity.door_open_enough(cav):
        say(f"{tag}: the {goal.target_phrase}'s door stands {cav['open']:.2f} rad open (the object goes in through it "
            f"with the door at least {cavity.MIN_DOOR_OPEN:.2f} rad open); opening it first.")
        out = doors.open_door(ex, part, read)
        part = read() or part
        cav = cavity.cavity_frame(part)
        if not cavity.door_open_enough(cav):
            return {**out, "done": False, "stage": f"open the door ({out.get('stage')})",
                    "reason": out.get("reason") or f"the door stands {cav['open']:.2f} rad open"}
        if go_home is not None:
            go_home()
    inst = scene.choose_instance(call, goal.object_qualifier, scene.find_instances(call, goal.object_phrase))
    pts = object_points(call, inst)
    handle = cavity.find_handle(pts, inst.est.center[:2])
    if handle is None:
        return {"done": False, "stage": "grasp", "reason": f"no handle seen on the {goal.object_phrase} "
                f"({len(pts)} points): the hand does not fit inside the {goal.target_phrase}, so the scripted "
                "planner carries objects in through its door only by a handle"}
    say(f"{tag}: the {inst.name}'s body stands at ({handle.axis[0]:.3f}, {handle.axis[1]:.3f}), {handle.radius:.3f} m "
        f"in radius, its handle reaching {handle.reach:.3f} m toward ({handle.direction[0]:+.2f}, "
        f"{handle.direction[1]:+.2f}); taking it by the handle and carrying it in through the door, the handle "
        f"pointing out.")
    out = cavity.place_through_door(ex, inst.est, handle, cav, base_xy=None if home is None else base_from_home(home),
                                    points=pts)
    if out.get("done"):
        say(f"{tag}: set down inside, its axis {out.get('axis_depth', float('nan')):.3f} m behind the front.")
    return out
