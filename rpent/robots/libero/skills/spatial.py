"""Which instance a spatial qualifier means, from back-projected object estimates (world frame, m).

LIBERO's world frame (robosuite): +x points away from the robot base across the table,
+y to the robot's left, z up; the main table's top is centred on the world origin in xy
(robosuite ``TableArena`` at ``table_offset (0, 0, 0.9)``; LIBERO's "table center" region
is around the origin). Rules (xy distances between estimate centres):

* ``between A and B``: the candidate nearest the segment from A to B (ties: nearest its
  midpoint). On libero_spatial_task t0 seed 0 the bowl LIBERO places "between the plate and
  the ramekin" settled 8 cm beyond the ramekin's end of that segment, the other bowl stood
  0.13 m beside its middle: nearest the midpoint picked the wrong one.
* ``next_to A``: the candidate nearest A among those not resting on it (see ``on``).
* ``on A`` / ``in A``: the candidate nearest A in xy among those resting above the table
  (bottom >= ``ELEVATED`` above the lowest candidate bottom); if none is raised, nearest A.
  For ``on``, those whose top stands ``ON_ABOVE`` above A's top come first (and a raised one
  lower than A's top is left out: it is in A, not on it).
* ``left_of`` / ``right_of`` / ``front_of`` / ``behind`` A: the candidate nearest the point
  ``SIDE_OFFSET`` m from A in that direction (-y / +y / -x / +x; see ``left`` below).
* ``center``: the candidate nearest the table centre (0, 0).
* negated ("not between ..."): the first other candidate than the one designated.
* ``left`` / ``right``: smallest / largest y. LIBERO's instructions speak from the agentview
  camera, which faces the robot: "left" is world -y (libero_10 task 4: the BDDL's
  ``plate_left_region`` holds the plate at y = -0.30, the other one is at y = +0.29).
  ``front`` / ``back``: largest / smallest x: the front faces the camera, the back is the
  robot's side (libero_90 ``KITCHEN_SCENE10``: ``butter_front_init_region`` at table x 0,
  ``butter_back_init_region`` at x -0.1; ``KITCHEN_SCENE2``'s front, middle and back bowls at x
  +0.1, -0.05, -0.15; ``KITCHEN_SCENE6``'s ``porcelain_mug_front_region`` 0.1 m to +x of the mug).
* ``middle``: the candidate nearest the mean of all candidates (of three in a row, the one
  between the others; ``KITCHEN_SCENE2``'s middle bowl, ``STUDY_SCENE4``'s middle book).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

from rpent.robots.libero.skills.estimate import ObjectEstimate
from rpent.robots.libero.skills.language import Qualifier

__all__ = ["resolve_qualifier", "TABLE_CENTER_XY", "ELEVATED"]

#: xy (m) of the table centre in the LIBERO world frame (see module docstring).
TABLE_CENTER_XY = (0.0, 0.0)
#: a candidate whose bottom is this much (m) above the lowest candidate bottom rests on something.
ELEVATED = 0.02
#: "on / in X": a raised candidate (resting on something) is preferred over one on the table only
#: when it is not this much (m) farther from X than the nearest candidate. libero_spatial t7 seed 1
#: ("the black bowl on the stove"): the bowl on the stove's burner, 2.5 cm above the table, did
#: not count as raised (bottom seen at 0.90 m), the bowl on the cabinet top did, 0.47 m from the
#: stove against 0.06 m, and was taken.
ON_FARTHER = 0.15
#: "on X": a candidate whose top is this much (m) above X's top rests on it (or one raised
#: off the table whose top is no more than this below X's top).
ON_ABOVE = 0.01
#: distance (m) from a reference at which "left of / right of / in front of / behind" looks for the object.
SIDE_OFFSET = 0.10
_SIDE_DIRS = {"left_of": (0.0, -1.0), "right_of": (0.0, 1.0), "front_of": (1.0, 0.0), "behind": (-1.0, 0.0)}


def _dxy(a: Sequence[float], b: Sequence[float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _to_segment(p: Sequence[float], a: Sequence[float], b: Sequence[float]) -> float:
    """xy distance (m) from ``p`` to the segment from ``a`` to ``b``."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    n = dx * dx + dy * dy
    t = 0.0 if n < 1e-12 else min(1.0, max(0.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / n))
    return _dxy(p, (a[0] + t * dx, a[1] + t * dy))


def resolve_qualifier(qualifier: Qualifier, candidates: Sequence[ObjectEstimate],
                      refs: Mapping[str, ObjectEstimate]) -> int:
    """Index of the candidate the qualifier designates.

    Args:
        qualifier: the parsed qualifier (:class:`~rpent.robots.libero.skills.language.Qualifier`).
        candidates: estimates of the instances of the object (at least one).
        refs: estimates of the qualifier's reference objects, keyed by their phrase.
    Returns:
        index into ``candidates``.
    Raises:
        ValueError: no candidates, an unknown relation, or a reference missing from ``refs``.
    """
    if not candidates:
        raise ValueError("no candidate instances to choose from")
    missing = [r for r in qualifier.refs if r not in refs]
    if missing:
        raise ValueError(f"reference object(s) {missing} not localised")
    if qualifier.negated:
        if len(candidates) == 1:
            return 0
        hit = resolve_qualifier(dataclasses.replace(qualifier, negated=False), candidates, refs)
        others = [i for i in range(len(candidates)) if i != hit]
        return others[0]
    idx = range(len(candidates))
    c = [cand.center for cand in candidates]
    rel = qualifier.relation
    if rel == "between":
        a, b = (refs[r].center for r in qualifier.refs)
        return min(idx, key=lambda i: (_to_segment(c[i], a, b), _dxy(c[i], ((a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0))))
    if rel == "center":
        return min(idx, key=lambda i: _dxy(c[i], TABLE_CENTER_XY))
    if rel == "left":
        return min(idx, key=lambda i: c[i][1])
    if rel == "right":
        return max(idx, key=lambda i: c[i][1])
    if rel == "front":
        return max(idx, key=lambda i: c[i][0])
    if rel == "back":
        return min(idx, key=lambda i: c[i][0])
    if rel == "middle":
        mx, my = sum(p[0] for p in c) / len(c), sum(p[1] for p in c) / len(c)
        return min(idx, key=lambda i: _dxy(c[i], (mx, my)))
    if rel in _SIDE_DIRS:
        ref = refs[qualifier.refs[0]].center
        d = _SIDE_DIRS[rel]
        spot = (ref[0] + SIDE_OFFSET * d[0], ref[1] + SIDE_OFFSET * d[1])
        return min(idx, key=lambda i: _dxy(c[i], spot))
    if rel in ("on", "in", "next_to"):
        ref = refs[qualifier.refs[0]]
        low = min(cand.bottom_z for cand in candidates)
        raised = [i for i in idx if candidates[i].bottom_z >= low + ELEVATED]
        if rel == "next_to":
            pool = [i for i in idx if i not in raised or _dxy(c[i], ref.center) > ref.major_extent / 2.0] or list(idx)
            return min(pool, key=lambda i: _dxy(c[i], ref.center))

        def near(i: int) -> float:  # to the reference's centre or its largest flat surface (a stove's burner)
            d = _dxy(c[i], ref.center)
            return min(d, _dxy(c[i], ref.support)) if ref.support is not None else d

        pool = raised
        if rel == "on":
            # resting on the reference: its top above the reference's top (one raised but lower
            # than the reference's top is inside it: libero_spatial_task t4, a bowl in the open
            # top drawer, 1.3 cm below the cabinet's top, against the one on the cabinet, whose
            # mask the image border cut, so its bottom was seen on the table)
            pool = [i for i in idx if candidates[i].top_z >= ref.top_z + ON_ABOVE
                    or (i in raised and candidates[i].top_z >= ref.top_z - ON_ABOVE)] or raised
        best = min(pool or list(idx), key=near)
        nearest = min(idx, key=near)
        return nearest if near(best) > near(nearest) + ON_FARTHER else best
    raise ValueError(f"unknown spatial relation {rel!r}")
