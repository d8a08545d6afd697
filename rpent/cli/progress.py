"""Progress of a plain ``rpent`` run on the terminal: step, tool and elapsed time while it runs.

Fed with the run layer's events (``run_task(..., on_event=progress.on_event)``, docs/interfaces.md
"Run layer"), it writes to one stream (``rpent`` uses stderr) in one of two modes:

* ``live`` (the stream is a terminal): one status line redrawn in place (carriage return and
  erase-line), e.g. ``rpent 0:12 | step 7 (env 134) | move_to | running: put the soup in the basket``,
  refreshed on every event (at most 10 times a second) and every 0.5 s for the clock; log lines
  written through :meth:`RunProgress.log_handler` erase it first and redraw it after, so the two
  never mix; it steps aside while the operator is asked (``operator_request``) until the run goes
  on. :meth:`RunProgress.close` erases it.
* ``lines`` (a pipe or a file): plain lines, one per state change, tool call and operator request
  (``rpent: 12.3 s step 7 (env step 134): move_to``), and ``still running`` after 30 s without one.

``off`` writes nothing.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["MODES", "RunProgress", "resolve_mode"]

MODES = ("auto", "live", "lines", "off")
ERASE = "\r\x1b[2K"  # carriage return + erase the whole line (ECMA-48 EL 2)


def resolve_mode(mode: str, stream: TextIO) -> str:
    """``auto`` becomes ``live`` on a terminal, else ``lines``; other modes are kept.

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}, got {mode!r}")
    if mode != "auto":
        return mode
    try:
        return "live" if stream.isatty() else "lines"
    except (AttributeError, ValueError):  # closed or not a file
        return "lines"


class RunProgress:
    """Shows a run's progress on ``stream`` (see the module docstring). Thread-safe: the run layer
    calls :meth:`on_event` from the trio thread and from the planner's worker thread.

    Args:
        stream: where to write (``rpent``: ``sys.stderr``).
        mode: ``live``, ``lines`` or ``off`` (see :func:`resolve_mode` for ``auto``).
        clock: monotonic seconds (tests may pass their own).
        refresh_s: live mode: the clock's redraw period.
        heartbeat_s: lines mode: a ``still running`` line after this long without a line.
        width: live mode: line width in columns (default: the terminal's, else 100).
    """

    def __init__(self, stream: TextIO, mode: str = "auto", *, clock: Callable[[], float] = time.monotonic,
                 refresh_s: float = 0.5, heartbeat_s: float = 30.0, width: int | None = None) -> None:
        self.stream = stream
        self.mode = resolve_mode(mode, stream)
        self._clock = clock
        self._t0 = clock()
        self._refresh_s = refresh_s
        self._heartbeat_s = heartbeat_s
        self._width = width
        self._lock = threading.RLock()
        self._state = "starting"
        self._detail = ""
        self._step: int | None = None
        self._env_steps: int | None = None
        self._tool: str | None = None
        self._tools_called = 0
        self._shown = ""  # live: the text on screen now
        self._last_draw = 0.0
        self._last_line = self._t0
        self._closed = False
        self._paused = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.mode in ("live", "lines"):
            self._ticker = threading.Thread(target=self._tick, name="rpent-progress", daemon=True)
            self._ticker.start()

    # ------------------------------------------------------------------ events

    def on_event(self, event: dict) -> None:
        """Take one run event (``status``, ``planner`` ``tool_call``, ``step``); others are ignored."""
        if self.mode == "off" or self._closed:
            return
        kind = event.get("kind")
        line = None
        with self._lock:
            if kind == "status":
                state, detail = str(event.get("state", "")), str(event.get("detail") or "")
                if state in ("starting", "running"):
                    self._state, self._detail = state, detail
                    line = f"{state}{': ' + detail if detail else ''}"
            elif kind == "planner" and event.get("event") == "tool_call":
                self._tool = str(event.get("name") or "?")
                self._tools_called += 1
                line = f"step {self._step_text()}: {self._tool}"
            elif kind == "operator_request":
                # the terminal operator prompts on stdout next: the live line steps aside until the run goes on
                self._paused = True
                self._erase()
                line = f"waiting for the operator ({event.get('request_kind', 'request')})"
            elif kind == "step":
                self._step = int(event.get("step", 0)) + 1  # steps recorded so far
                if event.get("env_steps") is not None:
                    self._env_steps = int(event["env_steps"])
            else:
                return
            if kind in ("planner", "step"):  # the operator answered: the run goes on
                self._paused = False
            if self.mode == "lines":
                if line is not None:
                    self._write_line(line)
            else:
                self._draw(force=line is not None)

    def _step_text(self) -> str:
        step = self._step or 0
        return f"{step} (env step {self._env_steps})" if self._env_steps is not None else str(step)

    # ------------------------------------------------------------------ output

    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def _write_line(self, text: str) -> None:
        self.stream.write(f"rpent: {self._elapsed():.1f} s {text}\n")
        self.stream.flush()
        self._last_line = self._clock()

    def status_text(self) -> str:
        """The live line's text (no escape sequences), cut to the line width."""
        secs = int(self._elapsed())
        parts = [f"rpent {secs // 60}:{secs % 60:02d}"]
        if self._step is not None:
            parts.append(f"step {self._step}" + (f" (env {self._env_steps})" if self._env_steps is not None else ""))
        if self._tool:
            parts.append(self._tool)
        parts.append(f"{self._state}: {self._detail}" if self._detail else self._state)
        text = " | ".join(parts)
        width = self._width or shutil.get_terminal_size((100, 24)).columns
        return text if len(text) < width else text[: max(10, width - 2)] + "…"

    def _draw(self, force: bool = False) -> None:
        if self._paused:
            return
        now = self._clock()
        if not force and now - self._last_draw < 0.1:
            return
        self._shown = self.status_text()
        self.stream.write(ERASE + self._shown)
        self.stream.flush()
        self._last_draw = now

    def _erase(self) -> None:
        if self._shown:
            self.stream.write(ERASE)
            self.stream.flush()
            self._shown = ""

    def _tick(self) -> None:
        period = self._refresh_s if self.mode == "live" else min(self._heartbeat_s, 1.0)
        while not self._stop.wait(period):
            with self._lock:
                if self._closed:
                    return
                if self.mode == "live":
                    self._draw(force=True)
                elif self._clock() - self._last_line >= self._heartbeat_s:
                    tool = f", tool {self._tool}" if self._tool else ""
                    self._write_line(f"still running (step {self._step_text()}{tool})")

    # ------------------------------------------------------------------ logging and the end

    def log_handler(self, stream: TextIO) -> logging.Handler:
        """A ``logging.StreamHandler`` on ``stream`` that erases the live line before each record and
        redraws it after (a plain ``StreamHandler`` in the other modes)."""
        progress = self

        class _Handler(logging.StreamHandler):
            def emit(self, record: logging.LogRecord) -> None:
                if progress.mode != "live":
                    super().emit(record)
                    return
                with progress._lock:
                    shown = bool(progress._shown)
                    progress._erase()
                    super().emit(record)
                    if shown and not progress._closed:
                        progress._draw(force=True)

        return _Handler(stream)

    def close(self) -> None:
        """Stop the clock and erase the live line (idempotent); the caller prints the result next."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            if self.mode == "live":
                self._erase()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2.0)
