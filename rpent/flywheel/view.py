"""``rpent-flywheel view DATASET [--episode K]``: one episode of an exported dataset as a Rerun recording.

The dataset is read with lerobot's own ``LeRobotDataset`` (offline, PNG or video features); the
recording is written with rerun-sdk (0.22) to an ``.rrd`` file, as lerobot's
``lerobot-dataset-viz`` does for its datasets: per frame, on the timelines ``frame_index``
(sequence) and ``timestamp`` (seconds), the two cameras as encoded images (rerun
``EncodedImage``: JPEG at quality :data:`JPEG_QUALITY` by default, ``image_format="png"`` for
lossless PNG; rerun's viewer decodes them) under ``/image`` and ``/wrist_image`` and every state and action dimension as a scalar under ``/state/<i>`` and
``/actions/<i>`` (eef pos m, axis-angle rad, gripper qpos m; OSC_POSE delta action), plus the
frame's task string under ``/task``. Open the file with ``rerun FILE.rrd``; it is checked by
reading it back with :func:`read_rrd_summary` (rerun's own dataframe reader).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

APPLICATION_ID = "rpent_flywheel_view"

IMAGE_FORMATS = ("jpeg", "png")
"""How camera frames are stored in the recording: JPEG (lossy, ~10x smaller than raw RGB) or PNG (lossless)."""

JPEG_QUALITY = 90
"""JPEG quality of the camera frames (rerun's ``Image.compress``, PIL's encoder)."""


class ViewError(Exception):
    """The dataset or episode cannot be viewed (the message names the fix)."""


def _dataset_root(path: Path) -> Path:
    if (path / "meta" / "info.json").is_file():
        return path
    if (path / "train" / "meta" / "info.json").is_file():
        return path / "train"
    raise ViewError(f"{path} is not an exported LeRobot dataset (no meta/info.json, nor train/meta/info.json); "
                    "pass the export's output directory or its train/ or val/ directory")


def _to_hwc_u8(t) -> np.ndarray:
    return (t.permute(1, 2, 0).numpy() * 255.0).round().clip(0, 255).astype(np.uint8)


def _encoded(rr, rgb: np.ndarray, image_format: str):
    """One camera frame (H, W, 3) uint8 RGB as a rerun ``EncodedImage`` (JPEG or PNG bytes)."""
    if image_format == "jpeg":
        return rr.Image(rgb, color_model="RGB").compress(jpeg_quality=JPEG_QUALITY)
    from rpent.recording.png import encode_png

    return rr.EncodedImage(contents=encode_png(rgb), media_type="image/png")


def write_episode_rrd(dataset: str | Path, episode: int = 0, output: str | Path | None = None,
                      image_format: str = "jpeg") -> dict:
    """Write episode ``episode`` of ``dataset`` as a Rerun recording.

    Args:
        dataset: an exported dataset (holding ``meta/info.json``) or the export's output dir.
        episode: episode index within that dataset (>= 0).
        output: ``.rrd`` path (default ``<dataset>/../view_<dataset name>_episode_<K>.rrd``); must not exist.
        image_format: ``"jpeg"`` (default, quality :data:`JPEG_QUALITY`) or ``"png"`` (lossless).

    Returns:
        ``{"path": str, "frames": n, "episode": K, "task": str}``.

    Raises:
        ViewError: not a dataset, episode out of range, ``output`` exists, or an unknown ``image_format``.
    """
    import os

    if image_format not in IMAGE_FORMATS:
        raise ViewError(f"--image-format must be one of {', '.join(IMAGE_FORMATS)}, got {image_format!r}")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    root = _dataset_root(Path(dataset).absolute())
    out = Path(output) if output else root.parent / f"view_{root.name}_episode_{episode}.rrd"
    if out.exists():
        raise ViewError(f"--output {out} already exists; pass a new file name")
    LeRobotDataset = import_lerobot_dataset()
    meta_ds = LeRobotDataset(f"rpent/{root.name}", root=root)
    n_eps = meta_ds.meta.total_episodes
    if not 0 <= episode < n_eps:
        raise ViewError(f"--episode {episode} is out of range: {root} has {n_eps} episode(s) (0..{n_eps - 1})")
    ds = LeRobotDataset(f"rpent/{root.name}", root=root, episodes=[episode])

    import rerun as rr

    rec = rr.new_recording(application_id=APPLICATION_ID, recording_id=f"{root.name}-episode-{episode}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    rec.save(str(tmp))
    cams = [k for k in ("image", "wrist_image") if k in ds.features]
    frames, task = 0, ""
    try:
        for i in range(len(ds)):
            x = ds[i]
            rec.set_time_sequence("frame_index", int(x["frame_index"]))
            rec.set_time_seconds("timestamp", float(x["timestamp"]))
            for cam in cams:
                rec.log(cam, _encoded(rr, _to_hwc_u8(x[cam]), image_format))
            for key in ("state", "actions"):
                for d, v in enumerate(x[key].numpy().tolist()):
                    rec.log(f"{key}/{d}", rr.Scalar(v))
            if x["task"] != task:
                task = x["task"]
                rec.log("task", rr.TextLog(task))
            frames += 1
        rec.flush(blocking=True)
        rec.disconnect()
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {"path": str(out), "frames": frames, "episode": episode, "task": task, "bytes": out.stat().st_size}


def read_rrd_summary(path: str | Path) -> dict:
    """Read an ``.rrd`` back with rerun's dataframe reader and summarise it.

    Returns:
        ``{"application_id", "entities": sorted entity paths, "frames": rows on the frame_index
        timeline, "image_shape": (H, W, C) of the first ``/image`` (None when absent),
        "image_media_type": its media type (``image/jpeg``, ``image/png``; None for a raw image),
        "columns"}``.

    Raises:
        ValueError: the file does not hold exactly one recording (rerun's error).
    """
    import rerun.dataframe as rdf

    recording = rdf.load_recording(str(path))
    schema = recording.schema()
    entities = sorted({c.entity_path for c in schema.component_columns()})
    table = recording.view(index="frame_index", contents="/**").select().read_all()
    shape, media = None, None
    for name in table.column_names:
        if name.startswith("/image:") and "ImageFormat" in name:  # raw image
            fmt = table.column(name)[0].as_py()
            if fmt:
                f = fmt[0] if isinstance(fmt, list) else fmt
                shape = (f.get("height"), f.get("width"), 3) if isinstance(f, dict) else None
        if name.startswith("/image:") and name.endswith("MediaType"):
            m = table.column(name)[0].as_py()
            media = m[0] if isinstance(m, list) else m
    if media is not None:  # encoded image: decode the first blob to learn its shape
        import io

        from PIL import Image

        blob_col = next(n for n in table.column_names if n.startswith("/image:") and n.endswith("Blob"))
        blob = table.column(blob_col)[0].as_py()
        data = bytes(blob[0] if blob and isinstance(blob[0], (list, bytes)) else blob)
        with Image.open(io.BytesIO(data)) as im:
            shape = (im.height, im.width, len(im.getbands()))
    return {
        "application_id": recording.application_id(),
        "entities": entities,
        "frames": table.num_rows,
        "image_shape": shape,
        "image_media_type": media,
        "columns": table.column_names,
    }
