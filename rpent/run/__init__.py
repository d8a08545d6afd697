"""The run layer: one task end to end (services, toolkit, planner, run record).

``from rpent.run import RunConfig, RunOutcome, run_task`` — see :mod:`rpent.run.runner`.
"""

from rpent.run.config import EXIT_ERROR, EXIT_SUCCESS, EXIT_TASK_FAILED, RunConfig, RunOutcome, default_output_dir
from rpent.run.runner import run_task

__all__ = ["RunConfig", "RunOutcome", "run_task", "default_output_dir", "EXIT_SUCCESS", "EXIT_TASK_FAILED",
           "EXIT_ERROR"]
