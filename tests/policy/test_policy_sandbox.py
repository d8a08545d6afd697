"""The worker process: no secrets, limits it cannot lift, crashes that end only the cell."""

from __future__ import annotations

import ast
import os
import socket
import time

import pytest

from rpent.policy import WorkerLimits
from rpent.policy.sandbox import worker_env

FAKE_KEY = "sk-ant-fake-0123456789-should-never-reach-policy-code"


def test_a_cell_finds_no_api_key_in_its_environment(make_runner, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", FAKE_KEY)
    runner = make_runner()
    result = runner.run_cell(
        "import os\n"
        "print(os.environ.get('ANTHROPIC_API_KEY'))\n"
        "found = [k for k, v in os.environ.items() if 'fake' in v or 'KEY' in k or 'TOKEN' in k]\n"
        "found, os.environ['HOME'] == os.getcwd()\n")
    assert result["ok"], result["exception"]
    assert result["stdout"] == "None\n"
    assert result["value"] == "([], True)"
    assert FAKE_KEY not in (tmp_path / "run" / "code_policy" / "cell_001.json").read_text()


def test_the_parents_proc_environ_is_not_readable(make_runner, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    runner = make_runner()
    result = runner.run_cell(
        "import os\n"
        "try:\n    data = open(f'/proc/{os.getppid()}/environ', 'rb').read()\n"
        "except OSError as e:\n    data = type(e).__name__.encode()\n"
        "data")
    isolation = result["sandbox"]["isolation"]
    if not (isolation.get("user_namespace") or os.getuid() == 0):
        pytest.skip(f"no user namespace and not root: /proc/<pid>/environ stays readable ({isolation})")
    assert FAKE_KEY not in result["value"]
    assert "PermissionError" in result["value"]


def test_the_environment_is_an_allow_list_and_credentials_are_refused(tmp_path):
    env = worker_env(tmp_path, {"MUJOCO_GL": "egl"})
    assert env["HOME"] == str(tmp_path.resolve()) and env["MUJOCO_GL"] == "egl"
    assert env["TMPDIR"] == env["HOME"]
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "PYTHONHASHSEED", "PYTHONPATH",
                        "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS",
                        "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MUJOCO_GL"}
    with pytest.raises(ValueError, match="looks like a credential"):
        worker_env(tmp_path, {"HF_TOKEN": "x"})


def test_code_cannot_raise_its_own_limits(make_runner):
    runner = make_runner()
    result = runner.run_cell(
        "import resource\n"
        "out = {}\n"
        "for name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NOFILE'):\n"
        "    res = getattr(resource, name)\n"
        "    soft, hard = resource.getrlimit(res)\n"
        "    try:\n"
        "        resource.setrlimit(res, (hard * 2, hard * 2))\n"
        "        out[name] = 'raised'\n"
        "    except (ValueError, OSError) as e:\n"
        "        out[name] = (soft, hard, 'refused')\n"
        "out")
    assert result["ok"], result["exception"]
    limits = ast.literal_eval(result["value"])
    assert limits == {"RLIMIT_AS": (2 * 1024**3, 2 * 1024**3, "refused"),
                      "RLIMIT_CPU": (3600, 3600, "refused"),
                      "RLIMIT_NOFILE": (256, 256, "refused")}
    assert result["sandbox"]["limits"]["RLIMIT_AS"] == 2 * 1024**3
    assert result["sandbox"]["isolation"]["capabilities_dropped"]


def test_os_exit_ends_the_cell_and_the_next_cell_works(make_runner):
    runner = make_runner()
    runner.run_cell("before = 1")
    result = runner.run_cell("import os\nprint('going')\nos._exit(3)\nprint('never')")
    assert not result["ok"] and result["worker_lost"]
    assert result["stdout"] == "going\n"                      # output before the crash is kept
    assert result["exception"]["type"] == "WorkerLost"
    assert "exit code 3" in result["worker_exit"]
    nxt = runner.run_cell("'before' in globals(), 6 * 7")
    assert nxt["ok"] and nxt["worker_restarted"] and nxt["value"] == "(False, 42)"


def _processes_with_arg(arg: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and arg.encode() in open(f"/proc/{entry}/cmdline", "rb").read() \
                    and open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry))
        except OSError:
            pass
    return found


def test_killing_its_own_process_ends_the_cell_and_its_children(make_runner):
    runner = make_runner()
    arg = f"60.{os.getpid()}{time.monotonic_ns() % 10**6}"   # a unique command line to find the child by
    result = runner.run_cell(
        "import os, signal, subprocess\n"
        f"child = subprocess.Popen(['sleep', '{arg}'])\n"
        "print(child.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    assert result["worker_lost"] and "killed by SIGKILL" in result["worker_exit"]
    assert result["stdout"].strip().isdigit()
    for _ in range(50):
        if not _processes_with_arg(arg):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the cell's child {_processes_with_arg(arg)} survived the worker")
    assert runner.run_cell("1 + 1")["value"] == "2"


def test_unbounded_allocation_fails_the_cell_not_the_run(make_runner):
    runner = make_runner(limits=WorkerLimits(memory_bytes=1024**3))
    runner.run_cell("keep = 'x'")
    result = runner.run_cell("hoard = []\nwhile True:\n    hoard.append(np.empty(50_000_000))\n")
    assert not result["ok"]
    assert result["exception"]["type"] in ("MemoryError", "WorkerLost"), result["exception"]
    nxt = runner.run_cell("del hoard\n2 + 2" if not result["worker_lost"] else "2 + 2")
    assert nxt["ok"] and nxt["value"] == "4", nxt["exception"]


def test_the_worker_has_no_network(make_runner):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        runner = make_runner()
        result = runner.run_cell(
            "import socket\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); out = 'connected'\n"
            "except OSError as e:\n    out = type(e).__name__\n"
            "out")
    finally:
        server.close()
    if not result["sandbox"]["isolation"].get("network_namespace"):
        pytest.skip(f"network namespaces unavailable here: {result['sandbox']['isolation']}")
    assert result["value"] != "'connected'"


def test_without_namespaces_capabilities_are_still_dropped(make_runner):
    runner = make_runner(namespaces=False)
    result = runner.run_cell(
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_AS, (hard * 2, hard * 2)); out = 'raised'\n"
        "except (ValueError, OSError):\n    out = 'refused'\nout")
    isolation = result["sandbox"]["isolation"]
    assert isolation["user_namespace"] is False and isolation["capabilities_dropped"]
    assert result["value"] == "'refused'"
