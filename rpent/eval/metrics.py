"""Episode metrics: per-step accumulation in the env workers and the ``eval/*`` aggregate.

Definitions (the product document's metric table, shared/seeds/003 step 6, and RLinf's LIBERO env
for the return/reward details; "step" = one env step):

* ``eval/success_once``: fraction of trajectories whose success predicate held at any step.
* ``eval/success_at_end``: fraction whose success predicate holds at the episode's last step.
* ``eval/return``: mean cumulative reward. The step reward is ``reward_coef`` on a step where the
  task is solved (0 otherwise) and is accumulated only until the first success, so a trajectory's
  return is ``reward_coef`` if it ever succeeded, else 0 (seed: success 0.9525 -> return 4.7625
  with reward_coef 5).
* ``eval/reward``: mean of return / (steps to first success, or steps so far if never succeeded).
* ``eval/episode_len``: mean env steps executed per trajectory.
* ``eval/num_trajectories``: trajectories aggregated; must equal ``total_num_envs x rollout_epoch``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rpent.eval.errors import TrajectoryCountError

METRIC_KEYS = (
    "eval/success_once",
    "eval/success_at_end",
    "eval/return",
    "eval/reward",
    "eval/episode_len",
    "eval/num_trajectories",
)


@dataclass
class EpisodeTracker:
    """Accumulates one episode's metrics step by step (in the env worker).

    Attributes:
        reward_coef: step reward on a solved step (RLinf ``reward_coef``).
        steps: env steps executed so far.
        success_once: the success predicate held at some step.
        success_now: the success predicate at the latest step.
        steps_to_success: step count (1-based) at the first success, or None.
        episode_return: cumulative reward (see module docstring).
    """

    reward_coef: float
    steps: int = 0
    success_once: bool = False
    success_now: bool = False
    steps_to_success: int | None = None
    episode_return: float = 0.0

    def record_step(self, success: bool) -> None:
        """Account for one executed env step whose success predicate is ``success``."""
        self.steps += 1
        self.success_now = bool(success)
        if success and not self.success_once:
            self.episode_return += self.reward_coef
            self.success_once = True
            self.steps_to_success = self.steps

    @property
    def reward(self) -> float:
        """Return divided by the steps to success (or by the steps so far; at least 1)."""
        denom = self.steps_to_success if self.success_once else self.steps
        return self.episode_return / max(1, denom or 0)


@dataclass(frozen=True)
class EpisodeResult:
    """One finished trajectory (one line of ``episodes.jsonl``).

    Attributes:
        epoch, env_index, worker: where it ran (see :class:`rpent.eval.plan.EpisodeSlot`).
        task_id, init_state_id: the (task, reset state) pair.
        task_language: the task's instruction.
        success_once, success_at_end, episode_return, reward, episode_len, steps_to_success:
            see the module docstring (episode_len and steps_to_success in env steps).
        num_policy_queries: policy calls made for this episode.
        wall_s: wall time of the episode in its worker (s).
        video: path of its mp4 relative to the log dir, or None.
    """

    epoch: int
    env_index: int
    worker: int
    task_id: int
    init_state_id: int
    task_language: str
    success_once: bool
    success_at_end: bool
    episode_return: float
    reward: float
    episode_len: int
    steps_to_success: int | None
    num_policy_queries: int
    wall_s: float
    video: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeResult:
        """Inverse of :meth:`to_dict` (unknown keys ignored)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class TaskRow:
    """One row of the per-task success table."""

    task_id: int
    task_language: str
    num_trajectories: int
    success_once: float
    success_at_end: float
    init_state_ids: tuple[int, ...] = field(default=())


def aggregate(results: Sequence[EpisodeResult]) -> dict[str, float]:
    """The ``eval/*`` metrics (:data:`METRIC_KEYS`) over ``results``; all 0 with no results."""
    n = len(results)
    if n == 0:
        return {k: 0.0 for k in METRIC_KEYS}

    def mean(values: Sequence[float]) -> float:
        return float(sum(values)) / n

    return {
        "eval/success_once": mean([float(r.success_once) for r in results]),
        "eval/success_at_end": mean([float(r.success_at_end) for r in results]),
        "eval/return": mean([r.episode_return for r in results]),
        "eval/reward": mean([r.reward for r in results]),
        "eval/episode_len": mean([float(r.episode_len) for r in results]),
        "eval/num_trajectories": float(n),
    }


def per_task_table(results: Sequence[EpisodeResult]) -> list[TaskRow]:
    """Per-task success rates, sorted by task id."""
    by_task: dict[int, list[EpisodeResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    rows = []
    for task_id, rs in sorted(by_task.items()):
        n = len(rs)
        rows.append(
            TaskRow(
                task_id=task_id,
                task_language=rs[0].task_language,
                num_trajectories=n,
                success_once=sum(r.success_once for r in rs) / n,
                success_at_end=sum(r.success_at_end for r in rs) / n,
                init_state_ids=tuple(sorted(r.init_state_id for r in rs)),
            )
        )
    return rows


def check_trajectory_count(num_trajectories: int, total_num_envs: int, rollout_epoch: int) -> None:
    """Raise unless ``num_trajectories == total_num_envs x rollout_epoch``.

    Raises:
        TrajectoryCountError: names both numbers and where to look (the seed's "trajectory budget").
    """
    expected = total_num_envs * rollout_epoch
    if num_trajectories != expected:
        raise TrajectoryCountError(
            f"eval/num_trajectories is {num_trajectories} but total_num_envs x rollout_epoch = "
            f"{total_num_envs} x {rollout_epoch} = {expected}; some episodes were lost - check "
            "eval_embodiment.log for worker errors and the total_num_envs / env.num_workers budget"
        )
