"""Running the editor buffer as a code-policy cell against the current TaskRun's toolkit, with live meters.

The cell runs through ``rpent.policy.CodePolicyRunner(toolkit, output_dir, timeout_s, max_calls)
.run_cell(source) -> CellResult`` (the code-policy mode's own runner, so cells are saved as
``<run>/code_policy/cell_NNN.{py,json}`` exactly as in ``--policy-mode code``). ``run_cell`` blocks,
so it runs in a trio worker thread; meanwhile a ticker posts ``CellProgress`` every 0.1 s with the
elapsed time (s) against the timeout and the robot calls made against the call budget. Calls are
counted by a thin proxy around the toolkit (every ``execute`` the cell's ``robo`` makes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

__all__ = ["CellProgress", "CellFinished", "CountingToolkit", "CodeCellService", "NoToolkitError", "cell_result_dict"]

#: Meter refresh period (s).
TICK_S = 0.1
#: code-policy defaults (the product document: "每段代码默认最多运行 120 秒、调用 100 次机器人工具").
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_CALLS = 100


class NoToolkitError(RuntimeError):
    """No TaskRun toolkit is available to run a cell against."""


@dataclass(frozen=True)
class CellProgress:
    """Live meters: ``elapsed_s`` of ``timeout_s`` (s) and ``calls`` of ``max_calls`` robot calls."""

    elapsed_s: float
    timeout_s: float
    calls: int
    max_calls: int


@dataclass(frozen=True)
class CellFinished:
    """The cell ended: ``result`` is the runner's ``CellResult`` as a dict (stdout, stderr, value/result, error ...)."""

    result: dict[str, Any]
    elapsed_s: float
    calls: int


class CountingToolkit:
    """Proxy of a toolkit that counts ``execute`` calls (thread-safe); everything else is delegated."""

    def __init__(self, toolkit: Any) -> None:
        self._toolkit = toolkit
        self._lock = threading.Lock()
        self.calls = 0

    def execute(self, name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> dict[str, Any]:
        """Count, then forward to the wrapped toolkit's ``execute``."""
        with self._lock:
            self.calls += 1
        return self._toolkit.execute(name, args or {}, call_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._toolkit, name)


def cell_result_dict(result: Any) -> dict[str, Any]:
    """A ``CellResult`` (dataclass, object or dict) as a plain dict for display."""
    if isinstance(result, dict):
        return dict(result)
    to_dict = getattr(result, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    try:
        from dataclasses import asdict, is_dataclass
        if is_dataclass(result):
            return asdict(result)
    except TypeError:
        pass
    return {k: v for k, v in vars(result).items() if not k.startswith("_")} if hasattr(result, "__dict__") else {"value": repr(result)}


def default_runner_factory(toolkit: Any, output_dir: Path, timeout_s: float, max_calls: int) -> Any:
    """``rpent.policy.CodePolicyRunner`` (imported lazily)."""
    from rpent.policy import CodePolicyRunner  # type: ignore[attr-defined]

    return CodePolicyRunner(toolkit, output_dir, timeout_s, max_calls)


class CodeCellService:
    """Runs editor cells one at a time for the current TaskRun.

    A runner is kept per (toolkit, output_dir) so the cell namespace persists between cells, as in
    code-policy mode. Args: ``sink`` (thread-safe, receives ``CellProgress``/``CellFinished``),
    ``runner_factory`` (default ``rpent.policy.CodePolicyRunner``).
    """

    def __init__(self, sink: Callable[[Any], None],
                 runner_factory: Callable[[Any, Path, float, int], Any] | None = None) -> None:
        self._sink = sink
        self._factory = runner_factory or default_runner_factory
        self._key: tuple[int, Path, float, int] | None = None
        self._runner: Any = None
        self._counter: CountingToolkit | None = None
        self.busy = False

    def release(self, keep_toolkit: Any = None) -> bool:
        """End the cell runner (and its worker process) unless it belongs to ``keep_toolkit`` (the
        running TaskRun's) or a cell is running; call when a TaskRun ends, so no worker outlives its
        TaskRun. Returns True when a runner was closed."""
        if self._runner is None or self.busy or (keep_toolkit is not None and self._key is not None
                                                 and self._key[0] == id(keep_toolkit)):
            return False
        runner, self._runner, self._key, self._counter = self._runner, None, None, None
        close = getattr(runner, "close", None)
        if callable(close):
            close()
        return True

    async def run_cell(self, toolkit: Any, output_dir: Path, source: str, *,
                       timeout_s: float = DEFAULT_TIMEOUT_S, max_calls: int = DEFAULT_MAX_CALLS) -> dict[str, Any]:
        """Run ``source`` as one cell; return the result dict (also posted as ``CellFinished``).

        Raises:
            NoToolkitError: ``toolkit`` is None (no TaskRun is running).
            RuntimeError: a cell is already running.
            ValueError: empty source, non-positive timeout or budget.
        """
        if toolkit is None:
            raise NoToolkitError("no TaskRun toolkit: start a task with /rpent-task on the Run screen first")
        if self.busy:
            raise RuntimeError("a cell is already running; wait for it (meters show its progress)")
        if not source.strip():
            raise ValueError("the editor buffer is empty; write some Python using robo.<tool>(...)")
        if timeout_s <= 0 or max_calls <= 0:
            raise ValueError(f"timeout_s and max_calls must be > 0 (got {timeout_s}, {max_calls})")
        key = (id(toolkit), Path(output_dir), float(timeout_s), int(max_calls))
        if key != self._key:
            self._counter = CountingToolkit(toolkit)
            self._runner = self._factory(self._counter, Path(output_dir), float(timeout_s), int(max_calls))
            self._key = key
        counter = self._counter
        assert counter is not None
        start_calls = counter.calls
        self.busy = True
        started = time.monotonic()

        async def ticker() -> None:
            while True:
                self._sink(CellProgress(time.monotonic() - started, timeout_s, counter.calls - start_calls, max_calls))
                await trio.sleep(TICK_S)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ticker)
                try:
                    result = await trio.to_thread.run_sync(self._runner.run_cell, source)
                    out = cell_result_dict(result)
                except Exception as exc:  # noqa: BLE001 - shown beside the editor
                    out = {"error": f"{type(exc).__name__}: {exc}"}
                nursery.cancel_scope.cancel()
        finally:
            self.busy = False
        elapsed = time.monotonic() - started
        calls = counter.calls - start_calls
        self._sink(CellProgress(elapsed, timeout_s, calls, max_calls))
        self._sink(CellFinished(out, elapsed, calls))
        return out
