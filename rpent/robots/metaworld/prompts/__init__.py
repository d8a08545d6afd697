"""Prompts of the Meta-World planner in tool mode: one system prompt, one task message."""

from __future__ import annotations

from importlib import resources

__all__ = ["system_prompt", "task_message"]


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def system_prompt(*, require_operator_verdict: bool = False, vla_available: bool = False) -> str:
    """The system prompt for tool mode (``vla_available`` is ignored: no VLA tools for this robot)."""
    text = _read("system.md")
    if require_operator_verdict:
        text += ("- Before finish, call request_operator_verdict and report the operator's answer: finish is refused "
                 "until an operator verdict exists.\n")
    return text


def task_message(suite: str, task: int, seed: int, task_language: str) -> str:
    """The first user message: the task and its identity."""
    from rpent.robots.metaworld import tasks

    name = tasks.task_info(suite, task).name
    return _read("task.md").format(suite=suite, task=task, env_name=name, seed=seed, task_language=task_language)
