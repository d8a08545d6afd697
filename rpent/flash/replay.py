"""The ``flash`` planner: replay a flash plan with re-localised anchors, no LLM (reference §6.4).

For each plan step, in order:

* ``locate``: ``segment(prompt=<anchor prompt>, camera=<camera>, all_instances=True)`` on the
  live scene; the anchor's live estimate is the ``object_estimate`` of the instance the
  instruction's qualifier names, else of the one nearest the recorded centre (a first look) or
  the anchor's latest live centre (a re-look of the same instance: the wrist camera over the hand's
  target may show a look-alike first; a look the source run made at another instance of the
  prompt, the second of "both moka pots", is matched like a first look); when the mask has too few valid
  world points, the box is back-projected with ``back_project`` (region mode, low resolution)
  and its ``center_xyz`` is used. The first observation of an anchor that cannot be found
  ends the replay with ``finish(status="failure")`` and the named reason
  ``flash_anchor_not_found``; a later re-observation (e.g. the wrist look) that fails keeps
  the earlier one, and so does one hidden in part by what the plan set down on the anchor
  (:mod:`rpent.flash.occlusion`: libero_10_task t6, the mug on the plate).
  A point anchor (``"kind": "points"``, :mod:`rpent.flash.points`: a thing the source run knew only
  by its ``back_project`` points) is re-read with the recorded ``back_project`` call; a first look
  that finds no cluster there keeps the recorded estimate.
  A fixture-part anchor (camera ``view_fixtures``: a drawer, door or knob the source run read
  with ``view_fixtures``, see :func:`rpent.flash.generate.fixture_anchors`) is re-read with one
  ``view_fixtures`` call (simulator state) for each run of consecutive fixture locates.
* ``tool``: the recorded command; a bound waypoint becomes ``live_center_xy + offset_xy``
  with the recorded z (m, world frame; ``"ref": "support"``: from the live support point); a recorded ``target_yaw`` turns with the anchor's
  grasp axis (folded to +/- pi/2; only when both footprints are elongated), then turned by pi
  where the wrist joint would run out of range at the waypoint
  (:func:`rpent.robots.libero.skills.grasp.wrist_fold`: libero_10_swap t1, a cream cheese box
  whose front-camera axis turned the hover yaw to 3.31 rad, past the joint's 2.90 rad). A tool error ends
  the replay with ``flash_step_failed``.
* a blocked grasp descent (an anchored ``move_to`` right before the gripper closes that stops
  more than :data:`~rpent.flash.descent.BLOCKED_DESCENT_M` above its target, ``reached: false``: the hand met a
  neighbouring object that was farther away in the source scene, or the arm could not reach
  that low there) is repaired once: rise to the preceding waypoint's height, segment the object
  again (the hand may have pushed it; when that look shows only part of it, look with the camera
  of the anchor's first observation instead), shift the grasp point by :data:`~rpent.flash.descent.GRASP_SHIFT_M`
  along the object's long axis away from the push, descend again (every call is in the
  transcript and the run record like any other). Later waypoints of that anchor keep the shift.
* a grasp that came up empty (the lift ends with the fingers closed on nothing) where the source's
  grasp held is retried once from a fresh look (:mod:`rpent.flash.regrasp`).
* a stalled ``release`` (the fingers grew < :data:`RELEASE_STALL_M` and stayed below
  :data:`RELEASE_OPEN_M`; ``release`` gives up after 6 env steps without growth) is followed
  once by ``set_gripper(-1, steps=REOPEN_STEPS)``.
* a plan that ends holding the object (its last gripper command, ``set_gripper`` or a motion's
  ``gripper`` argument, closes it: its source run was solved during the last motion, before it
  opened the gripper) and leaves the predicate false gets one final ``release``.
* an anchor's first look that finds nothing usable on the front camera (the object hidden behind
  a taller one) is tried once more from above with the wrist camera
  (:func:`rpent.flash.locate.look_from_above`, a ``look_from_above`` repair).
* a replay that leaves the predicate false and whose instruction ends with a fixture goal ("... and
  close it", "turn on the stove") has that goal finished by the offline planner's fixture skill from
  the part's live state; one that ends with a push ("push the plate to the front of the stove"), by
  its push skill from fresh looks, the arm first back at its start pose (:mod:`rpent.flash.finish`).

Every replay writes ``flash_replay.json`` into its run directory (a run artifact): the plan cell,
the env server that served it (init state; pid and seed switches of a shared server), and per
plan step what happened: ``locate`` (anchor, prompt, camera, found, recorded and live centre, m,
world frame, ``kept_earlier``; ``occluded_by_place`` where a hidden re-look was not used), ``tool`` (``mode`` anchored | interpolated | as_recorded, recorded and live
arguments, error) and ``repair`` (a blocked descent's shift and how many looks it took, with the
camera that re-localised it; an empty grasp's new look and the opening after its retry; or a
stalled release's opening before and after), with the counts ``replayed``,
``relocalised``, ``not_found`` and ``repairs`` (a ``fixture_skill`` or ``push_skill`` repair: the goal, the skill's
last stage, whether it got there and whether the predicate then held). Under ``rpent`` the flash planner gets the
:class:`rpent.flash.toolkit.FlashToolkit` (state-only steps, images where it looks).

The run ends with ``finish(status="success")`` iff the environment's predicate holds. A plan
that is missing or unreadable is a named error (``flash_plan_missing``,
``flash_anchors_missing``, ``flash_plan_invalid``) in ``PlannerResult.error``, never a crash.
Token counts stay 0.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from pathlib import Path

from rpent.flash.descent import blocked_grasp_descent, eef_pitch as _eef_pitch, grasp_axis, retry_descent
from rpent.flash.episode import REPORT_NAME, episode_identity, qualified_instances, server_identity, task_instruction, write_report
from rpent.flash.files import FlashFileError, find_plan, load_flash
from rpent.flash.finish import ends_with_push, finish_goals
from rpent.flash.generate import FIXTURE_CAMERA, fixture_estimate
from rpent.flash.locate import locate_anchor, look_from_above
from rpent.flash.occlusion import occluded_relook
from rpent.flash.points import POINTS_KIND, relocate as relocate_points
from rpent.flash.regrasp import EMPTY_GRASP_M, RELEASE_OPEN_M, RELEASE_STALL_M, REOPEN_STEPS, closing_step, \
    diagnosis as _diagnosis, ends_holding, kept_grasp_resume, opening as _opening, retry_empty_grasp, \
    source_grasp_held, stalled_release
from rpent.planners.base import Finish, PlannerConfig, PlannerResult, PlannerStats

__all__ = ["FlashPlanner", "FLASH_DIR_ENV", "REPORT_NAME", "RELEASE_OPEN_M", "RELEASE_STALL_M", "REOPEN_STEPS",
           "default_flash_dir", "grasp_axis"]

FLASH_DIR_ENV = "RPENT_FLASH_DIR"
"""Environment variable naming the flash directory when the config gives none."""


def default_flash_dir() -> Path:
    """``$RPENT_FLASH_DIR``, else ``<default memory dir>/libero/flash`` (:func:`rpent.memory.default_memory_dir`)."""
    env = os.environ.get(FLASH_DIR_ENV)
    if env:
        return Path(env)
    from rpent.memory.layout import corpus_dir

    return corpus_dir(None, "libero") / "flash"


def _fold(angle: float) -> float:
    """Fold an axis difference into [-pi/2, pi/2) (axes are undirected)."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


class _Stop(Exception):
    pass


class _Failure(Exception):
    """The replay cannot continue; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class FlashPlanner:
    """Replays ``<cell>_plan.json`` (see module docstring).

    Args:
        config: ``flash_dir`` (else :func:`default_flash_dir`), ``timeout_s``; other options
            are ignored (no model).
    """

    name = "flash"

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()
        self._log: list[dict] = []  # what the last replay did, plan step by plan step (flash_replay.json)

    def flash_dir(self) -> Path:
        """The directory the plan is read from."""
        d = getattr(self.config, "flash_dir", None)
        return Path(d) if d else default_flash_dir()

    def solve(self, system_prompt: str, user_message: str, toolkit, *, steering=None, on_event=None) -> PlannerResult:
        """Replay the plan of the toolkit's task; never raises (see :class:`PlannerResult`)."""
        t0 = time.monotonic()
        stats = PlannerStats()
        messages: list[dict] = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]},
                                {"role": "user", "content": [{"type": "text", "text": user_message}],
                                 "source": "task"}]
        result = PlannerResult(messages=messages, stats=stats)

        def emit(kind: str, payload: dict) -> None:
            if on_event is not None:
                try:
                    on_event(kind, payload)
                except Exception:  # noqa: BLE001
                    pass

        def say(text: str) -> None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
            emit("text", {"text": text})

        def call(name: str, args: dict) -> dict:
            if steering is not None and steering.stop_requested:  # a property of Steering, as in the scripted planner
                raise _Stop(steering.stop_reason or "interrupted by operator")
            if self.config.timeout_s is not None and time.monotonic() - t0 > self.config.timeout_s:
                raise _Stop(f"flash planner timed out after {self.config.timeout_s:g}s")
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name,
                                                                 "input": args}]})
            emit("tool_call", {"name": name, "args": args, "call_id": call_id})
            stats.tool_calls += 1
            t = time.monotonic()
            res = toolkit.execute(name, args, call_id)
            clean = {k: v for k, v in res.items() if k != "_images"}
            messages.append({"role": "tool", "name": name, "tool_call_id": call_id, "content": clean,
                             "is_error": "error" in res, "images": len(res.get("_images") or [])})
            emit("tool_result", {"call_id": call_id, "name": name, "result": clean, "is_error": "error" in res,
                                 "elapsed_s": round(time.monotonic() - t, 3)})
            if res.get("code") == "tool_cancelled":
                raise _Stop((steering.stop_reason if steering is not None else None) or "interrupted by operator")
            return res

        self._log = []
        self._episode_over = False
        report: dict = {"schema_version": 1, "planner": "flash", "plan": None, "flash_dir": str(self.flash_dir()),
                        "env_server": server_identity(toolkit), "steps": self._log}
        try:
            suite, task, seed = episode_identity(toolkit, user_message)
            report.update(suite=suite, task=task, seed=seed)
            flash_dir = self.flash_dir()
            cell = find_plan(flash_dir, suite, task)
            plan, anchors = load_flash(flash_dir, cell)
            report["plan"] = cell
            report["plan_steps"] = len(plan["steps"])
            say(f"Flash replay of {cell} ({len(plan['steps'])} steps) from {flash_dir} on {suite} task {task} "
                f"seed {seed}.")
            instruction = task_instruction(user_message)
            goal_text = instruction or str(plan.get("task_language") or "")
            # a push finished by the offline planner's skill starts from the arm's start pose
            home = (call("view_env_state", {}).get("state") or {}).get("robot0_eef_pos") \
                if ends_with_push(goal_text) else None
            self._replay(plan, anchors, call, say, toolkit, instruction)
            solved = toolkit.solved()
            if not solved and not self._episode_over and self._ends_holding(plan["steps"]):
                self._final_release(call, say)
                solved = toolkit.solved()
            if not solved and not self._episode_over and finish_goals(goal_text, call, say, self._log,
                                                                      toolkit.solved, home=home):
                solved = toolkit.solved()
            if solved:
                self._finish(call, result, "success", f"flash replay of {cell}: the environment reports success")
            else:
                why = _diagnosis(self._log)
                self._finish(call, result, "failure", f"flash_not_solved: replayed all steps of {cell} but the "
                                                      "task predicate does not hold" + (f" ({why})" if why else ""))
        except FlashFileError as exc:
            say(str(exc))
            result.error, result.stop_reason, result.error_kind = str(exc), "error", "internal"
        except _Failure as exc:
            say(str(exc))
            self._finish(call, result, "failure", str(exc))
        except _Stop as stop:
            result.error = str(stop)
            result.stop_reason = "timeout" if "timed out" in str(stop) else "interrupted"
            result.error_kind = result.stop_reason if result.stop_reason == "timeout" else "interrupted"
        except Exception as exc:  # noqa: BLE001 — planners report, never raise
            result.error = f"flash planner failed: {type(exc).__name__}: {exc}"
            result.stop_reason, result.error_kind = "error", "internal"
        stats.elapsed_s = round(time.monotonic() - t0, 3)
        report.update(finish=None if result.finish is None else {"status": result.finish.status,
                                                                  "summary": result.finish.summary},
                      error=result.error, elapsed_s=stats.elapsed_s,
                      replayed=sum(1 for e in self._log if e["op"] == "tool"),
                      relocalised=sum(1 for e in self._log if e["op"] == "locate" and e["found"]),
                      not_found=sum(1 for e in self._log if e["op"] == "locate" and not e["found"]),
                      repairs=sum(1 for e in self._log if e["op"] == "repair"))
        write_report(toolkit, report)
        return result

    # ------------------------------------------------------------------ replay
    def _replay(self, plan: dict, anchors_doc: dict, call, say, toolkit, instruction: str = "") -> None:
        anchors = {a["id"]: a for a in anchors_doc["anchors"]}
        # a look that found several instances: the one the instruction's qualifier designates in
        # this scene ("the bowl not between the plate and the ramekin"), resolved before anything moves
        names = qualified_instances(call, instruction) if any(
            s["op"] == "locate" and int(s.get("instances") or 1) > 1 for s in plan["steps"]) else {}
        if names:
            say("Qualified objects in this scene: " + ", ".join(f"'{p}' is {n}" for p, n in sorted(names.items())) + ".")
        live: dict[str, dict[int, dict]] = {aid: {} for aid in anchors}  # anchor -> observation -> estimate
        self._shift: dict[str, tuple[float, float]] = {}  # anchor -> XY shift of its grasp after a blocked descent
        self._regrasped: set[int] = set()  # close steps whose empty grasp was retried (once each)
        seen_at: dict[tuple[str, int], int] = {}  # (anchor, observation) -> plan step of its live look
        fixtures_view: dict | None = None  # the view_fixtures result of the current run of fixture locates
        self._pitch: float | None = None  # eef pitch (rad, about world x) after the latest motion
        resume: int | None = None  # after a kept grasp the source gave up: the plan step its carry goes on from
        for i, step in enumerate(plan["steps"]):
            if resume is not None and i < resume:
                continue
            resume = None
            aid = step.get("anchor")
            if step["op"] == "locate":
                anchor = anchors[aid]
                k = int(step["observation"])
                if step.get("camera") == FIXTURE_CAMERA:
                    if fixtures_view is None:  # one read serves the consecutive fixture locates
                        fixtures_view = call("view_fixtures", {})
                    est = None if "error" in fixtures_view else fixture_estimate(
                        fixtures_view, str(anchor.get("object")), str(anchor.get("part")))
                elif anchor.get("kind") == POINTS_KIND:  # known by its points (rpent.flash.points)
                    est = relocate_points(call, anchor, k, live[aid])
                else:
                    ref0 = anchor["observations"][k].get("estimate") or {}
                    several = int(step.get("instances") or 1) > 1
                    # the instance nearest the recorded centre: this scene may show a look-alike the
                    # source's look did not, and the segment's first instance need not be the plan's
                    near = ref0.get("center")
                    last = max(live[aid]) if live[aid] else None
                    if last is not None and self._same_instance(anchor, k, last):
                        # a re-look (the wrist camera over the hand's target): the instance nearest where
                        # this anchor was last seen live, not the first one the camera shows. The source
                        # run's close look may have seen one bowl where this scene shows two
                        # (libero_spatial_task t0 seed 7: the other bowl, 16 cm away, was taken)
                        near = live[aid][last].get("center") or near
                    est = self._locate(call, anchor["prompt"], step.get("camera") or "agentview", near,
                                       names.get(anchor["prompt"]) if several or live[aid] else None)
                ref = (anchor["observations"][k].get("estimate") or {}) if k < len(anchor["observations"]) else {}
                j = max((x for x in live[aid] if anchor["observations"][x].get("camera") == step.get("camera")),
                        default=None)  # the latest earlier live look with this camera (rpent.flash.occlusion)
                hidden = None if est is None or j is None else occluded_relook(
                    plan["steps"], i, aid, est, live[aid][j], seen_at.get((aid, j)))
                self._log.append({"plan_step": i, "op": "locate", "anchor": aid, "prompt": anchor["prompt"],
                                  "camera": step.get("camera") or "agentview", "observation": k,
                                  "found": est is not None, "recorded_center": ref.get("center"),
                                  "live_center": None if est is None else est.get("center"),
                                  "source": None if est is None else est.get("source"),
                                  "kept_earlier": (est is None or hidden is not None) and bool(live[aid]),
                                  **({"occluded_by_place": hidden} if hidden else {})})
                if hidden is not None:
                    say(f"The look at '{anchor['prompt']}' shows less of it than before (footprint "
                        f"{hidden['footprint_m2']:.4f} < {hidden['earlier_footprint_m2']:.4f} m^2) since step "
                        f"{hidden['place_step']} set something down on it; keeping the earlier look.")
                    continue
                if est is None and anchor.get("kind") == POINTS_KIND and not live[aid]:
                    say(f"The points of anchor {aid} were not found again; its pick is replayed as recorded.")
                    est = dict(ref, source="recorded")
                if est is None and not live[aid] and anchor.get("prompt") and step.get("camera") != "wrist" \
                        and anchor.get("kind") not in (POINTS_KIND, "fixture_part"):
                    est, entry = look_from_above(call, anchor["prompt"], ref, names.get(anchor["prompt"]))
                    self._log.append({**entry, "plan_step": i, "anchor": aid})
                    if est is not None:
                        say(f"'{anchor['prompt']}' is not in view on {step.get('camera')}; the wrist camera found it "
                            "from above.")
                if est is None:
                    if not live[aid]:
                        raise _Failure("flash_anchor_not_found", f"anchor {aid} '{anchor['prompt']}' was not found "
                                                                 f"by segment on the {step.get('camera')} camera"
                                                                 + (" nor from above on the wrist camera"
                                                                    if self._log[-1].get("kind") == "look_from_above"
                                                                    else ""))
                    say(f"Re-observation {k} of '{anchor['prompt']}' on {step.get('camera')} failed; keeping "
                        "the earlier one.")
                    continue
                live[aid][k] = est
                seen_at[(aid, k)] = i
                continue
            fixtures_view = None
            args = self._args(plan["steps"], i, anchors, live)
            pitch_before = self._pitch  # the hand's pitch before this motion (a blocked descent may tilt it)
            res = call(step["tool"], args)
            self._pitch = _eef_pitch(res, self._pitch)
            mode = "anchored" if aid is not None else "interpolated" if step.get("interp") else "as_recorded"
            self._log.append({"plan_step": i, "op": "tool", "tool": step["tool"], "mode": mode,
                              "recorded_args": step.get("args") or {}, "live_args": args,
                              "error": res.get("error"), "reached": res.get("reached"),
                              "gripper_opening_m": _opening(res)})
            if "error" in res:
                raise _Failure("flash_step_failed", f"step {i} ({step['tool']}) failed: {res['error']}")
            if blocked_grasp_descent(plan["steps"], i, args, res):
                res = retry_descent(plan["steps"], i, args, res, anchors, live, call=call, say=say, locate=self._locate,
                                    failure=_Failure, args_of=self._args, log=self._log, shifts=self._shift,
                                    pitch_before=pitch_before)
                self._pitch = _eef_pitch(res, self._pitch)
            c = closing_step(plan["steps"], i)
            if c is not None and c not in self._regrasped and _opening(res) is not None \
                    and _opening(res) < EMPTY_GRASP_M and source_grasp_held(plan["steps"], c):
                self._regrasped.add(c)
                res = retry_empty_grasp(plan["steps"], i, c, res, anchors, live, call=call, say=say,
                                        locate=self._locate, failure=_Failure, args_of=self._args, log=self._log)
            elif c is not None and (_opening(res) or 0.0) >= EMPTY_GRASP_M:
                resume = kept_grasp_resume(plan["steps"], c)
                if resume is not None:
                    self._log.append({"plan_step": i, "op": "repair", "kind": "kept_grasp", "close_step": c,
                                      "opening_m": _opening(res), "resume_step": resume})
                    say(f"The grasp of plan step {c} holds (gripper opening {_opening(res):.3f} m), where the source "
                        f"run let go and grasped again; going on with the carry at plan step {resume}.")
            if step["tool"] == "release" and self._stalled_release(res):
                res = self._reopen(i, res, call, say)
            after = (res.get("state_after") or {})
            if after.get("success") or after.get("terminated") or after.get("truncated"):
                self._episode_over = True
                break  # the episode is over; finish reports the predicate

    @staticmethod
    def _same_instance(anchor: dict, k: int, j: int) -> bool:
        """Observations ``k`` and ``j`` of ``anchor`` stand for the same instance: the source run
        recorded the same object for both, or did not say for one of them. A later look of a
        prompt with several instances may be at another one ("put both moka pots on the stove":
        the second look is at the second pot, the first one already stands on the stove), and is
        then matched like a first look, nearest its recorded centre."""
        obs = anchor["observations"]
        a = obs[k].get("object") if k < len(obs) else None
        b = obs[j].get("object") if j < len(obs) else None
        return a is None or b is None or a == b

    _ends_holding = staticmethod(ends_holding)

    def _final_release(self, call, say) -> None:
        """Open the gripper after the last plan step when the predicate does not hold yet and the
        plan ends holding the object (:func:`rpent.flash.regrasp.ends_holding`); a stalled release is driven open
        (:meth:`_reopen`). Logged as a ``final_release`` repair."""
        say("Replayed every step and the task predicate does not hold while the hand still holds the "
            "object (the source run was solved before it opened the gripper): releasing it.")
        res = call("release", {})
        if "error" in res:
            raise _Failure("flash_step_failed", f"the final release failed: {res['error']}")
        self._log.append({"plan_step": None, "op": "repair", "kind": "final_release",
                          "final_gripper_opening_m": res.get("final_gripper_opening")})
        if self._stalled_release(res):
            self._reopen(None, res, call, say)

    _stalled_release = staticmethod(stalled_release)

    def _reopen(self, i: int | None, res: dict, call, say) -> dict:
        """One bounded repair of a stalled release: drive the gripper open in place for
        :data:`REOPEN_STEPS` env steps (``set_gripper``); logged as a ``stalled_release`` repair."""
        which = "final release" if i is None else f"release of step {i}"
        say(f"The {which} did not open the gripper ({float(res['final_gripper_opening']):.3f} m): "
            f"driving it open for {REOPEN_STEPS} env steps.")
        res2 = call("set_gripper", {"gripper": -1.0, "steps": REOPEN_STEPS})
        self._log.append({"plan_step": i, "op": "repair", "kind": "stalled_release",
                          "opening_before_m": round(float(res["final_gripper_opening"]), 4),
                          "opening_after_m": None if "error" in res2 else res2.get("gripper_opening")})
        if "error" in res2:
            raise _Failure("flash_step_failed", f"re-opening after the stalled {which} failed: "
                                                f"{res2['error']}")
        return res2

    def _args(self, steps: list[dict], i: int, anchors: dict, live: dict) -> dict:
        """The live arguments of tool step ``i`` (anchored, interpolated between anchored
        neighbours, or as recorded)."""
        step = steps[i]
        args = dict(step.get("args") or {})
        if step.get("anchor") is not None:
            out = self._rebuild(args, step, anchors[step["anchor"]], live[step["anchor"]])
            shift = getattr(self, "_shift", {}).get(step["anchor"])
            if shift is not None and step.get("offset_xy") is not None and isinstance(out.get("xyz"), list):
                out["xyz"] = [round(out["xyz"][0] + shift[0], 5), round(out["xyz"][1] + shift[1], 5), out["xyz"][2]]
            return out
        interp = step.get("interp")
        if interp and isinstance(args.get("xyz"), list) and all(
                live.get(steps[int(j)].get("anchor") or "") for j in interp[:2]):
            # (a neighbour whose anchor is first located after this step, e.g. the next object of
            # a two-object task, cannot be rebuilt yet: the waypoint is then replayed as recorded)
            prev, nxt, t = int(interp[0]), int(interp[1]), float(interp[2])
            a = self._args(steps, prev, anchors, live)["xyz"]
            b = self._args(steps, nxt, anchors, live)["xyz"]
            args["xyz"] = [round(a[0] + t * (b[0] - a[0]), 5), round(a[1] + t * (b[1] - a[1]), 5),
                           float(args["xyz"][2])]
        return args

    @staticmethod
    def _rebuild(args: dict, step: dict, anchor: dict, live: dict[int, dict]) -> dict:
        """Anchored waypoint: live estimate of the step's observation (or the latest earlier one,
        corrected by the recorded difference between the two observations)."""
        k = int(step["observation"])
        ref = anchor["observations"][k]["estimate"]
        if not live:
            raise _Failure("flash_anchor_not_found", f"anchor {anchor['id']} '{anchor['prompt']}' was never "
                                                     "localised before a step that needs it")
        j = k if k in live else max((x for x in live if x <= k), default=min(live))
        base_ref = anchor["observations"][j]["estimate"]
        cur = live[j]
        # the step's reference point (``ref``: the centre, or the support surface a place goes
        # down on) of the recorded observation k in the live scene
        key = step.get("ref") or "center"
        if not (isinstance(ref.get(key), list) and isinstance(base_ref.get(key), list)):
            key = "center"
        here = cur.get(key) if isinstance(cur.get(key), list) else [
            cur["center"][n] + base_ref[key][n] - base_ref["center"][n] for n in (0, 1)]
        cx = here[0] + (ref[key][0] - base_ref[key][0])
        cy = here[1] + (ref[key][1] - base_ref[key][1])
        if step.get("offset_xy") is not None and isinstance(args.get("xyz"), list):
            dx, dy = step["offset_xy"]
            args["xyz"] = [round(cx + dx, 5), round(cy + dy, 5), float(args["xyz"][2])]
        if args.get("target_yaw") is not None:
            a_ref, a_live = grasp_axis(base_ref), grasp_axis(cur)
            if a_ref is not None and a_live is not None:
                yaw = float(args["target_yaw"]) + _fold(a_live - a_ref)
                if isinstance(args.get("xyz"), list):  # the same grasp turned by pi where the wrist runs out
                    from rpent.robots.libero.skills.grasp import wrist_fold

                    yaw = wrist_fold(yaw, [args["xyz"][:2]])
                args["target_yaw"] = round(yaw, 5)
        return args

    _locate = staticmethod(locate_anchor)

    @staticmethod
    def _finish(call, result: PlannerResult, status: str, summary: str) -> None:
        res = call("finish", {"status": status, "summary": summary})
        if res.get("_finish"):
            result.finish = Finish(status=status, summary=summary)
            result.stop_reason = "finished"
        else:
            result.error = f"finish refused: {res.get('error')}"
            result.stop_reason = "error"
