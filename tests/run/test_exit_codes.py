"""``rpent``'s exit code from a run's label (rpent.run.config.RunOutcome.exit_code): 0 succeeded,
1 failed or aborted, 2 error or cancelled (a signal, ``/quit``, an operator stop), as its
``--help`` epilog and the docs' label table say."""

from __future__ import annotations

import pytest

from rpent.recording.outcome import RUN_LABELS, run_label
from rpent.run.config import EXIT_ERROR, EXIT_SUCCESS, EXIT_TASK_FAILED, RunOutcome


@pytest.mark.parametrize("label, code", [("succeeded", EXIT_SUCCESS), ("failed", EXIT_TASK_FAILED),
                                         ("aborted", EXIT_TASK_FAILED), ("cancelled", EXIT_ERROR),
                                         ("error", EXIT_ERROR)])
def test_every_label_has_its_documented_exit_code(label, code):
    assert label in RUN_LABELS
    assert RunOutcome(label=label).exit_code == code


def test_an_operator_quit_is_a_cancelled_run_and_exits_2():
    # /quit stops the planner with stop_reason "interrupted" and the operator's reason as error
    label = run_label(environment_success=False, verdict=None, verdict_required=False, stop_reason="interrupted",
                      error="operator quit")
    assert label == "cancelled"
    out = RunOutcome(environment_success=False, error="operator quit", stop_reason="interrupted", label=label)
    assert out.exit_code == EXIT_ERROR
