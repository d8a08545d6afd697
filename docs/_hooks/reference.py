"""MkDocs hook: reference sections generated from the code at build time.

In a page, a line

* ``<!-- rpent:cli MODULE:FUNCTION -->`` becomes the options of the argparse parser that
  ``MODULE.FUNCTION()`` returns (usage, description, one table per argument group, every subcommand);
* ``<!-- rpent:tools MODULE:CLASS -->`` becomes the planner tools of toolkit class ``CLASS`` (the
  ``@tool`` methods: name, description from the docstring, parameters from the annotated signature,
  as :func:`rpent.toolkit.registry.build_spec` builds them for planners); ``<!-- rpent:tools
  MODULE:CLASS own -->`` only those the class itself defines.

It also puts ``screenshots/`` of the repository into the site as ``screenshots/`` so pages can show
them. A marker that cannot be resolved fails the build.
"""

from __future__ import annotations

import argparse
import html
import importlib
import os
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # document this checkout's code, whatever rpent is installed
MARKER = re.compile(r"^<!-- rpent:(cli|tools) ([\w.]+):(\w+)( own)? -->$", re.MULTILINE)


def _load(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"reference hook: cannot load {module}:{name}: {exc}") from exc


def _cell(text: str) -> str:
    """Table cell text: HTML-escaped (help texts say <dir>), pipes and newlines neutralised."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


# ---------------------------------------------------------------------------------------------- CLI


def _option_names(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = ""
        if action.nargs != 0:
            fmt = argparse.HelpFormatter("x")
            metavar = " " + fmt._format_args(action, fmt._get_default_metavar_for_optional(action))
        return ", ".join(f"`{o}{metavar}`" for o in action.option_strings)
    return f"`{action.metavar or action.dest}`"


def _default(action: argparse.Action) -> str:
    if (action.default is None or action.default is False or action.default == argparse.SUPPRESS
            or action.nargs == 0 or not action.option_strings):
        return ""
    return f"`{action.default}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    text = parser._get_formatter()._expand_help(action)
    if action.choices and not isinstance(action, argparse._SubParsersAction) and "{" not in _option_names(action):
        text += f" (choices: {', '.join(map(str, action.choices))})"
    return _cell(text)


def render_parser(parser: argparse.ArgumentParser, level: int = 3) -> str:
    """Markdown for ``parser``: usage block, description, a table per group, then each subcommand."""
    os.environ["COLUMNS"] = "80"  # the usage block fits the content column
    out = [f"```text\n{parser.format_usage().strip()}\n```", ""]
    if parser.description:
        out += [_cell(parser.description).replace("\\|", "|"), ""]
    subparsers = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                subparsers.append(action)
                continue
            rows.append(f"| {_option_names(action)} | {_default(action)} | {_help(parser, action)} |")
        if rows:
            title = group.title or "options"
            out += [f"**{title[0].upper() + title[1:]}**", "", "| option | default | description |",
                    "|---|---|---|", *rows, ""]
    if parser.epilog:
        out += [_cell(parser.epilog).replace("\\|", "|"), ""]
    for action in subparsers:
        helps = {a.dest: a.help for a in action._choices_actions}
        for name, sub in action.choices.items():
            out += [f"{'#' * level} `{sub.prog}`", ""]
            if helps.get(name):
                out += [_cell(helps[name]).replace("\\|", "|"), ""]
            out.append(render_parser(sub, level + 1))
    return "\n".join(out)


# -------------------------------------------------------------------------------------------- tools


def _type(prop: dict, defs: dict) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type(p, defs) for p in prop["anyOf"])
    if "enum" in prop:
        return " / ".join(repr(v) for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        items = prop.get("items", {})
        n = prop.get("minItems")
        size = f"[{n}]" if n is not None and n == prop.get("maxItems") else "[]"
        return f"{_type(items, defs)}{size}"
    return {"number": "float", "integer": "int", "string": "str", "boolean": "bool", "null": "null"}.get(kind, kind)


def _limits(prop: dict) -> str:
    marks = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    return ", ".join(f"{sign} {prop[k]}" for k, sign in marks.items() if k in prop)


def render_tools(cls: type, own: bool = False) -> str:
    """Markdown for every ``@tool`` method of ``cls`` (sorted by tool name); ``own``: only those
    that ``cls`` itself defines or overrides, not the inherited ones."""
    from rpent.toolkit.registry import build_spec

    specs = []
    for name in (vars(cls) if own else dir(cls)):
        attr = getattr(cls, name, None)
        if callable(attr) and hasattr(attr, "__rpent_tool__"):
            specs.append(build_spec(attr).spec)
    if not specs:
        raise PluginError(f"reference hook: {cls.__module__}.{cls.__name__} has no @tool methods")
    out = []
    for spec in sorted(specs, key=lambda s: s.name):
        kind = "read-only" if spec.readonly else "advances the environment"
        out += [f"### `{spec.name}`", "", f"*{kind}*", "", spec.description.strip(), ""]
        props = spec.input_schema.get("properties", {})
        required = set(spec.input_schema.get("required", []))
        defs = spec.input_schema.get("$defs", {})
        if props:
            out += ["| parameter | type | default | description |", "|---|---|---|---|"]
            for pname, prop in props.items():
                default = "required" if pname in required else f"`{prop.get('default')!r}`"
                desc = "; ".join(x for x in (prop.get("description", ""), _limits(prop)) if x)
                out.append(f"| `{pname}` | {_cell(_type(prop, defs))} | {default} | {_cell(desc)} |")
            out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- hooks


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each marker line of the page with its generated Markdown."""

    def expand(match: re.Match) -> str:
        kind, module, name, own = match.groups()
        target = _load(module, name)
        if kind == "cli":
            return render_parser(target())
        return render_tools(target, own=bool(own))

    return MARKER.sub(expand, markdown)


def on_files(files, config):
    """Add the repository's ``screenshots/`` to the site (pages link them as ``screenshots/NAME``)."""
    shots = REPO / "screenshots"
    for path in sorted(shots.glob("*")):
        if path.suffix in (".svg", ".png"):
            files.append(File.generated(config, f"screenshots/{path.name}", abs_src_path=str(path)))
    return files
