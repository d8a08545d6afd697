"""Writing selected frames as a LeRobot v3.0 dataset with lerobot's own ``LeRobotDataset`` writer.

Feature names and shapes follow the LIBERO LeRobot layout that RLinf's Pi0.5 SFT loader reads
(``image``, ``wrist_image``, ``state``, ``actions``; upstream RPent's Flywheel v1 export used
the same four, rpent_reference §5.1): images uint8 256x256x3 (or the runs' ``--policy-image-size``), state float32 [8], actions
float32 [7]; fps 20 (LIBERO control rate), robot type ``panda``.

Camera streams are stored either as PNG inside the parquet files (``dtype: image``, the
default, what upstream RPent wrote) or, with ``video=True``, as lerobot video features
(``dtype: video``): lerobot encodes each episode on the CPU from its staged frame files after
the episode (codec ``libsvtav1`` = AV1 by default, at lerobot's fastest preset 12, or ``h264``;
both are encoders inside the PyAV wheel). Either way the recorded PNG files are staged as they
are (copied, never decoded and re-encoded, see :func:`_copying_dataset_class`). Reading video
datasets back needs torchcodec plus FFmpeg's shared libraries (lerobot 0.4.4 decodes with
torchcodec; its PyAV fallback needs a torchvision VideoReader that torchvision 0.28 no longer
has). Statistics per feature (``meta/stats.json``: min, max, mean, std, count, quantiles) are
lerobot's, computed per episode and aggregated by lerobot; with ``image_stats="sampled"`` (the
default) the camera statistics are computed on every 4th pixel row and column
(:mod:`rpent.flywheel.stats`), with ``"full"`` on every pixel as lerobot does.
"""

from __future__ import annotations

import contextlib
import functools

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from rpent.flywheel import stats as _stats
from rpent.flywheel.lerobot_compat import import_lerobot_dataset
from rpent.flywheel.selection import IMAGE_SHAPE, Frame
from rpent.recording import layout

FPS = 20
"""LIBERO control frequency in env steps per second (robosuite control_freq 20)."""

IMAGE_STATS = ("sampled", "full")
"""Camera statistics modes: every 4th pixel row/column (:mod:`rpent.flywheel.stats`) or every pixel."""

VIDEO_CODECS = ("libsvtav1", "h264")
"""Video codecs offered for ``video=True`` (CPU encoders of the PyAV wheel that lerobot 0.4.4
accepts; ``libsvtav1`` is lerobot's default, ``h264`` encodes with libx264)."""

CAMERA_KEYS = ("image", "wrist_image")
"""Dataset keys of the two cameras (``main`` -> ``image``, ``wrist`` -> ``wrist_image``)."""


def features(video: bool = False, robot: str | None = None, image_shape: tuple[int, int, int] = IMAGE_SHAPE) -> dict:
    """The LeRobot features of the exported dataset.

    Args:
        video: cameras as ``video`` features (encoded streams) instead of ``image`` (PNG in parquet).
        robot: rpent robot package; sets the state/action lengths
            (:func:`rpent.recording.layout.robot_spaces`: LIBERO 8/7, Meta-World 4/4).
        image_shape: (H, W, 3) of both cameras (default 256x256, or the runs' ``--policy-image-size``).

    Returns:
        ``{"image", "wrist_image", "state", "actions"}`` feature dicts (dtype, shape, names).
    """
    cam = "video" if video else "image"
    state_dim, action_dim = layout.robot_spaces(robot)
    return {
        "image": {"dtype": cam, "shape": tuple(image_shape), "names": ["height", "width", "channel"]},
        "wrist_image": {"dtype": cam, "shape": tuple(image_shape), "names": ["height", "width", "channel"]},
        "state": {"dtype": "float32", "shape": (state_dim,), "names": ["state"]},
        "actions": {"dtype": "float32", "shape": (action_dim,), "names": ["actions"]},
    }


FEATURES = features(video=False)
"""LeRobot features of the PNG variant (see :func:`features`)."""


def _open_png(path: Path) -> Image.Image:
    """Open a recorded PNG lazily (header only; pixels are not decoded)."""
    im = Image.open(path)
    if im.format != "PNG":
        im.close()
        raise ValueError(f"{path} is {im.format}, not PNG")
    return im


_COPYING_CLASS = None


def _copying_dataset_class():
    """lerobot's ``LeRobotDataset`` that stages the recorded PNG files as they are.

    lerobot's ``add_frame`` re-encodes every image as PNG (zlib level 6 for image features, ~0.1 s
    per 256x256 frame on this machine, half of the export's time before, benchmarks/
    flywheel_bench.py) into its staging directory, from which it embeds them into parquet (image
    features) or encodes the episode's video (video features). The recorder already wrote
    lossless PNG files and the export has decoded each of them once to check it
    (``selection.image_problem``), so ``_save_image`` copies the file byte for byte when it is
    handed a PNG opened from disk; any other image goes through lerobot's own writer. The pixels
    are identical either way (PNG is lossless); files are larger than level 6 (the recorder uses
    level 1). ``save_episode`` takes the camera statistics from :mod:`rpent.flywheel.stats` (every
    4th pixel row and column when the instance's ``rpent_image_stats`` is ``"sampled"``, every pixel
    for ``"full"``; float64, see that module) and encodes the cameras one after the
    other (lerobot's default forks one process per camera and episode). Everything else (stats
    of the other features, aggregation, parquet embedding, video encoding, metadata) is
    lerobot's.
    """
    global _COPYING_CLASS
    if _COPYING_CLASS is None:
        LeRobotDataset = import_lerobot_dataset()

        class CopyingLeRobotDataset(LeRobotDataset):
            rpent_image_stats = "sampled"
            rpent_keyframe_interval = 2

            def _save_image(self, image, fpath, compress_level: int = 1) -> None:  # noqa: D102
                src = getattr(image, "filename", None)
                if isinstance(image, Image.Image) and image.format == "PNG" and src:
                    shutil.copyfile(src, fpath)
                    return
                super()._save_image(image, fpath, compress_level)

            def save_episode(self, episode_data: dict | None = None, parallel_encoding: bool = False) -> None:  # noqa: D102
                stride = _stats.PIXEL_STRIDE if self.rpent_image_stats == "sampled" else 1
                with _stats.sampled_image_stats(stride), _keyframe_interval(self.rpent_keyframe_interval):
                    super().save_episode(episode_data, parallel_encoding=parallel_encoding)

        _COPYING_CLASS = CopyingLeRobotDataset
    return _COPYING_CLASS


@contextlib.contextmanager
def _keyframe_interval(g: int):
    """Make lerobot's per-episode video encoding use key frames every ``g`` frames while the block runs.

    lerobot 0.4.4 encodes each episode through its module-level ``encode_video_frames`` with its
    default ``g=2``; that name is rebound (under the stats patch's lock, so exports take turns) to the
    same function with ``g`` set. ``g=2`` leaves lerobot's call as it is.
    """
    if g == 2:
        yield
        return
    import lerobot.datasets.lerobot_dataset as lds

    with _stats._PATCH_LOCK_VIDEO:
        original = lds.encode_video_frames
        lds.encode_video_frames = functools.partial(original, g=g)
        try:
            yield
        finally:
            lds.encode_video_frames = original


class FrameLoadError(RuntimeError):
    """An observation image that passed the header check could not be decoded while writing."""


def _remove_empty_dirs(top: Path) -> None:
    if not top.is_dir():
        return
    for dirpath in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(dirpath.iterdir()):
            dirpath.rmdir()
    if not any(top.iterdir()):
        top.rmdir()


def write_lerobot_dataset(
    root: Path,
    episodes: list[tuple[Path, list[Frame]]],
    *,
    repo_id: str,
    robot_type: str,
    image_writer_threads: int = 0,
    video: bool = False,
    vcodec: str = "libsvtav1",
    keyframe_interval: int = 2,
    image_stats: str = "sampled",
    on_frame: Callable[[], None] | None = None,
    robot: str | None = None,
    image_shape: tuple[int, int, int] = IMAGE_SHAPE,
) -> dict:
    """Write ``episodes`` into a new LeRobot dataset at ``root`` (which must not exist).

    Args:
        root: dataset directory to create (it will hold ``meta/info.json``).
        episodes: ``(record_dir, frames)`` per episode, in output order.
        repo_id: the dataset's repo id (local name only; nothing is uploaded).
        robot_type: LeRobot robot type (``"panda"``).
        image_writer_threads: lerobot's image writer threads (0 = encode and save each image
            in the calling thread; PNG variant only, video frames go to the streaming encoder).
        video: store the cameras as video features (see module docstring).
        vcodec: one of :data:`VIDEO_CODECS` (with ``video``).
        keyframe_interval: frames between key frames of the videos (lerobot's ``g``, default 2).
        image_stats: one of :data:`IMAGE_STATS` (module docstring).
        on_frame: called after each frame is added (progress).
        robot: rpent robot package: state/action lengths and fps (``layout.robot_spaces`` /
            ``layout.robot_fps``; None = LIBERO's 8/7 at 20 fps).
        image_shape: (H, W, 3) of every frame's images (:func:`features`).

    Returns:
        ``{"episodes": n, "frames": n, "tasks": [str]}``.

    Raises:
        FileExistsError: ``root`` exists.
        ValueError: unknown ``vcodec`` or ``image_stats``.
        FrameLoadError: an image could not be decoded.
        LeRobotUnavailableError: lerobot is not importable.
    """
    if vcodec not in VIDEO_CODECS:
        raise ValueError(f"unknown video codec {vcodec!r}; use one of {VIDEO_CODECS}")
    if image_stats not in IMAGE_STATS:
        raise ValueError(f"unknown image statistics mode {image_stats!r}; use one of {IMAGE_STATS}")
    if video:
        # SVT-AV1 prints its configuration banner per encoded episode at its default level (3 = info);
        # 2 keeps its warnings and errors (SVT-AV1's SVT_LOG variable, read when an encoder starts)
        os.environ.setdefault("SVT_LOG", "2")
    ds = _copying_dataset_class().create(
        repo_id=repo_id,
        fps=layout.robot_fps(robot),
        features=features(video, robot, image_shape),
        root=root,
        robot_type=robot_type,
        use_videos=video,
        image_writer_threads=0 if video else image_writer_threads,
        vcodec=vcodec,
    )
    ds.rpent_image_stats = image_stats
    ds.rpent_keyframe_interval = int(keyframe_interval)
    frames = 0
    tasks: list[str] = []
    try:
        for record_dir, frames_of_episode in episodes:
            for fr in frames_of_episode:
                paths = (layout.resolve_artifact(record_dir, fr.main), layout.resolve_artifact(record_dir, fr.wrist))
                try:
                    # the recorded file itself, staged by _save_image (parquet embedding or video encoding)
                    main, wrist = (_open_png(p) for p in paths)
                except (OSError, ValueError) as e:
                    raise FrameLoadError(f"{record_dir}: action seq {fr.seq}: cannot load observation: {e}") from e
                try:
                    ds.add_frame(
                        {"image": main, "wrist_image": wrist, "state": fr.state, "actions": fr.action, "task": fr.task}
                    )
                finally:
                    for im in (main, wrist):
                        if isinstance(im, Image.Image):
                            im.close()
                if fr.task not in tasks:
                    tasks.append(fr.task)
                frames += 1
                if on_frame is not None:
                    on_frame()
            ds.save_episode()
    finally:
        if ds.image_writer is not None:
            ds.stop_image_writer()
        ds.finalize()
    _remove_empty_dirs(root / "images")  # lerobot's per-frame image staging dirs, empty after embedding
    return {"episodes": len(episodes), "frames": frames, "tasks": tasks}
