"""The plan builder of :mod:`rpent.flash.generate`: anchors (one per text prompt, an observation per
look) and plan steps, each waypoint bound to the anchor it is stored relative to (see
:mod:`rpent.flash.files` for the step format and :mod:`rpent.flash.generate` for the binding rules).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["PlanBuilder", "FIXTURE_CAMERA", "HELD_LIFT_RADIUS_M"]

#: While the gripper holds a segmented object, a waypoint within this XY distance (m) of the grasp
#: point (the waypoint where the gripper closed: the lift above it) follows the object's look; one
#: farther off follows a fixture part within the bind radius when there is one (a place into a
#: drawer or a cavity).
HELD_LIFT_RADIUS_M = 0.03
#: Estimate keys kept in the anchors file (the ``object_estimate`` of a ``segment`` result).
_ESTIMATE_KEYS = ("center", "top_z", "bottom_z", "major_yaw", "major_extent", "minor_extent", "ridge_yaw")
#: Optional estimate keys kept when the look gave them: ``support`` (x, y, z of the object's largest
#: horizontal surface, m: a stove's burner plate, where the scripted planner sets things "on" it).
_OPTIONAL_KEYS = ("support",)
#: Pseudo-camera of a fixture-part anchor's observation: re-read with ``view_fixtures``.
FIXTURE_CAMERA = "view_fixtures"


class PlanBuilder:
    """Accumulates anchors and plan steps (see :mod:`rpent.flash.files` for the step format)."""

    def __init__(self, bind_radius_m: float, fixtures: list[dict] | None = None) -> None:
        self.bind_radius_m = bind_radius_m
        self.anchors: list[dict] = []
        self.by_prompt: dict[str, dict] = {}
        self.steps: list[dict] = []
        self.current_anchor: str | None = None
        #: fixture-part anchors (:func:`rpent.flash.generate.fixture_anchors`): bound only where no segment anchor is
        #: within the radius; the used ones join ``anchors`` in :meth:`finish`
        self.fixtures = list(fixtures or [])
        self.used_fixtures: set[str] = set()
        #: the fixture part the gripper closed on (a drawer handle): until it opens, waypoints
        #: beyond the radius (the end of a pull) follow that part, not the world
        self.held_fixture: dict | None = None
        #: the segmented object the gripper closed on and the observation it was grasped from:
        #: until the gripper opens, it moves with the hand, so a waypoint binds to it (that
        #: observation) only where no other object is within the radius (:meth:`tool`)
        self.held: tuple[dict, int] | None = None
        self.gripper_closed = False
        #: XY (m) of the latest waypoint, and of the one where the gripper last closed (the grasp
        #: point: a plate's rim lies 5.5 cm from the plate's centre)
        self.last_xy: list[float] | None = None
        self.grasp_xy: list[float] | None = None
        #: point anchors (:mod:`rpent.flash.points`) by the index of the tool step of their grasp,
        #: and the ids of those let go (carried elsewhere: never bound again)
        self.points_for_grasp: dict[int, dict] = {}
        self.retired: set[str] = set()

    def finish(self) -> None:
        """Add the fixture anchors that some waypoint is bound to, each located once at the start
        of the plan (``view_fixtures``; the source run read them before its first motion), and
        shift the step indices accordingly."""
        used = [a for a in self.fixtures if a["id"] in self.used_fixtures]
        if not used:
            return
        self.anchors.extend(used)
        head = [{"op": "locate", "anchor": a["id"], "camera": FIXTURE_CAMERA, "observation": 0} for a in used]
        self.steps[:0] = head

    def _nearest(self, pool: list[dict], xyz: list[float], distance) -> dict | None:
        """The anchor of ``pool`` whose latest estimate centre is within the bind radius of ``xyz``
        in XY (m, world frame) and has the smallest ``distance(centre)`` (the later one on a tie)."""
        best, best_d = None, math.inf
        for a in pool:
            c = a["observations"][-1]["estimate"]["center"]
            if math.hypot(xyz[0] - c[0], xyz[1] - c[1]) > self.bind_radius_m:
                continue
            d = distance(c)
            if d <= best_d:
                best, best_d = a, d
        return best

    def _nearest_point(self, pool: list[tuple[dict, int]], xyz: list[float]) -> tuple[dict, int, str] | None:
        """``(anchor, observation, ref)`` of the observation centre nearest ``xyz`` in XY within the
        bind radius, else of the nearest ``support`` point (the largest flat surface, where the
        scripted planner sets things down "on" an object: a stove's burner plate lies 17 cm from
        the centre of the stove's mask). The later one on a tie."""
        for ref in ("center", "support"):
            best, best_d = None, self.bind_radius_m
            for a, k in pool:
                c = a["observations"][k]["estimate"].get(ref)
                if not isinstance(c, list) or len(c) < 2:
                    continue
                d = math.hypot(xyz[0] - c[0], xyz[1] - c[1])
                if d <= best_d:
                    best, best_d = (a, k, ref), d
            if best is not None:
                return best
        return None

    def locate(self, prompt: str, camera: str, estimate: dict, obj: str | None, instances: int = 1) -> None:
        """A successful text-prompt ``segment``: a new observation of the prompt's anchor
        (``instances`` > 1: the look found that many, ``estimate`` is the one the run used)."""
        est = {k: estimate.get(k) for k in _ESTIMATE_KEYS}
        est.update({k: estimate[k] for k in _OPTIONAL_KEYS if estimate.get(k) is not None})
        anchor = self.by_prompt.get(prompt)
        if anchor is None:
            anchor = {"id": f"a{len(self.anchors)}", "prompt": prompt, "object": obj, "observations": []}
            self.anchors.append(anchor)
            self.by_prompt[prompt] = anchor
        obs: dict[str, Any] = {"camera": camera, "estimate": est}
        step: dict[str, Any] = {"op": "locate", "anchor": anchor["id"], "camera": camera,
                                "observation": len(anchor["observations"])}
        if instances > 1:
            obs.update(object=obj, instances=instances)
            step["instances"] = instances
        anchor["observations"].append(obs)
        self.retired.discard(anchor["id"])  # a new look: it binds again, through this look
        self.steps.append(step)

    def tool(self, cmd: dict, result: dict | None = None) -> None:
        """A recipe command: bound to the nearest anchor within the radius when it has an ``xyz``
        (see :meth:`_bind`). ``result``: the source run's answer to it, where known; a motion that
        stopped short of its target (``reached: false``) keeps the eef's final height as
        ``source_stop_z`` (m, world frame: a grasp descent that came down on the handle it took)."""
        args = {k: v for k, v in cmd.items() if k != "action"}
        step: dict[str, Any] = {"op": "tool", "tool": cmd["action"], "args": args, "anchor": None,
                                "observation": None, "offset_xy": None}
        final = (result or {}).get("final_eef_pos")
        if (result or {}).get("reached") is False and isinstance(final, list) and len(final) == 3:
            step["source_stop_z"] = round(float(final[2]), 4)
        if isinstance(args.get("xyz"), list) and len(args["xyz"]) == 3:
            self._bind(step, args["xyz"])
            self.last_xy = [float(args["xyz"][0]), float(args["xyz"][1])]
        elif cmd["action"] in ("set_gripper", "release"):
            closing = cmd["action"] == "set_gripper" and float(args.get("gripper", -1)) > 0
            self.held_fixture = next((a for a in self.fixtures if a["id"] == self.current_anchor), None) \
                if closing else None
        elif args.get("target_yaw") is not None and self.current_anchor is not None:
            a = next(x for x in [*self.anchors, *self.fixtures] if x["id"] == self.current_anchor)
            step.update(anchor=a["id"], observation=len(a["observations"]) - 1)
        self._track_gripper(cmd["action"], args)
        self.steps.append(step)

    def _bind(self, step: dict, xyz: list[float]) -> None:
        """Bind a waypoint: objects first (the latest observation's centre or support point,
        :meth:`_nearest_point`), the object in the hand only where no other one is near (and then
        through the observation it was grasped from: a look at it while carried sees it where the
        hand is); fixture parts only where no object is near (parts stacked in one fixture: the
        nearest in 3-D), and before the object in the hand for a waypoint more than
        :data:`HELD_LIFT_RADIUS_M` from where it was grasped (a place into a drawer follows the
        drawer, not where the bottle stood; the lift straight up follows the object); beyond all,
        the part the gripper holds."""
        held = self.held[0] if self.held is not None else None
        hit = self._nearest_point([(a, len(a["observations"]) - 1) for a in self.anchors
                                   if a is not held and a["id"] not in self.retired], xyz)
        if hit is None and self.held is not None:
            hit = self._nearest_point([self.held], xyz)
            g = self.grasp_xy
            if hit is not None and g is not None and math.hypot(xyz[0] - g[0], xyz[1] - g[1]) > HELD_LIFT_RADIUS_M \
                    and self._nearest(self.fixtures, xyz, lambda c: math.dist(xyz, c)) is not None:
                hit = None  # away from the grasp point, by a fixture part: bind to the part
        if hit is None:
            part = self._nearest(self.fixtures, xyz, lambda c: math.dist(xyz, c)) or self.held_fixture
            if part is None:
                self.current_anchor = None
                return
            self.used_fixtures.add(part["id"])
            hit = (part, len(part["observations"]) - 1, "center")
        a, k, ref = hit
        c = a["observations"][k]["estimate"][ref]
        step.update(anchor=a["id"], observation=k, offset_xy=[round(xyz[0] - c[0], 5), round(xyz[1] - c[1], 5)])
        if ref != "center":
            step["ref"] = ref
        self.current_anchor = a["id"]

    def _track_gripper(self, action: str, args: dict) -> None:
        """Follow the gripper through a command (``set_gripper``, ``release``, a motion's
        ``gripper`` argument): closing it after the last waypoint was bound to an object makes
        that object the one held (:attr:`held`); opening it lets go."""
        g = -1.0 if action == "release" else args.get("gripper")
        if g is None:
            return
        if float(g) > 0 and not self.gripper_closed:
            a = next((x for x in self.anchors if x["id"] == self.current_anchor), None)
            self.held = (a, len(a["observations"]) - 1) if a is not None else None
            self.grasp_xy = self.last_xy
        elif float(g) <= 0:
            if self.held is not None:
                # let go elsewhere: its looks show where it stood before the grasp, not where it is
                self.retired.add(self.held[0]["id"])
            self.held = None
        self.gripper_closed = float(g) > 0
