"""Instruction parsing: LIBERO instructions -> a :class:`TaskPlan` of pick-and-place steps.

Pure text processing (no simulator). Supported forms (case-insensitive; articles ignored):

* "pick (up) the X and place/put it in/into/on/onto (the top of) the Y"
* "put/place/move the X in/into/inside/on/onto/on top of the Y"
* "grab/lift/take the X and put it into Y" (LIBERO-PRO ``_lan`` paraphrases)
* object phrases with a spatial qualifier: "the black bowl between the plate and the
  ramekin", "next to the X", "on the X", "in the top drawer of the X", "from table center",
  "at the front/back/left/right ..." (:class:`Qualifier`, resolved geometrically by
  :mod:`rpent.robots.libero.skills.spatial`)
* target phrases "the left/right X" (which of two instances)
* two objects to one target: "put both the X and the Y in the Z"; "put both X on the Z"
  (two instances: "put both moka pots on the stove")
* two sentences joined by "and": "put the X on the Y and put the Z on the W"

* "push the X to the front/back/left/right of the Y" (:class:`PushGoal`)

* place qualifiers among instances of one kind ("the butter at the back", "the middle black
  bowl", "the book on the right"), possessive sides ("the stove's front"), "stack the X on the
  Y (and place them in the Z)" (:mod:`rpent.robots.libero.skills.qualifiers`)
* "open / close the microwave (door)" (a hinged door, :mod:`rpent.robots.libero.skills.doors`)
* "put the X in the microwave (and close it / and close the door)", "open the microwave and put
  the X inside": a step into a fixture behind a hinged door (:func:`through_door`: carried in
  through the door from the front, :mod:`rpent.robots.libero.skills.cavity`)

Not supported (yield :class:`Unsupported` with the reason): placing under a shelf (from the
side), a compartment other than back / front / left / right.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from rpent.robots.libero.skills.naming import clean_text, strip_articles
from rpent.robots.libero.skills.qualifiers import COMPARTMENT_CONTAINERS, normalise, read_place_qualifier, stack_and_place

__all__ = ["Qualifier", "PickPlaceGoal", "FixtureGoal", "PushGoal", "TaskPlan", "Unsupported", "parse_task", "parse_instruction",
           "parse_object_phrase", "through_door"]

_UNSUPPORTED_VERBS = ("open ", "close ", "turn on", "turn off", "push ", "pull ", "stack ", "slide ")


@dataclass(frozen=True)
class Qualifier:
    """A spatial qualifier that singles out one instance among several.

    Attributes:
        relation: ``"between"`` (two refs), ``"next_to"``, ``"on"``, ``"in"``, ``"left_of"``,
            ``"right_of"``, ``"front_of"``, ``"behind"`` (one ref),
            ``"center"`` (no ref: the table center), ``"left"``, ``"right"``, ``"front"``,
            ``"back"`` (no ref: the extreme instance along that direction, as the agentview
            camera sees the table: the front faces it), ``"middle"`` (no ref: the one between
            the others; :mod:`rpent.robots.libero.skills.qualifiers`).
        refs: reference object phrases, e.g. ``("plate", "ramekin")``.
        text: the qualifier as written.
        negated: the phrase says "not ..." (LIBERO-PRO ``_task``): the instance it does not designate.
    """

    relation: str
    refs: tuple[str, ...] = ()
    text: str = ""
    negated: bool = False  #: "the bowl *not* between ...": any other instance


@dataclass(frozen=True)
class PickPlaceGoal:
    """One pick-and-place step.

    Attributes:
        object_phrase: what to pick, e.g. ``"alphabet soup"``, ``"black bowl"``.
        target_phrase: where to put it, e.g. ``"basket"``.
        relation: ``"in"`` or ``"on"``.
        instruction: the original text.
        object_qualifier: which instance of the object (or None: any / the only one).
        target_qualifier: which instance of the target (or None).
    """

    object_phrase: str
    target_phrase: str
    relation: str
    instruction: str
    object_qualifier: Qualifier | None = None
    target_qualifier: Qualifier | None = None
    target_part: tuple[str, ...] | None = None  #: a drawer of the target fixture, e.g. ("bottom",)
    #: put it on the table beside the target, on this side (``left``, ``right``, ``front``, ``back``;
    #: "to the right of the plate"); ``relation`` is then ``"on"`` (the table)
    target_side: str | None = None
    #: a compartment of the target container (``back``, ``front``, ``left``, ``right``: "in the
    #: back compartment of the caddy"), as the agentview camera sees it
    target_compartment: str | None = None

    def describe(self) -> str:
        """A short English description, e.g. ``"black bowl (next to ramekin) on plate"``."""
        o = self.object_phrase + (f" ({self.object_qualifier.text})" if self.object_qualifier else "")
        t = self.target_phrase + (f" ({self.target_qualifier.text})" if self.target_qualifier else "")
        if self.target_part is not None:
            t = f"{' '.join(self.target_part)} drawer of the {t}".strip()
        if self.target_compartment is not None:
            t = f"{self.target_compartment} compartment of the {t}"
        if self.target_side is not None:
            side = {"front": "in front of", "back": "behind"}.get(self.target_side, f"to the {self.target_side} of")
            return f"{o} {side} {t}"
        return f"{o} {self.relation} {t}"


@dataclass(frozen=True)
class FixtureGoal:
    """One step on an articulated fixture.

    Attributes:
        action: ``"turn_on"``, ``"turn_off"``, ``"open"`` or ``"close"``.
        fixture_phrase: e.g. ``"stove"``, ``"cabinet"``.
        part_words: which part, e.g. ``("top",)`` for the top drawer (empty: the only one).
        instruction: the original text.
    """

    action: str
    fixture_phrase: str
    part_words: tuple[str, ...]
    instruction: str

    def describe(self) -> str:
        """E.g. ``"open the top drawer of the cabinet"``."""
        part = f"{' '.join(self.part_words)} drawer of the " if self.part_words else ""
        return f"{self.action.replace('_', ' ')} the {part}{self.fixture_phrase}"


@dataclass(frozen=True)
class PushGoal:
    """Push an object across the table to one side of a reference ("push the plate to the
    front of the stove"; sides as :data:`rpent.robots.libero.skills.push.PUSH_SIDES`).

    Attributes:
        object_phrase, target_phrase: what to push, and the reference; side: ``front``,
        ``back``, ``left`` or ``right``; instruction: the original text; object_qualifier: which instance.
    """

    object_phrase: str
    target_phrase: str
    side: str
    instruction: str
    object_qualifier: Qualifier | None = None

    def describe(self) -> str:
        """E.g. ``"push the plate to the front of the stove"``."""
        return f"push the {self.object_phrase} to the {self.side} of the {self.target_phrase}"


_PUSH = re.compile(r"^(?:push|slide|shove|nudge)\s+(?P<obj>.+?)\s+(?:to|toward|towards|in front of)\s+(?:the\s+)?"
                   r"(?P<side>front|back|rear|left|right)(?:\s+(?:hand\s+)?side)?\s+of\s+(?P<tgt>.+)$")


def _push_plan(text: str, instruction: str) -> TaskPlan | Unsupported | None:
    """"push the X to the front/back/left/right (side) of the Y" -> one :class:`PushGoal`; None otherwise."""
    m = _PUSH.match(text)
    if m is None:
        return None
    obj, tgt = parse_object_phrase(m.group("obj")), parse_object_phrase(m.group("tgt"))
    for part in (obj, tgt):
        if isinstance(part, Unsupported):
            return Unsupported(part.reason, instruction)
    side = {"rear": "back"}.get(m.group("side"), m.group("side"))
    return TaskPlan((PushGoal(obj[0], tgt[0], side, instruction, obj[1]),), instruction)


@dataclass(frozen=True)
class TaskPlan:
    """The steps of an instruction, run in order; ``instruction`` is the original text.
    A :class:`PickPlaceGoal` whose ``target_part`` is set places into a fixture's part
    (a drawer)."""

    steps: tuple[PickPlaceGoal | FixtureGoal | PushGoal, ...]
    instruction: str


@dataclass(frozen=True)
class Unsupported:
    """An instruction the scripted strategy does not handle, with the reason."""

    reason: str
    instruction: str


_RELATION = r"(?P<rel>in|into|inside|on top of|onto|on)"
_PATTERNS = [
    # pick up the X and place it in the Y
    re.compile(
        r"^(?:pick up|pick|grab|lift|take|get)\s+(?P<obj>.+?)\s+and\s+(?:place|put|drop|set|move)\s+(?:it\s+)?"
        + _RELATION + r"\s+(?P<tgt>.+)$"
    ),
    # put the X in the Y  (the object phrase may itself contain "on"/"in": try the last relation first)
    re.compile(r"^(?:put|place|move|set|drop)\s+(?P<obj>.+)\s+" + _RELATION + r"\s+(?P<tgt>.+)$"),
    re.compile(r"^(?:put|place|move|set|drop)\s+(?P<obj>.+?)\s+" + _RELATION + r"\s+(?P<tgt>.+)$"),
]
_SPATIAL_WORDS = {"under", "below", "above", "beneath", "behind", "left", "right", "front", "back", "near",
                  "between", "beside", "next", "middle", "center", "centre", "corner", "edge"}
_COLOURS = {"yellow", "white", "black", "red", "blue", "green", "brown", "grey", "gray", "pink", "orange", "purple"}
_SIDES = {"left": "left", "right": "right", "front": "front", "back": "back", "rear": "back"}


def parse_object_phrase(phrase: str) -> tuple[str, Qualifier | None] | Unsupported:
    """Split an object phrase into the object's name and an optional spatial qualifier.

    ``"black bowl between the plate and the ramekin"`` -> ``("black bowl", Qualifier("between",
    ("plate", "ramekin")))``; ``"left plate"`` -> ``("plate", Qualifier("left"))``.

    Returns:
        ``(name phrase, qualifier or None)`` or :class:`Unsupported` (an unknown qualifier).
    """
    p = clean_text(phrase)
    neg = re.match(r"^(?P<head>.+?)\s+(?:that is\s+|which is\s+)?not\s+(?P<rest>.+)$", p)
    if neg:
        inner = parse_object_phrase(f"{neg.group('head')} {neg.group('rest')}")
        if isinstance(inner, Unsupported) or inner[1] is None:
            return Unsupported(f"cannot read the negated qualifier in {phrase!r}", phrase)
        q = inner[1]
        return inner[0], Qualifier(q.relation, q.refs, f"not {q.text}", negated=True)
    place = read_place_qualifier(p)  # "the butter at the back", "the middle black bowl", "the book on the right"
    if place is not None:
        return strip_articles(place[0]), Qualifier(place[1], (), place[2])
    m = re.match(r"^(?P<head>.+?)\s+(?:that is\s+|which is\s+)?(?:to the\s+|on the\s+|in\s+)?(?P<side>left|right|front|back)\s+of\s+"
                 r"(?P<rest>.+)$", p) or re.match(r"^(?P<head>.+?)\s+(?P<side>behind)\s+(?P<rest>.+)$", p)
    if m:
        side = {"behind": "behind", "back": "behind", "front": "front_of"}.get(m.group("side"), m.group("side") + "_of")
        return strip_articles(m.group("head")), Qualifier(side, (strip_articles(m.group("rest")),),
                                                          f"{m.group('side')} of {m.group('rest')}")
    m = re.match(r"^(?P<head>.+?)\s+(?:that is\s+|which is\s+)?(?P<q>between|next to|beside|near|on top of|on|in|inside|"
                 r"from|at)\s+(?P<rest>.+)$", p)
    if m:
        head, q, rest = strip_articles(m.group("head")), m.group("q"), m.group("rest")
        if q == "between":
            parts = re.split(r"\s+and\s+", rest)
            if len(parts) != 2:
                return Unsupported(f"cannot read the two references of 'between' in {phrase!r}", phrase)
            return head, Qualifier("between", tuple(strip_articles(x) for x in parts), f"between {rest}")
        if q in ("next to", "beside", "near"):
            return head, Qualifier("next_to", (strip_articles(rest),), f"next to {rest}")
        if q in ("from", "at") and re.search(r"\b(center|centre|middle)\b", rest):
            return head, Qualifier("center", (), "at the table center")
        if "drawer" in rest or "layer" in rest:  # "in/from the top drawer (of the wooden cabinet)"
            fx = re.search(r"\b(?:drawer|layer)\s+of\s+(?P<fx>.+)$", rest)
            ref = strip_articles(fx.group("fx")) if fx and "drawer" not in fx.group("fx") else "cabinet"
            return head, Qualifier("in", (ref,), f"in {rest}")
        if q in ("on", "on top of", "from"):
            return head, Qualifier("on", (strip_articles(re.sub(r"^(?:the\s+)?top\s+of\s+", "", rest)),), f"on {rest}")
        if q in ("in", "inside"):
            # "in the top drawer of the wooden cabinet" -> inside the cabinet
            ref = re.sub(r"^(?:the\s+)?(?:\w+\s+)?(?:drawer|compartment|shelf)\s+of\s+", "", rest)
            return head, Qualifier("in", (strip_articles(ref),), f"in {rest}")
        return Unsupported(f"object phrase {phrase!r} uses a spatial qualifier the scripted planner cannot read", phrase)
    words = strip_articles(p).split()
    if words and words[0] in _SIDES and len(words) > 1:
        return " ".join(words[1:]), Qualifier(_SIDES[words[0]], (), words[0])
    odd = [w for w in words if w in _SPATIAL_WORDS]
    if odd:
        return Unsupported(f"object phrase {phrase!r} uses a spatial qualifier ({' '.join(odd)}) the scripted planner "
                           "cannot read", phrase)
    return strip_articles(p), None


def _single(text: str, instruction: str) -> PickPlaceGoal | Unsupported:
    unread: Unsupported | None = None  # the first split whose phrases could not be read (a later one may be)
    for pattern in _PATTERNS:
        m = pattern.match(text)
        if not m:
            continue
        obj_raw, tgt = m.group("obj"), m.group("tgt").strip()
        if re.match(r"^(?:the\s+)?(?:left|right|front|back)\s+(?:hand\s+)?(?:side\s+)?of\b", tgt):
            return _beside(text, instruction) or Unsupported(
                f"target {tgt!r} is a region next to an object the scripted planner cannot read", instruction)
        rel = "in" if m.group("rel") in ("in", "into", "inside") else "on"
        on_top = re.match(r"^(?:the\s+)?(?:top|top side)\s+of\s+", tgt) is not None or m.group("rel") == "on top of"
        tgt = re.sub(r"^(?:the\s+)?(?:top|top side)\s+of\s+", "", tgt)
        if on_top and strip_articles(tgt) in ("drawer", "drawers"):  # "the top of the drawer": the cabinet's top
            tgt = "cabinet"
        comp = re.match(r"^(?:the\s+)?(?P<side>back|rear|front|left|right)\s+compartment\s+of\s+(?P<c>.+)$", tgt)
        if comp and rel == "in" and not re.search(r"\b(compartment|drawer|region)\b", comp.group("c")):
            parsed_obj, parsed_c = parse_object_phrase(obj_raw), parse_object_phrase(comp.group("c"))
            if isinstance(parsed_obj, Unsupported) or isinstance(parsed_c, Unsupported):
                return Unsupported((parsed_obj if isinstance(parsed_obj, Unsupported) else parsed_c).reason, instruction)
            if parsed_c[1] is None and parsed_obj[0]:
                side = "back" if comp.group("side") == "rear" else comp.group("side")
                return PickPlaceGoal(parsed_obj[0], parsed_c[0], "in", instruction, parsed_obj[1],
                                     target_compartment=side)
        bare = re.match(r"^(?:the\s+)?(?P<side>back|rear|front|left|right)\s+compartment$", tgt)
        if bare and rel == "in":  # "place in back compartment": the compartment of the container kind that has them
            parsed_obj = parse_object_phrase(obj_raw)
            if isinstance(parsed_obj, Unsupported):
                return Unsupported(parsed_obj.reason, instruction)
            return PickPlaceGoal(parsed_obj[0], COMPARTMENT_CONTAINERS[0], "in", instruction, parsed_obj[1],
                                 target_compartment="back" if bare.group("side") == "rear" else bare.group("side"))
        if re.search(r"\b(compartment|drawer|region)\b", tgt):
            return Unsupported(f"target phrase {strip_articles(tgt)!r} names a region or a drawer; the scripted planner "
                               "places in or on objects", instruction)
        parsed_obj, parsed_tgt = parse_object_phrase(obj_raw), parse_object_phrase(tgt)
        bad = next((x for x in (parsed_obj, parsed_tgt) if isinstance(x, Unsupported)), None)
        if bad is not None:  # e.g. the greedy split of "put the bowl at the front on the bowl in the middle"
            unread = unread or Unsupported(bad.reason, instruction)
            continue
        (obj, oq), (tgt_name, tq) = parsed_obj, parsed_tgt
        if rel == "in" and re.fullmatch(_DOOR_FIXTURES, tgt_name) and tq is not None:
            return Unsupported(f"target phrase {tgt!r} uses a qualifier the scripted planner cannot read", instruction)
        if tq is not None and tq.relation not in ("left", "right", "front", "back", "middle"):
            return Unsupported(f"target phrase {tgt!r} uses a qualifier the scripted planner cannot read", instruction)
        if not obj or not tgt_name:
            break
        return PickPlaceGoal(obj, tgt_name, rel, instruction, oq, tq)
    beside = _beside(text, instruction)
    if beside is not None:
        return beside
    if unread is not None:
        return unread
    under = re.search(r"\b(?:under|below|beneath|underneath)\s+(?P<tgt>.+)$", text)
    if under:
        return Unsupported(f"placing under the {strip_articles(under.group('tgt'))} means carrying the object in from "
                           "the side; the scripted planner places from above", instruction)
    return Unsupported("not a pick-and-place instruction ('pick up the X and place it in the Y' / 'put the X on the Y')",
                       instruction)


_BESIDE = re.compile(
    r"^(?:(?:pick up|pick|grab|lift|take|get)\s+(?P<obj1>.+?)\s+and\s+(?:place|put|set|move)\s+(?:it\s+)?|"
    r"(?:put|place|move|set)\s+(?P<obj2>.+?)\s+)"
    r"(?:(?:to|on|at)\s+(?:the\s+)?(?P<side>left|right|front|back|rear)\s+(?:hand\s+)?(?:side\s+)?of|in\s+front\s+of|behind)"
    r"\s+(?P<tgt>.+)$")


def _beside(text: str, instruction: str) -> PickPlaceGoal | Unsupported | None:
    """"put the X to the right of / left of / in front of / behind the Y" -> a step placing X
    on the table beside Y (``target_side``); None when the text is not of that form."""
    m = _BESIDE.match(text)
    if m is None:
        return None
    side = {"rear": "back"}.get(m.group("side"), m.group("side")) or ("front" if " in front of " in f" {text} " else "back")
    obj, tgt = parse_object_phrase(m.group("obj1") or m.group("obj2")), parse_object_phrase(m.group("tgt"))
    for part in (obj, tgt):
        if isinstance(part, Unsupported):
            return Unsupported(part.reason, instruction)
    if tgt[1] is not None and tgt[1].relation not in ("left", "right", "front", "back"):
        return Unsupported(f"target phrase {m.group('tgt')!r} uses a qualifier the scripted planner cannot read", instruction)
    return PickPlaceGoal(obj[0], tgt[0], "on", instruction, obj[1], tgt[1], target_side=side)


_FIXTURE_ACTION = r"(?P<act>open|close|turn on|turn off|switch on|switch off)"
_DRAWER = (r"(?:the\s+)?(?:(?P<fx0>\w+)\s+s\s+)?(?:(?P<part>top|middle|bottom|upper|lower)\s+)?(?:drawer|layer)"
           r"(?:\s+of\s+(?:the\s+)?(?:drawer|cabinet)s?)?(?:\s+of\s+(?P<fx>.+?))?")


#: fixtures whose front is a hinged door (LIBERO's ``microwave``), opened and closed by
#: :mod:`rpent.robots.libero.skills.doors`
_DOOR_FIXTURES = r"microwave|microwave oven|oven"


def through_door(goal: PickPlaceGoal) -> bool:
    """True for a step that places its object *into* a fixture behind a hinged door (the
    microwave): carried in through the door from the front (:mod:`rpent.robots.libero.skills.cavity`),
    not set down from above."""
    return goal.relation == "in" and goal.target_part is None and goal.target_side is None \
        and re.fullmatch(_DOOR_FIXTURES, goal.target_phrase) is not None


def _fixture_step(text: str, instruction: str) -> FixtureGoal | None:
    text = re.sub(r"^(?:slide|pull)\s+open\b", "open", re.sub(r"^(?:push|slide)\s+(?:shut|closed?)\b", "close", text))
    m = re.match(r"^" + _FIXTURE_ACTION + r"\s+" + _DRAWER + r"$", text)
    if m and m.group("act") in ("open", "close"):
        part = {"upper": "top", "lower": "bottom"}.get(m.group("part") or "", m.group("part") or "")
        return FixtureGoal(m.group("act"), strip_articles(m.group("fx") or m.group("fx0") or "cabinet"), (part,) if part else (),
                           instruction)
    m = re.match(r"^(?P<act>open|close|shut)\s+(?:the\s+)?(?:door\s+of\s+(?:the\s+)?)?(?P<fx>" + _DOOR_FIXTURES
                 + r")(?:\s+door)?$", text)
    if m:  # a hinged door: "open the microwave", "close the microwave door"
        return FixtureGoal("close" if m.group("act") in ("close", "shut") else "open", m.group("fx"), (), instruction)
    m = re.match(r"^(?P<act>turn on|turn off|switch on|switch off)\s+(?P<fx>.+)$", text) or \
        re.match(r"^(?:turn|switch)\s+(?P<fx>.+?)\s+(?P<act>on|off)$", text)
    if m and re.search(r"\b(stove|burner|cooktop)\b", m.group("fx")):
        act = "turn_on" if m.group("act").endswith("on") else "turn_off"
        return FixtureGoal(act, "stove", (), instruction)
    return None


def _fixture_plan(text: str, instruction: str) -> TaskPlan | Unsupported | None:
    """Plans with fixture steps; None when the instruction has none."""
    parts = re.split(r"\s+and\s+(?=(?:open|close|shut|turn|switch|slide|put|place|pick)\b)", text)
    into_drawer = r"^(?:put|place|move|set|drop)\s+.+?\s+(?:in|into|inside)\s+" + _DRAWER + r"$"
    if not any(re.match(r"^(?:open|close|shut|turn|switch|slide open|pull open)\b", p) or re.match(into_drawer, p)
               for p in parts):
        return None
    steps: list = []
    last_fixture: FixtureGoal | None = None
    last_target: PickPlaceGoal | None = None
    for p in parts:
        if p in ("close it", "close the drawer", "shut it", "close the door", "close door", "shut the door"):
            if last_target is not None and last_target.target_part is not None:
                steps.append(FixtureGoal("close", last_target.target_phrase, last_target.target_part, instruction))
                continue
            if last_target is not None and re.fullmatch(_DOOR_FIXTURES, last_target.target_phrase):
                steps.append(FixtureGoal("close", last_target.target_phrase, (), instruction))
                continue
            return Unsupported(f"'{p}' refers to a door the scripted planner cannot close (it closes cabinet drawers)",
                               instruction)
        fx = _fixture_step(p, instruction)
        if fx is not None:
            steps.append(fx)
            last_fixture = fx
            continue
        # a placing step; "inside" / "on it" refer to the last fixture
        m = re.match(r"^(?:put|place|move|set|drop)\s+(?P<obj>.+?)\s+(?P<rel>inside|in it|into it|on it|on top of it)$", p)
        if m and last_fixture is not None:
            rel = "on" if "on" in m.group("rel") else "in"
            obj = parse_object_phrase(m.group("obj"))
            if isinstance(obj, Unsupported):
                return Unsupported(obj.reason, instruction)
            door = re.fullmatch(_DOOR_FIXTURES, last_fixture.fixture_phrase) is not None  # through its door
            steps.append(PickPlaceGoal(obj[0], last_fixture.fixture_phrase, rel, instruction, obj[1],
                                       target_part=last_fixture.part_words if last_fixture.action == "open"
                                       and not door else None))
            continue
        m = re.match(r"^(?:put|place|move|set|drop)\s+(?P<obj>.+?)\s+(?:in|into|inside)\s+" + _DRAWER + r"$", p)
        if m:
            part = {"upper": "top", "lower": "bottom"}.get(m.group("part") or "", m.group("part") or "")
            obj = parse_object_phrase(m.group("obj"))
            if isinstance(obj, Unsupported):
                return Unsupported(obj.reason, instruction)
            g = PickPlaceGoal(obj[0], strip_articles(m.group("fx") or "cabinet"), "in", instruction, obj[1],
                              target_part=(part,) if part else ())
            steps.append(g)
            last_target = g
            continue
        g = _single(p, instruction)
        if isinstance(g, Unsupported):
            return g
        steps.append(g)
        last_target = g
    return TaskPlan(tuple(steps), instruction)


def parse_task(instruction: str) -> TaskPlan | Unsupported:
    """Parse an instruction into a :class:`TaskPlan` (one or more pick-and-place steps).

    Args:
        instruction: natural-language task instruction.
    Returns:
        :class:`TaskPlan` (phrases without articles; "the top of the cabinet" -> target
        "cabinet", relation "on") or :class:`Unsupported` with a reason.
    """
    text = normalise(clean_text(instruction))
    if not text:
        return Unsupported("empty instruction", instruction)
    stacked = stack_and_place(text)
    if stacked is not None:  # "stack the X on the Y and place them in the Z": the Y in, then the X on it
        goals = [_single(t, instruction) for t in stacked]
        bad = next((g for g in goals if isinstance(g, Unsupported)), None)
        return bad if bad is not None else TaskPlan(tuple(goals), instruction)
    fixture = _fixture_plan(text, instruction)
    if fixture is not None:
        return fixture
    push = _push_plan(text, instruction)
    if push is not None:
        return push
    for verb in _UNSUPPORTED_VERBS:
        if text.startswith(verb) or f" and {verb}" in f" {text}" or text.endswith(verb.strip() + " it"):
            return Unsupported(f"instruction needs a '{verb.strip()}' skill the scripted planner does not have "
                               "(it does pick-and-place, stove knobs and cabinet drawers)", instruction)
    # "put both the X and the Y in the Z" / "put both X on the Z" (two instances) / "place X and Y into Z"
    m = re.match(r"^(?:put|place|move|pick up|pick)\s+both\s+(?P<objs>.+?)\s+" + _RELATION + r"\s+(?P<tgt>.+)$", text)
    if m is None:
        m2 = re.match(r"^(?:put|place|move)\s+(?P<objs>(?P<a>.+?)\s+and\s+.+?)\s+" + _RELATION + r"\s+(?P<tgt>.+)$", text)
        a_words = strip_articles(m2.group("a")).split() if m2 else []
        if m2 and (len(a_words) > 1 or (a_words and a_words[0] not in _COLOURS)) and " on " not in m2.group("objs") \
                and " in " not in m2.group("objs"):
            m = m2
    if m:
        parts = re.split(r"\s+and\s+", m.group("objs"))
        if len(parts) == 2:
            objs = [strip_articles(x) for x in parts]
        elif len(parts) == 1:  # "both moka pots": two instances of one kind
            name = strip_articles(parts[0])
            name = re.sub(r"s$", "", name) if not name.endswith("ss") else name
            objs = [name, name]
        else:
            return Unsupported("instruction names more than two objects", instruction)
        steps = []
        for o in objs:
            g = _single(f"put {o} {m.group('rel')} {m.group('tgt')}", instruction)
            if isinstance(g, Unsupported):
                return g
            steps.append(g)
        return TaskPlan(tuple(steps), instruction)
    # one verb, the second object beside the first's target: "place white mug on plate and chocolate
    # pudding to right" (LIBERO-PRO libero_10_lan t6): "to (the) right" of that target
    m = re.match(r"^(?:put|place|move|set)\s+(?P<a>.+?\s+(?:on|onto|in|into)\s+.+?)\s+and\s+(?P<b>(?!(?:put|place|move|pick)\b)"
                 r".+?)\s+(?:to|on|at)\s+(?:the\s+)?(?P<side>left|right)(?:\s+side)?$", text)
    if m:
        a = _single("put " + m.group("a"), instruction)
        if not isinstance(a, Unsupported):
            b = _single(f"put {m.group('b')} to the {m.group('side')} of {a.target_phrase}", instruction)
            if not isinstance(b, Unsupported):
                return TaskPlan((a, dataclasses.replace(b, target_qualifier=a.target_qualifier)), instruction)
    # one verb, two placements: "place the X on the left plate and the Y on the right plate"
    m = re.match(r"^(?:put|place|move|set)\s+(?P<a>.+?\s+(?:on|onto|in|into)\s+.+?)\s+and\s+(?P<b>(?!(?:put|place|move|pick)\b)"
                 r".+?\s+(?:on|onto|in|into)\s+.+)$", text)
    if m and not text.startswith(("put both", "place both")) and not re.search(r"\band\s+(?:put|place|move|pick)\b", text):
        a, b = _single("put " + m.group("a"), instruction), _single("put " + m.group("b"), instruction)
        if not isinstance(a, Unsupported) and not isinstance(b, Unsupported):
            return TaskPlan((a, b), instruction)
    # two sentences: "put the X on the Y and put the Z on the W"
    m = re.match(r"^(?P<a>(?:put|place|move|pick).+?)\s+and\s+(?P<b>(?:put|place|move|pick)\s.+)$", text)
    if m and not re.match(r"^(?:pick up|pick|grab|lift|take|get)\s", text):
        a, b = _single(m.group("a"), instruction), _single(m.group("b"), instruction)
        for g in (a, b):
            if isinstance(g, Unsupported):
                return g
        return TaskPlan((a, b), instruction)
    g = _single(text, instruction)
    if isinstance(g, Unsupported):
        return g
    if " and " in g.target_phrase:
        return Unsupported("instruction has more than one step the scripted planner can read", instruction)
    return TaskPlan((g,), instruction)


def parse_instruction(instruction: str) -> PickPlaceGoal | Unsupported:
    """Parse a single-step pick-and-place instruction (see :func:`parse_task` for several steps).

    Returns:
        the only :class:`PickPlaceGoal` of the plan, or :class:`Unsupported` (also for plans
        of several steps, "instruction moves two objects ...", and for fixture steps,
        "instruction needs a 'open' skill on a fixture ...").
    """
    plan = parse_task(instruction)
    if isinstance(plan, Unsupported):
        return plan
    if any(isinstance(g, PushGoal) for g in plan.steps):
        return Unsupported("instruction needs a 'push' skill; parse_task plans it", instruction)
    fixture = next((g for g in plan.steps if isinstance(g, FixtureGoal)), None)
    if fixture is not None:
        return Unsupported(f"instruction needs a '{fixture.action.replace('_', ' ')}' skill on a fixture; "
                           "parse_task plans it", instruction)
    if len(plan.steps) != 1:
        return Unsupported(f"instruction moves two objects in {len(plan.steps)} steps; use parse_task", instruction)
    return plan.steps[0]
