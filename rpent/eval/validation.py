"""Validate a loaded config against the product document's hard constraints -> :class:`EvalSettings`.

The constraints and their messages follow the product document's evaluation guide (step 3 "constraints" table and the
"common problems" table):

* ``runner.only_eval`` must be true and ``runner.enable_decoupled_mode`` false (evaluation only);
* ``rollout.model.openpi.config_name`` must start with ``pi05_`` (only Pi0.5 OpenPI configs);
* ``apxinf.num_flow_steps`` must equal ``openpi.num_steps``;
* ``apxinf.action_horizon`` must be >= ``num_action_chunks``;
* ``openpi.noise_method`` in {flow_ode, flow_sde} (flow_sde degrades to the ODE in evaluation);
* ``apxinf.noise_source`` in {apxinf, torch, observation};
* the checkpoint directory holds config.json, model.safetensors and norm_stats.json;
* ``total_num_envs`` is divisible by the number of env worker processes.

Ours, because the harness makes the seed's auto_reset pitfall impossible: ``env.eval.auto_reset``
must be false and ``max_steps_per_rollout_epoch`` must equal ``max_episode_steps`` (one episode per
env per epoch, every epoch starting from a fresh reset).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from rpent.eval.config import LoadedConfig, has_key, resolved
from rpent.eval.errors import CheckpointError, EvalConfigError
from rpent.eval.settings import EnvSettings, EvalSettings, ModelSettings, PolicySettings

NOISE_METHODS = ("flow_ode", "flow_sde")
NOISE_SOURCES = ("apxinf", "torch", "observation")
PRECISIONS = ("bf16", "fp16", "fp32", "fp8")
BACKENDS = ("pi05", "apxinf", "endpoint", "lerobot")
LIBERO_TYPES = ("standard", "pro")
MAX_TRAJECTORIES = 1_000_000
"""Most planned trajectories (``total_num_envs x rollout_epoch``) of one evaluation: the plan is built
in memory before anything starts (``rpent-batch`` caps its indices the same way)."""
CHECKPOINT_FILES = ("config.json", "model.safetensors", "norm_stats.json")
"""Files a Pi0.5 checkpoint directory must hold (seed step 2; tokenizer.model is optional)."""


def _get(cfg: Any, key: str) -> Any:
    return resolved(cfg, key)


def _float(cfg: Any, key: str, *, positive: bool = False) -> float:
    """A finite number (``> 0`` with ``positive``); a string, a bool, ``nan`` or ``inf`` is refused."""
    value = _get(cfg, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EvalConfigError(f"{key} must be a finite number, got {value!r}; e.g. {key}=1.0")
    if positive and value <= 0:
        raise EvalConfigError(f"{key} must be > 0, got {value}")
    return float(value)


def _int(cfg: Any, key: str, *, minimum: int = 1) -> int:
    value = _get(cfg, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvalConfigError(f"{key} must be an integer, got {value!r}; e.g. {key}={max(minimum, 1)}")
    if value < minimum:
        raise EvalConfigError(f"{key} must be >= {minimum}, got {value}")
    return value


def _bool(cfg: Any, key: str) -> bool:
    value = _get(cfg, key)
    if not isinstance(value, bool):
        raise EvalConfigError(f"{key} must be true or false, got {value!r}")
    return value


def _str(cfg: Any, key: str) -> str:
    value = _get(cfg, key)
    if not isinstance(value, str) or not value:
        raise EvalConfigError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _choice(cfg: Any, key: str, choices: tuple[str, ...], what: str) -> str:
    value = _get(cfg, key)
    if value not in choices:
        raise EvalConfigError(f"unsupported {what} {value!r} ({key}); choose one of {', '.join(choices)}")
    return value


def check_checkpoint_dir(path: str | Path) -> Path:
    """Check that a Pi0.5 checkpoint directory exists and holds :data:`CHECKPOINT_FILES`.

    Raises:
        CheckpointError: the directory is missing, or names the missing files and how to get them.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise CheckpointError(
            f"checkpoint directory {root} does not exist; point APXINF_PI05_MODEL_DIR (or "
            "PI05_CHECKPOINT_PATH) at a directory with config.json, model.safetensors and norm_stats.json"
        )
    missing = [f for f in CHECKPOINT_FILES if not (root / f).is_file()]
    if missing:
        hint = ""
        if "norm_stats.json" in missing:
            hint = (
                "; norm_stats.json is not part of lerobot/pi05_libero_base: download openpi's "
                "pi05_libero assets/physical-intelligence/libero/norm_stats.json into the checkpoint root"
            )
        raise CheckpointError(f"checkpoint directory {root} is missing {', '.join(missing)}{hint}")
    return root


def _init_state_ids(cfg: Any) -> tuple[int, ...] | None:
    """``env.eval.init_state_ids``: null (all), a list of ids, or a range string such as ``"40-49"``."""
    if not has_key(cfg, "env.eval.init_state_ids"):
        return None
    raw = _get(cfg, "env.eval.init_state_ids")
    if raw is None:
        return None
    from rpent.batch.matrix import parse_index_list

    try:
        ids = parse_index_list(raw, "env.eval.init_state_ids")
    except ValueError as exc:
        raise EvalConfigError(f"{exc}; e.g. env.eval.init_state_ids=40-49 (held-out states) or [0,1,2]") from None
    if not ids:
        raise EvalConfigError("env.eval.init_state_ids must name at least one init state")
    return tuple(ids)


def resolve_num_workers(value: Any, total_num_envs: int, cpu_count: int | None = None) -> int:
    """Turn ``env.num_workers`` into a worker count and check the trajectory budget.

    Args:
        value: an int >= 1, or ``"auto"``: the largest divisor of ``total_num_envs`` that does not
            exceed the CPU count (each worker steps its envs on one core).
        total_num_envs: ``env.eval.total_num_envs``.
        cpu_count: CPUs available (default ``os.cpu_count()``).

    Raises:
        EvalConfigError: a bad value, or ``total_num_envs`` not divisible by the worker count (the
            seed's ``total_num_envs ... divisible by the number of environment processes``).
    """
    if value == "auto":
        cpus = max(1, cpu_count or os.cpu_count() or 1)
        return max(d for d in range(1, min(cpus, total_num_envs) + 1) if total_num_envs % d == 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EvalConfigError(f"env.num_workers must be 'auto' or an integer >= 1, got {value!r}")
    if total_num_envs % value != 0:
        fixed = value * -(-total_num_envs // value)
        raise EvalConfigError(
            f"total_num_envs ({total_num_envs}) must be divisible by the number of environment processes "
            f"(env.num_workers={value}); set env.eval.total_num_envs to a multiple of {value} "
            f"(e.g. env.eval.total_num_envs={fixed}) or change env.num_workers"
        )
    return value


def resolve_device(value: str, cuda_device: int | None) -> str:
    """Resolve ``policy.device``: ``auto`` -> ``cuda:<cuda_device or 0>`` when CUDA works, else ``cpu``.

    Raises:
        EvalConfigError: ``value`` is not ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    """
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", value):
        raise EvalConfigError(f"policy.device must be auto, cpu, cuda or cuda:N, got {value!r}; e.g. policy.device=cpu")
    if value != "auto":
        if value == "cuda" and cuda_device is not None:
            return f"cuda:{cuda_device}"
        return value
    import torch  # deferred: only in-process backends need torch

    if torch.cuda.is_available():
        return f"cuda:{cuda_device or 0}"
    return "cpu"


def build_settings(
    loaded: LoadedConfig, *, cuda_device: int | None = None, cpu_count: int | None = None
) -> EvalSettings:
    """Validate ``loaded`` and build :class:`EvalSettings`.

    Args:
        loaded: the config from :func:`rpent.eval.config.load_eval_config`.
        cuda_device: ``--cuda-device`` (overrides ``runner.cuda_device``): GPU for the policy and EGL.
        cpu_count: CPUs for ``env.num_workers=auto`` (default ``os.cpu_count()``).

    Raises:
        EvalConfigError / CheckpointError: the first violated constraint, with the seed's wording.
    """
    cfg = loaded.cfg
    # -- runner: evaluation only -----------------------------------------------------------------
    if _get(cfg, "runner.only_eval") is not True:
        raise EvalConfigError(
            "runner.only_eval must be true: rpent-eval is evaluation-only (no training); set runner.only_eval=true"
        )
    if has_key(cfg, "runner.enable_decoupled_mode") and _get(cfg, "runner.enable_decoupled_mode") is not False:
        raise EvalConfigError(
            "runner.enable_decoupled_mode must be false: decoupled rollout is not supported; "
            "set runner.enable_decoupled_mode=false"
        )
    if cuda_device is None and has_key(cfg, "runner.cuda_device"):
        cuda_device = _get(cfg, "runner.cuda_device")
    if cuda_device is not None and (isinstance(cuda_device, bool) or not isinstance(cuda_device, int) or cuda_device < 0):
        raise EvalConfigError(f"cuda device must be a GPU index >= 0, got {cuda_device!r}")
    backends: list[str] = []
    if has_key(cfg, "runner.logger.logger_backends"):
        backends = list(_get(cfg, "runner.logger.logger_backends") or [])
        unknown = [b for b in backends if b != "tensorboard"]
        if unknown:
            raise EvalConfigError(
                f"unsupported runner.logger.logger_backends {unknown}; only 'tensorboard' is supported"
            )

    # -- env ---------------------------------------------------------------------------------------
    if _get(cfg, "env.eval.auto_reset") is not False:
        raise EvalConfigError(
            "env.eval.auto_reset=true is not supported: with auto_reset the envs are reset only in epoch 0, "
            "state accumulates across epochs and past robosuite's horizon (1000 steps) stepping raises "
            "'executing action in terminated episode' (the seed's EXIT=255); set env.eval.auto_reset=false"
        )
    total_num_envs = _int(cfg, "env.eval.total_num_envs")
    max_episode_steps = _int(cfg, "env.eval.max_episode_steps")
    per_epoch = _int(cfg, "env.eval.max_steps_per_rollout_epoch")
    if per_epoch != max_episode_steps:
        raise EvalConfigError(
            f"env.eval.max_steps_per_rollout_epoch ({per_epoch}) must equal env.eval.max_episode_steps "
            f"({max_episode_steps}): each rollout epoch is exactly one episode per env; override "
            "max_episode_steps only (max_steps_per_rollout_epoch follows it)"
        )
    num_workers_raw = _get(cfg, "env.num_workers")
    task_ids_raw = _get(cfg, "env.eval.task_ids") if has_key(cfg, "env.eval.task_ids") else None
    task_ids: tuple[int, ...] | None = None
    if task_ids_raw is not None:
        if isinstance(task_ids_raw, int) and not isinstance(task_ids_raw, bool):
            task_ids_raw = [task_ids_raw]
        if (not isinstance(task_ids_raw, list) or not task_ids_raw
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in task_ids_raw)):
            raise EvalConfigError(
                f"env.eval.task_ids must be null or a non-empty list of task indices >= 0, got {task_ids_raw!r}; "
                "e.g. env.eval.task_ids=[0,3]"
            )
        task_ids = tuple(sorted(set(task_ids_raw)))
    init_state_ids = _init_state_ids(cfg)
    image_size = _get(cfg, "env.eval.policy_image_size") if has_key(cfg, "env.eval.policy_image_size") else "auto"
    if image_size == "auto":
        image_size = 0
    if isinstance(image_size, bool) or not isinstance(image_size, int) or not (image_size == 0 or 16 <= image_size <= 1024):
        raise EvalConfigError(f"env.eval.policy_image_size must be auto or 16..1024 pixels, got {image_size!r}")
    env = EnvSettings(
        suite=_str(cfg, "env.eval.suite"),
        task_ids=task_ids,
        libero_type=_choice(cfg, "env.eval.libero_type", LIBERO_TYPES, "libero_type"),
        rollout_epoch=_int(cfg, "env.eval.rollout_epoch"),
        total_num_envs=total_num_envs,
        num_workers=resolve_num_workers(num_workers_raw, total_num_envs, cpu_count),
        max_episode_steps=max_episode_steps,
        ignore_terminations=_bool(cfg, "env.eval.ignore_terminations"),
        reward_coef=_float(cfg, "env.eval.reward_coef"),
        seed=_int(cfg, "env.eval.seed", minimum=0),
        save_video=_bool(cfg, "env.eval.save_video"),
        video_fps=_float(cfg, "env.eval.video_fps", positive=True),
        init_state_ids=init_state_ids,
        policy_image_size=image_size,
    )
    if env.total_num_envs * env.rollout_epoch > MAX_TRAJECTORIES:
        raise EvalConfigError(
            f"env.eval.total_num_envs x env.eval.rollout_epoch = {env.total_num_envs} x {env.rollout_epoch} "
            f"trajectories is more than one evaluation plans ({MAX_TRAJECTORIES:,}); lower them, or split the "
            "evaluation into several runs"
        )
    stages = _int(cfg, "rollout.pipeline_stage_num") if has_key(cfg, "rollout.pipeline_stage_num") else 1
    env = replace(env, pipeline_stage_num=min(stages, env.num_workers))  # a stage needs at least one worker

    # -- policy backend ----------------------------------------------------------------------------
    endpoint = _get(cfg, "policy.endpoint")
    backend = _get(cfg, "policy.backend")
    if backend == "auto":
        backend = "endpoint" if endpoint else "pi05"
    if backend == "lerobot" and endpoint:
        backend = "endpoint"  # the lerobot checkpoint is served there (lerobot_policy_server)
    if backend not in BACKENDS:
        raise EvalConfigError(f"unsupported policy.backend {backend!r}; choose auto, {', '.join(BACKENDS)}")
    if backend == "endpoint":
        if not endpoint:
            raise EvalConfigError(
                "policy.backend=endpoint needs policy.endpoint, e.g. policy.endpoint=http://127.0.0.1:8000"
            )
        from rpent.rpc.endpoint import parse_endpoint

        try:
            endpoint = str(parse_endpoint(str(endpoint)))
        except ValueError as exc:
            raise EvalConfigError(f"policy.endpoint: {exc}") from None
    elif endpoint:
        raise EvalConfigError(
            f"policy.endpoint is set but policy.backend={backend}; drop policy.endpoint or set policy.backend=endpoint"
        )
    timeout_s = _float(cfg, "policy.timeout_s", positive=True)

    checkpoint = None
    if backend == "lerobot":
        checkpoint = _get(cfg, "policy.checkpoint") if has_key(cfg, "policy.checkpoint") else None
        if not checkpoint:
            raise EvalConfigError(
                "policy.backend=lerobot needs policy.checkpoint=<lerobot checkpoint directory> (rpent-train's output "
                "directory, a checkpoints/<step> directory or a pretrained_model directory)"
            )
        from rpent.models.lerobot.layout import CheckpointLayoutError, find_pretrained_dir

        try:
            checkpoint = str(find_pretrained_dir(str(checkpoint)))
        except CheckpointLayoutError as exc:
            raise CheckpointError(f"policy.checkpoint: {exc}") from None

    # -- model -------------------------------------------------------------------------------------
    config_name = _str(cfg, "rollout.model.openpi.config_name")
    if backend != "lerobot" and not config_name.startswith("pi05_"):
        raise EvalConfigError(
            f"only PI0.5 OpenPI configs are supported: rollout.model.openpi.config_name must start with "
            f"'pi05_' (got {config_name!r}); e.g. rollout.model.openpi.config_name=pi05_libero"
        )
    num_steps = _int(cfg, "rollout.model.openpi.num_steps")
    num_flow_steps = _int(cfg, "rollout.model.apxinf.num_flow_steps")
    if num_flow_steps != num_steps:
        raise EvalConfigError(
            f"num_flow_steps must match OpenPI num_steps (rollout.model.apxinf.num_flow_steps={num_flow_steps}, "
            f"rollout.model.openpi.num_steps={num_steps}); change both together, or reference it: "
            "num_flow_steps: ${..openpi.num_steps}"
        )
    num_action_chunks = _int(cfg, "rollout.model.num_action_chunks")
    action_horizon = _int(cfg, "rollout.model.apxinf.action_horizon")
    if action_horizon < num_action_chunks:
        raise EvalConfigError(
            f"action_horizon must be at least num_action_chunks (rollout.model.apxinf.action_horizon="
            f"{action_horizon} < rollout.model.num_action_chunks={num_action_chunks}); raise action_horizon "
            "or lower num_action_chunks"
        )
    noise_method = _get(cfg, "rollout.model.openpi.noise_method")
    if noise_method not in NOISE_METHODS:
        raise EvalConfigError(
            f"unsupported noise_method {noise_method!r} (rollout.model.openpi.noise_method); choose flow_ode "
            "or flow_sde (flow_sde runs as the deterministic ODE in evaluation)"
        )
    noise_source = _get(cfg, "rollout.model.apxinf.noise_source")
    if noise_source not in NOISE_SOURCES:
        raise EvalConfigError(
            f"invalid noise_source {noise_source!r} (rollout.model.apxinf.noise_source); choose apxinf, torch "
            "or observation"
        )
    action_dim = _int(cfg, "rollout.model.action_dim")
    if action_dim != 7:
        raise EvalConfigError(
            f"rollout.model.action_dim must be 7 for LIBERO (delta pos 3, delta axis-angle 3, gripper 1), got {action_dim}"
        )
    num_images = _int(cfg, "rollout.model.openpi.num_images_in_input")
    if num_images not in (1, 2):
        raise EvalConfigError(
            f"rollout.model.openpi.num_images_in_input must be 1 (main) or 2 (main + wrist) on LIBERO, got {num_images}"
        )
    model_path: str | None = None
    if backend in ("pi05", "apxinf"):
        model_path = str(check_checkpoint_dir(_str(cfg, "rollout.model.model_path")))
    model = ModelSettings(
        model_path=model_path,
        num_action_chunks=num_action_chunks,
        action_dim=action_dim,
        config_name=config_name,
        num_images_in_input=num_images,
        num_steps=num_steps,
        noise_method=noise_method,
        precision=_choice(cfg, "rollout.model.apxinf.precision", PRECISIONS, "precision"),
        action_horizon=action_horizon,
        num_flow_steps=num_flow_steps,
        noise_source=noise_source,
    )
    device = "cpu"
    if backend in ("pi05", "apxinf", "lerobot"):
        device = resolve_device(_str(cfg, "policy.device"), cuda_device)
    episode_keys = _bool(cfg, "policy.episode_keys") if has_key(cfg, "policy.episode_keys") else False
    if episode_keys and backend != "endpoint":
        raise EvalConfigError("policy.episode_keys=true needs the endpoint backend (policy.endpoint=...)")
    policy = PolicySettings(backend=backend, endpoint=endpoint or None, device=device, timeout_s=timeout_s,
                            episode_keys=episode_keys, checkpoint=checkpoint)
    return EvalSettings(
        config_name=loaded.name,
        env=env,
        model=model,
        policy=policy,
        cuda_device=cuda_device,
        logger_backends=tuple(backends),
    )
