"""Where the env server's per-step overhead goes: the server side of ``env.step`` taken apart in one process.

Builds one LIBERO env the way the env server does (on a :class:`SimThread`) and times state-only steps
(zero action, gripper open) five ways, interleaved round by round, wall and CPU time of the process (all
threads; a loaded machine distorts it less than wall time):

* ``direct``: ``LiberoSim.step`` on the sim thread itself (the in-process floor);
* ``sim-thread hop``: ``SimThread.run(sim.step)`` from another thread (the hand-off every env-server call
  that renders pays);
* ``handle_message``: a full ``env.step`` request through ``EnvServer.handle_message`` (decode, RW lock,
  dispatch to the sim thread, encode) from an RPC-like thread;
* ``handle_message, observe=main``: the same with a video frame rendered after the step (on the sim thread);
* ``codec only``: encode + decode of the request and of the reply without stepping.

Usage::

    MUJOCO_GL=egl python benchmarks/env_step_profile.py [--suite libero_10 --task 0] [--steps 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="libero_10")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.robots.libero.env_server import EnvServer, SimThread
    from rpent.robots.libero.sim import LiberoSim
    from rpent.rpc import codec

    n_total = (args.steps + 10) * 5 * args.rounds + 100
    th = SimThread(lambda: LiberoSim(args.suite, args.task, 0, max_episode_steps=n_total))
    sim = th.sim
    srv = EnvServer(th)
    a = np.zeros(7)
    a[6] = -1.0
    def request(observe):
        segs, _ = codec.encode({"method": "env.step", "args": [a], "kwargs": {"observe": observe}})
        return b"".join(bytes(s) for s in segs)

    req_state, req_main = request(None), request("main")
    reply_value = sim.step(a)

    def codec_only():
        codec.decode(bytearray(req_state))
        segs, _ = codec.encode({"ok": True, "result": reply_value})
        codec.decode(bytearray(b"".join(bytes(s) for s in segs)))

    ways = {
        "direct (on the sim thread)": lambda: th.run(lambda: [sim.step(a) for _ in range(args.steps)]),
        "sim-thread hop": lambda: [th.run(sim.step, a) for _ in range(args.steps)],
        "handle_message, state only": lambda: [srv.handle_message(bytearray(req_state)) for _ in range(args.steps)],
        "handle_message, observe=main": lambda: [srv.handle_message(bytearray(req_main)) for _ in range(args.steps)],
        "codec only": lambda: [codec_only() for _ in range(args.steps)],
    }
    wall: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.rounds):
        for name, fn in ways.items():
            box = {}

            def run_on_rpc_like_thread():
                c0 = time.process_time()
                t0 = time.perf_counter()
                fn()
                box["wall"] = time.perf_counter() - t0
                box["cpu"] = time.process_time() - c0

            t = threading.Thread(target=run_on_rpc_like_thread)
            t.start()
            t.join()
            wall[name].append(box["wall"] / args.steps * 1e3)
            cpu[name].append(box["cpu"] / args.steps * 1e3)
    th.close()
    print(f"env step profile: {args.suite} task {args.task}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"median of {args.rounds} rounds of {args.steps} steps")
    base = statistics.median(wall["direct (on the sim thread)"])
    print(f"{'way':32s} {'wall ms/step':>12s} {'vs direct':>9s} {'CPU ms/step':>11s}")
    for name in ways:
        w = statistics.median(wall[name])
        print(f"{name:32s} {w:12.3f} {w - base:+9.3f} {statistics.median(cpu[name]):11.3f}")


if __name__ == "__main__":
    main()
