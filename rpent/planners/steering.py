"""Operator steering and interrupts, shared by the CLI ``--interactive`` mode and the TUI.

A :class:`Steering` object is handed to ``Planner.solve``. Any thread (a stdin reader,
the TUI's event loop) may call :meth:`Steering.send` to queue an operator line — the
planner delivers queued lines to the model at its next turn boundary (before its next
model request) — or :meth:`Steering.interrupt` to cancel the tool call that is running
now. Planners register a listener (:meth:`add_interrupt_listener`) so that an interrupt
calls ``toolkit.cancel()`` at once, from the interrupting thread; motions then stop at
their next env-step boundary and return ``{"error", "code": "tool_cancelled",
"interrupted": True}``.

Text commands (the same in the terminal and the TUI input box), see :meth:`submit`:
``/help`` lists them, ``/quit`` cancels the running tool and ends the run,
``/interrupt`` cancels the running tool and lets the model continue (with any queued
lines), anything else is queued as an operator line.

Recording: :meth:`Steering.add_event_listener` receives one dict per operator input
(``{"t": s since the epoch, "kind": "operator_line" | "interrupt" | "stop", "text" | "reason"}``);
the run layer writes them to the run record (``steering.jsonl`` and the transcript), so
steering and interrupts are on record for every planner. An interrupt without a reason is the
operator's (``interrupted by operator``); a host stopped by a signal passes
:func:`signal_stop_reason` instead, so the record names the signal (``interrupted: terminal hung
up (SIGHUP)`` when the terminal was closed).
"""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable

__all__ = ["HELP_TEXT", "OPERATOR_PREFIX", "Steering", "signal_stop_reason"]

#: Marks operator lines delivered to a model, so it can tell them from the task text.
OPERATOR_PREFIX = "[operator] "

HELP_TEXT = """Operator commands:
  <text>        deliver <text> to the planner at its next turn boundary
  /interrupt    cancel the running tool call now; the planner continues
  /quit         cancel the running tool call and end the run
  /help         show this help"""


def signal_stop_reason(signum: int) -> str:
    """The stop reason of a run ended because its host received signal ``signum``:
    ``interrupted: terminal hung up (SIGHUP)`` (a closed terminal or tmux pane, an SSH drop),
    else ``interrupted: received SIGTERM`` and so on."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if signum == signal.SIGHUP:
        return f"interrupted: terminal hung up ({name})"
    return f"interrupted: received {name}"


class Steering:
    """Thread-safe queue of operator lines plus interrupt/stop requests.

    Args:
        interactive: when True, a planner whose model ends its turn without finishing
            waits for the next operator line instead of ending the run (CLI ``-i`` and
            the TUI chat); ``/quit`` or :meth:`interrupt` with ``stop=True`` ends it.
    """

    def __init__(self, interactive: bool = False) -> None:
        self.interactive = interactive
        self._lines: collections.deque[str] = collections.deque()
        self._cond = threading.Condition()
        self._stop_reason: str | None = None
        self._interrupt_seq = 0
        self._listeners: list[Callable[[], None]] = []
        self._event_listeners: list[Callable[[dict], None]] = []

    # -- operator side -------------------------------------------------------------------
    def send(self, line: str) -> None:
        """Queue an operator line for the next turn boundary.

        Raises:
            ValueError: ``line`` is empty or only whitespace (nothing to deliver).
        """
        text = (line or "").strip()
        if not text:
            raise ValueError("operator line is empty; type some text, or /help for commands")
        with self._cond:
            self._lines.append(text)
            self._cond.notify_all()
        self._record({"kind": "operator_line", "text": text})

    def interrupt(self, stop: bool = False, reason: str = "interrupted by operator") -> None:
        """Cancel the running tool call now (every registered listener is called).

        Args:
            stop: also end the run at the next boundary; the planner result then has
                ``stop_reason == "interrupted"`` and ``error == reason``.
            reason: text recorded as the planner error when ``stop`` is True.
        """
        with self._cond:
            self._interrupt_seq += 1
            if stop and self._stop_reason is None:
                self._stop_reason = reason
            listeners = list(self._listeners)
            self._cond.notify_all()
        self._record({"kind": "stop" if stop else "interrupt", "reason": reason})
        for fn in listeners:
            try:
                fn()
            except Exception:  # a failing listener must not block the others
                pass

    def submit(self, line: str) -> str | None:
        """Handle one typed line: a command (``/help``, ``/quit``, ``/interrupt``) or an
        operator line. Returns text to show the operator, or None.

        Unknown ``/commands`` are not sent to the model; the reply names ``/help``.
        """
        text = (line or "").strip()
        if not text:
            return None
        if text.startswith("/"):
            cmd = text.split()[0].lower()
            if cmd == "/help":
                return HELP_TEXT
            if cmd == "/quit":
                self.interrupt(stop=True, reason="operator quit")
                return "Stopping the run."
            if cmd == "/interrupt":
                self.interrupt(stop=False)
                return "Cancelling the running tool call."
            return f"unknown command {cmd}; type /help for the list"
        self.send(text)
        return None

    # -- planner side --------------------------------------------------------------------
    def add_interrupt_listener(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Register ``fn`` to run on every :meth:`interrupt`; returns an unregister function."""
        with self._cond:
            self._listeners.append(fn)

        def remove() -> None:
            with self._cond:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return remove

    def add_event_listener(self, fn: Callable[[dict], None]) -> Callable[[], None]:
        """Register ``fn(event)`` for every operator input (see the module docstring); returns an
        unregister function. ``fn`` runs on the sending thread and must not block."""
        with self._cond:
            self._event_listeners.append(fn)

        def remove() -> None:
            with self._cond:
                if fn in self._event_listeners:
                    self._event_listeners.remove(fn)

        return remove

    def _record(self, event: dict) -> None:
        event = {"t": time.time(), **event}
        with self._cond:
            listeners = list(self._event_listeners)
        for fn in listeners:
            try:
                fn(event)
            except Exception:  # recording must never block steering
                pass

    def drain(self) -> list[str]:
        """Remove and return the queued operator lines (oldest first)."""
        with self._cond:
            lines = list(self._lines)
            self._lines.clear()
            return lines

    @property
    def pending(self) -> int:
        """Number of queued operator lines."""
        with self._cond:
            return len(self._lines)

    @property
    def stop_requested(self) -> bool:
        """True once an interrupt with ``stop=True`` (or ``/quit``) was requested."""
        with self._cond:
            return self._stop_reason is not None

    @property
    def stop_reason(self) -> str | None:
        """The reason passed with the stop request, or None."""
        with self._cond:
            return self._stop_reason

    @property
    def interrupt_count(self) -> int:
        """How many interrupts were requested so far (planners compare before/after a tool)."""
        with self._cond:
            return self._interrupt_seq

    def wait_for_input(self, timeout: float | None = None) -> bool:
        """Block until an operator line is queued or a stop is requested.

        Args:
            timeout: seconds to wait at most (None = forever).

        Returns:
            True if a line or stop arrived, False on timeout.
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._lines and self._stop_reason is None:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True
