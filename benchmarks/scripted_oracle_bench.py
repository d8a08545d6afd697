"""Scripted pick-and-place with simulator-oracle object geometry, per task (prototype benchmark).

For each task of the given suites (seed 0 by default) this script:

1. builds :class:`rpent.robots.libero.sim.LiberoSim` in-process and parses the instruction
   (:func:`rpent.robots.libero.strategy.parse_instruction`);
2. matches the object/target phrases to simulator object names
   (:func:`~rpent.robots.libero.strategy.match_object_names`);
3. **perception check**: renders agentview with depth + instance segmentation at each
   ``--perception-sizes`` (default 256 and 1024), takes the mask of each phrase
   (:func:`~rpent.robots.libero.strategy.segment_by_name`), back-projects it to world points
   and reports the error of the mask's median world point (xy and 3-D) and of the
   points-based estimate's center against the oracle box center, plus render cost;
4. runs :func:`~rpent.robots.libero.strategy.pick_and_place` with oracle boxes
   (``LiberoSim.object_bbox``), or, with ``--perceived``, with estimates from the
   segmentation + back-projection of step 3 (support height from the pixels around the
   mask) refined by a second look with the wrist camera while hovering above the object
   (what the offline planner will do with ``segment`` + ``back_project``);
5. prints one table row per task: success (env predicate), env steps, wall time.

Run (2 CPU cores, CPU EGL rendering; ~10-20 s per task)::

    MUJOCO_GL=egl python benchmarks/scripted_oracle_bench.py --suites libero_object libero_object_swap

Exit status 0 always (it reports; it does not assert). ``--json PATH`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from rpent.robots.libero import geometry, strategy
from rpent.robots.libero.sim import LiberoSim


def perceive(sim: LiberoSim, phrases: dict[str, str], size: int) -> dict:
    """Segment + back-project each phrase at one render size; return estimates and errors."""
    t0 = time.perf_counter()
    r = sim.render_camera("agentview", size, size, depth=True, segmentation=True)
    render_s = time.perf_counter() - t0
    meta = sim.camera_meta("agentview", size, size)
    t1 = time.perf_counter()
    wmap = geometry.world_map(r["depth"], meta)
    backproject_s = time.perf_counter() - t1
    out: dict = {"size": size, "render_s": render_s, "backproject_s": backproject_s}
    for role, phrase in phrases.items():
        mask, names = strategy.segment_by_name(phrase, r["segmentation"], r["segmentation_ids"])
        entry: dict = {"phrase": phrase, "names": names, "pixels": int(mask.sum())}
        if mask.sum() >= 10 and names:
            pts = wmap[mask]
            median = np.median(pts, axis=0)
            oracle = sim.object_bbox(names[0])["center"]
            floor = strategy.support_height(mask, wmap, r["segmentation"])
            est = strategy.ObjectEstimate.from_points(pts, floor_z=floor, source=f"agentview{size}")
            entry.update(
                median_xyz=[round(float(x), 4) for x in median],
                median_err_xy=float(np.linalg.norm(median[:2] - oracle[:2])),
                median_err_3d=float(np.linalg.norm(median - oracle)),
                est_center_err_xy=float(np.linalg.norm(np.array(est.center[:2]) - oracle[:2])),
                est_top_err=float(est.top_z - sim.object_bbox(names[0])["max"][2]),
                est_bottom_err=float(est.bottom_z - sim.object_bbox(names[0])["min"][2]),
                estimate=est,
            )
        out[role] = entry
    return out


def run_task(suite: str, task: int, seed: int, max_steps: int, sizes: list[int], perceived: bool) -> dict:
    """One row of the table (see the module docstring)."""
    t0 = time.perf_counter()
    sim = LiberoSim(suite, task, seed=seed, max_episode_steps=max_steps)
    build_s = time.perf_counter() - t0
    row: dict = {"suite": suite, "task": task, "seed": seed, "instruction": sim.task_language, "build_s": build_s}
    try:
        goal = strategy.parse_instruction(sim.task_language)
        if isinstance(goal, strategy.Unsupported):
            row.update(success=False, status="unsupported", reason=goal.reason, env_steps=0, wall_s=0.0)
            return row
        names = sim.object_names()
        candidates = names["objects"] + names["fixtures"]
        obj_names = strategy.match_object_names(goal.object_phrase, candidates)
        tgt_names = strategy.match_object_names(goal.target_phrase, candidates)
        row.update(object=obj_names, target=tgt_names)
        if not obj_names or not tgt_names:
            row.update(success=False, status="no_match", reason="phrase matched no object", env_steps=0, wall_s=0.0)
            return row
        percepts = [perceive(sim, {"object": goal.object_phrase, "target": goal.target_phrase}, s) for s in sizes]
        row["perception"] = [
            {k: ({kk: vv for kk, vv in v.items() if kk != "estimate"} if isinstance(v, dict) else v) for k, v in p.items()}
            for p in percepts
        ]
        if perceived:
            best = percepts[-1]
            if "estimate" not in best["object"] or "estimate" not in best["target"]:
                row.update(success=False, status="not_visible", reason="object or target not segmented", env_steps=0, wall_s=0.0)
                return row
            obj = best["object"]["estimate"]
            tgt = best["target"]["estimate"]

            def relocate(_state: dict, phrase: str = goal.object_phrase) -> strategy.ObjectEstimate | None:
                # a second look from above: the wrist camera while hovering over the object
                r = sim.render_camera("wrist", 256, 256, depth=True, segmentation=True)
                mask, _ = strategy.segment_by_name(phrase, r["segmentation"], r["segmentation_ids"])
                if mask.sum() < 10:
                    return None
                wmap = geometry.world_map(r["depth"], sim.camera_meta("wrist", 256, 256))
                return strategy.ObjectEstimate.from_points(wmap[mask], source="wrist256")
        else:
            ob, tb = sim.object_bbox(obj_names[0]), sim.object_bbox(tgt_names[0])
            obj = strategy.ObjectEstimate.from_box(ob["center"], ob["axes"], ob["half_extents"])
            tgt = strategy.ObjectEstimate.from_box(tb["center"], tb["axes"], tb["half_extents"])
            relocate = None
        t1 = time.perf_counter()
        result = strategy.pick_and_place(strategy.InProcessExecutor(sim.step, sim.robot_obs()), obj, tgt, goal.relation, relocate=relocate)
        wall = time.perf_counter() - t1
        row.update(
            success=bool(sim.success() or result["success"]),
            status="done",
            stage=result["stage"],
            reason=result.get("reason"),
            env_steps=sim.steps,
            wall_s=wall,
            step_ms=1000.0 * wall / max(1, sim.steps),
        )
        return row
    finally:
        sim.close()


def timing(suite: str = "libero_object", task: int = 0, repeats: int = 20) -> None:
    """Print the simulator's costs (median wall ms): build, reset, physics step, renders."""

    def med(fn, n: int) -> float:
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return 1000.0 * float(np.median(ts))

    t0 = time.perf_counter()
    sim = LiberoSim(suite, task, seed=0, max_episode_steps=100000)
    print(f"build LiberoSim({suite}, {task}): {time.perf_counter() - t0:.2f} s (includes first reset)")
    try:
        print(f"reset (init state + 10 settle steps): {med(sim.reset, 5):.1f} ms")
        rng = np.random.default_rng(0)
        acts = rng.uniform(-0.3, 0.3, size=(10 * repeats, 7))
        it = iter(acts)
        print(f"step (physics only, no render): {med(lambda: sim.step(next(it)), 10 * repeats):.2f} ms")
        print(f"chunk_step 5 actions: {med(lambda: sim.chunk_step(np.zeros((5, 7))), repeats):.1f} ms")
        print(f"policy_obs (2 x 256 px renders): {med(sim.policy_obs, repeats):.1f} ms")
        for size in (128, 256, 1024):
            n = repeats if size < 1024 else max(3, repeats // 4)
            rgb = med(lambda: sim.render_camera("agentview", size, size), n)
            dep = med(lambda: sim.render_camera("agentview", size, size, depth=True), n)
            seg = med(lambda: sim.render_camera("agentview", size, size, depth=True, segmentation=True), n)
            r = sim.render_camera("agentview", size, size, depth=True)
            meta = sim.camera_meta("agentview", size, size)
            wm = med(lambda: geometry.world_map(r["depth"], meta), n)
            print(f"agentview {size}px: rgb {rgb:.1f} ms, rgb+depth {dep:.1f} ms, rgb+depth+seg {seg:.1f} ms, "
                  f"world map {wm:.1f} ms")
        print(f"wrist 256px rgb+depth: {med(lambda: sim.render_camera('wrist', 256, 256, depth=True), repeats):.1f} ms")
        print(f"camera_meta: {med(lambda: sim.camera_meta('wrist', 256, 256), repeats):.3f} ms")
    finally:
        sim.close()


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run every task, print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", nargs="+", default=["libero_object", "libero_object_swap"])
    p.add_argument("--tasks", nargs="*", type=int, default=None, help="task indices (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-episode-steps", type=int, default=600)
    p.add_argument("--perception-sizes", nargs="*", type=int, default=[256, 1024])
    p.add_argument("--perceived", action="store_true", help="grasp from segmentation estimates instead of oracle boxes")
    p.add_argument("--json", default=None, help="write all rows to this JSON file")
    p.add_argument("--timing", action="store_true", help="only print simulator step/render costs")
    args = p.parse_args(argv)
    if args.timing:
        timing()
        return 0

    from rpent.robots.libero import suites

    rows = []
    print(f"{'suite':<20} {'task':>4} {'ok':>3} {'steps':>6} {'wall_s':>7} {'ms/step':>7}  "
          f"{'seg err xy/3d cm (obj@' + str(args.perception_sizes[-1] if args.perception_sizes else '-') + ')':<26} stage/reason")
    for suite in args.suites:
        tasks = args.tasks if args.tasks else list(suites.suite_info(suite).ready_tasks)
        for task in tasks:
            row = run_task(suite, task, args.seed, args.max_episode_steps, args.perception_sizes, args.perceived)
            rows.append(row)
            perc = ""
            if row.get("perception"):
                o = row["perception"][-1]["object"]
                if "median_err_xy" in o:
                    perc = f"{100 * o['median_err_xy']:.1f}/{100 * o['median_err_3d']:.1f}"
            print(f"{suite:<20} {task:>4} {'Y' if row['success'] else 'n':>3} {row['env_steps']:>6} "
                  f"{row['wall_s']:>7.2f} {row.get('step_ms', 0):>7.1f}  {perc:<26} "
                  f"{row.get('stage', row.get('status'))} {row.get('reason') or ''}", flush=True)
    for suite in args.suites:
        sr = [r for r in rows if r["suite"] == suite]
        print(f"{suite}: {sum(r['success'] for r in sr)}/{len(sr)} succeeded")
    if rows and rows[0].get("perception"):
        for i, size in enumerate(args.perception_sizes):
            rs = [r["perception"][i] for r in rows if r.get("perception")]
            errs = [x[role]["median_err_xy"] for x in rs for role in ("object", "target") if "median_err_xy" in x[role]]
            est = [x[role]["est_center_err_xy"] for x in rs for role in ("object", "target") if "est_center_err_xy" in x[role]]
            matched = sum(1 for x in rs for role in ("object", "target") if x[role]["names"] and x[role]["pixels"] >= 10)
            print(f"agentview {size}px: render+depth+seg {1000 * np.median([x['render_s'] for x in rs]):.0f} ms, "
                  f"back-projection {1000 * np.median([x['backproject_s'] for x in rs]):.0f} ms; "
                  f"matched+visible {matched}/{2 * len(rs)}; mask-median xy error median {100 * np.median(errs):.1f} cm "
                  f"(max {100 * np.max(errs):.1f}); points-estimate center xy error median {100 * np.median(est):.1f} cm "
                  f"(max {100 * np.max(est):.1f})")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rows, f, indent=1, default=str)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
