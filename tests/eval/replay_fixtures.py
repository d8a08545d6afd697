"""Real successful LIBERO action sequences for the replay policy, made with the scripted strategy.

For each (suite, task, init state) pair, a fresh :class:`~rpent.robots.libero.sim.LiberoSim`
(seed = init state id, so it starts from that init state after the usual settle steps) is driven
by :func:`rpent.robots.libero.strategy.pick_and_place` with simulator-oracle object boxes
(``LiberoSim.object_bbox``); every executed action is recorded. A pair counts only if the env's
own success predicate held at the end. The result is a replay table
(:mod:`rpent.robots.components.replay_policy_server` format), sequence ids
``<suite>_t<task>_s<init state>``, cached on disk so that repeated test runs reuse it.

The cache file name carries a hash of the sources that determine the actions (strategy, control,
sim, suites), so a change there regenerates the fixtures.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
_SOURCES = ("rpent/robots/libero/strategy.py", "rpent/robots/libero/control.py", "rpent/robots/libero/sim.py",
            "rpent/robots/libero/suites.py")


def sources_hash() -> str:
    """Short hash of the files whose behaviour the recorded actions depend on."""
    h = hashlib.sha256()
    for rel in _SOURCES:
        h.update((ROOT / rel).read_bytes())
    return h.hexdigest()[:12]


def record_successful_sequence(suite: str, task: int, init_state: int, max_steps: int = 600) -> dict:
    """Run the scripted pick-and-place on the real simulator and return the replay entry.

    Returns:
        ``{"suite", "task", "seed", "task_language", "actions" [[7]...], "states" [[8]...], "steps"}``.

    Raises:
        AssertionError: the instruction is unsupported or the episode did not succeed.
    """
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.robots.libero import strategy
    from rpent.robots.libero.sim import LiberoSim

    sim = LiberoSim(suite, task, seed=init_state, max_episode_steps=max_steps, libero_type="standard")
    try:
        goal = strategy.parse_instruction(sim.task_language)
        assert isinstance(goal, strategy.PickPlaceGoal), f"{suite} task {task}: {goal}"
        names = sim.object_names()
        candidates = names["objects"] + names["fixtures"]
        obj_names = strategy.match_object_names(goal.object_phrase, candidates)
        tgt_names = strategy.match_object_names(goal.target_phrase, candidates)
        assert obj_names and tgt_names, (goal, candidates)

        def estimate(name: str) -> strategy.ObjectEstimate:
            box = sim.object_bbox(name)
            return strategy.ObjectEstimate.from_box(box["center"], box["axes"], box["half_extents"])

        actions: list[list[float]] = []
        states: list[list[float]] = []

        def step_fn(action: np.ndarray) -> dict:
            states.append(sim.robot_obs()["state"].astype(float).tolist())
            actions.append(np.asarray(action, dtype=np.float32).astype(float).tolist())
            return sim.step(action)

        start = {"obs": sim.robot_obs(), "terminated": False, "truncated": False, "success": False}
        out = strategy.pick_and_place(strategy.InProcessExecutor(step_fn, start), estimate(obj_names[0]), estimate(tgt_names[0]), goal.relation)
        assert out["success"] and sim.success(), f"{suite} t{task} s{init_state}: {out.get('stage')} {out.get('reason')}"
        return {"suite": suite, "task": task, "seed": init_state, "task_language": sim.task_language,
                "actions": actions, "states": states, "steps": len(actions)}
    finally:
        sim.close()


def replay_file(cache_dir: Path, suite: str, pairs: list[tuple[int, int]]) -> Path:
    """Path of a replay JSON with a successful sequence for every (task, init state) pair (cached).

    Args:
        cache_dir: where cached fixture files live.
        suite: a suite the scripted strategy solves (e.g. ``libero_object``).
        pairs: (task, init state) pairs.
    """
    from rpent.robots.components.replay_policy_server import load_replay_table, save_replay_table

    key = hashlib.sha256(json.dumps([suite, sorted(pairs), sources_hash()]).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"replay-{suite}-{key}.json"
    if path.is_file():
        return path
    table = {}
    for task, state in pairs:
        entry = record_successful_sequence(suite, task, state)
        table[f"{suite}_t{task}_s{state}"] = {**entry, "actions": np.asarray(entry["actions"], np.float32),
                                             "states": np.asarray(entry["states"], np.float32)}
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    save_replay_table(table, path)
    load_replay_table(path)  # validates the file we wrote
    return path
