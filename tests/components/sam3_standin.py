"""A stand-in SAM3 predictor for tests (``--predictor-factory sam3_standin:make_predictor``).

Deterministic candidates from the prompt, at the image's resolution:

* text "nothing" -> no candidate; "faint" -> one candidate of score 0.1; "hollow" -> score 0.9 with an
  empty mask; anything else -> two candidates: score 0.6 on the upper-left quarter block
  (rows H/4..H/2-1, cols W/4..W/2-1) and score 0.9 on the lower-right block (rows H/2..3H/4-1,
  cols W/2..3W/4-1), so the top-scoring one is the second;
* point (row, col) -> a 7x7 square around the point (clipped), score 0.8, plus a weaker full-image mask.
"""

from __future__ import annotations

import numpy as np


def text_blocks(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The two text-prompt candidate masks (low score, top score) for an h x w image."""
    low = np.zeros((h, w), dtype=bool)
    low[h // 4:h // 2, w // 4:w // 2] = True
    top = np.zeros((h, w), dtype=bool)
    top[h // 2:3 * h // 4, w // 2:3 * w // 4] = True
    return low, top


class StandInPredictor:
    """Implements the predictor protocol of :mod:`rpent.robots.components.sam3_server`."""

    def __init__(self, checkpoint):
        self.checkpoint = checkpoint

    def segment_text(self, image: np.ndarray, prompt: str):
        h, w = image.shape[:2]
        if prompt == "nothing":
            return np.zeros(0, dtype=np.float32), np.zeros((0, h, w), dtype=bool)
        if prompt == "faint":
            return np.array([0.1], dtype=np.float32), text_blocks(h, w)[1][None]
        if prompt == "hollow":
            return np.array([0.9], dtype=np.float32), np.zeros((1, h, w), dtype=bool)
        low, top = text_blocks(h, w)
        return np.array([0.6, 0.9], dtype=np.float32), np.stack([low, top])

    def segment_point(self, image: np.ndarray, point):
        h, w = image.shape[:2]
        r, c = point
        sq = np.zeros((h, w), dtype=bool)
        sq[max(0, r - 3):r + 4, max(0, c - 3):c + 4] = True
        return np.array([0.3, 0.8], dtype=np.float32), np.stack([np.ones((h, w), dtype=bool), sq])


def make_predictor(checkpoint, device, bpe_path=None) -> StandInPredictor:
    """The factory signature the server calls."""
    return StandInPredictor(checkpoint)
