"""Finish the goals a flash replay left unmet with the offline planner's closed-loop skills.

A replay re-plays the source run's motions. Where the source run worked with a closed loop, its
recorded waypoints are only that loop's trace:

* moving a fixture (pushing a microwave door shut round its hinge in short pushes aimed from
  where the hand is and where the joint reads after each, turning a stove knob, hooking a drawer
  open): in a scene where the fixture stands a centimetre elsewhere or its door opens two degrees
  less, the same waypoints push the door with the hand lagging behind them and stop short of
  closed (libero_10_task t9 "put the white mug in the microwave and close it": the mug went in on
  every seed, the door stayed open on 9 of 9);
* pushing an object across the table (a plate pushed to the front of the stove in legs, each
  aimed from a fresh look at where the plate went): replayed open loop, the legs aim where the
  source's plate was, and the plate in another scene turns or stops elsewhere.

So, after the whole plan is replayed and the environment's predicate still does not hold, the
goals at the end of the instruction (:func:`closed_loop_goals`: the trailing fixture goals, "...
and close it", "turn on the stove", "open the bottom drawer of the cabinet"; or a push that is the
instruction's last step, "push the plate to the front of the stove") are finished by the offline
planner's skill for that goal: :func:`rpent.planners.scripted_steps.fixture_step`, which reads the
part live with ``view_fixtures`` and starts from wherever the part and the arm are (a goal already
met ends after one read), or :func:`rpent.planners.scripted_steps.push_step`, which looks at the
object and the reference with the front camera after the arm went back to its start pose (it sets
aside what stands in the way and aims each leg from a fresh look). A fixture goal before an object
goal ("turn on the stove and put the moka pot on it") is not re-run at the end: it would move the
fixture under what was set on it. Every call is a toolkit call in the transcript and the run
record; the replay report logs one ``fixture_skill`` or ``push_skill`` repair per goal. No model
is asked: tokens stay 0.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["closed_loop_goals", "ends_with_push", "finish_goals"]


def closed_loop_goals(instruction: str) -> list[Any]:
    """The goals of ``instruction`` (as the offline planner parses it,
    :func:`rpent.robots.libero.skills.language.parse_task`) a replay finishes with a skill, in
    order: the :class:`~rpent.robots.libero.skills.language.FixtureGoal` steps after its last object
    step, or its last step when that is a
    :class:`~rpent.robots.libero.skills.language.PushGoal`; empty when the instruction does not
    parse or ends with a pick-and-place step."""
    from rpent.robots.libero.skills.language import FixtureGoal, PushGoal, TaskPlan, parse_task

    if not instruction:
        return []
    try:
        plan = parse_task(instruction)
    except Exception:  # noqa: BLE001 — an instruction the parser cannot read has no goal to finish
        return []
    if not isinstance(plan, TaskPlan) or not plan.steps:
        return []
    if isinstance(plan.steps[-1], PushGoal):
        return [plan.steps[-1]]
    out: list[Any] = []
    for goal in reversed(plan.steps):
        if not isinstance(goal, FixtureGoal):
            break
        out.insert(0, goal)
    return out


def ends_with_push(instruction: str) -> bool:
    """Whether ``instruction``'s last step is a push (:func:`closed_loop_goals`): its finish needs
    the arm's start pose, read before the replay moves."""
    from rpent.robots.libero.skills.language import PushGoal

    return any(isinstance(g, PushGoal) for g in closed_loop_goals(instruction))


def finish_goals(instruction: str, call: Callable[[str, dict], dict], say: Callable[[str], None],
                 log: list[dict], solved: Callable[[], bool], home: Sequence[float] | None = None) -> bool:
    """Run the offline planner's skill for each goal of :func:`closed_loop_goals` until the
    predicate holds or the episode ends.

    Args:
        instruction: the task's instruction.
        call: the planner's ``call(tool, args) -> result`` (one recorded toolkit call).
        say: adds a line to the transcript.
        log: the replay report's step log; one ``{"op": "repair", "kind": "fixture_skill" |
            "push_skill", ...}`` entry per goal tried (its ``goal``, the skill's ``stage``, ``done``,
            ``reason`` and the predicate after it).
        solved: the environment's predicate now.
        home: the arm's start eef position (m, world frame; ``robot0_eef_pos`` before the replay
            moved): before a push the arm goes back there, out of the front camera's view of the
            table. None: the push starts from where the arm is.
    Returns:
        True when the instruction has such a goal and its skill was run (the caller re-reads the
        predicate).
    """
    from rpent.planners.scripted_executor import Latest
    from rpent.planners.scripted_steps import fixture_step, go_home, push_step, settle
    from rpent.robots.libero.skills.language import PushGoal

    goals = closed_loop_goals(instruction)
    if not goals:
        return False
    latest = Latest()

    def tracked(name: str, args: dict) -> dict:
        res = call(name, args)
        latest.note(name, args, res)
        return res

    tracked.latest = latest  # type: ignore[attr-defined]  # the skills' executor reads the arm's state from it
    for goal in goals:
        what = goal.describe()
        push = isinstance(goal, PushGoal)
        kind = "push_skill" if push else "fixture_skill"
        say(f"Replayed every step and the task predicate does not hold: finishing '{what}' with the offline "
            + ("planner's push skill from fresh looks at the table." if push else
               "planner's fixture skill from the part's live state."))
        entry: dict[str, Any] = {"plan_step": None, "op": "repair", "kind": kind, "goal": what}
        try:
            if push and home is not None:
                go_home(tracked, home)
            out = push_step(tracked, say, goal) if push else fixture_step(tracked, goal)
        except Exception as exc:  # noqa: BLE001 — a part or object not found or a skill error ends this repair, named
            entry.update(done=False, reason=f"{type(exc).__name__}: {exc}")
            log.append(entry)
            break
        state = latest.state or {}
        if not (state.get("success") or state.get("terminated") or state.get("truncated")):
            settle(tracked)  # a part the skill found already in place is judged only after a step
            state = latest.state or {}
        entry.update(done=bool(out.get("done")), stage=out.get("stage"), reason=out.get("reason"),
                     solved_after=bool(solved()))
        log.append(entry)
        if entry["solved_after"] or state.get("terminated") or state.get("truncated"):
            break
    return True
