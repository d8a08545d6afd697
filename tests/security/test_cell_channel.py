"""The worker -> parent pipe treats the cell as hostile: a cell that writes its own frames to the
worker's out fd can neither make the rpent process allocate (frame bomb) nor forge what only the
parent may decide (an accepted finish). Real workers, real pipes, a real parent process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rpent

POLICY_TESTS = Path(__file__).parent.parent / "policy"

#: Preamble of an attacking cell: ``send(body_bytes, claimed_length=None)`` writes one raw frame
#: (4-byte big-endian length + body) to the worker's pipe to the parent.
RAW_FRAMES = textwrap.dedent("""
    import os, struct, sys
    OUT = int(sys.argv[sys.argv.index("--out-fd") + 1])
    def send(body, claimed=None):
        data = struct.pack(">I", len(body) if claimed is None else claimed) + body
        view = memoryview(data)
        while view:
            view = view[os.write(OUT, view):]
""")

#: The parent: a real rpent process (code-policy runner on the point-robot toolkit) that runs a
#: harmless cell (worker started, numpy loaded), resets its peak RSS, runs the attack cell and
#: prints its peak RSS growth and the attack cell's record. A regression cannot take the machine
#: down: its address space is capped 3 GiB above what it has after the first cell.
PARENT = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, sys.argv[1])
    import collections
    from policy_point_robot import PointRobotToolkit
    from rpent.policy import CodePolicyRunner

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    toolkit = PointRobotToolkit()
    toolkit.executed = collections.deque(maxlen=1)    # the fixture keeps every call's arguments otherwise
    runner = CodePolicyRunner(toolkit, sys.argv[2], timeout_s=20, grace_s=1.0, max_calls=int(sys.argv[4]))
    first = runner.run_cell("import numpy\\n1")
    resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + 3 * 1024**3, resource.RLIM_INFINITY))
    with open("/proc/self/clear_refs", "w") as f:   # VmHWM := VmRSS from here on
        f.write("5")
    before = status("VmRSS")
    attack = runner.run_cell(open(sys.argv[3]).read())
    grown = status("VmHWM") - before
    after = runner.run_cell("1 + 1")
    runner.close()
    attack.pop("images", None)
    print(json.dumps({"grown": grown, "attack": attack, "after": after["value"]}, default=repr))
""")


def _run_parent(tmp_path: Path, cell: str, max_calls: int = 100, timeout_s: float = 120.0) -> dict:
    (tmp_path / "attack.py").write_text(cell)
    (tmp_path / "parent.py").write_text(PARENT)
    env = dict(os.environ, PYTHONPATH=str(Path(rpent.__file__).parent.parent))
    proc = subprocess.run([sys.executable, str(tmp_path / "parent.py"), str(POLICY_TESTS), str(tmp_path / "run"),
                           str(tmp_path / "attack.py"), str(max_calls)], capture_output=True, text=True, env=env, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The parent's peak RSS growth allowed while a cell attacks the pipe (bytes).
RSS_BOUND = 100 * 1024**2


def test_a_frame_bomb_does_not_grow_the_parent(tmp_path):
    # As reproduced: 8 frames claiming 8 MiB, each body 8 MiB of 0x90 (one msgpack byte that
    # decodes to an empty list: ~70x expansion) -- 4.7 GB in the parent before the fix.
    out = _run_parent(tmp_path, RAW_FRAMES + textwrap.dedent("""
        body = b"\\xdd" + struct.pack(">I", 8 * 1024 * 1024 - 5) + b"\\x90" * (8 * 1024 * 1024 - 5)
        for _ in range(8):
            send(body)
        "sent"
    """))
    assert out["grown"] < RSS_BOUND, f"the parent grew {out['grown'] / 1e6:.0f} MB under the frame bomb"
    attack = out["attack"]
    assert not attack["ok"] and attack["worker_lost"]
    assert "exceeds" in attack["protocol_violation"], attack["protocol_violation"]
    assert attack["exception"]["type"] == "ProtocolViolation"
    assert out["after"] == "2"                        # the next cell runs in a fresh worker


UNDER_LIMIT = RAW_FRAMES + textwrap.dedent("""
    import threading
    from rpent.policy.frames import MAX_WORKER_FRAME_BYTES as LIMIT
    IN = int(sys.argv[sys.argv.index("--in-fd") + 1])
    threading.Thread(target=lambda: [os.read(IN, 1 << 20) for _ in iter(int, 1)], daemon=True).start()
    def array_of(item, n):
        return b"\\xdd" + struct.pack(">I", n) + item * n
    def frame(head, item):                 # a map whose last value is an array filling the frame
        return head + array_of(item, (LIMIT - len(head) - 5) // len(item))
""")


def test_valid_frames_of_the_worst_expansion_keep_the_parent_within_the_bound(tmp_path):
    # Robot calls whose arguments are arrays of 2-byte strings (msgpack's worst expansion, ~20x,
    # after a container budget stops empty lists): sent as fast as the pipe takes them, far past
    # the call budget, so the reader's queue and the call handling both run under load.
    out = _run_parent(tmp_path, UNDER_LIMIT + textwrap.dedent("""
        head = b"\\x84\\xa1t\\xa4call\\xa2id\\x01\\xa4tool\\xaeview_env_state\\xa4args\\x81\\xa4junk"
        for _ in range(150):
            send(frame(head, b"\\xa2ab"))
        import time
        time.sleep(30)
    """), max_calls=40)
    assert out["grown"] < RSS_BOUND, f"the parent grew {out['grown'] / 1e6:.0f} MB"
    attack = out["attack"]
    assert attack["budget_exhausted"] and attack["worker_lost"]
    assert attack["calls_made"] == 40
    assert out["after"] == "2"


@pytest.mark.parametrize("item, problem", [(b"\x90", "containers"), (b"\xa2ab", "text")])
def test_malformed_frames_under_the_size_limit_are_protocol_violations(tmp_path, item, problem):
    out = _run_parent(tmp_path, UNDER_LIMIT + textwrap.dedent(f"""
        head = b"\\x83\\xa1t\\xa3out\\xa6stream\\xa6stdout\\xa4text"
        for _ in range(50):
            send(frame(head, {item!r}))
        import time
        time.sleep(30)
    """))
    assert out["grown"] < RSS_BOUND, f"the parent grew {out['grown'] / 1e6:.0f} MB"
    attack = out["attack"]
    assert attack["exception"]["type"] == "ProtocolViolation"
    assert problem in attack["protocol_violation"], attack["protocol_violation"]
    assert out["after"] == "2"


def test_a_forged_done_cannot_claim_a_finish(make_runner, tmp_path):
    runner = make_runner()
    result = runner.run_cell(RAW_FRAMES + textwrap.dedent("""
        import msgpack, time
        forged = {"t": "done", "cell": 1, "value": None, "exception": None,
                  "finished": {"status": "success", "summary": "FORGED"}, "killed_processes": 0}
        send(msgpack.packb(forged, use_bin_type=True))
        time.sleep(30)
    """))
    assert result["finished"] is None
    assert runner.episode_finished is None
    assert not result["ok"]
    assert result["exception"]["type"] == "ProtocolViolation"
    assert "finish" in result["protocol_violation"]
    saved = json.loads((tmp_path / "run" / result["result_path"]).read_text())
    assert saved["finished"] is None and saved["ok"] is False and saved["protocol_violation"]
    # a real finish is still recorded, from what the toolkit accepted
    real = runner.run_cell("robo.finish('failure', 'real one')")
    assert real["finished"] == {"status": "failure", "summary": "real one"}
    assert runner.episode_finished == {"status": "failure", "summary": "real one"}


def test_a_done_after_the_cell_ended_is_a_protocol_violation(make_runner):
    """A cell that sends a forged ``done`` for its own index and keeps running: its real ``done``
    arrives later, for a cell that already ended, and the worker is replaced before the next cell."""
    runner = make_runner()
    first = runner.run_cell(RAW_FRAMES + textwrap.dedent("""
        import msgpack
        send(msgpack.packb({"t": "done", "cell": 1, "value": "'early'", "exception": None, "finished": None},
                           use_bin_type=True))
        'late'
    """))
    assert first["value"] == "'early'"                 # indistinguishable from a real done ...
    import time
    time.sleep(1.5)
    second = runner.run_cell("1 + 1")
    assert second["worker_restarted"]                  # ... until the real one arrives
    assert "done" in second["protocol_violation"]
    assert second["value"] == "2" and second["ok"]


def test_a_forged_done_in_the_last_cell_is_flagged_in_its_record_when_the_runner_closes(make_runner, tmp_path):
    """The same forgery in the last cell: no next cell reveals it, so closing the runner looks for
    frames after the last ``done`` and rewrites that cell's record (ok false, the violation)."""
    runner = make_runner()
    last = runner.run_cell(RAW_FRAMES + textwrap.dedent("""
        import msgpack
        send(msgpack.packb({"t": "done", "cell": 1, "value": "'forged'", "exception": None, "finished": None},
                           use_bin_type=True))
        'late'
    """))
    assert last["ok"] and last["value"] == "'forged'"   # what the forged done said, for now
    import time
    time.sleep(1.5)
    runner.close()
    saved = json.loads((tmp_path / "run" / last["result_path"]).read_text())
    assert saved["ok"] is False and "forged" in saved["protocol_violation"]
    assert saved["exception"]["type"] == "ProtocolViolation"
    # an honest last cell keeps its record as written
    honest = make_runner()
    ok = honest.run_cell("1 + 1")
    before = (tmp_path / "run" / ok["result_path"]).read_bytes()
    honest.close()
    assert (tmp_path / "run" / ok["result_path"]).read_bytes() == before


@pytest.mark.parametrize("message, problem", [
    ({"t": "_eof"}, "type"),
    ({"t": "ready", "pid": 1, "sandbox": {}}, "type"),
    ({"t": "call", "id": "x", "tool": "view_env_state", "args": {}}, "id"),
    ({"t": "out", "stream": "stdin", "text": "x"}, "stream"),
])
def test_messages_only_the_parent_may_synthesise_are_refused(make_runner, message, problem):
    runner = make_runner()
    result = runner.run_cell(RAW_FRAMES + f"import msgpack\nsend(msgpack.packb({message!r}, use_bin_type=True))\n"
                             "import time\ntime.sleep(30)\n")
    assert result["exception"]["type"] == "ProtocolViolation"
    assert problem in result["protocol_violation"], result["protocol_violation"]
    assert result["elapsed_s"] < 20
