"""``norm_stats.json``: quantile normalisation of states and un-normalisation of actions.

Schema (openpi ``src/openpi/shared/normalize.py``)::

    {"norm_stats": {"state":   {"mean": [...], "std": [...], "q01": [...], "q99": [...]},
                    "actions": {"mean": [...], "std": [...], "q01": [...], "q99": [...]}}}

Some tools write the inner dict at the top level; both are accepted (as ApxInf's loader does).
Formulas (openpi ``transforms.py``, used for every model type except pi0):

* normalise:   ``(x - q01) / (q99 - q01 + 1e-6) * 2 - 1`` on the first ``len(q01)`` dims, no clipping;
* unnormalise: ``(y + 1) / 2 * (q99 - q01 + 1e-6) + q01`` on the first ``len(q01)`` dims; further dims
  pass through unchanged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QUANTILE_EPS = 1e-6  # openpi transforms.py


class NormStatsError(ValueError):
    """``norm_stats.json`` is missing, malformed or does not fit the embodiment."""


@dataclass(frozen=True)
class QuantileStats:
    """q01/q99 of one quantity (float32 [D] each)."""

    q01: np.ndarray
    q99: np.ndarray

    @property
    def dim(self) -> int:
        """Number of dims the stats cover."""
        return int(self.q01.shape[0])

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """x [..., >=D] float -> float32, first D dims mapped q01->-1, q99->+1 (no clipping)."""
        x = np.asarray(x, dtype=np.float32).copy()
        d = min(self.dim, x.shape[-1])
        x[..., :d] = (x[..., :d] - self.q01[:d]) / (self.q99[:d] - self.q01[:d] + QUANTILE_EPS) * 2.0 - 1.0
        return x

    def unnormalize(self, y: np.ndarray) -> np.ndarray:
        """y [..., K] normalised -> float32 environment units on the first min(K, D) dims."""
        y = np.asarray(y, dtype=np.float32).copy()
        d = min(self.dim, y.shape[-1])
        y[..., :d] = (y[..., :d] + 1.0) / 2.0 * (self.q99[:d] - self.q01[:d] + QUANTILE_EPS) + self.q01[:d]
        return y


@dataclass(frozen=True)
class NormStats:
    """Quantile stats for ``state`` and ``actions``."""

    state: QuantileStats
    actions: QuantileStats

    @classmethod
    def from_dict(cls, data: dict, source: str = "norm_stats") -> "NormStats":
        """Parse the openpi schema (nested under ``norm_stats`` or flat).

        Raises:
            NormStatsError: naming the missing key or the bad vector.
        """
        inner = data.get("norm_stats", data) if isinstance(data, dict) else None
        if not isinstance(inner, dict):
            raise NormStatsError(f"{source}: expected a JSON object with 'state' and 'actions' entries")
        out = {}
        for name in ("state", "actions"):
            entry = inner.get(name)
            if not isinstance(entry, dict) or "q01" not in entry or "q99" not in entry:
                raise NormStatsError(
                    f"{source}: missing '{name}' with 'q01'/'q99' (quantile normalisation); use openpi's "
                    "physical-intelligence/libero/norm_stats.json for LIBERO checkpoints"
                )
            q01 = np.asarray(entry["q01"], dtype=np.float32).reshape(-1)
            q99 = np.asarray(entry["q99"], dtype=np.float32).reshape(-1)
            if q01.shape != q99.shape or q01.size == 0 or not (np.isfinite(q01).all() and np.isfinite(q99).all()):
                raise NormStatsError(f"{source}: '{name}' q01/q99 must be finite vectors of equal length, got {q01.shape} and {q99.shape}")
            out[name] = QuantileStats(q01, q99)
        return cls(**out)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "NormStats":
        """Read a ``norm_stats.json`` file. Raises NormStatsError naming the path."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError as exc:
            raise NormStatsError(f"{p} not found: put openpi's norm_stats.json at the checkpoint root") from exc
        except (OSError, json.JSONDecodeError) as exc:
            raise NormStatsError(f"cannot read {p}: {exc}") from exc
        return cls.from_dict(data, str(p))

    def to_dict(self) -> dict:
        """The nested openpi schema (q01/q99 only; mean/std are not used by pi05)."""
        return {
            "norm_stats": {
                k: {"q01": v.q01.tolist(), "q99": v.q99.tolist()} for k, v in (("state", self.state), ("actions", self.actions))
            }
        }
