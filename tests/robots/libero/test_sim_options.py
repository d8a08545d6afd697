"""LiberoSim.reset(init_state_id=...) used by batch evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from rpent.robots.libero import suites
from rpent.robots.libero.sim import LiberoSim


@pytest.fixture(scope="module")
def sim():
    s = LiberoSim("libero_object", 0, seed=0, max_episode_steps=5)
    yield s
    s.close()


def test_reset_to_another_init_state_is_deterministic(sim):
    a = sim.reset(init_state_id=7)
    poses7 = {k: v["pos"] for k, v in sim.object_poses().items()}
    assert sim.init_state_id == 7
    info = suites.task_info("libero_object", 0)
    assert sim.init_state_global_id == suites.init_state_ids(info, 7)[1]
    b = sim.reset()  # keeps init state 7
    assert np.array_equal(a["state"], b["state"])
    sim.reset(init_state_id=0)
    poses0 = {k: v["pos"] for k, v in sim.object_poses().items()}
    assert any(not np.allclose(poses7[k], poses0[k], atol=1e-3) for k in poses0)  # another scene layout
    with pytest.raises(ValueError, match="init_state_id must be an integer in 0..49"):
        sim.reset(init_state_id=50)
