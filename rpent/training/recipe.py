"""Policy recipes: lerobot policy configs for rpent's LIBERO datasets (no pre-trained weights anywhere).

A recipe fixes the policy type and its size; :func:`build_config` fills in the dataset's features
(two cameras of the dataset's image size, the 8-D state, the one-hot task vector, the 7-D action).

========================  ==========================================================================
``act``                   ACT (lerobot ``ACTConfig``): ResNet-18 backbone from random init
                          (``pretrained_backbone_weights=None``), transformer 256 wide, 4 encoder /
                          1 decoder / 4 VAE-encoder layers, feed-forward 1024, chunk 20, 10 actions
                          executed per query; AdamW lr 1e-4 (backbone too), weight decay 1e-4, cosine
                          decay to 1e-5 after 500 warm-up steps. About 19 M parameters.
``act-small``             the same network for CPU runs: chunk 20, transformer 128 wide, 2 encoder /
                          1 decoder / 2 VAE-encoder layers.
``diffusion``             Diffusion Policy (lerobot ``DiffusionConfig``): ResNet-18 from random init
                          with group norm, 1 observation step, horizon 16, 8 actions executed,
                          DDIM with 10 inference steps (100 training steps).
========================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RECIPES = ("act", "act-small", "diffusion")


@dataclass(frozen=True)
class Recipe:
    """Training hyper-parameters besides the policy config.

    Attributes:
        name: one of :data:`RECIPES`.
        policy_type: lerobot policy type (``act``, ``diffusion``).
        lr, backbone_lr, weight_decay, warmup_steps, final_lr: AdamW and its cosine schedule.
        grad_clip: gradient-norm clip.
        chunk_size: actions per training sample (the policy's chunk / horizon).
        n_exec: actions executed per query when served.
        policy_kwargs: fields of the lerobot config.
    """

    name: str
    policy_type: str
    lr: float
    backbone_lr: float
    weight_decay: float
    warmup_steps: int
    final_lr: float
    grad_clip: float
    chunk_size: int
    n_exec: int
    policy_kwargs: dict


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``.

    Raises:
        ValueError: unknown name (lists :data:`RECIPES`).
    """
    if name == "act":
        return Recipe("act", "act", 1e-4, 1e-4, 1e-4, 500, 1e-5, 10.0, 20, 10, dict(
            dim_model=256, n_heads=8, dim_feedforward=1024, n_encoder_layers=4, n_decoder_layers=1,
            n_vae_encoder_layers=4, latent_dim=32, dropout=0.1, kl_weight=10.0))
    if name == "act-small":
        return Recipe("act-small", "act", 1e-4, 1e-4, 1e-4, 50, 1e-5, 10.0, 20, 10, dict(
            dim_model=128, n_heads=4, dim_feedforward=512, n_encoder_layers=2, n_decoder_layers=1,
            n_vae_encoder_layers=2, latent_dim=16, dropout=0.1, kl_weight=10.0))
    if name == "diffusion":
        return Recipe("diffusion", "diffusion", 1e-4, 1e-4, 1e-6, 500, 1e-6, 10.0, 16, 8, dict(
            n_obs_steps=1, horizon=16, n_action_steps=8, noise_scheduler_type="DDIM", num_train_timesteps=100,
            num_inference_steps=10, use_group_norm=True, crop_shape=None, down_dims=(256, 512, 1024)))
    raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")


def build_config(recipe: Recipe, image_shape: tuple[int, int, int], n_tasks: int, device: str) -> Any:
    """The lerobot policy config for ``recipe`` on a dataset of ``image_shape`` (H, W, 3) and ``n_tasks`` tasks.

    Inputs: ``observation.images.image`` / ``observation.images.wrist_image`` (VISUAL, 3 x H x W),
    ``observation.state`` (STATE, 8), ``observation.environment_state`` (ENV, one-hot of n_tasks,
    not normalised); output ``action`` (ACTION, 7). Cameras, state and action are normalised with
    mean/std (lerobot's default for both policy types).
    """
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature

    from rpent.models.lerobot.layout import ACTION_KEY, MAIN_KEY, STATE_KEY, TASK_KEY, WRIST_KEY

    h, w, _ = image_shape
    inputs = {
        MAIN_KEY: PolicyFeature(FeatureType.VISUAL, (3, h, w)),
        WRIST_KEY: PolicyFeature(FeatureType.VISUAL, (3, h, w)),
        STATE_KEY: PolicyFeature(FeatureType.STATE, (8,)),
        TASK_KEY: PolicyFeature(FeatureType.ENV, (n_tasks,)),
    }
    outputs = {ACTION_KEY: PolicyFeature(FeatureType.ACTION, (7,))}
    norm = {"VISUAL": NormalizationMode.MEAN_STD, "STATE": NormalizationMode.MEAN_STD,
            "ENV": NormalizationMode.IDENTITY, "ACTION": NormalizationMode.MEAN_STD}
    if recipe.policy_type == "act":
        from lerobot.policies.act.configuration_act import ACTConfig

        return ACTConfig(input_features=inputs, output_features=outputs, normalization_mapping=norm, device=device,
                         chunk_size=recipe.chunk_size, n_action_steps=recipe.n_exec, vision_backbone="resnet18",
                         pretrained_backbone_weights=None, optimizer_lr=recipe.lr,
                         optimizer_lr_backbone=recipe.backbone_lr, optimizer_weight_decay=recipe.weight_decay,
                         push_to_hub=False, **recipe.policy_kwargs)
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    return DiffusionConfig(input_features=inputs, output_features=outputs, normalization_mapping=norm, device=device,
                           vision_backbone="resnet18", pretrained_backbone_weights=None, optimizer_lr=recipe.lr,
                           optimizer_weight_decay=recipe.weight_decay, push_to_hub=False, **recipe.policy_kwargs)
