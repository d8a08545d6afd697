"""/rpent-task parsing and completion data."""

import pytest

from rpent.session.commands import (CommandError, SteerMessage, TaskCommand, completions, known_suites,
                                         parse_input)


def test_task_command_parses_and_builds_slug():
    cmd = parse_input("  /rpent-task libero_goal 3 7 ")
    assert cmd == TaskCommand("libero_goal", 3, 7)
    assert cmd.slug == "libero_goal_t3_s7"


def test_plain_text_is_a_steering_message():
    assert parse_input("grasp the bowl first") == SteerMessage("grasp the bowl first")


@pytest.mark.parametrize("line, message", [
    ("/rpent-taks libero_goal 1 0", "unknown Dashboard command '/rpent-taks'"),
    ("/rpent-task libero_goal 1", r"expected /rpent-task <suite> <task> <seed> \(got 2"),
    ("/rpent-task libero_nope 1 0", "unsupported suite 'libero_nope'; known suites: .*libero_goal"),
    ("/rpent-task libero_goal one 0", "task must be an integer, got 'one'"),
    ("/rpent-task libero_goal 1 -2", "seed must be an integer >= 0"),
    ("   ", "empty input"),
])
def test_errors_name_the_problem_and_the_usage(line, message):
    with pytest.raises(CommandError, match=message):
        parse_input(line)


def test_completions_offer_command_then_suites():
    assert completions("/rp") == ["/rpent-task "]
    suites = completions("/rpent-task libero_obj")
    assert suites and all(s.startswith("/rpent-task libero_obj") for s in suites)
    assert completions("hello") == []
    assert "libero_10" in known_suites()
