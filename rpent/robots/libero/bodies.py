"""The scene's objects and fixtures as MuJoCo bodies: instance ids, bounding boxes, articulated parts.

Pure functions of a compiled LIBERO model and its data (robosuite's ``MjModel``/``MjData``
wrappers, ``env.sim.model`` / ``env.sim.data``); :class:`rpent.robots.libero.sim.LiberoSim` calls
them for the env server's geometry oracles (``env.object_bbox``, ``env.fixture_parts``) and its
instance segmentation.

Instance ids: 0 = background (table, floor, walls), 1..N = the BDDL objects then fixtures, in
BDDL order, N+1 = ``"robot"`` (arm, gripper and mount).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["InstanceTable", "instance_table", "object_box", "fixture_parts"]

#: Body-name prefixes of the robot (robosuite's naming of the arm, gripper and mount).
ROBOT_PREFIXES = ("robot0_", "gripper0_", "mount0_")
#: The 8 corners of a unit box, as signs along x, y, z: float64[8, 3].
_CORNER_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)


@dataclass(frozen=True)
class InstanceTable:
    """Which object every geom belongs to.

    Attributes:
        object_roots: ``{object or fixture name: root body id}`` in BDDL order (objects first).
        instance_names: ``{instance id: name}``, ids 1..N for ``object_roots`` then N+1 ``"robot"``.
        geom_instance: int32[ngeom], each geom's instance id (0 = background).
        geom_root: int64[ngeom], each geom's object root body id, -1 where it belongs to none.
    """

    object_roots: dict[str, int]
    instance_names: dict[int, str]
    geom_instance: np.ndarray
    geom_root: np.ndarray


def instance_table(model, raw_env) -> InstanceTable:
    """Map every geom of ``model`` to an instance id: the BDDL objects and fixtures of ``raw_env``
    (LIBERO's problem instance: ``objects_dict``, ``fixtures_dict``, each with a ``root_body``),
    ``"robot"``, else 0. A fixture whose root body is not in the model (rare) gets no id."""
    named = list(raw_env.objects_dict.items()) + list(getattr(raw_env, "fixtures_dict", {}).items())
    object_roots: dict[str, int] = {}
    for name, obj in named:
        try:
            object_roots[name] = model.body_name2id(obj.root_body)
        except Exception:  # a fixture without a body of its own; not segmentable
            continue
    root_to_name = {b: n for n, b in object_roots.items()}
    instance_names: dict[int, str] = {}
    name_to_id: dict[str, int] = {}
    for i, name in enumerate(object_roots, start=1):
        instance_names[i] = name
        name_to_id[name] = i
    robot_id = len(instance_names) + 1
    instance_names[robot_id] = "robot"
    lut = np.zeros(model.ngeom, dtype=np.int32)
    geom_root = np.full(model.ngeom, -1, dtype=np.int64)
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        b = body
        while b != 0 and b not in root_to_name:
            b = int(model.body_parentid[b])
        if b in root_to_name:
            lut[g] = name_to_id[root_to_name[b]]
            geom_root[g] = b
        elif (model.body_id2name(body) or "").startswith(ROBOT_PREFIXES):
            lut[g] = robot_id
    return InstanceTable(object_roots, instance_names, lut, geom_root)


def _world_corners(model, data, geoms) -> np.ndarray | None:
    """The world corners of each geom's local box (``model.geom_aabb``): float64[8 * len(geoms), 3]
    in metres, or None for no geoms."""
    pts = []
    for g in geoms:
        local = model.geom_aabb[g][:3] + _CORNER_SIGNS * model.geom_aabb[g][3:]
        pts.append(local @ np.asarray(data.geom_xmat[g]).reshape(3, 3).T + data.geom_xpos[g])
    return np.concatenate(pts, axis=0) if pts else None


def _hull_xy(points: np.ndarray) -> list[list[float]]:
    """Convex hull, counter-clockwise, of ``float[N, 2]`` points (m; :class:`scipy.spatial.ConvexHull`,
    whose 2-D vertices come counter-clockwise); the distinct points themselves when they span no
    area (fewer than 3, or all on one line)."""
    from scipy.spatial import ConvexHull, QhullError

    pts = np.unique(np.round(np.asarray(points, dtype=np.float64), 9), axis=0)
    try:
        hull = ConvexHull(pts)
    except (QhullError, ValueError):
        return pts.tolist()
    return pts[hull.vertices].tolist()


def object_box(model, data, root: int, geom_root: np.ndarray) -> dict:
    """Bounding boxes of the visible geoms of the object whose root body is ``root``.

    Each geom's local box (``model.geom_aabb``) is expressed in the root body's frame; their union
    is the oriented box (OBB), which is then placed in the world. Geoms with alpha 0 are skipped
    unless the object has no other geom.

    Returns:
        ``{"min", "max"}``: world axis-aligned box (float64[3], m); ``"center"``: OBB center
        (world, m); ``"axes"``: float64[3,3] whose columns are the OBB axes in the world frame (the
        root body's axes); ``"half_extents"``: float64[3] half sizes along those axes (m).
    """
    geoms = [g for g in range(model.ngeom) if geom_root[g] == root]
    visible = [g for g in geoms if model.geom_rgba[g][3] > 0]
    body_rot = np.asarray(data.xmat[root]).reshape(3, 3)
    body_pos = np.asarray(data.xpos[root])
    pts_body = (_world_corners(model, data, visible or geoms) - body_pos) @ body_rot  # into the body frame
    lo_b, hi_b = pts_body.min(axis=0), pts_body.max(axis=0)
    center = body_rot @ ((lo_b + hi_b) / 2.0) + body_pos
    box_corners = ((lo_b + hi_b) / 2.0 + _CORNER_SIGNS * (hi_b - lo_b) / 2.0) @ body_rot.T + body_pos
    return {
        "min": box_corners.min(axis=0),
        "max": box_corners.max(axis=0),
        "center": center,
        "axes": body_rot.copy(),
        "half_extents": (hi_b - lo_b) / 2.0,
    }


def fixture_parts(model, data, object_roots: dict[str, int]) -> dict:
    """Articulated parts (slide and hinge joints) of the objects and fixtures in ``object_roots``:
    drawers, stove knobs, doors. Free joints of movable objects and the robot's joints are not
    listed.

    Returns:
        ``{object name: [{"part": body name without the object prefix (e.g. "cabinet_top",
        "button"), "joint": joint name without the prefix, "type": "slide" | "hinge", "qpos":
        float (m or rad), "range": [lo, hi], "axis": float[3] world joint axis, "pos": float[3]
        part body origin (m, world), "handle": float[3] | None centre of the part's geoms whose
        material name contains "handle" (world), "min"/"max": float[3] world AABB of the part's
        visible geoms, "footprint": float[K][2] the box of the part's visible geoms in the part's own
        body frame (which turns and slides with it) seen from above: the convex hull of its corners'
        world (x, y), counter-clockwise (K = 4 when the body's z axis is vertical, m)}]}``.
    """
    import mujoco

    slide, hinge = int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE)
    roots = {b: n for n, b in object_roots.items()}
    out: dict[str, list] = {}
    for j in range(model.njnt):
        jtype = int(model.jnt_type[j])
        if jtype not in (slide, hinge):
            continue
        body = int(model.jnt_bodyid[j])
        root = body
        while root != 0 and root not in roots:
            root = int(model.body_parentid[root])
        if root not in roots:
            continue  # the robot's joints
        obj = roots[root]
        rot = np.asarray(data.xmat[body]).reshape(3, 3)
        geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) == body]
        visible = [g for g in geoms if model.geom_rgba[g][3] > 0 and int(model.geom_group[g]) == 1] or geoms
        box = _world_corners(model, data, visible)
        footprint = None
        if box is not None:
            own = (box - data.xpos[body]) @ rot  # the same corners in the part's body frame
            lo_b, hi_b = own.min(axis=0), own.max(axis=0)
            corners = ((lo_b + hi_b) / 2.0 + _CORNER_SIGNS * (hi_b - lo_b) / 2.0) @ rot.T + data.xpos[body]
            footprint = _hull_xy(corners[:, :2])
        handles = [g for g in geoms if int(model.geom_matid[g]) >= 0
                   and "handle" in (mujoco.mj_id2name(model._model, mujoco.mjtObj.mjOBJ_MATERIAL,
                                                      int(model.geom_matid[g])) or "")]
        hbox = _world_corners(model, data, handles)
        prefix = obj + "_"
        jname = model.joint_id2name(j) or ""
        bname = model.body_id2name(body) or ""
        out.setdefault(obj, []).append({
            "part": bname[len(prefix):] if bname.startswith(prefix) else bname,
            "joint": jname[len(prefix):] if jname.startswith(prefix) else jname,
            "type": "slide" if jtype == slide else "hinge",
            "qpos": float(data.qpos[int(model.jnt_qposadr[j])]),
            "range": [float(x) for x in model.jnt_range[j]],
            "axis": [float(x) for x in rot @ np.asarray(model.jnt_axis[j], dtype=np.float64)],
            "pos": [float(x) for x in data.xpos[body]],
            "handle": None if hbox is None else [float(x) for x in (hbox.min(axis=0) + hbox.max(axis=0)) / 2.0],
            "min": None if box is None else [float(x) for x in box.min(axis=0)],
            "max": None if box is None else [float(x) for x in box.max(axis=0)],
            "footprint": footprint,
        })
    return out
