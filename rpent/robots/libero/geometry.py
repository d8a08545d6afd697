"""Rotations, camera models and back-projection for the LIBERO (MuJoCo/robosuite) world.

Pure numpy; imports no simulator, so the toolkit side can use it on recorded artifacts.

Conventions used throughout (all lengths in meters, angles in radians):

* **World frame**: the MuJoCo world frame of the LIBERO scene (z up; the robot base sits
  at negative x and faces +x).
* **Quaternions** are ``xyzw`` (robosuite's observation convention, ``robot0_eef_quat``);
  MuJoCo's own buffers are ``wxyz`` and are converted where read.
* **Images** returned to callers are in *natural* orientation: row 0 is the top of the
  picture, column 0 its left. ``mujoco.mjr_readPixels`` (and robosuite's ``"opengl"`` image
  convention) return row 0 = bottom; :func:`opengl_to_natural` converts.
* **Pixel coordinates**: pixel ``(row, col)`` covers the continuous image coordinates
  ``u in [col, col+1)``, ``v in [row, row+1)``; its center is ``(col + 0.5, row + 0.5)``.
  The intrinsic matrix ``K`` maps camera-frame points to these continuous ``(u, v)``.
* **Camera frame** of extrinsics: OpenCV convention (x right, y down, z forward along the
  optical axis). MuJoCo cameras use the OpenGL convention (x right, y up, looking along -z);
  :func:`cam2world_opencv` converts.
* **Depth** maps are metric z-depth along the optical axis (not ray length), in meters.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "quat_xyzw_to_matrix",
    "quat_wxyz_to_xyzw",
    "quat_to_axis_angle",
    "yaw_from_matrix",
    "pitch_from_matrix",
    "wrap_angle",
    "intrinsic_matrix",
    "cam2world_opencv",
    "depth_buffer_to_meters",
    "opengl_to_natural",
    "natural_to_policy",
    "policy_to_natural",
    "back_project_depth",
    "world_map",
    "pixel_to_world",
    "project_world_to_pixel",
]


def quat_wxyz_to_xyzw(quat_wxyz: np.ndarray) -> np.ndarray:
    """Reorder a MuJoCo ``wxyz`` quaternion to ``xyzw``.

    Args:
        quat_wxyz: shape (4,) (or (..., 4)), any float dtype.
    Returns:
        float64 array of the same shape, ``xyzw`` order.
    """
    q = np.asarray(quat_wxyz, dtype=np.float64)
    return np.concatenate([q[..., 1:4], q[..., :1]], axis=-1)


def quat_xyzw_to_matrix(quat_xyzw: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion.

    Args:
        quat_xyzw: shape (4,), ``xyzw`` order; normalised here (a zero quaternion raises).
    Returns:
        float64 (3, 3) rotation matrix ``R`` with ``v_world = R @ v_body``.
    Raises:
        ValueError: if the quaternion has the wrong shape or zero norm.
    """
    q = np.asarray(quat_xyzw, dtype=np.float64).reshape(-1)
    if q.shape != (4,):
        raise ValueError(f"quaternion must have 4 elements (xyzw), got shape {np.shape(quat_xyzw)}")
    n = float(np.linalg.norm(q))
    if n < 1e-12:
        raise ValueError("quaternion has zero norm; pass a unit quaternion in xyzw order")
    x, y, z, w = q / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_to_axis_angle(quat_xyzw: np.ndarray) -> np.ndarray:
    """Axis-angle vector (axis * angle, rad) of an ``xyzw`` quaternion, VLA-state convention.

    This is the formula of robosuite's ``transform_utils.quat2axisangle``, which openpi's
    LIBERO example (``examples/libero/main.py``, ``_quat2axisangle``) uses to build the 8-D
    policy state that Pi0/Pi0.5 LIBERO checkpoints were trained on: ``w`` is clipped to
    [-1, 1], the angle is ``2 * acos(w)`` in [0, 2*pi] and the quaternion is **not**
    canonicalised (a gripper pointing down has ``w`` near 0 and the angle near pi; the sign
    of ``w`` decides which side of pi). Do not replace it with ``scipy``'s ``as_rotvec``,
    which canonicalises to ``w >= 0`` and flips the vector when ``w < 0``.

    Args:
        quat_xyzw: shape (4,), ``xyzw`` order (``robot0_eef_quat``).
    Returns:
        float64 (3,) axis-angle; zeros for a (near) identity rotation.
    """
    q = np.asarray(quat_xyzw, dtype=np.float64).reshape(4)
    w = min(1.0, max(-1.0, float(q[3])))
    den = math.sqrt(1.0 - w * w)
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return q[:3] * 2.0 * math.acos(w) / den


def yaw_from_matrix(rot: np.ndarray) -> float:
    """Gripper yaw about world z (rad) in the toolkit convention: ``atan2(R[1,0], R[0,0])``.

    Source: RPent reference §3.2 (Euler ``zyx`` yaw flips sign when the gripper points down,
    so the yaw is read from the first column of ``R`` directly).

    Args:
        rot: (3, 3) rotation matrix of the eef body (``robot0_right_hand``) in the world frame.
    Returns:
        yaw in (-pi, pi].
    """
    r = np.asarray(rot, dtype=np.float64)
    return float(math.atan2(r[1, 0], r[0, 0]))


def pitch_from_matrix(rot: np.ndarray) -> float:
    """Gripper pitch about world x (rad): ``atan2(R[1,2], -R[2,2])``.

    0 = gripper z-axis pointing straight down; +pi/2 = gripper z-axis along world +y.
    A world-x rotation of the eef by +d increases this pitch by +d. Source: RPent reference §3.2.

    Args:
        rot: (3, 3) rotation matrix of the eef body in the world frame.
    Returns:
        pitch in (-pi, pi].
    """
    r = np.asarray(rot, dtype=np.float64)
    return float(math.atan2(r[1, 2], -r[2, 2]))


def wrap_angle(angle: float) -> float:
    """Wrap an angle (rad) to [-pi, pi)."""
    return float((angle + math.pi) % (2.0 * math.pi) - math.pi)


def intrinsic_matrix(fovy_deg: float, height: int, width: int) -> np.ndarray:
    """Pinhole intrinsics of a MuJoCo camera rendered at ``height x width`` pixels.

    MuJoCo's ``fovy`` is the full vertical field of view; pixels are square, so
    ``fx = fy = (height / 2) / tan(fovy / 2)``, principal point at the image center
    ``(width / 2, height / 2)`` in continuous coordinates (pixel centers at ``+0.5``).

    Args:
        fovy_deg: vertical field of view (degrees), ``model.cam_fovy``.
        height, width: image size in pixels (> 0).
    Returns:
        float64 (3, 3) ``K`` for natural-orientation images (row 0 = top, v grows downward).
    Raises:
        ValueError: non-positive size or fovy outside (0, 180).
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    if not 0.0 < fovy_deg < 180.0:
        raise ValueError(f"fovy must be in (0, 180) degrees, got {fovy_deg}")
    f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def cam2world_opencv(cam_pos: np.ndarray, cam_xmat: np.ndarray) -> np.ndarray:
    """Camera-to-world transform in the OpenCV camera convention.

    Args:
        cam_pos: (3,) camera position in the world frame (``data.cam_xpos``), m.
        cam_xmat: (9,) or (3, 3) camera orientation (``data.cam_xmat``), MuJoCo/OpenGL axes
            (x right, y up, looking along -z).
    Returns:
        float64 (4, 4) ``T`` with ``p_world = T @ [x, y, z, 1]`` for a point ``(x, y, z)``
        in the OpenCV camera frame (x right, y down, z forward).
    """
    r_gl = np.asarray(cam_xmat, dtype=np.float64).reshape(3, 3)
    t = np.eye(4)
    t[:3, :3] = r_gl @ np.diag([1.0, -1.0, -1.0])
    t[:3, 3] = np.asarray(cam_pos, dtype=np.float64).reshape(3)
    return t


def depth_buffer_to_meters(depth_buffer: np.ndarray, near: float, far: float) -> np.ndarray:
    """Convert MuJoCo's normalised depth buffer (0..1) to metric z-depth (m).

    ``z = near / (1 - d * (1 - near / far))`` (the OpenGL perspective depth inverted; same
    formula as robosuite's ``camera_utils.get_real_depth_map`` and dm_control), where
    ``near = model.vis.map.znear * model.stat.extent`` and ``far = zfar * extent``.

    Args:
        depth_buffer: float array in [0, 1], any shape.
        near, far: clip distances in meters (0 < near < far).
    Returns:
        float32 array of the same shape, meters. Pixels that hit nothing read ``far``.
    """
    d = np.asarray(depth_buffer, dtype=np.float64)
    return (near / (1.0 - d * (1.0 - near / far))).astype(np.float32)


def opengl_to_natural(image: np.ndarray) -> np.ndarray:
    """Flip an OpenGL-convention image (row 0 = bottom) to natural orientation (row 0 = top).

    Works for (H, W), (H, W, C) arrays; returns a contiguous copy.
    """
    return np.ascontiguousarray(np.asarray(image)[::-1])


def natural_to_policy(image: np.ndarray) -> np.ndarray:
    """Turn a natural-orientation image into the orientation LIBERO VLAs expect.

    openpi's LIBERO client (``examples/libero/main.py``: "IMPORTANT: rotate 180 degrees to
    match train preprocessing") feeds ``obs["agentview_image"][::-1, ::-1]``, where robosuite's
    observation is in the OpenGL convention (row 0 = bottom). Relative to the natural picture
    that is a left-right mirror: ``policy = natural[:, ::-1]``. RLinf's LIBERO env applies the
    same ``[::-1, ::-1]`` to the OpenGL frames.

    Args:
        image: (H, W, C) or (H, W), natural orientation.
    Returns:
        contiguous copy in VLA orientation.
    """
    return np.ascontiguousarray(np.asarray(image)[:, ::-1])


def policy_to_natural(image: np.ndarray) -> np.ndarray:
    """Inverse of :func:`natural_to_policy` (a left-right mirror is its own inverse).

    Args:
        image: (H, W, C) or (H, W), VLA orientation.
    Returns:
        contiguous copy in natural orientation (row 0 = top, as ``agentview.png``).
    """
    return np.ascontiguousarray(np.asarray(image)[:, ::-1])


def back_project_depth(depth_m: np.ndarray, intrinsic: np.ndarray, cam2world: np.ndarray) -> np.ndarray:
    """Back-project a natural-orientation metric depth map to world xyz per pixel.

    Uses the pixel centers ``(col + 0.5, row + 0.5)``.

    Args:
        depth_m: (H, W) metric z-depth in meters (natural orientation, row 0 = top).
        intrinsic: (3, 3) ``K`` for that image size (:func:`intrinsic_matrix`).
        cam2world: (4, 4) OpenCV-convention camera-to-world (:func:`cam2world_opencv`).
    Returns:
        float32 (H, W, 3) world coordinates in meters.
    Raises:
        ValueError: if shapes do not match.
    """
    d = np.asarray(depth_m, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"depth map must be (H, W), got shape {d.shape}")
    k = np.asarray(intrinsic, dtype=np.float64)
    t = np.asarray(cam2world, dtype=np.float64)
    if k.shape != (3, 3) or t.shape != (4, 4):
        raise ValueError(f"intrinsic must be 3x3 and cam2world 4x4, got {k.shape} and {t.shape}")
    h, w = d.shape
    u = np.arange(w, dtype=np.float64) + 0.5
    v = np.arange(h, dtype=np.float64) + 0.5
    uu, vv = np.meshgrid(u, v)
    x = (uu - k[0, 2]) / k[0, 0] * d
    y = (vv - k[1, 2]) / k[1, 1] * d
    pts = np.stack([x, y, d], axis=-1)
    world = pts @ t[:3, :3].T + t[:3, 3]
    return world.astype(np.float32)


def world_map(depth_m: np.ndarray, meta: dict) -> np.ndarray:
    """World xyz (m) of every pixel of a natural-orientation depth map, from a camera meta dict.

    Args:
        depth_m: (H, W) metric z-depth (``render_camera(..., depth=True)["depth"]``).
        meta: ``camera_meta(camera, H, W)`` of the same step and size (keys ``intrinsic_K``,
            ``extrinsic_cam2world``, and ``height``/``width`` when present).
    Returns:
        float32 (H, W, 3).
    Raises:
        ValueError: the meta was made for another image size, or shapes are wrong.
    """
    d = np.asarray(depth_m)
    if "height" in meta and "width" in meta and (int(meta["height"]), int(meta["width"])) != tuple(d.shape[:2]):
        raise ValueError(
            f"camera meta is for {meta['height']}x{meta['width']} images but the depth map is "
            f"{d.shape[0]}x{d.shape[1]}; request camera_meta with the depth map's size"
        )
    return back_project_depth(d, meta["intrinsic_K"], meta["extrinsic_cam2world"])


def pixel_to_world(row: float, col: float, depth: float, intrinsic: np.ndarray, cam2world: np.ndarray) -> np.ndarray:
    """World point (m) of one pixel (natural orientation) at metric z-depth ``depth``.

    Args:
        row, col: pixel indices (row 0 = top); the pixel center is used.
        depth: metric z-depth (m) at that pixel.
        intrinsic, cam2world: as in :func:`back_project_depth`.
    Returns:
        float64 (3,) world xyz.
    """
    k = np.asarray(intrinsic, dtype=np.float64)
    t = np.asarray(cam2world, dtype=np.float64)
    x = (col + 0.5 - k[0, 2]) / k[0, 0] * depth
    y = (row + 0.5 - k[1, 2]) / k[1, 1] * depth
    return t[:3, :3] @ np.array([x, y, depth]) + t[:3, 3]


def project_world_to_pixel(xyz: np.ndarray, intrinsic: np.ndarray, cam2world: np.ndarray) -> tuple[float, float, float]:
    """Project a world point into a natural-orientation image.

    Args:
        xyz: (3,) world point (m).
        intrinsic, cam2world: as in :func:`back_project_depth`.
    Returns:
        ``(row, col, depth)``: continuous pixel coordinates (``int(row)``, ``int(col)`` index the
        pixel that contains the point) and metric z-depth (m; negative = behind the camera).
    """
    k = np.asarray(intrinsic, dtype=np.float64)
    t = np.asarray(cam2world, dtype=np.float64)
    p_cam = t[:3, :3].T @ (np.asarray(xyz, dtype=np.float64).reshape(3) - t[:3, 3])
    z = float(p_cam[2])
    u = k[0, 0] * p_cam[0] / z + k[0, 2]
    v = k[1, 1] * p_cam[1] / z + k[1, 2]
    return float(v), float(u), z
