"""``--step-images``: which capture mode the LIBERO toolkit gets (rendering is the main cost of a
scripted episode on a CPU-only machine, so planners that read state get images on demand)."""

from __future__ import annotations

import pytest

from rpent.cli.main import build_parser, config_from_args
from rpent.run import RunConfig


@pytest.mark.parametrize("planner, policy_mode, expected", [
    ("scripted", "tools", "on_demand"),
    ("flash", "tools", "on_demand"),
    ("api", "tools", "every_step"),
    ("claude_code", "tools", "every_step"),
    ("scripted", "code", "every_step"),
])
def test_auto_renders_every_step_only_for_planners_that_read_images(planner, policy_mode, expected):
    cfg = RunConfig(suite="libero_object", task=0, planner=planner, policy_mode=policy_mode)
    assert cfg.step_images == "auto" and cfg.resolved_step_images() == expected


@pytest.mark.parametrize("value, expected", [("every-step", "every_step"), ("on-demand", "on_demand"),
                                             ("every_step", "every_step")])
def test_explicit_mode_wins_over_the_planner(value, expected):
    for planner in ("scripted", "api"):
        assert RunConfig(suite="libero_object", task=0, planner=planner, step_images=value).resolved_step_images() == expected


def test_unknown_mode_is_a_one_line_error():
    with pytest.raises(ValueError, match="--step-images must be auto, every-step or on-demand"):
        RunConfig(suite="libero_object", task=0, step_images="sometimes").resolved_step_images()


def test_cli_flag_reaches_the_run_config(capsys):
    parser = build_parser()
    args = parser.parse_args(["--suite", "libero_object", "--task", "0", "--planner", "scripted",
                              "--step-images", "every-step"])
    assert config_from_args(args).resolved_step_images() == "every_step"
    args = parser.parse_args(["--suite", "libero_object", "--task", "0", "--planner", "scripted"])
    assert config_from_args(args).resolved_step_images() == "on_demand"
    with pytest.raises(SystemExit):
        parser.parse_args(["--suite", "libero_object", "--task", "0", "--step-images", "never"])
    assert "invalid choice" in capsys.readouterr().err


def test_toolkit_refuses_an_unknown_capture_mode():
    from rpent.robots.libero.toolkit import CAPTURE_MODES, LiberoToolkit

    assert LiberoToolkit.CAPTURE_MODES == CAPTURE_MODES == ("every_step", "on_demand")
    with pytest.raises(ValueError, match="capture must be one of every_step, on_demand"):
        LiberoToolkit(env=None, record=None, capture="lazy")
