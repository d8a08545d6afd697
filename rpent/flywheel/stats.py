"""Per-episode statistics of the camera features on a deterministic pixel sample (lerobot's algorithm).

lerobot 0.4.4 computes each episode's image statistics in ``compute_episode_stats``: it loads the
frames chosen by ``compute_stats.sample_indices`` (every frame of an episode shorter than 100,
then ~len**0.75), and runs ``RunningQuantileStats`` (mean, std, min, max and 1/10/50/90/99 %
quantiles from 5000-bin histograms) over every pixel of them. For 256x256 frames that is half of
an export's time (benchmarks/flywheel_bench.py); lerobot itself strides images larger than 300 px
(``auto_downsample_height_width``) for the same reason.

:func:`episode_stats` is that function with one change: the camera frames are strided by
:data:`PIXEL_STRIDE` in height and width before the statistics (every 4th row and column: 64x64
of a 256x256 frame, 1/16 of the pixels, the same rows and columns in every frame, so the result
is deterministic). Frame sampling, the statistics (``get_feature_stats``), their shapes, the
``/255`` normalisation to (3, 1, 1) per channel, ``count`` (= sampled frames) and the non-image
features are lerobot's own, and lerobot aggregates the episodes (``aggregate_stats``) as
always. Measured difference to the every-pixel figures: see
``tests/flywheel/test_flywheel_stats.py`` (mean/std/quantiles within 0.01 of the [0, 1] range
on LIBERO-like frames; min/max can only be inside the every-pixel range).

The frames go into the statistics as float64: lerobot 0.4.4 hands them over as uint8, and its
running statistics square the batch (``batch**2``), which wraps around in uint8, so every camera's
``std`` came out as 0 (a normaliser dividing by it blows the images up). ``--image-stats full``
therefore also runs :func:`image_episode_stats`, with stride 1 (every pixel).

:func:`sampled_image_stats` swaps it in for the duration of one ``save_episode`` call.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

import numpy as np
from PIL import Image

PIXEL_STRIDE = 4
"""Row and column stride of the pixel sample (256x256 -> 64x64)."""

_PATCH_LOCK = threading.Lock()
_PATCH_LOCK_VIDEO = threading.Lock()  # the video encoder patch of rpent.flywheel.dataset


def image_episode_stats(paths: list[str], stride: int = PIXEL_STRIDE) -> dict[str, np.ndarray]:
    """Statistics of one camera over one episode, in lerobot's per-episode format.

    Args:
        paths: the episode's frame files (PNG), in frame order.
        stride: pixel stride in height and width (1 = every pixel, lerobot's figures for
            images under 300 px).

    Returns:
        ``{"min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99"}``: float64 (3, 1, 1),
        per RGB channel, in [0, 1]; ``"count"``: int (1,), the number of sampled frames.

    Raises:
        OSError: a frame cannot be read or decoded.
        ValueError: ``paths`` is empty.
    """
    from lerobot.datasets.compute_stats import get_feature_stats, sample_indices

    if not paths:
        raise ValueError("image_episode_stats: no frames")
    idx = sample_indices(len(paths))
    frames = None
    for i, k in enumerate(idx):
        with Image.open(paths[k]) as im:
            a = np.asarray(im.convert("RGB"), dtype=np.uint8)[::stride, ::stride].transpose(2, 0, 1)
        if frames is None:
            frames = np.empty((len(idx), *a.shape), dtype=np.uint8)
        frames[i] = a
    # float64, not uint8: lerobot's running statistics square the batch, which wraps around in uint8
    # (std then comes out as 0)
    st = get_feature_stats(frames.astype(np.float64), axis=(0, 2, 3), keepdims=True)
    return {k: v if k == "count" else np.squeeze(v / 255.0, axis=0) for k, v in st.items()}


def episode_stats(episode_data: dict, features: dict, quantile_list: list[float] | None = None,
                  stride: int = PIXEL_STRIDE) -> dict:
    """lerobot's ``compute_episode_stats`` with the camera features from :func:`image_episode_stats`.

    Args:
        episode_data: lerobot's episode buffer (file paths for image/video features, arrays else).
        features: the dataset's features.
        quantile_list: passed to lerobot for the non-image features; the camera features use
            lerobot's default quantiles (1, 10, 50, 90, 99 %).
        stride: pixel stride of the camera statistics (1: every pixel).

    Returns:
        ``{feature: stats}`` as lerobot's ``compute_episode_stats`` returns it.
    """
    from lerobot.datasets.compute_stats import compute_episode_stats

    cams = {k for k in episode_data if features.get(k, {}).get("dtype") in ("image", "video")}
    out = compute_episode_stats({k: v for k, v in episode_data.items() if k not in cams}, features, quantile_list)
    for k in cams:
        out[k] = image_episode_stats(list(episode_data[k]), stride=stride)
    return out


@contextlib.contextmanager
def sampled_image_stats(stride: int = PIXEL_STRIDE) -> Iterator[None]:
    """Make ``LeRobotDataset.save_episode`` use :func:`episode_stats` (with ``stride``) while the block runs.

    lerobot's writer calls the ``compute_episode_stats`` name of its ``lerobot_dataset`` module;
    that name is rebound for the block (under a lock, so two exports in one process take turns)
    and restored after it, also on errors.
    """
    import lerobot.datasets.lerobot_dataset as lds

    with _PATCH_LOCK:
        original = lds.compute_episode_stats
        lds.compute_episode_stats = functools.partial(episode_stats, stride=stride)
        try:
            yield
        finally:
            lds.compute_episode_stats = original
