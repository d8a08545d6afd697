"""A cell cannot fill the disk (a total scratch quota, and a capped worker.log) nor take more CPU
than its quota, whatever it forks. Real workers; each layer's state is read from the cell record."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from rpent.policy import WorkerLimits
from rpent.policy.worker_process import MAX_LOG_BYTES

MiB = 1024**2


def _layer(result: dict, name: str) -> dict:
    return result["sandbox"]["isolation"]["layers"].get(name, {})


def _du(path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


#: As reproduced: three 600 MB files in the scratch directory (written in 8 MB chunks).
THREE_BIG_FILES = textwrap.dedent("""
    import os
    chunk = b"\\x01" * (8 * 1024 * 1024)
    written = 0
    try:
        for i in range(3):
            with open(f"big{i}.bin", "wb") as f:
                for _ in range(75):
                    f.write(chunk)
                    f.flush()
                    written += len(chunk)
    finally:
        print("written", written)
""")


@pytest.mark.parametrize("namespaces", [True, False], ids=["tmpfs", "watched"])
def test_the_scratch_quota_stops_a_writer_with_a_named_error(make_runner, tmp_path, namespaces):
    quota = 64 * MiB
    runner = make_runner(limits=WorkerLimits(scratch_bytes=quota), timeout_s=60, namespaces=namespaces)
    result = runner.run_cell(THREE_BIG_FILES)
    scratch = tmp_path / "run" / "code_policy" / "scratch"
    layer = _layer(result, "scratch_quota")
    assert not result["ok"]
    if layer.get("on"):
        written = int(result["stdout"].split("written")[-1])
        # the tmpfs: the write past the quota fails in the cell with ENOSPC, naming the quota
        assert result["exception"]["type"] == "OSError"
        assert "No space left on device" in result["exception"]["message"]
        assert "scratch quota" in result["exception"]["message"] and "tmpfs" in layer["detail"]
        assert written <= quota
        assert _du(scratch) < MiB, "the quota's files reached the disk"
    else:
        # no mount namespace: the parent measures the directory and ends the cell
        assert result["exception"]["type"] == "ScratchQuotaExceeded", result["exception"]
        assert "WorkerLimits.scratch_bytes" in result["exception"]["message"]
        assert _du(scratch) < MiB, "the directory of a cell over its quota was not emptied"
    after = runner.run_cell("open('small.txt', 'w').write('x')")
    assert after["ok"], after["exception"]


def test_writing_to_the_workers_own_fds_cannot_fill_the_disk(make_runner, tmp_path):
    runner = make_runner(timeout_s=60)
    result = runner.run_cell(textwrap.dedent("""
        import os
        block = b"y" * (1024 * 1024)
        for _ in range(64):                # 64 MB to fd 1 and to fd 2, bypassing sys.stdout
            os.write(1, block)
            os.write(2, block)
        'done'
    """))
    assert result["value"] == "'done'"
    runner.close()
    log = tmp_path / "run" / "code_policy" / "worker.log"
    assert log.stat().st_size <= MAX_LOG_BYTES + 4096
    assert "more bytes of this worker's output dropped" in log.read_text(errors="replace")[-300:]


BUSY = textwrap.dedent("""
    import os, time, resource
    kids = []
    for _ in range(2):                       # two busy processes for 2 s of wall time
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                pass
            os._exit(0)
        kids.append(pid)
    t0 = time.monotonic()
    for pid in kids:
        os.waitpid(pid, 0)
    wall = time.monotonic() - t0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    (cpu.ru_utime + cpu.ru_stime) / wall
""")


def test_the_cells_cpu_is_capped_by_its_quota(make_runner):
    runner = make_runner(limits=WorkerLimits(cpu_cores=0.2), timeout_s=60)
    result = runner.run_cell(BUSY)
    layer = _layer(result, "cpu_quota")
    if not layer.get("on"):
        pytest.skip(f"no CPU quota on this machine: {layer.get('detail')}")
    assert result["ok"], result["exception"]
    assert result["sandbox"]["limits"]["cpu_cores"] == 0.2
    cores_used = float(result["value"])
    assert cores_used < 0.35, f"two busy processes used {cores_used:.2f} cores under a 0.2-core quota"
    saved = json.loads((runner.output_dir / result["result_path"]).read_text())
    assert saved["sandbox"]["isolation"]["layers"]["cpu_quota"]["on"]


def test_a_refused_cgroup_file_turns_the_layer_off_and_keeps_the_others(tmp_path):
    from rpent.policy.isolation import Report, _join_cgroup

    ok = tmp_path / "pids" / "cgroup.procs"
    ok.parent.mkdir()
    ok.write_text("")
    refused = tmp_path / "cpu" / "cgroup.procs"          # its folder does not exist: open() fails
    report = Report()
    _join_cgroup(report, [str(ok), str(refused)])
    layer = report.layers["cgroup"]
    assert not layer["on"]
    assert f"cannot join {refused}" in layer["detail"] and str(ok.parent) in layer["detail"]
    assert ok.read_text() == str(os.getpid())


def test_a_refused_cpu_group_turns_only_the_cpu_quota_off(tmp_path):
    from rpent.policy.isolation import Report, _join_cpu_cgroup

    report = Report()
    _join_cpu_cgroup(report, str(tmp_path / "cpu" / "cgroup.procs"))
    assert not report.layers["cpu_quota"]["on"] and "cannot join" in report.layers["cpu_quota"]["detail"]
    assert "cgroup" not in report.layers
