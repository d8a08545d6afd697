"""Trio in guest mode on the host's asyncio loop (Textual's), with one nursery for all background work.

Textual runs only on asyncio; trio's guest mode (``trio.lowlevel.start_guest_run``) lets trio's
scheduler run on that same loop and thread, so Textual handlers may call ``TrioBridge.spawn``
directly and trio tasks report back with ``widget.post_message`` (thread-safe). The shape follows
the verified bridge in Textual's guest-mode notes; it imports no Textual.

Lifecycle: ``start()`` once (from ``App.on_mount``), ``spawn()`` any number of times, then
``await aclose()`` (from ``App.on_unmount``): it cancels the nursery and waits until trio has
finished, which must happen before asyncio closes (trio warns about an abandoned guest run otherwise).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

__all__ = ["TrioBridge", "BridgeNotRunning", "install_exit_signals"]


class BridgeNotRunning(RuntimeError):
    """Raised when work is handed to a ``TrioBridge`` that was not started or is already closed."""


class TrioBridge:
    """Hosts one trio guest run whose root nursery owns every background task.

    Args:
        on_crash: called once, on the asyncio loop, with the exception if the trio run ends with an
            error (a background task raised). The app typically exits with a message.
    """

    def __init__(self, on_crash: Callable[[BaseException], None] | None = None) -> None:
        self._on_crash = on_crash
        self._done: asyncio.Future[Any] | None = None
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = asyncio.Event()
        self._closing = False
        self._pending: list[tuple[Callable[..., Awaitable[Any]], tuple[Any, ...], str | None]] = []

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True between the first trio tick after ``start()`` and the end of ``aclose()``."""
        return self._nursery is not None and not self._closing

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        """The trio token of the guest run (for ``trio.from_thread`` calls from worker threads).

        Raises:
            BridgeNotRunning: before the guest run has started.
        """
        if self._token is None:
            raise BridgeNotRunning("the trio guest run has not started yet; call TrioBridge.start() first")
        return self._token

    def start(self) -> None:
        """Start the guest run on the running asyncio loop. Idempotent; call from sync code on the loop.

        Raises:
            RuntimeError: when no asyncio loop is running in this thread.
        """
        if self._done is not None:
            return
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()

        def done(outcome: Any) -> None:
            self._nursery = None
            if not self._done.done():
                self._done.set_result(outcome)
            error = getattr(outcome, "error", None)
            if error is not None and self._on_crash is not None and not self._closing:
                self._on_crash(error)

        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=done,
            strict_exception_groups=True,
        )

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            pending, self._pending = self._pending, []
            for fn, args, name in pending:
                nursery.start_soon(fn, *args, name=name)
            self._ready.set()
            await trio.sleep_forever()

    async def wait_ready(self) -> None:
        """Wait (on asyncio) until the nursery exists."""
        await self._ready.wait()

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> None:
        """Run ``fn(*args)`` as a trio task in the root nursery. Call from the loop's thread only.

        Work spawned between ``start()`` and the first trio tick is queued and started then.

        Raises:
            BridgeNotRunning: if ``start()`` was never called, or ``aclose()`` already ran.
        """
        if self._done is None or self._closing:
            raise BridgeNotRunning(
                "TrioBridge.spawn() needs a running bridge: call start() first and do not spawn after aclose()"
            )
        if self._nursery is None:
            self._pending.append((fn, args, name))
        else:
            self._nursery.start_soon(fn, *args, name=name)

    async def aclose(self) -> Any:
        """Cancel every background task and wait (on asyncio) for the trio run to finish.

        Returns the trio run's ``outcome`` (``outcome.Value`` or ``outcome.Error``), or None if the
        bridge never started. Safe to call more than once.
        """
        if self._done is None:
            return None
        self._closing = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        elif not self._done.done():
            # start() ran but trio has not ticked yet: cancel as soon as the nursery exists.
            await self._ready.wait()
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
        return await self._done


def install_exit_signals(request_exit: Callable[[int], None], loop: asyncio.AbstractEventLoop, *,
                         on_stuck: Callable[[int], None] | None = None, hard_exit_after_s: float = 20.0
                         ) -> Callable[[], None]:
    """Route SIGHUP (SSH drop, tmux kill) and SIGTERM to ``request_exit(128 + signum)`` on ``loop``.

    Python's default SIGHUP action ends the process with no cleanup, leaving quiet children orphaned
    (reference §2.3); with this handler the app exits normally and the nursery stops every child.
    Uses ``signal.signal`` (not ``loop.add_signal_handler``) so trio's default
    ``host_uses_signal_set_wakeup_fd=False`` stays correct. Main thread only.

    Belt and braces: if the process is still alive ``hard_exit_after_s`` seconds after the first
    signal (a shutdown stuck on a dead terminal), or when a second signal arrives, a watchdog thread
    calls ``on_stuck(128 + signum)``, which must kill the children and end the process.

    Returns:
        a function restoring the previous handlers.
    """
    import threading

    previous: dict[int, Any] = {}
    fired: list[int] = []

    def watchdog(code: int) -> None:
        time.sleep(hard_exit_after_s)
        if on_stuck is not None:
            on_stuck(code)

    def handler(signum: int, _frame: Any) -> None:
        code = 128 + signum
        if fired and on_stuck is not None:
            on_stuck(code)  # second signal: do not wait any longer
            return
        fired.append(code)
        if on_stuck is not None:
            threading.Thread(target=watchdog, args=(code,), daemon=True, name="rpent-exit-watchdog").start()
        try:
            loop.call_soon_threadsafe(request_exit, code)
        except RuntimeError:  # the loop is closed already: only the watchdog can finish the job
            if on_stuck is not None:
                on_stuck(code)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
