"""Run one toolkit call with a deadline and operator interrupts.

The tool runs in a daemon worker thread while the planner thread waits. When the
planner deadline passes, the runner calls ``toolkit.cancel()`` (motions stop at their
next env-step boundary) and waits up to ``cancel_grace_s`` for the tool to return its
``tool_cancelled`` result. Operator interrupts reach the toolkit directly through the
:class:`~rpent.planners.steering.Steering` listener the planner registers; the runner
only notices that one happened.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rpent.planners.base import Steering, Toolkit

__all__ = ["CANCEL_GRACE_S", "ToolOutcome", "run_tool"]

CANCEL_GRACE_S = 30.0
"""Seconds to wait for a cancelled tool to return (an env step takes ~13 ms on CPU;
a VLA chunk a few seconds)."""


@dataclass
class ToolOutcome:
    """Result of :func:`run_tool`.

    Attributes:
        result: the toolkit's result dict (or an error dict if it misbehaved or hung).
        elapsed_s: wall-clock seconds of the call.
        timed_out: the planner deadline passed during the call (the tool was cancelled).
        interrupted: an operator interrupt arrived during the call.
    """

    result: dict[str, Any]
    elapsed_s: float
    timed_out: bool = False
    interrupted: bool = False


def run_tool(toolkit: Toolkit, name: str, args: dict[str, Any], call_id: str | None, *,
             deadline: float | None = None, steering: Steering | None = None,
             cancel_grace_s: float = CANCEL_GRACE_S) -> ToolOutcome:
    """Execute ``toolkit.execute(name, args, call_id)`` under ``deadline``.

    Args:
        deadline: ``time.monotonic()`` value after which the tool is cancelled; None = none.
        steering: used only to detect interrupts during the call.
        cancel_grace_s: seconds to wait for the tool after cancelling it.

    Returns:
        :class:`ToolOutcome`. Never raises: a toolkit exception (contract violation)
        becomes ``{"error": "toolkit raised …"}``, a tool that ignores cancel becomes
        ``{"error": "tool … did not stop …", "code": "tool_cancelled", "interrupted": True}``.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    seq0 = steering.interrupt_count if steering is not None else 0

    def work() -> None:
        try:
            box["result"] = toolkit.execute(name, args, call_id)
        except BaseException as exc:  # the contract says never raises; keep the planner alive anyway
            box["result"] = {"error": f"toolkit raised {type(exc).__name__}: {exc}"}
        finally:
            done.set()

    start = time.monotonic()
    threading.Thread(target=work, name=f"tool-{name}", daemon=True).start()
    timed_out = False
    while not done.is_set():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            timed_out = True
            toolkit.cancel()
            done.wait(cancel_grace_s)
            break
        done.wait(0.05 if left is None else min(0.05, left))
    if not done.is_set():
        box["result"] = {"error": f"tool {name} did not stop within {cancel_grace_s:g}s after cancel",
                         "code": "tool_cancelled", "interrupted": True}
    result = box.get("result")
    if not isinstance(result, dict):
        result = {"error": f"toolkit returned {type(result).__name__}, expected dict"}
    interrupted = steering is not None and steering.interrupt_count != seq0
    return ToolOutcome(result=result, elapsed_s=time.monotonic() - start, timed_out=timed_out,
                       interrupted=interrupted)
