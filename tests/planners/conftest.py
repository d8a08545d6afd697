"""Shared fixtures for the planner tests: the scripted provider endpoint (real HTTP on
127.0.0.1) and the fixture toolkit (tests/planners/planner_fixture_toolkit.py)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rpent.planners.provider_endpoint import ProviderEndpoint

# Test dirs are not on sys.path (--import-mode=importlib): register the fixture module by name.
_spec = importlib.util.spec_from_file_location("planner_fixture_toolkit",
                                               Path(__file__).with_name("planner_fixture_toolkit.py"))
_module = importlib.util.module_from_spec(_spec)
sys.modules["planner_fixture_toolkit"] = _module
_spec.loader.exec_module(_module)
FixtureToolkit = _module.FixtureToolkit


@pytest.fixture
def endpoint() -> Iterator:
    """Factory: ``endpoint(responder, **kw)`` starts a ProviderEndpoint closed after the test."""
    started: list[ProviderEndpoint] = []

    def make(responder, **kw) -> ProviderEndpoint:
        ep = ProviderEndpoint(responder, **kw).start()
        started.append(ep)
        return ep

    yield make
    for ep in started:
        ep.close()


@pytest.fixture
def toolkit() -> FixtureToolkit:
    """A fresh fixture toolkit (5 ms per simulated env step)."""
    return FixtureToolkit()
