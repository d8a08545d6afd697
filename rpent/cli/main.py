"""``rpent``: run an agent on one LIBERO / LIBERO-PRO or Meta-World task end to end.

Examples (offline: no API key, no GPU, no downloads)::

    rpent --robot libero --suite libero_object --task 0 --seed 0 --planner scripted
    rpent --robot metaworld --suite mt10 --task pick-place-v3 --seed 0   # expert planner; env server
                                                                         # under .venv-metaworld/bin/python

Dashboard (a session that outlives SSH, served to browsers; see ``rpent_tui.dashboard``)::

    rpent --robot libero --dashboard --dashboard-port 8000 --planner claude_code --model sonnet
    # on your machine: ssh -N -L 8000:127.0.0.1:8000 USER@HOST, then open http://127.0.0.1:8000/

Check the machine first (one line per check with the fix; ``--json`` for scripts)::

    rpent doctor

Exit codes: 0 = the run is labelled succeeded (the environment's success predicate held, or with
``--require-operator-verdict`` the operator's verdict was success); 1 = the run ended without
success (task failure, planner gave up, timeout, max turns, an operator's failure verdict or
abort); 2 = error (bad arguments, a service or planner error, an exception raised by a
``--code-file`` policy, a cancelled run). The run directory
is printed at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

__all__ = ["main", "build_parser", "config_from_args"]

PLANNERS = ("scripted", "api", "claude_code", "codex", "flash", "expert")


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent`` argument parser (imports no simulator, no SDK)."""
    p = argparse.ArgumentParser(
        prog="rpent",
        description="Run an LLM (or scripted) planner on a LIBERO / LIBERO-PRO or Meta-World task through robot tools, "
                    "and leave a complete run record.",
        epilog="Exit codes: 0 success (label succeeded: the environment predicate, or the operator's verdict with "
               "--require-operator-verdict), 1 task not solved, 2 error or cancelled. "
               "'rpent doctor [--json]' checks that this machine can run rpent (see 'rpent doctor --help').",
    )
    g = p.add_argument_group("task")
    from rpent.robots.registry import robot_names

    g.add_argument("--robot", default="libero", choices=robot_names(),
                   help="robot package (default libero; metaworld: its env server runs under --env-python)")
    g.add_argument("--suite", default=None,
                   help="suite, e.g. libero_object, libero_object_swap, libero_10 (required unless --dashboard); "
                        "metaworld: mt10 or mt50 (default mt50)")
    g.add_argument("--task", default=None,
                   help="task index within the suite (required unless --dashboard); metaworld: an index or a task "
                        "name such as reach-v3")
    g.add_argument("--seed", type=int, default=0,
                   help="selects the init state: seed mod n_init_states (metaworld: the goal variant seed mod 50); "
                        "0..2**63-1 (default 0)")
    g.add_argument("--libero-type", choices=("standard", "pro"), default=None,
                   help="LIBERO variant (default $LIBERO_TYPE, else pro; pro includes the standard suites)")
    g.add_argument("--max-episode-steps", type=int, default=None,
                   help="env steps before truncation (default 10000; metaworld 500, its maximum)")

    g = p.add_argument_group("planner")
    g.add_argument("--planner", default=None, choices=PLANNERS,
                   help="scripted (offline, no LLM), api (anthropic:/openai:/openai-chat: models), claude_code, codex, "
                        "flash (replays a flash plan of the task, no LLM; see rpent-flash), expert (metaworld: its "
                        "scripted expert policy, offline) (default: the robot's offline planner, scripted / expert)")
    g.add_argument("--model", default=None,
                   help="api: provider:id, e.g. anthropic:claude-sonnet-4-5, openai:gpt-5, openai-chat:glm-4.6; "
                        "claude_code/codex: bare id")
    g.add_argument("--base-url", default=None, help="api only: overrides ANTHROPIC_BASE_URL / OPENAI_BASE_URL")
    g.add_argument("--max-turns", type=int, default=100, help="model requests allowed (default 100)")
    g.add_argument("--max-tokens", type=int, default=8192, help="tokens per model response (default 8192)")
    g.add_argument("--planner-timeout-s", type=float, default=None, help="wall-clock limit of the planner (s)")
    g.add_argument("--reasoning-effort", choices=("none", "low", "medium", "high", "xhigh"), default=None)
    g.add_argument("--no-images", action="store_true", help="never send image bytes (text-only models)")
    g.add_argument("--claude-code-max-budget-usd", type=float, default=None)
    g.add_argument("--flash-dir", default=None,
                   help="flash only: directory of <cell>_plan.json/_anchors.json (default $RPENT_FLASH_DIR, "
                        "else <memory dir>/<robot>/flash)")
    g.add_argument("-i", "--interactive", action="store_true",
                   help="type operator lines during the run (delivered at the next turn); /help, /quit")

    g = p.add_argument_group("task memory")
    g.add_argument("--memory-dir", nargs="?", const="", default=None, metavar="DIR",
                   help="read the task memory <DIR>/<robot>/ (MEMORY.md + relevant leaves, manifest-checked, "
                        "read-only) into the planner prompt; without DIR: $RPENT_MEMORY_DIR, else ./memory. "
                        "Ignored in code mode. With --planner flash, plans come from <DIR>/<robot>/flash")

    g.add_argument("--explore", action="store_true",
                   help="explore the cell: sessions of attempts (reset tool), drafts into the memory inbox, "
                        "merged when solved (needs a memory dir; default ./memory)")
    g.add_argument("--explore-sessions", type=int, default=3, help="explore: fresh planner+toolkit sessions (default 3)")
    g.add_argument("--explore-attempts-per-session", type=int, default=5,
                   help="explore: attempts (resets) per session, 0 = unlimited (default 5)")
    g.add_argument("--auto-merge-memory", dest="auto_merge_memory", action="store_true", default=True,
                   help="explore: merge the inbox into the corpus after a solved exploration (default)")
    g.add_argument("--no-auto-merge-memory", dest="auto_merge_memory", action="store_false",
                   help="explore: leave the drafts in the inbox (merge later with rpent-memory merge)")

    g = p.add_argument_group("policy mode")
    g.add_argument("--policy-mode", choices=("tools", "code"), default="tools",
                   help="tools: the planner calls tools; code: the planner writes Python cells driving robo.<tool>()")
    g.add_argument("--code-file", default=None, help="run this Python file as the policy (code mode, no LLM)")
    g.add_argument("--code-timeout-s", type=float, default=120.0, help="wall-clock limit per code cell (default 120)")
    g.add_argument("--code-max-calls", type=int, default=100, help="robot tool calls per code cell (default 100); a cell that calls again after the "
                        "refusal is ended")

    g = p.add_argument_group("services")
    g.add_argument("--env-endpoint", default=None, help="attach to a running env server [http|socket://]HOST:PORT")
    g.add_argument("--env-python", default=None, metavar="PATH",
                   help="Python interpreter of the spawned env server (its own environment); default: the robot's "
                        "(metaworld: $RPENT_METAWORLD_PYTHON, else .venv-metaworld/bin/python; libero: this Python)")
    g.add_argument("--vla-endpoint", default=None, help="attach to a running VLA (predict contract) server")
    g.add_argument("--sam3-endpoint", default=None, help="attach to a running SAM3 server")
    g.add_argument("--cuda-device", type=int, default=None, help="GPU for spawned servers (EGL device for MuJoCo)")
    g.add_argument("--transport", choices=("http", "socket"), default="socket",
                   help="RPC transport of the servers rpent spawns (default socket: ~7%% step overhead vs ~14%% for http)")

    g = p.add_argument_group("record")
    g.add_argument("--output-dir", default=None,
                   help="run directory (default logs/<timestamp>_<suite>_t<task>_s<seed>); must be new or empty: a directory "
                        "holding any earlier run's file is refused")
    g.add_argument("--record-trajectory", action="store_true",
                   help="also write trajectories/<task_id>/ (planner events, executed actions, VLA predictions)")
    g.add_argument("--record-observations", choices=("vla", "all"), default="vla",
                   help="with --record-trajectory: which actions carry their camera images: vla (default) "
                        "or all (scripted too; what rpent-flywheel --rules v2 exports; one extra render per step)")
    g.add_argument("--policy-image-size", type=int, default=256, metavar="PX",
                   help="libero: edge of the square main/wrist policy images in pixels: what a VLA is sent and what "
                        "--record-observations stores (default 256, LIBERO's; e.g. 128 for a policy trained on 128 px "
                        "renders, cheaper to render)")
    g.add_argument("--require-operator-verdict", action="store_true",
                   help="refuse finish until the operator gave a verdict (the real-robot rule); needs stdin "
                        "to be a terminal (else refused at start; rpent-tui gives verdicts in its workbench)")
    g.add_argument("--no-video", action="store_true", help="do not write episode.mp4")
    g.add_argument("--step-images", choices=("auto", "every-step", "on-demand"), default="auto",
                   help="when a LIBERO step's camera images are rendered into the record: every-step (after every "
                        "motion), on-demand (state-only steps; the latest step rendered when a tool reads it and at "
                        "finish) or auto (default: on-demand for --planner scripted/flash, every-step otherwise)")
    g.add_argument("--verbose", action="store_true", help="DEBUG logging on stdout and in run.log")
    g.add_argument("--progress", choices=("auto", "live", "lines", "off"), default="auto",
                   help="progress on stderr while the run goes: live (one status line redrawn in place: step, tool, "
                        "elapsed), lines (a line per tool call), off; auto (default): live on a terminal, else lines")

    g = p.add_argument_group("dashboard (a session process served to browsers; tasks start with /rpent-task there)")
    g.add_argument("--dashboard", action="store_true",
                   help="start (or attach to) a session and serve the rpent-tui workbench to browsers (textual-serve); "
                        "--output-dir is the session directory (default logs/dashboard_<UTC stamp>)")
    g.add_argument("--dashboard-port", type=int, default=8000, help="dashboard HTTP port (default 8000)")
    g.add_argument("--dashboard-host", default="127.0.0.1",
                   help="bind address (default 127.0.0.1: use an SSH port forward; any other needs a token)")
    g.add_argument("--dashboard-token", default=None,
                   help="token browsers must present as ?token=... (default $RPENT_DASHBOARD_TOKEN); "
                        "required for a non-loopback --dashboard-host")
    g.add_argument("--dashboard-session", default=None, metavar="SESSION",
                   help="serve a running session (name from rpent-tui --list, or its directory) instead of starting one")
    return p


def config_from_args(args: argparse.Namespace):
    """Validate ``args`` and build a :class:`rpent.run.RunConfig`.

    Raises:
        SystemExit(2): via ``parser.error`` semantics (the caller prints the message).
        ValueError: an invalid combination, with the fix in the message.
    """
    from rpent.planners.base import PlannerConfig
    from rpent.run import RunConfig

    if args.output_dir:
        from rpent.cli.paths import check_output_dir

        check_output_dir(args.output_dir, "--output-dir")
    robot = apply_robot_defaults(args)
    args.suite, args.task = robot.resolve_task(args.suite, args.task)
    if args.planner not in robot.planners:
        raise ValueError(f"--planner {args.planner} cannot drive --robot {args.robot}; use one of: "
                         f"{', '.join(robot.planners)}")
    for kind in ("vla", "sam3"):
        if getattr(args, f"{kind}_endpoint") and kind not in getattr(robot, "services", ("vla", "sam3")):
            raise ValueError(f"--{kind}-endpoint: --robot {args.robot} has no tools that use a {kind.upper()} service; "
                             "remove it")
    if args.env_endpoint is None and hasattr(robot, "env_python"):
        robot.env_python(args)  # its own interpreter must exist before anything starts
    from rpent.run.config import check_max_episode_steps, check_seed

    check_seed(args.seed)
    check_max_episode_steps(args.max_episode_steps)
    if not 16 <= args.policy_image_size <= 1024:
        raise ValueError(f"--policy-image-size must be in 16..1024 pixels, got {args.policy_image_size}")
    if args.policy_image_size != 256 and args.robot != "libero":
        raise ValueError(f"--policy-image-size is for --robot libero; --robot {args.robot} renders its own size")
    if args.base_url and args.planner != "api":
        raise ValueError("--base-url is for --planner api only (claude_code/codex read ANTHROPIC_BASE_URL / CODEX_BASE_URL)")
    if args.flash_dir and args.planner != "flash":
        raise ValueError("--flash-dir is for --planner flash only")
    if args.flash_dir and Path(args.flash_dir).exists() and not Path(args.flash_dir).is_dir():
        raise ValueError(f"--flash-dir {args.flash_dir} is a file; pass the directory that holds <cell>_plan.json "
                         "(rpent-flash generate --destination DIR)")
    if args.planner == "api":
        # model prefix and key are checked before anything starts (no env server, no run directory)
        from rpent.planners.api.model_spec import resolve_provider

        resolve_provider(PlannerConfig(model=args.model, base_url=args.base_url))
    if args.code_file and args.policy_mode != "code":
        args.policy_mode = "code"
    if args.code_file and os.path.isdir(args.code_file):
        raise ValueError(f"--code-file {args.code_file!r} is a directory; pass the policy's .py file")
    if args.code_file and not os.path.isfile(args.code_file):
        raise ValueError(f"--code-file {args.code_file!r} does not exist")
    if args.code_file:
        # not UTF-8 or not Python: said now, before an env server starts or a run directory is made
        from rpent.policy.code_file import read_code_file

        read_code_file(args.code_file)
    if args.policy_mode == "code":
        from rpent.policy.compat import check_code_mode_options

        check_code_mode_options(args.planner, explore=args.explore, code_file=args.code_file)
    if args.explore:
        if args.planner == "flash":
            raise ValueError("Flash Mode is evaluation-only; remove --explore")
        if args.explore_sessions < 1:
            raise ValueError("--explore-sessions must be greater than 0")
        if args.explore_attempts_per_session < 0:
            raise ValueError("--explore-attempts-per-session must be >= 0 (0 = unlimited)")
        if args.interactive:
            raise ValueError("--explore does not support -i/--interactive; drop one of them")
        if args.memory_dir is None:
            args.memory_dir = ""  # the default location
    from rpent.rpc import parse_endpoint

    for flag in ("env_endpoint", "vla_endpoint", "sam3_endpoint"):
        value = getattr(args, flag)
        if value is not None:
            try:
                parse_endpoint(value)
            except ValueError as exc:
                raise ValueError(f"--{flag.replace('_', '-')}: {exc}") from None
    if not args.code_timeout_s > 0:
        raise ValueError(f"--code-timeout-s must be > 0 seconds, got {args.code_timeout_s:g}")
    if args.code_max_calls < 1:
        raise ValueError(f"--code-max-calls must be >= 1 robot-tool calls per cell, got {args.code_max_calls}")
    if args.cuda_device is not None and args.cuda_device < 0:
        raise ValueError(f"--cuda-device must be a GPU index >= 0, got {args.cuda_device}; omit it for the default")
    memory_dir = None
    if args.memory_dir is not None:
        from rpent.memory.layout import corpus_dir, default_memory_dir

        memory_dir = str(args.memory_dir or default_memory_dir())
        if args.planner == "flash" and not args.flash_dir:
            args.flash_dir = str(corpus_dir(memory_dir, args.robot) / "flash")
        elif args.policy_mode != "code" and args.planner != "flash" and not args.explore:
            from rpent.memory.context import load_context

            load_context(memory_dir, args.robot, args.suite, args.task)  # refuse a bad corpus before starting
    from rpent.planners.base import resolve_timeout_s

    timeout = resolve_timeout_s(args.planner, args.planner_timeout_s, interactive=args.interactive)
    pc = PlannerConfig(model=args.model, base_url=args.base_url, max_turns=args.max_turns,
                       max_tokens=args.max_tokens, timeout_s=timeout, reasoning_effort=args.reasoning_effort,
                       no_images=args.no_images, max_budget_usd=args.claude_code_max_budget_usd,
                       flash_dir=args.flash_dir)
    pc.validate()
    return RunConfig(suite=args.suite, task=args.task, seed=args.seed, libero_type=args.libero_type,
                     max_episode_steps=args.max_episode_steps, planner=args.planner, planner_config=pc,
                     output_dir=args.output_dir, env_endpoint=args.env_endpoint, vla_endpoint=args.vla_endpoint,
                     sam3_endpoint=args.sam3_endpoint, cuda_device=args.cuda_device, transport=args.transport,
                     policy_mode=args.policy_mode, code_file=args.code_file, code_timeout_s=args.code_timeout_s,
                     code_max_calls=args.code_max_calls, record_trajectory=args.record_trajectory,
                     record_observations=args.record_observations, policy_image_size=args.policy_image_size,
                     require_operator_verdict=args.require_operator_verdict, video=not args.no_video,
                     step_images=args.step_images, robot=args.robot, env_python=args.env_python,
                     memory_dir=memory_dir if args.planner != "flash" else None)


def apply_robot_defaults(args: argparse.Namespace):
    """Fill the robot-dependent defaults of ``args`` in place (``--planner``: the robot's offline
    planner; ``--max-episode-steps``: 10000, metaworld 500) and return the robot adapter
    (:mod:`rpent.robots.registry`)."""
    from rpent.robots.registry import get_robot

    robot = get_robot(args.robot)
    if args.planner is None:
        args.planner = robot.offline_planner
    if args.max_episode_steps is None:
        args.max_episode_steps = getattr(robot, "default_max_episode_steps", 10000)
    return robot


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rpent``; returns (and exits with) 0 / 1 / 2 (see module docstring).
    ``rpent doctor ...`` runs :func:`rpent.doctor.main` instead."""
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["doctor"]:
        from rpent.doctor import main as doctor_main

        return _exit(doctor_main(list(argv[1:])))
    parser = build_parser()
    args = parser.parse_args(argv)
    robot = apply_robot_defaults(args)
    if args.dashboard:
        return _exit(dashboard_main(args, parser))
    if (args.suite is None and robot.default_suite is None) or args.task is None:
        parser.error("--suite and --task are required (or use --dashboard and start tasks with /rpent-task there)")
    if args.require_operator_verdict and args.planner == "flash":
        # the flash planner replays a recorded plan and never asks: its finish would be refused at
        # the end of a whole episode
        print("rpent: error: --require-operator-verdict: the flash planner replays a plan and never asks the "
              "operator; drop the flag, or use a planner that asks (scripted, api, claude_code, codex)",
              file=sys.stderr)
        return _exit(2)
    if args.require_operator_verdict and not sys.stdin.isatty():
        # refuse before anything starts: without a terminal nobody can answer, and finish would be
        # refused only at the end of the run (NoOperator)
        print("rpent: error: --require-operator-verdict needs an operator at a terminal, but stdin is not a "
              "terminal; run rpent from a terminal, or use rpent-tui (or rpent --dashboard) to give verdicts there",
              file=sys.stderr)
        return _exit(2)
    try:
        cfg = config_from_args(args)
        info = robot.task_info(cfg.suite, cfg.task, cfg.libero_type)
    except ValueError as exc:  # includes the planners' PlannerConfigError (bad --model, missing key)
        print(f"rpent: error: {exc}", file=sys.stderr)  # one line: the flags parsed, their values do not fit
        return _exit(2)  # EXIT_ERROR (rpent.run.config), imported below with the run layer
    from rpent.cli.progress import RunProgress

    mode = "lines" if args.interactive and args.progress == "auto" else args.progress  # -i: keep the typed line
    progress = RunProgress(sys.stderr, "off" if args.explore else mode)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s",
                        handlers=[progress.log_handler(sys.stdout)])
    for noisy in ("httpx", "httpcore", "anthropic", "openai", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import trio

    from rpent.planners.steering import Steering
    from rpent.run import EXIT_ERROR, EXIT_SUCCESS, run_task
    from rpent.run.config import default_output_dir
    from rpent.robots.libero.toolkit import NoOperator, TerminalOperator
    from rpent.services import Supervisor

    cfg.argv = list(sys.argv) if argv is None else ["rpent", *argv]
    if cfg.output_dir is None:
        cfg.output_dir = str(default_output_dir(cfg.suite, cfg.task, cfg.seed))
    else:
        from rpent.run.record import check_fresh_output_dir

        try:  # any earlier run's file, finished or not (an exploration's too): never overwritten or mixed
            check_fresh_output_dir(cfg.output_dir)
        except FileExistsError as exc:
            print(f"rpent: {exc}", file=sys.stderr)
            return _exit(EXIT_ERROR)
    try:  # before any service starts: an unwritable place is a one-line refusal, not a traceback later
        Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"rpent: cannot create --output-dir {cfg.output_dir}: {exc.strerror or exc}. "
              "Choose a directory you can write to.", file=sys.stderr)
        return _exit(EXIT_ERROR)
    steering = Steering(interactive=args.interactive)
    operator = TerminalOperator() if sys.stdin.isatty() else NoOperator()
    if args.interactive:
        from rpent.planners.terminal import StdinSteeringReader, edit_initial_prompt

        cfg.user_message = edit_initial_prompt(robot.task_message(cfg.suite, cfg.task, cfg.seed, info.language))
        StdinSteeringReader(steering).start()

    async def go():
        result = []
        run_scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            async def on_signal() -> None:
                # SIGTERM/SIGHUP (e.g. an SSH drop): cancel the run; the record is still written. The
                # receiver stays open until the run has written its record: a second signal (timeout(1)
                # signals the command and then its process group; an SSH drop may bring SIGHUP after
                # SIGTERM) must not find the default handler and kill rpent before the record exists.
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        if run_scope.cancel_called:
                            print(f"rpent: received {name} again; still stopping the run and writing its record",
                                  file=sys.stderr)
                            continue
                        print(f"rpent: received {name}; stopping the run", file=sys.stderr)
                        steering.interrupt(stop=True, reason=f"received {name}")  # the record names the signal
                        run_scope.cancel()

            async def run() -> None:
                with run_scope:
                    if args.explore:
                        from rpent.explore import ExploreOptions, run_explore

                        opts = ExploreOptions(sessions=args.explore_sessions,
                                              attempts_per_session=args.explore_attempts_per_session,
                                              auto_merge=args.auto_merge_memory)
                        result.append(await run_explore(cfg, opts, operator=operator, steering=steering,
                                                        verbose=args.verbose))
                    else:
                        async with Supervisor(log_dir=cfg.output_dir) as sup:
                            result.append(await run_task(cfg, sup, operator=operator, steering=steering,
                                                         on_event=progress.on_event, verbose=args.verbose))
                nursery.cancel_scope.cancel()  # the run and its record are done: stop listening for signals

            nursery.start_soon(on_signal)
            nursery.start_soon(run)
        if not result:
            raise KeyboardInterrupt
        return result[0]

    try:
        try:
            outcome = trio.run(go)
        finally:
            progress.close()  # the live line goes before the result lines
    except BaseException as exc:  # noqa: BLE001 — one clear line for the user, never a traceback
        interrupted = _leaves(exc, (KeyboardInterrupt,))
        if interrupted:
            print(f"rpent: interrupted; the run record is in {cfg.output_dir}", file=sys.stderr)
            return _exit(EXIT_ERROR)
        errors = _leaves(exc, (Exception,))
        if not errors:
            raise
        print(f"rpent: error: {type(errors[0]).__name__}: {errors[0]}", file=sys.stderr)
        return _exit(EXIT_ERROR)
    if args.explore:
        print(f"rpent: exploration of {outcome['cell']}: solved={outcome['solved']} sessions={len(outcome['sessions'])} "
              f"archived attempts={len(outcome['attempts_archived'])} merged={bool(outcome['merged'])} "
              f"error={outcome['error']}")
        print(f"rpent: exploration record in {cfg.output_dir} (explore.json)")
        return _exit(0 if outcome["solved"] else (EXIT_ERROR if outcome["error"] else 1))
    if outcome.exit_code == EXIT_SUCCESS:
        verdict = "SUCCESS"
    else:
        verdict = "ERROR" if outcome.exit_code == EXIT_ERROR else "NOT SOLVED"
    basis = "" if verdict == "ERROR" else (" (operator verdict)" if outcome.verdict_required
                                           else " (environment predicate)")
    if outcome.label in ("aborted", "cancelled"):
        verdict = outcome.label.upper()
    if outcome.disagreement:
        basis += f" [disagreement: {outcome.disagreement}]"
    if outcome.environment_unstable:
        basis += f" [{outcome.environment_unstable.get('detail')}]"
    print(f"rpent: {verdict}{basis} | finish={outcome.finish} | error={outcome.error} | "
          f"env_steps={outcome.env_steps} | elapsed={outcome.stats.get('elapsed_s')}s")
    print(f"rpent: run record in {outcome.output_dir}")
    return _exit(outcome.exit_code)


def dashboard_argv(args: argparse.Namespace) -> list[str]:
    """The ``rpent-tui`` session flags equivalent to ``rpent``'s planner/task/service flags.

    Raises:
        ValueError: a flag a dashboard session cannot honour (``--interactive``, ``--code-file``,
            ``--no-images``, ``--claude-code-max-budget-usd``, ``--suite``/``--task``, ``--cuda-device``,
            ``--no-video``), with the fix.
    """
    refused = [flag for flag, given in (("--interactive", args.interactive), ("--code-file", args.code_file),
                                        ("--no-images", args.no_images),
                                        ("--claude-code-max-budget-usd", args.claude_code_max_budget_usd is not None),
                                        ("--suite", args.suite is not None), ("--task", args.task is not None),
                                        ("--cuda-device", args.cuda_device is not None),
                                        ("--no-video", args.no_video)) if given]
    if refused:
        raise ValueError(f"{', '.join(refused)} cannot be used with --dashboard: tasks start in the dashboard with "
                         "/rpent-task <suite> <task> <seed>, and operator lines are typed there")
    out = ["--robot", args.robot, "--planner", args.planner, "--max-turns", str(args.max_turns),
           "--max-episode-steps", str(args.max_episode_steps), "--policy-mode", args.policy_mode]
    for flag, value in (("--model", args.model), ("--base-url", args.base_url), ("--libero-type", args.libero_type),
                        ("--vla-endpoint", args.vla_endpoint), ("--sam3-endpoint", args.sam3_endpoint),
                        ("--env-endpoint", args.env_endpoint), ("--output-dir", args.output_dir)):
        if value is not None:
            out += [flag, str(value)]
    for flag, value in (("--record-trajectory", args.record_trajectory),
                        ("--require-operator-verdict", args.require_operator_verdict)):
        if value:
            out.append(flag)
    return out


def dashboard_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``rpent --dashboard``: start (or attach to) a session process, then serve the workbench with
    textual-serve until Ctrl+C. The session keeps running afterwards (stop it with rpent-tui --stop)."""
    import time

    from rpent.session.layout import SessionNotFound, SessionPaths, resolve_session
    from rpent.session.process import SessionStartError, start_detached, write_session_options
    from rpent_tui.cli import build_parser as tui_parser
    from rpent_tui.cli import session_config_from_args
    from rpent_tui.dashboard import TOKEN_ENV, check_bind, dashboard_command, make_server
    from rpent.session.model import SessionConfigError

    token = args.dashboard_token or os.environ.get(TOKEN_ENV) or None
    try:
        check_bind(args.dashboard_host, token)
        if not 0 < args.dashboard_port < 65536:
            raise ValueError(f"--dashboard-port {args.dashboard_port} is not a TCP port (1-65535)")
        if args.dashboard_session:
            paths = resolve_session(args.dashboard_session)
        else:
            tui_args = tui_parser().parse_args(dashboard_argv(args))
            if tui_args.output_dir is None:
                tui_args.output_dir = Path("logs") / f"dashboard_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
            config = session_config_from_args(tui_args)
            config.validate_planner()  # every TaskRun of the session would fail on it
            paths = SessionPaths(Path(config.output_dir).resolve())
            if not paths.running():
                write_session_options(paths, config)
                start_detached(paths)
    except (ValueError, SessionConfigError, SessionNotFound, SessionStartError, FileExistsError) as exc:
        parser.error(str(exc))
    print(f"rpent: session {paths.name} in {paths.root} (log {paths.log})", flush=True)
    server = make_server(dashboard_command(paths.root), args.dashboard_host, args.dashboard_port, token,
                         title=f"rpent {paths.name}")
    try:
        server.serve()
    finally:
        print(f"rpent: dashboard stopped; session {paths.name} keeps running "
              f"(attach: rpent-tui --attach {paths.name}; stop: rpent-tui --stop {paths.name})", flush=True)
    return 0


def _leaves(exc: BaseException, kinds: tuple) -> list[BaseException]:
    """The exceptions of ``kinds`` in ``exc``, looking inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e, kinds)]
    return [exc] if isinstance(exc, kinds) else []


def _exit(code: int) -> int:
    raise SystemExit(code)


if __name__ == "__main__":
    main()
