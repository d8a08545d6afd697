"""Step capture: what a LIBERO step record holds, rendered once after every motion tool.

Per step (artifact names, RPent reference §6.1 layout ``<name>/<NN>.<ext>``):

=========================  ================================================================
``agentview.png``          agentview RGB, natural orientation (row 0 = top), 256x256 uint8
``agentview_policy.png``   the same image in VLA orientation (mirrored left-right, openpi's convention); never take
                           back-projection pixels from it (reference §9 pitfall)
``agentview_depth.npz``    ``depth`` float32[H,W], metric z-depth (m), natural orientation
``agentview_world.npz``    ``xyz`` float32[H,W,3], world-frame point of every pixel (m)
``agentview_seg.npz``      ``ids`` int32[H,W], simulator instance segmentation (0 = background)
``agentview_metadata.json``  intrinsic K, extrinsic cam2world (OpenCV), near/far, seg id table
``wrist.png`` / ``wrist_depth.npz`` / ``wrist_world.npz`` / ``wrist_metadata.json``  the same for
                           the eye-in-hand camera (its extrinsic changes every step)
=========================  ================================================================

Orientation of every artifact: natural (as a person sees the scene, text in the scene reads
correctly) except ``agentview_policy.png``; the run's ``episode.mp4`` is natural too (frames
in VLA orientation are mirrored back before encoding). ``trajectories/`` observations
(``actions.jsonl`` / the flywheel export) keep the VLA orientation: they are model inputs.

High-resolution views (``agentview_high.png``, ``agentview_world_high.npz``, 1024 px) are
rendered only when a tool asks for them, and only for the latest step (the simulator can
render only the present): "render only what a tool needs".
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from rpent.robots.libero import geometry
from rpent.run.record import dumps_json, encode_png

__all__ = ["CAPTURE_SIZE", "HIGH_SIZE", "CAMERAS", "camera_artifacts", "load_npz", "npz_bytes"]

#: Edge (px) of the per-step renders: LIBERO's policy camera size (openpi LIBERO_ENV_RESOLUTION).
CAPTURE_SIZE = 256
#: Edge (px) of on-demand high-resolution renders (upstream RPent's ``_high`` artifacts).
HIGH_SIZE = 1024
#: Cameras captured at every step.
CAMERAS = ("agentview", "wrist")


#: zlib level of the step artifacts' ``.npz`` files. Level 1 instead of numpy's default (6): a
#: 256 px float32 world map compresses in half the time for 2 % more bytes (measured on recorded
#: LIBERO steps, ``benchmarks/capture_encode_bench.py``); the maps of both cameras are written
#: after every motion tool call.
NPZ_LEVEL = 1


def npz_bytes(**arrays: np.ndarray) -> bytes:
    """The arrays as an ``.npz`` archive in bytes (deflate level :data:`NPZ_LEVEL`, no pickles;
    ``np.load`` reads it like ``np.savez_compressed`` output)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=NPZ_LEVEL) as zf:
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(value), allow_pickle=False)
    return buf.getvalue()


def load_npz(path, key: str) -> np.ndarray:
    """Load one array from an ``.npz`` artifact (never with pickle)."""
    with np.load(path, allow_pickle=False) as z:
        return z[key]


def camera_artifacts(camera: str, render: dict, suffix: str = "") -> dict[str, bytes]:
    """Encode one camera's render into step artifacts.

    Args:
        camera: ``agentview`` or ``wrist``.
        render: ``{"rgb", "depth"?, "segmentation"?, "segmentation_ids"?, "meta"}`` from
            ``env.capture`` / ``env.render_camera`` + ``env.camera_meta``.
        suffix: ``""`` or ``"_high"`` (artifact name suffix).
    Returns:
        artifact name -> bytes.
    """
    rgb = np.asarray(render["rgb"], dtype=np.uint8)
    meta = dict(render["meta"])
    out = {f"{camera}{suffix}.png": encode_png(rgb)}
    if camera == "agentview" and not suffix:
        out["agentview_policy.png"] = encode_png(geometry.natural_to_policy(rgb))
    if "depth" in render:
        depth = np.asarray(render["depth"], dtype=np.float32)
        world = geometry.world_map(depth, meta)
        if not suffix:
            out[f"{camera}_depth.npz"] = npz_bytes(depth=depth)
        dtype = np.float16 if suffix else np.float32  # 1024 px maps as float16 (reference §6.1)
        out[f"{camera}_world{suffix}.npz"] = npz_bytes(xyz=world.astype(dtype))
    if "segmentation" in render:
        out[f"{camera}_seg{suffix}.npz"] = npz_bytes(ids=np.asarray(render["segmentation"], dtype=np.int32))
        meta["segmentation_ids"] = {str(k): v for k, v in render.get("segmentation_ids", {}).items()}
    if not suffix:
        out[f"{camera}_metadata.json"] = dumps_json(meta).encode("utf-8")
    else:
        out[f"{camera}_metadata{suffix}.json"] = dumps_json(meta).encode("utf-8")
    return out


def read_json(path) -> dict:
    """Read a JSON artifact."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
