"""Flash plans of an arm with ``flash_from``: the source arm's solved runs become the arm's plans.

Before the cells of a flash arm (``planner: flash``, ``flash_from: <source arm>``) run, the
runner calls :func:`prepare_flash_arm`. For each (suite, task) of the matrix it looks at the
source arm's cell ``(suite, task, flash_seed, repeat 0)``:

* decided **success**: its run becomes ``<results root>/flash/<arm>/<tag>_plan.json`` and
  ``_anchors.json`` through :func:`rpent.flash.generate.generate` (the code behind
  ``rpent-flash generate``; ``<tag>`` is the run's recipe tag, e.g. ``object_task_t3_s0``) unless
  both files are there already (a resumed batch keeps its plans; a plan without its anchors, left
  by an interrupted generation, is generated again). The arm's runs get ``--flash-dir`` of that
  directory. A solved run that cannot become a plan (``FlashGenerateError``: e.g. it localised
  nothing) leaves the task without a plan;
* decided **failure**: the task has no plan;
* not decided yet (pending, infrastructure errors): the arm's cells of that task wait (they stay
  pending; re-running the batch resumes them once the source cell is decided).

A task without a plan is a task the flash method cannot do: its cells are decided as failures
without a run (``not_run.json`` with reason ``flash_plan_missing``, see rpent.batch.records), as
a flash replay without a plan fails. The plans live in the results root, so every node of a Ray
cluster that runs flash cells must see the results root (``results: shared``).

An arm with ``share_env: true`` runs the cells of one task (and repeat) as one job:
``rpent-flash replay`` (:mod:`rpent.flash.batch`) on one env server, every episode its own run
record in its cell's attempt directory (``--run-dir SEED=DIR``); the replay's own files
(``replay.jsonl``, ``env_server.log``, its output) go to ``runs/<arm>/_replay/<suite>_t<task>_r<repeat>/
replay-<N>/``. :func:`replay_argv` builds its command line (the rpent flags it understands are passed
on, :data:`REPLAY_FLAGS`; others are refused); :func:`replay_walls` reads each episode's wall time
with its share of the env server's start from ``replay.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import CellState, ResultsRoot
from rpent.flash.files import anchors_path, cell_tag, plan_path

__all__ = ["FlashPreparation", "TaskPlan", "prepare_flash_arm", "NO_PLAN", "REPLAY_FLAGS", "replay_flags",
           "replay_argv", "replay_walls"]

#: ``not_run.json`` reason of a flash cell whose task has no plan
NO_PLAN = "flash_plan_missing"


@dataclass
class TaskPlan:
    """The plan state of one (suite, task) of a flash arm.

    Attributes:
        suite, task: the task.
        state: ``plan`` (plan files ready) | ``no_plan`` (the cells fail without a run) |
            ``waiting`` (the source cell is not decided yet).
        source_key: the source arm's cell key. source_run: its deciding attempt's run directory.
        plan: the plan file (state ``plan``). detail: why there is no plan / what it waits for.
        generated: True when this call wrote the plan (False: it was there already).
    """

    suite: str
    task: int
    state: str
    source_key: str
    source_run: str | None = None
    plan: str | None = None
    detail: str | None = None
    generated: bool = False


@dataclass
class FlashPreparation:
    """:func:`prepare_flash_arm`'s result: one :class:`TaskPlan` per (suite, task)."""

    flash_dir: Path
    tasks: dict[tuple[str, int], TaskPlan] = field(default_factory=dict)

    def of(self, cell: Cell) -> TaskPlan:
        """The task plan of a cell of the arm."""
        return self.tasks[(cell.suite, cell.task)]


def prepare_flash_arm(root: ResultsRoot, matrix: Matrix, arm: Arm, states: dict[str, CellState]) -> FlashPreparation:
    """Make (or find) the flash plans of ``arm`` from its source arm's decided runs (module docstring).

    Args:
        root: the results root. matrix: the experiment. arm: an arm with ``flash_from``.
        states: current cell states of (at least) the source arm's cells.
    Returns:
        :class:`FlashPreparation`.
    Raises:
        ValueError: ``arm`` has no ``flash_from``.
        OSError: the flash directory cannot be created.
    """
    from rpent.flash.generate import FlashGenerateError, generate

    if not arm.flash_from:
        raise ValueError(f"arm {arm.name} has no flash_from")
    flash_dir = root.flash_dir(arm.name)
    prep = FlashPreparation(flash_dir)
    for suite in matrix.suites:
        for task in matrix.tasks:
            src = Cell(arm.flash_from, suite, task, arm.flash_seed, 0)
            st = states.get(src.key)
            tp = TaskPlan(suite, task, "waiting", src.key)
            prep.tasks[(suite, task)] = tp
            decided = st.decided if st is not None else None
            if decided is None:
                tp.detail = (f"the source cell {src.key} has no task outcome yet ({st.status if st else 'pending'}); "
                             "re-run the batch once it is decided")
                continue
            tp.source_run = decided.run_dir
            if decided.status != "success":
                tp.state = "no_plan"
                tp.detail = f"the source run {src.key} was not solved ({decided.reason or 'failure'})"
                continue
            tag = cell_tag(suite, task, arm.flash_seed)
            plan, anchors = plan_path(flash_dir, tag), anchors_path(flash_dir, tag)
            if plan.is_file() and anchors.is_file():
                tp.state, tp.plan = "plan", str(plan)
                continue
            flash_dir.mkdir(parents=True, exist_ok=True)
            run_dir = Path(decided.run_dir)
            try:
                written, _ = generate(run_dir, run_dir / f"{tag}_recipe.jsonl", flash_dir,
                                      replace=plan.exists() or anchors.exists())
            except (FlashGenerateError, OSError) as exc:
                tp.state = "no_plan"
                tp.detail = f"the solved source run {src.key} could not become a plan: {exc}"
                continue
            tp.state, tp.plan, tp.generated = "plan", str(written), True
    return prep


#: rpent flags that ``rpent-flash replay`` takes too (each with a value); ``--no-video`` is accepted and
#: dropped (a replay writes no video). Any other flag of a ``share_env`` arm is refused.
REPLAY_FLAGS = ("--max-episode-steps", "--libero-type", "--transport", "--cuda-device", "--planner-timeout-s",
                "--flash-dir")


def replay_flags(flags: list[str] | tuple[str, ...], arm: str) -> list[str]:
    """The ``rpent-flash replay`` flags of a ``share_env`` arm's rpent flags (matrix + arm flags).

    Raises:
        ValueError: a flag ``rpent-flash replay`` does not take (names it and the arm).
    """
    out: list[str] = []
    i = 0
    flags = list(flags)
    while i < len(flags):
        f = flags[i]
        name, eq, value = f.partition("=")
        if name == "--no-video":
            i += 1
            continue
        if name not in REPLAY_FLAGS:
            raise ValueError(f"arm {arm}: share_env runs rpent-flash replay, which has no {name}; remove it from the "
                             f"flags or set share_env: false (it takes {', '.join(REPLAY_FLAGS)}, --no-video)")
        if eq:
            out += [name, value]
            i += 1
        else:
            if i + 1 >= len(flags):
                raise ValueError(f"arm {arm}: {name} needs a value")
            out += [name, flags[i + 1]]
            i += 2
    return out


def replay_argv(arm: Arm, flags: list[str], suite: str, task: int, run_dirs: dict[int, Path], output_root: Path,
                flash_dir: Path | None) -> list[str]:
    """The command line of one ``share_env`` job: ``rpent-flash replay`` of ``suite``/``task`` on the
    seeds of ``run_dirs`` (seed -> the cell's attempt directory), its own files in ``output_root``.

    Raises:
        ValueError: see :func:`replay_flags`; no flash directory (neither ``flash_from`` nor ``--flash-dir``).
    """
    import sys

    extra = replay_flags(flags, arm.name)
    if flash_dir is not None:
        extra = ["--flash-dir", str(flash_dir)] + extra
    if "--flash-dir" not in extra:
        raise ValueError(f"arm {arm.name}: share_env needs its plans: flash_from (plans made by the batch) or "
                         "--flash-dir DIR in the arm's flags")
    argv = [sys.executable, "-m", "rpent.cli.flash", "replay", "--suite", suite, "--task", str(task),
            "--seeds", *[str(s) for s in run_dirs], "--output-root", str(output_root), *extra]
    for seed, d in run_dirs.items():
        argv += ["--run-dir", f"{seed}={d}"]
    return argv


def replay_walls(output_root: Path) -> dict[int, float]:
    """Each replayed episode's wall time (s) with an equal share of the env server starts of the
    replay (from ``replay.jsonl``; seeds without an episode line are absent)."""
    import json

    rows = []
    try:
        for line in (Path(output_root) / "replay.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    except OSError:
        return {}
    episodes = [r for r in rows if r.get("kind") == "episode" and isinstance(r.get("wall_s"), (int, float))]
    starts = sum(r.get("wall_s") or 0.0 for r in rows if r.get("kind") == "env_server_start")
    share = starts / len(episodes) if episodes else 0.0
    return {int(r["seed"]): round(float(r["wall_s"]) + share, 3) for r in episodes}
