"""In-process LIBERO simulation core: one MuJoCo episode of one (suite, task, seed).

:class:`LiberoSim` is what the env server wraps (one method per ``env.*`` RPC method, plain
dict/ndarray results). Stepping is state-only: the environment is created with camera
observations off, so ``step`` never renders; images come only from explicit calls
(:meth:`LiberoSim.policy_obs`, :meth:`LiberoSim.render_camera`).

Rendering setup: call :func:`rpent.robots.libero.egl.configure_rendering` (done by the constructor) before robosuite
is imported. It defaults ``MUJOCO_GL``/``PYOPENGL_PLATFORM`` to ``egl`` and, with
``cuda_device=K``, pins ``MUJOCO_EGL_DEVICE_ID=K`` and removes ``CUDA_VISIBLE_DEVICES``:
robosuite asserts at import that the EGL id is a substring of ``CUDA_VISIBLE_DEVICES``,
which breaks on multi-GPU hosts (RPent reference §1.3 and §9). It never sets
``CUDA_VISIBLE_DEVICES``.

Episode protocol (:meth:`LiberoSim.reset`): ``env.reset()``, restore init state
``seed mod n_init_states`` (see :mod:`rpent.robots.libero.suites`), then ``settle_steps``
(default 10) no-op actions ``[0]*6 + [-1]`` (gripper open) so dropped objects come to rest:
openpi's LIBERO evaluation does the same (``examples/libero/main.py``, ``num_steps_wait=10``,
``LIBERO_DUMMY_ACTION``). Settle steps are not counted in ``steps`` and do not count
against ``max_episode_steps``. The compiled model is kept across resets (``hard_reset=False``:
0.04 s instead of ~6 s); the solver warm start and the gripper's integrated command are
cleared, and LIBERO's fixture placement sampler (numpy's global RNG) is seeded with the init
state id before each ``env.reset()``, so every episode of a seed is bit-identical, also across
processes (fixture poses included).

Costs on 2 shared CPU cores, CPU Mesa EGL (``python benchmarks/scripted_oracle_bench.py
--timing``): build 4-7 s; physics-only step ~10 ms (idle) to ~20 ms (load average 6);
agentview render 256 px ~90 ms idle, 1024 px ~210-350 ms; depth is free with RGB; instance
segmentation is a second render pass.

Image conventions: :mod:`rpent.robots.libero.geometry` (natural orientation, OpenCV camera
frame, metric z-depth). Instance ids: 0 = background (table, floor, walls), 1..N = objects
then fixtures in BDDL order, N+1 = ``"robot"`` (arm and gripper).
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from typing import Any

import numpy as np

from rpent.robots.libero import bodies, geometry, suites
from rpent.robots.libero.stability import first_instability, warning_counts
from rpent.robots.libero.egl import configure_rendering

__all__ = [
    "CAMERAS",
    "EpisodeDoneError",
    "LiberoSim",
    "canonical_camera",
    "DUMMY_ACTION",
]

#: Public camera names -> MuJoCo camera names.
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand", "robot0_eye_in_hand": "robot0_eye_in_hand"}
#: No-op action used for settling: zero pose delta, gripper open (-1). Source: openpi LIBERO example.
DUMMY_ACTION = np.array([0.0] * 6 + [-1.0])
#: Largest render edge accepted (pixels); larger offscreen buffers cost GPU/CPU memory for no gain.
MAX_RENDER_SIZE = 2048
#: Policy camera size (pixels): LIBERO training data was rendered at 256x256 (openpi LIBERO_ENV_RESOLUTION).
POLICY_IMAGE_SIZE = 256
_MJOBJ_GEOM = 5  # mujoco.mjtObj.mjOBJ_GEOM


_OPEN_SIMS: "weakref.WeakSet[LiberoSim]" = weakref.WeakSet()


def _close_open_sims() -> None:
    """Free GL contexts before the EGL display goes away (else robosuite prints EGLError tracebacks).

    Re-registered after every environment is built: atexit runs handlers last-in first-out
    and robosuite/mujoco terminate the EGL display in handlers registered per GL context.
    """
    for sim in list(_OPEN_SIMS):
        try:
            sim.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


class EpisodeDoneError(RuntimeError):
    """Raised when stepping an episode that already terminated (success) or was truncated."""


def canonical_camera(camera: str) -> str:
    """Map a public camera name to the MuJoCo camera name.

    Args:
        camera: ``"agentview"`` or ``"wrist"`` (alias ``"robot0_eye_in_hand"``).
    Returns:
        ``"agentview"`` or ``"robot0_eye_in_hand"``.
    Raises:
        ValueError: any other name ("bad camera 'x' (use 'agentview' or 'wrist')").
    """
    if camera not in CAMERAS:
        raise ValueError(f"bad camera {camera!r} (use 'agentview' or 'wrist')")
    return CAMERAS[camera]



def _as_action(action: Any) -> np.ndarray:
    arr = np.asarray(action, dtype=np.float64)
    if arr.shape != (7,):
        raise ValueError(
            f"action must have shape (7,) [dx, dy, dz, rx, ry, rz, gripper], got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"action contains NaN or inf: {arr.tolist()}")
    return arr


def _check_size(height: int, width: int) -> tuple[int, int]:
    for label, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_RENDER_SIZE:
            raise ValueError(f"{label} must be an integer in 1..{MAX_RENDER_SIZE}, got {v!r}")
    return int(height), int(width)


class LiberoSim:
    """One LIBERO MuJoCo environment bound to one (suite, task, seed, max_episode_steps).

    Args:
        suite: suite name (see :func:`rpent.robots.libero.suites.list_suites`).
        task: task index within the suite.
        seed: selects the init state (``seed mod n_init_states``); deterministic.
        max_episode_steps: env steps (after settling) before ``truncated`` (>= 1).
        libero_type: ``"standard"``/``"pro"``/None (``LIBERO_TYPE``, default ``pro``).
        settle_steps: no-op steps after restoring the init state (default 10, openpi's value).
        cuda_device: EGL device for rendering (see :func:`rpent.robots.libero.egl.configure_rendering`).
        terminate_on_success: end the episode (``terminated``) when the success predicate first
            holds (default, interactive runs). Batch evaluation passes False to run every episode
            for ``max_episode_steps``, so ``success_at_end`` can differ from ``success_once``
            (seed 003's protocol); ``success`` still reports the predicate.
        policy_image_size: edge (pixels) of the square main/wrist images :meth:`policy_obs`
            renders (default :data:`POLICY_IMAGE_SIZE`, 256, LIBERO's). A policy trained on
            smaller renders (e.g. 128 px: cheaper to render on a CPU) is served and recorded at
            its own size, rendered directly rather than resized from 256.

    Raises:
        ValueError: unknown suite, task out of range, missing resources, bad arguments.

    The constructor builds the environment (~4-7 s) and performs the first :meth:`reset`.
    Not thread-safe: serialise calls (the env server's write lock does).
    """

    def __init__(
        self,
        suite: str,
        task: int,
        seed: int = 0,
        max_episode_steps: int = 10000,
        libero_type: str | None = None,
        settle_steps: int = 10,
        cuda_device: int | None = None,
        terminate_on_success: bool = True,
        policy_image_size: int = POLICY_IMAGE_SIZE,
    ) -> None:
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer)) or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be a positive integer, got {max_episode_steps!r}")
        if isinstance(settle_steps, bool) or not isinstance(settle_steps, (int, np.integer)) or settle_steps < 0:
            raise ValueError(f"settle_steps must be a non-negative integer, got {settle_steps!r}")
        self.policy_image_size = _check_size(policy_image_size, policy_image_size)[0]
        self.libero_type = suites.check_libero_type(libero_type)
        self.task_info = suites.task_info(suite, task, self.libero_type)
        self.init_state_id, self.init_state_global_id = suites.init_state_ids(self.task_info, seed)
        self.suite, self.task, self.seed = suite, int(task), int(seed)
        self.max_episode_steps = int(max_episode_steps)
        self.settle_steps = int(settle_steps)
        self._init_states = suites.load_init_states(self.task_info)
        self._init_state = self._init_states[self.init_state_id]
        self.terminate_on_success = bool(terminate_on_success)

        configure_rendering(cuda_device)
        from libero.libero.envs.env_wrapper import ControlEnv  # imports robosuite + mujoco

        self._env = ControlEnv(
            bddl_file_name=self.task_info.bddl_path,
            use_camera_obs=False,  # physics-only steps; images come from explicit renders
            has_offscreen_renderer=True,
            camera_heights=POLICY_IMAGE_SIZE,
            camera_widths=POLICY_IMAGE_SIZE,
            horizon=self.max_episode_steps + self.settle_steps + 1,
            ignore_done=True,  # truncation is ours (max_episode_steps), not robosuite's horizon
            hard_reset=False,  # keep the compiled model across resets (0.04 s instead of ~6 s)
        )
        # robosuite registers eglTerminate at exit for every new GL context; keep our cleanup
        # the most recently registered handler so it runs first (atexit is LIFO).
        atexit.unregister(_close_open_sims)
        atexit.register(_close_open_sims)
        self._raw = self._env.env
        self._robot = self._raw.robots[0]
        self._model = self._raw.sim.model
        self._data = self._raw.sim.data
        self._build_instance_table()
        self.steps = 0
        self.terminated = False
        self.truncated = False
        self._success = False
        self._closed = False
        self._instability: dict | None = None
        _OPEN_SIMS.add(self)
        self.reset()

    # ------------------------------------------------------------------ metadata
    @property
    def task_language(self) -> str:
        """The task instruction (see :mod:`rpent.robots.libero.suites` for which string)."""
        return self.task_info.language

    def meta(self) -> dict:
        """Identity of this episode, as ``env.get_env_meta`` reports it.

        Returns:
            ``{suite, task, seed, max_episode_steps, libero_type, init_state_id,
            init_state_global_id, n_init_states, init_state_sha256, settle_steps, task_language,
            task_name, policy_image_size}``; ``init_state_sha256`` is :func:`suites.init_state_sha256` of the init
            state actually loaded.
        """
        return {
            "suite": self.suite,
            "task": self.task,
            "seed": self.seed,
            "max_episode_steps": self.max_episode_steps,
            "libero_type": self.libero_type,
            "init_state_id": self.init_state_id,
            "init_state_global_id": self.init_state_global_id,
            "n_init_states": self.task_info.n_init_states,
            "init_state_sha256": suites.init_state_sha256(self._init_state),
            "settle_steps": self.settle_steps,
            "task_language": self.task_language,
            "task_name": self.task_info.name,
            "policy_image_size": self.policy_image_size,
        }

    def object_names(self) -> dict:
        """Names of the scene's objects.

        Returns:
            ``{"objects": [...movable objects...], "fixtures": [...], "of_interest": [...]}``
            (``of_interest`` is the BDDL ``:obj_of_interest`` list).
        """
        return {
            "objects": list(self._raw.objects_dict.keys()),
            "fixtures": list(getattr(self._raw, "fixtures_dict", {}).keys()),
            "of_interest": list(self._raw.obj_of_interest),
        }

    # ------------------------------------------------------------------ episode
    def select_init_state(self, init_state_id: int) -> None:
        """Make another recorded init state of this task the current one, without resetting: the
        next :meth:`reset` restores it (:meth:`meta` reports it at once). For a caller that resets
        right after anyway (a run's toolkit resets at its start), which saves a reset and its
        ``settle_steps``.

        Args:
            init_state_id: 0 <= id < n_init_states.
        Raises:
            ValueError: ``init_state_id`` out of range.
        """
        n = len(self._init_states)
        if isinstance(init_state_id, bool) or not isinstance(init_state_id, (int, np.integer)) \
                or not 0 <= init_state_id < n:
            raise ValueError(f"init_state_id must be an integer in 0..{n - 1} for {self.suite} task "
                             f"{self.task}, got {init_state_id!r}")
        self.init_state_global_id += int(init_state_id) - self.init_state_id
        self.init_state_id = int(init_state_id)
        self._init_state = self._init_states[self.init_state_id]

    def reset(self, init_state_id: int | None = None) -> dict:
        """Start the episode again from the same init state (bit-identical every time), or from
        another recorded init state of this task.

        Args:
            init_state_id: None keeps the current one (``seed mod n_init_states`` at first);
                otherwise 0 <= id < n_init_states, and it becomes the current one.
        Returns:
            the :meth:`robot_obs` dict after settling.
        Raises:
            ValueError: ``init_state_id`` out of range.
        """
        self._ensure_open()
        if init_state_id is not None:
            self.select_init_state(init_state_id)
        # LIBERO's env.reset() re-samples the placement of fixtures (stove, cabinet, rack: bodies
        # without a free joint, so not part of the init state) from numpy's global RNG; unseeded,
        # they land ~1 cm apart in every process (measured: libero_10 t2's stove, t3's cabinet).
        # Seed it from the init state, so the whole scene is a function of (task, init state).
        # openpi's LIBERO example seeds the env for the same reason (examples/libero/main.py).
        self._env.seed(self.init_state_id)
        self._env.reset()
        self._env.set_init_state(self._init_state)
        # Episodes must not depend on the previous one (we keep the model: hard_reset=False).
        # The constraint solver's warm start is not part of the MuJoCo state; it would carry
        # the randomly sampled placement of env.reset() into the first steps (measured: cm-level
        # divergence after 8 steps).
        self._data.qacc_warmstart[:] = 0.0
        # robosuite's Panda gripper integrates its command (current_action) across steps and
        # only zeroes it when the model is rebuilt (hard reset); do what a hard reset would.
        gripper = self._robot.gripper
        gripper.current_action = np.zeros_like(np.asarray(gripper.current_action, dtype=np.float64))
        self._instability = None
        self._warnings_at_reset = warning_counts(self._data)
        for _ in range(self.settle_steps):
            self._env.step(DUMMY_ACTION)
        self.steps = 0
        self._check_stability()
        self.terminated = False
        self.truncated = False
        self._success = bool(self._env.check_success())
        return self.robot_obs()

    def step(self, action: Any) -> dict:
        """Apply one 7-D OSC_POSE delta action (one env step, 0.05 s at 20 Hz); no rendering.

        Args:
            action: (7,) ``[dx, dy, dz, rx, ry, rz, gripper]`` in [-1, 1] (robosuite clips);
                1.0 = 0.05 m translation / 0.5 rad rotation goal delta in the world frame;
                gripper -1 open, +1 close. See :mod:`rpent.robots.libero.control`.
        Returns:
            ``{"obs": robot_obs(), "reward": float, "terminated": bool (= success),
            "truncated": bool (steps >= max_episode_steps), "success": bool, "steps": int}``.
        Raises:
            ValueError: wrong shape or non-finite values.
            EpisodeDoneError: the episode already ended; :meth:`reset` first.
        """
        self._ensure_open()
        act = _as_action(action)
        self._check_not_done()
        _, reward, done, _ = self._env.step(act)
        self.steps += 1
        self._check_stability()
        self._success = bool(done)
        self.terminated = self._success and self.terminate_on_success
        self.truncated = self.steps >= self.max_episode_steps
        return {
            "obs": self.robot_obs(),
            "reward": float(reward),
            "terminated": self.terminated,
            "truncated": self.truncated,
            "success": self._success,
            "steps": self.steps,
        }

    def chunk_step(self, actions: Any, return_all_frames: bool = False) -> dict:
        """Apply an action chunk, stopping early when the episode ends.

        Args:
            actions: (n, 7) actions, n >= 1 (see :meth:`step`).
            return_all_frames: also render :meth:`policy_obs` after every executed step
                (two renders per step; costly on CPU).
        Returns:
            ``{"obs", "reward": float32[k], "terminated": bool[k], "truncated": bool[k],
            "success", "steps", "n_executed": k}`` (k <= n actions executed) plus
            ``"frames": [policy_obs, ...]`` (k entries) when requested.
        Raises:
            ValueError: bad shape/values (checked before any step is taken).
            EpisodeDoneError: the episode had already ended before the chunk.
        """
        arr = np.asarray(actions, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 7 or arr.shape[0] < 1:
            raise ValueError(f"actions must have shape (n, 7) with n >= 1, got {arr.shape}")
        for row in arr:
            _as_action(row)
        self._check_not_done()
        rewards, terms, truncs, frames = [], [], [], []
        out: dict = {}
        for row in arr:
            out = self.step(row)
            rewards.append(out["reward"])
            terms.append(out["terminated"])
            truncs.append(out["truncated"])
            if return_all_frames:
                frames.append(self.policy_obs())
            if out["terminated"] or out["truncated"]:
                break
        result = {
            "obs": out["obs"],
            "reward": np.asarray(rewards, dtype=np.float32),
            "terminated": np.asarray(terms, dtype=bool),
            "truncated": np.asarray(truncs, dtype=bool),
            "success": out["success"],
            "steps": self.steps,
            "n_executed": len(rewards),
        }
        if return_all_frames:
            result["frames"] = frames
        return result

    def success(self) -> bool:
        """The environment's own success predicate (BDDL goal) evaluated now."""
        self._ensure_open()
        return bool(self._env.check_success())

    def status(self) -> dict:
        """``{"steps", "terminated", "truncated", "success", "done"}`` without stepping."""
        return {
            "steps": self.steps,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "success": self._success,
            "done": self.terminated or self.truncated,
        }

    def instability(self) -> dict | None:
        """Whether the simulation blew up in this episode, and where
        (:mod:`rpent.robots.libero.stability`).

        Returns:
            None while MuJoCo has raised none of its bad qpos/qvel/qacc warnings since
            :meth:`reset`; else the first one (:func:`~rpent.robots.libero.stability.first_instability`:
            ``env_step`` (0: while the init state settled), ``warning``, ``dof``, ``joint``,
            ``body``, ``detail``). MuJoCo resets the state when it raises them, so the scene after
            that step is not the one the init state described.
        """
        return None if self._instability is None else dict(self._instability)

    def _check_stability(self) -> None:
        if self._instability is None:
            self._instability = first_instability(self._data, self._model, self._warnings_at_reset, self.steps)

    # ------------------------------------------------------------------ state
    def robot_obs(self) -> dict:
        """Robot state read from the simulator (no rendering).

        Returns:
            ``robot0_eef_pos`` float64[3] (m, world; the gripper's grip site),
            ``robot0_eef_quat`` float64[4] (xyzw; eef body ``robot0_right_hand``),
            ``robot0_eef_axis_angle`` float64[3] (rad; :func:`geometry.quat_to_axis_angle`),
            ``robot0_gripper_qpos`` float64[2] (finger joint positions, m; ~+/-0.04 open, ~0 closed),
            ``robot0_joint_pos`` float64[7] (the arm's joint angles, rad, joints 1-7),
            ``state`` float32[8] (eef pos, axis-angle, gripper qpos: the VLA state).
            Same values as robosuite's ``robot0_*`` observations.
        """
        self._ensure_open()
        data = self._data
        pos = np.array(data.site_xpos[self._robot.eef_site_id], dtype=np.float64)
        body = self._model.body_name2id(self._robot.robot_model.eef_name)
        quat = geometry.quat_wxyz_to_xyzw(data.xquat[body])
        grip = np.array(data.qpos[self._robot._ref_gripper_joint_pos_indexes], dtype=np.float64)
        aa = geometry.quat_to_axis_angle(quat)
        return {
            "robot0_eef_pos": pos,
            "robot0_eef_quat": quat,
            "robot0_eef_axis_angle": aa,
            "robot0_gripper_qpos": grip,
            "robot0_joint_pos": np.array(data.qpos[self._robot._ref_joint_pos_indexes], dtype=np.float64),
            "state": np.concatenate([pos, aa, grip]).astype(np.float32),
        }

    def mujoco_state(self) -> np.ndarray:
        """The flattened MuJoCo state (time, qpos, qvel): float64[state_dim], the layout of
        LIBERO's recorded init states (``suites.load_init_states``)."""
        self._ensure_open()
        return np.array(self._env.get_sim_state(), dtype=np.float64)

    def object_poses(self, names: list[str] | None = None) -> dict:
        """World poses of objects (root bodies) and of BDDL region sites.

        Args:
            names: object, fixture or region-site names (e.g. ``flat_stove_1_cook_region``);
                None = the task's objects of interest (BDDL ``:obj_of_interest``, which may
                name region sites).
        Returns:
            ``{name: {"pos": float64[3] m, "quat": float64[4] xyzw}}``.
        Raises:
            ValueError: unknown name (lists the known objects).
        """
        import mujoco

        self._ensure_open()
        wanted = list(self._raw.obj_of_interest) if names is None else list(names)
        sites = getattr(self._raw, "object_sites_dict", {})
        out = {}
        for name in wanted:
            if name not in self._object_roots and name in sites:
                sid = self._model.site_name2id(name)
                quat_wxyz = np.zeros(4)
                mujoco.mju_mat2Quat(quat_wxyz, np.asarray(self._data.site_xmat[sid], dtype=np.float64))
                out[name] = {
                    "pos": np.array(self._data.site_xpos[sid], dtype=np.float64),
                    "quat": geometry.quat_wxyz_to_xyzw(quat_wxyz),
                }
                continue
            body = self._root_body_id(name)
            out[name] = {
                "pos": np.array(self._data.xpos[body], dtype=np.float64),
                "quat": geometry.quat_wxyz_to_xyzw(self._data.xquat[body]),
            }
        return out

    def object_bbox(self, name: str) -> dict:
        """Bounding boxes of an object's visible geoms (a simulator oracle for its geometry).

        Each geom's local box (``model.geom_aabb``) is expressed in the object's root-body
        frame; their union is the oriented box (OBB), which is then placed in the world.
        Geoms with alpha 0 are skipped unless the object has no other geom.

        Args:
            name: object or fixture name.
        Returns:
            ``{"min", "max"}``: world axis-aligned box (float64[3], m);
            ``"center"``: OBB center (world, m); ``"axes"``: float64[3,3] whose columns are
            the OBB axes in the world frame (the root body's axes); ``"half_extents"``:
            float64[3] half sizes along those axes (m).
        Raises:
            ValueError: unknown name.
        """
        self._ensure_open()
        return bodies.object_box(self._model, self._data, self._root_body_id(name), self._geom_root)

    def fixture_parts(self) -> dict:
        """Articulated parts of the scene's objects and fixtures (drawers, stove knobs, doors).

        What a robot would be told about its workspace's furniture ("fixture joint
        state or handle poses"); movable objects' free joints are not listed.

        Returns:
            ``{object name: [{"part": body name without the object prefix (e.g.
            "cabinet_top", "button"), "joint": joint name without the prefix, "type":
            "slide" | "hinge", "qpos": float (m or rad), "range": [lo, hi], "axis": float[3]
            world joint axis, "pos": float[3] part body origin (m, world), "handle": float[3]
            | None centre of the part's geoms whose material name contains "handle" (world),
            "min"/"max": float[3] world AABB of the part's visible geoms, "footprint": float[K][2]
            the corners, seen from above, of their box in the part's own frame
            (:func:`~rpent.robots.libero.bodies.fixture_parts`)}]}``.
        """
        self._ensure_open()
        return bodies.fixture_parts(self._model, self._data, self._object_roots)

    def object_aabb(self, name: str) -> dict:
        """World axis-aligned box of an object's visible geoms (see :meth:`object_bbox`).

        Returns:
            ``{"min": float64[3], "max": float64[3], "center": float64[3]}`` (m, world);
            ``center`` here is the AABB midpoint.
        Raises:
            ValueError: unknown name.
        """
        box = self.object_bbox(name)
        return {"min": box["min"], "max": box["max"], "center": (box["min"] + box["max"]) / 2.0}

    # ------------------------------------------------------------------ cameras
    def policy_obs(self) -> dict:
        """The observation LIBERO VLAs take.

        Returns:
            ``{"main_image": uint8[S,S,3], "wrist_image": uint8[S,S,3], "state": float32[8]}`` with
            S = ``policy_image_size`` (default 256); images in VLA orientation (:func:`geometry.natural_to_policy`: openpi's 180-degree
            rotation of robosuite's OpenGL frames), agentview and ``robot0_eye_in_hand``.
        """
        size = self.policy_image_size
        main = self.render_camera("agentview", size, size)["rgb"]
        wrist = self.render_camera("wrist", size, size)["rgb"]
        return {
            "main_image": geometry.natural_to_policy(main),
            "wrist_image": geometry.natural_to_policy(wrist),
            "state": self.robot_obs()["state"],
        }

    def render_camera(
        self,
        camera: str = "agentview",
        height: int = 256,
        width: int = 256,
        depth: bool = False,
        segmentation: bool = False,
    ) -> dict:
        """Render one camera now, in natural orientation (row 0 = top).

        Args:
            camera: ``"agentview"`` or ``"wrist"``.
            height, width: pixels, 1..2048.
            depth: also return metric z-depth.
            segmentation: also return the instance segmentation (one extra render pass).
        Returns:
            ``{"rgb": uint8[H,W,3]}`` plus ``"depth": float32[H,W]`` (m) and
            ``"segmentation": int32[H,W]`` (instance ids, 0 = background/table/walls) with
            ``"segmentation_ids": {id: name}`` (object and fixture names; ``"robot"`` = arm
            and gripper) as requested.
        Raises:
            ValueError: bad camera name or size.
        """
        self._ensure_open()
        cam = canonical_camera(camera)
        h, w = _check_size(height, width)
        sim = self._raw.sim
        # robosuite renders into whatever GL context is current; another LiberoSim in this
        # process (created or closed later) may have left its own current.
        sim._render_context_offscreen.gl_ctx.make_current()
        out: dict = {}
        if depth:
            rgb, dbuf = sim.render(width=w, height=h, camera_name=cam, depth=True)
            near, far = self._near_far()
            out["rgb"] = geometry.opengl_to_natural(rgb)
            out["depth"] = geometry.depth_buffer_to_meters(geometry.opengl_to_natural(dbuf), near, far)
        else:
            out["rgb"] = geometry.opengl_to_natural(sim.render(width=w, height=h, camera_name=cam))
        if segmentation:
            vopt = sim._render_context_offscreen.vopt
            sitegroup = np.array(vopt.sitegroup)
            vopt.sitegroup[:] = 0  # region sites are invisible in RGB but would occlude objects here
            try:
                seg = sim.render(width=w, height=h, camera_name=cam, segmentation=True)
            finally:
                vopt.sitegroup[:] = sitegroup
            seg = geometry.opengl_to_natural(seg)
            ids = np.zeros(seg.shape[:2], dtype=np.int32)
            is_geom = seg[..., 0] == _MJOBJ_GEOM
            ids[is_geom] = self._geom_instance[seg[..., 1][is_geom]]
            out["segmentation"] = ids
            out["segmentation_ids"] = dict(self._instance_names)
        return out

    def camera_meta(self, camera: str = "agentview", height: int = 256, width: int = 256) -> dict:
        """Calibration of a camera for images of the given size, at the current step.

        Returns:
            ``{"camera", "height", "width", "fovy_deg", "intrinsic_K": float64[3,3],
            "extrinsic_cam2world": float64[4,4], "convention": "opencv", "depth_near",
            "depth_far", "image_orientation": "natural"}``. ``intrinsic_K`` maps OpenCV
            camera coordinates to continuous pixel coordinates of natural-orientation images
            (pixel centers at +0.5); the wrist extrinsic changes every step.
        Raises:
            ValueError: bad camera name or size.
        """
        self._ensure_open()
        cam = canonical_camera(camera)
        h, w = _check_size(height, width)
        cid = self._model.camera_name2id(cam)
        fovy = float(self._model.cam_fovy[cid])
        near, far = self._near_far()
        return {
            "camera": "wrist" if cam == "robot0_eye_in_hand" else cam,
            "height": h,
            "width": w,
            "fovy_deg": fovy,
            "intrinsic_K": geometry.intrinsic_matrix(fovy, h, w),
            "extrinsic_cam2world": geometry.cam2world_opencv(self._data.cam_xpos[cid], self._data.cam_xmat[cid]),
            "convention": "opencv",
            "depth_near": near,
            "depth_far": far,
            "image_orientation": "natural",
        }

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Free the simulator and its GL context (idempotent)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            self._env.close()
        finally:
            self._env = None
            self._raw = None

    def __enter__(self) -> "LiberoSim":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _ensure_open(self) -> None:
        if getattr(self, "_closed", False):
            raise RuntimeError("LiberoSim is closed; create a new one")

    def _check_not_done(self) -> None:
        if self.terminated or self.truncated:
            why = "terminated (task succeeded)" if self.terminated else f"truncated (max_episode_steps={self.max_episode_steps} reached)"
            raise EpisodeDoneError(
                f"step called after episode done: {why} at step {self.steps}; reset the environment "
                "(env.reset) to start a new episode"
            )

    def _near_far(self) -> tuple[float, float]:
        extent = float(self._model.stat.extent)
        return float(self._model.vis.map.znear) * extent, float(self._model.vis.map.zfar) * extent

    def _root_body_id(self, name: str) -> int:
        if name not in self._object_roots:
            raise ValueError(f"unknown object {name!r}; known objects: {', '.join(self._object_roots)}")
        return self._object_roots[name]

    def _build_instance_table(self) -> None:
        """Map every geom to an instance id: objects, fixtures, 'robot', else 0 (:func:`bodies.instance_table`)."""
        table = bodies.instance_table(self._model, self._raw)
        self._object_roots = table.object_roots
        self._instance_names = table.instance_names
        self._geom_instance = table.geom_instance
        self._geom_root = table.geom_root
