"""Example code policy: LIBERO pick-and-place through the ``robo`` facade.

Run it without an LLM (the whole file is one cell; CPU rendering is slow, so give the
cell more time than the 120 s default):

    rpent --robot libero --suite libero_object --task 0 --seed 0 \
        --policy-mode code --code-file examples/pick_place_policy.py --code-timeout-s 600

It handles instructions phrased "pick up the <object> and place it in/on the <target>"
(libero_object and similar). Tools and result fields are the LIBERO toolkit's
(rpent_reference.md §3.3): ``view_env_state``, ``view_camera_meta``, ``segment``,
``back_project``, ``move_to``, ``set_gripper``, ``release``, ``finish``. Positions are metres in the world
frame, angles radians; gripper -1 opens, +1 closes (§3.2). Success is the environment's
own predicate (``terminated``), never the finish status.

Inside a cell ``robo``, ``np`` and ``math`` are preloaded; everything defined here stays
defined for later cells of the same run.
"""

import re

# -- parameters (m, rad, env steps) --------------------------------------------------
# The Panda finger pads reach ~1.3 cm below the eef point (robot0_eef_pos) and the palm
# starts ~2.3 cm above it.
APPROACH_CLEARANCE = 0.08  # eef above the object top before descending
GRASP_DEPTH = 0.025        # eef below the object top (at most half the object height)
MIN_GRASP_HEIGHT = 0.012   # eef above the object bottom (fingertips clear the table)
CARRY_CLEARANCE = 0.06     # object bottom above the target top while carrying
MIN_CARRY_Z = 0.25         # lowest eef height for transport moves
RELEASE_CLEARANCE = 0.03   # object bottom above the target top at release
RETREAT = 0.10             # eef rise after releasing
GRASP_TOL = 0.004          # descend this close to the grasp point (the default 0.012 is too
                           # coarse for flat objects: the pads would close above them)
MAX_XY_STEP = 0.25         # per move_to call: below the 0.30 m limit (the OSC IK flips beyond it)
GRIP_CLOSE_STEPS = 15      # env steps to close the gripper
MIN_HELD_OPENING = 0.004   # finger opening (m) below which the grasp came up empty
ROUND_RATIO = 1.25         # footprint aspect ratio below which the wrist is not turned


def task_parts(language):
    """(object, target) names from 'pick up the X and place it in/on the Y'."""
    m = re.search(r"pick up the (.+?) and (?:place|put) it (?:in|on|into|onto|inside|on top of) the (.+?)\.?$",
                  language.strip().lower())
    if not m:
        raise ValueError(f"not a pick-and-place instruction: {language!r}")
    return m.group(1), m.group(2)


def robot_state():
    """eef position (np.float64[3], m), eef yaw (rad) and finger opening (m)."""
    s = robo.view_env_state().state
    q = s.robot0_gripper_qpos
    return np.asarray(s.robot0_eef_pos, dtype=float), float(s.get("eef_yaw", 0.0)), abs(q[0]) + abs(q[1])


def camera_xy(camera="agentview"):
    """Camera position in the world frame (x, y in m), from the extrinsic cam2world
    matrix of view_camera_meta; None when the toolkit cannot tell."""
    if "view_camera_meta" not in robo.tools:
        return None
    try:
        cam2world = np.asarray(robo.view_camera_meta(camera=camera).camera_meta.extrinsic_cam2world, dtype=float)
    except (robo.ToolError, AttributeError) as e:
        print(f"no camera pose ({e}); using mask medians as they are")
        return None
    return cam2world[:2, 3]


SUPPORT_Z = []  # support (table) heights measured so far in this run, m


def support_z_below(box, object_z):
    """Height (m) of the surface an object stands on: back_project the pixel a few rows
    below the bottom edge of its mask's box [x0, y0, x1, y1] (256 px agentview, row 0 =
    top; the camera looks down at the table from the front, so the table shows there).
    None when unavailable or implausible (not below the object's median height)."""
    if not box or "back_project" not in robo.tools:
        return None
    x0, y0, x1, y1 = box
    try:
        z = robo.back_project(row=min(int(y1) + 4, 255), col=(int(x0) + int(x1)) // 2,
                              resolution="low").world_xyz[2]
    except robo.ToolError as e:
        print(f"support height unavailable: {e}")
        return None
    return z if z < object_z - 0.005 else None


def locate(name, cam_xy=None):
    """Estimate of a named object from SAM3 segmentation on the agentview camera:
    ``{"center": xyz, "top": z, "bottom": z, "extent": [dx, dy, dz]}`` (m), or None.

    The mask's world points cover only the camera-facing side, so their median lies
    toward the camera; with the camera position known, the estimate is moved away from
    the camera by half the smaller horizontal extent (a radius-like correction that
    put libero_object centres within ~1 cm in our runs)."""
    for prompt in dict.fromkeys([name, name.split()[-1]]):
        seg = robo.segment(prompt=prompt)
        if not seg.found or seg.get("world_xyz") is None:
            print(f"segment {prompt!r}: not found ({seg.get('reason') or seg.get('world_error')})")
            continue
        median = np.asarray(seg.world_xyz, dtype=float)
        extent = np.asarray(seg.get("world_extent") or [0.05, 0.05, 0.05], dtype=float)
        top, bottom = median[2] + extent[2] / 2, median[2] - extent[2] / 2
        support = support_z_below(seg.get("box"), median[2])
        if support is not None:
            bottom = support
            SUPPORT_Z.append(support)
        elif SUPPORT_Z and min(SUPPORT_Z) < bottom:
            bottom = min(SUPPORT_Z)   # the table height measured next to another object
        center = median.copy()
        if cam_xy is not None:
            away = median[:2] - cam_xy
            center[:2] += away / np.linalg.norm(away) * min(extent[0], extent[1]) / 2
        center[2] = (top + bottom) / 2
        print(f"{prompt!r}: center {np.round(center, 3).tolist()} (mask median {np.round(median, 3).tolist()}) "
              f"top {top:.3f} bottom {bottom:.3f} extent {np.round(extent, 3).tolist()}")
        return {"center": center, "top": top, "bottom": bottom, "extent": extent}
    return None


def fold_yaw(yaw, current_yaw):
    """The yaw equivalent to ``yaw`` under a half turn (a parallel gripper is symmetric)
    that is nearest ``current_yaw`` (rad)."""
    while yaw - current_yaw > math.pi / 2:
        yaw -= math.pi
    while yaw - current_yaw < -math.pi / 2:
        yaw += math.pi
    return yaw


def grasp_yaw(obj, current_yaw, attempt):
    """Wrist yaw for a grasp attempt: the first attempt closes the fingers (which close
    along world y at yaw 0) across the narrower horizontal extent, keeping the current
    yaw for round footprints; a retry turns the wrist a quarter turn (extents along the
    camera's viewing direction are inflated by edge pixels, so the first guess can be
    wrong for small boxes)."""
    ex, ey = obj["extent"][:2]
    yaw = current_yaw
    if max(ex, ey) >= ROUND_RATIO * max(min(ex, ey), 1e-6):
        yaw = 0.0 if ex >= ey else math.pi / 2
    return fold_yaw(yaw + attempt * math.pi / 2, current_yaw)


def move(xyz, gripper=-1.0, **kw):
    """move_to in planar legs of at most MAX_XY_STEP (z interpolated); returns the last
    result. Finishes with success as soon as the environment reports it."""
    target = np.asarray(xyz, dtype=float)
    start, _, _ = robot_state()
    legs = max(1, int(math.ceil(np.linalg.norm(target[:2] - start[:2]) / MAX_XY_STEP)))
    for k in range(1, legs + 1):
        result = robo.move_to((start + (target - start) * (k / legs)).tolist(), gripper=gripper, **kw)
        done_if_solved(result, "a move")
    if result.final_dist_m > 0.03:
        print(f"move stopped {result.final_dist_m:.3f} m short of {np.round(target, 3).tolist()}")
    return result


def done_if_solved(result, what):
    """Finish with success as soon as the environment reports success."""
    if result.get("terminated"):
        robo.finish("success", f"environment reported success after {what}")


# -- the policy ----------------------------------------------------------------------
language = robo.view_env_state().task_language
obj_name, target_name = task_parts(language)
print(f"task: {language!r} -> object {obj_name!r}, target {target_name!r}")

cam_xy = camera_xy()
target = locate(target_name, cam_xy)   # first: big targets usually show the table below them
obj = locate(obj_name, cam_xy)
if obj is None or target is None:
    robo.finish("failure", f"could not segment the {'object' if obj is None else 'target'}")

held = False
for attempt in range(2):
    height = obj["top"] - obj["bottom"]
    grasp_z = max(obj["bottom"] + MIN_GRASP_HEIGHT, obj["top"] - min(GRASP_DEPTH, height / 2))
    grasp = np.array([obj["center"][0], obj["center"][1], grasp_z])
    _, yaw_now, _ = robot_state()
    yaw = grasp_yaw(obj, yaw_now, attempt)
    move([grasp[0], grasp[1], obj["top"] + APPROACH_CLEARANCE], gripper=-1.0, target_yaw=yaw)
    move(grasp, gripper=-1.0, step_clip=0.015, tol=GRASP_TOL, max_steps=120, target_yaw=yaw)
    done_if_solved(robo.set_gripper(gripper=1.0, steps=GRIP_CLOSE_STEPS), "the grasp")
    carry_z = max(MIN_CARRY_Z, target["top"] + CARRY_CLEARANCE + (grasp_z - obj["bottom"]))
    move([grasp[0], grasp[1], carry_z], gripper=1.0)
    _, _, opening = robot_state()
    print(f"attempt {attempt}: finger opening after lift {opening:.4f} m")
    if opening > MIN_HELD_OPENING:
        held = True
        break
    robo.set_gripper(gripper=-1.0, steps=10)       # came up empty: open, look again, retry turned
    obj = locate(obj_name, cam_xy) or obj

if not held:
    robo.finish("failure", "the grasp came up empty twice")

release_z = target["top"] + RELEASE_CLEARANCE + (grasp_z - obj["bottom"])
move([target["center"][0], target["center"][1], carry_z], gripper=1.0)
move([target["center"][0], target["center"][1], release_z], gripper=1.0, step_clip=0.015)
done_if_solved(robo.release(), "the release")
eef, _, _ = robot_state()
move(eef + [0.0, 0.0, RETREAT], gripper=-1.0)

if robo.view_env_state().terminated:
    robo.finish("success", f"placed the {obj_name} in/on the {target_name}")
robo.finish("failure", f"released the {obj_name} but the environment does not report success")
