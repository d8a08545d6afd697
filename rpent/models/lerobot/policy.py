"""A lerobot policy checkpoint answering rpent's VLA predict contract.

``LerobotPolicy(checkpoint, device).predict(observation) -> float32 [B, n_exec, 7]`` (environment
units: delta eef position, delta axis-angle, gripper), with the observation of the contract
(docs/interfaces.md)::

    {"main_images": uint8 [B, H, W, 3], "wrist_images": uint8 [B, H, W, 3] (VLA orientation),
     "states": float32 [B, 8], "task_descriptions": [str] * B}

The checkpoint is loaded with lerobot's own classes: the policy class of ``config.json``'s ``type``
(``lerobot.policies.factory.get_policy_class``: ACT, diffusion, pi0, pi05, smolvla, ...), its weights
with ``from_pretrained(strict=True)``, and its saved pre/post-processor pipelines (normalisation with
the training data's statistics, device placement) with ``make_pre_post_processors``. Images become
float [B, 3, H, W] in [0, 1], resized (bilinear, antialiased) when they are not the checkpoint's
``image_size``; the task string becomes the one-hot ``observation.environment_state`` of the task
table (``one_hot`` conditioning, exact match after :func:`~rpent.models.lerobot.layout.normalize_task`),
or goes to the policy's processor as ``task`` (``language``). A prediction is the first ``n_exec`` rows
of the policy's action chunk (``predict_action_chunk``); Diffusion Policy's chunk comes from its
``generate_actions`` with the single observation repeated over its ``n_obs_steps``.

Batching: :meth:`prepare` (validation and tensor conversion, any thread), :meth:`run_prepared` (one
model call for several requests of the same image size, one worker thread) and :meth:`finish` are the
stages :class:`rpent.models.pi05.batching.DynamicBatcher` runs, so the policy server batches
concurrent clients like the Pi0.5 server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rpent.models.lerobot import layout


class ObservationError(ValueError):
    """A request's observation does not fit the checkpoint (message names the key, the shape and the fix)."""


@dataclass
class PreparedRequest:
    """One validated request, as tensors on the CPU.

    Attributes:
        batch_size: B.
        shape_key: requests with equal keys run in one model call (image size).
        images: lerobot image key -> uint8 [B, H, W, 3].
        state: float32 [B, 8] or None.
        tasks: the B task strings.
        task_onehot: float32 [B, n_tasks] (``one_hot`` conditioning) or None.
    """

    batch_size: int
    shape_key: tuple
    images: dict[str, Any]
    state: Any
    tasks: list[str]
    task_onehot: Any


class LerobotPolicy:
    """A loaded lerobot checkpoint (see the module docstring).

    Args:
        checkpoint: a ``pretrained_model`` directory, a training checkpoint or a training output
            directory (:func:`rpent.models.lerobot.layout.find_pretrained_dir`).
        device: torch device (``cpu``, ``cuda``, ``cuda:N``).
        n_exec: actions returned per query (default: ``rpent_policy.json``'s, else the config's
            ``n_action_steps``); at most the chunk size.
        log: receives load messages.

    Raises:
        rpent.models.lerobot.layout.CheckpointLayoutError: not a lerobot checkpoint, or a bad
            ``rpent_policy.json``.
        ValueError: ``n_exec`` out of range, a policy type lerobot does not know, or weights that do
            not match the config (missing / unexpected tensors).
        ImportError: lerobot (the ``train`` extra) is not installed.
    """

    def __init__(self, checkpoint: str | Path, device: str = "cpu", n_exec: int | None = None,
                 log: Callable[[str], None] | None = None):
        import torch

        from rpent.models.torchvision_compat import import_torchvision

        import_torchvision()
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        log = log or logging.getLogger("rpent.models.lerobot").info
        self.pretrained = layout.find_pretrained_dir(checkpoint)
        config_json = json.loads((self.pretrained / "config.json").read_text(encoding="utf-8"))
        self.spec = layout.read_rpent_policy(self.pretrained) or layout.infer_rpent_policy(config_json)
        self.policy_type = str(config_json.get("type"))
        try:
            cls = get_policy_class(self.policy_type)
        except (ValueError, KeyError, ImportError) as e:
            raise ValueError(f"lerobot cannot build policy type {self.policy_type!r} ({e})") from None
        config = PreTrainedConfig.from_pretrained(str(self.pretrained))
        config.device = str(device)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # lerobot prints a note; stdout is a server's readiness channel
                self.policy = cls.from_pretrained(str(self.pretrained), config=config, strict=True)
        except RuntimeError as e:  # load_state_dict: missing / unexpected / mis-shaped tensors
            raise ValueError(f"{self.pretrained}/model.safetensors does not match its config.json: {e}") from None
        self.policy.to(device).eval()
        self.device = torch.device(device)
        overrides = {"device_processor": {"device": str(device)}}
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            config, pretrained_path=str(self.pretrained), preprocessor_overrides=overrides,
            postprocessor_overrides={"device_processor": {"device": "cpu"}},
        )
        self.config = config
        self.chunk_size = int(getattr(config, "chunk_size", None) or getattr(config, "horizon", None)
                              or getattr(config, "n_action_steps", 1))
        default_exec = int(self.spec.get("n_exec") or getattr(config, "n_action_steps", 1) or 1)
        self.n_exec = int(n_exec if n_exec is not None else default_exec)
        limit = int(getattr(config, "n_action_steps", self.chunk_size) or self.chunk_size)
        if not 1 <= self.n_exec <= max(limit, 1):
            raise ValueError(f"n_exec must be in 1..{limit} (the checkpoint's n_action_steps), got {self.n_exec}")
        self.image_size = int(self.spec["image_size"])
        self.cameras = dict(self.spec["cameras"])
        cond = self.spec.get("task_conditioning") or {"kind": "none"}
        self.conditioning = cond.get("kind", "none")
        self.tasks = [str(t) for t in cond.get("tasks", [])]
        self._task_index = {layout.normalize_task(t): i for i, t in enumerate(self.tasks)}
        self._lock = threading.Lock()
        self._resize_warned = False
        self.fingerprint = layout.checkpoint_fingerprint(self.pretrained)
        log(f"lerobot policy {self.policy_type} from {self.pretrained} on {device}: image {self.image_size} px, "
            f"cameras {self.cameras}, chunk {self.chunk_size}, n_exec {self.n_exec}, conditioning {self.conditioning}"
            + (f" over {len(self.tasks)} tasks" if self.tasks else ""))

    # ------------------------------------------------------------------ contract
    def metadata(self) -> dict:
        """``vla.metadata``: embodiment, action_dim, action_horizon, n_exec, num_flow_steps (0: not a
        flow-matching model), num_views, image_size, policy type, tasks, checkpoint and dataset provenance."""
        return {
            "embodiment": "libero",
            "action_dim": int(self.spec.get("action_dim", 7)),
            "action_horizon": self.chunk_size,
            "n_exec": self.n_exec,
            "num_flow_steps": 0,
            "num_views": len(self.cameras),
            "image_size": self.image_size,
            "camera_size": self.image_size,
            "policy": f"lerobot:{self.policy_type}",
            "task_conditioning": self.conditioning,
            "tasks": list(self.tasks),
            "device": str(self.device),
            "checkpoint": dict(self.fingerprint),
            "dataset": dict(self.spec.get("dataset") or {}),
            "training": dict(self.spec.get("training") or {}),
        }

    def predict(self, observation: dict, options: dict | None = None) -> np.ndarray:
        """float32 [B, n_exec, 7] for one request (prepare + run + finish in the calling thread).

        Raises:
            ObservationError: malformed observation or an unknown task (``one_hot`` checkpoints).
        """
        req = self.prepare(observation, options)
        with self._lock:
            out = self.run_prepared([req])[0]
        return self.finish(req, out)

    def prepare(self, observation: dict, options: dict | None = None) -> PreparedRequest:
        """Validate one request and convert it to CPU tensors (thread-safe).

        Raises:
            ObservationError: missing keys, wrong shapes/dtypes, unknown options or tasks.
        """
        import torch

        if options:
            unknown = sorted(set(options) - {"episode_keys", "episode_key"})
            if unknown:
                raise ObservationError(f"unknown option key(s) {unknown}; the lerobot policy server takes none")
        if not isinstance(observation, dict):
            raise ObservationError("observation must be a dict with main_images, wrist_images, states, task_descriptions")
        need = ["main_images", "states", "task_descriptions"] + (["wrist_images"] if "wrist" in self.cameras else [])
        missing = [k for k in need if k not in observation]
        if missing:
            raise ObservationError(f"observation lacks {missing}; see the VLA predict contract in docs/interfaces.md")
        states = np.asarray(observation["states"], dtype=np.float32)
        if states.ndim != 2 or states.shape[1] != int(self.spec.get("state_dim", 8)):
            raise ObservationError(f"states must be float32 [B, {self.spec.get('state_dim', 8)}], got shape {states.shape}")
        batch = states.shape[0]
        images = {}
        size = None
        for view, key in self.cameras.items():
            img = np.asarray(observation[f"{view}_images"])
            if img.dtype != np.uint8 or img.ndim != 4 or img.shape[0] != batch or img.shape[3] != 3:
                raise ObservationError(f"{view}_images must be uint8 [B={batch}, H, W, 3], got {img.dtype} {img.shape}")
            if size is not None and img.shape[1:3] != size:
                raise ObservationError(f"main and wrist images differ in size: {size} vs {img.shape[1:3]}")
            size = img.shape[1:3]
            images[key] = torch.from_numpy(np.ascontiguousarray(img))
        tasks = observation["task_descriptions"]
        if not isinstance(tasks, (list, tuple)) or len(tasks) != batch or not all(isinstance(t, str) for t in tasks):
            raise ObservationError(f"task_descriptions must be a list of {batch} strings")
        onehot = None
        if self.conditioning == "one_hot":
            idx = []
            for t in tasks:
                i = self._task_index.get(layout.normalize_task(t))
                if i is None:
                    known = "; ".join(f"{k}: {s!r}" for k, s in enumerate(self.tasks))
                    raise ObservationError(f"task {t!r} is not one this policy was trained on (one-hot task input); "
                                           f"known tasks: {known}")
                idx.append(i)
            onehot = torch.nn.functional.one_hot(torch.tensor(idx), len(self.tasks)).to(torch.float32)
        return PreparedRequest(batch, (size,), images, torch.from_numpy(states), list(tasks), onehot)

    def run_prepared(self, requests: list[PreparedRequest]) -> list[Any]:
        """One batched model call for requests of the same ``shape_key``; returns each request's
        un-normalised chunk, float32 CPU tensor [B_i, chunk, 7]. Called from one thread at a time."""
        import torch

        images = {k: torch.cat([r.images[k] for r in requests]) for k in requests[0].images}
        batch: dict[str, Any] = {}
        for key, img in images.items():
            x = img.to(self.device, non_blocking=True).permute(0, 3, 1, 2).to(torch.float32).div_(255.0)
            if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
                if not self._resize_warned:
                    logging.getLogger("rpent.models.lerobot").warning(
                        "images of %s px are resized to the checkpoint's %d px (render at the policy's size to avoid it)",
                        tuple(x.shape[-2:]), self.image_size)
                    self._resize_warned = True
                x = torch.nn.functional.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                                                    antialias=True, align_corners=False)
            batch[key] = x
        if self.spec.get("state_key"):
            batch[self.spec["state_key"]] = torch.cat([r.state for r in requests]).to(self.device)
        if self.conditioning == "one_hot":
            batch[self.spec["task_conditioning"]["key"]] = torch.cat([r.task_onehot for r in requests]).to(self.device)
        tasks = [t for r in requests for t in r.tasks]
        if self.conditioning == "language":
            batch["task"] = tasks
        with torch.inference_mode():
            batch = self.preprocessor(batch)
            chunk = self._chunk(batch)
            actions = self.postprocessor(chunk)
        actions = actions.to("cpu", torch.float32)
        out, i = [], 0
        for r in requests:
            out.append(actions[i:i + r.batch_size])
            i += r.batch_size
        return out

    def finish(self, request: PreparedRequest, chunk: Any) -> np.ndarray:
        """The first ``n_exec`` actions of the chunk: float32 [B, n_exec, 7]."""
        return np.ascontiguousarray(chunk[:, : self.n_exec].numpy(), dtype=np.float32)

    # ------------------------------------------------------------------ internals
    def _chunk(self, batch: dict) -> Any:
        """Normalised batch -> normalised action chunk [B, chunk, action_dim] (stateless per call)."""
        import torch

        if self.policy_type == "diffusion":
            n_obs = int(self.config.n_obs_steps)
            stacked = {}
            for k, v in batch.items():
                if isinstance(v, torch.Tensor) and k.startswith("observation."):
                    stacked[k] = v.unsqueeze(1).expand(v.shape[0], n_obs, *v.shape[1:])
            if self.config.image_features:
                stacked["observation.images"] = torch.stack([stacked[k] for k in self.config.image_features], dim=-4)
            return self.policy.diffusion.generate_actions(stacked)
        return self.policy.predict_action_chunk(batch)
