"""lerobot policies (ACT, Diffusion Policy, and other lerobot checkpoints) behind rpent's VLA contract.

Modules:
    layout: the feature keys rpent's LIBERO datasets map to, and ``rpent_policy.json`` (what rpent
        adds to a lerobot checkpoint directory: camera mapping, task table, image size, provenance).
    policy: :class:`~rpent.models.lerobot.policy.LerobotPolicy`, a loaded checkpoint answering
        ``predict(observation) -> actions [B, n_exec, 7]`` with the prepare / run / finish stages that
        the dynamic batcher of the VLA servers uses.

lerobot (0.4.4, installed with ``--no-deps``) and torch are imported lazily, inside the functions.
"""
