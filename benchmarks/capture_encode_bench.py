"""Cost of encoding one step capture's ``.npz`` artifacts: numpy's default deflate level vs the toolkit's level.

After every motion tool the LIBERO toolkit writes, per camera (agentview and wrist), a depth
map, a float32 world map (H x W x 3) and, without SAM3, an instance-id map as ``.npz``
(``rpent/robots/libero/toolkit/observation.py``). This renders one real capture of a LIBERO
task (256 px, the toolkit's size) and times ``np.savez_compressed`` (the baseline) against
:func:`~rpent.robots.libero.toolkit.observation.npz_bytes` on the same arrays, printing ms per
capture, bytes, and the load average (the machine is shared: compare within one run).

Usage::

    MUJOCO_GL=egl python benchmarks/capture_encode_bench.py [--suite libero_goal --task 9 --repeats 10]
    python benchmarks/capture_encode_bench.py --from-run RUN_DIR [--step 3]   # a recorded step, no simulator
"""

from __future__ import annotations

import argparse
import io
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="libero_goal")
    ap.add_argument("--task", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--from-run", default=None, help="a run directory: encode its recorded step's maps instead of rendering")
    ap.add_argument("--step", type=int, default=0, help="with --from-run: the step index")
    args = ap.parse_args()
    from rpent.robots.libero.toolkit.observation import NPZ_LEVEL, load_npz, npz_bytes

    if args.from_run:
        from pathlib import Path

        run = Path(args.from_run)
        arrays = []
        for cam in ("agentview", "wrist"):
            for name, key in (("depth", "depth"), ("world", "xyz"), ("seg", "ids")):
                path = run / f"{cam}_{name}.npz" / f"{args.step:02d}.npz"
                if not path.exists():
                    raise SystemExit(f"{path} not found: pass a run directory of the LIBERO main job and a recorded --step")
                arrays.append({key: load_npz(path, key)})
        _report(arrays, args.repeats, NPZ_LEVEL, npz_bytes)
        return
    from rpent.robots.libero import geometry
    from rpent.robots.libero.sim import LiberoSim

    with LiberoSim(args.suite, args.task, seed=0, max_episode_steps=10) as sim:
        sim.reset()
        arrays = []
        for cam in ("agentview", "wrist"):
            r = sim.render_camera(cam, 256, 256, depth=True, segmentation=True)
            meta = sim.camera_meta(cam, 256, 256)
            depth = np.asarray(r["depth"], dtype=np.float32)
            arrays += [{"depth": depth}, {"xyz": geometry.world_map(depth, meta).astype(np.float32)},
                       {"ids": np.asarray(r["segmentation"], dtype=np.int32)}]
    _report(arrays, args.repeats, NPZ_LEVEL, npz_bytes)


def _report(arrays, repeats, level, npz_bytes) -> None:
    """Time the baseline and the toolkit's encoder on ``arrays`` and print both."""

    def baseline(**a):
        buf = io.BytesIO()
        np.savez_compressed(buf, **a)
        return buf.getvalue()

    def timed(fn):
        t0 = time.perf_counter()
        for _ in range(repeats):
            size = sum(len(fn(**a)) for a in arrays)
        return (time.perf_counter() - t0) / repeats * 1000.0, size

    load0 = os.getloadavg()
    rows = [("np.savez_compressed (baseline, level 6)", *timed(baseline)), (f"npz_bytes (level {level})", *timed(npz_bytes)),
            ("np.savez_compressed again", *timed(baseline))]
    for name, ms, size in rows:
        print(f"{name:42s} {ms:7.1f} ms per capture (2 cameras x depth, world, ids)  {size / 1e3:7.1f} kB")
    print(f"load average before {tuple(round(x, 2) for x in load0)}, after {tuple(round(x, 2) for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
