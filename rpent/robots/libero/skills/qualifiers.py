"""Place qualifiers and paraphrases of LIBERO instructions, read before the main grammar.

Pure text processing (no simulator), used by :mod:`rpent.robots.libero.skills.language`:

* :func:`read_place_qualifier`: which instance of an object a phrase means by where it stands
  among its kind, with no reference object: "the butter at the back", "the black bowl at the
  front", "the black bowl on the left", "the book on the right", "the book in the middle",
  "the middle black bowl", "the back black bowl". The resulting
  :class:`~rpent.robots.libero.skills.language.Qualifier` has relation ``front``, ``back``,
  ``left``, ``right`` or ``middle`` and no reference; it is resolved among the instances by
  :func:`rpent.robots.libero.skills.spatial.resolve_qualifier`.
* :func:`normalise`: rewrites paraphrases into the forms the grammar reads: a possessive side
  ("the stove's front" -> "the front of the stove", after :func:`~rpent.robots.libero.skills.naming.clean_text`
  has turned the apostrophe into a space) and "stack the X on the Y" (-> "put the X on the Y").
* :func:`stack_and_place`: "stack the X on the Y and place them in the Z" as its two
  placements, the Y into the Z first, then the X onto the Y (a stack is not carried: the
  bowls nest, and a rim grasp on the lower one would meet the upper one's wall).
* :data:`COMPARTMENT_CONTAINERS`: the container a compartment belongs to when the
  instruction names none ("place in back compartment").
"""

from __future__ import annotations

import re

__all__ = ["PLACE_WORDS", "read_place_qualifier", "normalise", "stack_and_place", "COMPARTMENT_CONTAINERS"]

#: words that name a place among the instances of one kind -> the qualifier's relation
PLACE_WORDS = {"front": "front", "back": "back", "rear": "back", "left": "left", "right": "right",
               "middle": "middle", "center": "middle", "centre": "middle"}
#: the containers with compartments the planner knows (LIBERO's ``desk_caddy``); a compartment
#: named without its container is looked for in the first of these that the scene shows
COMPARTMENT_CONTAINERS = ("caddy",)

_AT_PLACE = re.compile(r"^(?P<head>.+?)\s+(?:that is\s+|which is\s+)?(?:at|on|in|to)\s+(?:the\s+)?"
                       r"(?P<place>front|back|rear|left|right|middle|center|centre)"
                       r"(?:\s+(?:side|one|end|hand side))?$")


def read_place_qualifier(phrase: str) -> tuple[str, str, str] | None:
    """``(head, relation, text)`` of an object phrase qualified by its place among its kind, or
    None when the phrase has no such qualifier.

    ``"butter at the back"`` -> ``("butter", "back", "at the back")``; ``"book in the middle"``
    -> ``("book", "middle", "in the middle")``; ``"middle black bowl"`` -> ``("black bowl",
    "middle", "middle")``. The phrase is already cleaned (lower case, no punctuation); the
    head keeps its articles (the caller strips them).
    """
    m = _AT_PLACE.match(phrase)
    if m and m.group("head").strip() not in ("", "the"):
        return m.group("head"), PLACE_WORDS[m.group("place")], phrase[len(m.group("head")):].strip()
    words = phrase.split()
    if words and words[0] == "the":
        words = words[1:]
    if len(words) > 1 and words[0] in ("middle", "center", "centre"):
        return " ".join(words[1:]), "middle", words[0]
    return None


_POSSESSIVE_SIDE = re.compile(r"\b(?:the\s+)?(?P<owner>[a-z]+(?:\s+[a-z]+)?)\s+s\s+(?P<side>front|back|rear|left|right)"
                              r"(?:\s+side)?\b")
_STACK = re.compile(r"^stack\s+(?P<rest>.+\s+on(?:\s+top\s+of)?\s+.+)$")


def normalise(text: str) -> str:
    """Rewrite paraphrases of a cleaned instruction into the grammar's forms (see module doc).

    ``"move the plate to the stove s front"`` -> ``"move the plate to the front of the stove"``;
    ``"stack the middle black bowl on the back black bowl"`` -> ``"put the middle black bowl
    on the back black bowl"``. Other text is returned unchanged.
    """
    text = _POSSESSIVE_SIDE.sub(lambda m: f"the {m.group('side')} of the {m.group('owner')}", text)
    m = _STACK.match(text)
    if m and not re.search(r"\s+and\s+(?:place|put|move|set)\s+(?:them|both|the stack)\b", text):
        return "put " + m.group("rest")
    return text


_STACK_AND_PLACE = re.compile(r"^stack\s+(?P<top>.+?)\s+on(?:\s+top\s+of)?\s+(?P<bottom>.+?)\s+and\s+"
                              r"(?:place|put|move|set)\s+(?:them|both|both of them|the stack)\s+"
                              r"(?P<rel>in|into|inside|on|onto|on top of)\s+(?P<tgt>.+)$")


def stack_and_place(text: str) -> tuple[str, str] | None:
    """The two placements of "stack the X on the Y and place them in the Z", as instructions
    the grammar reads: ``("put the Y in the Z", "put the X on the Y")``; None for other text."""
    m = _STACK_AND_PLACE.match(text)
    if m is None:
        return None
    return (f"put {m.group('bottom')} {m.group('rel')} {m.group('tgt')}", f"put {m.group('top')} on {m.group('bottom')}")
