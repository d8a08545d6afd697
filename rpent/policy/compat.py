"""Which run options code mode works with : checks the CLI and the TUI share.

Code mode needs a planner that writes code (``api``, ``claude_code``, ``codex``) or a
file to run (``--code-file``). ``--planner flash`` replays recorded anchors without an
LLM, and ``--explore`` keeps task memory and writes recipes, which code mode never does:
both are refused with a message that names the fix.
"""

from __future__ import annotations

#: Planners that can drive the ``python`` tool.
CODE_MODE_PLANNERS = ("api", "claude_code", "codex")


def check_code_mode_options(planner: str | None, *, explore: bool = False, code_file: str | None = None) -> None:
    """Validate options for ``--policy-mode code`` (or ``--code-file``).

    Args:
        planner: the ``--planner`` value (ignored when ``code_file`` is given, except
            ``flash``, which is refused either way).
        explore: ``--explore`` was given.
        code_file: the ``--code-file`` path, if any.

    Raises:
        ValueError: an incompatible option; the message says what to use instead.
    """
    if planner == "flash":
        fix = ("drop --planner flash: --code-file runs the file without a planner" if code_file is not None else
               "use --planner api, claude_code or codex, or run a policy file with --code-file")
        raise ValueError("--policy-mode code does not work with --planner flash (flash replays recorded "
                         f"anchors without an LLM); {fix}")
    if explore:
        raise ValueError("--policy-mode code does not work with --explore (code mode reads no task memory "
                         "and writes no recipe); drop --explore or use --policy-mode tools")
    if code_file is None and planner not in CODE_MODE_PLANNERS:
        raise ValueError(f"--policy-mode code needs a planner that writes code ({', '.join(CODE_MODE_PLANNERS)}) "
                         f"or --code-file policy.py; got --planner {planner}")
