"""LIBERO environment server: one MuJoCo episode of one (suite, task, seed) behind RPC.

Run::

    python -m rpent.robots.libero.env_server --suite libero_object --task 0 --seed 0 \\
        --max-episode-steps 10000 [--libero-type standard|pro] [--cuda-device K] \\
        [--policy-image-size 256] --transport http|socket --host 127.0.0.1 --port 0

The server is **bound to one task**: it serves exactly one (suite, task, seed,
max_episode_steps); clients check this with ``env.get_env_meta`` on connect
(:class:`rpent.robots.libero.env_client.EnvClient`) and refuse a mismatching server. To
change any of them, stop the server and start a new one (RPent reference §1.1, §1.3).

Methods (``ro`` = read-only: never advances physics):

==========================  ====  ==========================================================
``env.get_env_meta``        ro    identity: suite, task, seed, max_episode_steps, libero_type, init-state ids
``env.get_task_language``   ro    the instruction (str)
``env.reset``                     restart the episode from the seed's init state -> robot obs
``env.step(action, observe)``     one 7-D OSC_POSE delta action -> {obs, reward, terminated, truncated, success, steps}
                                  (+ the video frame or the policy observation after it)
``env.chunk_step(actions,``       (n,7) actions, stops early at episode end; ``return_all_frames``
``  return_all_frames)``          also returns the policy observation after every step
``env.status``              ro    {steps, terminated, truncated, success, done}
``env.instability``         ro    None, or where MuJoCo found the simulation unstable this episode
                                  (env step, warning, DOF, joint, body; ``LiberoSim.instability``)
``env.step_timing``         ro    {steps, sim_step_s}: env.step calls served and the seconds spent inside
                                  ``LiberoSim.step`` (RPC overhead = client time - sim_step_s)
``env.success``             ro    the BDDL success predicate evaluated now (bool)
``env.robot_obs``           ro    eef pos/quat/axis-angle, gripper qpos, 8-D state
``env.policy_obs``          ro    main/wrist SxSx3 uint8 in VLA orientation + 8-D state (S = --policy-image-size, 256)
``env.render_camera``       ro    one camera: rgb (+ metric depth, + instance segmentation)
``env.camera_meta``         ro    intrinsics K, cam2world extrinsics (OpenCV), near/far
``env.capture``             ro    everything a toolkit step record needs, in one round trip
``env.object_names``        ro    {objects, fixtures, of_interest}
``env.object_poses``        ro    {name: {pos, quat}} (m, xyzw, world frame)
``env.fixture_parts``       ro    articulated parts (drawers, knobs): joint, qpos, axis, handle
==========================  ====  ==========================================================

Read-only methods may be called concurrently by the RPC layer, but MuJoCo rendering and
physics share one ``MjData`` and one OpenGL (EGL) context, and a GL context is bound to the
thread that made it current: so the simulator is built and driven by ONE dedicated thread of
this server (:class:`SimThread`); RPC handler threads hand it their calls and wait.

``--cuda-device K`` pins ``MUJOCO_EGL_DEVICE_ID=K`` without setting ``CUDA_VISIBLE_DEVICES``
(robosuite's EGL assertion breaks multi-GPU hosts otherwise; reference §1.3, §9). K is checked
against the EGL devices that exist; without it the device is derived from
``MUJOCO_EGL_DEVICE_ID`` / ``CUDA_VISIBLE_DEVICES`` (:mod:`rpent.robots.libero.egl`), and an
inconsistent pair ends the server before its readiness line with one line and exit code 2.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time
from typing import Any, Callable

from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args

__all__ = ["EnvServer", "SimThread", "main", "build_parser"]


class SimThread:
    """One thread that owns the simulator: every call runs there, in submission order.

    Args:
        factory: builds the simulator (called on the sim thread, so its GL context is current there).
    Raises:
        whatever ``factory`` raises (re-raised in the caller).
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim")
        self.sim = self._pool.submit(factory).result()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the sim thread and return its result (or raise its error)."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        """Close the simulator on its thread and stop the thread (idempotent)."""
        if self.sim is not None:
            try:
                self.run(self.sim.close)
            finally:
                self.sim = None
                self._pool.shutdown(wait=True)


class EnvServer(RpcServer):
    """RPC facade over one :class:`rpent.robots.libero.sim.LiberoSim`.

    Args:
        sim_thread: the thread owning an open simulator; the server closes it on :meth:`close`.
    """

    def __init__(self, sim_thread: SimThread) -> None:
        super().__init__(name="env_server")
        self._thread = sim_thread
        self.sim = sim = sim_thread.sim
        ro = {
            "env.get_env_meta": sim.meta,
            "env.get_task_language": lambda: sim.task_language,
            "env.status": sim.status,
            "env.instability": sim.instability,
            "env.success": sim.success,
            "env.robot_obs": sim.robot_obs,
            "env.policy_obs": sim.policy_obs,
            "env.render_camera": sim.render_camera,
            "env.camera_meta": sim.camera_meta,
            "env.capture": self.capture,
            "env.object_names": sim.object_names,
            "env.object_poses": sim.object_poses,
            "env.object_aabb": sim.object_aabb,
            "env.fixture_parts": sim.fixture_parts,
        }
        mut = {"env.reset": sim.reset, "env.chunk_step": sim.chunk_step}
        for name, fn in ro.items():
            self.register(name, self._on_sim_thread(fn), readonly=True)
        for name, fn in mut.items():
            self.register(name, self._on_sim_thread(fn), readonly=False)
        self.register("env.step", self._step_call, readonly=False)
        self._steps_served = 0
        self._sim_step_s = 0.0
        self.register("env.step_timing", self.step_timing, readonly=True)

    def step_timing(self) -> dict:
        """``{"steps": int, "sim_step_s": float}``: ``env.step`` calls served so far and the wall seconds
        spent inside ``LiberoSim.step`` for them (rendering for ``observe`` not included). A client that
        times its own steps subtracts the difference of two readings to get the RPC overhead per step
        without the per-process variation of the simulator's speed (``benchmarks/env_step_bench.py``)."""
        return {"steps": self._steps_served, "sim_step_s": self._sim_step_s}

    def _step_call(self, action: Any, observe: str | None = None) -> dict:
        """``env.step``: a state-only step runs on the calling RPC thread, one that renders on the sim thread.

        A state-only step never touches the GL context (the env is built with camera observations
        off), and the server's write lock already excludes every other call, so the hand-off to the
        sim thread and back buys nothing there (``benchmarks/env_step_profile.py`` measures the
        hand-off). ``observe`` renders, so those steps go through the sim thread that owns the context.
        """
        if observe is None:
            return self.step(action)
        return self._thread.run(self.step, action, observe)

    def _on_sim_thread(self, fn):
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._thread.run(fn, *args, **kwargs)

        call.__name__ = getattr(fn, "__name__", "env_method")
        call.__doc__ = fn.__doc__
        return call

    def step(self, action: Any, observe: str | None = None) -> dict:
        """One env step, optionally returning what the caller renders after every step anyway.

        Args:
            action: (7,) OSC_POSE delta action (see ``LiberoSim.step``).
            observe: None (state only), ``"main"`` (adds ``"frame"``: the agentview image in
                natural orientation like ``agentview.png``, uint8[256,256,3], for the episode
                video, which is for people) or ``"policy"`` (adds
                ``"policy_obs"``: main and wrist images + 8-D state, for trajectory recording).
        Returns:
            ``LiberoSim.step``'s dict plus the requested observation.
        Raises:
            ValueError: unknown ``observe``; see ``LiberoSim.step`` for the others.
        """
        if observe not in (None, "main", "policy"):
            raise ValueError(f"observe must be None, 'main' or 'policy', got {observe!r}")
        t0 = time.perf_counter()
        out = self.sim.step(action)
        self._sim_step_s += time.perf_counter() - t0  # mutating calls are serialised: no lock needed
        self._steps_served += 1
        if observe == "main":
            from rpent.robots.libero.sim import POLICY_IMAGE_SIZE

            out["frame"] = self.sim.render_camera("agentview", POLICY_IMAGE_SIZE, POLICY_IMAGE_SIZE)["rgb"]
        elif observe == "policy":
            out["policy_obs"] = self.sim.policy_obs()
        return out

    def capture(self, size: int = 256, cameras: tuple | list = ("agentview", "wrist"),
                depth: bool = True, segmentation: tuple | list = ("agentview",)) -> dict:
        """Render what a toolkit step record needs in one call.

        Args:
            size: image edge in pixels (square renders), 1..2048.
            cameras: cameras to render (``agentview``, ``wrist``).
            depth: also render metric depth (m) for each camera.
            segmentation: cameras for which to render the instance segmentation.
        Returns:
            ``{"robot": robot_obs(), "status": status(), "cameras": {cam: {"rgb": uint8[H,W,3],
            "depth": float32[H,W] (m), "segmentation": int32[H,W]?, "segmentation_ids"?,
            "meta": camera_meta()}}}``; images in natural orientation (row 0 = top).
        """
        sim = self.sim
        out = {"robot": sim.robot_obs(), "status": sim.status(), "cameras": {}}
        for cam in cameras:
            r = sim.render_camera(cam, size, size, depth=depth, segmentation=cam in segmentation)
            r["meta"] = sim.camera_meta(cam, size, size)
            out["cameras"][cam] = r
        return out

    def close(self) -> None:
        """Close the simulator (idempotent); waits for a step in flight on an RPC thread."""
        with self._lock.write():
            self._thread.close()


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``python -m rpent.robots.libero.env_server``."""
    p = argparse.ArgumentParser(
        prog="python -m rpent.robots.libero.env_server",
        description="Serve one LIBERO / LIBERO-PRO episode (one suite, task, seed) over RPC.",
    )
    p.add_argument("--suite", required=True, help="suite, e.g. libero_object or libero_object_swap")
    p.add_argument("--task", type=int, required=True, help="task index within the suite")
    p.add_argument("--seed", type=int, default=0, help="selects the init state: seed mod n_init_states (default 0)")
    p.add_argument("--max-episode-steps", type=int, default=10000, help="env steps before truncation (default 10000)")
    p.add_argument("--libero-type", choices=("standard", "pro"), default=None,
                   help="LIBERO variant (default $LIBERO_TYPE, else pro)")
    p.add_argument("--cuda-device", type=int, default=None,
                   help="EGL device for rendering, checked against the EGL devices that exist (pins "
                        "MUJOCO_EGL_DEVICE_ID, drops CUDA_VISIBLE_DEVICES); default: derived from "
                        "MUJOCO_EGL_DEVICE_ID / CUDA_VISIBLE_DEVICES")
    p.add_argument("--policy-image-size", type=int, default=256, metavar="PX",
                   help="edge of the square main/wrist policy images (env.policy_obs, recorded observations) "
                        "in pixels (default 256, LIBERO's; a policy trained on smaller renders, e.g. 128)")
    add_server_args(p)
    return p


def main(argv: list[str] | None = None, *, server_cls: type[EnvServer] | None = None,
         prog: str | None = None) -> None:
    """Entry point: validate the task, build the simulator, serve until shutdown.

    Args:
        argv: the command line (default ``sys.argv[1:]``).
        server_cls: an :class:`EnvServer` subclass to serve instead (e.g. the flash replay's
            seed-switching server); default :class:`EnvServer`.
        prog: the program name shown in ``--help`` and usage errors.
    Raises:
        SystemExit: 2 on a bad task, seed, step limit or EGL device (one line on stderr).
    """
    parser = build_parser()
    if prog:
        parser.prog = prog
    args = parser.parse_args(argv)
    from rpent.robots.libero import suites

    try:
        libero_type = suites.check_libero_type(args.libero_type)
        suites.task_info(args.suite, args.task, libero_type)
    except ValueError as exc:
        print(f"env_server: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    if args.max_episode_steps < 1 or args.seed < 0:
        print("env_server: --max-episode-steps must be >= 1 and --seed >= 0", file=sys.stderr, flush=True)
        raise SystemExit(2)
    if not 1 <= args.policy_image_size <= 2048:
        print(f"env_server: --policy-image-size must be in 1..2048 pixels, got {args.policy_image_size}",
              file=sys.stderr, flush=True)
        raise SystemExit(2)
    from rpent.robots.libero.egl import configure_rendering
    from rpent.robots.libero.sim import LiberoSim

    try:  # before robosuite loads: a bad EGL device is one line and exit 2, not a traceback
        choice = configure_rendering(args.cuda_device)
    except ValueError as exc:
        print(f"env_server: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(f"env_server: EGL rendering device: {choice.device if choice.device is not None else 'default'} "
          f"({choice.reason})", file=sys.stderr, flush=True)
    sim_thread = SimThread(lambda: LiberoSim(args.suite, args.task, args.seed, args.max_episode_steps,
                                             libero_type, cuda_device=args.cuda_device,
                                             policy_image_size=args.policy_image_size))
    server = (server_cls or EnvServer)(sim_thread)
    try:
        serve_from_args(server, args)
    finally:
        server.close()


if __name__ == "__main__":
    main()
