"""Fixtures of the Meta-World tests: the Meta-World interpreter (``.venv-metaworld``, built by
``scripts/install_metaworld.sh``; ``.ci/run`` builds it) and a real env server under it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rpent.robots.metaworld.robot import default_env_python
from tests.conftest import REPO, start_server_process

METAWORLD_PYTHON = default_env_python()
HAVE_METAWORLD = Path(METAWORLD_PYTHON).is_file()
needs_metaworld = pytest.mark.skipif(
    not HAVE_METAWORLD,
    reason=f"the Meta-World environment {METAWORLD_PYTHON} is absent: run scripts/install.sh (it builds .venv-metaworld)")


def server_env() -> dict:
    """Environment of a Meta-World env server started by a test: the repo on PYTHONPATH, EGL."""
    return {"PYTHONPATH": str(REPO), "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}


@pytest.fixture(scope="module")
def mw_server():
    """A real Meta-World env server (mt10 task 0 reach-v3, seed 3, 120 steps) under the Meta-World interpreter."""
    if not HAVE_METAWORLD:
        pytest.skip(f"the Meta-World environment {METAWORLD_PYTHON} is absent: run scripts/install.sh (it builds .venv-metaworld)")
    srv = start_server_process([METAWORLD_PYTHON, "-m", "rpent.robots.metaworld.env_server", "--suite", "mt10",
                                "--task", "reach-v3", "--seed", "3", "--max-episode-steps", "120",
                                "--transport", "socket", "--port", "0"], env=server_env(), timeout=240.0)
    yield srv
    srv.stop()


__all__ = ["METAWORLD_PYTHON", "HAVE_METAWORLD", "needs_metaworld", "server_env", "os"]
