"""``rpent-eval``: batch evaluation of a VLA policy on LIBERO or Meta-World (closed loop, no planner).

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

``--robot`` is ``libero`` (the default: the config's LIBERO env worker processes) or ``metaworld``:
Meta-World env server subprocesses under ``.venv-metaworld`` (one per task x seed cell) and a
``vla.predict`` policy server, by default Meta-World's scripted expert (:mod:`rpent.eval.metaworld`)::

    rpent-eval --robot metaworld --suite mt10 --tasks 0-9 --seeds 0 --policy expert
    rpent-eval --robot metaworld --suite mt50 --tasks 3,5 --seeds 0-4 --policy endpoint --policy-endpoint socket://127.0.0.1:9000

The Meta-World flags (``--suite --tasks --seeds --policy --policy-endpoint --max-episode-steps
--env-python --images``) are refused with ``--robot libero`` (its settings come from ``--config``),
and ``--config``/overrides/``--ray-address`` with ``--robot metaworld``.
"""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console


#: Flags of ``--robot metaworld`` only (dest names) and their defaults.
METAWORLD_FLAGS = {"suite": None, "tasks": None, "seeds": "0", "policy": "expert", "policy_endpoint": None,
                   "max_episode_steps": 500, "env_python": None, "images": False}


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-eval`` argument parser."""
    p = argparse.ArgumentParser(
        prog="rpent-eval",
        description="Evaluate a VLA policy on LIBERO in parallel env workers, or on Meta-World (--robot metaworld), "
                    "closed loop, no planner.",
        epilog="Example: rpent-eval --config libero_10_pi05_eval env.eval.total_num_envs=20 env.num_workers=2. "
               "Exit status: 0 success, 2 bad config or arguments (also: a placement the Ray cluster cannot "
               "satisfy), 1 evaluation failure (worker, policy, trajectory count, no replica left).",
    )
    from rpent.robots.registry import robot_names

    p.add_argument("--robot", default="libero", choices=robot_names(),
                   help="robot of the env workers: libero (default; settings from --config) or metaworld (Meta-World "
                        "env servers under .venv-metaworld; settings from the Meta-World flags below)")
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
    p.add_argument("--ray-address", default=None, metavar="auto|local|ray://HOST:PORT",
                   help="run the env workers as Ray actors on this cluster (and the VLA replicas of the config's "
                        "ray.replicas.vla); 'local' starts a private cluster on this machine for the run; overrides ray.address; "
                        "needs pip install -e '.[ray]'")
    mw = p.add_argument_group("--robot metaworld")
    mw.add_argument("--suite", default=None, help="mt10 or mt50 (default mt10)")
    mw.add_argument("--tasks", default=None, help="task indices in the suite, e.g. 0-9 or 0,3,5 (default: all)")
    mw.add_argument("--seeds", default=None, help="goal-variant seeds, e.g. 0 or 0-4 (default 0); one episode per "
                                                 "task x seed")
    mw.add_argument("--policy", default=None, choices=("expert", "endpoint"),
                    help="expert (default): Meta-World's scripted expert served over vla.predict under "
                         ".venv-metaworld; endpoint: a running vla.predict server (--policy-endpoint)")
    mw.add_argument("--policy-endpoint", default=None, metavar="[proto://]HOST:PORT",
                    help="the vla.predict server of --policy endpoint")
    mw.add_argument("--max-episode-steps", type=int, default=None, help="env steps before truncation, 1..500 (default 500)")
    mw.add_argument("--env-python", default=None,
                    help="the Meta-World interpreter (default $RPENT_METAWORLD_PYTHON or .venv-metaworld/bin/python)")
    mw.add_argument("--images", action="store_true", default=None,
                    help="also send main/wrist images (uint8 256x256x3) to the policy (the expert needs none)")
    return p


def _main_metaworld(args: argparse.Namespace) -> int:
    """``rpent-eval --robot metaworld`` (:mod:`rpent.eval.metaworld`)."""
    from rpent.batch.matrix import parse_index_list
    from rpent.eval.errors import EvalConfigError
    from rpent.eval.metaworld import build_settings, run_metaworld_eval
    from rpent.robots.metaworld import tasks as mw_tasks

    bad = [f for f, v in (("--config", args.config), ("--ray-address", args.ray_address),
                          ("--show-plan", args.show_plan or None), ("--list-configs", args.list_configs or None))
           if v is not None]
    if bad or args.overrides:
        items = bad + (["overrides " + " ".join(args.overrides)] if args.overrides else [])
        verb = "applies" if len(items) == 1 else "apply"
        print(f"rpent-eval: error: {', '.join(items)} {verb} to --robot libero only; --robot metaworld takes "
              "--suite --tasks --seeds --policy (see --help)", file=sys.stderr)
        return 2
    suite = (args.suite or "mt10").lower()
    try:
        n = len(mw_tasks._suite(suite))
        tasks = parse_index_list(args.tasks if args.tasks is not None else f"0-{n - 1}", "--tasks")
        seeds = parse_index_list(args.seeds if args.seeds is not None else "0", "--seeds")
        settings = build_settings(suite, tasks, seeds, args.policy or "expert", args.policy_endpoint,
                                  args.max_episode_steps or 500, args.env_python, bool(args.images))
    except (ValueError, EvalConfigError) as exc:
        print(f"rpent-eval: config error: {exc}", file=sys.stderr)
        return 2
    return _run_and_report(lambda: run_metaworld_eval(settings, args.logs_dir), with_completeness=True)


def _run_and_report(run, *, with_completeness: bool = False) -> int:
    """Run an evaluation (``run()`` returns its outcome) and print the log dir and metric lines.

    Returns the exit status: 0 done (with ``with_completeness``: 1 when episodes are missing),
    2 a config error, 1 an evaluation or cluster failure, 130 interrupted (one line on stderr each).
    """
    from rpent.cluster.errors import ClusterError
    from rpent.eval.errors import EvalConfigError, EvalError
    from rpent.eval.outputs import metric_lines

    try:
        outcome = run()
    except EvalConfigError as exc:
        print(f"rpent-eval: config error: {exc}", file=sys.stderr)
        return 2
    except (EvalError, ClusterError) as exc:
        print(f"rpent-eval: evaluation failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rpent-eval: interrupted; finished episodes are in episodes.jsonl", file=sys.stderr)
        return 130
    print(f"log dir: {outcome.run_dir}")
    completeness = outcome.completeness if with_completeness else None
    for line in metric_lines(outcome.metrics, completeness):  # rates as value, k/N and the Wilson 95% interval
        print(line)
    return 1 if completeness is not None and not completeness.complete else 0


def main(argv: list[str] | None = None) -> int:
    """Run ``rpent-eval``; returns the exit status (see the module docstring)."""
    from rpent.eval.config import DEFAULT_CONFIG_NAME, load_eval_config, shipped_config_names
    from rpent.cluster.errors import ClusterError
    from rpent.eval.errors import EvalConfigError

    args = build_parser().parse_args(argv)
    if args.robot == "metaworld":
        return _main_metaworld(args)
    given = [f"--{k.replace('_', '-')}" for k in METAWORLD_FLAGS if getattr(args, k) is not None]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        print(f"rpent-eval: error: {', '.join(given)} {verb} to --robot metaworld only; LIBERO settings come from "
              "--config and key=value overrides", file=sys.stderr)
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

    def run():
        if on_ray:
            from rpent.eval.ray_workers import run_eval_on_ray

            return run_eval_on_ray(settings, loaded, on_ray[1], logs_dir=args.logs_dir, console=err,
                                   show_progress=not args.no_progress)
        return run_eval(settings, loaded, logs_dir=args.logs_dir, console=err, show_progress=not args.no_progress)

    return _run_and_report(run)


if __name__ == "__main__":
    raise SystemExit(main())
