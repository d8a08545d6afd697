"""Env-server step vs in-process step: the RPC overhead of driving LIBERO through the env server.

Measures the mean wall time of state-only env steps (zero action) three ways, interleaved
round by round in the same run (the median round is reported): in-process ``LiberoSim.step``, and ``env.step`` through a real env-server
subprocess over each transport. Also the CPU time per step (this process plus the server process, from /proc), which a loaded shared
machine distorts less than wall time, and the RPC cost per step: the client's time minus the time the
server itself spent in ``LiberoSim.step`` for the same steps (``env.step_timing``), which the speed of the
simulator differing between processes does not enter. Targets: overhead <= 10%; <= 0.3 ms per step (<= 5%).

Usage::

    MUJOCO_GL=egl python benchmarks/env_step_bench.py [--steps 100] [--rounds 5] [--suite libero_object --task 0]

To compare two checkouts (the env server subprocess inherits PYTHONPATH), run it once with each first on
PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

READY = re.compile(r"RPC server listening on (\S+)")


def _proc_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by this process (None) or by process ``pid`` (Linux /proc)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_steps(step, n: int, server_pid: int | None = None, timing=None) -> tuple[float, float, float | None]:
    """Mean wall seconds and CPU seconds (this process + the server process) per call of ``step(action)``
    over ``n`` calls (after 10 warm-up calls), and the mean seconds the server spent inside ``LiberoSim.step``
    for those calls (from ``timing()`` = ``env.step_timing`` read before and after; None without it). CPU
    time is what a loaded machine distorts least."""
    a = np.zeros(7)
    a[6] = -1.0
    for _ in range(10):
        step(a)
    before = timing() if timing else None
    c0 = _proc_cpu(None) + (_proc_cpu(server_pid) if server_pid else 0.0)
    t = time.perf_counter()
    for _ in range(n):
        step(a)
    wall = (time.perf_counter() - t) / n
    c1 = _proc_cpu(None) + (_proc_cpu(server_pid) if server_pid else 0.0)
    after = timing() if timing else None
    sim = None
    if before is not None and after is not None and after["steps"] - before["steps"] == n:
        sim = (after["sim_step_s"] - before["sim_step_s"]) / n
    return wall, (c1 - c0) / n, sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--steps", type=int, default=100, help="env steps per round and way")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median round is reported")
    ap.add_argument("--transports", default="socket,http",
                    help="env-server transports to time, comma-separated (default socket,http; each row is one more "
                         "LIBERO process: on a shared machine run one at a time)")
    ap.add_argument("--compare-root", action="append", default=[],
                    help="also run env servers from this checkout (put first on their PYTHONPATH): A/B rows in one run")
    args = ap.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.robots.libero.env_client import EnvClient
    from rpent.robots.libero.sim import LiberoSim

    horizon = 100 * args.steps * args.rounds
    sim = LiberoSim(args.suite, args.task, 0, max_episode_steps=horizon)
    ways = {"in-process LiberoSim.step": sim.step}
    pids: dict[str, int | None] = {"in-process LiberoSim.step": None}
    procs, clients = [], []
    roots = [(None, "")] + ([(r, f" [{r}]") for r in args.compare_root])
    for (root, tag), transport in [(rt, t) for rt in roots for t in args.transports.split(",")]:
        env = None
        if root is not None:  # the env server of another checkout (A/B in one run)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        proc = subprocess.Popen([sys.executable, "-m", "rpent.robots.libero.env_server", "--suite", args.suite,
                                 "--task", str(args.task), "--max-episode-steps", str(horizon),
                                 "--transport", transport, "--port", "0", "--parent-watch"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=root)  # `python -m` puts the cwd first on sys.path: run in the checkout it names
        endpoint = None
        for line in proc.stdout:
            m = READY.search(line)
            if m:
                endpoint = m.group(1)
                break
        client = EnvClient(endpoint)
        procs.append(proc)
        clients.append(client)
        ways[f"env server, {transport}{tag}"] = client.step
        pids[f"env server, {transport}{tag}"] = proc.pid
    timing = {name: c for name, c in zip(list(ways)[1:], clients)}

    def server_timing(name: str) -> dict | None:
        """The env server's own ``env.step_timing`` (None: in-process, or a checkout without it)."""
        if name not in timing:
            return None
        try:
            return timing[name].call("env.step_timing")
        except Exception:  # noqa: BLE001 - an older server without the method
            return None

    # interleave the ways round by round so machine load affects them alike
    times: dict[str, list[float]] = {name: [] for name in ways}
    cpus: dict[str, list[float]] = {name: [] for name in ways}
    overheads: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, step in ways.items():
            wall, cpu, in_sim = time_steps(step, args.steps, pids[name],
                                           timing=(lambda n=name: server_timing(n)) if name in timing else None)
            times[name].append(wall)
            cpus[name].append(cpu)
            if in_sim is not None:
                overheads[name].append(wall - in_sim)
            elif name not in timing:
                overheads[name].append(0.0)
    for client, proc in zip(clients, procs):
        client.call("shutdown")
        client.close()
        proc.wait(30)
    sim.close()
    med = {name: float(np.median(v)) for name, v in times.items()}
    cmed = {name: float(np.median(v)) for name, v in cpus.items()}
    base, cbase = med["in-process LiberoSim.step"], cmed["in-process LiberoSim.step"]
    print(f"env step bench: {args.suite} task {args.task}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"rpent from {Path(__import__('rpent').__file__).parent}")
    width = max(len(n) for n in med) + 1
    print(f"{'how':{width}s} {'ms/step':>8s} {'overhead':>9s} {'ms':>6s} | {'CPU ms/step':>11s} {'overhead':>9s} | "
          f"{'RPC ms/step':>11s} {'of step':>8s}   (median of {args.rounds} interleaved rounds of {args.steps} steps; "
          "CPU = client + server process)")
    for name, sec in med.items():
        c = cmed[name]
        ov = f"{1e3 * float(np.median(overheads[name])):11.3f} {100 * float(np.median(overheads[name])) / sec:7.1f}%" \
            if overheads[name] else f"{'-':>11s} {'-':>8s}"
        print(f"{name:{width}s} {sec * 1e3:8.2f} {100 * (sec / base - 1):8.1f}% {1e3 * (sec - base):6.2f} | {c * 1e3:11.2f} "
              f"{100 * (c / cbase - 1):8.1f}% | {ov}")
    print("RPC ms/step: the client's time per env.step minus the time the server spent inside LiberoSim.step for the "
          "same steps (env.step_timing): the transport's own cost, free of the simulator's speed differing from "
          "process to process; 'overhead' compares with the in-process row instead")


if __name__ == "__main__":
    main()
