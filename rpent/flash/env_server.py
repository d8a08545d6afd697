"""A LIBERO env server that can move to another seed of its task, for flash replays of many seeds.

Run::

    python -m rpent.flash.env_server --suite libero_object --task 0 --seed 1 --transport socket --port 0

It is :class:`rpent.robots.libero.env_server.EnvServer` (same methods, same one-thread simulator)
plus one mutating method:

``env.select_seed(seed)``
    switch to the init state of ``seed`` (``seed mod n_init_states``, :func:`rpent.robots.libero.suites.init_state_ids`)
    of the same (suite, task); returns the new ``env.get_env_meta``. From then on the server *is*
    the server of that seed: ``env.get_env_meta`` reports it, so a run that attaches
    (``--env-endpoint``) checks it like any other server. The episode starts with the next
    ``env.reset``, which every run's toolkit calls at its start (the switch itself does not reset:
    that was a second reset and ``settle_steps`` no-op steps per seed, ~0.5 s of CPU).

Why: building the LIBERO environment (importing robosuite, compiling the MuJoCo model, EGL
context) costs ~8-10 s of CPU, more than a whole flash episode; the compiled model does not
depend on the init state, and :meth:`rpent.robots.libero.sim.LiberoSim.reset` makes every
episode of a seed bit-identical whatever ran before (solver warm start and gripper command
cleared), so one server can serve the seeds of a task one after the other. ``get_env_meta``
also reports ``server_pid`` and ``seed_switches`` (how many times this process moved to another
seed before the current episode), which the flash replay writes into each run's ``flash_replay.json``.
"""

from __future__ import annotations

import os

from rpent.robots.libero.env_server import EnvServer, SimThread
from rpent.robots.libero.env_server import main as env_server_main

__all__ = ["SeedSwitchingEnvServer", "main"]


class SeedSwitchingEnvServer(EnvServer):
    """:class:`EnvServer` with ``env.select_seed`` (module doc)."""

    def __init__(self, sim_thread: SimThread) -> None:
        super().__init__(sim_thread)
        self.seed_switches = 0
        self.register("env.select_seed", self._on_sim_thread(self.select_seed), readonly=False)
        self._methods.pop("env.get_env_meta")  # replaced: the identity also says which server process this is
        self.register("env.get_env_meta", self._on_sim_thread(self.meta), readonly=True)

    def meta(self) -> dict:
        """``LiberoSim.meta()`` plus ``server_pid`` and ``seed_switches`` (how many times it moved to another seed)."""
        return {**self.sim.meta(), "server_pid": os.getpid(), "seed_switches": self.seed_switches}

    def select_seed(self, seed: int) -> dict:
        """Switch to ``seed``'s init state of the same task (the next ``env.reset`` starts its
        episode, module doc); returns :meth:`meta`.

        Args:
            seed: integer >= 0 (the run's ``--seed``).
        Raises:
            ValueError: not a non-negative integer.
        """
        from rpent.robots.libero import suites

        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        sim = self.sim
        local, _ = suites.init_state_ids(sim.task_info, seed)
        sim.select_init_state(local)
        sim.seed = int(seed)
        self.seed_switches += 1
        return self.meta()


def main(argv: list[str] | None = None) -> None:
    """Entry point: the arguments and checks of :func:`rpent.robots.libero.env_server.main`, serving
    :class:`SeedSwitchingEnvServer`."""
    env_server_main(argv, server_cls=SeedSwitchingEnvServer, prog="python -m rpent.flash.env_server")


if __name__ == "__main__":
    main()
