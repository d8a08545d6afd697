"""Exceptions raised inside a code-policy cell (worker side).

Policy code sees these classes as ``robo.ToolError``, ``robo.EpisodeFinished`` and so on,
and can catch the ``Exception`` ones. The convention follows PyRUA-Lean's (upstream RPent's code-policy notes): bad arguments and tool failures raise,
*measured* failures (a servo that stopped short, a pick whose lift check failed, a
segment that found nothing) are ordinary return values the code must check.

Two classes derive from ``BaseException`` on purpose, so that ``except Exception:`` in
policy code cannot swallow them: :class:`EpisodeFinished` (an accepted ``robo.finish``)
and :class:`CellInterrupted` (the cell's wall-time limit, or an operator interrupt).
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """A robot tool answered with an error dict (``{"error": ..., ...}``).

    Attributes:
        tool: the tool's name, e.g. ``"move_to"``.
        error: the full error dict the toolkit returned (JSON-able), e.g.
            ``{"error": "bad arguments for move_to: ...", "got": {...}}``.
        code: ``error.get("code")`` (e.g. ``"tool_cancelled"``) or ``None``.
    """

    def __init__(self, tool: str, error: dict[str, Any]):
        self.tool = tool
        self.error = dict(error)
        self.code = self.error.get("code")
        super().__init__(f"{tool}: {self.error.get('error')}")


class CallBudgetExhausted(RuntimeError):
    """The cell already made ``max_calls`` robot-tool calls; this one was refused.

    The budget (``--code-max-calls``, default 100) is counted by the parent process, so
    policy code cannot reset it. A robot call of the same cell after this refusal ends the
    cell (the parent kills its worker, so the next cell starts a fresh interpreter); a new
    cell gets a fresh budget. ``robo.finish`` is never refused for budget reasons.
    """


class OperatorToolUnavailable(RuntimeError):
    """An operator tool (``request_scene_reset``, ``request_operator_verdict``) was called
    from Python. These wait for a person, which can outlast a cell, so they exist only as
    ordinary planner tools outside the ``python`` tool."""


class EpisodeFinished(BaseException):
    """``robo.finish(status, summary)`` was accepted: the cell stops here.

    A ``BaseException`` so that ``except Exception`` cannot swallow it; statements after
    an accepted finish do not run. Any robot call after an accepted finish raises it
    again (the parent refuses it), so even code that catches ``BaseException`` cannot
    move the robot afterwards.

    Attributes:
        status: the finish status (convention ``success`` / ``failure`` / ``stuck``).
        summary: the finish summary text.
    """

    def __init__(self, status: str, summary: str):
        self.status = status
        self.summary = summary
        super().__init__(f"episode finished: status={status!r}")


class CellInterrupted(BaseException):
    """The cell was interrupted from outside (the operator's interrupt).

    A ``BaseException`` so ``except Exception`` cannot swallow it. If policy code catches
    it anyway and keeps running, the parent kills the worker after a grace period and the
    next cell starts in a fresh worker (the namespace is lost).
    """


class CellTimeout(CellInterrupted):
    """The cell ran past its wall-time limit (``--code-timeout-s``, default 120 s).

    The robot primitive that was running stopped at its next env-step boundary (the
    parent set the toolkit's cancel flag); the rest of the cell does not run.
    """
