"""Fixtures for the Pi0.5 model tests: tiny checkpoints in both layouts (built once per session)."""

from __future__ import annotations

import pytest

from rpent.models.pi05.tiny import build_tiny_checkpoint


@pytest.fixture(scope="session")
def tiny_ckpts(tmp_path_factory):
    """{"openpi": Path, "lerobot": Path}: the same seeded tiny weights written in both layouts."""
    root = tmp_path_factory.mktemp("pi05_ckpts")
    return {layout: build_tiny_checkpoint(root / layout, layout=layout, seed=0) for layout in ("openpi", "lerobot")}

