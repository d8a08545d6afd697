"""The code-mode system prompt (its own prompt: it reads no task memory, writes no recipe).

:func:`code_mode_system_prompt` lists the ``robo`` API with Python signatures generated
from the toolkit's specs (:mod:`rpent.policy.signatures`), so the prompt always matches
the tools the worker actually exposes.
"""

from __future__ import annotations

from typing import Any, Iterable

from rpent.policy.robo import OPERATOR_TOOLS
from rpent.policy.runner import spec_to_dict
from rpent.policy.signatures import render_signature

#: Longest tool description quoted in the API list (characters).
MAX_DESCRIPTION_CHARS = 600

_TEMPLATE = """\
You control a robot by writing Python. Each call of the `python` tool runs one cell of code in a \
persistent interpreter: variables, functions and imports stay defined for later cells of this run. \
`robo`, `np` (numpy) and `math` are preloaded. What a cell prints, its exception with traceback, \
the value of its last expression, every robot call with its result, the env steps used and, after \
the robot moved, camera images come back to you as the tool result.
{task}
## The robo API
Call robot tools as `robo.<tool>(...)`, with the same argument names and defaults as the tools. \
An optional argument shown as `= None` is left to the tool's own default. Units: metres and \
radians, positions in the world frame unless a description says otherwise.

{api}

Results are read-only objects: read fields as attributes (`r.final_dist_m`, nested dicts too), or \
`r.to_dict()` for a plain dict; `print()` what you need to see. `robo.describe("name")` prints a \
signature, `robo.tools` lists the tools, `robo.call("name", {{...}})` calls any tool by name.

Errors and outcomes:
- A wrong argument name or a missing argument raises TypeError before anything moves.
- A tool that answers with an error raises `robo.ToolError` (its `.error` holds the tool's error dict).
- A measured shortfall is a return value, not an exception: check it (a move that stopped short \
of `tol`, a pick whose `success` is False, a segment with `found` False).
- `robo.finish(status, summary)` ends the task: statements after an accepted finish do not run, \
and no robot call is possible afterwards. Status convention: success, failure or stuck. \
Success is judged by the environment, never by the status you claim.
{operator}
## Limits of one cell
- {timeout_s:g} s of wall time. When it runs out, the running motion stops at its next env step \
and the rest of the cell does not run (`CellTimeout`).
- {max_calls} robot-tool calls (robo.finish not counted); call {max_calls_plus} raises \
`CallBudgetExhausted`; a robot call after that ends the cell and its interpreter. Start a new \
cell for more.
- The cell runs in a separate process that holds no API keys or other secrets (and, where the \
kernel allows, has no network), with limited memory. If it crashes or is killed, the next cell starts a fresh interpreter and earlier variables are gone \
(the result says `worker_restarted`).

## Working style
Observe first, then act in small cells; check every result before building on it; keep loops \
bounded. This mode reads no task memory and writes no recipe: rely only on what you observe in \
this run.
{notes}"""


def _describe(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 3] + "..."


def robo_api_text(specs: Iterable[Any]) -> str:
    """The API list: one ``robo.<tool>(signature)`` line per tool with its description
    below (operator tools excluded)."""
    lines = []
    for spec in (spec_to_dict(s) for s in specs):
        if spec["name"] in OPERATOR_TOOLS:
            continue
        kind = "read-only" if spec["readonly"] else "moves the robot"
        lines.append(f"- `{render_signature(spec['name'], spec['input_schema'])}` ({kind})")
        if spec["description"]:
            lines.append(f"  {_describe(spec['description'])}")
    return "\n".join(lines)


def code_mode_system_prompt(specs: Iterable[Any], *, timeout_s: float = 120.0, max_calls: int = 100,
                            task_language: str | None = None, robot_notes: str | None = None) -> str:
    """The system prompt of ``--policy-mode code``.

    Args:
        specs: the robot toolkit's specs (``tk.specs()``, objects or dicts).
        timeout_s: per-cell wall-time limit, s (``--code-timeout-s``).
        max_calls: per-cell robot-call budget (``--code-max-calls``).
        task_language: the task instruction, stated in the prompt when given.
        robot_notes: robot-specific rules appended as their own section (e.g. LIBERO's
            "never move |dxy| > 0.30 m in one call").
    """
    specs = [spec_to_dict(s) for s in specs]
    operator = [s["name"] for s in specs if s["name"] in OPERATOR_TOOLS]
    operator_text = ""
    if operator:
        names = ", ".join(f"`{n}`" for n in operator)
        operator_text = (f"\nOperator requests ({names}) are separate tools, not part of robo: "
                         "waiting for a person can outlast a cell, so end the cell and call them directly.\n")
    return _TEMPLATE.format(
        task=f"\nTask: {task_language}\n" if task_language else "",
        api=robo_api_text(specs),
        operator=operator_text,
        timeout_s=timeout_s,
        max_calls=max_calls,
        max_calls_plus=max_calls + 1,
        notes=f"\n## Robot notes\n{robot_notes.strip()}\n" if robot_notes else "",
    )
