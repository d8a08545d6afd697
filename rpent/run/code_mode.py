"""Code-as-policy mode in the run loop (``--policy-mode code``, ``--code-file``).

* With ``--code-file policy.py`` (no LLM): the file runs as one cell of a
  :class:`rpent.policy.CodePolicyRunner` over the run's toolkit; the result is recorded under
  ``code_policy/`` and summarised as the planner result. How the cell ended decides the stop:
  ``robo.finish(...)`` -> ``finished``; its wall-time limit -> ``timeout``; its robot call budget
  -> ``budget`` (both limits: the task was not solved); a ``robo.ToolError`` left uncaught after a
  service failed under the tool (its result says ``service_error``) -> ``service_error``; any
  other exception the code raised -> ``error`` with ``error_kind``
  :data:`rpent.recording.outcome.POLICY_CODE_ERROR` and the exception's type and message as the
  error (the run is labelled ``error`` unless the environment's predicate held); the operator's
  stop -> ``interrupted``; the end of the file without ``robo.finish`` -> not solved, with an
  error saying so.
* With an LLM planner: the planner gets :class:`rpent.policy.CodeModeToolkit` (the ``python``
  cell tool, ``finish`` and the operator tools) and the code-mode system prompt; it reads no
  task memory and no recipe is written (the run layer skips recipes in code mode).
"""

from __future__ import annotations

import time

from rpent.planners.base import Finish, PlannerResult, PlannerStats
from rpent.recording.outcome import POLICY_CODE_ERROR

__all__ = ["solve_code_mode", "LIBERO_CODE_NOTES"]

#: LIBERO rules appended to the code-mode prompt (RPent reference §3.2, §9).
LIBERO_CODE_NOTES = (
    "Positions are metres in the LIBERO world frame, angles radians; gripper -1 open, +1 close. "
    "Never move more than 0.30 m in x/y with one robo.move_to: use waypoints. robo.segment(prompt=...) "
    "returns world_xyz and object_estimate (center, top_z, bottom_z, major_yaw) of an object. "
    "Success is the environment's predicate (robo.view_env_state().success), not your finish status."
)

def _last_call_error_type(cell: dict) -> str | None:
    """``error_type`` of the result of the cell's last robot call (``service_error``: a service failed)."""
    calls = cell.get("robot_calls") or []
    result = calls[-1].get("result") if calls and isinstance(calls[-1], dict) else None
    return result.get("error_type") if isinstance(result, dict) else None


def solve_code_mode(cfg, toolkit, info, record, steering, on_event) -> PlannerResult:
    """Run code mode for one task; returns a :class:`PlannerResult` (never raises for cell errors)."""
    from rpent.policy import CodeModeToolkit, CodePolicyRunner, code_mode_system_prompt, run_code_file

    t0 = time.monotonic()
    runner = CodePolicyRunner(toolkit, record.dir, timeout_s=cfg.code_timeout_s, max_calls=cfg.code_max_calls,
                              images=not cfg.planner_config.no_images)
    try:
        if cfg.code_file:
            result = PlannerResult(stats=PlannerStats())
            on_event("text", {"text": f"running --code-file {cfg.code_file} as one code-policy cell"})
            # an operator interrupt or /quit stops the cell (its running tool at the next env-step boundary)
            remove = steering.add_interrupt_listener(runner.interrupt) if steering is not None else (lambda: None)
            try:
                cell = run_code_file(runner, cfg.code_file)
            finally:
                remove()
            if steering is not None and steering.pending:
                on_event("text", {"text": "a --code-file policy cannot use operator text; the lines are recorded "
                                          "as undelivered"})
            summary = {k: cell.get(k) for k in ("index", "stdout", "stderr", "exception", "value", "timed_out",
                                                 "budget_exhausted", "finished", "env_steps", "moved")}
            result.messages = [{"role": "tool", "name": "python", "tool_call_id": f"cell_{cell.get('index')}",
                                "content": summary, "is_error": bool(cell.get("exception"))}]
            result.stats.tool_calls = len(cell.get("robot_calls") or [])
            finished = runner.episode_finished
            if finished:
                result.finish = Finish(status=finished.get("status", ""), summary=finished.get("summary", ""))
                result.stop_reason = "finished"
            exc = cell.get("exception") or {}
            if cell.get("interrupted"):
                result.error = (steering.stop_reason if steering is not None else None) or "interrupted by operator"
                result.stop_reason = "interrupted"
            elif cell.get("timed_out"):  # a limit, as a planner's timeout: the task was not solved in time
                result.error, result.stop_reason = f"policy cell timed out after {cfg.code_timeout_s:g}s", "timeout"
            elif exc.get("type") == "CallBudgetExhausted":  # a limit too: out of robot calls
                result.error, result.stop_reason = f"policy code ran out of robot calls: {exc.get('message')}", "budget"
            elif exc.get("type") == "ToolError" and _last_call_error_type(cell) == "service_error":
                # a service failed under the policy (its tool answered service_error): not the code's fault
                result.error = f"policy code stopped on a service error: {exc.get('message')}"
                result.stop_reason = "service_error"
            elif exc:  # the policy's own code failed: an error of the run, not an answer to the task
                result.error = f"policy code raised {exc.get('type')}: {exc.get('message')}"
                result.stop_reason, result.error_kind = "error", POLICY_CODE_ERROR
            elif not finished:  # no model here: say what ended, not "the model ended its turn"
                result.error = (f"the --code-file policy {cfg.code_file} ran to its end without calling "
                                "robo.finish(...); end it with robo.finish('success'|'failure', summary)")
            result.stats.elapsed_s = round(time.monotonic() - t0, 3)
            return result
        from rpent.planners.base import create_planner
        from rpent.robots.libero import prompts

        cfg.planner_config.output_dir = cfg.planner_config.output_dir or record.dir
        planner = create_planner(cfg.planner, cfg.planner_config)
        system = code_mode_system_prompt(toolkit.specs(), timeout_s=cfg.code_timeout_s,
                                         max_calls=cfg.code_max_calls, task_language=info.language,
                                         robot_notes=LIBERO_CODE_NOTES)
        user = cfg.user_message or prompts.task_message(cfg.suite, cfg.task, cfg.seed, info.language)
        return planner.solve(system, user, CodeModeToolkit(toolkit, runner), steering=steering, on_event=on_event)
    finally:
        runner.close()
