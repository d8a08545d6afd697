"""The robot registry: one adapter per robot package, looked up by the ``--robot`` name.

The run layer, the CLIs and the batch runner ask the registry, never a robot package directly,
so adding a robot is adding a folder ``rpent/robots/<name>/`` with a ``robot.py`` adapter and one
line in :data:`ROBOTS`. Adapters are imported on first use; importing this module imports no
simulator (and no adapter).

An adapter (duck-typed, see :class:`rpent.robots.libero.robot.LiberoRobot` and
:class:`rpent.robots.metaworld.robot.MetaWorldRobot`) provides:

* ``name`` (``--robot``), ``robot_type`` (LeRobot robot type: ``panda``, ``sawyer``),
  ``default_suite``, ``offline_planner`` (the planner ``rpent`` uses when ``--planner`` is not given),
  ``planners`` (the planner names that can drive its toolkit), ``default_max_episode_steps``,
  ``services`` (the shared services its toolkit uses: ``("vla", "sam3")`` or ``()``);
* ``resolve_task(suite, task) -> (suite, int)``: a CLI ``--task`` (index or name) to the suite's
  task index; ``task_info(suite, task, variant) -> object with .language``; both raise ValueError
  with the fix;
* ``env_service_spec(cfg) -> ServiceSpec`` (the env server, possibly under another interpreter);
* ``env_client(endpoint, cfg)`` (checks the server's meta), ``toolkit_class()``;
* ``system_prompt(require_operator_verdict, vla_available)``, ``task_message(suite, task, seed, language)``.
"""

from __future__ import annotations

import importlib

__all__ = ["ROBOTS", "robot_names", "get_robot"]

#: ``--robot`` name -> ``"module:Class"`` of its adapter (imported on first use).
ROBOTS: dict[str, str] = {
    "libero": "rpent.robots.libero.robot:LiberoRobot",
    "metaworld": "rpent.robots.metaworld.robot:MetaWorldRobot",
}

_cache: dict[str, object] = {}


def robot_names() -> tuple[str, ...]:
    """Registered robot names, sorted."""
    return tuple(sorted(ROBOTS))


def get_robot(name: str):
    """The adapter instance of robot ``name`` (one per process).

    Raises:
        ValueError: unknown robot (the message lists the known ones).
    """
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; choose one of: {', '.join(robot_names())}")
    if name not in _cache:
        module_name, _, attr = ROBOTS[name].partition(":")
        _cache[name] = getattr(importlib.import_module(module_name), attr)()
    return _cache[name]
