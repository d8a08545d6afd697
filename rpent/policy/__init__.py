"""Code-as-policy mode (``--policy-mode code``): policy code drives ``robo.<tool>()``.

Modules, one concept each:

* :mod:`~rpent.policy.runner` — :class:`CodePolicyRunner` (parent side: cells, budget,
  timeout, robot calls, results);
* :mod:`~rpent.policy.cell` — the :class:`CellResult` shape and env-step accounting;
* :mod:`~rpent.policy.worker` / :mod:`~rpent.policy.worker_process` — the worker process
  running the cells, and its parent-side handle;
* :mod:`~rpent.policy.robo` — the ``robo`` facade and :class:`ToolResult` (worker side);
* :mod:`~rpent.policy.errors` — exceptions policy code sees;
* :mod:`~rpent.policy.sandbox` — worker environment allow-list and resource limits;
* :mod:`~rpent.policy.isolation`, :mod:`~rpent.policy.landlock`, :mod:`~rpent.policy.cgroup`
  — the worker's sandbox layers (docs/guides/sandbox.md lists them);
* :mod:`~rpent.policy.scratch` — the scratch directory as the parent measures it;
* :mod:`~rpent.policy.frames` — length-prefixed msgpack frames between the two;
* :mod:`~rpent.policy.signatures` — Python signatures from tool JSON schemas;
* :mod:`~rpent.policy.record` — ``code_policy/cell_NNN.{py,json}``;
* :mod:`~rpent.policy.tool` — the planner-facing ``python(code)`` tool and
  :class:`CodeModeToolkit`;
* :mod:`~rpent.policy.prompts` — the code-mode system prompt;
* :mod:`~rpent.policy.code_file` — ``--code-file policy.py``;
* :mod:`~rpent.policy.compat` — which run options code mode works with.
"""

from rpent.policy.code_file import read_code_file, run_code_file
from rpent.policy.compat import check_code_mode_options
from rpent.policy.prompts import code_mode_system_prompt
from rpent.policy.runner import CellResult, CodePolicyRunner
from rpent.policy.sandbox import WorkerLimits
from rpent.policy.tool import (CodeModeToolkit, cell_result_for_planner, execute_python_tool,
                               python_tool_spec)

__all__ = [
    "CellResult",
    "CodeModeToolkit",
    "CodePolicyRunner",
    "WorkerLimits",
    "cell_result_for_planner",
    "check_code_mode_options",
    "code_mode_system_prompt",
    "execute_python_tool",
    "python_tool_spec",
    "read_code_file",
    "run_code_file",
]
