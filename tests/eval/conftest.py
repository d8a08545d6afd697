"""Fixtures for the rpent-eval tests: real replay policy servers, cached replay fixtures, tiny Pi0.5."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import close_parent_watched

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def policy_server(*args: str, transport: str = "socket") -> Iterator[str]:
    """Start ``rpent.robots.components.replay_policy_server`` as a real process; yield its endpoint."""
    from rpent.rpc.protocol import READY_PREFIX

    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent.robots.components.replay_policy_server", *args,
         "--transport", transport, "--port", "0", "--parent-watch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        line = proc.stdout.readline()
        if not line.startswith(READY_PREFIX):
            proc.kill()
            raise RuntimeError(f"replay server did not start: {line!r} {proc.stderr.read()}")
        yield line[len(READY_PREFIX):].strip()
    finally:
        close_parent_watched(proc, timeout=15)


@pytest.fixture(scope="session")
def replay_cache_dir(request) -> Path:
    """Where generated replay fixtures are cached between test runs (pytest's cache folder)."""
    return Path(request.config.cache.mkdir("rpent_eval_replay"))


@pytest.fixture(scope="session")
def tiny_pi05_checkpoint(tmp_path_factory) -> Path:
    """A tiny random-weight Pi0.5 checkpoint directory (config.json, model.safetensors, norm_stats.json)."""
    from rpent.models.pi05.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_pi05") / "ckpt")
