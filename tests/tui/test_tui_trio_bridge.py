"""TrioBridge: trio guest mode on a plain asyncio loop (what Textual runs on), without Textual."""

import asyncio
import os
import signal
import sys
import time
import warnings

import pytest
import trio

from rpent_tui.services.trio_bridge import BridgeNotRunning, TrioBridge, install_exit_signals


def test_spawned_tasks_run_and_are_cancelled_on_close():
    log = []

    async def worker(name):
        try:
            log.append(f"{name} started")
            await trio.sleep_forever()
        finally:
            log.append(f"{name} cancelled")

    async def main():
        bridge = TrioBridge()
        with pytest.raises(BridgeNotRunning):
            bridge.spawn(worker, "early")
        bridge.start()
        bridge.start()  # idempotent: one guest run per loop
        bridge.spawn(worker, "a")  # queued until trio's first tick
        await bridge.wait_ready()
        bridge.spawn(worker, "b")
        for _ in range(6000):  # until b runs (at most 60 s)
            if "b started" in log:
                break
            await asyncio.sleep(0.01)
        outcome = await bridge.aclose()
        assert outcome.value is None
        with pytest.raises(BridgeNotRunning):
            bridge.spawn(worker, "late")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. trio's "guest run abandoned" must not appear
        asyncio.run(main())
    assert sorted(log) == ["a cancelled", "a started", "b cancelled", "b started"]


def test_a_crashing_task_reports_through_on_crash():
    crashes = []

    async def boom():
        raise RuntimeError("supervisor died")

    async def main():
        bridge = TrioBridge(on_crash=crashes.append)
        bridge.start()
        bridge.spawn(boom)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if crashes:
                break
        await bridge.aclose()

    asyncio.run(main())
    assert len(crashes) == 1 and "supervisor died" in repr(crashes[0])


def test_sighup_requests_exit_on_the_loop():
    codes = []
    before = signal.getsignal(signal.SIGHUP)  # another test of the run may have left its own handler

    async def main():
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        restore = install_exit_signals(lambda code: (codes.append(code), done.set()), loop)
        try:
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(done.wait(), 5)
        finally:
            restore()

    asyncio.run(main())
    assert codes == [128 + signal.SIGHUP]
    assert signal.getsignal(signal.SIGHUP) == before  # restore() put the previous handler back


def test_a_stuck_exit_is_finished_by_the_watchdog_and_a_second_signal_is_immediate():
    stuck = []

    async def main():
        loop = asyncio.get_running_loop()
        restore = install_exit_signals(lambda code: None, loop, on_stuck=stuck.append, hard_exit_after_s=1.0)

        async def until(n: int) -> float:
            t0 = time.monotonic()
            while len(stuck) < n:
                assert time.monotonic() - t0 < 60, stuck
                await asyncio.sleep(0.01)
            return time.monotonic() - t0

        try:
            os.kill(os.getpid(), signal.SIGTERM)  # request_exit does nothing: the exit is "stuck"
            assert await until(1) >= 0.9  # the watchdog waited its 1 s, no less
            assert stuck == [128 + signal.SIGTERM]
            os.kill(os.getpid(), signal.SIGHUP)  # a second signal: at once, not after another second
            assert await until(2) < 0.9
            assert stuck == [128 + signal.SIGTERM, 128 + signal.SIGHUP]
        finally:
            restore()

    asyncio.run(main())
