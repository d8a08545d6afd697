"""Pi0.5 architecture configuration: dimensions of SigLIP, the Gemma-2B prefix and the action expert.

Full-size defaults follow openpi's `gemma.py: get_config` variants ("gemma_2b", "gemma_300m") and the
SigLIP so400m/14 vision tower of PaliGemma-3b-pt-224 (openpi's pi0.5 model definition). A tiny preset ("rpent_tiny" / "rpent_tiny_expert") keeps the same structure with small
dimensions for CPU tests; tiny checkpoints name these variants in their `config.json`.

Parameter counts are computed from the shapes alone (:func:`parameter_counts`), nothing is allocated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SiglipConfig:
    """SigLIP vision tower dimensions.

    Attributes:
        image_size: input side in pixels (square; 224 for PaliGemma-3b-pt-224).
        patch_size: patch side in pixels (14 for so400m/14), so ``(image_size/patch_size)**2`` tokens.
        width: token width (1152).
        depth: number of encoder layers (27).
        mlp_dim: MLP hidden width (4304), GELU with tanh approximation.
        num_heads: attention heads (16, head dim = width/num_heads = 72).
        layer_norm_eps: LayerNorm epsilon (1e-6, HF SiglipVisionConfig default).
    """

    image_size: int = 224
    patch_size: int = 14
    width: int = 1152
    depth: int = 27
    mlp_dim: int = 4304
    num_heads: int = 16
    layer_norm_eps: float = 1e-6

    @property
    def num_patches(self) -> int:
        """Image tokens per view: (image_size // patch_size) ** 2 (256 at full size)."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def head_dim(self) -> int:
        """Per-head width (72 at full size)."""
        return self.width // self.num_heads


@dataclass(frozen=True)
class GemmaConfig:
    """One Gemma decoder stack (the PaliGemma backbone or the action expert).

    Attributes:
        width: residual stream width (2048 for gemma_2b, 1024 for gemma_300m).
        depth: layers (18 for both; the expert shares attention with the backbone layer by layer).
        mlp_dim: GeGLU hidden width (16384 / 4096).
        num_heads: query heads (8).
        num_kv_heads: key/value heads (1: multi-query attention).
        head_dim: per-head width (256).
        rms_norm_eps: RMSNorm epsilon (1e-6, Gemma).
        rope_theta: RoPE base wavelength (10000, Gemma).
    """

    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0


#: Known backbone/expert variants (openpi `gemma.py: get_config`) plus the project's tiny test variants.
GEMMA_VARIANTS: dict[str, GemmaConfig] = {
    "gemma_2b": GemmaConfig(width=2048, depth=18, mlp_dim=16384, num_heads=8, num_kv_heads=1, head_dim=256),
    "gemma_300m": GemmaConfig(width=1024, depth=18, mlp_dim=4096, num_heads=8, num_kv_heads=1, head_dim=256),
    "rpent_tiny": GemmaConfig(width=64, depth=2, mlp_dim=128, num_heads=2, num_kv_heads=1, head_dim=16),
    "rpent_tiny_expert": GemmaConfig(width=32, depth=2, mlp_dim=64, num_heads=2, num_kv_heads=1, head_dim=16),
}

#: Vision tower that goes with each backbone variant (SigLIP is part of PaliGemma).
VISION_FOR_VARIANT: dict[str, SiglipConfig] = {
    "gemma_2b": SiglipConfig(),
    "rpent_tiny": SiglipConfig(image_size=56, patch_size=14, width=32, depth=2, mlp_dim=64, num_heads=2),
}

#: Vocabulary rows of the token embedding per backbone variant (PaliGemma: 257,152).
VOCAB_FOR_VARIANT: dict[str, int] = {"gemma_2b": 257152, "rpent_tiny": 512}


@dataclass(frozen=True)
class Pi05Config:
    """Everything needed to build and run one Pi0.5 model.

    Attributes:
        paligemma_variant / action_expert_variant: names in :data:`GEMMA_VARIANTS`.
        vision / backbone / expert: resolved dimensions.
        vocab_size: token embedding rows (257,152 for PaliGemma).
        max_action_dim: padded action width of the model's I/O (32; openpi `max_action_dim`).
        action_horizon: H, action tokens per chunk (10 for openpi `pi05_libero`; a sequence length,
            not a weight shape, so it may differ from the checkpoint's training value).
        num_flow_steps: N Euler steps from t=1 (noise) to t=0 (10 in openpi, 5 in RLinf's LIBERO eval).
        max_token_len: the prompt budget (200 for pi05 in openpi `pi0_config.py`); we never pad to it,
            it only bounds prompt length.
        time_min_period / time_max_period: sinusoidal time embedding periods (4e-3, 4.0; openpi
            `create_sinusoidal_pos_embedding`).
    """

    paligemma_variant: str = "gemma_2b"
    action_expert_variant: str = "gemma_300m"
    vision: SiglipConfig = field(default_factory=SiglipConfig)
    backbone: GemmaConfig = field(default_factory=lambda: GEMMA_VARIANTS["gemma_2b"])
    expert: GemmaConfig = field(default_factory=lambda: GEMMA_VARIANTS["gemma_300m"])
    vocab_size: int = 257152
    max_action_dim: int = 32
    action_horizon: int = 10
    num_flow_steps: int = 10
    max_token_len: int = 200
    time_min_period: float = 4e-3
    time_max_period: float = 4.0

    def __post_init__(self) -> None:
        b, e = self.backbone, self.expert
        if b.depth != e.depth:
            raise ValueError(f"backbone depth {b.depth} != expert depth {e.depth}: attention is shared layer by layer")
        if (b.num_heads, b.num_kv_heads, b.head_dim) != (e.num_heads, e.num_kv_heads, e.head_dim):
            raise ValueError("backbone and expert must have the same num_heads/num_kv_heads/head_dim (shared attention)")
        if b.num_kv_heads != 1:
            raise ValueError("this implementation supports multi-query attention only (num_kv_heads=1, as Gemma 2B)")
        if self.action_horizon < 1 or self.num_flow_steps < 1:
            raise ValueError(f"action_horizon ({self.action_horizon}) and num_flow_steps ({self.num_flow_steps}) must be >= 1")
        if self.vision.image_size % self.vision.patch_size:
            raise ValueError(f"image_size {self.vision.image_size} is not a multiple of patch_size {self.vision.patch_size}")

    @classmethod
    def from_variants(cls, paligemma_variant: str = "gemma_2b", action_expert_variant: str = "gemma_300m", **overrides) -> "Pi05Config":
        """Resolve variant names to dimensions.

        Raises:
            ValueError: an unknown variant name (lists the known ones).
        """
        for name in (paligemma_variant, action_expert_variant):
            if name not in GEMMA_VARIANTS:
                raise ValueError(f"unknown Gemma variant {name!r}; known: {sorted(GEMMA_VARIANTS)}")
        if paligemma_variant not in VISION_FOR_VARIANT:
            raise ValueError(f"{paligemma_variant!r} is not a PaliGemma backbone variant; use one of {sorted(VISION_FOR_VARIANT)}")
        return cls(
            paligemma_variant=paligemma_variant,
            action_expert_variant=action_expert_variant,
            vision=VISION_FOR_VARIANT[paligemma_variant],
            backbone=GEMMA_VARIANTS[paligemma_variant],
            expert=GEMMA_VARIANTS[action_expert_variant],
            vocab_size=VOCAB_FOR_VARIANT[paligemma_variant],
            **overrides,
        )

    def replace(self, **changes) -> "Pi05Config":
        """A copy with some fields changed (e.g. ``action_horizon``, ``num_flow_steps``)."""
        return dataclasses.replace(self, **changes)

    @property
    def num_adarms_norms(self) -> int:
        """Expert adaRMS norms: 2 per layer + the final norm (37 at full size)."""
        return 2 * self.expert.depth + 1


def full_config(**overrides) -> Pi05Config:
    """The full-size Pi0.5 (gemma_2b + gemma_300m, SigLIP so400m/14 at 224 px)."""
    return Pi05Config.from_variants("gemma_2b", "gemma_300m", **overrides)


def tiny_config(**overrides) -> Pi05Config:
    """The tiny test preset: same structure, 2 layers, widths 32-64, 56-px images (16 tokens per view)."""
    return Pi05Config.from_variants("rpent_tiny", "rpent_tiny_expert", **overrides)


def parameter_counts(cfg: Pi05Config) -> dict[str, int]:
    """Parameters per component, computed from the checkpoint tensor shapes (nothing allocated).

    Returns:
        dict with ``vision`` (SigLIP + projector), ``embedding`` (token embedding), ``backbone``
        (Gemma layers), ``expert`` (expert layers without adaRMS), ``adarms`` (the 2*depth+1 adaRMS
        projections), ``action_time`` (action in/out and time MLPs), ``used_at_inference`` (sum of the
        above; about 3.35 B at full size) and ``stored_unused`` (tensors real checkpoints also store
        but inference never reads: the backbone's final norm and the expert's lm_head).
    """
    from rpent.models.pi05.checkpoint import expected_tensor_shapes, tensor_group

    counts: dict[str, int] = {k: 0 for k in ("vision", "embedding", "backbone", "expert", "adarms", "action_time", "stored_unused")}
    for key, shape in expected_tensor_shapes(cfg, include_unused=True).items():
        counts[tensor_group(key)] += math.prod(shape)
    counts["used_at_inference"] = sum(v for k, v in counts.items() if k != "stored_unused")
    return counts
