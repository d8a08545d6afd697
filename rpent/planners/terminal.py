"""Terminal side of steering for ``rpent --interactive`` / ``-i``.

* :func:`edit_initial_prompt` shows the rendered first prompt pre-filled on a readline
  input line so the operator can edit it before the run starts (unchanged when stdin is
  not a terminal).
* :class:`StdinSteeringReader` reads operator lines from a text stream in a daemon
  thread and hands each to :meth:`Steering.submit` (``/help``, ``/quit``,
  ``/interrupt``, or a line for the next turn boundary), printing the replies.

The TUI uses the same :class:`~rpent.planners.steering.Steering` object with its own
input widget instead of this module.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from rpent.planners.steering import Steering

__all__ = ["StdinSteeringReader", "edit_initial_prompt"]


def edit_initial_prompt(text: str, stream: TextIO | None = None) -> str:
    """Let the operator edit ``text`` on one pre-filled input line; returns the result.

    Newlines are shown as ``\\n`` while editing and restored afterwards. Returns ``text``
    unchanged when ``stream`` (default stdin) is not a TTY or readline is unavailable;
    an empty answer also keeps ``text``.
    """
    stream = stream or sys.stdin
    if not stream.isatty():
        return text
    try:
        import readline
    except ImportError:
        return text
    shown = text.replace("\n", "\\n")
    readline.set_pre_input_hook(lambda: (readline.insert_text(shown), readline.redisplay()))
    try:
        answer = input("prompt> ")
    except EOFError:
        return text
    finally:
        readline.set_pre_input_hook(None)
    return answer.replace("\\n", "\n") if answer.strip() else text


class StdinSteeringReader:
    """Feed lines typed on ``stream`` into ``steering`` until EOF, ``/quit`` or :meth:`stop`.

    Args:
        steering: the run's steering object.
        stream: input stream (default ``sys.stdin``).
        out: where command replies go (default ``sys.stderr``).
    """

    def __init__(self, steering: Steering, stream: TextIO | None = None, out: TextIO | None = None) -> None:
        self.steering = steering
        self.stream = stream or sys.stdin
        self.out = out or sys.stderr
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="stdin-steering", daemon=True)

    def start(self) -> "StdinSteeringReader":
        """Start the reader thread; prints a one-line hint. Returns self."""
        print("interactive: type a line to steer the planner, /help for commands", file=self.out, flush=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop handing lines over (the thread ends at its next line or EOF)."""
        self._stopped.set()

    def _run(self) -> None:
        for line in self.stream:
            if self._stopped.is_set():
                return
            try:
                reply = self.steering.submit(line)
            except ValueError as exc:
                reply = str(exc)
            if reply:
                print(reply, file=self.out, flush=True)
            if self.steering.stop_requested:
                return
