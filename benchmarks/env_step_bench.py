"""Env-server step vs in-process step: the RPC overhead of driving LIBERO through the env server.

Measures the mean wall time of state-only env steps (zero action) three ways, interleaved
round by round in the same run (the median round is reported): in-process ``LiberoSim.step``, and ``env.step`` through a real env-server
subprocess over each transport. Target (issue 3): server overhead <= 10% of the in-process step.

Usage::

    MUJOCO_GL=egl python benchmarks/env_step_bench.py [--steps 100] [--rounds 5] [--suite libero_object --task 0]
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
    ap.add_argument("--steps", type=int, default=100, help="env steps per round and way")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median round is reported")
    args = ap.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.robots.libero.env_client import EnvClient
    from rpent.robots.libero.sim import LiberoSim

    horizon = 100 * args.steps * args.rounds
    sim = LiberoSim(args.suite, args.task, 0, max_episode_steps=horizon)
    ways = {"in-process LiberoSim.step": sim.step}
    procs, clients = [], []
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
        procs.append(proc)
        clients.append(client)
        ways[f"env server, {transport}"] = client.step
    # interleave the ways round by round so machine load affects them alike
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, step in ways.items():
            times[name].append(time_steps(step, args.steps))
    for client, proc in zip(clients, procs):
        client.call("shutdown")
        client.close()
        proc.wait(30)
    sim.close()
    med = {name: float(np.median(v)) for name, v in times.items()}
    base = med["in-process LiberoSim.step"]
    print(f"{'how':32s} {'ms/step':>8s} {'overhead':>9s}   (median of {args.rounds} interleaved rounds of "
          f"{args.steps} steps)")
    for name, sec in med.items():
        print(f"{name:32s} {sec * 1e3:8.2f} {100 * (sec / base - 1):8.1f}%")


if __name__ == "__main__":
    main()
