"""Shared services of an arm: started once through the real Supervisor on its own trio thread,
revived when they die, attached by endpoint, and a start failure reported in one line."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.matrix import Arm
from rpent.batch.services import ArmServices, SharedServiceError
from rpent.rpc import RpcClient
from rpent.services import ServiceSpec

CHILD = str(Path(__file__).resolve().parents[1] / "services" / "child_server.py")


def _spec(*extra):
    return ServiceSpec(name="vla_server", argv=[sys.executable, CHILD, *extra], transport="socket",
                       ready_timeout_s=60.0, stop_grace_s=2.0)


def test_spawned_service_is_shared_revived_and_stopped(tmp_path, monkeypatch):
    monkeypatch.delenv("PI05_CHECKPOINT_PATH", raising=False)
    svc = ArmServices(Arm(name="a"), tmp_path / "services")
    assert svc.specs == {}  # no checkpoint, no endpoint: nothing to start
    svc.specs = {"vla": _spec()}
    with svc:
        first = svc.endpoints["vla"]
        with RpcClient(first, timeout=10) as c:
            assert c.call("healthz")
        assert svc.revive() == []
        running = svc._sup.get("vla_server")
        os.kill(running.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while running.returncode is None and time.monotonic() < deadline:
            time.sleep(0.1)
        notes = svc.revive()
        assert len(notes) == 1 and "exited with code -9; restarted at socket://127.0.0.1:" in notes[0]
        assert svc.endpoints["vla"] != first
        with RpcClient(svc.endpoints["vla"], timeout=10) as c:
            assert c.call("healthz")
        new_pid = svc._sup.get("vla_server").pid
    assert (tmp_path / "services" / "vla_server.log").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(new_pid, 0)


def test_attached_endpoint_and_start_failure(tmp_path):
    bad = ArmServices(Arm(name="b"), tmp_path / "s2")
    bad.specs = {"vla": _spec("--exit-before-ready", "3")}
    with pytest.raises(SharedServiceError, match="shared vla service of the arm failed to start: ServiceStartError"):
        bad.start()
    attached = ArmServices(Arm(name="c", vla_endpoint="socket://127.0.0.1:9"), tmp_path / "s3")
    assert attached.specs["vla"].endpoint == "socket://127.0.0.1:9" and attached.vla_checkpoint is None
    with pytest.raises(SharedServiceError, match="failed to start"):
        attached.start()  # nothing listens there: the healthz check refuses it
