"""Which (task, reset state) pair every env runs in every rollout epoch.

The product document's evaluation guide ("trajectory budget") says LIBERO's evaluation reset-state
pool is interleaved across tasks and then assigned round-robin; changing the number of envs changes
how many reset states of each task are covered. Concretely (as in RLinf's LIBERO env for eval):

1. **Interleaved pool.** With ``n_t`` init states for task ``t``, the pool lists
   ``(task 0, state 0), (task 1, state 0), ..., (task T-1, state 0), (task 0, state 1), ...``
   (tasks with fewer states drop out once exhausted). Length ``N = sum(n_t)``.
2. **Round-robin over envs.** Env slot ``g`` (0 <= g < E = total_num_envs, numbered worker-major:
   worker ``w`` owns slots ``w*E/W .. (w+1)*E/W - 1``) gets pool entries ``g, g+E, g+2E, ...``;
   in epoch ``e`` it runs pool entry ``(e*E + g) mod N``.
3. **Wrap-around.** When ``rollout_epoch*E > N`` the pool is walked again from the start, so some
   pairs run twice; the trajectory count is always exactly ``E x rollout_epoch`` (never silently
   truncated). :meth:`EvalPlan.coverage_lines` reports repeats.

Example: LIBERO-10 (10 tasks x 50 states), E=10, 10 epochs: epoch ``e`` runs state ``e`` of every
task; env ``g`` always runs task ``g`` -> 10 tasks x states 0-9 = 100 distinct trajectories.
E=80, 10 epochs: pool entries 0-799 mod 500 -> states 0-49 of every task once, plus states 0-29
of every task a second time. E=20, 10 epochs: states 0-19 of every task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeSlot:
    """One planned episode.

    Attributes:
        epoch: rollout epoch (0-based).
        env_index: global env slot ``g`` (0 <= g < total_num_envs).
        worker: worker process that owns the slot.
        local_index: the slot's index inside its worker.
        task_id: task index within the suite.
        init_state_id: index into that task's init states (the "reset state" / trial id).
        pool_index: position in the interleaved pool (after wrap-around: ``(e*E+g) mod N``).
    """

    epoch: int
    env_index: int
    worker: int
    local_index: int
    task_id: int
    init_state_id: int
    pool_index: int


def interleaved_pool(init_state_counts: Sequence[int],
                     init_state_ids: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """The interleaved reset-state pool: ``[(task, state), ...]`` state-major, task-minor.

    Args:
        init_state_counts: number of init states of each task (index = task id), each >= 0.
        init_state_ids: only these init states (e.g. a held-out ``40..49``), in increasing order;
            None: every state.

    Raises:
        ValueError: no task has any (selected) init state.
    """
    if not init_state_counts or max(init_state_counts) <= 0:
        raise ValueError("the suite has no init states: cannot build the reset-state pool")
    states = range(max(init_state_counts)) if init_state_ids is None else sorted(set(init_state_ids))
    pool: list[tuple[int, int]] = []
    for state in states:
        for task, count in enumerate(init_state_counts):
            if state < count:
                pool.append((task, state))
    if not pool:
        raise ValueError(f"no task has init states {list(states)} (the tasks have {max(init_state_counts)} at most)")
    return pool


@dataclass(frozen=True)
class EvalPlan:
    """The full episode schedule of one evaluation.

    Attributes:
        suite: suite name (for messages).
        task_languages: each task's instruction (index = task id).
        init_state_counts: init states per task.
        total_num_envs: E.
        num_workers: W (E % W == 0).
        rollout_epoch: epochs.
        slots: every :class:`EpisodeSlot`, epoch-major then env index.
    """

    suite: str
    task_languages: tuple[str, ...]
    init_state_counts: tuple[int, ...]
    total_num_envs: int
    num_workers: int
    rollout_epoch: int
    slots: tuple[EpisodeSlot, ...]

    @property
    def num_trajectories(self) -> int:
        """Planned episodes: ``total_num_envs x rollout_epoch``."""
        return len(self.slots)

    def epoch_slots(self, epoch: int, worker: int | None = None) -> list[EpisodeSlot]:
        """The slots of one epoch (optionally of one worker), ordered by env index."""
        return [s for s in self.slots if s.epoch == epoch and (worker is None or s.worker == worker)]

    def pairs_by_task(self) -> dict[int, list[int]]:
        """``task_id -> sorted init-state ids run`` (a repeated pair appears twice)."""
        out: dict[int, list[int]] = {}
        for s in self.slots:
            out.setdefault(s.task_id, []).append(s.init_state_id)
        return {t: sorted(v) for t, v in sorted(out.items())}

    def coverage_lines(self) -> list[str]:
        """Human-readable description of which (task, reset state) pairs this setting covers."""
        pool_size = sum(self.init_state_counts)
        in_pool = [t for t, c in enumerate(self.init_state_counts) if c > 0]
        n_tasks = len(in_pool)
        by_task = self.pairs_by_task()
        pairs = Counter((s.task_id, s.init_state_id) for s in self.slots)
        repeats = sum(c - 1 for c in pairs.values())
        lines = [
            f"reset-state plan: suite {self.suite}, {n_tasks} task(s) {_ranges(in_pool)}, pool of {pool_size} (task, reset state) "
            f"pairs interleaved across tasks; {self.total_num_envs} envs x {self.rollout_epoch} epochs = "
            f"{self.num_trajectories} trajectories over {self.num_workers} worker(s) "
            f"({self.total_num_envs // self.num_workers} envs each)",
            f"covers {len(pairs)} distinct pairs"
            + (f"; {repeats} trajectories repeat a pair (pool wrapped around)" if repeats else ""),
        ]
        for task, states in by_task.items():
            lines.append(f"  task {task:>2} ({len(states)} eps): reset states {_ranges(states)}")
        missing = [t for t in in_pool if t not in by_task]
        if missing:
            lines.append(f"  tasks not covered at all: {_ranges(missing)} (raise total_num_envs or rollout_epoch)")
        for w in range(self.num_workers):
            envs = sorted({s.env_index for s in self.slots if s.worker == w})
            lines.append(f"  worker {w}: env slots {_ranges(envs)}")
        return lines


def _ranges(values: Sequence[int]) -> str:
    """Compact ``0-9, 12, 14-15`` form of a sorted int list; repeats shown as ``3x2``."""
    counts = Counter(values)
    uniq = sorted(counts)
    parts: list[str] = []
    i = 0
    while i < len(uniq):
        j = i
        while j + 1 < len(uniq) and uniq[j + 1] == uniq[j] + 1 and counts[uniq[j + 1]] == counts[uniq[i]]:
            j += 1
        span = str(uniq[i]) if i == j else f"{uniq[i]}-{uniq[j]}"
        parts.append(span + (f" (x{counts[uniq[i]]})" if counts[uniq[i]] > 1 else ""))
        i = j + 1
    return ", ".join(parts)


def build_plan(
    suite: str,
    init_state_counts: Sequence[int],
    task_languages: Sequence[str],
    *,
    total_num_envs: int,
    num_workers: int,
    rollout_epoch: int,
    init_state_ids: Sequence[int] | None = None,
) -> EvalPlan:
    """Build the interleaved, round-robin episode schedule (see the module docstring).

    Args:
        suite: suite name.
        init_state_counts: init states per task.
        task_languages: instruction of each task (same length).
        total_num_envs: E >= 1.
        num_workers: W >= 1 with E % W == 0.
        rollout_epoch: epochs >= 1.
        init_state_ids: only these init states (held-out evaluation), or None for all.

    Raises:
        ValueError: inconsistent lengths, non-positive counts, or E not divisible by W.
    """
    if len(task_languages) != len(init_state_counts):
        raise ValueError(
            f"{len(task_languages)} task languages for {len(init_state_counts)} tasks; they must match"
        )
    if total_num_envs < 1 or num_workers < 1 or rollout_epoch < 1:
        raise ValueError("total_num_envs, num_workers and rollout_epoch must all be >= 1")
    if total_num_envs % num_workers:
        raise ValueError(
            f"total_num_envs ({total_num_envs}) must be divisible by the number of environment processes ({num_workers})"
        )
    pool = interleaved_pool(init_state_counts, init_state_ids)
    per_worker = total_num_envs // num_workers
    slots = []
    for epoch in range(rollout_epoch):
        for g in range(total_num_envs):
            idx = (epoch * total_num_envs + g) % len(pool)
            task, state = pool[idx]
            slots.append(EpisodeSlot(epoch, g, g // per_worker, g % per_worker, task, state, idx))
    return EvalPlan(
        suite=suite,
        task_languages=tuple(task_languages),
        init_state_counts=tuple(int(c) for c in init_state_counts),
        total_num_envs=total_num_envs,
        num_workers=num_workers,
        rollout_epoch=rollout_epoch,
        slots=tuple(slots),
    )
