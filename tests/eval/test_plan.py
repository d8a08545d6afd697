"""The interleaved reset-state pool and its round-robin assignment to env slots and workers."""

from __future__ import annotations

from collections import Counter

import pytest

from rpent.eval.plan import build_plan, interleaved_pool


def plan(envs: int, workers: int, epochs: int, counts=(50,) * 10):
    return build_plan("libero_10", list(counts), [f"task {i}" for i in range(len(counts))],
                      total_num_envs=envs, num_workers=workers, rollout_epoch=epochs)


def test_pool_is_interleaved_across_tasks():
    assert interleaved_pool([2, 3, 1]) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (1, 2)]
    assert interleaved_pool([0, 2]) == [(1, 0), (1, 1)]
    with pytest.raises(ValueError, match="no init states"):
        interleaved_pool([0, 0])


def test_seed_protocol_10_envs_10_epochs_is_10_tasks_by_10_reset_states():
    p = plan(10, 2, 10)
    assert p.num_trajectories == 100
    pairs = {(s.task_id, s.init_state_id) for s in p.slots}
    assert pairs == {(t, r) for t in range(10) for r in range(10)}
    for s in p.slots:  # env g always runs task g; epoch e runs reset state e
        assert (s.task_id, s.init_state_id) == (s.env_index, s.epoch)
        assert s.worker == s.env_index // 5 and s.local_index == s.env_index % 5


def test_80_envs_wrap_around_the_500_pair_pool_and_say_so():
    p = plan(80, 8, 10)
    assert p.num_trajectories == 800
    counts = Counter((s.task_id, s.init_state_id) for s in p.slots)
    assert len(counts) == 500
    assert all(counts[(t, r)] == (2 if r < 30 else 1) for t in range(10) for r in range(50))
    text = "\n".join(p.coverage_lines())
    assert "covers 500 distinct pairs; 300 trajectories repeat a pair (pool wrapped around)" in text
    assert "task  0 (80 eps): reset states 0-29 (x2), 30-49" in text
    assert "worker 7: env slots 70-79" in text


def test_fewer_envs_than_tasks_rotate_tasks_between_epochs():
    p = plan(4, 2, 3)
    assert [(s.epoch, s.env_index, s.task_id, s.init_state_id) for s in p.epoch_slots(1)] == [
        (1, 0, 4, 0), (1, 1, 5, 0), (1, 2, 6, 0), (1, 3, 7, 0)]
    assert [s.env_index for s in p.epoch_slots(2, worker=1)] == [2, 3]
    text = "\n".join(p.coverage_lines())
    assert "covers 12 distinct pairs" in text and "task  0 (2 eps): reset states 0-1" in text
    assert "task  9 (1 eps): reset states 0\n" in text


def test_a_task_subset_keeps_each_env_on_one_task():
    p = plan(4, 2, 2, counts=(0, 0, 50, 50, 0))
    assert {(s.env_index, s.task_id) for s in p.slots} == {(0, 2), (1, 3), (2, 2), (3, 3)}
    assert sorted(p.pairs_by_task().items()) == [(2, [0, 1, 2, 3]), (3, [0, 1, 2, 3])]
    assert "2 task(s) 2-3" in p.coverage_lines()[0]


def test_budget_errors():
    with pytest.raises(ValueError, match="divisible by the number of environment processes"):
        plan(10, 3, 1)
    with pytest.raises(ValueError, match="task languages"):
        build_plan("s", [1, 2], ["a"], total_num_envs=1, num_workers=1, rollout_epoch=1)


def test_held_out_init_states_only():
    p = build_plan("libero_object", [50] * 10, [f"task {i}" for i in range(10)], total_num_envs=10, num_workers=2,
                   rollout_epoch=10, init_state_ids=range(40, 50))
    assert p.num_trajectories == 100
    assert {(s.task_id, s.init_state_id) for s in p.slots} == {(t, r) for t in range(10) for r in range(40, 50)}
    assert interleaved_pool([50, 45], [40, 47]) == [(0, 40), (1, 40), (0, 47)]
    with pytest.raises(ValueError, match="no task has init states"):
        interleaved_pool([10, 10], [40, 41])
