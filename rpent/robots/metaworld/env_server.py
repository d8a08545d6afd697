"""Meta-World environment server: one episode of one (suite, task, seed) behind RPC.

It runs in the Meta-World environment (``.venv-metaworld/bin/python``, made by
``scripts/install_metaworld.sh``: metaworld 3.1.1 pins mujoco 3.3.0, which cannot share the
main environment with LIBERO's mujoco 2.3.7), with the repository on ``PYTHONPATH``; it imports
only :mod:`rpent.rpc` (msgpack + numpy) and this package. Run::

    MUJOCO_GL=egl PYTHONPATH=. .venv-metaworld/bin/python -m rpent.robots.metaworld.env_server \\
        --suite mt10 --task 0 --seed 0 --max-episode-steps 500 --transport socket --port 0

Like LIBERO's server it is bound to one (suite, task, seed, max_episode_steps): clients check
``env.get_env_meta`` on connect (:class:`rpent.robots.metaworld.env_client.MetaWorldEnvClient`)
and refuse a mismatching server; the readiness line is the RPC layer's
``RPC server listening on <proto>://<host>:<port>``; it binds 127.0.0.1 unless told otherwise.

Methods (``ro`` = read-only, never advances physics):

==========================  ====  ==========================================================
``env.get_env_meta``        ro    identity (suite, task, seed, max_episode_steps, env_name, variant, versions)
``env.get_task_language``   ro    the instruction
``env.reset``                     restart the episode -> robot obs
``env.step(action,``              one float[4] action -> {obs, reward, terminated, truncated, success, steps}
``  observe, expert)``            (+ ``frame`` of the main camera with ``observe="main"``, ``policy_obs``
                                  with ``observe="policy"``, ``expert_action`` for the next step with ``expert``)
``env.expert_action``       ro    Meta-World's scripted expert action on the current observation
``env.status``              ro    {steps, terminated, truncated, success, done, reward}
``env.success``             ro    the environment's success predicate (bool)
``env.robot_obs``           ro    hand pos, gripper opening, 4-D state, 39-D observation
``env.policy_obs(images)``  ro    main/wrist images (uint8, natural orientation) + 4-D state + 39-D environment_state
``env.render_camera``       ro    one camera: rgb (+ metric depth, + body segmentation)
``env.camera_meta``         ro    intrinsics K, cam2world (OpenCV)
``env.capture``             ro    state + main and wrist renders for a toolkit step record
``env.segment``             ro    pixels/bbox/world centroid of a body from MuJoCo segmentation
``env.object_poses``        ro    object / object2 / goal positions (m, world)
``env.body_names``          ro    every body name (index = body id)
==========================  ====  ==========================================================

MuJoCo rendering uses one GL context bound to one thread, so every call runs on the server's
single simulator thread (:class:`rpent.robots.libero.env_server.SimThread`'s pattern, here
:class:`SimThread` of this module: the LIBERO module is not imported in this environment).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from typing import Any, Callable

from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args

__all__ = ["EnvServer", "SimThread", "main", "build_parser", "POLICY_IMAGE_SIZE", "VIDEO_SIZE"]

#: Edge (px) of ``policy_obs`` images (the trajectory recorder's / flywheel export's 256x256) and of
#: ``observe="main"`` video frames.
POLICY_IMAGE_SIZE = 256
VIDEO_SIZE = 224


class SimThread:
    """One thread owning the simulator; every call runs there in submission order.

    Args:
        factory: builds the simulator on that thread (its GL context is current there).
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim")
        self.sim = self._pool.submit(factory).result()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` on the sim thread; returns its result or raises its error."""
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
    """RPC facade over one :class:`rpent.robots.metaworld.sim.MetaWorldSim`."""

    def __init__(self, sim_thread: SimThread) -> None:
        super().__init__(name="env_server")
        self._thread = sim_thread
        self.sim = sim = sim_thread.sim
        ro = {
            "env.get_env_meta": sim.meta,
            "env.get_task_language": lambda: sim.info.language,
            "env.status": sim.status,
            "env.success": sim.success,
            "env.robot_obs": sim.robot_obs,
            "env.policy_obs": self.policy_obs,
            "env.render_camera": sim.render_camera,
            "env.camera_meta": sim.camera_meta,
            "env.capture": self.capture,
            "env.segment": sim.segment,
            "env.object_poses": sim.object_poses,
            "env.body_names": sim.body_names,
            "env.expert_action": sim.expert_action,
        }
        for name, fn in ro.items():
            self.register(name, self._on_sim_thread(fn), readonly=True)
        self.register("env.reset", self._on_sim_thread(sim.reset), readonly=False)
        self.register("env.step", self._on_sim_thread(self.step), readonly=False)

    def _on_sim_thread(self, fn):
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._thread.run(fn, *args, **kwargs)

        call.__name__ = getattr(fn, "__name__", "env_method")
        call.__doc__ = fn.__doc__
        return call

    def policy_obs(self, images: bool = True) -> dict:
        """``{"main_image", "wrist_image": uint8[256,256,3] natural orientation (no VLA mirroring for this
        robot), "state": float32[4], "environment_state": float64[39] (the full Meta-World observation,
        LeRobot's ``observation.environment_state``)}``; ``images=False`` leaves the two images out (a
        state-only policy such as the scripted expert, no rendering)."""
        from rpent.robots.metaworld.sim import MAIN_CAMERA, WRIST_CAMERA

        s = POLICY_IMAGE_SIZE
        robot = self.sim.robot_obs()
        out = {"state": robot["state"], "environment_state": robot["obs"]}
        if images:
            out["main_image"] = self.sim.render_camera(MAIN_CAMERA, s, s)["rgb"]
            out["wrist_image"] = self.sim.render_camera(WRIST_CAMERA, s, s)["rgb"]
        return out

    def step(self, action: Any, observe: str | None = None, expert: bool = False) -> dict:
        """One env step, with what the caller renders after every step anyway.

        Args:
            action: float[4] (``MetaWorldSim.step``).
            observe: None, ``"main"`` (adds ``"frame"``: the main camera, uint8[224,224,3], natural
                orientation, for the episode video) or ``"policy"`` (adds ``"policy_obs"``).
            expert: add ``"expert_action"`` float32[4]: the expert's action for the NEXT step.
        Raises:
            ValueError: unknown ``observe``; see ``MetaWorldSim.step``.
        """
        from rpent.robots.metaworld.sim import MAIN_CAMERA

        if observe not in (None, "main", "policy"):
            raise ValueError(f"observe must be None, 'main' or 'policy', got {observe!r}")
        out = self.sim.step(action)
        if observe == "main":
            out["frame"] = self.sim.render_camera(MAIN_CAMERA, VIDEO_SIZE, VIDEO_SIZE)["rgb"]
        elif observe == "policy":
            out["policy_obs"] = self.policy_obs()
        if expert:
            out["expert_action"] = self.sim.expert_action()
        return out

    def capture(self, size: int = 256, segmentation: bool = True) -> dict:
        """State and the main + wrist renders of a step record, in one round trip.

        Returns:
            ``{"robot": robot_obs(), "status": status(), "objects": object_poses(),
            "cameras": {"agentview"|"wrist": {"rgb", "segmentation"?, "segmentation_ids"?, "meta"}}}``;
            ``agentview`` is the main camera (``corner``), ``wrist`` is ``gripperPOV``.
        """
        from rpent.robots.metaworld.sim import MAIN_CAMERA, WRIST_CAMERA

        sim = self.sim
        out = {"robot": sim.robot_obs(), "status": sim.status(), "objects": sim.object_poses(), "cameras": {}}
        for role, cam in (("agentview", MAIN_CAMERA), ("wrist", WRIST_CAMERA)):
            r = sim.render_camera(cam, size, size, segmentation=segmentation and role == "agentview")
            r["meta"] = sim.camera_meta(cam, size, size)
            out["cameras"][role] = r
        return out

    def close(self) -> None:
        """Close the simulator (idempotent)."""
        with self._lock.write():
            self._thread.close()


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``python -m rpent.robots.metaworld.env_server``."""
    p = argparse.ArgumentParser(prog="python -m rpent.robots.metaworld.env_server",
                                description="Serve one Meta-World episode (one suite, task, seed) over RPC.")
    p.add_argument("--suite", default="mt50", help="mt10 or mt50 (default mt50)")
    p.add_argument("--task", required=True, help="task index in the suite, or its name (reach-v3 / reach)")
    p.add_argument("--seed", type=int, default=0, help="goal variant: seed mod 50 (default 0)")
    p.add_argument("--max-episode-steps", type=int, default=500, help="env steps before truncation, 1..500 (default 500)")
    add_server_args(p)
    return p


def main(argv: list[str] | None = None) -> None:
    """Entry point: check the task, build the simulator, serve until shutdown."""
    args = build_parser().parse_args(argv)
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")  # headless offscreen rendering (before mujoco is imported)
    from rpent.robots.metaworld import tasks

    try:
        suite, task = tasks.resolve(args.suite, args.task)
        if args.seed < 0:
            raise ValueError("--seed must be >= 0")
        if not 1 <= args.max_episode_steps <= 500:
            raise ValueError("--max-episode-steps must be 1..500 (Meta-World's max_path_length)")
    except ValueError as exc:
        print(f"env_server: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    try:
        import metaworld  # noqa: F401
    except ImportError as exc:
        print(f"env_server: metaworld is not importable in {sys.executable} ({exc}); run scripts/install_metaworld.sh "
              "and start the server with .venv-metaworld/bin/python (rpent: --env-python)", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    from rpent.robots.metaworld.sim import MetaWorldSim

    sim_thread = SimThread(lambda: MetaWorldSim(suite, task, args.seed, args.max_episode_steps))
    server = EnvServer(sim_thread)
    try:
        serve_from_args(server, args)
    finally:
        server.close()


if __name__ == "__main__":
    main()
