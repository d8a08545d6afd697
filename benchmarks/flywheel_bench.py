"""Flywheel benchmarks: (1) trajectory-recording overhead on a real LIBERO episode, (2) export speed
with ``--image-writer-threads 0`` vs ``N``.

Usage::

    MUJOCO_GL=egl python benchmarks/flywheel_bench.py [--chunks 8] [--scripted-steps 40]
        [--vla-latency-s 0.0] [--export-frames 300] [--threads 4] [--skip-export]

Part 1 runs the same action sequence twice on a real ``LiberoSim`` (libero_goal task 0):
``--scripted-steps`` scripted steps, then ``--chunks`` VLA chunks of 5 actions, doing per step
what ``LiberoToolkit.env_step`` does. Baseline (no recording, video on as by default): step +
main-camera render for ``episode.mp4``, one ``policy_obs`` per VLA query. Recorded: step +
``policy_obs`` (main + wrist) after every step + the recorder; VLA queries reuse that
observation. It prints the wall times, the overhead, and the recorder's own share (time inside
recorder calls + the final drain of its writer thread). ``--vla-latency-s`` adds a simulated
VLA inference time per chunk to both variants; planner time is left out, so the percentages
are upper bounds for a real run.

Part 2 writes one synthetic successful record of ``--export-frames`` VLA frames made from real
LIBERO renders, then exports it with 0 and ``--threads`` image-writer threads and prints both
times and whether the datasets are identical.

Part 3 (``--scripted-runs DIR``): export throughput for ``--episodes`` (50) scripted
episodes. DIR holds real successful scripted runs recorded with every observation::

    rpent --robot libero --suite libero_object --task T --seed 0 --planner scripted \
        --record-trajectory --record-observations all --output-dir DIR/tT

The 50 episodes are built from those runs: episode i is the last ``--frames-per-episode`` (60)
actions up to and including the success step of run ``i mod R`` (R = runs found), written as its
own record (``actions.jsonl`` renumbered, images hard-linked, ``task.json`` copied), twice: as
scripted actions (rule set v2's input) and relabelled as VLA chunks of 5 with a prediction per
chunk (the input today's exporter can export). Each variant runs as a fresh ``rpent-flywheel``
process (wall clock including interpreter start and the lerobot import, as a user sees it):
the baseline is today's exporter (the tree of ``--baseline-rev``, rule set v1, PNG, 0 threads,
on the VLA form), then rule set v2 on the scripted form with PNG and with video, each with 0 and
``--threads`` image-writer threads (``--threads 0``: only 0), and with ``--full-stats-row`` PNG
with ``--image-stats full`` (lerobot's camera statistics on every pixel). ``--repeats R`` runs all variants R times, interleaved (round 1 of
every variant, then round 2, ...), and keeps the median wall time of each. It prints frames/s,
the speed-up over the baseline, the process's CPU time (user + system, the process and its
children; on a shared machine the less load-dependent figure) and its ratio to the baseline's, bytes per frame of the dataset, and the load average before
and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _actions(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-0.3, 0.3, (n, 7)).astype(np.float32)
    a[:, 6] = -1.0
    return a


def bench_recording(args: argparse.Namespace, workdir: Path) -> list[dict]:
    """Part 1. Returns the policy observations rendered in the recorded pass (reused by part 2).

    Mirrors what the LIBERO toolkit does per env step (``LiberoToolkit.env_step``): without
    recording it renders the main camera for ``episode.mp4`` (video on, the default) and one
    ``policy_obs`` per VLA query; with recording it renders ``policy_obs`` (main + wrist) after
    every step, hands the one before each action to the recorder, and reuses it for VLA queries.
    """
    from rpent.recording import TaskInfo, TrajectoryRecorder
    from rpent.robots.libero.sim import LiberoSim

    n_chunk = 5
    scripted = _actions(args.scripted_steps, 1)
    vla = _actions(args.chunks * n_chunk, 2).reshape(args.chunks, n_chunk, 7)
    sim = LiberoSim("libero_goal", 0, seed=0, max_episode_steps=10_000)
    sim.policy_obs()  # warm the renderer
    frames_seen: list[dict] = []

    def video_frame() -> None:
        sim.render_camera("agentview", 256, 256)

    def baseline() -> float:
        sim.reset()
        t0 = time.perf_counter()
        for a in scripted:
            sim.step(a)
            video_frame()
        for chunk in vla:
            sim.policy_obs()  # the VLA query's observation
            time.sleep(args.vla_latency_s)
            for a in chunk:
                sim.step(a)
                video_frame()
        return time.perf_counter() - t0

    def recorded(lean: bool) -> tuple[float, float]:
        """``lean``: scripted steps render only the video frame and are recorded state-only."""
        sim.reset()
        in_recorder = 0.0
        t0 = time.perf_counter()
        t = time.perf_counter()
        rec = TrajectoryRecorder(workdir / f"rec_{time.monotonic_ns()}",
                                 TaskInfo("libero", "libero_goal", 0, 0, sim.task_language, "bench"))
        rec.begin_tool_call("c0", "move_to", {})
        in_recorder += time.perf_counter() - t
        obs = {"state": sim.robot_obs()["state"]} if lean else sim.policy_obs()
        step = 0
        for a in scripted:
            res = sim.step(a)
            if lean:
                video_frame()
                nxt = {"state": res["obs"]["state"]}
            else:
                nxt = sim.policy_obs()  # video frame = its main image
            t = time.perf_counter()
            rec.record_action(a, obs, call_id="c0", source="scripted", reward=res["reward"],
                              terminated=res["terminated"], truncated=res["truncated"], step=step)
            in_recorder += time.perf_counter() - t
            obs, step = nxt, step + 1
        t = time.perf_counter()
        rec.end_tool_call("c0", {})
        rec.begin_tool_call("c1", "pi0_pick", {"prompt": "open the drawer"})
        in_recorder += time.perf_counter() - t
        if lean:
            obs = sim.policy_obs()  # the VLA query's observation, as in the baseline
        for chunk in vla:
            time.sleep(args.vla_latency_s)  # the query reuses the cached observation
            t = time.perf_counter()
            pid = rec.begin_prediction("open the drawer", "c1", "pi0_pick", chunk)
            in_recorder += time.perf_counter() - t
            for i, a in enumerate(chunk):
                res = sim.step(a)
                nxt = sim.policy_obs()
                frames_seen.append(nxt)
                t = time.perf_counter()
                rec.record_action(a, obs, call_id="c1", source="vla", pred_id=pid, index_in_chunk=i,
                                  reward=res["reward"], terminated=res["terminated"], truncated=res["truncated"],
                                  step=step)
                in_recorder += time.perf_counter() - t
                obs, step = nxt, step + 1
            t = time.perf_counter()
            rec.end_prediction(pid, len(chunk))
            in_recorder += time.perf_counter() - t
        t = time.perf_counter()
        rec.end_tool_call("c1", {})
        rec.close("finished", True)  # drains the background writer
        in_recorder += time.perf_counter() - t
        return time.perf_counter() - t0, in_recorder

    # calibration: physics step and render times on this machine
    sim.reset()
    t = time.perf_counter()
    for a in scripted[:20]:
        sim.step(a)
    step_s = (time.perf_counter() - t) / 20
    t = time.perf_counter()
    for _ in range(3):
        sim.policy_obs()
    obs_s = (time.perf_counter() - t) / 3

    base = min(baseline() for _ in range(args.repeats))
    wall, in_rec = min((recorded(False) for _ in range(args.repeats)), key=lambda r: r[0])
    lean_wall, lean_rec = min((recorded(True) for _ in range(args.repeats)), key=lambda r: r[0])
    sim.close()
    n_actions = args.scripted_steps + args.chunks * n_chunk
    print("== part 1: recording overhead (real LiberoSim, libero_goal t0, video on as by default) ==")
    print(f"actions: {args.scripted_steps} scripted + {args.chunks}x5 VLA; simulated VLA latency "
          f"{args.vla_latency_s:.3f} s/chunk; no planner time (percentages are upper bounds)")
    print(f"physics step {step_s * 1e3:.1f} ms; policy_obs (2 cameras, 256 px) {obs_s * 1e3:.0f} ms")
    print(f"baseline wall  {base:8.2f} s  ({base / n_actions * 1e3:.0f} ms/action)")
    print(f"recorded, policy_obs after every step     {wall:8.2f} s  overhead {100 * (wall - base) / base:+.1f} %"
          f"  (recorder calls + drain {in_rec:.2f} s = {100 * in_rec / base:.1f} %; the rest is wrist renders)")
    print(f"recorded, scripted steps state-only (lean) {lean_wall:8.2f} s  overhead {100 * (lean_wall - base) / base:+.1f} %"
          f"  (recorder calls + drain {lean_rec:.2f} s = {100 * lean_rec / base:.1f} %)")
    return frames_seen


def bench_export(args: argparse.Namespace, workdir: Path, frames: list[dict]) -> None:
    """Part 2: export the same record with 0 and ``args.threads`` image-writer threads."""
    from rpent.flywheel import export_records
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset
    from rpent.recording import TaskInfo, TrajectoryRecorder

    if not frames:
        from rpent.robots.libero.sim import LiberoSim

        with LiberoSim("libero_goal", 0, seed=0) as sim:
            frames = [sim.policy_obs() for _ in range(4)]
    root = workdir / "export_input"
    rec = TrajectoryRecorder(root, TaskInfo("libero", "libero_goal", 0, 0, "open the drawer", "bench"))
    rec.begin_tool_call("c", "pi0_pick", {})
    acts = _actions(args.export_frames, 3)
    for k in range(0, args.export_frames, 5):
        n = min(5, args.export_frames - k)
        pid = rec.begin_prediction("open the top drawer", "c", "pi0_pick", acts[k : k + 5])
        for i in range(n):
            rec.record_action(acts[k + i], frames[(k + i) % len(frames)], call_id="c", source="vla", pred_id=pid,
                              index_in_chunk=i, reward=0.0, terminated=False, truncated=False, step=k + i)
        rec.end_prediction(pid, n)
    rec.end_tool_call("c", {})
    rec.close("finished", True)

    times = {}
    for threads in (0, args.threads):
        out = workdir / f"export_t{threads}"
        t = time.perf_counter()
        report = export_records(root, out, image_writer_threads=threads, progress=False)
        times[threads] = time.perf_counter() - t
        assert report["counts"]["frames"] == args.export_frames
    LeRobotDataset = import_lerobot_dataset()
    a = LeRobotDataset("bench/a", root=workdir / "export_t0" / "train")
    b = LeRobotDataset("bench/b", root=workdir / f"export_t{args.threads}" / "train")
    same = len(a) == len(b) and all(
        all(bool((a[i][k] == b[i][k]).all()) if hasattr(a[i][k], "shape") else a[i][k] == b[i][k] for k in ("image", "wrist_image", "state", "actions", "task"))
        for i in range(0, len(a), max(1, len(a) // 25))
    )
    print(f"== part 2: export of {args.export_frames} frames (real LIBERO renders, 256x256) ==")
    print(f"--image-writer-threads 0: {times[0]:6.2f} s ({args.export_frames / times[0]:.0f} frames/s)")
    print(f"--image-writer-threads {args.threads}: {times[args.threads]:6.2f} s ({args.export_frames / times[args.threads]:.0f} frames/s)"
          f"  speed-up x{times[0] / times[args.threads]:.2f}; datasets identical (sampled frames): {same}")


def _build_episode(src: Path, dst: Path, frames: int, as_vla: bool) -> int:
    """Write one record at ``dst`` from the last ``frames`` actions of record ``src`` up to its success step."""
    actions = [json.loads(line) for line in (src / "actions.jsonl").read_text().splitlines()]
    end = next(i for i, a in enumerate(actions) if a["terminated"])
    window = actions[max(0, end + 1 - frames) : end + 1]
    dst.mkdir(parents=True)
    task = json.loads((src / "task.json").read_text())
    (dst / "task.json").write_text(json.dumps(task))
    (dst / "planners.jsonl").write_text(json.dumps({"seq": 0, "t": 0.0, "kind": "tool_call", "call_id": "c",
                                                   "tool": "pi0_pick" if as_vla else "move_to", "args": {}}) + "\n")
    lines, preds = [], []
    for k, a in enumerate(window):
        for cam in ("main", "wrist"):
            target = dst / a["obs"][cam]
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(src / a["obs"][cam], target)
        b = {**a, "seq": k, "call_id": "c"}
        if as_vla:
            b.update(source="vla", tool="pi0_pick", pred_id=f"p{k // 5}", index_in_chunk=k % 5)
            if k % 5 == 0:
                rows = [w["action"] for w in window[k : k + 5]]
                preds.append({"pred_id": f"p{k // 5}", "instruction": task["task_language"], "call_id": "c",
                              "tool": "pi0_pick", "created_step": a["step"], "chunk_length": 5,
                              "n_executed": len(rows), "actions": rows, "t_start": 0.0, "t_end": 0.0})
        lines.append(json.dumps(b))
    (dst / "actions.jsonl").write_text("\n".join(lines) + "\n")
    (dst / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    return len(window)


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_scripted_export(args: argparse.Namespace, workdir: Path) -> None:
    """Part 3 (module docstring)."""
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    from rpent.recording.reader import find_record_dirs

    sources = [d for d in find_record_dirs(args.scripted_runs)
               if json.loads((d / "task.json").read_text()).get("environment_success") is True]
    if not sources:
        sys.exit(f"--scripted-runs {args.scripted_runs}: no successful records (record them as the docstring shows)")
    n_frames = 0
    for i in range(args.episodes):
        src = sources[i % len(sources)]
        n_frames += _build_episode(src, workdir / "scripted" / f"cell_{i:03d}" / "trajectories" / src.name,
                                   args.frames_per_episode, as_vla=False)
        _build_episode(src, workdir / "vla" / f"cell_{i:03d}" / "trajectories" / src.name,
                       args.frames_per_episode, as_vla=True)
    baseline_tree = workdir / "baseline_tree"
    baseline_tree.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", args.baseline_rev, "rpent"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(baseline_tree)], input=archive, check=True)

    def run(name: str, tree: Path, extra: list[str], inp: str) -> dict:
        out = workdir / f"out_{name}"
        env = dict(os.environ, PYTHONPATH=str(tree), HF_HOME=str(workdir / "hf_home"), HF_HUB_OFFLINE="1")
        t = time.perf_counter()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(workdir / inp),
                               "--output-dir", str(out), "--no-progress", *extra], capture_output=True, text=True,
                              env=env, cwd=workdir)  # not the repo: `-m` puts the cwd first on sys.path
        wall = time.perf_counter() - t
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        if proc.returncode != 0:
            sys.exit(f"{name} failed: {proc.stderr[-2000:]}")
        report = json.loads((out / "report.json").read_text())
        frames = report["counts"]["frames"]
        size = _dir_bytes(out / "train")
        row = {"name": name, "wall_s": wall, "cpu_s": cpu, "frames": frames, "fps": frames / wall, "bytes_per_frame": size / frames,
               "rpent": report.get("rpent_version"), "schema": report.get("schema_version")}
        shutil.rmtree(out)
        print(f"  done: {name}: {wall:.1f} s ({frames / wall:.1f} frames/s), CPU {cpu:.1f} s, report schema {row['schema']}, "
              f"load {_load()}", flush=True)
        return row

    print(f"== part 3: export of {args.episodes} scripted episodes x {args.frames_per_episode} frames "
          f"({n_frames} frames, from {len(sources)} real scripted run(s): {', '.join(d.name for d in sources)}) ==")
    print(f"load average before: {_load()}; {args.repeats} interleaved repeat(s), median wall per variant", flush=True)
    variants = [(f"baseline ({args.baseline_rev}, v1, PNG, 0 threads, VLA-relabelled form)", baseline_tree, [], "vla")]
    for video in (False, True):
        for threads in sorted({0, args.threads}):
            extra = ["--rules", "v2", "--image-writer-threads", str(threads)]
            if video:
                extra += ["--video", "--vcodec", args.vcodec]
            variants.append((f"v2, {'video ' + args.vcodec if video else 'PNG'}, {threads} threads", repo, extra,
                             "scripted"))
    if args.full_stats_row:
        variants.append(("v2, PNG, 0 threads, --image-stats full", repo,
                         ["--rules", "v2", "--image-stats", "full"], "scripted"))
    runs: dict[str, list[dict]] = {v[0]: [] for v in variants}
    for rep in range(args.repeats):
        for name, tree, extra, inp in variants:
            runs[name].append(run(f"{name} #{rep}", tree, extra, inp))
    rows = []
    for name, _, _, _ in variants:
        walls = sorted(r["wall_s"] for r in runs[name])
        wall = walls[len(walls) // 2] if len(walls) % 2 else 0.5 * (walls[len(walls) // 2 - 1] + walls[len(walls) // 2])
        frames = runs[name][0]["frames"]
        cpus = sorted(r["cpu_s"] for r in runs[name])
        rows.append({"name": name, "wall_s": wall, "walls": walls, "frames": frames, "fps": frames / wall,
                     "cpu_s": cpus[len(cpus) // 2],
                     "bytes_per_frame": runs[name][0]["bytes_per_frame"]})
    base, base_cpu = rows[0]["fps"], rows[0]["cpu_s"]
    for r in rows:
        print(f"{r['name']:<62} {r['wall_s']:7.1f} s  {r['frames']:5d} frames  {r['fps']:6.1f} frames/s  "
              f"x{r['fps'] / base:4.2f}  CPU {r['cpu_s']:6.1f} s (x{base_cpu / r['cpu_s']:4.2f})  "
              f"{r['bytes_per_frame'] / 1000:7.1f} kB/frame  "
              f"(walls {', '.join(f'{w:.1f}' for w in r['walls'])})")
    print(f"load average after: {_load()}")


def main() -> None:
    """Parse arguments, run both parts, print figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--scripted-steps", type=int, default=40)
    p.add_argument("--vla-latency-s", type=float, default=0.0)
    p.add_argument("--repeats", type=int, default=1,
                   help="part 1: passes per variant (best kept); part 3: interleaved rounds (median kept)")
    p.add_argument("--export-frames", type=int, default=300)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--skip-export", action="store_true")
    p.add_argument("--full-stats-row", action="store_true",
                   help="part 3: add v2 PNG with --image-stats full (lerobot's camera statistics on every pixel)")
    p.add_argument("--skip-recording", action="store_true")
    p.add_argument("--scripted-runs", type=Path, default=None,
                   help="part 3 only: directory of real scripted runs recorded with --record-observations all")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--frames-per-episode", type=int, default=60)
    p.add_argument("--vcodec", default="libsvtav1", choices=("libsvtav1", "h264"))
    p.add_argument("--baseline-rev", default="874b14d", help="git revision of today's exporter (before the columnar writer)")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="rpent-flywheel-bench-"))
    os.environ.setdefault("HF_HOME", str(workdir / "hf_home"))
    try:
        if args.scripted_runs is not None:
            bench_scripted_export(args, workdir)
            return
        frames = [] if args.skip_recording else bench_recording(args, workdir)
        if not args.skip_export:
            bench_export(args, workdir, frames)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
