"""Loading ``rpent-eval`` configs: shipped names or YAML paths, ``defaults`` lists, dotted overrides.

A config is a YAML file read with OmegaConf (https://omegaconf.readthedocs.io). Conventions, following
Hydra (https://hydra.cc/docs/advanced/override_grammar/basic/), which the product document's RLinf
configs use:

* ``defaults: [base_name, ...]`` at the top of a file merges those configs first (shipped names or
  paths relative to the file), then the file's own keys on top.
* Overrides ``a.b.c=value`` replace an existing key (the value is parsed as YAML: ``10`` is an int,
  ``null`` is None, ``[1,2]`` a list, ``${oc.env:VAR}`` stays an interpolation). A key that does not
  exist is an error suggesting the closest key; ``+a.b=value`` adds a new key, ``++a.b=value`` adds
  or replaces.
* ``${oc.env:VAR}`` reads an environment variable; ``${env_first:A,B}`` (ours) reads the first of
  several that is set (the model path: ``APXINF_PI05_MODEL_DIR``, else ``PI05_CHECKPOINT_PATH``).
  Resolving either while the variables are unset raises :class:`~rpent.eval.errors.EvalConfigError`
  naming them and the config key. Values are resolved lazily, so ``rollout.model.model_path`` is
  only needed by backends that load weights.

The log directory is never part of a config: ``runner.logger.log_path`` is rejected (the seed:
"the log directory is generated ... you need not and cannot set it in the config"); use
``rpent-eval --logs-dir``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from rpent.eval.errors import EvalConfigError

SHIPPED_CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""Folder of the configs shipped with rpent (``rpent/eval/configs/*.yaml``)."""

DEFAULT_CONFIG_NAME = "libero_10_pi05_eval"
"""The shipped default: LIBERO-10 with Pi0.5, the seed's single-GPU protocol (10 envs x 10 epochs)."""

_ENV_VAR_RE = re.compile(r"Environment variable '([^']+)' not found")
_ENV_FIRST_RE = re.compile(r"none of the environment variables \[([^\]]*)\] is set")


class _UnsetEnvironment(KeyError):
    """Raised inside the ``env_first`` resolver; turned into an EvalConfigError by :func:`resolved`."""


def _env_first(*names: str) -> str:
    """``${env_first:A,B,...}``: the value of the first of the environment variables that is set (non-empty)."""
    for name in names:
        value = os.environ.get(str(name))
        if value:
            return value
    raise _UnsetEnvironment(f"none of the environment variables [{', '.join(map(str, names))}] is set")


OmegaConf.register_resolver("env_first", _env_first, replace=True, annotation_validation="off")


@dataclass(frozen=True)
class LoadedConfig:
    """A loaded, overridden (not yet validated) evaluation config.

    Attributes:
        name: the config's name: the shipped name or the YAML file's stem (used in the log dir name).
        path: the YAML file it was read from.
        cfg: the merged OmegaConf tree (interpolations still unresolved).
        overrides: the override strings applied, in order.
    """

    name: str
    path: Path
    cfg: DictConfig
    overrides: tuple[str, ...]


def shipped_config_names() -> list[str]:
    """Names of the configs shipped in ``rpent/eval/configs/`` (file stems, sorted)."""
    return sorted(p.stem for p in SHIPPED_CONFIG_DIR.glob("*.yaml"))


def resolve_config_path(name_or_path: str | Path, *, relative_to: Path | None = None) -> Path:
    """Find the YAML file for a shipped config name or a path.

    Args:
        name_or_path: ``libero_10_pi05_eval`` (shipped; ``.yaml`` optional) or a path to a YAML file.
        relative_to: folder that relative paths are tried against first (a ``defaults`` entry's file).

    Raises:
        EvalConfigError: neither a readable file nor a shipped name; the message lists shipped names.
    """
    text = str(name_or_path)
    candidates: list[Path] = []
    path = Path(text).expanduser()
    if relative_to is not None and not path.is_absolute():
        candidates.append(relative_to / path)
        if path.suffix != ".yaml":
            candidates.append(relative_to / f"{text}.yaml")
    candidates.append(path)
    stem = text[:-5] if text.endswith(".yaml") else text
    if "/" not in stem and "\\" not in stem:
        candidates.append(SHIPPED_CONFIG_DIR / f"{stem}.yaml")
    for cand in candidates:
        if cand.is_file():
            return cand.resolve()
    raise EvalConfigError(
        f"config {text!r} is neither a YAML file nor a shipped config name; "
        f"shipped configs: {', '.join(shipped_config_names())} (or pass a path to a .yaml file)"
    )


def _read_yaml(path: Path, chain: tuple[Path, ...]) -> DictConfig:
    """Read one YAML file and merge its ``defaults`` list underneath it (recursively)."""
    if path in chain:
        cycle = " -> ".join(p.name for p in (*chain, path))
        raise EvalConfigError(f"config defaults form a cycle: {cycle}; remove one of the entries")
    try:
        node = OmegaConf.load(path)
    except yaml.YAMLError as exc:  # a syntax error: name the place, in one line
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EvalConfigError(f"config {path} is not valid YAML{where}: {problem}; fix the file") from exc
    except UnicodeDecodeError as exc:
        raise EvalConfigError(f"config {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as "
                              "UTF-8 YAML") from None
    except (OSError, OmegaConfBaseException, ValueError) as exc:
        raise EvalConfigError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(node, DictConfig):
        raise EvalConfigError(f"config {path} must be a YAML mapping at the top level, got a list")
    defaults = node.pop("defaults", None)
    if defaults is None:
        return node
    if isinstance(defaults, str):
        defaults = [defaults]
    if not isinstance(defaults, (list, ListConfig)):
        raise EvalConfigError(f"config {path}: 'defaults' must be a list of config names or paths")
    merged = OmegaConf.create({})
    for entry in defaults:
        base = resolve_config_path(str(entry), relative_to=path.parent)
        merged = OmegaConf.merge(merged, _read_yaml(base, (*chain, path)))
    out = OmegaConf.merge(merged, node)
    assert isinstance(out, DictConfig)
    return out


def _all_keys(node: Any, prefix: str = "") -> list[str]:
    """Every dotted key path in a config tree (without resolving interpolations)."""
    keys: list[str] = []
    if isinstance(node, DictConfig):
        for k in node.keys():
            full = f"{prefix}.{k}" if prefix else str(k)
            keys.append(full)
            child = node._get_node(k)
            if isinstance(child, DictConfig):
                keys.extend(_all_keys(child, full))
    return keys


def has_key(cfg: DictConfig, dotted: str) -> bool:
    """True if ``dotted`` (``a.b.c``) names an existing key; interpolations are not resolved."""
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False
        node = node._get_node(part)
    return True


def apply_overrides(cfg: DictConfig, overrides: Iterable[str]) -> DictConfig:
    """Apply Hydra-style overrides (``key=value``, ``+key=value``, ``++key=value``) to ``cfg`` in place.

    Raises:
        EvalConfigError: malformed override (no ``=``), replacing a key that does not exist (with a
            did-you-mean suggestion), or adding (``+``) a key that already exists.
    """
    for raw in overrides:
        text = raw.strip()
        mode = "replace"
        if text.startswith("++"):
            mode, text = "upsert", text[2:]
        elif text.startswith("+"):
            mode, text = "add", text[1:]
        key, sep, value_text = text.partition("=")
        key = key.strip()
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w\-]*(\.[\w\-]+)*", key):
            raise EvalConfigError(
                f"malformed override {raw!r}: expected key=value with a dotted key, "
                "e.g. env.eval.total_num_envs=20"
            )
        exists = has_key(cfg, key)
        if mode == "replace" and not exists:
            close = difflib.get_close_matches(key, _all_keys(cfg), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise EvalConfigError(
                f"override {raw!r}: config has no key {key!r}{hint}; use +{key}=... to add a new key"
            )
        if mode == "add" and exists:
            raise EvalConfigError(f"override {raw!r}: key {key!r} already exists; drop the leading '+'")
        try:
            node: Any = OmegaConf.from_dotlist([f"{key}={value_text}"])
            for part in key.split("."):
                node = node._get_node(part)
            if isinstance(node, (DictConfig, ListConfig)):
                value = OmegaConf.to_container(node, resolve=False)  # interpolations stay as written
            else:
                value = node._value()
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        except OmegaConfBaseException as exc:
            raise EvalConfigError(f"override {raw!r} could not be applied: {exc}") from exc
    return cfg


def load_eval_config(name_or_path: str | Path = DEFAULT_CONFIG_NAME, overrides: Sequence[str] = ()) -> LoadedConfig:
    """Load a config (shipped name or YAML path), merge its ``defaults``, apply overrides.

    Args:
        name_or_path: shipped config name (see :func:`shipped_config_names`) or YAML path.
        overrides: Hydra-style overrides, applied in order (see :func:`apply_overrides`).

    Returns:
        :class:`LoadedConfig`; interpolations stay unresolved until read (see :func:`resolved`).

    Raises:
        EvalConfigError: unknown config, unreadable YAML, a defaults cycle, a bad override, or a
            ``runner.logger.log_path`` key (the log directory is generated; use ``--logs-dir``).
    """
    path = resolve_config_path(name_or_path)
    cfg = _read_yaml(path, ())
    apply_overrides(cfg, overrides)
    if has_key(cfg, "runner.logger.log_path"):
        raise EvalConfigError(
            "runner.logger.log_path cannot be set: the log directory is generated as "
            "<logs>/<YYYYmmdd-HH:MM:SS>-<config name>/; pass rpent-eval --logs-dir <logs> instead"
        )
    name = path.stem
    return LoadedConfig(name=name, path=path, cfg=cfg, overrides=tuple(overrides))


def resolved(cfg: DictConfig, key: str) -> Any:
    """Read ``key`` (dotted) from ``cfg`` with interpolations resolved; containers become plain types.

    Raises:
        EvalConfigError: the key is missing, or resolving it needs an unset environment variable
            (the message names the variable and the key, and says to export it).
    """
    if not has_key(cfg, key):
        raise EvalConfigError(f"config is missing required key {key!r}; add it to the YAML or pass +{key}=...")
    try:
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
    except InterpolationResolutionError as exc:
        several = _ENV_FIRST_RE.search(str(exc))
        if several:
            names = [n.strip() for n in several.group(1).split(",")]
            raise EvalConfigError(
                f"config key {key}: environment variable {' or '.join(names)} is not set; export "
                f"{names[0]}=<path> (or {', '.join(names[1:]) or names[0]}) before running rpent-eval"
            ) from None
        match = _ENV_VAR_RE.search(str(exc))
        if match:
            var = match.group(1)
            raise EvalConfigError(
                f"config key {key}: environment variable {var} is not set; "
                f"export {var}=<path> before running rpent-eval (the config reads it with ${{oc.env:{var}}})"
            ) from None
        raise EvalConfigError(f"config key {key}: cannot resolve interpolation: {exc}") from None
    except OmegaConfBaseException as exc:
        raise EvalConfigError(f"config key {key}: {exc}") from None
    return value


def to_yaml(cfg: DictConfig) -> str:
    """The config as YAML with interpolations left as written (safe when env variables are unset)."""
    return OmegaConf.to_yaml(cfg, resolve=False)
