"""The local executor runs real child processes: exit codes, time limits, signals, slots."""

import os
import sys
import time

import pytest

from rpent.batch.executor import CellJob, Executor, LocalExecutor, create_executor


def _job(tmp_path, key, code, **kw):
    return CellJob(key=key, argv=[sys.executable, "-c", code], run_dir=str(tmp_path / key),
                   log_path=str(tmp_path / f"{key}.log"), **kw)


def _collect(ex, n, timeout=30):
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += ex.wait(timeout=1.0)
    return {o.key: o for o in out}


def test_local_executor_exit_codes_and_logs(tmp_path):
    ex = create_executor("local", slots=3)
    assert isinstance(ex, Executor)
    with ex:
        ex.submit(_job(tmp_path, "a", "print('hello'); raise SystemExit(0)"))
        ex.submit(_job(tmp_path, "b", "raise SystemExit(1)"))
        ex.submit(_job(tmp_path, "c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
        with pytest.raises(RuntimeError, match="slots are busy"):
            ex.submit(_job(tmp_path, "d", "pass"))
        got = _collect(ex, 3)
    assert got["a"].exit_code == 0 and got["a"].infra_error is None
    assert "hello" in (tmp_path / "a.log").read_text()
    assert got["b"].exit_code == 1 and got["b"].infra_error is None
    assert got["c"].exit_code == -9 and "SIGKILL" in got["c"].infra_error
    assert ex.running() == []
    # the node's load when each job ended, for the runner's per-node progress
    load = got["a"].node_load
    assert load["host"] == os.uname().nodename and load["cpus"] == os.cpu_count() and len(load["load"]) == 3


def test_local_executor_time_limit_and_start_failure(tmp_path):
    with LocalExecutor(2, stop_grace_s=2.0) as ex:
        ex.submit(_job(tmp_path, "slow", "import time; time.sleep(60)", timeout_s=0.5))
        ex.submit(CellJob(key="missing", argv=[str(tmp_path / "no-such-binary")], run_dir=str(tmp_path / "m")))
        got = _collect(ex, 2)
    assert "time limit" in got["slow"].infra_error and got["slow"].wall_s < 30
    assert got["missing"].exit_code is None and "could not start" in got["missing"].infra_error


def test_unknown_executor_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown executor 'nope'; choose one of local"):
        create_executor("nope", slots=1)
