"""The LIBERO adapter of the robot registry (:mod:`rpent.robots.registry`).

Everything the run layer needs to know about LIBERO in one place: the task lookup
(:mod:`.suites`), the env server command line, the checked client, the toolkit and the prompts.
Importing this module imports no simulator.
"""

from __future__ import annotations

import sys

__all__ = ["LiberoRobot"]


class LiberoRobot:
    """LIBERO / LIBERO-PRO (Franka Panda, robosuite + MuJoCo 2.3.7 in the main environment)."""

    name = "libero"
    robot_type = "panda"  # LeRobot robot type of its datasets (rpent_reference §5.1)
    default_suite = None  # --suite is required
    offline_planner = "scripted"
    default_max_episode_steps = 10000
    #: Shared services its toolkit uses (the run layer starts only these).
    services = ("vla", "sam3")
    planners = ("scripted", "api", "claude_code", "codex", "flash")
    #: The env server runs in the main environment unless --env-python says otherwise.
    default_env_python = None

    def resolve_task(self, suite: str | None, task) -> tuple[str, int]:
        """``--task`` must be a task index of ``suite``.

        Raises:
            ValueError: no suite, or a task that is not an integer >= 0.
        """
        if not suite:
            raise ValueError("--suite is required for --robot libero (e.g. --suite libero_object)")
        try:
            index = int(task)
        except (TypeError, ValueError):
            raise ValueError(f"--task must be a task index (0, 1, ...) for --robot libero, got {task!r}") from None
        if index < 0:
            raise ValueError("--task must be >= 0")
        return suite, index

    def task_info(self, suite: str, task: int, variant: str | None = None):
        """:func:`rpent.robots.libero.suites.task_info` (``variant`` = ``--libero-type``)."""
        from rpent.robots.libero import suites

        return suites.task_info(suite, task, suites.check_libero_type(variant))

    def env_service_spec(self, cfg):
        """The :class:`~rpent.services.ServiceSpec` of a run's LIBERO env server."""
        from rpent.services import ServiceSpec

        python = getattr(cfg, "env_python", None) or sys.executable
        argv = [python, "-m", "rpent.robots.libero.env_server", "--suite", cfg.suite, "--task", str(cfg.task),
                "--seed", str(cfg.seed), "--max-episode-steps", str(cfg.max_episode_steps)]
        if cfg.libero_type:
            argv += ["--libero-type", cfg.libero_type]
        if cfg.cuda_device is not None:
            argv += ["--cuda-device", str(cfg.cuda_device)]
        size = getattr(cfg, "policy_image_size", 256)
        if size != 256:
            argv += ["--policy-image-size", str(size)]
        return ServiceSpec(name="env_server", argv=argv, endpoint=cfg.env_endpoint, transport=cfg.transport,
                           env={"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}, ready_timeout_s=300.0)

    def env_client(self, endpoint, cfg):
        """An :class:`~rpent.robots.libero.env_client.EnvClient` that checked the server's episode."""
        from rpent.robots.libero.env_client import EnvClient

        return EnvClient(endpoint, expected={"suite": cfg.suite, "task": cfg.task, "seed": cfg.seed,
                                             "max_episode_steps": cfg.max_episode_steps,
                                             "policy_image_size": getattr(cfg, "policy_image_size", 256)})

    def toolkit_class(self):
        """:class:`rpent.robots.libero.toolkit.LiberoToolkit`."""
        from rpent.robots.libero.toolkit import LiberoToolkit

        return LiberoToolkit

    def system_prompt(self, *, require_operator_verdict: bool = False, vla_available: bool = False) -> str:
        """The tool-mode system prompt (:mod:`rpent.robots.libero.prompts`)."""
        from rpent.robots.libero import prompts

        return prompts.system_prompt(require_operator_verdict=require_operator_verdict, vla_available=vla_available)

    def task_message(self, suite: str, task: int, seed: int, language: str) -> str:
        """The first user message."""
        from rpent.robots.libero import prompts

        return prompts.task_message(suite, task, seed, language)
