"""Scripted pick-and-place for LIBERO instructions: parse, name matching, object estimates, motion plan.

Pure logic over :mod:`rpent.robots.libero.control` loops; imports no simulator. The offline
(``scripted``) planner uses it through the toolkit: it finds objects with ``segment`` +
``back_project`` (or, as a simulator oracle, ``object_bbox``), builds :class:`ObjectEstimate`
values, and runs :func:`pick_and_place` with a ``step_fn`` that steps the environment.

Supported instruction kinds (case-insensitive; articles ignored):

* "pick (up) the X and place/put it in/into/on/onto (the top of) the Y"
* "put/place/move the X in/into/inside/on/onto/on top of the Y"
* "grab/lift/take the X and put it into Y" (LIBERO-PRO ``_lan`` paraphrases)

Anything else (two objects, "open ...", "turn on ...", "push ...", "... and close it",
spatial qualifiers the planner cannot resolve) yields :class:`Unsupported` with a reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from rpent.robots.libero import control

__all__ = [
    "PickPlaceGoal",
    "Unsupported",
    "parse_instruction",
    "name_tokens",
    "phrase_tokens",
    "match_object_names",
    "erode_mask",
    "segment_by_name",
    "dilate_mask",
    "support_height",
    "ObjectEstimate",
    "refine_estimate",
    "StrategyParams",
    "plan_grasp",
    "xy_waypoints",
    "pick_and_place",
    "Executor",
    "InProcessExecutor",
]

_ARTICLES = {"the", "a", "an", "of", "some"}
#: Words in object names that instructions often omit or say differently (token -> spoken forms).
_SYNONYMS = {
    "mug": {"cup", "mug"},
    "cup": {"cup", "mug"},
    "frypan": {"pan", "frypan", "skillet"},
    "bowl": {"bowl"},
    "cookies": {"cookie", "cookies"},
    "cookie": {"cookie", "cookies"},
}
_UNSUPPORTED_VERBS = ("open ", "close ", "turn on", "turn off", "push ", "pull ", "stack ", "slide ")


@dataclass(frozen=True)
class PickPlaceGoal:
    """A parsed pick-and-place instruction.

    Attributes:
        object_phrase: what to pick, e.g. ``"alphabet soup"``.
        target_phrase: where to put it, e.g. ``"basket"``.
        relation: ``"in"`` or ``"on"``.
        instruction: the original text.
    """

    object_phrase: str
    target_phrase: str
    relation: str
    instruction: str


@dataclass(frozen=True)
class Unsupported:
    """An instruction the scripted strategy does not handle, with the reason."""

    reason: str
    instruction: str


def _clean(text: str) -> str:
    text = text.lower().strip().rstrip(".!")
    text = re.sub(r"[^a-z0-9 ]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _strip_articles(phrase: str) -> str:
    return " ".join(w for w in phrase.split() if w not in _ARTICLES).strip()


_RELATION = r"(?P<rel>in|into|inside|on top of|onto|on)"
_PATTERNS = [
    # pick up the X and place it in the Y
    re.compile(
        r"^(?:pick up|pick|grab|lift|take|get)\s+(?P<obj>.+?)\s+and\s+(?:place|put|drop|set|move)\s+(?:it\s+)?"
        + _RELATION + r"\s+(?P<tgt>.+)$"
    ),
    # put the X in the Y
    re.compile(r"^(?:put|place|move|set|drop)\s+(?P<obj>.+?)\s+" + _RELATION + r"\s+(?P<tgt>.+)$"),
]


def parse_instruction(instruction: str) -> PickPlaceGoal | Unsupported:
    """Parse a LIBERO instruction into a pick-and-place goal.

    Args:
        instruction: natural-language task instruction.
    Returns:
        :class:`PickPlaceGoal` (phrases without articles; "the top of the cabinet" ->
        target "cabinet", relation "on") or :class:`Unsupported` with a reason.
    """
    text = _clean(instruction)
    if not text:
        return Unsupported("empty instruction", instruction)
    for verb in _UNSUPPORTED_VERBS:
        if text.startswith(verb) or f" and {verb}" in f" {text}" or text.endswith(verb.strip() + " it"):
            return Unsupported(
                f"instruction needs a '{verb.strip()}' skill; the scripted strategy only does single-object pick-and-place",
                instruction,
            )
    if text.startswith("put both") or " both " in f" {text} ":
        return Unsupported("instruction moves two objects; the scripted strategy moves one", instruction)
    for pattern in _PATTERNS:
        m = pattern.match(text)
        if not m:
            continue
        obj = _strip_articles(m.group("obj"))
        tgt = m.group("tgt")
        if re.search(r"\b(between|next to|left|right|front|back|behind|middle|center|from|on|in|inside|at|near)\b", obj):
            return Unsupported(
                f"object phrase {obj!r} uses a spatial qualifier; the scripted strategy cannot disambiguate it",
                instruction,
            )
        if " and " in tgt or " and " in obj:
            return Unsupported("instruction has more than one step; the scripted strategy does one pick-and-place", instruction)
        rel = "in" if m.group("rel") in ("in", "into", "inside") else "on"
        tgt = re.sub(r"^(?:the\s+)?top\s+of\s+", "", tgt.strip())
        tgt = re.sub(r"^(?:the\s+)?(?:top|top side)\s+of\s+", "", tgt)
        if m.group("rel") == "on top of":
            rel = "on"
        tgt = _strip_articles(tgt)
        if not obj or not tgt:
            break
        if re.search(r"\b(left|right|front|behind|back|compartment|drawer|region)\b", tgt):
            return Unsupported(f"target phrase {tgt!r} names a region or uses a spatial qualifier", instruction)
        return PickPlaceGoal(obj, tgt, rel, instruction)
    return Unsupported(
        "not a pick-and-place instruction ('pick up the X and place it in the Y' / 'put the X on the Y')",
        instruction,
    )


# ---------------------------------------------------------------------- name matching
def name_tokens(name: str) -> tuple[str, ...]:
    """Tokens of a simulator object name: split on ``_``, lower-case, drop the trailing instance number.

    ``"alphabet_soup_1"`` -> ``("alphabet", "soup")``; ``"akita_black_bowl_2"`` ->
    ``("akita", "black", "bowl")``.
    """
    parts = [p for p in name.lower().split("_") if p]
    while parts and parts[-1].isdigit():
        parts.pop()
    return tuple(parts)


def phrase_tokens(phrase: str) -> tuple[str, ...]:
    """Tokens of a prompt: lower-case alphanumeric words without articles."""
    return tuple(w for w in _clean(phrase).split() if w not in _ARTICLES)


def _token_hit(word: str, tokens: tuple[str, ...]) -> bool:
    for t in tokens:
        forms = _SYNONYMS.get(t, {t})
        if word in forms or word.rstrip("s") in forms or (word + "s") in forms:
            return True
    return False


def match_object_names(prompt: str, names: list[str] | tuple[str, ...]) -> list[str]:
    """Object names that best match a text prompt.

    Matching rule: the prompt and each name are tokenised (:func:`phrase_tokens`,
    :func:`name_tokens`; plurals and a few synonyms such as cup/mug match). A name qualifies
    only if the name's last token (its head noun, e.g. ``bowl`` in ``akita_black_bowl``)
    appears in the prompt. Its score is ``(number of prompt words found in the name, 1 if the
    prompt's last word is the name's head noun else 0, -number of name tokens not in the
    prompt)``, compared lexicographically ("soup bowl" -> the bowl, "cream cheese box" ->
    ``cream_cheese_1``). All names with
    the best score are returned (several when instances are indistinguishable, e.g. two
    ``akita_black_bowl``), in the given order. ``"robot"`` is never matched.

    Args:
        prompt: e.g. ``"alphabet soup"`` or ``"the black bowl"``.
        names: candidate names, e.g. from a segmentation id table.
    Returns:
        list of best-matching names (empty when nothing matches).
    """
    words = phrase_tokens(prompt)
    if not words:
        return []
    best: tuple[int, int, int] | None = None
    hits: list[str] = []
    for name in names:
        if name == "robot":
            continue
        toks = name_tokens(name)
        if not toks:
            continue
        common = sum(1 for w in words if _token_hit(w, toks))
        head_ok = any(_token_hit(w, (toks[-1],)) for w in words)
        if common == 0 or not head_ok:
            continue
        extra = sum(1 for t in toks if not any(_token_hit(w, (t,)) for w in words))
        last_is_head = int(_token_hit(words[-1], (toks[-1],)))
        score = (common, last_is_head, -extra)
        if best is None or score > best:
            best, hits = score, [name]
        elif score == best:
            hits.append(name)
    return hits


def erode_mask(mask: np.ndarray) -> np.ndarray:
    """One-pixel erosion (4-neighbourhood) of a bool (H, W) mask; image borders count as outside."""
    m = np.asarray(mask, dtype=bool)
    out = m.copy()
    out[1:, :] &= m[:-1, :]
    out[:-1, :] &= m[1:, :]
    out[:, 1:] &= m[:, :-1]
    out[:, :-1] &= m[:, 1:]
    out[0, :] = out[-1, :] = False
    out[:, 0] = out[:, -1] = False
    return out


def segment_by_name(
    prompt: str, seg: np.ndarray, id_table: Mapping[int, str], erode: bool = True, min_pixels: int = 10
) -> tuple[np.ndarray, list[str]]:
    """Simulator-oracle segmentation from a text prompt.

    Args:
        prompt: object description, e.g. ``"alphabet soup"``.
        seg: int (H, W) instance-id image (``render_camera(..., segmentation=True)``).
        id_table: ``{instance id: object name}`` (``segmentation_ids``; keys may be str after JSON).
        erode: drop the mask's one-pixel boundary (kept only if at least ``min_pixels``
            remain). Boundary pixels are unreliable for back-projection: the id render is
            multisampled and made in a separate pass from depth, so edge pixels can carry the
            depth of the neighbouring object (seen as 10+ cm outliers at 256 px).
        min_pixels: see ``erode``.
    Returns:
        ``(mask, names)``: bool (H, W) union of the pixels of every best-matching instance
        (:func:`match_object_names`), and those names. The mask is all False when nothing
        matches or the objects are not visible.
    """
    table = {int(k): str(v) for k, v in id_table.items()}
    names = match_object_names(prompt, list(table.values()))
    ids = [i for i, n in table.items() if n in names]
    mask = np.isin(np.asarray(seg), ids) if ids else np.zeros(np.shape(seg), dtype=bool)
    if erode and mask.any():
        inner = erode_mask(mask)
        if int(inner.sum()) >= min_pixels:
            mask = inner
    return mask, names


def dilate_mask(mask: np.ndarray, pixels: int) -> np.ndarray:
    """Dilate a bool (H, W) mask by ``pixels`` (square neighbourhood, via shifts)."""
    out = np.asarray(mask, dtype=bool).copy()
    for _ in range(max(0, int(pixels))):
        grown = out.copy()
        grown[1:, :] |= out[:-1, :]
        grown[:-1, :] |= out[1:, :]
        grown[:, 1:] |= out[:, :-1]
        grown[:, :-1] |= out[:, 1:]
        out = grown
    return out


def support_height(mask: np.ndarray, world: np.ndarray, seg: np.ndarray | None = None, ring_px: int = 6) -> float | None:
    """Height (m) of the surface an object rests on, from the pixels around its mask.

    Takes a ring of ``ring_px`` pixels around the mask; with an instance image ``seg`` only
    background pixels (id 0: table/floor) of the ring count and their median z is returned;
    without it (e.g. a SAM3 mask) the 20th percentile z of the ring (neighbouring objects
    are higher than the table, so a low percentile picks the table).

    Args:
        mask: bool (H, W) object mask; world: (H, W, 3) world map (m); seg: optional ids.
    Returns:
        z in meters, or None when fewer than 10 ring pixels qualify.
    """
    m = np.asarray(mask, dtype=bool)
    ring = dilate_mask(m, ring_px) & ~dilate_mask(m, 1)
    if seg is not None:
        ring &= np.asarray(seg) == 0
    z = np.asarray(world)[..., 2][ring]
    z = z[np.isfinite(z)]
    if len(z) < 10:
        return None
    return float(np.median(z)) if seg is not None else float(np.percentile(z, 20))


# ---------------------------------------------------------------------- object estimates
@dataclass(frozen=True)
class ObjectEstimate:
    """What the strategy needs to know about an object (world frame, meters, radians).

    Attributes:
        center: (3,) center of the object (xy used for grasping/placing).
        top_z: highest point.
        bottom_z: lowest point (resting surface).
        major_yaw: direction of the longer horizontal axis, rad in [-pi/2, pi/2).
        major_extent, minor_extent: full horizontal sizes along/across ``major_yaw`` (m).
        source: where it came from (``"oracle_bbox"``, ``"points"``).
        ridge_yaw: direction (rad, [-pi/2, pi/2)) of a ridge forming the object's top (the
            gable of a milk / juice carton), or None. A parallel gripper must close *along* a
            ridge: closing across it squeezes the sloped roof and the carton slips out.
    """

    center: tuple[float, float, float]
    top_z: float
    bottom_z: float
    major_yaw: float = 0.0
    major_extent: float = 0.0
    minor_extent: float = 0.0
    source: str = "unknown"
    ridge_yaw: float | None = None

    @property
    def height(self) -> float:
        """``top_z - bottom_z`` (m)."""
        return self.top_z - self.bottom_z

    @classmethod
    def from_box(cls, center: Any, axes: Any, half_extents: Any, source: str = "oracle_bbox") -> "ObjectEstimate":
        """From an oriented box (e.g. ``LiberoSim.object_bbox``).

        Args:
            center: (3,) world center; axes: (3, 3) box axes as columns (world);
            half_extents: (3,) half sizes along the axes (m).
        """
        c = np.asarray(center, dtype=np.float64).reshape(3)
        ax = np.asarray(axes, dtype=np.float64).reshape(3, 3)
        he = np.asarray(half_extents, dtype=np.float64).reshape(3)
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
        corners = c + (signs * he) @ ax.T
        # horizontal footprint: the two box axes closest to horizontal
        horiz = sorted(range(3), key=lambda i: abs(ax[2, i]))[:2]
        spans = []
        for i in horiz:
            v = ax[:2, i]
            n = float(np.linalg.norm(v))
            spans.append((2.0 * he[i] * n, math.atan2(v[1], v[0]) if n > 1e-9 else 0.0))
        spans.sort(reverse=True)
        return cls(
            center=tuple(float(x) for x in c),
            top_z=float(corners[:, 2].max()),
            bottom_z=float(corners[:, 2].min()),
            major_yaw=_half_turn(spans[0][1]),
            major_extent=float(spans[0][0]),
            minor_extent=float(spans[1][0]),
            source=source,
        )

    @classmethod
    def from_points(cls, points: Any, floor_z: float | None = None, source: str = "points") -> "ObjectEstimate":
        """From world points on the object (e.g. a segmentation mask back-projected).

        ``top_z`` is the 98th percentile of z; ``bottom_z`` is ``floor_z`` when given (a
        camera sees no bottom), else the 2nd percentile. The footprint (xy center, principal
        axes, extents) comes from the *top band* (points with ``z >= top_z - max(0.015 m,
        25% of the height)``, when at least 10): a camera looking from the front sees the
        front faces of tall objects, whose centroid sits ~1.5 cm in front of the true center,
        while the top band (lid, cap, gable, rim) is centered. The xy center is the midpoint
        of the 5th-95th percentile range along the principal axes (robust to stray pixels).

        Args:
            points: (N, 3) world points (m), N >= 10; non-finite rows are dropped.
            floor_z: z of the supporting surface, if known.
        Raises:
            ValueError: fewer than 10 finite points.
        """
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        p = p[np.all(np.isfinite(p), axis=1)]
        if len(p) < 10:
            raise ValueError(f"need at least 10 valid world points to estimate an object, got {len(p)}")
        top = float(np.percentile(p[:, 2], 98))
        bottom = float(floor_z) if floor_z is not None else float(np.percentile(p[:, 2], 2))
        band = p[p[:, 2] >= top - max(0.015, 0.25 * (top - bottom))]
        xy = (band if len(band) >= 10 else p)[:, :2]
        mean = xy.mean(axis=0)
        cov = np.cov((xy - mean).T)
        evals, evecs = np.linalg.eigh(cov)
        major = evecs[:, int(np.argmax(evals))]
        minor = np.array([-major[1], major[0]])
        a = (xy - mean) @ major
        b = (xy - mean) @ minor
        a_lo, a_hi = np.percentile(a, [5, 95])
        b_lo, b_hi = np.percentile(b, [5, 95])
        cxy = mean + major * (a_lo + a_hi) / 2.0 + minor * (b_lo + b_hi) / 2.0
        return cls(
            center=(float(cxy[0]), float(cxy[1]), (top + bottom) / 2.0),
            top_z=top,
            bottom_z=bottom,
            major_yaw=_half_turn(math.atan2(major[1], major[0])),
            major_extent=float(a_hi - a_lo),
            minor_extent=float(b_hi - b_lo),
            source=source,
            ridge_yaw=_ridge_yaw(p, top),
        )


def refine_estimate(coarse: ObjectEstimate, closer: ObjectEstimate) -> ObjectEstimate:
    """Combine a coarse estimate with a closer look from above (e.g. the wrist camera).

    The footprint (center xy, yaw, extents) and ``top_z`` come from ``closer`` (a top view
    sees the top face centered); ``bottom_z`` stays the coarse one (a top view sees no bottom).
    """
    return ObjectEstimate(
        center=(closer.center[0], closer.center[1], (closer.top_z + coarse.bottom_z) / 2.0),
        top_z=closer.top_z,
        bottom_z=coarse.bottom_z,
        major_yaw=closer.major_yaw,
        major_extent=closer.major_extent,
        minor_extent=closer.minor_extent,
        source=f"{coarse.source}+{closer.source}",
        ridge_yaw=closer.ridge_yaw,
    )


def _principal_axes(xy: np.ndarray) -> tuple[float, float, float]:
    """(major direction rad, 5-95 percentile extent along it, across it) of 2-D points."""
    mean = xy.mean(axis=0)
    evals, evecs = np.linalg.eigh(np.cov((xy - mean).T))
    major = evecs[:, int(np.argmax(evals))]
    minor = np.array([-major[1], major[0]])
    a = np.percentile((xy - mean) @ major, [5, 95])
    b = np.percentile((xy - mean) @ minor, [5, 95])
    return math.atan2(major[1], major[0]), float(a[1] - a[0]), float(b[1] - b[0])


def _ridge_yaw(points: np.ndarray, top: float, band: float = 0.01) -> float | None:
    """Direction of a ridge-shaped top: points within ``band`` of the top form a thin line.

    A line means: at least 10 points, across-extent < 12 mm, along-extent > 3x across and
    <= 0.075 m (the gripper must fit along it). Measured on the wrist view of the LIBERO
    milk and orange-juice cartons: 0.044 m x 0.002 m; flat tops (butter, cream cheese,
    pudding) and caps/cans give ratios near 1-2 with across-extents > 2 cm.
    """
    q = points[points[:, 2] >= top - band]
    if len(q) < 10:
        return None
    angle, along, across = _principal_axes(q[:, :2])
    if across < 0.012 and along > 3.0 * across and along <= 0.075:
        return _half_turn(angle)
    return None


def _half_turn(angle: float) -> float:
    """Wrap to [-pi/2, pi/2) (a parallel gripper is symmetric under a half turn)."""
    return float((angle + math.pi / 2) % math.pi - math.pi / 2)


# ---------------------------------------------------------------------- plan
@dataclass(frozen=True)
class StrategyParams:
    """Tunable heights and gains of :func:`pick_and_place` (meters, radians, env steps).

    The Panda finger pads reach ~0.013 m below the eef point (``robot0_eef_pos``, the grip
    site) and the palm starts ~0.023 m above it (measured from the gripper geoms).
    """

    approach_clearance: float = 0.08  #: eef above the object top before descending
    grasp_depth: float = 0.025  #: eef below the object top for tall objects
    min_grasp_height: float = 0.012  #: eef above the object bottom (fingertips clear the table)
    carry_clearance: float = 0.06  #: object bottom above the target top while carrying
    min_carry_z: float = 0.25  #: lowest eef height for transport moves
    release_clearance_in: float = 0.03  #: object bottom above the container rim at release
    release_clearance_on: float = 0.015  #: object bottom above the support top at release
    retreat_height: float = 0.10  #: eef rise after releasing
    close_steps: int = 15  #: env steps to close the gripper
    grasped_min_opening: float = 0.004  #: opening (m) below which the grasp is considered empty
    max_xy_travel: float = 0.25  #: per move_to (the hard limit is 0.30 m, RPent reference §9)
    round_ratio: float = 1.25  #: major/minor extent ratio below which the yaw is left as is


def plan_grasp(obj: ObjectEstimate, current_yaw: float, params: StrategyParams = StrategyParams()) -> dict:
    """Grasp pose for an object.

    Fingers close along the gripper's y axis, i.e. along world y at yaw 0 (measured: at yaw
    0 the finger tips sit at y = +/-0.047 m of the eef). To close across the object's narrow
    side the yaw equals the major-axis direction (mod pi); for a ridge-topped object the
    fingers close along the ridge (yaw = ridge direction - pi/2). The yaw is folded to the
    equivalent angle nearest ``current_yaw``. Nearly round footprints keep the current yaw.

    Returns:
        ``{"xyz": [x, y, z_grasp], "approach_z": float, "yaw": float}`` (m, rad).
    """
    height = obj.height
    grasp_z = max(obj.bottom_z + params.min_grasp_height, obj.top_z - min(params.grasp_depth, height / 2.0))
    yaw = current_yaw
    if obj.ridge_yaw is not None or (obj.minor_extent > 1e-6 and obj.major_extent / obj.minor_extent >= params.round_ratio):
        yaw = obj.ridge_yaw - math.pi / 2 if obj.ridge_yaw is not None else obj.major_yaw
        while yaw - current_yaw > math.pi / 2:
            yaw -= math.pi
        while yaw - current_yaw < -math.pi / 2:
            yaw += math.pi
    return {
        "xyz": [obj.center[0], obj.center[1], grasp_z],
        "approach_z": obj.top_z + params.approach_clearance,
        "yaw": yaw,
    }


def xy_waypoints(start: Any, goal: Any, max_xy: float) -> list[np.ndarray]:
    """Split a move into waypoints whose xy steps are at most ``max_xy`` (m).

    Args:
        start, goal: (3,) world points; z is interpolated linearly.
    Returns:
        waypoints after ``start``, ending with ``goal``.
    """
    s = np.asarray(start, dtype=np.float64)
    g = np.asarray(goal, dtype=np.float64)
    dist = float(np.linalg.norm(g[:2] - s[:2]))
    n = max(1, int(math.ceil(dist / max_xy)))
    return [s + (g - s) * (i / n) for i in range(1, n + 1)]


class Executor(Protocol):
    """Runs motion primitives by tool name for :func:`pick_and_place`.

    ``run(tool, args) -> result dict`` with the toolkit's tool names and arguments
    (``move_to``, ``rotate_wrist``, ``set_gripper``, ``release``; RPent reference §3.3; an
    ``"error"`` key marks a failed or cancelled call) and ``current_state() -> state dict``
    (``robot0_eef_pos``, ``robot0_eef_quat`` xyzw, ``robot0_gripper_qpos``, ``terminated``,
    ``truncated``, ``success``). The offline planner's executor makes toolkit calls
    (:mod:`rpent.planners.scripted`); :class:`InProcessExecutor` runs the control loops.
    """

    def run(self, tool: str, args: dict) -> dict: ...

    def current_state(self) -> Mapping[str, Any]: ...


class InProcessExecutor:
    """:class:`Executor` over the :mod:`rpent.robots.libero.control` loops and a ``step_fn``.

    Args:
        step_fn: ``step_fn(action[7]) -> step result`` (e.g. ``LiberoSim.step``).
        state: the current state.
        cancelled: checked between env steps.
    """

    _LOOPS = {"move_to": control.move_to, "move_pose": control.move_pose, "rotate_wrist": control.rotate_wrist,
              "rotate_pitch": control.rotate_pitch, "set_gripper": control.set_gripper, "release": control.release}

    def __init__(self, step_fn: Callable[[np.ndarray], Mapping[str, Any]], state: Mapping[str, Any],
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        self.tracker = control.StateTracker(step_fn, state)
        self.cancelled = cancelled

    def run(self, tool: str, args: dict) -> dict:
        """Run loop ``tool`` with ``args`` on the tracked state."""
        return self._LOOPS[tool](self.tracker.step, self.tracker.state, cancelled=self.cancelled, **args)

    def current_state(self) -> Mapping[str, Any]:
        """The latest state."""
        return self.tracker.state

    @property
    def steps(self) -> int:
        """Env steps taken through this executor."""
        return self.tracker.steps


def pick_and_place(
    ex: Executor,
    obj: ObjectEstimate,
    target: ObjectEstimate,
    relation: str,
    params: StrategyParams = StrategyParams(),
    relocate: Callable[[Mapping[str, Any]], ObjectEstimate | None] | None = None,
) -> dict:
    """Run approach / (relocate) / descend / close / lift / transport / lower / release / retreat.

    Args:
        ex: the :class:`Executor` (toolkit calls, or :class:`InProcessExecutor`).
        obj: the object to pick; target: the container/support.
        relation: ``"in"`` or ``"on"``.
        params: heights and gains.
        relocate: optional ``relocate(state) -> ObjectEstimate | None`` called once while the
            gripper hovers above the object (e.g. segment + back-project the wrist camera);
            its estimate is merged with :func:`refine_estimate` and the grasp re-planned.
            A first estimate from the front camera is ~1.5 cm off for tall objects; a look
            from above is within a few mm.
    Returns:
        ``{"success": bool (the env's predicate as last reported), "stage": last stage,
        "env_steps": int | None (steps taken, when the executor counts them), "phases":
        [{"phase", "tool", **primitive result}], "reason"?: str}``. Stops early when the
        episode ends (success or truncation), when a primitive fails or is cancelled, or when
        the grasp comes up empty (``reason`` says which).
    Raises:
        ValueError: unknown relation.
    """
    if relation not in ("in", "on"):
        raise ValueError(f"relation must be 'in' or 'on', got {relation!r}")
    phases: list[dict] = []

    def over() -> bool:
        return control.episode_over(ex.current_state())

    def run(phase: str, tool: str, **args: Any) -> dict:
        result = ex.run(tool, args)
        phases.append({"phase": phase, "tool": tool,
                       **{k: v for k, v in result.items() if k not in ("_images", "state_after")}})
        return result

    def finish(stage: str, reason: str | None = None) -> dict:
        s = ex.current_state()
        out = {
            "success": bool(s.get("success", s.get("terminated", False))),
            "stage": stage,
            "env_steps": getattr(ex, "steps", None),
            "phases": phases,
        }
        if reason:
            out["reason"] = reason
        return out

    def travel(phase: str, goal: Any, gripper: float, yaw: float | None = None, **kw: Any) -> bool:
        pos = control.robot_state(ex.current_state())["eef_pos"]
        for wp in xy_waypoints(pos, goal, params.max_xy_travel):
            args = {"xyz": [float(v) for v in wp], "gripper": gripper, **kw}
            if yaw is not None:
                args["target_yaw"] = float(yaw)
            r = run(phase, "move_to", **args)
            if "error" in r or over():
                return False
        return True

    s0 = control.robot_state(ex.current_state())
    grasp = plan_grasp(obj, control.eef_yaw(s0["eef_quat"]), params)
    gx, gy, gz = (float(v) for v in grasp["xyz"])
    hang = gz - obj.bottom_z  # object bottom below the eef while carried
    carry_z = max(params.min_carry_z, target.top_z + hang + params.carry_clearance, grasp["approach_z"])

    # 1. rise to the travel height if low, cross above the object at that height (clears
    #    neighbouring tall objects), then come down vertically to the approach height
    travel_z = max(params.min_carry_z, grasp["approach_z"])
    if s0["eef_pos"][2] < travel_z - 0.02:
        if not travel("rise", [s0["eef_pos"][0], s0["eef_pos"][1], travel_z], control.GRIPPER_OPEN):
            return finish("rise", _why(ex.current_state(), phases))
    if not travel("approach", [gx, gy, travel_z], control.GRIPPER_OPEN, yaw=grasp["yaw"], max_steps=120):
        return finish("approach", _why(ex.current_state(), phases))
    if travel_z - grasp["approach_z"] > 0.01:
        r = run("approach", "move_to", xyz=[gx, gy, float(grasp["approach_z"])], gripper=control.GRIPPER_OPEN,
                target_yaw=float(grasp["yaw"]), max_steps=80)
        if "error" in r or over():
            return finish("approach", _why(ex.current_state(), phases))
    if relocate is not None:
        closer = relocate(ex.current_state())
        if closer is not None:
            obj = refine_estimate(obj, closer)
            grasp = plan_grasp(obj, control.eef_yaw(control.robot_state(ex.current_state())["eef_quat"]), params)
            gx, gy, gz = (float(v) for v in grasp["xyz"])
            hang = gz - obj.bottom_z
            carry_z = max(params.min_carry_z, target.top_z + hang + params.carry_clearance, grasp["approach_z"])
            phases.append({"phase": "relocate", "center": list(obj.center), "top_z": obj.top_z,
                           "yaw": grasp["yaw"], "source": obj.source})
            r = run("approach", "move_to", xyz=[gx, gy, float(grasp["approach_z"])], gripper=control.GRIPPER_OPEN,
                    target_yaw=float(grasp["yaw"]), max_steps=60)
            if "error" in r or over():
                return finish("approach", _why(ex.current_state(), phases))
    r = run("align", "rotate_wrist", target_yaw=float(grasp["yaw"]), gripper=control.GRIPPER_OPEN, tol=0.03)
    if "error" in r or over():
        return finish("align", _why(ex.current_state(), phases))
    # 2. descend slowly onto the grasp pose
    r = run("descend", "move_to", xyz=[gx, gy, gz], gripper=control.GRIPPER_OPEN, step_clip=0.015,
            tol=0.008, max_steps=100, target_yaw=float(grasp["yaw"]))
    if "error" in r or over():
        return finish("descend", _why(ex.current_state(), phases))
    # 3. close
    r = run("close", "set_gripper", gripper=control.GRIPPER_CLOSE, steps=params.close_steps)
    if "error" in r or over():
        return finish("close", _why(ex.current_state(), phases))
    # 4. lift straight up
    if not travel("lift", [gx, gy, carry_z], control.GRIPPER_CLOSE, step_clip=0.02, max_steps=120):
        return finish("lift", _why(ex.current_state(), phases))
    opening = control.gripper_opening(control.robot_state(ex.current_state())["gripper_qpos"])
    if opening < params.grasped_min_opening:
        return finish("lift", f"grasp came up empty (gripper opening {opening:.4f} m)")
    # 5. transport above the target
    tx, ty = float(target.center[0]), float(target.center[1])
    if not travel("transport", [tx, ty, carry_z], control.GRIPPER_CLOSE, max_steps=120):
        return finish("transport", _why(ex.current_state(), phases))
    # 6. lower to the release height
    clearance = params.release_clearance_in if relation == "in" else params.release_clearance_on
    release_z = target.top_z + hang + clearance
    if release_z < carry_z:
        r = run("lower", "move_to", xyz=[tx, ty, float(release_z)], gripper=control.GRIPPER_CLOSE,
                step_clip=0.015, tol=0.008, max_steps=100)
        if "error" in r or over():
            return finish("lower", _why(ex.current_state(), phases))
    # 7. release and retreat
    r = run("release", "release")
    if "error" in r or over():
        return finish("release", _why(ex.current_state(), phases))
    pos = control.robot_state(ex.current_state())["eef_pos"]
    run("retreat", "move_to", xyz=[float(pos[0]), float(pos[1]), float(pos[2] + params.retreat_height)],
        gripper=control.GRIPPER_OPEN, max_steps=40)
    s = ex.current_state()
    return finish("retreat", None if s.get("success") else _why(s, phases))


def _why(state: Mapping[str, Any], phases: list[dict]) -> str | None:
    if state.get("success") or state.get("terminated"):
        return None
    if state.get("truncated"):
        return "episode truncated (max_episode_steps reached)"
    if phases and "error" in phases[-1]:
        return str(phases[-1]["error"])
    return "task predicate not satisfied"
