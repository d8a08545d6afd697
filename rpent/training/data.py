"""An rpent-flywheel LeRobot dataset in memory, and training batches of action chunks drawn from it.

:func:`load_dataset` reads a dataset written by ``rpent-flywheel export`` (``train/`` or ``val/``) with
lerobot's own reader (``LeRobotDataset``: the parquet table, the task table, the episode index and
the statistics) and puts every frame in memory: the cameras decoded once, whole video files front to
back with PyAV (image datasets: the PNG frames of the table), as uint8 [N, H, W, 3] tensors on the
training device. Batches are then drawn without a data loader: frame indices are sampled uniformly,
each with the ``chunk_size`` actions from it on; rows past the end of the frame's episode repeat its
last action and are flagged in ``action_is_pad`` (lerobot's padding convention).

Camera statistics for the normaliser are measured here, on the decoded frames (per-channel mean and
std in [0, 1] over a fixed sample of frames): datasets exported before the float64 fix of
:mod:`rpent.flywheel.stats` carry a camera std of 0. State and action statistics are lerobot's, from
``meta/stats.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CAMERAS = ("image", "wrist_image")
"""Dataset camera features (main, wrist), as ``rpent-flywheel export`` names them."""


class DatasetError(ValueError):
    """The directory is not a usable rpent-flywheel dataset (the message says what and the fix)."""


@dataclass
class FrameData:
    """Every frame of a dataset, as tensors on one device.

    Attributes:
        images: camera feature -> uint8 [N, H, W, 3] (VLA orientation).
        state: float32 [N, 8]; action: float32 [N, 7] (environment units).
        task_index: int64 [N], into :attr:`tasks`.
        episode_end: int64 [N]: one past the last frame of each frame's episode.
        tasks: task strings, index = task index.
        stats: lerobot's statistics of ``state`` and ``actions`` (``meta/stats.json``), float lists.
        info: provenance: ``root``, ``repo_id``, ``sha256`` (:func:`rpent.models.lerobot.layout.tree_sha256`),
            ``episodes``, ``frames``, ``fps``, ``image_shape``, ``robot_type``.
    """

    images: dict[str, Any]
    state: Any
    action: Any
    task_index: Any
    episode_end: Any
    tasks: list[str]
    stats: dict[str, dict[str, list]]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        """N."""
        return int(self.state.shape[0])

    def image_stats(self, sample: int = 2000, seed: int = 0) -> dict[str, dict[str, Any]]:
        """Per-channel mean and std in [0, 1] of each camera over ``sample`` frames (fixed seed):
        ``{camera: {"mean": float32 [3, 1, 1], "std": ..., "min": ..., "max": ...}}`` (CPU tensors)."""
        import torch

        g = torch.Generator().manual_seed(seed)
        idx = torch.randperm(self.num_frames, generator=g)[: min(sample, self.num_frames)]
        out = {}
        for cam, imgs in self.images.items():
            x = imgs[idx.to(imgs.device)].to(torch.float64).div_(255.0)  # [n, H, W, 3]
            flat = x.reshape(-1, 3)
            out[cam] = {
                "mean": flat.mean(0).reshape(3, 1, 1).float().cpu(),
                "std": flat.std(0).clamp_min(1e-3).reshape(3, 1, 1).float().cpu(),
                "min": flat.min(0).values.reshape(3, 1, 1).float().cpu(),
                "max": flat.max(0).values.reshape(3, 1, 1).float().cpu(),
            }
        return out


def _decode_video(path: Path) -> np.ndarray:
    """Every frame of a video file, in order: uint8 [n, H, W, 3] (PyAV)."""
    import av

    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    if not frames:
        raise DatasetError(f"{path} holds no video frames")
    return np.stack(frames)


def load_dataset(root: str | Path, device: str = "cpu", task_table: list[str] | None = None,
                 with_hash: bool = True) -> FrameData:
    """Read an rpent-flywheel LeRobot dataset into memory (see the module docstring).

    Args:
        root: the dataset directory (holding ``meta/info.json``), e.g. ``datasets/obj/train``.
        device: torch device for the tensors.
        task_table: map the dataset's tasks onto this table (a validation split read against the
            training tasks); None: the dataset's own task table.
        with_hash: compute ``info["sha256"]`` over the dataset's files.

    Raises:
        DatasetError: not a LeRobot dataset, features other than an rpent-flywheel export's, a video
            shorter than its episodes, or a task missing from ``task_table``.
    """
    import torch

    from rpent.flywheel.lerobot_compat import import_lerobot_dataset
    from rpent.models.lerobot.layout import tree_sha256

    root = Path(root).expanduser().resolve()
    if not (root / "meta" / "info.json").is_file():
        raise DatasetError(f"{root} is not a LeRobot dataset (no meta/info.json); pass the train/ directory that "
                           "rpent-flywheel export wrote")
    LeRobotDataset = import_lerobot_dataset()
    ds = LeRobotDataset(f"rpent/{root.parent.name or 'dataset'}", root=root)
    feats = ds.meta.features
    missing = [k for k in (*CAMERAS, "state", "actions") if k not in feats]
    if missing:
        raise DatasetError(f"{root}: dataset lacks feature(s) {missing}; it must come from rpent-flywheel export")
    table = ds.hf_dataset.with_format("numpy")
    state = np.asarray(table["state"], dtype=np.float32)
    action = np.asarray(table["actions"], dtype=np.float32)
    episode = np.asarray(table["episode_index"], dtype=np.int64)
    local_task = np.asarray(table["task_index"], dtype=np.int64)
    n = state.shape[0]
    own_tasks = [str(t) for t in sorted(ds.meta.tasks.index, key=lambda t: int(ds.meta.tasks.loc[t, "task_index"]))]
    tasks = list(task_table) if task_table is not None else own_tasks
    remap = []
    for t in own_tasks:
        if t not in tasks:
            raise DatasetError(f"{root}: task {t!r} is not among the training tasks; a validation split must share "
                               "the training set's tasks")
        remap.append(tasks.index(t))
    task_index = np.asarray(remap, dtype=np.int64)[local_task]

    # episode boundaries (episodes are stored contiguously, in index order)
    eps = ds.meta.episodes
    episode_end = np.empty(n, dtype=np.int64)
    images = {cam: None for cam in CAMERAS}
    if ds.meta.video_keys:  # decode every video file once, files in parallel (PyAV releases the GIL)
        from concurrent.futures import ThreadPoolExecutor

        files = sorted({root / ds.meta.get_video_file_path(int(eps[e]["episode_index"]), cam)
                        for e in range(len(eps)) for cam in CAMERAS})
        with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
            decoded = dict(zip(files, pool.map(_decode_video, files)))
    for e in range(len(eps)):
        row = eps[e]
        lo, hi = int(row["dataset_from_index"]), int(row["dataset_to_index"])
        episode_end[lo:hi] = hi
        if ds.meta.video_keys:
            for cam in CAMERAS:
                path = root / ds.meta.get_video_file_path(int(row["episode_index"]), cam)
                frames = decoded[path]
                start = int(round(float(row[f"videos/{cam}/from_timestamp"]) * ds.fps))
                if start + (hi - lo) > frames.shape[0]:
                    raise DatasetError(f"{path}: episode {row['episode_index']} needs frames {start}..{start + hi - lo - 1} "
                                       f"but the video has {frames.shape[0]}")
                if images[cam] is None:
                    images[cam] = np.empty((n, *frames.shape[1:]), dtype=np.uint8)
                images[cam][lo:hi] = frames[start:start + hi - lo]
    if not ds.meta.video_keys:
        for cam in CAMERAS:
            col = ds.hf_dataset[cam]
            images[cam] = np.stack([np.asarray(im.convert("RGB"), dtype=np.uint8) for im in col])
    if np.any(episode_end <= np.arange(n)):
        raise DatasetError(f"{root}: episode index does not cover every frame")
    shape = tuple(images["image"].shape[1:])
    if tuple(images["wrist_image"].shape[1:]) != shape:
        raise DatasetError(f"{root}: the cameras differ in size ({shape} vs {images['wrist_image'].shape[1:]})")
    stats = {k: {s: np.asarray(v).tolist() for s, v in ds.meta.stats[k].items()} for k in ("state", "actions")}
    dev = torch.device(device)
    return FrameData(
        images={cam: torch.from_numpy(images[cam]).to(dev) for cam in CAMERAS},
        state=torch.from_numpy(state).to(dev),
        action=torch.from_numpy(action).to(dev),
        task_index=torch.from_numpy(task_index).to(dev),
        episode_end=torch.from_numpy(episode_end).to(dev),
        tasks=tasks,
        stats=stats,
        info={"root": str(root), "repo_id": ds.repo_id, "episodes": int(len(eps)), "frames": int(n),
              "fps": int(ds.fps), "image_shape": list(shape), "robot_type": ds.meta.robot_type,
              "sha256": tree_sha256(root) if with_hash else None},
    )


def sample_batch(data: FrameData, batch_size: int, chunk_size: int, generator: Any, n_tasks: int,
                 shift_px: int = 0) -> dict[str, Any]:
    """One training batch, in lerobot's keys, on the data's device.

    Args:
        batch_size: B; frames are drawn uniformly with replacement (``generator``: a torch.Generator
            on the data's device).
        chunk_size: actions per sample (the policy's chunk).
        n_tasks: length of the one-hot task vector.
        shift_px: random-shift augmentation: each image is padded by ``shift_px`` pixels (edge
            replicated) and cropped back at a random offset (0: none).

    Returns:
        ``{observation.images.image, observation.images.wrist_image: float32 [B, 3, H, W] in [0, 1],
        observation.state: [B, 8], observation.environment_state: [B, n_tasks] one-hot,
        action: [B, chunk, 7], action_is_pad: bool [B, chunk]}`` (un-normalised).
    """
    import torch

    from rpent.models.lerobot.layout import ACTION_KEY, MAIN_KEY, STATE_KEY, TASK_KEY, WRIST_KEY

    dev = data.state.device
    idx = torch.randint(0, data.num_frames, (batch_size,), device=dev, generator=generator)
    steps = idx[:, None] + torch.arange(chunk_size, device=dev)[None, :]
    end = data.episode_end[idx][:, None]
    pad = steps >= end
    steps = torch.minimum(steps, end - 1)
    batch = {
        STATE_KEY: data.state[idx],
        TASK_KEY: torch.nn.functional.one_hot(data.task_index[idx], n_tasks).to(torch.float32),
        ACTION_KEY: data.action[steps],
        "action_is_pad": pad,
    }
    for cam, key in (("image", MAIN_KEY), ("wrist_image", WRIST_KEY)):
        x = data.images[cam][idx].permute(0, 3, 1, 2).to(torch.float32).div_(255.0)
        if shift_px > 0:
            x = _random_shift(x, shift_px, generator)
        batch[key] = x
    return batch


def _random_shift(x: Any, pad: int, generator: Any) -> Any:
    """Pad [B, C, H, W] by ``pad`` (replicate) and crop each image back at a random offset."""
    import torch

    b, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode="replicate")
    ox = torch.randint(0, 2 * pad + 1, (b,), device=x.device, generator=generator)
    oy = torch.randint(0, 2 * pad + 1, (b,), device=x.device, generator=generator)
    rows = (oy[:, None] + torch.arange(h, device=x.device)[None, :])  # [B, H]
    cols = (ox[:, None] + torch.arange(w, device=x.device)[None, :])  # [B, W]
    bi = torch.arange(b, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]]  # [B, H, W, C]
    return out.permute(0, 3, 1, 2).contiguous()
