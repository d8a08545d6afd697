"""A cell reads only what the worker needs (the interpreter, its packages, the rpent package, its
scratch), never the directory rpent was started from, whichever way rpent was started: ``python -m``
(which puts the working directory first on ``sys.path``), ``python -c``, a script, the ``rpent``
console script, ``rpent-batch`` (which starts every cell with ``python -m rpent.cli.main``).
The cell also reports which ``rpent`` it imported: the tree under test, not another install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rpent

POLICY_TESTS = Path(__file__).parent.parent / "policy"
TREE = Path(rpent.__file__).resolve().parent.parent

#: The cell: tries the secret in the starting directory, a file beside the rpent package (a
#: source checkout's own files) and the scratch; reports what it got and which rpent it runs.
PROBE = textwrap.dedent("""
    import json, os
    import rpent
    out = {{"rpent": rpent.__file__}}
    for name, path in (("cwd_secret", {secret!r}), ("beside_package", {beside!r})):
        try:
            out[name] = open(path).read()
        except OSError as exc:
            out[name] = type(exc).__name__
    open("scratch.txt", "w").write("ok")
    out["scratch"] = open("scratch.txt").read()
    print("PROBE " + json.dumps(out))
""")

PARENT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {policy_tests!r})
    from policy_point_robot import PointRobotToolkit
    from rpent.policy import CodePolicyRunner
    with CodePolicyRunner(PointRobotToolkit(), {run!r}, timeout_s=60) as runner:
        result = runner.run_cell(open({probe!r}).read())
    print("RESULT " + json.dumps({{"stdout": result["stdout"], "exception": result["exception"],
                                   "layers": result["sandbox"]["isolation"]["layers"]}}))
""")


@pytest.fixture
def started_from(tmp_path):
    """A starting directory holding a secret, and the probe cell that tries to read it."""
    cwd = tmp_path / "start"
    cwd.mkdir()
    (cwd / ".env").write_text("API_KEY=cwd-secret")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.format(secret=str(cwd / ".env"), beside=str(TREE / "pyproject.toml")))
    return cwd, probe


def _probe(stdout: str) -> dict:
    line = next((ln for ln in stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, stdout[-2000:]
    return json.loads(line[len("PROBE "):])


def _check(out: dict, layers: dict | None) -> None:
    if layers is not None and not layers.get("landlock", {}).get("on"):
        pytest.skip(f"no Landlock here ({layers.get('landlock', {}).get('detail')}): a cell reads what its "
                    "user may read (see docs/guides/sandbox.md)")
    assert out["rpent"] == rpent.__file__, "the worker imported another rpent than the one under test"
    assert out["cwd_secret"] == "PermissionError", f"the cell read the starting directory's secret: {out}"
    if (TREE / "pyproject.toml").exists():            # a source checkout: its own files stay unreadable
        assert out["beside_package"] == "PermissionError", f"the cell read beside the rpent package: {out}"
    assert out["scratch"] == "ok"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(TREE), MUJOCO_GL="egl")


@pytest.mark.parametrize("how", ["python -m", "python -c", "python script.py"])
def test_a_cell_cannot_read_the_starting_directory(started_from, tmp_path, how):
    cwd, probe = started_from
    code = PARENT.format(policy_tests=str(POLICY_TESTS), run=str(tmp_path / "run"), probe=str(probe))
    if how == "python -m":
        (cwd / "start_rpent.py").write_text(code)
        argv = [sys.executable, "-m", "start_rpent"]          # sys.path[0] is the working directory
    elif how == "python -c":
        argv = [sys.executable, "-c", code]                   # sys.path[0] is ''
    else:
        (cwd / "start_rpent.py").write_text(code)
        argv = [sys.executable, str(cwd / "start_rpent.py")]  # sys.path[0] is the script's directory
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["exception"] is None, result["exception"]
    _check(_probe(result["stdout"]), result["layers"])


def _code_file_run(cwd: Path, probe: Path, argv: list[str]) -> dict:
    pytest.importorskip("libero")
    policy = cwd / "p.py"
    policy.write_text(probe.read_text() + "robo.finish('failure', 'probe only')\n")
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    cells = sorted(cwd.rglob("code_policy/cell_001.json"))
    assert cells, f"no cell record under {cwd}: {proc.stderr[-2000:]}"
    record = json.loads(cells[0].read_text())
    return {"out": _probe(record["stdout"]), "layers": record["sandbox"]["isolation"]["layers"]}


RUN_FLAGS = ["--suite", "libero_object", "--task", "0", "--seed", "0", "--policy-mode", "code", "--code-file", "p.py",
             "--no-video"]


@pytest.mark.slow
def test_a_real_code_file_run_started_with_python_m_cannot_read_its_directory(started_from):
    cwd, probe = started_from
    got = _code_file_run(cwd, probe, [sys.executable, "-m", "rpent.cli.main", *RUN_FLAGS, "--output-dir", "r"])
    _check(got["out"], got["layers"])


@pytest.mark.slow
def test_a_real_code_file_run_started_by_the_console_script_cannot_read_its_directory(started_from):
    cwd, probe = started_from
    script = Path(sys.executable).parent / "rpent"
    if not script.exists():
        script = Path(shutil.which("rpent") or "")
    if not script.is_file():
        pytest.skip("no rpent console script installed next to this interpreter")
    got = _code_file_run(cwd, probe, [str(script), *RUN_FLAGS, "--output-dir", "r"])
    _check(got["out"], got["layers"])


@pytest.mark.slow
def test_a_real_rpent_batch_cell_cannot_read_its_directory(started_from):
    cwd, probe = started_from
    got = _code_file_run(cwd, probe, [sys.executable, "-m", "rpent.cli.batch", "--suites", "libero_object", "--tasks",
                                      "0", "--seeds", "0", "--policy-mode", "code", "--code-file", "p.py", "--no-video",
                                      "--results-root", "r"])
    _check(got["out"], got["layers"])
