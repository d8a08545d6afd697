"""``rpent-eval --config libero_10_pi05_eval`` on a GPU, end to end: wall time, trajectories/min, split, memory.

Runs the product document's LIBERO-10 protocol (10 envs x 10 rollout epochs = 100 trajectories, 520 env
steps each, 5-step action chunks, 5 flow steps) with a full-size Pi0.5 of **random weights** in the
evaluation process on CUDA (bf16, CUDA graphs) and MuJoCo rendering through EGL on the same GPU. Random
weights never succeed, so every episode runs its full 520 steps: the worst case for wall time.

Steps (one process tree, printed as it goes, a table last):

1. EGL check: one env worker-style process renders LIBERO-10 task 0 with ``--cuda-device`` applied the way
   the evaluation applies it (``CUDA_VISIBLE_DEVICES`` as given, ``MUJOCO_EGL_DEVICE_ID`` derived by
   :func:`rpent.robots.libero.egl.egl_device_for`); prints the GL renderer string (an NVIDIA GPU, not
   llvmpipe) and single-env ms per physics step / per policy render;
2. writes a full-size random checkpoint (6.7 GB bf16 safetensors) to local disk;
3. ``python -m rpent.cli.eval --config libero_10_pi05_eval --cuda-device N policy.device=cuda:N ...`` as a
   subprocess (its own start-up included), GPU memory sampled with ``nvidia-smi`` every 0.5 s;
4. reads the run's ``metrics.json`` (or, if the run was cut short by ``--timeout``, ``episodes.jsonl``).

Usage (on the GPU machine; ``benchmarks/gpu_eval_device.sh`` sets up the simulator stack there)::

    CUDA_VISIBLE_DEVICES=0 python benchmarks/gpu_eval_bench.py --cuda-device 0 --out /tmp/gpu_eval
    python benchmarks/gpu_eval_bench.py --envs 2 --epochs 1 --steps 40     # a short smoke run

Target: <= 6 minutes for the 100 full-length trajectories on one H200. Reference point
(product document 003): RLinf + ApxInf, 800 LIBERO-10 trajectories in ~12 minutes on 8 GPUs, i.e.
~100 trajectories per GPU per 12 minutes (8.3 trajectories/min per GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_EGL_CHILD = r"""
import os, sys, time, json
from rpent.robots.libero.egl import configure_rendering
from rpent.robots.libero.sim import LiberoSim
cuda = int(sys.argv[1])
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
configure_rendering(cuda)
t0 = time.perf_counter()
sim = LiberoSim("libero_10", 0, seed=0, max_episode_steps=1000, cuda_device=cuda)
build = time.perf_counter() - t0
obs = sim.policy_obs()
import ctypes
renderer = vendor = None
for lib in ("libOpenGL.so.0", "libGL.so.1"):  # the context robosuite made current on this thread
    try:
        gl = ctypes.CDLL(lib)
    except OSError:
        continue
    gl.glGetString.restype = ctypes.c_char_p
    gl.glGetString.argtypes = [ctypes.c_uint]
    renderer, vendor = gl.glGetString(0x1F01), gl.glGetString(0x1F00)  # GL_RENDERER, GL_VENDOR
    break
a = [0, 0, 0, 0, 0, 0, -1]
for _ in range(5):
    sim.step(a)
t0 = time.perf_counter()
for _ in range(50):
    sim.step(a)
step_ms = (time.perf_counter() - t0) / 50 * 1e3
t0 = time.perf_counter()
for _ in range(20):
    sim.policy_obs()
render_ms = (time.perf_counter() - t0) / 20 * 1e3
print(json.dumps({"cuda_visible_devices_given": visible, "egl_device_id": os.environ.get("MUJOCO_EGL_DEVICE_ID"),
                  "gl_renderer": renderer.decode() if renderer else None, "gl_vendor": vendor.decode() if vendor else None,
                  "build_s": build, "step_ms": step_ms, "policy_render_ms": render_ms,
                  "image_mean": float(obs["main_image"].mean())}))
sim.close()
"""


class GpuMemorySampler(threading.Thread):
    """Samples ``nvidia-smi`` total used memory (MiB) of GPU ``index`` every ``period`` s; keeps the peak."""

    def __init__(self, index: int, period: float = 0.5):
        super().__init__(daemon=True)
        self.index, self.period = index, period
        self.samples: list[tuple[float, int]] = []
        self._halt = threading.Event()

    def read(self) -> int | None:
        try:
            out = subprocess.run(["nvidia-smi", f"--id={self.index}", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
            return int(out.splitlines()[0])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            return None

    def run(self) -> None:
        t0 = time.perf_counter()
        while not self._halt.is_set():
            v = self.read()
            if v is not None:
                self.samples.append((time.perf_counter() - t0, v))
            self._halt.wait(self.period)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def physical_gpu(cuda_device: int) -> int:
    """nvidia-smi index of torch's cuda:N (through CUDA_VISIBLE_DEVICES)."""
    from rpent.robots.libero.egl import egl_device_for

    return egl_device_for(cuda_device)


def egl_check(cuda_device: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), MUJOCO_GL="egl")
    p = subprocess.run([sys.executable, "-c", _EGL_CHILD, str(cuda_device)], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return {"error": p.stderr[-3000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def read_results(logs: Path) -> dict:
    runs = sorted(p for p in logs.iterdir() if p.is_dir())
    if not runs:
        return {}
    run = runs[-1]
    out: dict = {"run_dir": str(run)}
    m = run / "metrics.json"
    if m.is_file():
        out["metrics"] = json.loads(m.read_text())
    e = run / "episodes.jsonl"
    if e.is_file():
        out["episodes"] = [json.loads(line) for line in e.read_text().splitlines() if line.strip()]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda-device", type=int, default=0)
    ap.add_argument("--envs", type=int, default=10, help="env.eval.total_num_envs")
    ap.add_argument("--epochs", type=int, default=10, help="env.eval.rollout_epoch")
    ap.add_argument("--steps", type=int, default=520, help="env.eval.max_episode_steps")
    ap.add_argument("--workers", default="auto", help="env.num_workers")
    ap.add_argument("--timeout", type=float, default=540.0, help="stop the evaluation after this many seconds (partial results are read)")
    ap.add_argument("--checkpoint", default=None, help="existing checkpoint dir (default: write a full random one)")
    ap.add_argument("--out", default=None, help="directory for logs and bench.json (default: a temp dir)")
    ap.add_argument("--skip-egl-check", action="store_true")
    ap.add_argument("--extra", nargs="*", default=[], help="more rpent-eval overrides")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke run: tiny random Pi0.5 on the CPU, CPU EGL")
    ap.add_argument("--baseline-root", default=None,
                    help="also run the same evaluation with the rpent of this checkout (e.g. main's) for a side-by-side row")
    ap.add_argument("--stages", default="",
                    help="comma-separated rollout.pipeline_stage_num values: one run of this checkout each (default: the "
                         "config's); the baseline checkout runs without the override")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="gpu_eval_"))
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"args": vars(args), "cpus": os.cpu_count()}
    try:
        res["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError:
        res["gpu"] = None
    print(f"GPU: {res['gpu']}; CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}; {os.cpu_count()} CPUs", flush=True)
    if not args.skip_egl_check:
        res["egl"] = egl_check(args.cuda_device)
        print("EGL check:", json.dumps(res["egl"])[:3000], flush=True)
    sampler = GpuMemorySampler(physical_gpu(args.cuda_device))
    ckpt = args.checkpoint
    if ckpt is None:
        import torch

        sys.path.insert(0, str(ROOT / "benchmarks"))
        from vla_bench import write_random_checkpoint

        from rpent.models.pi05.config import full_config
        from rpent.models.pi05.tiny import build_tiny_checkpoint

        t0 = time.perf_counter()
        if args.tiny:
            ckpt = str(build_tiny_checkpoint(out / "pi05_tiny"))
        else:
            ckpt = str(write_random_checkpoint(full_config(), out / "pi05_random", torch.bfloat16))
        res["checkpoint_write_s"] = time.perf_counter() - t0
        print(f"wrote a full-size random checkpoint in {res['checkpoint_write_s']:.1f} s", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the random tensors were made on the GPU: give their memory back
    res["gpu_mem_before_mib"] = sampler.read()
    stages = [int(v) for v in args.stages.split(",") if v.strip()]
    if stages:
        rows = [run_once(args, ckpt, out / f"run_this_s{st}", ROOT, f"this, S={st}", [f"rollout.pipeline_stage_num={st}"])
                for st in stages]
    else:
        rows = [run_once(args, ckpt, out / "run_this", ROOT, "this checkout")]
    if args.baseline_root:
        rows.append(run_once(args, ckpt, out / "run_baseline", Path(args.baseline_root).resolve(), "baseline"))
    res["runs"] = rows
    (out / "bench.json").write_text(json.dumps(res, indent=1, default=str))

    print(f"\nrpent-eval libero_10_pi05_eval on {res['gpu']}, {os.cpu_count()} CPUs (random weights: every episode runs "
          f"{args.steps} steps); EGL renderer: {res.get('egl', {}).get('gl_renderer')}")
    head = (f"{'code':<16} {'traj':>5} {'launch->exit s':>14} {'traj/min':>8} {'start s':>7} {'rollout s':>9} {'traj/min':>8} | "
            f"{'physics':>7} {'render':>6} {'policy':>6} {'ipc':>5} | {'ms/step':>7} {'ms/query':>8} {'batch':>5} | {'GPU MiB':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        t = r.get("timing") or {}
        roll = t.get("wall_s") or float("nan")
        n = r["n_episodes"]
        nw = max(1, len({w.get("worker") for w in t.get("per_worker", [])}))
        q = max(1, t.get("policy_queries", 0))
        steps = max(1, n * args.steps)
        print(f"{r['label']:<16} {n:>5} {r['total_s']:>14.1f} {60 * n / r['total_s']:>8.1f} {t.get('startup_s', float('nan')):>7.1f} "
              f"{roll:>9.1f} {60 * n / roll:>8.1f} | {100 * t.get('physics_s', 0) / nw / roll:>6.0f}% {100 * t.get('render_s', 0) / nw / roll:>5.0f}% "
              f"{100 * t.get('policy_s', 0) / roll:>5.0f}% {100 * t.get('driver_io_s', 0) / roll:>4.0f}% | "
              f"{1000 * t.get('physics_s', 0) / steps * 1:>7.1f} {1000 * t.get('policy_s', 0) / q:>8.1f} "
              f"{t.get('policy_batch_envs', 0) / q:>5.1f} | {r['gpu_mem_peak_mib'] - (res['gpu_mem_before_mib'] or 0) if r['gpu_mem_peak_mib'] else 'n/a':>7}")
    print("physics/render: per env worker, as a share of the rollout wall (workers run in parallel); policy/ipc: driver. "
          "ms/step: physics per env step in a worker; batch: mean envs per policy call; GPU MiB: peak minus this "
          "benchmark's own context before the run (policy + EGL contexts of the workers).")
    print(f"wrote {out / 'bench.json'}")


def run_once(args, ckpt: str, out: Path, code_root: Path, label: str, extra: list[str] | None = None) -> dict:
    """One ``rpent-eval`` subprocess with ``code_root`` first on PYTHONPATH (``extra``: more overrides);
    returns its figures."""
    logs = out / "logs"
    out.mkdir(parents=True, exist_ok=True)
    device = ["policy.device=cpu"] if args.tiny else [f"policy.device=cuda:{args.cuda_device}"]
    gpu_opt = [] if args.tiny else ["--cuda-device", str(args.cuda_device)]
    cmd = [sys.executable, "-m", "rpent.cli.eval", "--config", "libero_10_pi05_eval", *gpu_opt,
           "--no-progress", "--logs-dir", str(logs), *device, "runner.logger.logger_backends=[]",
           f"env.eval.total_num_envs={args.envs}", f"env.eval.rollout_epoch={args.epochs}", f"env.eval.max_episode_steps={args.steps}",
           f"env.num_workers={args.workers}", *args.extra, *(extra or [])]
    env = dict(os.environ, APXINF_PI05_MODEL_DIR=ckpt, MUJOCO_GL="egl",
               PYTHONPATH=os.pathsep.join(filter(None, [str(code_root), os.environ.get("PYTHONPATH")])))
    print(f"[{label}: {code_root}] $", " ".join(cmd), flush=True)
    sampler = GpuMemorySampler(physical_gpu(args.cuda_device))
    res: dict = {"label": label, "code_root": str(code_root)}
    sampler.start()
    t0 = time.perf_counter()
    with open(out / "eval_stdout.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=code_root)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            res["timed_out"] = True
    total = time.perf_counter() - t0
    sampler.stop()
    res.update({"rc": rc, "total_s": total})
    res["gpu_mem_peak_mib"] = max((v for _, v in sampler.samples), default=None)
    res["gpu_mem_samples"] = sampler.samples[:: max(1, len(sampler.samples) // 100)]
    r = read_results(logs) if logs.is_dir() else {}
    res["run_dir"] = r.get("run_dir")
    res["n_episodes"] = len(r.get("episodes", []))
    met = r.get("metrics") or {}
    res["timing"] = met.get("timing")
    res["metrics"] = met.get("metrics")
    print((out / "eval_stdout.log").read_text()[-1500:], flush=True)
    print(f"[{label}] exit {rc}{' (cut at --timeout)' if res.get('timed_out') else ''}; {res['n_episodes']} trajectories; "
          f"launch -> exit {total:.1f} s", flush=True)
    return res


if __name__ == "__main__":
    main()
