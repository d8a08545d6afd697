"""``rpent-tui`` refuses, before any session process or service starts, what would make every TaskRun of
the session fail: an ``api`` planner without a usable ``--model``, an unknown planner, and an
``--output-dir`` that is (or lies under) a file (each one line with the fix, exit 2, nothing written)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rpent.session.model import SessionConfig, SessionConfigError


def _tui(*args, cwd):
    return subprocess.run([sys.executable, "-m", "rpent_tui", *args], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=120)


@pytest.mark.parametrize("flags, needle", [
    (("--planner", "api"), "rpent-tui: error: the 'api' planner requires a model id; pass --model"),
    (("--planner", "api", "--model", "nocolon"), "rpent-tui: error: --model 'nocolon' has no provider prefix"),
    (("--planner", "nosuch"), "rpent-tui: error: --planner 'nosuch' is not a planner; choose from: api,"),
])
def test_a_planner_every_taskrun_would_fail_on_is_refused_at_start(tmp_path, flags, needle):
    p = _tui(*flags, "--output-dir", str(tmp_path / "s"), cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and p.stderr.startswith(needle), p.stderr
    assert not (tmp_path / "s").exists()


def test_an_output_dir_that_is_a_file_is_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for out in (afile, afile / "sub"):
        p = _tui("--planner", "scripted", "--output-dir", str(out), cwd=tmp_path)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.strip() == (f"rpent-tui: error: --output-dir {out}: {afile} is a file, not a directory; "
                                    "choose a directory for the session")
    assert afile.read_text() == "keep"


def test_session_config_accepts_the_offline_and_prefixed_planners(tmp_path):
    for planner, model in (("scripted", None), ("api", "anthropic:claude-sonnet-4-5"), ("claude_code", None)):
        config = SessionConfig(output_dir=tmp_path / "s", planner=planner, model=model, shared_services=())
        config.validate()
        config.validate_planner()
    with pytest.raises(SessionConfigError, match="requires a model id"):
        SessionConfig(output_dir=tmp_path / "s", planner="api").validate_planner()


def test_rpent_dashboard_refuses_an_api_planner_without_a_model_before_starting_a_session(tmp_path):
    p = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--dashboard", "--dashboard-port", "1",
                        "--planner", "api", "--output-dir", str(tmp_path / "d")], capture_output=True, text=True,
                       cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("rpent: error: the 'api' planner requires a model id")
    assert not (tmp_path / "d").exists()


def test_a_directory_holding_another_record_is_refused_as_a_session_directory(tmp_path):
    """A run record (or any folder with files but no session.json) never becomes a session directory:
    the session's files and tasks/ would be mixed into it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.log").write_text("an earlier run")
    (run / "states.json").write_text("{}")
    p = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--dashboard", "--dashboard-port", "1",
                        "--planner", "scripted", "--output-dir", str(run)], capture_output=True, text=True,
                       cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(
        f"rpent: error: --output-dir {run} holds files (run.log, states.json) but no session.json"), p.stderr
    assert f"--output-dir {run}-2" in p.stderr
    assert sorted(q.name for q in run.iterdir()) == ["run.log", "states.json"]
