"""Scene perception for one pick-and-place step through the planner's tools.

Uses only the tools any planner has: ``segment(prompt, all_instances=True)`` (mask ->
back-projected points -> :class:`~rpent.robots.libero.skills.estimate.ObjectEstimate` per
instance), on the agentview camera, and on the wrist camera for a second look. The
``call(tool, args) -> result dict`` callable is the planner's tool-call function.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.grasp import Box, box_from_part
from rpent.robots.libero.skills.language import PickPlaceGoal
from rpent.robots.libero.skills.layout import is_rack
from rpent.robots.libero.skills.spatial import resolve_qualifier

__all__ = ["NotFound", "Instance", "Picked", "find_instances", "find_instances_or_wrist", "choose_instance", "bind_qualified", "localise_step", "resting_on", "wrist_relocator",
           "target_relocator", "find_fixture_part", "drawer_target", "furniture_boxes"]

Call = Callable[[str, dict], Mapping[str, Any]]
#: height (m) of a drawer's inner floor above the bottom of its box (``view_fixtures`` ``min``): the
#: bottom panel's thickness, taken with margin (LIBERO cabinet drawers).
DRAWER_FLOOR = 0.012


class NotFound(Exception):
    """An object or a reference could not be localised; the message names it and why."""


@dataclass(frozen=True)
class Instance:
    """One segmented instance: its name (as the segmenter reports it), estimate, and whether
    its mask's box touches the image border (``cut``: only part of it was seen, so its centre
    is biased toward the visible part)."""

    name: str
    est: ObjectEstimate
    cut: bool = False


@dataclass(frozen=True)
class Picked:
    """What a step will move: object and target (names and estimates) and obstacles near the object."""

    object_name: str
    obj: ObjectEstimate
    target_name: str
    target: ObjectEstimate
    obstacles: tuple[ObjectEstimate, ...] = field(default=())
    boxes: tuple[Box, ...] = field(default=())  #: furniture (drawers) from ``view_fixtures``
    target_cut: bool = False  #: the target's mask touched the image border (see :class:`Instance`)


def find_instances(call: Call, phrase: str, camera: str = "agentview") -> list[Instance]:
    """Every instance matching ``phrase`` in the latest ``camera`` image (best match first).

    Raises:
        NotFound: nothing matches or no instance has enough valid points.
    """
    seg = call("segment", {"prompt": phrase, "camera": camera, "all_instances": True})
    if not seg.get("found"):
        raise NotFound(f"could not localise '{phrase}': {seg.get('reason') or seg.get('error') or 'not found'}")
    size = seg.get("image_size")

    def cut(box) -> bool:
        return bool(size and box) and (box[0] <= 0 or box[1] <= 0 or box[2] >= size[0] - 1 or box[3] >= size[1] - 1)

    out = []
    for item in seg.get("instances") or []:
        if item.get("object_estimate"):
            out.append((item.get("pixel_count", 0), Instance(str(item.get("object")), ObjectEstimate(**item["object_estimate"]),
                                                             cut(item.get("box")))))
    if not out and seg.get("object_estimate"):
        out.append((1, Instance(str(seg.get("object") or phrase), ObjectEstimate(**seg["object_estimate"]), cut(seg.get("box")))))
    if not out:
        raise NotFound(f"could not localise '{phrase}': {seg.get('world_error') or 'no valid world points'}")
    out.sort(key=lambda t: -t[0])
    return [inst for _, inst in out]


def find_instances_or_wrist(call: Call, phrase: str) -> list[Instance]:
    """:func:`find_instances` on the agentview camera, else on the wrist camera: an object the
    front camera does not see (the arm in its start pose stands between the camera and an
    object under the hand: libero_10_swap t1, the cream cheese box at seeds 1 and 9, 2 pixels or
    an empty mask) is seen by the wrist camera looking down from above it. Its estimate is in
    the world frame as any other (its floor from the table around it).

    Raises:
        NotFound: neither camera sees it (the front camera's reason, and the wrist's).
    """
    try:
        return find_instances(call, phrase)
    except NotFound as front:
        try:
            return find_instances(call, phrase, camera="wrist")
        except NotFound as wrist:
            raise NotFound(f"{front}; the wrist camera: {str(wrist).split(': ', 1)[-1]}") from None


def _choose(call: Call, phrase: str, qualifier, instances: list[Instance], exclude: set[str],
            known: dict[str, Instance], bound: Mapping[tuple, str] | None = None) -> Instance:
    name = (bound or {}).get((phrase, qualifier)) if qualifier is not None else None
    hit = next((i for i in instances if i.name == name), None) if name is not None else None
    if hit is not None:  # resolved on the scene as it was before the plan moved anything
        return hit
    if qualifier is None or len(instances) == 1:
        fresh = [i for i in instances if i.name not in exclude]
        return (fresh or instances)[0]
    for ref in qualifier.refs:
        if ref not in known:
            known[ref] = find_instances(call, ref)[0]
    k = resolve_qualifier(qualifier, [i.est for i in instances], {r: i.est for r, i in known.items()})
    return instances[k]


def choose_instance(call: Call, qualifier, instances: list[Instance], exclude: set[str] = frozenset()) -> Instance:
    """The instance a phrase's ``qualifier`` (:class:`~rpent.robots.libero.skills.language.Qualifier`
    or None) designates among ``instances`` (references segmented as needed).

    Raises:
        NotFound: a reference was not found.
    """
    return _choose(call, "", qualifier, instances, set(exclude), {})


def bind_qualified(call: Call, goals) -> dict[tuple, str]:
    """Resolve every qualified object and target phrase of ``goals`` (pick-and-place steps) on
    the scene as it is now, before any step moves anything: ``{(phrase, qualifier): instance
    name}``. A qualifier describes the scene the instruction was given in ("stack the right
    bowl on the left bowl and place them in the tray": once the left bowl is in the tray, on
    the right, "the left bowl" would designate the other one). Phrases that cannot be
    localised now are left out (their step resolves them itself and says why)."""
    out: dict[tuple, str] = {}
    known: dict[str, Instance] = {}
    for g in goals:
        pairs = [(g.object_phrase, g.object_qualifier)] + ([(g.target_phrase, g.target_qualifier)]
                                                            if g.target_part is None else [])
        for phrase, q in pairs:
            if q is None or (phrase, q) in out:
                continue
            try:
                insts = find_instances(call, phrase)
                if len(insts) > 1:
                    out[(phrase, q)] = _choose(call, phrase, q, insts, set(), known).name
            except (NotFound, ValueError):
                continue
    return out


def _pinned(instances: list[Instance], phrase: str, qualifier, pins: Mapping[tuple, str]) -> tuple[list[Instance], Instance | None]:
    """``(candidates, pinned)``: the instance an earlier step settled for this phrase and qualifier
    (or None), and the candidates left when the instances earlier steps settled for the same
    phrase with another qualifier are taken out (when any is left): "stack the left bowl on the
    right bowl and place them in the tray" moves the right bowl first, after which the left one
    may no longer be the leftmost."""
    name = pins.get((phrase, qualifier))
    hit = next((i for i in instances if i.name == name), None) if name else None
    others = {n for (ph, q), n in pins.items() if ph == phrase and q != qualifier}
    rest = [i for i in instances if i.name not in others]
    return (rest or instances), hit


#: an estimate's bottom counts as below a support's top (and its top above it) past this (m).
RESTING_SLACK = 0.01


def resting_on(est: ObjectEstimate, support: ObjectEstimate) -> ObjectEstimate:
    """``est`` standing on ``support`` (world, m): when its bottom lies more than
    :data:`RESTING_SLACK` below the support's top (its ``support`` surface's height when it has
    one, else ``top_z``) and its top as much above it, the bottom is that top (and the centre's
    height halfway up); else ``est`` unchanged. A mask's estimate takes its bottom from the
    background around it (:func:`rpent.robots.libero.skills.naming.support_height`); seen from
    the front, the background around a bowl on a cabinet top is mostly the table behind it
    (libero_spatial t9 and libero_spatial_object t9, seed 0: bottom 0.901 m, the cabinet's top
    1.127 m); placed from that bottom, libero_spatial_object's bowl was let go 0.23 m above the
    plate and ended tilted on its rim."""
    top = float(support.support[2]) if support.support is not None else float(support.top_z)
    if not (est.bottom_z < top - RESTING_SLACK and est.top_z > top + RESTING_SLACK):
        return est
    return dataclasses.replace(est, bottom_z=top, center=(est.center[0], est.center[1], (est.top_z + top) / 2.0))


def localise_step(call: Call, goal: PickPlaceGoal, exclude: set[str] = frozenset(),
                  pins: Mapping[tuple, str] | None = None, bound: Mapping[tuple, str] | None = None) -> Picked:
    """Segment the object and target of ``goal``, resolving spatial qualifiers geometrically.

    Args:
        call: the planner's tool-call function.
        goal: the step.
        exclude: instance names already placed by earlier steps (not picked again when
            another instance matches, e.g. the second of "both moka pots").
        pins: ``{(phrase, qualifier): instance name}`` settled by earlier steps: the same phrase
            and qualifier means the same instance again, and another qualifier of that phrase
            means none of those instances (:func:`_pinned`).
        bound: qualified phrases resolved before the plan began (:func:`bind_qualified`); a
            pinned instance comes first.
    Raises:
        NotFound: the object, the target or a reference was not found.
    """
    pins = pins or {}
    known: dict[str, Instance] = {}
    objs = find_instances_or_wrist(call, goal.object_phrase)
    cands, hit = _pinned(objs, goal.object_phrase, goal.object_qualifier, pins)
    obj = hit or _choose(call, goal.object_phrase, goal.object_qualifier, cands, set(exclude), known, bound)
    q = goal.object_qualifier
    if q is not None and q.relation == "on" and not q.negated and q.refs:
        # "the bowl on the cabinet": it stands on the reference's top, not on the table
        ref = known.get(q.refs[0])
        if ref is None:
            try:
                ref = known[q.refs[0]] = find_instances(call, q.refs[0])[0]
            except NotFound:
                ref = None
        if ref is not None:
            obj = Instance(obj.name, resting_on(obj.est, ref.est), obj.cut)
    if goal.target_part is not None:  # into a drawer of a fixture: its box from view_fixtures
        fx, part, _ = find_fixture_part(call, goal.target_phrase, goal.target_part, "slide")
        tgts = [Instance(f"{fx}/{part.get('part')}", drawer_target(part))]
    elif goal.target_phrase in known and goal.target_qualifier is None:  # already segmented as a reference
        tgts = [known[goal.target_phrase]]
    else:
        tgts = find_instances(call, goal.target_phrase)
    others = [t for t in tgts if t.name != obj.name] or tgts
    tq = goal.target_qualifier
    cands, tgt = _pinned(tgts, goal.target_phrase, tq, pins)
    if tgt is None and tq is not None and not tq.refs:
        # a place among its kind ("the black bowl in the middle") counts the object too when it is of that kind
        tgt = _choose(call, goal.target_phrase, tq, cands, set(), known, bound)
        tgt = None if tgt.name == obj.name else tgt
    if tgt is None:
        cands, _ = _pinned(others, goal.target_phrase, tq, pins)
        tgt = _choose(call, goal.target_phrase, tq, cands, set(), known, bound)
    tgts = others
    target = tgt.est
    if goal.relation == "on" and target.support is not None and goal.target_part is None and not is_rack(goal.target_phrase) \
            and goal.target_side is None:
        # (a rack keeps its whole estimate: its cradle is found from it, layout.rack_cradle; a spot
        # beside the target is measured from its footprint: a caddy's largest flat surface is one
        # compartment's floor, 13 cm from its centre, libero_90 t76)
        # put it on the target's largest flat surface (a stove's burner, not its knob)
        sx, sy, sz = target.support
        target = dataclasses.replace(target, center=(sx, sy, target.center[2]), top_z=max(sz, target.bottom_z))
        tgt = Instance(tgt.name, target, tgt.cut)
    obstacles = [i.est for i in objs if i.name != obj.name] + [t.est for t in tgts] + [i.est for i in known.values()]
    near = tuple(o for o in obstacles if math.hypot(o.center[0] - obj.est.center[0], o.center[1] - obj.est.center[1]) > 1e-3)
    return Picked(obj.name, obj.est, tgt.name, tgt.est, near, furniture_boxes(call), tgt.cut)


def furniture_boxes(call: Call) -> tuple[Box, ...]:
    """The boxes of every slide part (drawer) that ``view_fixtures`` lists, in their current
    (open or closed) position; empty when the scene has none or the tool is missing."""
    res = call("view_fixtures", {})
    out = []
    for plist in (res.get("fixtures") or {}).values():
        for p in plist:
            if p.get("type") == "slide":
                b = box_from_part(p)
                if b is not None:
                    out.append(b)
    return tuple(out)


def _nearest_on_wrist(call: Call, phrase: str, chosen: ObjectEstimate, max_shift: float):
    """The instance of ``phrase`` on the wrist camera nearest ``chosen`` (xy distance, m), or None
    when nothing is found or the nearest lies farther than ``max_shift`` m."""
    try:
        inst = find_instances(call, phrase, camera="wrist")
    except NotFound:
        return None
    best = min(inst, key=lambda i: math.hypot(i.est.center[0] - chosen.center[0], i.est.center[1] - chosen.center[1]))
    d = math.hypot(best.est.center[0] - chosen.center[0], best.est.center[1] - chosen.center[1])
    return best if d <= max_shift else None


def wrist_relocator(call: Call, phrase: str, chosen: ObjectEstimate, max_shift: float = 0.05):
    """A ``relocate(state)`` callback for :func:`~rpent.robots.libero.skills.motion.pick_and_place`:
    segments ``phrase`` on the wrist camera and returns the instance nearest ``chosen`` (xy),
    or None when none lies within ``max_shift`` m (then the first estimate stands)."""

    def relocate(_state: Mapping[str, Any]) -> ObjectEstimate | None:
        best = _nearest_on_wrist(call, phrase, chosen, max_shift)
        return best.est if best is not None else None

    return relocate


def target_relocator(call: Call, phrase: str, chosen: ObjectEstimate, max_shift: float = 0.08):
    """A ``relocate(state)`` callback for a second look at a target: segments ``phrase`` on the
    wrist camera (the arm above the target, looking down) and returns the instance nearest
    ``chosen`` (xy), or None when none lies within ``max_shift`` m, it is cut by the image border too,
    or nothing was found (the first estimate stands). Used by the scripted planner for a target cut by the image border."""

    def relocate(_state: Mapping[str, Any]) -> ObjectEstimate | None:
        best = _nearest_on_wrist(call, phrase, chosen, max_shift)
        return best.est if best is not None and not best.cut else None

    return relocate


def vanished_note(last: tuple[str, tuple] | None) -> str:
    """What to add to a failed look for an object an earlier look found (``last``: its instance
    name and estimated centre, world m): it is gone from the images, not misnamed ("" when it
    was never seen)."""
    if last is None:
        return ""
    name, c = last
    return (f" ({name} was seen at ({c[0]:.3f}, {c[1]:.3f}, {c[2]:.3f}) m by an earlier look; "
            "it is no longer in the camera images)")


def carried_looker(call: Call, phrase: str, max_shift: float = 0.15):
    """A ``carried_bottom(state)`` callback for :func:`~rpent.robots.libero.skills.motion.pick_and_place`:
    segments ``phrase`` on the front camera and returns the lowest seen point (``lowest_z``, world
    z, m) of the instance nearest the eef (xy), or None when none lies within ``max_shift`` m of
    it or nothing was found."""

    def look(state: Mapping[str, Any]) -> float | None:
        from rpent.robots.libero import control

        eef = control.robot_state(state)["eef_pos"]
        seg = call("segment", {"prompt": phrase, "camera": "agentview", "all_instances": True})
        best, dist = None, max_shift
        for item in (seg.get("instances") or []) if seg.get("found") else []:
            est, low = item.get("object_estimate"), item.get("lowest_z")
            if not est or low is None:
                continue
            d = math.hypot(float(est["center"][0]) - float(eef[0]), float(est["center"][1]) - float(eef[1]))
            if d <= dist:
                best, dist = float(low), d
        return best

    return look


# ---------------------------------------------------------------------- fixtures (view_fixtures)
def _fixture_words(phrase: str) -> tuple[str, ...]:
    from rpent.robots.libero.skills.naming import phrase_tokens

    return tuple(w for w in phrase_tokens(phrase) if w not in ("drawer", "door")) or ("cabinet",)


def find_fixture_part(call: Call, fixture_phrase: str, part_words: tuple[str, ...], joint_type: str):
    """``(fixture name, part dict, read_part)`` from ``view_fixtures``; ``read_part()`` re-reads
    that part's current state.

    Raises:
        NotFound: no fixture / part matches.
    """
    from rpent.robots.libero.skills.fixtures import part_by_words

    words = _fixture_words(fixture_phrase)
    parts = call("view_fixtures", {}).get("fixtures") or {}
    hit = part_by_words(parts, words, tuple(w for w in part_words if w), joint_type)
    if hit is None:
        known = {fx: [p.get("part") for p in pl] for fx, pl in parts.items()}
        raise NotFound(f"no {joint_type} part {' '.join(part_words)!r} of a fixture matching {fixture_phrase!r} "
                       f"(fixtures: {known})")
    fx, part = hit

    def read_part():
        now = call("view_fixtures", {}).get("fixtures") or {}
        return next((p for p in now.get(fx, []) if p.get("joint") == part.get("joint")), None)

    return fx, part, read_part


def drawer_target(part: Mapping[str, Any]) -> ObjectEstimate:
    """Where to put something into an open drawer: the middle of the drawer's exposed part
    (between the cabinet front, i.e. the drawer front when closed, and its front now), at the
    drawer's rim height (world frame, m); its ``support`` is the drawer's floor there
    (``DRAWER_FLOOR`` above the part box's bottom)."""
    import numpy as np

    from rpent.robots.libero.skills.fixtures import open_direction

    d = open_direction(part)
    lo, hi = np.asarray(part["min"], dtype=np.float64), np.asarray(part["max"], dtype=np.float64)
    centre = (lo + hi) / 2.0
    half = float(abs((hi - lo) @ d)) / 2.0
    opened = abs(float(part["qpos"]))
    spot = centre + d * (half - 0.02 - opened / 2.0)
    width = float(np.linalg.norm((hi - lo)[:2] - ((hi - lo)[:2] @ d[:2]) * d[:2]))
    return ObjectEstimate(center=(float(spot[0]), float(spot[1]), float(centre[2])), top_z=float(hi[2]),
                          bottom_z=float(lo[2]), major_yaw=0.0, major_extent=max(width, opened),
                          minor_extent=min(width, opened), source="view_fixtures_drawer",
                          support=(float(spot[0]), float(spot[1]), float(lo[2]) + DRAWER_FLOOR))
