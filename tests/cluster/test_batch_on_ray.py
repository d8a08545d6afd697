"""``rpent-batch --ray-address`` on a real local two-node Ray cluster: real scripted ``rpent`` runs as
Ray tasks (each with its own LIBERO env server), spread across both nodes; the report equal to the
local executor's; a node killed mid-batch (its cell retried on the other node, counted once)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.report import OUTCOME_FIELDS

pytest.importorskip("ray", reason="Ray is an extra: run scripts/install.sh (pip extra .[ray])")

FLAGS = ["--suites", "libero_object_swap", "--tasks", "4,9", "--parallel", "2", "--no-video", "--no-progress"]


def _cmd(root: Path, seeds: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rpent.cli.batch", *FLAGS, "--seeds", seeds, "--results-root", str(root), *extra]


def _ledger(root: Path) -> list[dict]:
    p = root / "attempts.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def _outcomes(root: Path) -> dict:
    report = json.loads((root / "report.json").read_text())
    arm = report["arms"][0]
    rows = [{k: r[k] for k in ("suite", "task", *OUTCOME_FIELDS)} for r in arm["tasks"]]
    return {"overall": {k: arm["overall"][k] for k in OUTCOME_FIELDS}, "tasks": rows,
            "cells": {c["key"]: c["status"] for c in report["cells"]}}


def _wheres(root: Path) -> set[str]:
    return {e["where"].split(" node ")[1].split()[0].rstrip(",") for e in _ledger(root) if e["event"] == "end" and e.get("where")}


def test_two_cells_run_as_ray_tasks_on_both_nodes(ray_cluster, env_for_cli, tmp_path):
    """2 cells, --parallel 2, 1 CPU per node: one cell per node; records land under the results root."""
    root = tmp_path / "ray"
    run = subprocess.run(_cmd(root, "0", "--max-episode-steps", "20", "--ray-address", ray_cluster.address),
                         capture_output=True, text=True, env=env_for_cli, timeout=280)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert len(_wheres(root)) == 2, _ledger(root)  # spread across both nodes
    ends = [e for e in _ledger(root) if e["event"] == "end"]
    assert len(ends) == 2 and all(e["exit_code"] in (0, 1) and not e.get("infra_error") for e in ends)
    for e in _ledger(root):
        if e["event"] == "start":  # the run's record, under the driver's results root
            assert Path(e["run_dir"]).is_relative_to(root) and list(Path(e["run_dir"]).glob("transcript_*.json")), e
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["invocations"][-1]["executor"] == "ray"
    assert not list(root.glob(".rpent_ray_visible_*"))  # the driver's marker is removed


def test_bad_cell_placement_is_refused_before_anything_starts(ray_cluster, env_for_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("ray:\n  cell: {num_cpus: 1, resources: {tpu_node: 1}}\n")
    root = tmp_path / "r"
    run = subprocess.run(_cmd(root, "0", "--matrix", str(matrix), "--ray-address", ray_cluster.address),
                         capture_output=True, text=True, env=env_for_cli, timeout=240)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "cells (--parallel): no node offers {CPU: 1, tpu_node: 1}" in run.stderr
    assert not _ledger(root)
    run = subprocess.run(_cmd(tmp_path / "r2", "0", "--parallel", "3", "--ray-address", ray_cluster.address),
                         capture_output=True, text=True, env=env_for_cli, timeout=240)
    assert run.returncode == 2 and "cells (--parallel): 3 requested but the nodes hold at most 2" in run.stderr, run.stderr


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ray_report_equals_local_report(ray_cluster, env_for_cli, tmp_path):
    """4 scripted runs (a mix of outcomes at 180 steps) give the same report on Ray as locally."""
    extra = ["--max-episode-steps", "180"]
    local = subprocess.run(_cmd(tmp_path / "local", "0-1", *extra), capture_output=True, text=True,
                           env=env_for_cli, timeout=900)
    assert local.returncode == 0, local.stdout + local.stderr[-3000:]
    remote = subprocess.run(_cmd(tmp_path / "ray", "0-1", *extra, "--ray-address", ray_cluster.address),
                            capture_output=True, text=True, env=env_for_cli, timeout=900)
    assert remote.returncode == 0, remote.stdout + remote.stderr[-3000:]
    assert _outcomes(tmp_path / "ray") == _outcomes(tmp_path / "local")
    assert len(_wheres(tmp_path / "ray")) == 2


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_node_killed_mid_batch_its_cell_is_retried_elsewhere_and_counted_once(ray_cluster, env_for_cli, tmp_path):
    root = tmp_path / "r"
    log = open(tmp_path / "batch.log", "w")
    proc = subprocess.Popen(_cmd(root, "0-1", "--max-episode-steps", "20", "--ray-address", ray_cluster.address),
                            stdout=log, stderr=subprocess.STDOUT, env=env_for_cli)
    try:
        def running_runs() -> int:  # runs whose rpent process has started writing (not just submitted)
            dirs = [Path(e["run_dir"]) for e in _ledger(root) if e["event"] == "start"]
            return sum(1 for d in dirs if d.is_dir() and any(d.iterdir()))

        deadline = time.monotonic() + 300
        while running_runs() < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert running_runs() >= 2, _ledger(root)
        # both first runs are running, one per node (1 CPU each): one of them on the GPU node
        ray_cluster.cluster.remove_node(ray_cluster.gpu_node, allow_graceful=False)
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        ray_cluster.gpu_node = ray_cluster.add_gpu_node()  # later tests get their two-node cluster back
    out = (tmp_path / "batch.log").read_text()
    assert code == 0, out[-3000:]
    ledger = _ledger(root)
    lost = [e for e in ledger if e["event"] == "end" and "lost its Ray node" in (e.get("infra_error") or "")]
    assert len(lost) >= 1, ledger
    report = json.loads((root / "report.json").read_text())
    overall = report["arms"][0]["overall"]
    assert overall["planned"] == 4 and overall["n"] == 4 and overall["infra"] == 0 and overall["pending"] == 0
    assert len(report["cells"]) == 4 and all(c["status"] in ("success", "failure") for c in report["cells"])
    dirs = {(x["key"], x["attempt"]): x["run_dir"] for x in ledger if x["event"] == "start"}
    for e in lost:  # the lost cell got a new attempt (new run directory) that decided it
        later = [x for x in ledger if x["key"] == e["key"] and x["event"] == "end" and x["attempt"] > e["attempt"]]
        assert later and later[-1]["exit_code"] in (0, 1) and later[-1]["status"] in ("success", "failure")
        assert dirs[(e["key"], later[-1]["attempt"])] != dirs[(e["key"], e["attempt"])]


def _running_runs(root: Path) -> list[Path]:
    """Run directories of started attempts whose run is past its start-up (its SIGTERM handler is
    installed: the run's log has its second line) and that have no "end" line yet."""
    ledger = _ledger(root)
    ended = {(e["key"], e["attempt"]) for e in ledger if e["event"] == "end"}
    out = []
    for e in ledger:
        if e["event"] == "start" and (e["key"], e["attempt"]) not in ended:
            log = Path(e["run_dir"]) / "run.log"
            if log.exists() and len(log.read_text(errors="replace").splitlines()) >= 2:
                out.append(Path(e["run_dir"]))
    return out


@pytest.mark.timeout(600)
def test_sigterm_cancels_a_ray_batch_promptly_and_records_it(ray_cluster, env_for_cli, tmp_path):
    """SIGTERM to `rpent-batch --ray-address` while its runs are running on the cluster: it exits 130
    well within the stop grace, the running runs got the cancellation (their records say cancelled,
    they are re-run on resume, not counted), the manifest records the signal, and the report is written."""
    for attempt in range(2):  # a run that ends between the check and the signal: try once more
        root = tmp_path / f"r{attempt}"
        with open(tmp_path / f"batch{attempt}.log", "w") as log:
            proc = subprocess.Popen(_cmd(root, "0-1", "--max-episode-steps", "600", "--ray-address",
                                         ray_cluster.address), stdout=log, stderr=subprocess.STDOUT, env=env_for_cli)
            try:
                deadline = time.monotonic() + 300
                while not _running_runs(root) and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.3)
                running = _running_runs(root)
                assert proc.poll() is None, (tmp_path / f"batch{attempt}.log").read_text()[-3000:]
                assert running, f"no run started within 300 s: {_ledger(root)}"
                t0 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=300)
                took = time.monotonic() - t0
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        out = (tmp_path / f"batch{attempt}.log").read_text()
        deadline = time.monotonic() + 60  # a run stopped by its node's worker exiting may finish its record after
        while any(_transcript(d) is None for d in running) and time.monotonic() < deadline:
            time.sleep(0.3)
        if all(_transcript(d) is not None and _transcript(d).get("stop_reason") != "cancelled" for d in running):
            continue  # every run we saw running finished on its own before the signal reached it
        break
    assert code == 130, out[-3000:]
    assert took < 60, f"SIGTERM took {took:.0f} s to stop the batch"  # the stop grace is 20 s + 15 s
    assert "rpent-batch: interrupted" in out
    cancelled = [d for d in running if (_transcript(d) or {}).get("stop_reason") == "cancelled"]
    assert cancelled, [(d, _transcript(d)) for d in running]
    assert "received SIGTERM" in json.dumps(_transcript(cancelled[0]))  # the run's record names the signal
    inv = json.loads((root / "manifest.json").read_text())["invocations"][-1]
    assert inv["exit_code"] == 130 and inv["interrupted"] == "received SIGTERM", inv
    report = json.loads((root / "report.json").read_text())
    statuses = {c["key"]: c["status"] for c in report["cells"]}
    assert len(statuses) == 4 and "infra" not in statuses.values(), statuses  # a cancel is not an infra error
    assert not list(root.glob(".rpent_ray_visible_*"))


def _transcript(run_dir: Path) -> dict | None:
    found = sorted(run_dir.glob("transcript_*.json"))
    return json.loads(found[0].read_text()) if found else None



def test_ray_address_local_starts_a_private_cluster_for_the_batch(tmp_path):
    """``--ray-address local`` where no cluster runs: rpent-batch starts a private one on this machine (a temp
    folder of its own), runs the cell as a Ray task on it, and at the end stops every process of it and removes
    the folder."""
    import os

    root = tmp_path / "local"
    run = subprocess.run(_cmd(root, "0", "--tasks", "4", "--max-episode-steps", "20", "--ray-address", "local"),
                         capture_output=True, text=True, env={**os.environ, "MUJOCO_GL": "egl"}, timeout=280)
    assert run.returncode in (0, 1), run.stdout + run.stderr[-3000:]
    ends = [e for e in _ledger(root) if e["event"] == "end"]
    assert len(ends) == 1 and not ends[0].get("infra_error") and " node " in ends[0]["where"], ends
    assert json.loads((root / "manifest.json").read_text())["invocations"][-1]["executor"] == "ray"
    line = next(x for x in run.stderr.splitlines() if "started a private local Ray cluster" in x)
    folder = line.split("(", 1)[1].split(")", 1)[0]
    assert folder.startswith("/tmp/rray_local_") and not Path(folder).exists(), line
    pgrep = subprocess.run(["pgrep", "-f", folder], capture_output=True, text=True)
    assert not pgrep.stdout.strip(), pgrep.stdout
