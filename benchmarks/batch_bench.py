"""rpent-batch throughput and overhead on this machine.

Measures, on the same cells (scripted planner, real LIBERO env servers):

* baseline: the same runs started one after another as plain ``rpent`` processes (sum of their
  wall times);
* ``rpent-batch --parallel 1``: its wall time against that sum (the runner's overhead; target
  <= 5 %), and, robust to the load changing between the two measurements, against the sum of the
  wall times of its own run processes (from ``attempts.jsonl``): what the runner adds itself
  (start-up, matrix checks, ledger, lock, manifest, report);
* ``rpent-batch --parallel 2``: episodes per minute (and ``--parallel 1``'s).

Usage::

    MUJOCO_GL=egl python benchmarks/batch_bench.py [--suite libero_object] [--tasks 0-1] [--seeds 0]
        [--max-episode-steps 60] [--skip-parallel2] [--skip-singles]
    MUJOCO_GL=egl python benchmarks/batch_bench.py --executor ray [--ray-address HOST:PORT] [--rounds 2]

``--executor ray``: the same batch with the local executor and with the Ray executor
(``rpent-batch --ray-address``), interleaved ``--rounds`` times, ``--parallel`` runs at once; prints
the Ray executor's overhead against the local one (target <= 10 %). The target figure (the line
``TARGET FIGURE``) is the whole wall time of ``rpent-batch`` from launch to exit on the same cells,
nothing subtracted: median Ray batch / median local batch, with every round's ratio and their
spread; the Ray driver attaches to a cluster that is already running (the multi-node mode: a
cluster outlives many batches), and a second ratio counts the cluster's start in the one batch (a
driver that has to start its cluster). Everything else it prints is a breakdown beside that
figure, never subtracted from it. Without ``--ray-address`` it
starts a one-node Ray cluster on 127.0.0.1 for the measurement (``ray.cluster_utils.Cluster``,
``--parallel`` CPUs) and stops it at the end; its start-up is not counted. Rounds alternate which
executor goes first; besides the wall times it prints what each batch added on top of its runs'
own wall times (from ``attempts.jsonl``: start-up, connection, task start, report), which the
load on a shared machine disturbs far less than the runs themselves. Both executors' runs get the
same ``OMP_NUM_THREADS`` (default 1: Ray would otherwise set it in its workers only), and the
cluster it starts runs its workers at the raylet's niceness (``RAY_worker_niceness=0``; Ray's default
+15 deprioritises the Ray rounds' runs on a shared machine); each run is set to the driver's niceness
(as locally). The cluster is started by :func:`rpent.cluster.local.start_local_cluster` (its
system processes 5 below this process's niceness where permitted, a failed start retried).

It also splits what each batch added outside its runs by the ledger's timestamps (``head``: launch
to the first run's start; ``dispatch``: per run, ledger start..end minus the run's own wall time;
``gaps``: between runs; ``tail``: the last run's end to exit), and measures Ray's own fixed cost
per driver with a bare script against the same cluster (``import ray``, ``ray.init``, the first
task, which starts the job's worker process, the next task, ``ray.shutdown``), so the part of the
overhead that is Ray's own start-up is shown apart from what the executor adds per cell. The
cluster start itself is reported apart (a ratio with it counted in one batch, labelled as such).

Each batch's CPU use is sampled with psutil (every 0.5 s, by group: the runs and their env servers,
``rpent-batch``, the Ray workers running the cell tasks, Ray's own system processes) and printed per
round and as medians, so Ray's background cost is shown next to the wall times.

Prints the load average (``uptime``) next to the figures: on a shared machine they are noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rpent.batch.matrix import parse_index_list  # noqa: E402


def _load() -> str:
    return os.getloadavg().__repr__()


def _timed(cmd: list[str]) -> float:
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--tasks", default="0-1")
    ap.add_argument("--seeds", default="0-1")
    ap.add_argument("--max-episode-steps", type=int, default=60)
    ap.add_argument("--skip-parallel2", action="store_true")
    ap.add_argument("--skip-singles", action="store_true", help="no separate baseline runs (ledger-based overhead only)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="ray: measure the Ray executor's overhead against the local executor")
    ap.add_argument("--ray-address", default=None, help="existing cluster for --executor ray (default: start one)")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once for --executor ray (default 1)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved local/ray rounds for --executor ray")
    args = ap.parse_args()
    if args.executor == "ray":
        ray_overhead(args)
        return
    tasks, seeds = parse_index_list(args.tasks, "--tasks"), parse_index_list(args.seeds, "--seeds")
    n = len(tasks) * len(seeds)
    run_flags = ["--no-video", "--max-episode-steps", str(args.max_episode_steps)]
    print(f"cells: {args.suite} tasks {tasks} seeds {seeds} ({n} episodes), {' '.join(run_flags)}; "
          f"load before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="batch_bench_") as tmp:
        singles = []
        for t in ([] if args.skip_singles else tasks):
            for s in seeds:
                singles.append(_timed([sys.executable, "-m", "rpent.cli.main", "--suite", args.suite, "--task", str(t),
                                       "--seed", str(s), *run_flags, "--output-dir", f"{tmp}/single_t{t}_s{s}"]))
        base = sum(singles) or float("nan")
        print(f"baseline, {n} plain rpent runs one after another: sum {base:.1f} s "
              f"({', '.join(f'{x:.1f}' for x in singles)}); load {_load()}")
        batch = [sys.executable, "-m", "rpent.cli.batch", "--suites", args.suite, "--tasks", args.tasks, "--seeds",
                 args.seeds, "--no-progress", *run_flags]
        p1 = _timed(batch + ["--parallel", "1", "--results-root", f"{tmp}/p1"])
        own = sum(e["wall_s"] for e in map(json.loads, Path(f"{tmp}/p1/attempts.jsonl").read_text().splitlines())
                  if e.get("event") == "end")
        print(f"rpent-batch --parallel 1: {p1:.1f} s, {60 * n / p1:.2f} episodes/min; overhead vs the sum of the "
              f"single runs above {100 * (p1 - base) / base:+.1f} % (target <= 5 %); vs the sum of its own runs' "
              f"wall times ({own:.1f} s) {100 * (p1 - own) / own:+.1f} % ({p1 - own:.1f} s); load {_load()}")
        if not args.skip_parallel2:
            p2 = _timed(batch + ["--parallel", "2", "--results-root", f"{tmp}/p2"])
            print(f"rpent-batch --parallel 2: {p2:.1f} s, {60 * n / p2:.2f} episodes/min "
                  f"(x{p1 / p2:.2f} vs --parallel 1); load {_load()}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def ray_overhead(args: argparse.Namespace) -> None:
    """Local vs Ray executor on the same batch, interleaved; medians and the overhead."""
    import statistics

    from rpent.cluster.local import local_node_env, start_local_cluster

    local_node_env()  # loopback node IPs, raised Ray start timeouts (rpent.cluster.local)
    # Ray sets OMP_NUM_THREADS=<the task's CPUs> in its workers when it is unset, and the runs inherit it:
    # give both executors' runs the same value so only the executor differs
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Ray starts its worker processes (and so the runs they spawn) at niceness +15 over the raylet; on a
    # shared machine that slows the Ray rounds' runs, not the executor: start the nodes at the runs' niceness
    # (the cell task also sets its run to the driver's niceness when it may; the bench does not rely on it)
    os.environ.setdefault("RAY_worker_niceness", "0")
    tasks, seeds = parse_index_list(args.tasks, "--tasks"), parse_index_list(args.seeds, "--seeds")
    n = len(tasks) * len(seeds)
    cluster = None
    address = args.ray_address
    if address is None:
        cluster = start_local_cluster({"num_cpus": args.parallel}, temp_prefix="rray_bench_")
        address = cluster.address
        print(f"one-node Ray cluster at {address} started in {cluster.start_s:.1f} s ({cluster.attempts} attempt(s); "
              "not counted)", flush=True)
    run_flags = ["--no-video", "--max-episode-steps", str(args.max_episode_steps)]
    print(f"cells: {args.suite} tasks {tasks} seeds {seeds} ({n} episodes), --parallel {args.parallel}, "
          f"{' '.join(run_flags)}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} for both; {_uptime()}", flush=True)
    times: dict[str, list[float]] = {"local": [], "ray": []}
    run_sums: dict[str, list[float]] = {"local": [], "ray": []}
    added: dict[str, list[float]] = {"local": [], "ray": []}
    phases: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
    ratios: list[float] = []
    cpu_use: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
    try:
        fixed = [_ray_fixed_cost(address) for _ in range(2)]
        for f in fixed:
            print(f"Ray's own fixed cost per driver, a bare script against the same cluster: {_phase_text(f)} s "
                  f"(sum {sum(f.values()):.1f} s); {_uptime()}", flush=True)
        with tempfile.TemporaryDirectory(prefix="batch_bench_") as tmp:
            batch = [sys.executable, "-m", "rpent.cli.batch", "--suites", args.suite, "--tasks", args.tasks, "--seeds",
                     args.seeds, "--no-progress", "--parallel", str(args.parallel), *run_flags]
            for r in range(args.rounds):
                # alternate which executor goes first, so a load trend does not favour one of them
                order = ("local", "ray") if r % 2 == 0 else ("ray", "local")
                pair = {}
                for kind in order:
                    extra = ["--ray-address", address] if kind == "ray" else []
                    root = f"{tmp}/{kind}{r}"
                    t_launch = time.time()
                    with _CpuSampler() as cpu:
                        dt = _timed(batch + ["--results-root", root, *extra])
                    t_exit = time.time()
                    cpu_use[kind].append(cpu.groups)
                    runs = _run_walls(root)
                    phases[kind].append(_phases(root, t_launch, t_exit))
                    # what the batch added on top of its runs' own wall times (robust to the load the runs see)
                    own = dt - sum(runs) / args.parallel
                    times[kind].append(dt)
                    run_sums[kind].append(sum(runs))
                    added[kind].append(own)
                    pair[kind] = dt
                    print(f"round {r + 1} {kind:5s}: {dt:.1f} s (its {len(runs)} runs {sum(runs):.1f} s; "
                          f"added by rpent-batch + executor {own:+.1f} s: {_phase_text(phases[kind][-1])}); {_uptime()}",
                          flush=True)
                    print(f"    CPU s used during it: {_phase_text(cpu.groups)}", flush=True)
                ratios.append(pair["ray"] / pair["local"])
                print(f"round {r + 1} ratio ray/local {ratios[-1]:.3f}", flush=True)
    finally:
        if cluster is not None:
            cluster.shutdown()
    loc, ray_ = statistics.median(times["local"]), statistics.median(times["ray"])
    mode = ("attached to a cluster started before the batch" if cluster is not None else
            f"attached to the running cluster at {address}")
    print(f"wall times local {['%.1f' % x for x in times['local']]} s, ray {['%.1f' % x for x in times['ray']]} s")
    print(f"TARGET FIGURE (whole wall time of rpent-batch, launch to exit, same {n} cells and flags, nothing "
          f"subtracted; Ray driver {mode}): median local executor {loc:.1f} s, Ray executor {ray_:.1f} s: ratio "
          f"{ray_ / loc:.3f}, Ray overhead {100 * (ray_ - loc) / loc:+.1f} % (target <= 10 %: "
          f"{'met' if ray_ <= 1.10 * loc else 'NOT met'}); per-round ratios {', '.join('%.3f' % r for r in ratios)} "
          f"(median {statistics.median(ratios):.3f}, spread {min(ratios):.3f}-{max(ratios):.3f}); "
          f"{60 * n / ray_:.2f} episodes/min on Ray")
    if cluster is not None:
        print(f"driver pays the cluster start too (a one-node cluster started for this one batch, "
              f"{cluster.start_s:.1f} s, {cluster.attempts} attempt(s)): ratio {(ray_ + cluster.start_s) / loc:.3f} "
              "(a cluster normally outlives many batches: not the per-batch cost)")
    print("breakdown beside the target figure (not subtracted from it):")
    al, ar = statistics.median(added["local"]), statistics.median(added["ray"])
    print(f"  time added on top of the runs' own wall times (median): local {al:.1f} s, ray {ar:.1f} s: the Ray "
          f"executor's per-batch cost {ar - al:+.1f} s = {100 * (ar - al) / loc:+.1f} % of this local batch")
    rl, rr = statistics.median(run_sums["local"]), statistics.median(run_sums["ray"])
    print(f"  the runs' own wall times summed (median): local {rl:.1f} s, ray {rr:.1f} s ({100 * (rr - rl) / rl:+.1f} %; "
          "the same rpent command either way: load noise unless it repeats across rounds)")
    per_cell = loc / n
    if ar - al > 0:
        need = math.ceil((ar - al) / (0.10 * per_cell))
        print(f"  per-batch cost vs batch size: at {per_cell:.1f} s per local cell, the per-batch cost stays within 10 % "
              f"from {need} cells per batch on (runs equally fast on both executors assumed)")
    for key, what in (("head", "launch to first run started (imports, Ray connect + placement check + worker start)"),
                      ("dispatch", "per run: ledger start..end minus the run's own wall (task start + result back)"),
                      ("gaps", "between one run's end and the next one's start"),
                      ("tail", "last run's end to exit (report, Ray disconnect)")):
        ml = statistics.median(p[key] for p in phases["local"])
        mr = statistics.median(p[key] for p in phases["ray"])
        print(f"  {key:8s} local {ml:5.1f} s, ray {mr:5.1f} s ({mr - ml:+.1f} s): {what}")
    for key in sorted({k for kind in cpu_use for g in cpu_use[kind] for k in g}):
        ml = statistics.median(g.get(key, 0.0) for g in cpu_use["local"])
        mr = statistics.median(g.get(key, 0.0) for g in cpu_use["ray"])
        print(f"  CPU s of {key:14s} per batch (median) local {ml:6.1f}, ray {mr:6.1f} ({mr - ml:+.1f})")
    fx = {k: statistics.median(f[k] for f in fixed) for k in fixed[0]}
    print(f"  Ray's own fixed cost per driver (median of {len(fixed)} bare probes: {_phase_text(fx)} s; sum "
          f"{sum(fx.values()):.1f} s = {100 * sum(fx.values()) / loc:.1f} % of the local batch); without it: "
          f"ratio {(ray_ - sum(fx.values())) / loc:.3f} (what the executor adds beyond Ray's own start-up)")
    print(_uptime())


_FIXED_COST_SCRIPT = """
import json, os, sys, time
t0 = time.monotonic()
import ray
t1 = time.monotonic()
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="WARNING")
t2 = time.monotonic()
def pid():
    return os.getpid()
f = ray.remote(num_cpus=1, max_retries=0)(pid)
ray.get(f.remote())
t3 = time.monotonic()
ray.get(f.remote())
t4 = time.monotonic()
ray.shutdown()
t5 = time.monotonic()
print(json.dumps({"import": t1 - t0, "init": t2 - t1, "first_task": t3 - t2, "next_task": t4 - t3,
                  "shutdown": t5 - t4}))
"""


def _ray_fixed_cost(address: str) -> dict[str, float]:
    """What Ray itself costs a driver, without rpent: ``import ray``, ``ray.init``, the first task (its worker
    process starts: workers belong to one job, so every batch pays it), the next task, ``ray.shutdown``."""
    out = subprocess.run([sys.executable, "-c", _FIXED_COST_SCRIPT, address], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"fixed-cost probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _phases(root: str, t_launch: float, t_exit: float) -> dict[str, float]:
    """Where a batch's time outside its runs went, from its ledger's timestamps (seconds):
    ``head`` launch to the first start line, ``tail`` last end line to exit, ``dispatch`` summed
    (end - start - the run's own wall) per attempt, ``gaps`` summed end-to-next-start idle time."""
    ledger = [json.loads(line) for line in Path(root, "attempts.jsonl").read_text().splitlines() if line.strip()]
    starts = {(e["key"], e["attempt"]): e["t"] for e in ledger if e["event"] == "start"}
    ends = [e for e in ledger if e["event"] == "end"]
    dispatch = sum(e["t"] - starts[(e["key"], e["attempt"])] - float(e["wall_s"]) for e in ends)
    # an end and the next start often carry the same timestamp: the end sorts first (else the gap would span a run)
    events = sorted([("s", t) for t in starts.values()] + [("e", e["t"]) for e in ends], key=lambda x: (x[1], x[0] == "s"))
    gaps, last_end = 0.0, None
    for kind, t in events:
        if kind == "e":
            last_end = t
        elif last_end is not None:
            gaps += t - last_end
            last_end = None
    return {"head": min(starts.values()) - t_launch, "tail": t_exit - max(e["t"] for e in ends),
            "dispatch": dispatch, "gaps": gaps}


def _phase_text(p: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in p.items())


def _run_walls(root: str) -> list[float]:
    """Wall seconds of each run process of a batch (``end`` lines of its ``attempts.jsonl``)."""
    lines = Path(root, "attempts.jsonl").read_text().splitlines()
    return [float(e["wall_s"]) for e in map(json.loads, lines) if e.get("event") == "end"]


class _CpuSampler:
    """CPU seconds (user + system) of this process's descendants while a batch runs, by group, sampled
    every 0.5 s with psutil (a process's last < 0.5 s before it exits is missed): ``runs`` (the
    ``rpent`` runs and their env servers), ``driver`` (``rpent-batch``), ``ray workers`` (the Ray
    worker processes running the cell tasks), ``ray system`` (GCS, raylet, dashboard head and agents,
    monitors of the cluster this benchmark started; none when it attaches to a running cluster)."""

    def __init__(self) -> None:
        import threading

        self.groups: dict[str, float] = {}
        self._t0 = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _group(cmd: str) -> str:
        if "rpent.cli.batch" in cmd:
            return "driver"
        if "rpent.cli.main" in cmd or "env_server" in cmd:
            return "runs"
        if cmd.startswith("ray::") and not cmd.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent")):
            return "ray workers"
        return "ray system"

    def _loop(self) -> None:
        import psutil

        seen: dict[int, float] = {}
        me = psutil.Process()
        while True:
            for proc in me.children(recursive=True):
                try:
                    group = self._group(" ".join(proc.cmdline()))
                    t = proc.cpu_times()
                except psutil.Error:
                    continue
                cpu = t.user + t.system
                if proc.pid not in seen:  # first sight: a process started during the batch counts from 0
                    try:
                        seen[proc.pid] = 0.0 if proc.create_time() >= self._t0 - 0.05 else cpu
                    except psutil.Error:
                        continue
                self.groups[group] = self.groups.get(group, 0.0) + cpu - seen[proc.pid]
                seen[proc.pid] = cpu
            if self._stop.wait(0.5):
                return

    def __enter__(self) -> _CpuSampler:
        self._t0 = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
