"""The documentation site: built with the real MkDocs (strict), its reference pages generated from the
code (every option of every command's parser, every toolkit tool), and no development history in the
README or the pages."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "_hooks"))
MARKER = re.compile(r"^<!-- rpent:(cli|tools) ([\w.]+):(\w+)( own)? -->$", re.MULTILINE)
HISTORY = re.compile(r"shared/(reference|seeds)|/[a-z]+/shared/|[Ff]ound by a fresh user|previous version|fixed since|/tmp/[a-z]+[0-9]+[a-z0-9]*/|[Ii]ssue #?[0-9]+|[Ss]ession [0-9]+ "
                     r"|lent (device|H200|H100|GPU)")


def _markers(page: str) -> list[tuple[str, str, str, bool]]:
    text = (REPO / "docs" / page).read_text()
    return [(k, m, n, bool(o)) for k, m, n, o in MARKER.findall(text)]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    out = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _options(sub)
        elif action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            out.update(action.option_strings)
    return out


def test_cli_reference_lists_every_option_of_every_command():
    import reference

    markers = _markers("reference/cli.md")
    covered = {f"{m}:{n}" for _, m, n, _ in markers}
    for entry in ("rpent.cli.main:build_parser", "rpent.doctor:build_parser", "rpent_tui.cli:build_parser",
                  "rpent.cli.batch:build_parser", "rpent.cli.eval:build_parser", "rpent.cli.flywheel:build_parser",
                  "rpent.cli.flash:build_parser", "rpent.cli.memory:build_parser", "rpent.cli.check_llm:build_parser",
                  "rpent.cli.train:build_parser", "rpent.cli.train:build_compact_parser",
                  "rpent.cli.train:build_plot_parser", "rpent.cli.leaderboard:build_status_parser",
                  "rpent.cli.leaderboard:build_leaderboard_parser"):
        assert entry in covered, entry
    for kind, module, name, _ in markers:
        assert kind == "cli"
        parser = getattr(importlib.import_module(module), name)()
        text = reference.render_parser(parser)
        for option in _options(parser):
            assert f"`{option}" in text, (module, option)


def test_every_command_and_subcommand_gives_its_exit_codes():
    """The CLI reference says the exit codes are in each command's epilog: every parser of the
    reference and each of its subcommands' parsers names them."""
    missing = []
    for _, module, name, _ in _markers("reference/cli.md"):
        todo = [(name, getattr(importlib.import_module(module), name)())]
        while todo:
            where, parser = todo.pop()
            if "exit" not in (parser.epilog or "").lower():
                missing.append(f"{module}:{where} ({parser.prog})")
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    todo += [(f"{where} {cmd}", sub) for cmd, sub in action.choices.items()]
    assert not missing, missing


def test_tools_reference_lists_every_tool():
    import reference

    from rpent.toolkit.registry import build_spec

    for kind, module, name, own in _markers("reference/tools.md"):
        cls = getattr(importlib.import_module(module), name)
        text = reference.render_tools(cls, own=own)
        names = {build_spec(getattr(cls, a)).spec.name for a in (vars(cls) if own else dir(cls))
                 if callable(getattr(cls, a, None)) and hasattr(getattr(cls, a), "__rpent_tool__")}
        assert names, name
        for tool in names:
            assert f"### `{tool}`" in text, (name, tool)
    assert "`pi0_pick`" in reference.render_tools(importlib.import_module("rpent.robots.libero.toolkit").LiberoToolkit)


def test_strict_build_with_generated_reference(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "--progress" in cli and "rpent doctor" in cli and "rpent-flywheel validate" in cli
    tools = (site / "reference" / "tools" / "index.html").read_text()
    assert "move_to" in tools and "write_memory_draft" in tools and "expert_policy" in tools
    rpc = (site / "reference" / "rpc" / "index.html").read_text()
    assert "RpcClient" in rpc and "ExtType" in rpc  # mkdocstrings rendered the codec's docstring
    assert (site / "screenshots" / "run.svg").is_file()


def test_readme_is_short_and_links_resolve():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    own_pages = {"guides/operator.md", "guides/outcomes.md", "guides/sandbox.md", "guides/training.md",
                 "guides/leaderboard.md", "results/vla_serving.md"}  # written with their features
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if target.startswith("http"):
            continue
        assert (REPO / target).exists() or target.removeprefix("docs/") in own_pages, target
    for cmd in ("scripts/install.sh", "rpent doctor", "python -m pytest -q",
                "rpent --robot libero --suite libero_object --task 0 --seed 0 --planner scripted"):
        assert cmd in readme, cmd


@pytest.mark.parametrize("path", ["README.md", "docs"])
def test_no_development_history(path):
    files = [REPO / path] if path.endswith(".md") else sorted((REPO / path).rglob("*.md"))
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            assert not HISTORY.search(line), f"{f.relative_to(REPO)}:{n}: {line}"


#: In code, comments and docstrings: issue numbers, private paths and machine-lending notes (an
#: explore "session 1" is a product term there, so the docs' session pattern is left out).
CODE_HISTORY = re.compile(r"shared/(reference|seeds)|/[a-z]+/shared/|[Ff]ound by a fresh user|/tmp/[a-z]+[0-9]+[a-z0-9]*/|[Ii]ssue #?[0-9]+"
                          r"|lent (device|H200|H100|GPU)")


@pytest.mark.parametrize("path", ["rpent", "rpent_tui", "benchmarks", "experiments", "scripts", "tests"])
def test_no_development_history_in_code(path):
    this = Path(__file__).resolve()
    for f in sorted((REPO / path).rglob("*")):
        if f.suffix not in (".py", ".sh", ".yaml", ".md") or f.resolve() == this or ".venv" in f.parts:
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            assert not CODE_HISTORY.search(line), f"{f.relative_to(REPO)}:{n}: {line}"
