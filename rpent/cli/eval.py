"""``rpent-eval``: batch evaluation of a VLA policy on LIBERO (closed loop, no planner).

Usage::

    rpent-eval --config libero_10_pi05_eval                       # shipped config (the seed's protocol)
    rpent-eval --config my.yaml env.eval.total_num_envs=20 env.num_workers=2
    rpent-eval --config libero_10_pi05_eval policy.endpoint=http://127.0.0.1:8000
    rpent-eval --list-configs
    rpent-eval --config libero_10_pi05_eval --show-plan           # print the reset-state plan, run nothing
    rpent-eval --config my.yaml --ray-address auto                # env workers (+ VLA replicas) on a Ray cluster

Overrides are Hydra-style dotted ``key=value`` (``+key=value`` adds a key). The log directory is
``<--logs-dir>/<YYYYmmdd-HH:MM:SS>-<config name>/``. Exit status: 0 success, 2 bad config or
arguments (also: a placement the Ray cluster cannot satisfy), 1 evaluation failure (worker, policy,
trajectory count, no replica left).

``--robot`` is ``libero`` (the default): ``--robot metaworld`` is refused with exit status 2 and one
line naming what to use instead (``rpent-batch --robot metaworld``: its offline expert planner over
real Meta-World env servers, with success rates and Wilson intervals in ``report.json``), because
the env workers of rpent-eval are LIBERO simulator processes of the main environment.
"""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console


#: Why ``rpent-eval --robot metaworld`` is refused, and what to run instead (one line).
METAWORLD_REFUSED = ("--robot metaworld is not supported by rpent-eval (its env workers are LIBERO simulator "
                     "processes of the main environment); evaluate Meta-World with rpent-batch --robot metaworld "
                     "--suites mt10 --tasks 0-9 --seeds 0 (success rates in <results-root>/report.json)")


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-eval`` argument parser."""
    p = argparse.ArgumentParser(
        prog="rpent-eval",
        description="Evaluate a VLA policy on LIBERO in parallel env workers (closed loop, no planner).",
        epilog="Example: rpent-eval --config libero_10_pi05_eval env.eval.total_num_envs=20 env.num_workers=2",
    )
    from rpent.robots.registry import robot_names

    p.add_argument("--robot", default="libero", choices=robot_names(),
                   help="robot of the env workers: libero (default); metaworld is refused with the command to use "
                        "instead (rpent-batch --robot metaworld)")
    p.add_argument("--config", default=None, help="shipped config name (see --list-configs) or a YAML path")
    p.add_argument("overrides", nargs="*", help="Hydra-style overrides key=value (e.g. env.eval.rollout_epoch=2)")
    p.add_argument("--cuda-device", type=int, default=None,
                   help="GPU index for the policy and MuJoCo EGL rendering (envs and policy on one GPU)")
    p.add_argument("--logs-dir", default=os.environ.get("RPENT_EVAL_LOGS_DIR", "logs"),
                   help="parent of the generated log directory (default: $RPENT_EVAL_LOGS_DIR or ./logs)")
    p.add_argument("--list-configs", action="store_true", help="list the shipped configs and exit")
    p.add_argument("--show-plan", action="store_true",
                   help="validate the config, print which (task, reset state) pairs run where, and exit")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.add_argument("--ray-address", default=None, metavar="auto|ray://HOST:PORT",
                   help="run the env workers as Ray actors on this cluster (and the VLA replicas of the config's "
                        "ray.replicas.vla); overrides ray.address; needs pip install -e '.[ray]'")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``rpent-eval``; returns the exit status (see the module docstring)."""
    from rpent.eval.config import DEFAULT_CONFIG_NAME, load_eval_config, shipped_config_names
    from rpent.cluster.errors import ClusterError
    from rpent.eval.errors import EvalConfigError, EvalError

    args = build_parser().parse_args(argv)
    if args.robot != "libero":
        print(f"rpent-eval: error: {METAWORLD_REFUSED}", file=sys.stderr)
        return 2
    err = Console(stderr=True)
    if args.list_configs:
        print("\n".join(shipped_config_names()))
        return 0
    try:
        from rpent.eval.validation import build_settings

        loaded = load_eval_config(args.config or DEFAULT_CONFIG_NAME, args.overrides)
        on_ray = None
        if args.ray_address or "ray" in loaded.cfg:
            from rpent.eval.ray_workers import prepare_ray_eval

            on_ray = prepare_ray_eval(loaded, args.ray_address, cuda_device=args.cuda_device)
        settings = on_ray[0] if on_ray else build_settings(loaded, cuda_device=args.cuda_device)
        if args.show_plan:
            from rpent.eval.runner import plan_for, plan_text

            print(plan_text(plan_for(settings)), end="")
            return 0
    except EvalConfigError as exc:
        print(f"rpent-eval: config error: {exc}", file=sys.stderr)
        return 2
    except ClusterError as exc:
        print(f"rpent-eval: cluster error: {exc}", file=sys.stderr)
        return 2
    from rpent.eval.runner import run_eval

    print(f"Using Python at {sys.executable}", file=sys.stderr, flush=True)
    try:
        if on_ray:
            from rpent.eval.ray_workers import run_eval_on_ray

            outcome = run_eval_on_ray(settings, loaded, on_ray[1], logs_dir=args.logs_dir, console=err,
                                      show_progress=not args.no_progress)
        else:
            outcome = run_eval(settings, loaded, logs_dir=args.logs_dir, console=err,
                               show_progress=not args.no_progress)
    except EvalConfigError as exc:
        print(f"rpent-eval: config error: {exc}", file=sys.stderr)
        return 2
    except (EvalError, ClusterError) as exc:
        print(f"rpent-eval: evaluation failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rpent-eval: interrupted; finished episodes are in episodes.jsonl", file=sys.stderr)
        return 130
    from rpent.eval.outputs import metric_lines

    print(f"log dir: {outcome.run_dir}")
    for line in metric_lines(outcome.metrics):  # rates as value, k/N and the Wilson 95% interval
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
