"""The evaluation's view of one LIBERO env: :class:`rpent.robots.libero.sim.LiberoSim` underneath.

Batch evaluation needs two things beyond an interactive episode:

* **reset to any init state** without rebuilding the env (a rebuild costs ~4-7 s; an epoch reset
  must cost one ``env.reset`` + ``set_init_state`` + settle steps), and
* **stepping past the first success** when ``ignore_terminations`` is true: the protocol runs every
  episode for ``max_episode_steps`` so that ``success_at_end`` can differ from ``success_once``
  (the seed's 0.82 vs 0.95).

:class:`EvalSim` uses LiberoSim's API for both (``reset(init_state_id=...)`` and
``LiberoSim(..., terminate_on_success=False)``). Everything else (settling, rendering in VLA
orientation, the 8-D state, truncation at ``max_episode_steps``) is LiberoSim's.
"""

from __future__ import annotations


import numpy as np


class EvalSim:
    """One env slot's simulator.

    Args:
        suite, task, libero_type, seed: see :class:`~rpent.robots.libero.sim.LiberoSim`.
        max_episode_steps: env steps per episode (after settling).
        cuda_device: EGL device, or None.
        continue_after_success: keep stepping after the success predicate first holds.
        policy_image_size: edge (px) of the rendered policy cameras (default 256).
    """

    def __init__(
        self,
        suite: str,
        task: int,
        libero_type: str,
        seed: int,
        max_episode_steps: int,
        cuda_device: int | None = None,
        continue_after_success: bool = True,
        policy_image_size: int = 256,
    ):
        from rpent.robots.libero.sim import LiberoSim

        self.sim = LiberoSim(
            suite, task, seed=seed, max_episode_steps=max_episode_steps, libero_type=libero_type,
            cuda_device=cuda_device, terminate_on_success=not continue_after_success,
            policy_image_size=policy_image_size,
        )
        self.continue_after_success = continue_after_success

    @property
    def n_init_states(self) -> int:
        """Recorded init states of this task."""
        return int(self.sim.task_info.n_init_states)

    def reset(self, init_state_id: int) -> None:
        """Fresh episode from init state ``init_state_id`` (0 <= id < n_init_states): reset + settle.

        Raises:
            ValueError: id out of range.
        """
        if not 0 <= int(init_state_id) < self.n_init_states:
            raise ValueError(
                f"init state {init_state_id} out of range for {self.sim.suite} task {self.sim.task} "
                f"(0..{self.n_init_states - 1})"
            )
        self.sim.reset(init_state_id=int(init_state_id))

    def step(self, action: np.ndarray) -> bool:
        """One env step (no rendering); returns the success predicate after it."""
        return bool(self.sim.step(action)["success"])

    def policy_obs(self) -> dict[str, np.ndarray]:
        """``{main_image, wrist_image: uint8 [S,S,3] VLA orientation (S = policy_image_size), state: float32 [8]}``."""
        return self.sim.policy_obs()

    @property
    def steps(self) -> int:
        """Env steps executed since the last reset."""
        return int(self.sim.steps)

    def close(self) -> None:
        """Free the simulator."""
        self.sim.close()


def open_sim(
    *, suite: str, task: int, libero_type: str, seed: int, max_episode_steps: int,
    cuda_device: int | None = None, continue_after_success: bool = True, policy_image_size: int = 256,
) -> EvalSim:
    """Build an :class:`EvalSim` (see its arguments)."""
    return EvalSim(suite, task, libero_type, seed, max_episode_steps, cuda_device, continue_after_success,
                   policy_image_size)
