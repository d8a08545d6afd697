"""Episode metrics, their aggregate, and the log-directory files (real TensorBoard event files)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from rpent.eval.errors import TrajectoryCountError
from rpent.eval.metrics import (
    METRIC_KEYS,
    Completeness,
    EpisodeResult,
    Rate,
    EpisodeTracker,
    aggregate,
    check_trajectory_count,
    per_task_table,
)
from rpent.eval.outputs import EpisodeLog, make_run_dir, read_episodes, write_metrics, write_tensorboard


def episode(task: int, success_steps: int | None, length: int, at_end: bool, coef: float = 5.0) -> EpisodeResult:
    tr = EpisodeTracker(reward_coef=coef)
    for step in range(1, length + 1):
        tr.record_step(success_steps is not None and step >= success_steps and (at_end or step == success_steps))
    return EpisodeResult(0, task, 0, task, 0, f"task {task}", tr.success_once, tr.success_now, tr.episode_return,
                         tr.reward, tr.steps, tr.steps_to_success, length // 5, 1.0)


def test_tracker_counts_the_first_success_once():
    tr = EpisodeTracker(reward_coef=5.0)
    for success in [False, False, True, True, False]:
        tr.record_step(success)
    assert (tr.steps, tr.success_once, tr.success_now, tr.steps_to_success) == (5, True, False, 3)
    assert tr.episode_return == 5.0 and tr.reward == pytest.approx(5.0 / 3)
    never = EpisodeTracker(reward_coef=5.0)
    never.record_step(False)
    never.record_step(False)
    assert never.reward == 0.0 and never.steps_to_success is None


def test_aggregate_and_per_task_table():
    results = [episode(0, 100, 520, True), episode(0, 200, 520, False), episode(1, None, 520, False),
               episode(1, 400, 520, True)]
    m = aggregate(results)
    assert list(m) == list(METRIC_KEYS)
    assert m["eval/success_once"] == 0.75 and m["eval/success_at_end"] == 0.5
    assert m["eval/return"] == pytest.approx(3.75)  # reward_coef x success_once, as in the seed's figures
    assert m["eval/reward"] == pytest.approx((5 / 100 + 5 / 200 + 0 + 5 / 400) / 4)
    assert m["eval/episode_len"] == 520 and m["eval/num_trajectories"] == 4
    rows = per_task_table(results)
    assert [(r.task_id, r.num_trajectories, r.success_once, r.success_at_end) for r in rows] == [
        (0, 2, 1.0, 0.5), (1, 2, 0.5, 0.5)]
    check_trajectory_count(4, 2, 2)
    with pytest.raises(TrajectoryCountError, match=r"eval/num_trajectories is 3 but .* 2 x 2 = 4"):
        check_trajectory_count(3, 2, 2)


def test_log_dir_files(tmp_path):
    run = make_run_dir(tmp_path, "libero_10_pi05_eval", now=datetime(2026, 10, 20, 15, 30, 0))
    assert run.name == "20261020-15:30:00-libero_10_pi05_eval"
    again = make_run_dir(tmp_path, "libero_10_pi05_eval", now=datetime(2026, 10, 20, 15, 30, 0))
    assert again.name == "20261020-15:30:00-libero_10_pi05_eval-2"
    results = [episode(0, 10, 20, True), episode(3, None, 20, False)]
    log = EpisodeLog(run)
    for r in results:
        log.append(r)
    log.close()
    assert read_episodes(run) == results
    metrics, table = aggregate(results), per_task_table(results)
    write_metrics(run, metrics, table, {"complete": True})
    text = (run / "metrics.log").read_text()
    # k/N and the Wilson 95% interval next to every rate (scipy: 1/2 -> [0.0945, 0.9055])
    assert re.search(r"^eval/success_once\t0\.5\t1/2 \[Wilson 95% 0\.0945, 0\.9055\]$", text, re.M), text
    assert re.search(r"^eval/num_trajectories\t2$", text, re.M) and "INCOMPLETE" not in text
    # what the rates count: the environment predicate (an evaluation has no operator verdicts)
    assert text.splitlines()[-1].startswith("success basis\tenvironment_predicate: ")
    basis = __import__("json").loads((run / "metrics.json").read_text())["success_basis"]
    assert basis["kind"] == "environment_predicate" and basis["operator_verdicts"] == 0
    assert re.search(r"^task 3\t1\t0\.0000 0/1 \[Wilson 95% 0\.0000, 0\.7935\]\t0\.0000 0/1 \[Wilson 95% "
                     r"0\.0000, 0\.7935\]\ttask 3$", text, re.M), text
    tb = write_tensorboard(run, metrics, table)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (event,) = tb.glob("events.out.tfevents.*")
    acc = EventAccumulator(str(event), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert set(METRIC_KEYS) <= tags and "eval/task_3/success_once" in tags
    for key in METRIC_KEYS:
        (point,) = acc.Scalars(key)
        assert point.step == 0 and point.value == pytest.approx(metrics[key])


def test_wilson_interval_matches_scipy_and_hand_values():
    from scipy.stats import binomtest

    for k, n in ((0, 1), (1, 2), (70, 100), (73, 100), (100, 100)):
        ci = binomtest(k, n).proportion_ci(method="wilson")
        r = Rate.of(k, n)
        assert (r.low, r.high) == pytest.approx((ci.low, ci.high))
    # Wilson by hand for 70/100: (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)
    z, p, n = 1.959963984540054, 0.7, 100
    centre, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    assert (Rate.of(70, 100).low, Rate.of(70, 100).high) == pytest.approx(
        ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)))
    assert Rate.from_fraction(0.7, 100).k == 70 and Rate.of(0, 0).text() == "0/0 [no trajectories]"


def test_incomplete_run_is_marked_in_every_output(tmp_path):
    """2 of 4 trajectories finished; every output says INCOMPLETE with k, N, expected N."""
    run = make_run_dir(tmp_path, "cfg")
    results = [episode(0, 10, 20, True), episode(0, None, 20, False)]
    metrics, table = aggregate(results), per_task_table(results)
    comp = Completeness(expected=4, finished=2, lost=((0, 1, 1, 0), (0, 3, 1, 1)), reason="EnvWorkerError: boom")
    write_metrics(run, metrics, table, {}, comp)
    text = (run / "metrics.log").read_text()
    first = text.splitlines()[0]
    assert first.startswith("status\tINCOMPLETE: 2 of 4 expected trajectories; lost (task, init state, epoch): "
                            "(task 0, init state 1, epoch 1), (task 0, init state 3, epoch 1)"), first
    metric_lines = [line for line in text.splitlines() if line.startswith("eval/")]
    assert len(metric_lines) == len(METRIC_KEYS)
    assert all("INCOMPLETE" in line for line in metric_lines), metric_lines
    assert "eval/success_once\t0.5\t1/2 [Wilson 95% 0.0945, 0.9055]\tINCOMPLETE: N=2 of expected 4" in text
    assert "eval/num_trajectories\t2\tINCOMPLETE: expected 4" in text
    doc = __import__("json").loads((run / "metrics.json").read_text())
    assert doc["complete"] is False and doc["status"].startswith("INCOMPLETE: 2 of 4")
    assert (doc["num_trajectories"], doc["expected_trajectories"]) == (2, 4)
    assert doc["lost_episodes"][0] == {"task_id": 0, "init_state_id": 1, "epoch": 1, "env_index": 0}
    assert doc["rates"]["eval/success_once"]["k"] == 1 and doc["rates"]["eval/success_once"]["n"] == 2
    tb = write_tensorboard(run, metrics, table, comp)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (event,) = tb.glob("events.out.tfevents.*")
    acc = EventAccumulator(str(event), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert not any(t.startswith("eval/") for t in tags), tags  # no bare eval/* rate of an incomplete run
    assert {"eval_INCOMPLETE/success_once", "eval_INCOMPLETE/expected_trajectories"} <= tags
