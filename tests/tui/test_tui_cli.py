"""``rpent-tui`` option handling, through the real entry point in a subprocess (no terminal needed:
bad options are refused before the UI starts)."""

import subprocess
import sys

import pytest

from rpent_tui.cli import build_parser, session_config_from_args


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "rpent_tui", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, message", [
    (["--env-endpoint", "http://127.0.0.1:9000"],
     "Dashboard task control cannot use --env-endpoint because each TaskRun requires a fresh owned env_server"),
    (["--images", "ascii-art"], "--images='ascii-art' is not an image mode; choose one of: auto, sixel"),
    (["--robot", "franka"], "--robot: unknown robot 'franka'; choose one of: libero, metaworld"),
    (["--fps", "0"], "--fps must be a positive number"),
])
def test_bad_options_exit_2_with_the_reason(args, message, tmp_path):
    proc = run_cli("--output-dir", str(tmp_path / "s"), *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_shared_services_auto_follow_endpoints_and_checkpoints(tmp_path, monkeypatch):
    monkeypatch.delenv("PI05_CHECKPOINT_PATH", raising=False)
    monkeypatch.delenv("SAM3_CHECKPOINT_PATH", raising=False)
    parse = build_parser().parse_args
    assert session_config_from_args(parse(["--output-dir", str(tmp_path)])).shared_services == ()
    cfg = session_config_from_args(parse(["--output-dir", str(tmp_path), "--vla-endpoint", "http://127.0.0.1:8220",
                                          "--max-turns", "7", "--record-trajectory"]))
    assert cfg.shared_services == ("vla",) and cfg.vla_endpoint == "http://127.0.0.1:8220"
    assert cfg.run_options == {"max_turns": 7, "record_trajectory": True}
    monkeypatch.setenv("SAM3_CHECKPOINT_PATH", "/ckpt/sam3.pt")
    assert session_config_from_args(parse(["--output-dir", str(tmp_path)])).shared_services == ("sam3",)


def test_run_config_for_a_taskrun_uses_the_real_runconfig(tmp_path):
    from rpent.session.commands import TaskCommand
    from rpent.session.defaults import default_make_run_config

    cfg = session_config_from_args(build_parser().parse_args(
        ["--output-dir", str(tmp_path), "--planner", "api", "--model", "anthropic:claude-opus-4-8", "--max-turns", "9",
         "--require-operator-verdict", "--libero-type", "pro"]))
    rc = default_make_run_config(cfg, TaskCommand("libero_goal", 2, 1), tmp_path / "tasks" / "0001", {"vla": "http://127.0.0.1:1"})
    assert (rc.suite, rc.task, rc.seed, rc.planner, rc.env_endpoint) == ("libero_goal", 2, 1, "api", None)
    assert rc.planner_config.model == "anthropic:claude-opus-4-8" and rc.planner_config.max_turns == 9
    assert rc.vla_endpoint == "http://127.0.0.1:1" and rc.require_operator_verdict and rc.libero_type == "pro"


def test_service_layer_imports_no_textual():
    code = ("import sys, importlib\n"
            "for m in ('batch','datasets','explore','images','trio_bridge'):\n"
            "    importlib.import_module('rpent_tui.services.' + m)\n"
            "for m in ('model','core','defaults','layout','wire','server','client','process','batching','code_cells',"
            "'commands','flywheel_jobs','operator','supervised'):\n"
            "    importlib.import_module('rpent.session.' + m)\n"
            "importlib.import_module('rpent.recording.run_readers')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'textual_image')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_redirected_stderr_is_refused_with_one_line(tmp_path):
    """``rpent-tui ... 2> err.log`` drew a blank screen (Textual draws on stderr)."""
    with open(tmp_path / "err.log", "w") as err:
        proc = subprocess.run([sys.executable, "-m", "rpent_tui", "--planner", "scripted", "--shared", "none",
                               "--images", "none", "--output-dir", str(tmp_path / "s")],
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=60)
    assert proc.returncode == 2
    lines = (tmp_path / "err.log").read_text().splitlines()
    assert len(lines) == 1 and "stderr is not a terminal" in lines[0] and "2> file" in lines[0]
    assert not (tmp_path / "s").exists()  # nothing started, and the line does not claim logs there
    assert "nothing was started" in lines[0] and "already written" not in lines[0]


def test_every_screen_mode_can_be_the_first_screen():
    from rpent_tui.app import SCREEN_MODES
    from rpent_tui.cli import SCREENS

    assert set(SCREENS) == set(SCREEN_MODES)
    for name in SCREENS:
        assert build_parser().parse_args(["--screen", name]).screen == name
