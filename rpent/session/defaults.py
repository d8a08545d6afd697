"""Seams of the session onto the rest of rpent: the run layer, the supervisor, TaskRun configs,
shared-service specs and steering. ``rpent.session.core.Session`` takes each as an argument (tests pass
their own); these are the defaults, imported lazily so the session model imports without them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from rpent.session.commands import TaskCommand

from .model import SessionConfig

__all__ = ["RunTaskFn", "default_run_task", "default_supervisor_factory", "default_make_run_config",
           "default_shared_specs", "default_make_steering"]


class RunTaskFn(Protocol):
    """``rpent.run.run_task`` signature (docs/interfaces.md "Run layer")."""

    def __call__(self, config: Any, supervisor: Any, *, operator: Any, steering: Any = None,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> Awaitable[Any]: ...


def default_run_task() -> RunTaskFn:
    """``rpent.run.run_task`` (imported lazily so this module imports without the run layer)."""
    from rpent.run import run_task  # type: ignore[import-not-found]

    return run_task


def default_supervisor_factory(log_dir: Path) -> Any:
    """``rpent.services.Supervisor(log_dir=...)`` as an async context manager."""
    from rpent.services import Supervisor  # type: ignore[import-not-found]

    return Supervisor(log_dir=log_dir)


def default_make_run_config(config: SessionConfig, command: TaskCommand, output_dir: Path, endpoints: dict[str, str]) -> Any:
    """``rpent.run.RunConfig`` for one TaskRun: no env endpoint (the env server is always fresh),
    the session's shared VLA/SAM3 endpoints, planner options in ``PlannerConfig``; without
    ``max_episode_steps`` in the run options, a robot other than LIBERO gets its adapter's
    ``default_max_episode_steps`` (Meta-World: 500, its ``max_path_length``), as ``rpent`` does.
    Step images: every step (``step_images="every-step"``) unless the run options say otherwise: a
    person watches an interactive session and browses its steps' frames (the ``rpent`` CLI's
    ``auto`` renders the scripted and flash planners' steps only where a tool looks)."""
    from rpent.planners.base import PlannerConfig
    from rpent.run import RunConfig

    opts = dict(config.run_options)
    opts.setdefault("step_images", "every-step")
    if config.robot != "libero" and "max_episode_steps" not in opts:
        from rpent.robots.registry import get_robot

        default = getattr(get_robot(config.robot), "default_max_episode_steps", None)
        if default is not None:
            opts["max_episode_steps"] = int(default)
    planner_fields = {k: opts.pop(k) for k in ("base_url", "max_turns", "max_tokens", "reasoning_effort", "timeout_s")
                      if k in opts}
    return RunConfig(robot=config.robot, suite=command.suite, task=command.task, seed=command.seed,
                     planner=config.planner, planner_config=PlannerConfig(model=config.model, **planner_fields),
                     output_dir=output_dir, env_endpoint=None, vla_endpoint=endpoints.get("vla") or None,
                     sam3_endpoint=endpoints.get("sam3") or None, **opts)


def default_shared_specs(config: SessionConfig) -> list[Any]:
    """``ServiceSpec``s of the shared services: connect to ``--vla-endpoint``/``--sam3-endpoint`` when
    given, else spawn the servers with the checkpoints of ``$PI05_CHECKPOINT_PATH`` /
    ``$SAM3_CHECKPOINT_PATH`` (the same servers and arguments ``rpent.run`` would spawn per run)."""
    import os
    import sys

    from rpent.services import ServiceSpec

    specs = []
    for name in config.shared_services:
        endpoint = config.vla_endpoint if name == "vla" else config.sam3_endpoint
        if endpoint:
            specs.append(ServiceSpec(name=name, endpoint=endpoint))
        elif name == "vla":
            argv = [sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--embodiment", config.robot]
            if os.environ.get("PI05_CHECKPOINT_PATH"):
                argv += ["--model-path", os.environ["PI05_CHECKPOINT_PATH"]]
            specs.append(ServiceSpec(name=name, argv=argv, ready_timeout_s=900.0))
        else:
            argv = [sys.executable, "-m", "rpent.robots.components.sam3_server"]
            if os.environ.get("SAM3_CHECKPOINT_PATH"):
                argv += ["--checkpoint", os.environ["SAM3_CHECKPOINT_PATH"]]
            specs.append(ServiceSpec(name=name, argv=argv, ready_timeout_s=900.0))
    return specs


def default_make_steering() -> Any:
    """A fresh interactive ``rpent.planners.steering.Steering``: a planner that ends its turn without
    finishing waits for the operator's next line (the TUI chat), as documented there."""
    from rpent.planners.steering import Steering

    return Steering(interactive=True)
