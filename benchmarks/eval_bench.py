"""rpent-eval throughput: episodes per minute vs env workers, and where the wall time goes.

Usage::

    MUJOCO_GL=egl python benchmarks/eval_bench.py [--workers 1 2] [--envs 2] [--epochs 1] [--steps 60]
        [--chunk 5] [--policies pi05 rpc] [--suite libero_object] [--task-ids 2 3] [--cuda-device N]

For each policy and worker count it runs a real evaluation (:func:`rpent.eval.runner.run_eval`) of
``--envs`` envs x ``--epochs`` epochs x ``--steps`` env steps on the real LIBERO simulator:

* ``pi05``: rpent's tiny random-weight Pi0.5 in the driver process (the policy compute is real,
  its size is not: a full-size Pi0.5 on a GPU costs ~30-200 ms per query, see vla_pi05_reference §4);
* ``rpc``: the replay policy server in zero-action mode over a socket RPC endpoint (policy compute ~0,
  so its time is the RPC round trip with two 256x256x3 images per env).

Columns: episodes/min over the rollout wall time (epochs only; env workers build their first envs
during start-up, in parallel) and including start-up (``start s``: spawn, imports, env builds); then
the time in each category as a share of the rollout wall time. Worker categories (physics = env
steps, render = policy observations, reset = reset + settle, build = env construction) are summed over
workers, so with W workers they can add up to W x 100%. ``policy`` is the driver inside
``predict`` (for ``rpc`` this is the RPC call), ``ipc`` the driver sending/receiving worker
messages. The machine's load average is printed: other processes on a shared machine slow it.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _zero_server() -> tuple[subprocess.Popen, str]:
    from rpent.rpc.protocol import READY_PREFIX

    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent.robots.components.replay_policy_server", "--zero", "--transport", "socket",
         "--port", "0", "--parent-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    line = proc.stdout.readline()
    if not line.startswith(READY_PREFIX):
        proc.kill()
        raise SystemExit(f"replay server did not start: {line!r}")
    return proc, line[len(READY_PREFIX):].strip()


def run_one(policy: str, workers: int, args: argparse.Namespace, logs: Path, ckpt: Path | None) -> dict:
    """One evaluation; returns its figures."""
    from rich.console import Console

    from rpent.eval.config import load_eval_config
    from rpent.eval.runner import run_eval
    from rpent.eval.validation import build_settings

    overrides = [
        f"env.eval.suite={args.suite}", f"env.eval.task_ids=[{','.join(map(str, args.task_ids))}]",
        f"env.eval.total_num_envs={args.envs}", f"env.num_workers={workers}", f"env.eval.rollout_epoch={args.epochs}",
        f"env.eval.max_episode_steps={args.steps}", f"rollout.model.num_action_chunks={args.chunk}",
        f"rollout.model.apxinf.action_horizon={max(10, args.chunk)}", "runner.logger.logger_backends=[]",
    ]
    server = None
    if policy == "rpc":
        server, endpoint = _zero_server()
        overrides.append(f"policy.endpoint={endpoint}")
    else:
        os.environ["APXINF_PI05_MODEL_DIR"] = str(ckpt)
        overrides.append("policy.device=cpu" if args.cuda_device is None else f"policy.device=cuda:{args.cuda_device}")
    try:
        loaded = load_eval_config("libero_10_pi05_eval", overrides)
        settings = build_settings(loaded, cuda_device=args.cuda_device)
        t0 = time.perf_counter()
        out = run_eval(settings, loaded, logs_dir=logs, show_progress=False, console=Console(file=io.StringIO()))
        total = time.perf_counter() - t0
    finally:
        if server is not None:
            server.stdin.close()
            server.wait(timeout=15)
    t = out.timing
    n = len(out.results)
    return {
        "policy": policy, "workers": workers, "episodes": n, "wall_s": t.wall_s, "total_s": total,
        "startup_s": t.startup_s,
        "eps_per_min": 60.0 * n / t.wall_s, "eps_per_min_total": 60.0 * n / total,
        "physics": t.physics_s, "render": t.render_s, "reset": t.reset_s, "build": t.build_s,
        "policy_s": t.policy_s, "ipc": t.driver_io_s, "queries": t.policy_queries,
        "ms_per_query": 1000.0 * t.policy_s / max(1, t.policy_queries),
        "ms_per_step": 1000.0 * t.physics_s / max(1, sum(r.episode_len for r in out.results)),
        "ms_per_render": 1000.0 * t.render_s / max(1, sum(r.num_policy_queries for r in out.results)),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the grid and print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--envs", type=int, default=2, help="total_num_envs (same for every worker count)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=60, help="max_episode_steps")
    p.add_argument("--chunk", type=int, default=5, help="num_action_chunks (env steps per policy query)")
    p.add_argument("--policies", nargs="+", default=["pi05", "rpc"], choices=["pi05", "rpc"])
    p.add_argument("--suite", default="libero_object")
    p.add_argument("--task-ids", type=int, nargs="+", default=[2, 3])
    p.add_argument("--cuda-device", type=int, default=None)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="rpent-eval-bench-") as tmp:
        ckpt = None
        if "pi05" in args.policies:
            from rpent.models.pi05.tiny import build_tiny_checkpoint

            ckpt = build_tiny_checkpoint(Path(tmp) / "tiny_pi05")
        rows = []
        for policy in args.policies:
            for w in args.workers:
                print(f"running policy={policy} workers={w} ...", file=sys.stderr, flush=True)
                rows.append(run_one(policy, w, args, Path(tmp) / "logs", ckpt))

    load = os.getloadavg()
    print(f"\nrpent-eval benchmark: {args.suite} tasks {args.task_ids}, {args.envs} envs x {args.epochs} epoch(s) x "
          f"{args.steps} steps, chunk {args.chunk}; {os.cpu_count()} CPUs, load average {load[0]:.1f}/{load[1]:.1f}")
    head = (f"{'policy':<6} {'W':>2} {'eps':>4} {'start s':>7} {'wall s':>7} {'eps/min':>8} {'+start':>7} | {'physics':>7} {'render':>7} "
            f"{'reset':>6} {'build':>6} {'policy':>7} {'ipc':>5} | {'ms/step':>7} {'ms/rend':>7} {'ms/query':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        share = {k: 100.0 * r[k] / r["wall_s"] for k in ("physics", "render", "reset", "build", "policy_s", "ipc")}
        print(f"{r['policy']:<6} {r['workers']:>2} {r['episodes']:>4} {r['startup_s']:>7.1f} {r['wall_s']:>7.1f} {r['eps_per_min']:>8.2f} "
              f"{r['eps_per_min_total']:>7.2f} | {share['physics']:>6.0f}% {share['render']:>6.0f}% {share['reset']:>5.0f}% "
              f"{share['build']:>5.0f}% {share['policy_s']:>6.1f}% {share['ipc']:>4.1f}% | {r['ms_per_step']:>7.1f} "
              f"{r['ms_per_render']:>7.1f} {r['ms_per_query']:>8.1f}")
    print("shares: % of the rollout wall time; worker columns are summed over workers (up to W x 100%). "
          "eps/min: rollout wall; +start: including worker start-up and policy load.")


if __name__ == "__main__":
    main()
