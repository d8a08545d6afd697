"""Env-server step vs in-process step: the RPC overhead of driving LIBERO through the env server.

Measures the mean wall time of ``N`` state-only env steps (zero action) three ways, in the
same run: in-process ``LiberoSim.step``, and ``env.step`` through a real env-server
subprocess over each transport. Target (issue 3): server overhead <= 10% of the in-process step.

Usage::

    MUJOCO_GL=egl python benchmarks/env_step_bench.py [--steps 300] [--suite libero_object --task 0]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

READY = re.compile(r"RPC server listening on (\S+)")


def time_steps(step, n: int) -> float:
    """Mean seconds per call of ``step(action)`` over ``n`` calls (after 10 warm-up calls)."""
    a = np.zeros(7)
    a[6] = -1.0
    for _ in range(10):
        step(a)
    t = time.perf_counter()
    for _ in range(n):
        step(a)
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.robots.libero.env_client import EnvClient
    from rpent.robots.libero.sim import LiberoSim

    horizon = 10 * args.steps + 100
    sim = LiberoSim(args.suite, args.task, 0, max_episode_steps=horizon)
    inproc = time_steps(sim.step, args.steps)
    sim.close()
    rows = [("in-process LiberoSim.step", inproc)]
    for transport in ("socket", "http"):
        proc = subprocess.Popen([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", args.suite,
                                 "--task", str(args.task), "--max-episode-steps", str(horizon),
                                 "--transport", transport, "--port", "0", "--parent-watch"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        endpoint = None
        for line in proc.stdout:
            m = READY.search(line)
            if m:
                endpoint = m.group(1)
                break
        client = EnvClient(endpoint)
        rows.append((f"env server, {transport}", time_steps(client.step, args.steps)))
        client.call("shutdown")
        client.close()
        proc.wait(30)
    print(f"{'how':32s} {'ms/step':>8s} {'overhead':>9s}")
    for name, sec in rows:
        print(f"{name:32s} {sec * 1e3:8.2f} {100 * (sec / inproc - 1):8.1f}%")


if __name__ == "__main__":
    main()
