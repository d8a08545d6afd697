"""Episode metrics: per-step accumulation in the env workers and the ``eval/*`` aggregate.

Definitions (the product document's metric table, evaluation guide step 6, and RLinf's LIBERO env
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

Every rate is reported with its count k/N and the Wilson score 95% interval
(``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``; lerobot's eval reports the same
interval). A run that lost episodes is :class:`Completeness` ``complete=False``: its outputs say
INCOMPLETE with k, N and the expected N, and name each lost (task, init state, epoch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rpent.batch.stats import wilson_interval  # one definition for batch reports and evaluations
from rpent.eval.errors import TrajectoryCountError

RATE_KEYS = ("eval/success_once", "eval/success_at_end")
"""Metrics that are fractions of trajectories (reported as k/N with a Wilson interval)."""

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
class Rate:
    """A success rate k/n with its Wilson 95% interval.

    Attributes:
        k: successes; n: trajectories; low/high: Wilson 95% bounds (None when n == 0).
    """

    k: int
    n: int
    low: float | None
    high: float | None

    @classmethod
    def of(cls, k: int, n: int) -> "Rate":
        """Build with the interval computed."""
        ci = wilson_interval(k, n)
        return cls(int(k), int(n), *(ci if ci is not None else (None, None)))

    @classmethod
    def from_fraction(cls, rate: float, n: int) -> "Rate":
        """Recover k = round(rate x n) from a mean of 0/1 values over n trajectories (exact for
        any n below 2**52), then build."""
        return cls.of(int(round(float(rate) * n)), n)

    @property
    def value(self) -> float:
        """k / n (0.0 when n == 0)."""
        return self.k / self.n if self.n else 0.0

    def text(self, digits: int = 4) -> str:
        """``"1/2 [Wilson 95% 0.0945, 0.9055]"`` (``"0/0 [no trajectories]"`` when n == 0)."""
        if self.low is None:
            return f"{self.k}/{self.n} [no trajectories]"
        return f"{self.k}/{self.n} [Wilson 95% {self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_dict(self) -> dict[str, Any]:
        """``{"k", "n", "rate", "wilson95": [low, high] | None}``."""
        return {"k": self.k, "n": self.n, "rate": self.value,
                "wilson95": None if self.low is None else [self.low, self.high]}


@dataclass(frozen=True)
class Completeness:
    """How much of the planned evaluation finished.

    Attributes:
        expected: planned trajectories (``total_num_envs x rollout_epoch``).
        finished: trajectories that finished.
        lost: ``(task_id, init_state_id, epoch, env_index)`` of every planned episode that did not finish.
        reason: why the run stopped early (the error), or "".
    """

    expected: int
    finished: int
    lost: tuple[tuple[int, int, int, int], ...] = ()
    reason: str = ""

    @property
    def complete(self) -> bool:
        """True when every planned trajectory finished."""
        return self.finished == self.expected and not self.lost

    def marker(self) -> str:
        """``"INCOMPLETE: 2 of 4 expected trajectories"`` ("" when complete)."""
        return "" if self.complete else f"INCOMPLETE: {self.finished} of {self.expected} expected trajectories"

    def lost_text(self, limit: int = 20) -> str:
        """``"(task 2, init state 1, epoch 1), ..."`` (at most ``limit`` named, then a count)."""
        items = [f"(task {t}, init state {s}, epoch {e})" for t, s, e, _ in self.lost[:limit]]
        more = len(self.lost) - limit
        return ", ".join(items) + (f" and {more} more" if more > 0 else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``metrics.json``."""
        return {"complete": self.complete, "num_trajectories": self.finished, "expected_trajectories": self.expected,
                "lost_episodes": [{"task_id": t, "init_state_id": s, "epoch": e, "env_index": g}
                                  for t, s, e, g in self.lost],
                "stopped_by": self.reason or None}


def rates(metrics: dict[str, float]) -> dict[str, Rate]:
    """:data:`RATE_KEYS` of an :func:`aggregate` result as :class:`Rate` (k/N and Wilson interval)."""
    n = int(metrics.get("eval/num_trajectories", 0))
    return {k: Rate.from_fraction(metrics[k], n) for k in RATE_KEYS if k in metrics}


@dataclass(frozen=True)
class TaskRow:
    """One row of the per-task success table."""

    task_id: int
    task_language: str
    num_trajectories: int
    success_once: float
    success_at_end: float
    init_state_ids: tuple[int, ...] = field(default=())

    def rate(self, which: str) -> Rate:
        """``"success_once"`` or ``"success_at_end"`` of this task as a :class:`Rate`."""
        return Rate.from_fraction(getattr(self, which), self.num_trajectories)


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
