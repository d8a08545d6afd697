"""``--code-file policy.py``: run a Python file as the policy, without an LLM.

This is how the TUI's code editor and the offline examples run: the whole file is one
cell of a :class:`~rpent.policy.runner.CodePolicyRunner` (same worker, limits, budget and
``code_policy/`` record as cells a planner writes).
"""

from __future__ import annotations

import os
from pathlib import Path

from rpent.policy.runner import CellResult, CodePolicyRunner


def read_code_file(path: str | os.PathLike) -> str:
    """Read a policy file as UTF-8 text.

    Raises:
        FileNotFoundError: no such file (the message names the path and the flag).
        ValueError: the path is a directory, not UTF-8, or not valid Python syntax (the
            message gives the line).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"--code-file {p}: no such file")
    if p.is_dir():
        raise ValueError(f"--code-file {p}: is a directory; pass a .py file")
    try:
        source = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--code-file {p}: not UTF-8 text ({exc})") from None
    try:
        compile(source, str(p), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ValueError(f"--code-file {p}: syntax error at line {exc.lineno}: {exc.msg}") from None
    return source


def run_code_file(runner: CodePolicyRunner, path: str | os.PathLike) -> CellResult:
    """Run the file at ``path`` as one cell of ``runner``.

    The cell's timeout and call budget are the runner's (``--code-timeout-s``,
    ``--code-max-calls``); a policy that needs more calls than one cell allows should be
    run with a larger ``--code-max-calls``. The source is saved as
    ``code_policy/cell_NNN.py`` like any cell.

    Raises:
        FileNotFoundError, ValueError: see :func:`read_code_file` (nothing runs then).
    """
    return runner.run_cell(read_code_file(path))
