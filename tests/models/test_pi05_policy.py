"""Pi05Policy in process: shapes and dtypes per embodiment preset, config checks, state in the prompt."""

from __future__ import annotations

import numpy as np
import pytest

from rpent.models.pi05.policy import Pi05Policy
from rpent.models.pi05.settings import ConfigCheckError, resolve_settings
from rpent.models.pi05.tiny import build_tiny_checkpoint, tiny_observation


@pytest.mark.parametrize(
    "embodiment,shape,views,state_in_prompt",
    [("libero", (2, 5, 7), 2, False), ("dual_franka", (2, 20, 20), 3, False), ("yam", (2, 30, 14), 3, True)],
)
def test_preset_shapes_and_dtypes(tmp_path, embodiment, shape, views, state_in_prompt):
    d = build_tiny_checkpoint(tmp_path / embodiment, embodiment=embodiment)
    pol = Pi05Policy.from_checkpoint(d, embodiment, log=lambda s: None)
    meta = pol.metadata()
    assert (meta["n_exec"], meta["action_dim"], meta["num_views"], meta["num_flow_steps"]) == (shape[1], shape[2], views, 5)
    assert meta["discrete_state_input"] is state_in_prompt
    obs = tiny_observation(embodiment, 2)
    a = pol.predict(obs, {"seed": 0})
    assert a.shape == shape and a.dtype == np.float32 and np.isfinite(a).all()
    req = pol.prepare(obs)
    text = pol.processor.tokenizer.sp.decode(req.token_ids[0][1:].tolist())
    assert ("State: " in text) is state_in_prompt


def test_state_changes_actions_only_when_it_is_in_the_prompt(tmp_path):
    d = build_tiny_checkpoint(tmp_path / "c")
    obs = tiny_observation("libero", 1)
    moved = {**obs, "states": obs["states"] + 0.5}
    for mode, should_change in (("no", False), ("yes", True)):
        pol = Pi05Policy.from_checkpoint(d, "libero", state_in_prompt=mode, log=lambda s: None)
        a, b = pol.predict(obs, {"seed": 1}), pol.predict(moved, {"seed": 1})
        assert bool(np.abs(a - b).max() > 1e-6) is should_change


def test_seed_003_config_checks():
    with pytest.raises(ConfigCheckError, match=r"action_horizon \(3\) must be at least the number of executed actions n_exec \(5\)"):
        resolve_settings("libero", action_horizon=3)
    with pytest.raises(ValueError, match="unknown embodiment 'franka'"):
        resolve_settings("franka")
    s = resolve_settings("libero", num_flow_steps=10, checkpoint_config={"discrete_state_input": True})
    assert s.num_flow_steps == 10 and s.discrete_state_input is True
