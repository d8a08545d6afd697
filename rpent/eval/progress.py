"""Terminal progress of an evaluation: rich bars over rollout epochs and episodes, and a live summary.

:class:`EvalProgress` consumes the driver's events (``epoch_start``, ``episode``, ``epoch_done``) and
renders, on stderr:

* ``Evaluating Rollout Epochs`` (the seed's progress-bar name) - epochs done / rollout_epoch;
* ``Episodes`` - trajectories done / total_num_envs x rollout_epoch;
* a live summary: success_once / success_at_end so far (k/N and the Wilson 95% interval) and the
  per-task success table.

On a non-interactive stream rich renders only the final state.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from rpent.eval.metrics import Completeness, EpisodeResult, aggregate, per_task_table, rates


def summary_table(results: list[EpisodeResult], task_languages: tuple[str, ...] = (),
                  completeness: Completeness | None = None) -> Table:
    """Rich table: overall eval/* so far (k/N, Wilson 95%) and per-task success_once / success_at_end;
    an INCOMPLETE title when ``completeness`` says so."""
    metrics = aggregate(results)
    r = rates(metrics)
    title = (f"success_once {metrics['eval/success_once']:.3f} {r['eval/success_once'].text(3)}   success_at_end "
             f"{metrics['eval/success_at_end']:.3f} {r['eval/success_at_end'].text(3)}   "
             f"trajectories {int(metrics['eval/num_trajectories'])}")
    if completeness is not None and not completeness.complete:
        title = f"{completeness.marker()}   {title}"
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("task", justify="right", no_wrap=True, min_width=4)
    table.add_column("eps", justify="right", no_wrap=True, min_width=3)
    table.add_column("succ_once k/N [95%]", justify="right", no_wrap=True, min_width=21)
    table.add_column("succ_end k/N [95%]", justify="right", no_wrap=True, min_width=21)
    table.add_column("instruction", no_wrap=True, overflow="ellipsis", ratio=1)
    for row in per_task_table(results):
        text = row.task_language if len(row.task_language) <= 30 else row.task_language[:29] + "…"
        once, end = row.rate("success_once"), row.rate("success_at_end")
        table.add_row(str(row.task_id), str(row.num_trajectories),
                      f"{row.success_once:.2f} {once.k}/{once.n} [{once.low:.2f},{once.high:.2f}]",
                      f"{row.success_at_end:.2f} {end.k}/{end.n} [{end.low:.2f},{end.high:.2f}]", text)
    return table


class EvalProgress:
    """Live progress display; use as a context manager and feed :meth:`on_event`.

    Args:
        rollout_epoch: epochs planned; total_trajectories: episodes planned.
        console: rich console (default: stderr).
        enabled: False turns every call into a no-op (``--no-progress``).
    """

    def __init__(self, rollout_epoch: int, total_trajectories: int, console: Console | None = None, enabled: bool = True):
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self.results: list[EpisodeResult] = []
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
        )
        self.epoch_task = self.progress.add_task("Evaluating Rollout Epochs", total=rollout_epoch)
        self.episode_task = self.progress.add_task("Episodes", total=total_trajectories)
        self._live: Live | None = None

    def _render(self) -> Group:
        return Group(self.progress, summary_table(self.results))

    def __enter__(self) -> EvalProgress:
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    def on_event(self, event: dict[str, Any]) -> None:
        """Update bars/summary from one driver event."""
        kind = event.get("kind")
        if kind == "episode":
            self.results.append(event["result"])
            self.progress.advance(self.episode_task)
        elif kind == "epoch_done":
            self.progress.advance(self.epoch_task)
        if self._live is not None:
            self._live.update(self._render())
