"""Exploration of one cell (``rpent --explore``; RPent reference §6.3).

Up to ``sessions`` sessions; each is a full run (its own env server, a fresh toolkit from a
clean reset, a fresh planner) recorded in ``<explore dir>/sessions/session_NNN/``. Session 1
gets the task message; later sessions get the hand-off message (agent k of K, the archived
attempts and the working notes). Within a session the planner may ``reset`` up to
``attempts_per_session`` times (:mod:`rpent.explore.toolkit`). The loop stops when the cell is
solved, on a planner error (a timeout moves on to the next session), or when the sessions are
used up. A session solves the cell when its run is labelled ``succeeded`` and the environment
predicate held (:mod:`rpent.recording.outcome`; with a required verdict, the operator decides).
Then, only when solved: the solving session's transcript and recipe are published to
the memory inbox as ``<cell>.json`` + ``<cell>_recipe.jsonl`` (and the recipe to the explore
directory), and unless ``auto_merge`` is off the inbox is merged with ``solved=True``.
``explore.json`` in the explore directory says what happened; it is rewritten (atomically) when
a session starts or ends and when an attempt is archived, with ``status: running`` and the
``current`` session/attempt until the loop ends (``status: finished``), so the TUI's Explore
screen can follow a running exploration.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rpent.recording.atomic import write_bytes_atomic

__all__ = ["ExploreOptions", "run_explore", "explore_prompt", "handoff_message"]

log = logging.getLogger("rpent.run")


@dataclass
class ExploreOptions:
    """``--explore-sessions``, ``--explore-attempts-per-session`` (0 = unlimited), auto-merge."""

    sessions: int = 3
    attempts_per_session: int = 5
    auto_merge: bool = True


def explore_prompt(cell: str, attempts: int) -> str:
    """The exploration system prompt (its own file, not a patch of the evaluation prompt)."""
    text = resources.files("rpent.explore").joinpath("prompt.md").read_text(encoding="utf-8")
    return text.format(cell=cell, attempts="unlimited" if attempts == 0 else attempts)


def handoff_message(k: int, total: int, root: Path, archived: list[str], notes: str, task_message: str) -> str:
    """The first user message of session ``k`` > 1 (reference §6.3 hand-off)."""
    lines = [f"You are agent {k} of up to {total} on this cell. {len(archived)} attempt(s) by earlier agents are "
             f"archived in {root / 'attempts'}/ ({', '.join(sorted(archived)) or 'none'}).",
             "Working notes in the memory inbox under wip/notes.md:", notes.strip() or "(none)",
             "A fresh toolkit has already restored a clean scene.", "", task_message]
    for rel in sorted(archived):
        try:
            doc = json.loads((root / rel).read_text(encoding="utf-8"))
            lever = next((v for k2, v in doc.items() if k2.startswith("changed_lever_vs_attempt")), "")
            lines.append(f"- {rel}: failed because: {doc.get('reason')}; next lever: {lever}")
        except (OSError, ValueError):
            continue
    return "\n".join(lines)


async def run_explore(cfg, opts: ExploreOptions, *, operator=None, steering=None, verbose: bool = False) -> dict:
    """Explore ``cfg``'s cell (see module docstring); returns the ``explore.json`` document.

    Args:
        cfg: a :class:`rpent.run.RunConfig` with ``memory_dir`` set (the corpus to draft into)
            and ``output_dir`` (the explore directory).
    Raises:
        ValueError: code mode, or no memory dir (checked before anything starts).
    """
    from rpent.explore.toolkit import ExploreState, explore_toolkit_class
    from rpent.flash.files import cell_tag
    from rpent.memory.layout import corpus_dir
    from rpent.memory.merge import inbox_dir
    from rpent.robots.libero import prompts, suites
    from rpent.run import run_task
    from rpent.services import Supervisor

    if cfg.policy_mode == "code" or cfg.code_file:
        raise ValueError("--policy-mode code does not work with --explore (code mode reads no task memory and writes "
                         "no recipe); drop --explore or use --policy-mode tools")
    if cfg.memory_dir is None:
        raise ValueError("--explore needs --memory-dir (drafts go to its inbox)")
    root = Path(cfg.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    cell = cell_tag(cfg.suite, cfg.task, cfg.seed)
    corpus = corpus_dir(cfg.memory_dir, cfg.robot)
    state = ExploreState(root=root, inbox=inbox_dir(corpus, cell), attempts_per_session=opts.attempts_per_session)
    info = suites.task_info(cfg.suite, cfg.task, suites.check_libero_type(cfg.libero_type))
    task_msg = prompts.task_message(cfg.suite, cfg.task, cfg.seed, info.language)
    system = explore_prompt(cell, opts.attempts_per_session)
    if (corpus / "MEMORY.md").is_file():
        from rpent.memory.context import load_context

        ctx = load_context(cfg.memory_dir, cfg.robot, cfg.suite, cfg.task)
        system += ctx.prompt_section()
    doc: dict = {"cell": cell, "suite": cfg.suite, "task": cfg.task, "seed": cfg.seed, "planner": cfg.planner,
                 "status": "running", "sessions_max": opts.sessions,
                 "attempts_per_session": opts.attempts_per_session, "sessions": [], "current": None,
                 "attempts_archived": [], "solved": False, "merged": None, "error": None,
                 "memory_inbox": str(state.inbox)}

    def progress() -> None:
        """Rewrite ``explore.json`` (atomically) so watchers (the TUI's Explore screen) see the
        current session and attempt while the exploration runs."""
        doc["current"] = {"session": state.session, "attempt": state.attempt} if doc["status"] == "running" else None
        doc["attempts_archived"] = list(state.archived)
        write_bytes_atomic(root / "explore.json", (json.dumps(doc, indent=1) + "\n").encode("utf-8"))

    state.on_change = progress
    try:
        solving = None
        for k in range(1, opts.sessions + 1):
            state.session, state.attempt, state.calls = k, 1, []
            doc["sessions"].append({"session": k, "output_dir": str(root / "sessions" / f"session_{k:03d}"),
                                    "attempts": 1, "state": "running"})
            progress()
            scfg = copy.copy(cfg)
            scfg.planner_config = copy.copy(cfg.planner_config)  # a fresh planner (and its output dir) per session
            scfg.planner_config.output_dir = None
            scfg.memory_dir = None  # the exploration prompt carries the memory; runs never write the corpus
            scfg.output_dir = str(root / "sessions" / f"session_{k:03d}")
            if k > 1:
                notes_path = state.inbox / "wip" / "notes.md"
                notes = notes_path.read_text(encoding="utf-8") if notes_path.is_file() else ""
                scfg.user_message = handoff_message(k, opts.sessions, root, state.archived, notes, task_msg)
            async with Supervisor(log_dir=scfg.output_dir) as sup:
                outcome = await run_task(scfg, sup, operator=operator, steering=steering, verbose=verbose,
                                         toolkit_cls=explore_toolkit_class(state), system_prompt=system)
            doc["sessions"][-1].update({"attempts": state.attempt, "state": "finished",
                                        "environment_success": outcome.environment_success, "error": outcome.error,
                                        "stop_reason": outcome.stop_reason, "finish": outcome.finish,
                                        "label": outcome.label, "disagreement": outcome.disagreement})
            progress()
            # solved = labelled succeeded with the predicate holding (the label policy of
            # rpent.recording.outcome): an operator's failure or abort verdict is no solution
            if outcome.label == "succeeded" and outcome.environment_success is True:
                doc["solved"], solving = True, Path(scfg.output_dir)
                break
            if outcome.error and outcome.stop_reason != "timeout":
                doc["error"] = outcome.error
                break
        doc["attempts_archived"] = list(state.archived)
        if solving is not None:
            state.inbox.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(state.inbox / f"{cell}.json", (solving / f"transcript_{cell}.json").read_bytes())
            recipe = (solving / f"{cell}_recipe.jsonl").read_bytes()
            write_bytes_atomic(state.inbox / f"{cell}_recipe.jsonl", recipe)
            write_bytes_atomic(root / f"{cell}_recipe.jsonl", recipe)
            if opts.auto_merge and doc["error"] is None:
                from rpent.memory.merge import MergeError, merge_inbox

                try:
                    doc["merged"] = merge_inbox(corpus, cell, solved=True).to_dict()
                except MergeError as exc:
                    doc["error"] = f"memory merge refused: {exc}"
    except BaseException as exc:  # a crash or a cancellation: the record says so, never "running" forever
        doc["status"] = "finished"
        doc["error"] = doc["error"] or f"exploration ended by {type(exc).__name__}: {exc}"
        for sess in doc["sessions"]:
            if sess.get("state") == "running":
                sess["state"] = "finished"
                sess.setdefault("error", doc["error"])
        progress()
        raise
    doc["status"] = "finished"
    progress()
    log.info("exploration of %s: solved=%s sessions=%d archived=%d merged=%s", cell, doc["solved"],
             len(doc["sessions"]), len(state.archived), bool(doc["merged"]))
    return doc
