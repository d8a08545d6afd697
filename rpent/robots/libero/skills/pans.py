"""A pan: a flat, wide, oblong object with a long handle, taken by its round body's rim.

LIBERO's frying pan (``chefmate_8_frypan``, collision geoms): a round body 0.2 m across with a
wall 4.3 cm high and 7 mm thick, and a flat handle bar (1.2 cm thick, 2.5 cm wide) running out
along one axis from 0.127 m to 0.259 m from the body's centre. Seen by the front camera, its
footprint is the body plus part of the handle (the thin bar's far end is often lost: libero_90
t18's footprint ended 7.6 cm short of the tip, its long axis 10 degrees off), and its largest
flat surface (the estimate's ``support``) lies over the body, so the handle is at the other end
of the long axis. A rim grasp on the footprint's centre (which lies toward the handle) came down
on the handle's root and closed on nothing (libero_90 t18 and t40: "grasp came up empty"); the
body's own centre, half the footprint's width in from its far end, is within 1-2 cm (t18, t40)
and a rim grasp there does not depend on the long axis' direction (the body is round).
"""

from __future__ import annotations

import dataclasses
import math

from rpent.robots.libero.skills.estimate import ObjectEstimate

__all__ = ["PAN_MAX_HEIGHT", "PAN_MIN_LENGTH", "PAN_RATIO", "PAN_MIN_SHIFT", "pan_parts"]

#: tallest (m) an object may be to count as a pan (the pan: 4.3-5.5 cm; a moka pot, 13.6 cm, has
#: its own handle rule, :func:`~rpent.robots.libero.skills.grasp.handle_point`)
PAN_MAX_HEIGHT = 0.07
#: shortest footprint (m) and smallest length / width ratio of a pan with its handle (seen 0.27-0.31 m
#: by 0.17-0.19 m; a bowl or a plate is round)
PAN_MIN_LENGTH = 0.22
PAN_RATIO = 1.3
#: smallest offset (m) along the long axis between the largest flat surface and the footprint's
#: centre that tells the handle's end (seen 1.7 and 6.6 cm)
PAN_MIN_SHIFT = 0.01


def pan_parts(obj: ObjectEstimate, min_width: float) -> tuple[ObjectEstimate, ObjectEstimate] | None:
    """``(body, handle)`` estimates of a pan, or None when ``obj`` is not one.

    A pan: at most :data:`PAN_MAX_HEIGHT` tall, at least :data:`PAN_MIN_LENGTH` long and
    :data:`PAN_RATIO` times as long as wide, wider than ``min_width`` (too wide to grip across:
    :attr:`~rpent.robots.libero.skills.grasp.StrategyParams.rim_min_width`), with its ``support``
    :data:`PAN_MIN_SHIFT` or more from the footprint's centre along the long axis (the body's
    side). ``body``: a round footprint as wide as ``obj``, centred half that width in from the
    footprint's end on the body's side, with ``obj``'s top and bottom; ``handle``: the rest of
    the footprint (an obstacle for the rim grasp's fingers).
    """
    if obj.support is None or obj.height > PAN_MAX_HEIGHT or obj.major_extent < PAN_MIN_LENGTH:
        return None
    if obj.minor_extent < min_width or obj.major_extent < PAN_RATIO * obj.minor_extent:
        return None
    ux, uy = math.cos(obj.major_yaw), math.sin(obj.major_yaw)
    d = (obj.support[0] - obj.center[0]) * ux + (obj.support[1] - obj.center[1]) * uy
    if abs(d) < PAN_MIN_SHIFT:
        return None
    sgn = 1.0 if d > 0 else -1.0  # toward the body
    w = obj.minor_extent
    along = sgn * (obj.major_extent / 2.0 - w / 2.0)
    body = dataclasses.replace(obj, center=(obj.center[0] + ux * along, obj.center[1] + uy * along, obj.center[2]),
                               major_extent=w, minor_extent=w, support=None, source=f"{obj.source}+pan body")
    rest = obj.major_extent - w
    h_along = -sgn * (obj.major_extent / 2.0 - rest / 2.0)
    handle = dataclasses.replace(obj, center=(obj.center[0] + ux * h_along, obj.center[1] + uy * h_along, obj.center[2]),
                                 major_extent=max(rest, 0.02), minor_extent=0.025, support=None,
                                 source=f"{obj.source}+pan handle")
    return body, handle
