"""Feature keys and the ``rpent_policy.json`` file of a lerobot policy checkpoint trained by rpent.

A lerobot checkpoint directory (``pretrained_model/``) holds ``config.json`` (the policy config, its
``type``: ``act``, ``diffusion``, ...), ``model.safetensors`` and the processor pipelines
(``policy_preprocessor.json`` / ``policy_postprocessor.json`` with their normaliser statistics). rpent
writes one more file beside them, ``rpent_policy.json``::

    {"format": "rpent.lerobot_policy", "schema_version": 1,
     "policy_type": "act",
     "cameras": {"main": "observation.images.image", "wrist": "observation.images.wrist_image"},
     "state_key": "observation.state",
     "task_conditioning": {"kind": "one_hot", "key": "observation.environment_state",
                           "tasks": ["pick up the alphabet soup and place it in the basket", ...]},
     "image_size": 128, "state_dim": 8, "action_dim": 7, "fps": 20, "n_exec": 8,
     "dataset": {"root", "repo_id", "sha256", "episodes", "frames", "val_episodes"},
     "training": {"steps", "device", "wall_s", "seed", "recipe", ...}}

Task conditioning ``one_hot``: the policy input ``observation.environment_state`` is the one-hot
index of the task string in ``tasks`` (ACT and Diffusion Policy take no language); ``language``: the
request's task string goes to the policy's own processor (VLA checkpoints: pi0, pi05, smolvla);
``none``: no task input. A checkpoint without ``rpent_policy.json`` (any lerobot checkpoint) is read
from its ``config.json``: image features in order are main then wrist, ``observation.state`` the state,
language conditioning for the VLA types, none otherwise.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from rpent.recording.provenance import file_sha256

MAIN_KEY = "observation.images.image"
"""lerobot key of the main (agentview) camera: the dataset feature ``image``."""
WRIST_KEY = "observation.images.wrist_image"
"""lerobot key of the wrist camera: the dataset feature ``wrist_image``."""
STATE_KEY = "observation.state"
"""lerobot key of the 8-D robot state (eef pos m, axis-angle rad, gripper qpos m)."""
TASK_KEY = "observation.environment_state"
"""lerobot key of the one-hot task vector (ACT and Diffusion Policy accept an environment-state input)."""
ACTION_KEY = "action"
"""lerobot key of the 7-D action (delta eef pos, delta axis-angle, gripper)."""

DATASET_KEYS = {"image": MAIN_KEY, "wrist_image": WRIST_KEY, "state": STATE_KEY, "actions": ACTION_KEY}
"""rpent-flywheel dataset feature -> lerobot policy key."""

RPENT_POLICY_FILE = "rpent_policy.json"
FORMAT = "rpent.lerobot_policy"
SCHEMA_VERSION = 1
LANGUAGE_POLICY_TYPES = ("pi0", "pi05", "pi0_fast", "smolvla", "xvla", "groot", "wall_x")
"""lerobot policy types that read the task string themselves (their processors tokenize it)."""


class CheckpointLayoutError(ValueError):
    """A checkpoint directory is missing files or has an unreadable ``rpent_policy.json`` (message names the fix)."""


def normalize_task(text: str) -> str:
    """Task string as matched against the task table: lower case, single spaces, no trailing period."""
    return re.sub(r"\s+", " ", str(text)).strip().rstrip(".").strip().lower()


def find_pretrained_dir(path: str | Path) -> Path:
    """The directory holding ``config.json`` + ``model.safetensors`` for ``path``.

    Accepts the ``pretrained_model`` directory itself, a training checkpoint (``<step>/`` with
    ``pretrained_model/``), or a training output directory (its ``checkpoints/last``).

    Raises:
        CheckpointLayoutError: none of these holds a lerobot checkpoint.
    """
    p = Path(path).expanduser()
    for cand in (p, p / "pretrained_model", p / "checkpoints" / "last" / "pretrained_model"):
        if (cand / "config.json").is_file() and (cand / "model.safetensors").is_file():
            return cand.resolve()
    if not p.exists():
        raise CheckpointLayoutError(f"checkpoint {p} does not exist; pass the directory rpent-train wrote "
                                    "(or its checkpoints/<step>/pretrained_model)")
    raise CheckpointLayoutError(
        f"{p} holds no lerobot checkpoint (config.json + model.safetensors), nor does {p}/pretrained_model or "
        f"{p}/checkpoints/last/pretrained_model; pass a lerobot policy checkpoint directory"
    )


def read_rpent_policy(pretrained: Path) -> dict | None:
    """``rpent_policy.json`` of a checkpoint, or None when it has none.

    Raises:
        CheckpointLayoutError: the file exists but is not a valid rpent policy description.
    """
    f = Path(pretrained) / RPENT_POLICY_FILE
    if not f.is_file():
        return None
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointLayoutError(f"{f} cannot be read ({e}); re-save the checkpoint with rpent-train") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointLayoutError(f"{f} is not an {FORMAT} v{SCHEMA_VERSION} file")
    for key in ("cameras", "state_key", "task_conditioning", "image_size"):
        if key not in doc:
            raise CheckpointLayoutError(f"{f} lacks {key!r}")
    return doc


def infer_rpent_policy(config: dict) -> dict:
    """The ``rpent_policy.json`` content for a lerobot checkpoint without one, from its ``config.json``.

    Raises:
        CheckpointLayoutError: the config has no image input or no 7-D action output.
    """
    feats = config.get("input_features") or {}
    images = [k for k, v in feats.items() if (v or {}).get("type") == "VISUAL"]
    if not images:
        raise CheckpointLayoutError("the checkpoint's config.json has no VISUAL input feature; rpent serves camera policies")
    shape = (feats[images[0]] or {}).get("shape") or [3, 256, 256]
    ptype = str(config.get("type", ""))
    return {
        "format": FORMAT, "schema_version": SCHEMA_VERSION, "policy_type": ptype,
        "cameras": {"main": images[0], **({"wrist": images[1]} if len(images) > 1 else {})},
        "state_key": STATE_KEY if STATE_KEY in feats else None,
        "task_conditioning": {"kind": "language" if ptype in LANGUAGE_POLICY_TYPES else "none"},
        "image_size": int(shape[-1]), "state_dim": 8, "action_dim": 7, "fps": 20,
        "n_exec": int(config.get("n_action_steps") or 1),
    }


def tree_sha256(root: str | Path, exclude: tuple[str, ...] = ()) -> str:
    """SHA-256 over every file under ``root`` (relative path and content, sorted by path).

    The fingerprint of a dataset or checkpoint directory: the same files give the same digest
    wherever they lie. ``exclude``: file names left out (e.g. a card that names the digest).
    """
    root = Path(root)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in exclude):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(file_sha256(f).encode() + b"\n")
    return h.hexdigest()


def checkpoint_fingerprint(pretrained: Path) -> dict[str, Any]:
    """``{"path", "model_sha256", "config_sha256"}`` of a checkpoint (what evaluation outputs name)."""
    return {
        "path": str(pretrained),
        "model_sha256": file_sha256(pretrained / "model.safetensors"),
        "config_sha256": file_sha256(pretrained / "config.json"),
    }
