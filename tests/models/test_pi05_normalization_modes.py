"""The normalisation mode a checkpoint's config.json declares is the one served.

lerobot 0.4.4 declares it in ``normalization_mapping`` ({"STATE": "MEAN_STD", "ACTION": "MEAN_STD"},
``NormalizationMode`` values) and openpi in ``use_quantile_norm``. Expected values are written out
by hand from the formulas (lerobot ``normalize_processor.py``, openpi ``transforms.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rpent.models.pi05.normalization import NormStats, NormStatsError, declared_norm_modes
from rpent.models.pi05.policy import Pi05Policy
from rpent.models.pi05.tiny import build_tiny_checkpoint, tiny_observation

REPO = Path(__file__).resolve().parents[2]

# state/actions: mean [1, 2], std [2, 4], q01 [-1, 0], q99 [3, 8]
STATS = {"norm_stats": {k: {"mean": [1.0, 2.0], "std": [2.0, 4.0], "q01": [-1.0, 0.0], "q99": [3.0, 8.0]}
                        for k in ("state", "actions")}}


def test_declared_modes_from_both_config_formats():
    assert declared_norm_modes({}).actions == "QUANTILES"
    m = declared_norm_modes({"use_quantile_norm": False})
    assert (m.state, m.actions, m.convention) == ("MEAN_STD", "MEAN_STD", "openpi")
    m = declared_norm_modes({"normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "MEAN_STD"}})
    assert (m.state, m.actions, m.convention) == ("QUANTILES", "MEAN_STD", "lerobot")
    with pytest.raises(NormStatsError, match="MIN_MAX is not supported.*QUANTILES or MEAN_STD"):
        declared_norm_modes({"normalization_mapping": {"STATE": "MIN_MAX", "ACTION": "QUANTILES"}})
    with pytest.raises(NormStatsError, match="use_quantile_norm says QUANTILES but normalization_mapping says"):
        declared_norm_modes({"use_quantile_norm": True, "normalization_mapping": {"STATE": "MEAN_STD", "ACTION": "MEAN_STD"}})


def test_both_modes_against_hand_computed_values():
    x = np.array([[3.0, 10.0]], np.float32)
    y = np.array([[0.5, -1.0]], np.float32)
    q = NormStats.from_dict(STATS)
    # quantile: (x - q01) / (q99 - q01 + 1e-6) * 2 - 1 ; (y + 1) / 2 * (q99 - q01 + 1e-6) + q01
    np.testing.assert_allclose(q.state.normalize(x), [[4 / 4.000001 * 2 - 1, 10 / 8.000001 * 2 - 1]], rtol=1e-6)
    np.testing.assert_allclose(q.actions.unnormalize(y), [[1.5 / 2 * 4.000001 - 1, 0.0]], atol=1e-6)
    o = NormStats.from_dict(STATS, modes=declared_norm_modes({"use_quantile_norm": False}))
    # openpi mean/std: (x - mean) / (std + 1e-6) ; y * (std + 1e-6) + mean
    np.testing.assert_allclose(o.state.normalize(x), [[2 / 2.000001, 8 / 4.000001]], rtol=1e-6)
    np.testing.assert_allclose(o.actions.unnormalize(y), [[0.5 * 2.000001 + 1, -4.000001 + 2]], rtol=1e-6)
    le = NormStats.from_dict(STATS, modes=declared_norm_modes({"normalization_mapping": {"STATE": "MEAN_STD", "ACTION": "MEAN_STD"}}))
    # lerobot mean/std: (x - mean) / (std + 1e-8) ; y * std + mean
    np.testing.assert_allclose(le.state.normalize(x), [[1.0, 2.0]], rtol=1e-7)
    np.testing.assert_allclose(le.actions.unnormalize(y), [[2.0, -2.0]], rtol=1e-7)


def test_mean_std_without_mean_std_stats_is_refused():
    stats = {"norm_stats": {k: {"q01": [0.0], "q99": [1.0]} for k in ("state", "actions")}}
    with pytest.raises(NormStatsError, match="'mean'/'std'.*MEAN_STD.*use_quantile_norm=false"):
        NormStats.from_dict(stats, "ns.json", declared_norm_modes({"use_quantile_norm": False}, "config.json"))


def _declare(d: Path, **keys) -> Path:
    conf = json.loads((d / "config.json").read_text())
    conf.update(keys)
    (d / "config.json").write_text(json.dumps(conf))
    return d


@pytest.fixture(scope="module")
def three_ckpts(tmp_path_factory):
    """Same seeded weights and stats: quantile (no declaration), openpi mean/std, lerobot MEAN_STD."""
    root = tmp_path_factory.mktemp("norm_modes")
    return {
        "quantile": build_tiny_checkpoint(root / "q", layout="openpi"),
        "openpi_mean_std": _declare(build_tiny_checkpoint(root / "o", layout="openpi"), use_quantile_norm=False),
        "lerobot_mean_std": _declare(build_tiny_checkpoint(root / "l", layout="lerobot"),
                                     normalization_mapping={"VISUAL": "IDENTITY", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}),
    }


def test_checkpoint_is_served_in_its_declared_mode(three_ckpts):
    obs = tiny_observation("libero", 2)
    stats = json.loads((three_ckpts["quantile"] / "norm_stats.json").read_text())["norm_stats"]["actions"]
    mean, std = np.array(stats["mean"], np.float32), np.array(stats["std"], np.float32)
    q01, q99 = np.array(stats["q01"], np.float32), np.array(stats["q99"], np.float32)
    expected = {
        "quantile": lambda y: (y + 1) / 2 * (q99 - q01 + 1e-6) + q01,
        "openpi_mean_std": lambda y: y * (std + 1e-6) + mean,
        "lerobot_mean_std": lambda y: y * std + mean,
    }
    actions = {}
    for name, d in three_ckpts.items():
        logs: list[str] = []
        pol = Pi05Policy.from_checkpoint(d, "libero", log=logs.append)
        mode = "QUANTILES" if name == "quantile" else "MEAN_STD"
        assert any(line.startswith("normalization (") and f"actions {mode}" in line for line in logs), logs
        assert pol.metadata()["normalization"] == {"state": mode, "actions": mode}
        req = pol.prepare(obs, {"seed": 3})
        y = pol.run_prepared([req])[0]
        a = pol.finish(req, y)
        np.testing.assert_allclose(a, expected[name](y[:, :5, :7]), rtol=1e-5, atol=1e-6)
        actions[name] = a
    assert np.abs(actions["quantile"] - actions["openpi_mean_std"]).max() > 1e-3


def test_server_logs_the_mode_and_refuses_an_unsupported_one(three_ckpts, tmp_path):
    d = _declare(build_tiny_checkpoint(tmp_path / "mm", layout="lerobot"),
                 normalization_mapping={"STATE": "MIN_MAX", "ACTION": "MIN_MAX"})
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--port", "0", "--cpu",
                        "--model-path", str(d)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "RPC server listening" not in p.stdout
    assert "normalization_mapping STATE=MIN_MAX is not supported" in p.stderr and "QUANTILES or MEAN_STD" in p.stderr
