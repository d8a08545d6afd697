"""Prompts of the LIBERO planner in tool mode: one system prompt, one task message.

All planners (api, claude_code, codex, scripted) get the same rendered text, so runs can be
compared head to head. The rules encode the toolkit's conventions and the pitfalls of
RPent reference §3.2 and §9 (world frame, metres, radians, |dxy| <= 0.30 m per move_to,
natural-orientation pixels for back_project, success = the environment's predicate).
"""

from __future__ import annotations

from importlib import resources

__all__ = ["system_prompt", "task_message"]


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def system_prompt(*, require_operator_verdict: bool = False, vla_available: bool = False) -> str:
    """The system prompt for tool mode.

    Args:
        require_operator_verdict: add the rule that ``finish`` needs an operator verdict first.
        vla_available: mention the VLA tools (``pi0_pick``, ``pi0_doubled``).
    """
    text = _read("system.md")
    extra = []
    if vla_available:
        extra.append("- pi0_pick / pi0_doubled run the Pi0.5 VLA closed loop with your instruction; "
                     "prefer them for grasps and contact skills when they are available.")
    if require_operator_verdict:
        extra.append("- Before finish, call request_operator_verdict and report the operator's answer: "
                     "finish is refused until an operator verdict exists.")
    return text + ("\n" + "\n".join(extra) + "\n" if extra else "")


def task_message(suite: str, task: int, seed: int, task_language: str) -> str:
    """The first user message: the task and its identity."""
    return _read("task.md").format(suite=suite, task=task, seed=seed, task_language=task_language)
