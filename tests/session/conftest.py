"""Fixtures of the session tests: the TUI tests' helpers (tiny services, a run_task stand-in) and an
isolated session registry."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))


@pytest.fixture(autouse=True)
def session_registry(tmp_path, monkeypatch):
    """Each test gets its own registry of running sessions (``$RPENT_SESSIONS_DIR``)."""
    reg = tmp_path / "registry"
    monkeypatch.setenv("RPENT_SESSIONS_DIR", str(reg))
    return reg


@pytest.fixture
def short_tmp():
    """A short temporary directory (Unix socket paths are limited to 107 bytes)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="rps-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def png_bytes() -> bytes:
    """A real 32x32 RGB PNG (a gradient)."""
    import io

    import numpy as np
    from PIL import Image

    arr = np.zeros((32, 32, 3), np.uint8)
    arr[..., 0] = np.arange(32)[None, :] * 8
    arr[..., 1] = np.arange(32)[:, None] * 8
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()
