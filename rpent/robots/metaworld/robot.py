"""The Meta-World adapter of the robot registry (:mod:`rpent.robots.registry`). Agent side: imports
no simulator.

The env server runs under the Meta-World environment's interpreter: ``--env-python PATH``
(``RunConfig.env_python``), else ``$RPENT_METAWORLD_PYTHON``, else
``<repository>/.venv-metaworld/bin/python`` (made by ``scripts/install_metaworld.sh``). The
repository root goes first on the server's ``PYTHONPATH`` so it imports this checkout's
``rpent.rpc`` and ``rpent.robots.metaworld`` (rpent itself is not installed there).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

__all__ = ["MetaWorldRobot", "REPO_ROOT", "default_env_python", "ENV_PYTHON_VAR"]

#: The checkout this package lives in (``<root>/rpent/robots/metaworld/robot.py``).
REPO_ROOT = Path(__file__).resolve().parents[3]
#: Environment variable naming the Meta-World interpreter.
ENV_PYTHON_VAR = "RPENT_METAWORLD_PYTHON"


def default_env_python() -> str:
    """``$RPENT_METAWORLD_PYTHON`` or ``<repo>/.venv-metaworld/bin/python`` (may not exist)."""
    return os.environ.get(ENV_PYTHON_VAR) or str(REPO_ROOT / ".venv-metaworld" / "bin" / "python")



@functools.lru_cache(maxsize=8)
def _missing_modules(python: str) -> tuple[str, ...]:
    """Modules the env server needs that ``python`` cannot find (``importlib.util.find_spec``, no
    import, ~50 ms); ``("a working interpreter",)`` when ``python`` does not run at all."""
    code = ("import importlib.util as u\n"
            "print(','.join(m for m in ('metaworld', 'msgpack', 'numpy') if u.find_spec(m) is None))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ("a working interpreter",)
    if out.returncode != 0:
        return ("a working interpreter",)
    return tuple(m for m in out.stdout.strip().split(",") if m)

class MetaWorldRobot:
    """Meta-World (Rethink Sawyer; metaworld 3.1.1 + mujoco 3.3.0 in ``.venv-metaworld``)."""

    name = "metaworld"
    robot_type = "sawyer"  # LeRobot robot type of its datasets
    default_suite = "mt50"
    offline_planner = "expert"
    default_max_episode_steps = 500  # Meta-World's max_path_length
    #: Shared services its toolkit uses: none (no VLA / SAM3 tools; segment is MuJoCo's own).
    services = ()
    planners = ("expert", "api", "claude_code", "codex")

    def resolve_task(self, suite: str | None, task) -> tuple[str, int]:
        """``--task`` index or name (``reach-v3`` / ``reach``) in ``suite`` (default mt50).

        Raises:
            ValueError: unknown suite or task (the message lists the names).
        """
        from rpent.robots.metaworld import tasks

        return tasks.resolve(suite or self.default_suite, task)

    def suite_names(self) -> tuple[str, ...]:
        """The suites (``mt10``, ``mt50``), for the TUI's ``/rpent-task`` check and completion."""
        from rpent.robots.metaworld import tasks

        return tasks.suite_names()

    def task_names(self, suite: str) -> tuple[str, ...]:
        """Task names of ``suite`` in index order (``reach-v3`` ...).

        Raises:
            ValueError: unknown suite (the message lists the suites).
        """
        from rpent.robots.metaworld import tasks

        return tasks._suite(suite)

    def task_info(self, suite: str, task: int, variant: str | None = None):
        """:func:`rpent.robots.metaworld.tasks.task_info` (``variant`` unused)."""
        from rpent.robots.metaworld import tasks

        return tasks.task_info(suite, task)

    def env_python(self, cfg=None) -> str:
        """The interpreter of the env server: ``cfg.env_python`` or :func:`default_env_python`.

        Raises:
            ValueError: that interpreter does not exist (names the install command).
        """
        path = getattr(cfg, "env_python", None) or default_env_python()
        fix = ("run scripts/install_metaworld.sh (or pass --env-python PATH of an environment with "
               "metaworld==3.1.1)")
        if not os.path.exists(path):
            raise ValueError(f"the Meta-World env server's Python {path} does not exist: {fix}")
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise ValueError(f"the Meta-World env server's Python {path} is not an executable file: {fix}")
        missing = _missing_modules(path)
        if missing:
            raise ValueError(f"the Meta-World env server's Python {path} has no {', '.join(missing)}: {fix}")
        return path

    def env_service_spec(self, cfg):
        """The env server's :class:`~rpent.services.ServiceSpec` (another interpreter, repo on PYTHONPATH).

        Raises:
            ValueError: the Meta-World interpreter is missing (only when a server is to be spawned).
        """
        from rpent.services import ServiceSpec

        if cfg.env_endpoint:
            return ServiceSpec(name="env_server", endpoint=cfg.env_endpoint, transport=cfg.transport)
        argv = [self.env_python(cfg), "-m", "rpent.robots.metaworld.env_server", "--suite", cfg.suite,
                "--task", str(cfg.task), "--seed", str(cfg.seed), "--max-episode-steps", str(cfg.max_episode_steps)]
        pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "PYTHONPATH": pythonpath}
        if cfg.cuda_device is not None:
            env["MUJOCO_EGL_DEVICE_ID"] = str(cfg.cuda_device)
        return ServiceSpec(name="env_server", argv=argv, transport=cfg.transport, env=env, ready_timeout_s=300.0)

    def env_client(self, endpoint, cfg):
        """A :class:`~rpent.robots.metaworld.env_client.MetaWorldEnvClient` that checked the episode."""
        from rpent.robots.metaworld.env_client import MetaWorldEnvClient

        return MetaWorldEnvClient(endpoint, expected={"robot": "metaworld", "suite": cfg.suite, "task": cfg.task,
                                                      "seed": cfg.seed, "max_episode_steps": cfg.max_episode_steps})

    def toolkit_class(self):
        """:class:`rpent.robots.metaworld.toolkit.MetaWorldToolkit`."""
        from rpent.robots.metaworld.toolkit import MetaWorldToolkit

        return MetaWorldToolkit

    def system_prompt(self, *, require_operator_verdict: bool = False, vla_available: bool = False) -> str:
        """The tool-mode system prompt (:mod:`rpent.robots.metaworld.prompts`)."""
        from rpent.robots.metaworld import prompts

        return prompts.system_prompt(require_operator_verdict=require_operator_verdict)

    def task_message(self, suite: str, task: int, seed: int, language: str) -> str:
        """The first user message."""
        from rpent.robots.metaworld import prompts

        return prompts.task_message(suite, task, seed, language)
