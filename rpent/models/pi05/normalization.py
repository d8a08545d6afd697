"""``norm_stats.json``: normalisation of states and un-normalisation of actions, in the mode the
checkpoint's ``config.json`` declares (quantile or mean/std).

Schema (openpi's ``normalize.py`` norm-stats file)::

    {"norm_stats": {"state":   {"mean": [...], "std": [...], "q01": [...], "q99": [...]},
                    "actions": {"mean": [...], "std": [...], "q01": [...], "q99": [...]}}}

Some tools write the inner dict at the top level; both are accepted (as ApxInf's loader does).
Formulas (openpi ``transforms.py``, used for every model type except pi0):

* normalise:   ``(x - q01) / (q99 - q01 + 1e-6) * 2 - 1`` on the first ``len(q01)`` dims, no clipping;
* unnormalise: ``(y + 1) / 2 * (q99 - q01 + 1e-6) + q01`` on the first ``len(q01)`` dims; further dims
  pass through unchanged.

Mean/std mode (a checkpoint trained with it must be served with it: the model's outputs live in
that normalised space). Where ``config.json`` declares the mode (:func:`declared_norm_modes`):

* openpi ``"use_quantile_norm": false`` (openpi ``transforms.Normalize``/``Unnormalize``):
  normalise ``(x - mean) / (std + 1e-6)``, unnormalise ``y * (std + 1e-6) + mean``;
* lerobot ``"normalization_mapping": {"STATE": "MEAN_STD", "ACTION": "MEAN_STD"}`` (lerobot 0.4
  ``processor/normalize_processor.py``, ``eps=1e-8``): normalise ``(x - mean) / (std + 1e-8)``,
  unnormalise ``y * std + mean``; STATE and ACTION may differ there (each QUANTILES or MEAN_STD).
* neither key: quantile, Pi0.5's default in openpi (``use_quantile_norm=True`` for pi05) and in
  lerobot (``PI05Config.normalization_mapping``).
Other lerobot modes (MIN_MAX, QUANTILE10, IDENTITY) are refused by name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QUANTILE_EPS = 1e-6  # openpi transforms.py
OPENPI_MEAN_STD_EPS = 1e-6  # openpi transforms.py normalize/unnormalize (mean/std branch)
LEROBOT_MEAN_STD_EPS = 1e-8  # lerobot NormalizerProcessorStep.eps (normalise only)

QUANTILE = "QUANTILES"
MEAN_STD = "MEAN_STD"
SUPPORTED_MODES = (QUANTILE, MEAN_STD)


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

    mode = QUANTILE

    def describe(self) -> str:
        """One line for the start-up log."""
        return "QUANTILES (x - q01) / (q99 - q01 + 1e-6) * 2 - 1 (openpi)"


@dataclass(frozen=True)
class MeanStdStats:
    """mean/std of one quantity (float32 [D] each) and the epsilons of the declaring convention.

    ``eps_in`` is added to std when normalising, ``eps_out`` when un-normalising (openpi: 1e-6 both;
    lerobot: 1e-8 and 0; see the module docstring).
    """

    mean: np.ndarray
    std: np.ndarray
    eps_in: float = OPENPI_MEAN_STD_EPS
    eps_out: float = OPENPI_MEAN_STD_EPS
    convention: str = "openpi"

    mode = MEAN_STD

    @property
    def dim(self) -> int:
        """Number of dims the stats cover."""
        return int(self.mean.shape[0])

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """x [..., >=D] float -> float32, first D dims ``(x - mean) / (std + eps_in)``."""
        x = np.asarray(x, dtype=np.float32).copy()
        d = min(self.dim, x.shape[-1])
        x[..., :d] = (x[..., :d] - self.mean[:d]) / (self.std[:d] + np.float32(self.eps_in))
        return x

    def unnormalize(self, y: np.ndarray) -> np.ndarray:
        """y [..., K] normalised -> float32 environment units, first min(K, D) dims ``y * (std + eps_out) + mean``."""
        y = np.asarray(y, dtype=np.float32).copy()
        d = min(self.dim, y.shape[-1])
        y[..., :d] = y[..., :d] * (self.std[:d] + np.float32(self.eps_out)) + self.mean[:d]
        return y

    def describe(self) -> str:
        """One line for the start-up log."""
        return f"MEAN_STD (x - mean) / (std + {self.eps_in:g}) ({self.convention})"


@dataclass(frozen=True)
class NormModes:
    """The normalisation declared by a checkpoint's ``config.json``.

    Attributes:
        state, actions: ``"QUANTILES"`` or ``"MEAN_STD"``.
        convention: ``"openpi"`` (eps 1e-6) or ``"lerobot"`` (eps 1e-8 / 0) for mean/std formulas.
        source: where the modes came from, for the log (e.g. ``config.json use_quantile_norm=false``).
    """

    state: str = QUANTILE
    actions: str = QUANTILE
    convention: str = "openpi"
    source: str = "default for pi05 (config.json declares none)"


def declared_norm_modes(config: dict, source: str = "config.json") -> NormModes:
    """Read the normalisation mode a checkpoint declares (see the module docstring).

    Args:
        config: the parsed ``config.json``.
        source: its path, for error messages.

    Raises:
        NormStatsError: a mode this server does not implement (names the supported modes), a
            malformed declaration, or ``use_quantile_norm`` and ``normalization_mapping`` that disagree.
    """
    found: list[NormModes] = []
    if "use_quantile_norm" in config:
        v = config["use_quantile_norm"]
        if not isinstance(v, bool):
            raise NormStatsError(f"{source}: 'use_quantile_norm' must be true or false, got {v!r}")
        m = QUANTILE if v else MEAN_STD
        found.append(NormModes(m, m, "openpi", f"{source} use_quantile_norm={str(v).lower()}"))
    mapping = config.get("normalization_mapping")
    if mapping is not None:
        if not isinstance(mapping, dict):
            raise NormStatsError(f"{source}: 'normalization_mapping' must be an object like "
                                 '{"STATE": "QUANTILES", "ACTION": "MEAN_STD"}')
        modes = {}
        for key in ("STATE", "ACTION"):
            v = str(mapping.get(key, QUANTILE)).upper()
            if v not in SUPPORTED_MODES:
                raise NormStatsError(
                    f"{source}: normalization_mapping {key}={v} is not supported; rpent serves Pi0.5 with "
                    f"QUANTILES or MEAN_STD: re-export the checkpoint with one of them"
                )
            modes[key] = v
        found.append(NormModes(modes["STATE"], modes["ACTION"], "lerobot",
                               f"{source} normalization_mapping STATE={modes['STATE']} ACTION={modes['ACTION']}"))
    if not found:
        return NormModes()
    if len(found) == 2 and (found[0].state, found[0].actions) != (found[1].state, found[1].actions):
        raise NormStatsError(
            f"{source}: use_quantile_norm says {found[0].state} but normalization_mapping says "
            f"STATE={found[1].state} ACTION={found[1].actions}; remove the one that does not match training"
        )
    return found[-1] if len(found) == 1 else found[0]


@dataclass(frozen=True)
class NormStats:
    """Normalisation stats for ``state`` and ``actions`` (each quantile or mean/std)."""

    state: QuantileStats | MeanStdStats
    actions: QuantileStats | MeanStdStats

    def describe(self) -> str:
        """``"state QUANTILES ...; actions MEAN_STD ..."`` for the start-up log."""
        return f"state {self.state.describe()}; actions {self.actions.describe()}"

    @classmethod
    def from_dict(cls, data: dict, source: str = "norm_stats", modes: NormModes | None = None) -> "NormStats":
        """Parse the openpi schema (nested under ``norm_stats`` or flat).

        Args:
            modes: the declared modes (default: quantile for both).

        Raises:
            NormStatsError: naming the missing key or the bad vector.
        """
        modes = modes or NormModes()
        inner = data.get("norm_stats", data) if isinstance(data, dict) else None
        if not isinstance(inner, dict):
            raise NormStatsError(f"{source}: expected a JSON object with 'state' and 'actions' entries")
        out = {}
        for name in ("state", "actions"):
            entry = inner.get(name)
            mode = modes.state if name == "state" else modes.actions
            if mode == MEAN_STD:
                if not isinstance(entry, dict) or "mean" not in entry or "std" not in entry:
                    raise NormStatsError(
                        f"{source}: missing '{name}' with 'mean'/'std', which the checkpoint's declared MEAN_STD "
                        f"normalisation ({modes.source}) needs; use the norm_stats.json written with this checkpoint"
                    )
                mean = np.asarray(entry["mean"], dtype=np.float32).reshape(-1)
                std = np.asarray(entry["std"], dtype=np.float32).reshape(-1)
                if mean.shape != std.shape or mean.size == 0 or not (np.isfinite(mean).all() and np.isfinite(std).all()):
                    raise NormStatsError(f"{source}: '{name}' mean/std must be finite vectors of equal length, got {mean.shape} and {std.shape}")
                if modes.convention == "lerobot":
                    out[name] = MeanStdStats(mean, std, LEROBOT_MEAN_STD_EPS, 0.0, "lerobot")
                else:
                    out[name] = MeanStdStats(mean, std)
                continue
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
    def load(cls, path: str | os.PathLike, modes: NormModes | None = None) -> "NormStats":
        """Read a ``norm_stats.json`` file in the declared ``modes``. Raises NormStatsError naming the path."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError as exc:
            raise NormStatsError(f"{p} not found: put openpi's norm_stats.json at the checkpoint root") from exc
        except (OSError, json.JSONDecodeError) as exc:
            raise NormStatsError(f"cannot read {p}: {exc}") from exc
        return cls.from_dict(data, str(p), modes)

    def to_dict(self) -> dict:
        """The nested openpi schema (q01/q99 or mean/std, whichever each quantity uses)."""

        def entry(v):
            if isinstance(v, MeanStdStats):
                return {"mean": v.mean.tolist(), "std": v.std.tolist()}
            return {"q01": v.q01.tolist(), "q99": v.q99.tolist()}

        return {"norm_stats": {"state": entry(self.state), "actions": entry(self.actions)}}
