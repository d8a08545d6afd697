"""Typed, validated evaluation settings (built from a config by :mod:`rpent.eval.validation`).

Units: steps are env steps (LIBERO control runs at 20 Hz), times in seconds. Field names follow the
product document's config (evaluation guide step 3) so a key path maps to one attribute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class EnvSettings:
    """``env.*``: the LIBERO environments and the trajectory budget.

    Attributes:
        suite: LIBERO suite name, e.g. ``libero_10`` or ``libero_10_swap``.
        task_ids: tasks to evaluate (the reset-state pool holds only these), or None for all.
        libero_type: ``standard`` or ``pro`` (LIBERO-PRO perturbation suites).
        rollout_epoch: rollout epochs; every epoch resets every env once (one episode per env).
        total_num_envs: parallel envs over all workers (one episode each per epoch).
        num_workers: env worker processes; ``total_num_envs % num_workers == 0``.
        max_episode_steps: env steps per episode (the seed: 520).
        ignore_terminations: True: episodes always run ``max_episode_steps``; False: an episode
            ends at its first success (faster; ``success_at_end`` then equals ``success_once``).
        reward_coef: reward of the success step (RLinf LIBERO ``reward_coef``; 5.0 in the seed's
            figures: ``eval/return`` = 5 x ``eval/success_once``).
        seed: simulator seed and the base of the ``observation`` noise generator.
        save_video: write one mp4 per episode (main camera, one frame per policy query).
        video_fps: frames per second of those videos.
        pipeline_stage_num: ``rollout.pipeline_stage_num`` (at most ``num_workers``: a larger value is
            lowered to it): the env workers are dealt to this many stages and each policy call serves every
            running env of one stage (:mod:`rpent.eval.rollout`); 1 = all envs in every call,
            ``num_workers`` = one call per worker. Local env workers only: with ``--ray-address`` the
            driver calls the policy once per worker.
        init_state_ids: the init states evaluated (each task's pool holds only these, e.g. a held-out
            40-49), or None for all of them.
        policy_image_size: edge (px) of the square policy camera images the envs render; 0 = auto
            (the policy's ``vla.metadata`` ``camera_size``, else 256).
    """

    suite: str
    task_ids: tuple[int, ...] | None
    libero_type: str
    rollout_epoch: int
    total_num_envs: int
    num_workers: int
    max_episode_steps: int
    ignore_terminations: bool
    reward_coef: float
    seed: int
    save_video: bool
    video_fps: float
    pipeline_stage_num: int = 1
    init_state_ids: tuple[int, ...] | None = None
    policy_image_size: int = 0

    @property
    def envs_per_worker(self) -> int:
        """Envs owned by each worker process (``total_num_envs // num_workers``)."""
        return self.total_num_envs // self.num_workers

    @property
    def expected_trajectories(self) -> int:
        """``total_num_envs x rollout_epoch``: what ``eval/num_trajectories`` must equal."""
        return self.total_num_envs * self.rollout_epoch


@dataclass(frozen=True)
class ModelSettings:
    """``rollout.model.*``: the Pi0.5 model and its inference options.

    Attributes:
        model_path: checkpoint directory (config.json, model.safetensors, norm_stats.json), or None
            for the endpoint backend (the server owns the weights).
        num_action_chunks: env steps executed per policy query (the seed: 5).
        action_dim: env action size (LIBERO: 7 = delta eef pos 3, delta axis-angle 3, gripper 1).
        config_name: OpenPI config name; must start with ``pi05_``.
        num_images_in_input: camera views fed to the model (2: main + wrist).
        num_steps: flow-matching integration steps (OpenPI ``num_steps``).
        noise_method: ``flow_ode`` or ``flow_sde``; evaluation always integrates the ODE.
        precision: weights/activations dtype of in-process backends (``bf16``, ``fp16``, ``fp32``, or ``fp8``:
            rpent's Pi0.5 with FP8 Gemma weights on a GPU with FP8 tensor cores, refused by name elsewhere).
        action_horizon: actions predicted per query (>= num_action_chunks).
        num_flow_steps: ApxInf's flow steps; equals ``num_steps``.
        noise_source: ``apxinf`` (backend samples), ``torch`` (torch generator) or ``observation``
            (the harness sends ``noise`` float32 [B, action_horizon, 32] with each query).
    """

    model_path: str | None
    num_action_chunks: int
    action_dim: int
    config_name: str
    num_images_in_input: int
    num_steps: int
    noise_method: str
    precision: str
    action_horizon: int
    num_flow_steps: int
    noise_source: str


@dataclass(frozen=True)
class PolicySettings:
    """``policy.*``: where actions come from.

    Attributes:
        backend: ``pi05`` (in-process rpent Pi0.5), ``apxinf`` (in-process ApxInf via apxinf_robo),
            ``lerobot`` (a lerobot checkpoint in-process, :mod:`rpent.models.lerobot`) or ``endpoint``
            (any ``vla.predict`` server).
        endpoint: ``http://host:port`` or ``socket://host:port`` for the endpoint backend, else None.
        device: torch device of in-process backends (``cpu``, ``cuda:N``), resolved from ``auto``.
        timeout_s: per-query timeout of the endpoint backend (s).
        episode_keys: the endpoint backend sends ``options.episode_keys`` (replay policy servers).
        checkpoint: the lerobot checkpoint directory of the ``lerobot`` backend, else None.
    """

    backend: str
    endpoint: str | None
    device: str
    timeout_s: float
    episode_keys: bool = False
    checkpoint: str | None = None


@dataclass(frozen=True)
class EvalSettings:
    """Everything one ``rpent-eval`` run needs, validated.

    Attributes:
        config_name: the config's name (shipped name or YAML stem); part of the log dir name.
        env: :class:`EnvSettings`.
        model: :class:`ModelSettings`.
        policy: :class:`PolicySettings`.
        cuda_device: GPU index shared by the policy and MuJoCo EGL rendering, or None.
        logger_backends: ``["tensorboard"]`` or ``[]``.
    """

    config_name: str
    env: EnvSettings
    model: ModelSettings
    policy: PolicySettings
    cuda_device: int | None
    logger_backends: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every setting (for logs and ``metrics.log``)."""
        return asdict(self)
