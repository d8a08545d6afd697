"""The planner-facing side of code mode: the ``python(code)`` tool and a toolkit view.

In ``--policy-mode code`` a planner sees three kinds of tools (reference §4.2):
``python(code)`` (runs a cell through :class:`~rpent.policy.runner.CodePolicyRunner`),
``finish`` and the operator tools (``request_scene_reset``, ``request_operator_verdict``),
which stay outside Python because waiting for a person can outlast a cell.
:class:`CodeModeToolkit` packages exactly that behind the ordinary toolkit contract
(``specs`` / ``execute`` / ``cancel`` / ``clear_cancel`` / ``solved``), so every planner
(api, claude_code, codex) runs code mode without knowing about it::

    runner = CodePolicyRunner(toolkit, output_dir, timeout_s=120, max_calls=100)
    planner.solve(code_mode_system_prompt(runner.specs, ...), task, CodeModeToolkit(toolkit, runner))

A planner that keeps its own tool list can use :func:`python_tool_spec` and
:func:`execute_python_tool` directly instead.
"""

from __future__ import annotations

from rpent.toolkit.registry import ToolSpec
from typing import Any

from rpent.policy.robo import OPERATOR_TOOLS
from rpent.policy.runner import CellResult, CodePolicyRunner, spec_to_dict

PYTHON_TOOL = "python"
#: Characters of stdout / stderr returned to the planner per cell (head and tail kept;
#: the full text is in code_policy/cell_NNN.json). Same cap as PyRUA-Lean's feedback.
PLANNER_TEXT_CHARS = 20_000
#: Robot calls listed to the planner per cell (the last ones; all are in the JSON).
PLANNER_CALLS = 40
#: Result keys left out of the planner's copy of each robot call (bulky views that the
#: cell's code already had; the full results are in code_policy/cell_NNN.json).
PLANNER_DROPPED_RESULT_KEYS = ("state_after", "artifacts", "log", "traceback")
#: Longest repr of one robot call's result in the planner's copy (characters).
PLANNER_CALL_RESULT_CHARS = 1_500


def python_tool_spec(timeout_s: float = 120.0, max_calls: int = 100) -> ToolSpec:
    """The ``python(code)`` tool spec shown to the planner.

    Args:
        timeout_s: the cell wall-time limit, s (stated in the description).
        max_calls: robot-tool calls per cell (stated in the description).
    """
    description = (
        "Run a cell of Python code that drives the robot through `robo.<tool>(...)` "
        "(see the system prompt for the robo API). Variables, functions and imports persist "
        "across cells of this run; `np`, `math` and `robo` are preloaded. The value of a "
        "trailing expression is echoed. Returns stdout, stderr, exception with traceback, the "
        "value, the robot calls with their results, env steps used, whether the robot moved, "
        f"and camera images after motion. Limits per cell: {timeout_s:g} s wall time (the "
        f"running motion stops at its next env step) and {max_calls} robot-tool calls. "
        "`robo.finish(status, summary)` ends the task and the cell."
    )
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source of the cell"}},
        "required": ["code"],
        "additionalProperties": False,
    }
    return ToolSpec(PYTHON_TOOL, description, schema, False)


def _cap(text: str, limit: int = PLANNER_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}\n...[{len(text) - head - tail} characters omitted; full text in the cell's JSON]...\n{text[-tail:]}"


def _compact_call(call: dict[str, Any]) -> dict[str, Any]:
    out = dict(call)
    res = call.get("result")
    if isinstance(res, dict):
        res = {k: v for k, v in res.items() if k not in PLANNER_DROPPED_RESULT_KEYS}
        after = call["result"].get("state_after")
        if isinstance(after, dict) and "terminated" in after:
            res.setdefault("terminated", after["terminated"])
        text = repr(res)
        if len(text) > PLANNER_CALL_RESULT_CHARS:
            res = {"summary": text[:PLANNER_CALL_RESULT_CHARS] + "...[cut; full result in the cell's JSON]"}
        out["result"] = res
    return out


def cell_result_for_planner(result: CellResult) -> dict[str, Any]:
    """The tool result a planner receives for one cell: the :class:`CellResult` with
    stdout/stderr capped to :data:`PLANNER_TEXT_CHARS` each, the last
    :data:`PLANNER_CALLS` robot calls (results without the bulky
    :data:`PLANNER_DROPPED_RESULT_KEYS`, each cut at :data:`PLANNER_CALL_RESULT_CHARS`), images as the toolkit contract's ``_images``, and
    ``_finish: True`` plus ``status``/``summary`` when ``finish`` was accepted (which ends
    the planner loop). A failed cell is a normal result (no ``error`` key): the planner
    reads ``ok`` and ``exception``."""
    calls = result["robot_calls"]
    out: dict[str, Any] = {
        "cell": result["cell"],
        "ok": result["ok"],
        "stdout": _cap(result["stdout"]),
        "stderr": _cap(result["stderr"]),
        "exception": result["exception"],
        "value": result["value"],
        "robot_calls": [_compact_call(c) for c in calls[-PLANNER_CALLS:]],
        "calls_made": result["calls_made"],
        "max_calls": result["max_calls"],
        "env_steps": result["env_steps"],
        "moved": result["moved"],
        "timed_out": result["timed_out"],
        "budget_exhausted": result["budget_exhausted"],
        "worker_restarted": result["worker_restarted"],
        "elapsed_s": result["elapsed_s"],
        "saved": [result["source_path"], result["result_path"]],
    }
    if len(calls) > PLANNER_CALLS:
        out["robot_calls_omitted"] = len(calls) - PLANNER_CALLS
    if result["interrupted"]:
        out["interrupted"] = True
    if result["worker_lost"]:
        out["worker_lost"] = result["worker_exit"]
    if result["worker_restarted"]:
        out["note"] = ("this cell ran in a fresh Python worker because the previous one was lost: "
                       "variables, functions and imports from earlier cells are gone")
    if result["images"]:
        out["_images"] = list(result["images"])
    if result["finished"]:
        out["_finish"] = True
        out["status"] = result["finished"]["status"]
        out["summary"] = result["finished"]["summary"]
    return out


def execute_python_tool(runner: CodePolicyRunner, args: dict[str, Any]) -> dict[str, Any]:
    """Execute the ``python`` tool: run ``args["code"]`` as one cell.

    Never raises (toolkit contract): a missing or non-string ``code`` gives
    ``{"error": ..., "got": ...}``; another cell still running gives ``{"error": ...}``.
    """
    if not isinstance(args, dict) or not isinstance(args.get("code"), str):
        return {"error": "bad arguments for python: pass {\"code\": \"<python source>\"}", "got": args}
    extra = sorted(set(args) - {"code"})
    if extra:
        return {"error": f"bad arguments for python: unexpected {extra}; only 'code' is accepted", "got": args}
    try:
        result = runner.run_cell(args["code"])
    except RuntimeError as exc:
        return {"error": str(exc)}
    return cell_result_for_planner(result)


class CodeModeToolkit:
    """The toolkit a planner gets in code mode (see the module docstring).

    Args:
        toolkit: the robot's toolkit (toolkit contract).
        runner: the run's :class:`CodePolicyRunner` over the same toolkit.
    """

    def __init__(self, toolkit: Any, runner: CodePolicyRunner):
        self.toolkit = toolkit
        self.runner = runner
        self._outside = {"finish"} | set(OPERATOR_TOOLS)

    def specs(self) -> list[Any]:
        """``python`` plus the wrapped toolkit's ``finish`` and operator tools."""
        kept = [s for s in self.toolkit.specs() if spec_to_dict(s)["name"] in self._outside]
        return [python_tool_spec(self.runner.timeout_s, self.runner.max_calls), *kept]

    def execute(self, name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        """Run ``python`` as a cell, pass ``finish``/operator tools to the toolkit,
        answer any other name with an error that points to ``robo.<name>``. Never raises."""
        if name == PYTHON_TOOL:
            return execute_python_tool(self.runner, args)
        if name in self._outside:
            return self.toolkit.execute(name, args, call_id)
        return {"error": (f"unknown tool: {name}. In code mode robot tools are called from Python: "
                          f"use the python tool with robo.{name}(...)")}

    def cancel(self) -> None:
        """Stop the running cell (its motion stops at the next env step) and any
        running toolkit call."""
        self.runner.interrupt()
        self.toolkit.cancel()

    def clear_cancel(self) -> None:
        """Clear the toolkit's cancel flag."""
        self.toolkit.clear_cancel()

    def solved(self) -> bool:
        """The environment's own success predicate (``toolkit.solved()``)."""
        return bool(self.toolkit.solved())
