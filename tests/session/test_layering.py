"""Layering: data flows CLI/TUI/dashboard -> session -> run -> ...; nothing under ``rpent/`` may import
the TUI package ``rpent_tui`` except the CLI (``rpent/cli/``, which sits above the TUI and starts it
for ``rpent --dashboard``). Checked statically with ``ast`` (every ``import`` / ``from ... import``,
including ones inside functions), so it costs no imports and runs in well under a second."""

from __future__ import annotations

import ast
from pathlib import Path

import rpent

RPENT_DIR = Path(rpent.__file__).resolve().parent
ALLOWED = {RPENT_DIR / "cli"}


def _tui_imports(path: Path) -> list[str]:
    """``"<line>: <module>"`` for each import of ``rpent_tui`` (or a submodule) in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{node.lineno}: {name}" for name in names if name.split(".")[0] == "rpent_tui"]
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_rpent_imports_rpent_tui_only_from_cli():
    files = sorted(RPENT_DIR.rglob("*.py"))
    assert len(files) > 50, f"walked too few files under {RPENT_DIR}"
    offenders = [f"{p.relative_to(RPENT_DIR.parent)}:{hit}" for p in files
                 if not any(d in p.parents for d in ALLOWED) for hit in _tui_imports(p)]
    assert offenders == [], "rpent/ must not import rpent_tui (move the module into rpent/):\n" + "\n".join(offenders)


def test_checker_sees_tui_imports(tmp_path):
    """The checker must flag both import forms, also inside a function (so the test above can fail)."""
    src = tmp_path / "m.py"
    src.write_text("import os\ndef f():\n    from rpent_tui.services.batch import x\nimport rpent_tui.app as a\n",
                   encoding="utf-8")
    assert _tui_imports(src) == ["3: rpent_tui.services.batch", "4: rpent_tui.app"]
