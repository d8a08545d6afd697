"""Object names and masks: match a text prompt to simulator object names, oracle masks, support height.

Pure numpy; imports no simulator. Moved out of :mod:`rpent.robots.libero.strategy`.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

__all__ = ["name_tokens", "phrase_tokens", "match_object_names", "erode_mask", "segment_by_name", "dilate_mask", "support_height", "clean_text", "strip_articles", "ARTICLES"]

_ARTICLES = {"the", "a", "an", "of", "some"}
#: Words in object names that instructions often omit or say differently (token -> spoken forms).
_SYNONYMS = {
    "mug": {"cup", "mug"},
    "cup": {"cup", "mug"},
    "frypan": {"pan", "frypan", "skillet"},
    "bowl": {"bowl"},
    "cookies": {"cookie", "cookies"},
    "cookie": {"cookie", "cookies"},
    "porcelain": {"porcelain", "white"},  # LIBERO's porcelain_mug is "the white mug" (libero_10 task 4)
    # LIBERO's wooden_two_layer_shelf is "the cabinet" / "the cabinet shelf" (libero_90 KITCHEN_SCENE9,
    # STUDY_SCENE4); a scene's wooden_cabinet still wins "cabinet" (fewer unnamed tokens)
    "shelf": {"shelf", "shelves", "cabinet"},
}


def clean_text(text: str) -> str:
    """Lower-case, drop punctuation and a trailing full stop, collapse spaces."""
    text = text.lower().strip().rstrip(".!")
    text = re.sub(r"[^a-z0-9 ]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def strip_articles(phrase: str) -> str:
    """Drop articles (the, a, an, of, some) from a phrase."""
    return " ".join(w for w in phrase.split() if w not in _ARTICLES).strip()


ARTICLES = _ARTICLES
_clean = clean_text


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

    Takes a ring of ``ring_px`` pixels around the mask. With an instance image ``seg``: when
    at least 10 ring pixels belong to other objects, lie under the object's footprint (within
    its 10-90th percentile xy half-width of its xy centre, from the mask's world points) and below its
    lowest visible part, the object sits on that object (a bowl on a ramekin) and their 90th
    percentile z (its top) is returned; else the median z of the ring's background pixels
    (id 0: table/floor). Without ``seg`` (e.g. a SAM3 mask) the 20th percentile z of the ring
    (neighbouring objects are higher than the table, so a low percentile picks the table).

    Args:
        mask: bool (H, W) object mask; world: (H, W, 3) world map (m); seg: optional ids.
    Returns:
        z in meters, or None when fewer than 10 ring pixels qualify.
    """
    m = np.asarray(mask, dtype=bool)
    w = np.asarray(world)
    ring = dilate_mask(m, ring_px) & ~dilate_mask(m, 1)
    if seg is not None:
        ids = np.asarray(seg)
        obj = w[m]
        obj = obj[np.isfinite(obj).all(axis=1)]
        under = ring & (ids != 0)
        if len(obj) >= 10 and under.any():
            centre = np.median(obj[:, :2], axis=0)
            half = 0.5 * float(np.min(np.percentile(obj[:, :2], 90, axis=0) - np.percentile(obj[:, :2], 10, axis=0)))
            low = float(np.percentile(obj[:, 2], 5))
            pts = w[under]
            pts = pts[np.isfinite(pts).all(axis=1)]
            near = pts[(np.linalg.norm(pts[:, :2] - centre, axis=1) < half) & (pts[:, 2] < low)]
            if len(near) >= 10:
                return float(np.percentile(near[:, 2], 90))
        ring &= ids == 0
    z = w[..., 2][ring]
    z = z[np.isfinite(z)]
    if len(z) < 10:
        return None
    return float(np.median(z)) if seg is not None else float(np.percentile(z, 20))


