"""``rpent-batch``: run a task x seed x arm matrix of ``rpent`` runs, resume it, report it, compare it.

Examples (offline: scripted planner)::

    rpent-batch --suites libero_object --tasks 0-1 --seeds 0-1 --parallel 2 --results-root results/obj --no-video
    rpent-batch --matrix ab.yaml --parallel 2 --results-root results/ab      # arms from a YAML file
    rpent-batch --suites libero_object --tasks 0-9 --seeds 0-4 --parallel 16 --ray-address auto \
        --results-root /shared/results/obj                                    # cells as Ray tasks on a cluster
    rpent-batch --results-root results/obj                                    # resume with the stored matrix
    rpent-batch --robot metaworld --suites mt10 --tasks 0-9 --seeds 0 --results-root results/mt10 --no-video
    rpent-batch --matrix experiments/libero_pro_leaderboard.yaml --parallel 2 --results-root results/lb
    rpent-batch --matrix experiments/libero_pro_leaderboard.yaml --enable-arm gpt-5.5 --results-root results/lb
    rpent-batch report results/obj
    rpent-batch status results/lb                                             # while it runs, from the files
    rpent-batch leaderboard results/lb --published experiments/published/rpent_libero_pro.yaml
    rpent-batch compare results/before results/after --fail-on-regression
    rpent-batch compare results/ab --arms before after
    rpent-batch compare results/before results/after --by label   # operator-verdict (label) success

Unknown flags are passed to every ``rpent`` run (``--max-episode-steps 600``, ``--no-video``,
``--max-turns 50``, ...). Exit codes of a batch: 0 every cell has a task outcome; 1 some cells
have none (infrastructure errors after the retries, a shared service failed, flash cells waiting
for their source run: re-run the same command to resume); 2 bad input or the results root is in
use; 130 interrupted (SIGINT or SIGTERM: finished cells are kept; re-run to resume). ``compare``: 0, or 1 with ``--fail-on-regression`` when B is significantly worse than
A overall or on a task; 2 bad input. ``leaderboard`` and ``status``: see ``rpent.cli.leaderboard``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser", "build_compare_parser", "matrix_from_args"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-batch`` (run) parser; unknown flags go to the runs."""
    from rpent.batch.executor import executor_names

    p = argparse.ArgumentParser(
        prog="rpent-batch", allow_abbrev=False,
        description="Run a task x seed x arm matrix of rpent runs on shared services, resume it, and report "
                    "success rates with Wilson intervals. Subcommands: 'rpent-batch compare A [B]', "
                    "'rpent-batch report ROOT', 'rpent-batch status ROOT' and 'rpent-batch leaderboard ROOT...' "
                    "(see their --help). Unknown flags are passed to every rpent run.",
        epilog="Exit codes: 0 every cell has a task outcome; 1 some cells have none (re-run the same command to "
               "resume); 2 bad input or results root in use; 130 interrupted (finished cells are kept; re-run to resume).")
    g = p.add_argument_group("matrix")
    g.add_argument("--matrix", default=None, help="YAML matrix file with arms (see rpent/batch/matrix.py)")
    g.add_argument("--suites", nargs="+", default=None, help="suites, e.g. libero_goal_swap")
    g.add_argument("--tasks", default=None, help="task indices: 0-9, 0,2,5-7")
    g.add_argument("--seeds", default=None, help="seeds (init states): 25-34")
    g.add_argument("--repeats", type=int, default=None, help="episodes per (task, seed) (default 1)")
    g.add_argument("--robot", default=None,
                   help="robot of every run (rpent --robot; default libero); its offline planner becomes the default "
                        "--planner (metaworld: expert)")
    g.add_argument("--enable-arm", action="append", default=[], metavar="ARM",
                   help="also run this optional arm of the matrix (repeatable; 'all': every optional arm), e.g. an "
                        "LLM planner arm that needs its API key; a results root gains a new arm without touching the "
                        "finished cells of the others")
    g = p.add_argument_group("single arm (without --matrix arms)")
    g.add_argument("--arm-name", default="default", help="name of the arm (default 'default')")
    g.add_argument("--planner", default=None, help="rpent --planner (default scripted)")
    g.add_argument("--model", default=None, help="rpent --model")
    g.add_argument("--policy-mode", choices=("tools", "code"), default=None)
    g.add_argument("--code-file", default=None, help="code-mode policy file")
    g.add_argument("--vla-checkpoint", default=None,
                   help="start one Pi0.5 VLA server from this checkpoint for the arm (default $PI05_CHECKPOINT_PATH)")
    g.add_argument("--vla-endpoint", default=None, help="attach a running VLA server for every run")
    g.add_argument("--sam3-checkpoint", default=None, help="start one SAM3 server (default $SAM3_CHECKPOINT_PATH)")
    g.add_argument("--sam3-endpoint", default=None, help="attach a running SAM3 server for every run")
    g.add_argument("--price-in", type=float, default=None, help="USD per million planner input tokens (report cost)")
    g.add_argument("--price-out", type=float, default=None, help="USD per million planner output tokens")
    g = p.add_argument_group("execution")
    g.add_argument("--results-root", required=True,
                   help="results directory: new or empty, or a batch's own (resumed; it holds matrix.json)")
    g.add_argument("--parallel", type=int, default=1, help="runs at once (default 1; each has its own env server)")
    g.add_argument("--max-retries", type=int, default=2,
                   help="extra attempts after an infrastructure error, per cell and invocation (default 2)")
    g.add_argument("--cell-timeout-s", type=float, default=None, help="wall-clock limit of one run (s)")
    g.add_argument("--executor", default="local",
                   help=f"where runs execute: {', '.join(executor_names())} or another registered executor "
                        "(rpent/batch/<name>_executor.py; default local)")
    g.add_argument("--ray-address", default=None, metavar="auto|local|ray://HOST:PORT",
                   help="run the cells as Ray tasks on this cluster (implies --executor ray; the matrix YAML's "
                        "'ray:' section sets resources, replicas and results mode; 'local' starts a private cluster on this "
                        "machine for the batch); needs pip install -e '.[ray]'")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (one line per finished attempt)")
    return p


def build_compare_parser() -> argparse.ArgumentParser:
    """The ``rpent-batch compare`` parser."""
    p = argparse.ArgumentParser(
        prog="rpent-batch compare",
        description="Compare arm B with arm A per task (Fisher exact, Benjamini-Hochberg adjusted) and overall "
                    "(Cochran-Mantel-Haenszel over the tasks).",
        epilog="Exit codes: 0; 1 with --fail-on-regression when B is significantly worse; 2 bad input.")
    p.add_argument("roots", nargs="+", metavar="RESULTS", help="RESULTS_A RESULTS_B, or one root with --arms A B")
    p.add_argument("--arms", nargs=2, metavar=("ARM_A", "ARM_B"), default=None, help="arm names (A then B)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when B is significantly worse than A")
    p.add_argument("--by", choices=("environment", "label"), default="environment",
                   help="what counts as a success: environment (default: the environment's success predicate) or "
                        "label (the run's label: the operator's verdict where one was required); the output says "
                        "which was compared")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    return p


def build_report_parser() -> argparse.ArgumentParser:
    """The ``rpent-batch report`` parser."""
    p = argparse.ArgumentParser(prog="rpent-batch report",
                                description="Rebuild report.json/report.md of a results root from its run records "
                                            "and print the table (runs nothing).",
                                epilog="Exit codes: 0 report written and printed, 2 RESULTS is not a results root "
                                       "or an option is bad.")
    p.add_argument("root", metavar="RESULTS")
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval coverage (default 0.95)")
    return p


def matrix_from_args(args: argparse.Namespace, extra: list[str], stored: dict | None):
    """Build the :class:`~rpent.batch.matrix.Matrix` from a YAML file, the flags and the stored
    ``matrix.json`` (flags override the file; with no matrix flags at all the stored matrix is resumed).

    Raises:
        ValueError: incomplete or malformed matrix (one line with the fix).
    """
    from rpent.batch.matrix import Arm, Matrix, load_matrix_file, parse_index_list

    given = any(v is not None for v in (args.matrix, args.suites, args.tasks, args.seeds, args.repeats, args.robot,
                                         args.planner, args.model, args.policy_mode, args.code_file,
                                         args.vla_checkpoint, args.vla_endpoint, args.sam3_checkpoint,
                                         args.sam3_endpoint, args.price_in, args.price_out))
    if not given and not extra and stored is not None:
        return Matrix.from_dict(stored)
    doc = load_matrix_file(args.matrix) if args.matrix else {}
    if args.suites:
        doc["suites"] = tuple(args.suites)
    if args.tasks is not None:
        doc["tasks"] = tuple(parse_index_list(args.tasks, "--tasks"))
    if args.seeds is not None:
        doc["seeds"] = tuple(parse_index_list(args.seeds, "--seeds"))
    if args.repeats is not None:
        doc["repeats"] = args.repeats
    doc["flags"] = tuple(doc.get("flags", ())) + tuple(extra)
    if args.robot:
        from rpent.robots.registry import get_robot

        try:
            robot = get_robot(args.robot)
        except ValueError as exc:
            raise ValueError(f"--robot: {exc}") from None
        doc["flags"] = ("--robot", args.robot) + doc["flags"]
        if args.planner is None and "arms" not in doc:
            args.planner = robot.offline_planner
    single = dict(planner=args.planner, model=args.model, policy_mode=args.policy_mode,
                  code_file=str(Path(args.code_file).resolve()) if args.code_file else None,
                  vla_checkpoint=str(Path(args.vla_checkpoint).resolve()) if args.vla_checkpoint else None,
                  vla_endpoint=args.vla_endpoint,
                  sam3_checkpoint=str(Path(args.sam3_checkpoint).resolve()) if args.sam3_checkpoint else None,
                  sam3_endpoint=args.sam3_endpoint, price_in_usd_per_mtok=args.price_in,
                  price_out_usd_per_mtok=args.price_out)
    if "arms" in doc:
        if any(v is not None for v in single.values()):
            raise ValueError("the matrix file defines arms; set planner/model/vla/sam3/prices in its arms, not as flags")
    else:
        doc["arms"] = (Arm(name=args.arm_name, **{k: v for k, v in single.items() if v is not None}),)
    for key, flag in (("suites", "--suites"), ("tasks", "--tasks"), ("seeds", "--seeds")):
        if key not in doc:
            raise ValueError(f"no {key} given: pass {flag} (or '{key}:' in the --matrix file)")
    return Matrix(suites=doc["suites"], tasks=doc["tasks"], seeds=doc["seeds"], repeats=doc.get("repeats", 1),
                  arms=doc["arms"], flags=doc["flags"])


def _check_runs(matrix) -> tuple[int | None, str]:
    """Parse one run's command line per arm with rpent's own parser and validation, so a bad flag
    fails here, before anything starts. Returns the (cuda_device, transport) of the runs.

    Raises:
        ValueError: the first arm whose runs rpent would refuse (the message names the arm).
    """
    from rpent.batch.runner import run_argv
    from rpent.cli.main import build_parser as rpent_parser
    from rpent.cli.main import config_from_args

    cuda, transport = None, "socket"
    for arm in matrix.arms:
        for key, want_dir in (("vla_checkpoint", True), ("sam3_checkpoint", False), ("code_file", False)):
            path = getattr(arm, key, None)
            if path and not Path(path).exists():
                raise ValueError(f"arm {arm.name}: {key} {path} does not exist; fix the path in the matrix")
            if path and want_dir and not Path(path).is_dir():
                raise ValueError(f"arm {arm.name}: {key} {path} is not a directory (a Pi0.5 checkpoint is a "
                                 "directory); fix the path in the matrix")
        cell = matrix.cells(arm.name)[0]
        eps = {k: "127.0.0.1:1" for k, v in (("vla", arm.vla_endpoint), ("sam3", arm.sam3_endpoint)) if v}
        flash = Path("/nonexistent-check/flash") if arm.flash_from else None
        argv = run_argv(matrix, arm, cell, Path("/nonexistent-check"), eps, flash)[3:]
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = rpent_parser().parse_args(argv)
        except SystemExit:
            msg = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "bad run flags"
            raise ValueError(f"arm {arm.name}: the runs' flags are refused by rpent: {msg.replace('rpent: ', '')}") \
                from None
        if arm.share_env:  # its cells run as rpent-flash replay: its flags must be ones replay takes
            from rpent.batch.flash_plans import replay_argv
            from rpent.cli.flash import build_parser as flash_parser

            replay = replay_argv(arm, list(matrix.flags) + list(arm.flags), cell.suite, cell.task,
                                 {cell.seed: Path("/nonexistent-check/run")}, Path("/nonexistent-check/replay"), flash)
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    flash_parser().parse_args(replay[3:])
            except SystemExit:
                raise ValueError(f"arm {arm.name}: rpent-flash replay refuses its flags: {' '.join(replay[3:])}") \
                    from None
        try:
            config_from_args(ns)
            from rpent.robots.registry import get_robot

            robot = get_robot(ns.robot)  # the runs' --robot (a pass-through flag, default libero)
            for s in matrix.suites:
                for t in matrix.tasks:
                    robot.task_info(s, t, ns.libero_type)
        except ValueError as exc:
            raise ValueError(f"arm {arm.name}: {exc}") from None
        cuda, transport = ns.cuda_device, ns.transport
    return cuda, transport


def _refuse_foreign_directory(parser: argparse.ArgumentParser, given: str, root) -> None:
    """Refuse an existing directory that holds files but no ``matrix.json``: it is no results root
    (another run's record, a flash output, the working directory), and the batch's report.md,
    report.json, manifest.json and runs/ must not overwrite or mix with what is there. A root that
    holds only the lock of a batch stopped before it wrote its matrix is taken as new."""
    from rpent.run.record import earlier_run_files, fresh_dir_suggestion

    found = earlier_run_files(root.root, ignore=(root.lock_path.name,))
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        parser.error(f"--results-root {given} holds files ({shown}) but no matrix.json, so it is not an rpent-batch "
                     "results root; a batch would write its report, manifest and runs beside them. Choose a new "
                     f"directory, e.g. --results-root {fresh_dir_suggestion(root.root)}")


def _load_matrix(parser: argparse.ArgumentParser, root):
    """The root's ``matrix.json`` as a Matrix; a missing or unreadable file is a one-line usage error."""
    from rpent.batch.matrix import Matrix

    if not root.matrix_path.is_file():
        parser.error(f"{root.root} is not an rpent-batch results root (no matrix.json)")
    try:
        return Matrix.from_dict(json.loads(root.matrix_path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        detail = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        parser.error(f"{root.matrix_path} is unreadable ({detail}); restore it or re-run the batch into a new "
                     "--results-root")


def _run(argv: list[str]) -> int:
    from rpent.batch.records import ResultsRoot

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel must be >= 1 concurrent runs, got {args.parallel}")
    if args.max_retries < 0:
        parser.error(f"--max-retries must be >= 0, got {args.max_retries}")
    if args.cell_timeout_s is not None and not args.cell_timeout_s > 0:
        parser.error(f"--cell-timeout-s must be > 0 seconds, got {args.cell_timeout_s:g} (leave it out for no limit)")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    for flag, v in (("--price-in", args.price_in), ("--price-out", args.price_out)):
        if v is not None and not v >= 0:
            parser.error(f"{flag} must be >= 0 USD per million tokens, got {v:g}")
    from rpent.cli.paths import check_output_dir

    try:  # a file, a dangling link or loop, or a place that takes no directory: one line, before any work
        check_output_dir(args.results_root, "--results-root")
    except ValueError as exc:
        parser.error(str(exc).replace("choose a new directory", "choose another --results-root"))
    root = ResultsRoot(args.results_root)
    from rpent.batch.ray_executor import ray_section_of_matrix_file

    ray_section = ray_section_of_matrix_file(args.matrix)
    if ray_section is not None and not isinstance(ray_section, dict):
        parser.error(f"matrix file {args.matrix}: ray must be a mapping, e.g. {{address: auto, results: shared}}; "
                     f"got {ray_section!r}")
    early = _start_ray_executor(args, root)  # connects while the matrix is checked below (see its docstring)
    try:
        return _run_checked(argv, parser, args, extra, root, early)
    finally:
        if early is not None:
            early.discard()


def _start_ray_executor(args, root) -> "_EarlyExecutor | None":
    """When Ray is asked for (``--ray-address``, ``--executor ray`` or a ``ray:`` section), start
    building the Ray executor in a background thread: importing Ray, connecting, the placement check
    and the first Ray worker processes' start-up (seconds each on a loaded machine) then overlap the
    matrix and run-flag checks instead of adding to the batch's wall time. A bad ``ray:`` section is
    reported when the executor is collected, as before."""
    from rpent.batch.ray_executor import ray_section_of_matrix_file

    ray_section = ray_section_of_matrix_file(args.matrix)
    if not (args.ray_address or ray_section or args.executor == "ray"):
        return None
    args.executor = "ray"
    if (args.ray_address or (ray_section or {}).get("address")) == "local":
        # a private cluster starts Ray's node processes, which needs the main thread (signal handlers)
        from rpent.cluster.connect import start_private
        from rpent.cluster.errors import ClusterConnectError

        try:
            args.ray_address = start_private()
        except ClusterConnectError as exc:
            raise SystemExit(f"rpent-batch: --ray-address local: {exc}") from None
        from rpent.cluster.connect import private_folder

        print(f"rpent-batch: started a private local Ray cluster at {args.ray_address} ({private_folder()}); "
              "it stops when the batch ends", file=sys.stderr, flush=True)
    return _EarlyExecutor(args, ray_section, root)


class _EarlyExecutor:
    """A Ray executor under construction in a daemon thread (see :func:`_start_ray_executor`)."""

    def __init__(self, args, ray_section, root):
        import threading

        self.executor = None
        self.error: BaseException | None = None
        self.claimed = False
        self._thread = threading.Thread(target=self._build, args=(args, ray_section, root), name="ray-executor",
                                        daemon=True)
        self._thread.start()

    def _build(self, args, ray_section, root) -> None:
        from rpent.batch.executor import create_executor
        from rpent.cluster.settings import parse_ray_section

        try:
            address = args.ray_address or (None if (ray_section or {}).get("address") else "auto")
            self.executor = create_executor("ray", slots=args.parallel, settings=parse_ray_section(ray_section, address),
                                            results_root=root.root)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by get()
            self.error = exc

    def get(self):
        """The executor (the caller owns it from now on). Raises what its construction raised."""
        self._thread.join()
        if self.error is not None:
            raise self.error
        self.claimed = True
        return self.executor

    def discard(self) -> None:
        """Shut the executor down unless :meth:`get` handed it out (the batch was refused before it ran).
        Waits at most 5 s for a connection still in progress (the daemon thread ends with the process,
        and Ray disconnects at exit)."""
        self._thread.join(timeout=5.0)
        if not self.claimed and self.executor is not None:
            self.executor.shutdown(cancel=True)


def _run_checked(argv: list[str], parser, args, extra, root, early) -> int:
    from rpent.batch.executor import create_executor
    from rpent.batch.lock import RootLock, RootLockedError
    from rpent.batch.manifest import Manifest, hash_checkpoint
    from rpent.batch.matrix import Matrix, extend_matrix, select_arms
    from rpent.batch.report import render_markdown
    from rpent.batch.runner import EXIT_USAGE, BatchOptions, BatchRunner

    stored = None
    if root.matrix_path.exists():
        try:
            stored = json.loads(root.matrix_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            parser.error(f"{root.matrix_path} is unreadable ({exc}); move it away or choose a new --results-root")
    try:
        selected, _left_out = select_arms(matrix_from_args(args, extra, stored), args.enable_arm)
        if stored is not None:
            try:
                matrix, added = extend_matrix(Matrix.from_dict(stored), selected)
            except ValueError as exc:
                raise ValueError(f"{root.root}: {exc}") from None
        else:
            matrix, added = selected, [a.name for a in selected.arms]
        cuda, transport = _check_runs(selected)
    except ValueError as exc:
        parser.error(str(exc))
    if args.executor == "ray":
        from rpent.batch.ray_executor import ray_section_of_matrix_file

        flash = [a.name for a in selected.arms if a.flash_from or a.share_env]
        if flash and (ray_section_of_matrix_file(args.matrix) or {}).get("results") == "copy":
            parser.error(f"arm {flash[0]} reads its flash plans from (and a shared-env replay writes into) the results "
                         "root, which 'results: copy' keeps from the nodes; use 'results: shared' with the root on a "
                         "filesystem every node mounts")
    if stored is None:
        _refuse_foreign_directory(parser, args.results_root, root)
    try:
        root.ensure()
    except OSError as exc:
        parser.error(f"--results-root {args.results_root} cannot be created ({exc.strerror or exc}); "
                     "choose another --results-root")
    try:
        lock = RootLock(root.lock_path).acquire()
    except RootLockedError as exc:
        print(f"rpent-batch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from rpent.recording.atomic import write_bytes_atomic

        try:
            executor = early.get() if early is not None else create_executor(args.executor, slots=args.parallel)
        except ValueError as exc:
            from rpent.cluster.errors import ClusterConfigError

            # Ray settings come from --ray-address and the matrix file's ray: section, not only --executor
            where = ("Ray settings (--ray-address, the matrix file's ray: section)" if isinstance(exc, ClusterConfigError)
                     else f"--executor {args.executor}")
            print(f"rpent-batch: error: {where}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if stored is None or added:
            write_bytes_atomic(root.matrix_path, (json.dumps(matrix.to_dict(), indent=1) + "\n").encode("utf-8"))
            if stored is not None:
                print(f"rpent-batch: added arm(s) {', '.join(added)} to {root.root}; the other arms' cells are kept",
                      file=sys.stderr)
        checkpoints = {}
        for arm in selected.arms:
            for kind, path, ep in (("vla", arm.vla_checkpoint or os.environ.get("PI05_CHECKPOINT_PATH"),
                                    arm.vla_endpoint),
                                   ("sam3", arm.sam3_checkpoint or os.environ.get("SAM3_CHECKPOINT_PATH"),
                                    arm.sam3_endpoint)):
                if ep:
                    checkpoints[f"{arm.name}.{kind}"] = {"endpoint": ep}
                elif path:
                    checkpoints[f"{arm.name}.{kind}"] = hash_checkpoint(path)
        manifest = Manifest(root.manifest_path)
        inv = manifest.begin(argv=["rpent-batch", *argv], matrix=matrix.to_dict(), executor=args.executor,
                             parallel=args.parallel, max_retries=args.max_retries, checkpoints=checkpoints)
        inv["arms_run"] = [a.name for a in selected.arms]
        if stored is not None and added:
            inv["arms_added"] = added
        opts = BatchOptions(max_retries=args.max_retries, cell_timeout_s=args.cell_timeout_s, cuda_device=cuda,
                            transport=transport, progress=not args.no_progress and sys.stderr.isatty())
        runner = BatchRunner(matrix, root, executor, opts, run_arms={a.name for a in selected.arms})
        code = 130
        try:
            code, report = runner.run()
        except KeyboardInterrupt as exc:
            inv["interrupted"] = getattr(runner, "interrupted_by", None) or str(exc) or "received SIGINT"
            print(f"rpent-batch: interrupted; finished cells are kept in {root.root}; re-run the same command to "
                  "resume", file=sys.stderr)
            return 130
        finally:
            inv["attempts_started"] = runner.attempts_started
            if getattr(executor, "replica_events", None):  # Ray replicas restarted / dropped, with reasons
                inv["replica_events"] = executor.replica_events
            manifest.end(inv, code)
        print(render_markdown(report), end="")
        print(f"rpent-batch: report in {root.root / 'report.md'} and report.json")
        if code != 0:
            print("rpent-batch: some cells have no task outcome (see 'infra' and 'pending'); re-run the same command "
                  "to resume", file=sys.stderr)
        return code
    finally:
        lock.release()


def _report(argv: list[str]) -> int:
    from rpent.batch.records import ResultsRoot
    from rpent.batch.report import build_report, render_markdown, write_report

    parser = build_report_parser()
    args = parser.parse_args(argv)
    if not 0 < args.confidence < 1:
        parser.error(f"--confidence must be in (0, 1), e.g. 0.95; got {args.confidence:g}")
    root = ResultsRoot(args.root)
    matrix = _load_matrix(parser, root)
    report = build_report(matrix, root.cell_states(matrix.cells()), results_root=root.root,
                          confidence=args.confidence)
    write_report(root.root, report)
    print(json.dumps(report, indent=1) if args.json else render_markdown(report), end="\n" if args.json else "")
    return 0


def _compare(argv: list[str]) -> int:
    from rpent.batch.compare import compare_roots, render_compare

    parser = build_compare_parser()
    args = parser.parse_args(argv)
    if len(args.roots) > 2:
        parser.error("give one results root with --arms A B, or two results roots")
    if len(args.roots) == 1 and not args.arms:
        parser.error("with one results root, name the arms: --arms ARM_A ARM_B")
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha must be in (0, 1), e.g. 0.05; got {args.alpha:g}")
    arm_a, arm_b = args.arms if args.arms else (None, None)
    try:
        result = compare_roots(args.roots[0], args.roots[1] if len(args.roots) == 2 else None, arm_a, arm_b,
                               alpha=args.alpha, basis=args.by)
    except (ValueError, KeyError) as exc:
        parser.error(str(exc).strip("'\""))
    print(json.dumps(result, indent=1, default=str) if args.json else render_compare(result), end="")
    return 1 if args.fail_on_regression and result["regression"] else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rpent-batch``; exits with the code of the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        code = _compare(argv[1:])
    elif argv and argv[0] == "report":
        code = _report(argv[1:])
    elif argv and argv[0] in ("leaderboard", "status"):
        from rpent.cli.leaderboard import leaderboard_main, status_main

        code = (leaderboard_main if argv[0] == "leaderboard" else status_main)(argv[1:])
    else:
        if argv and argv[0] == "run":
            argv = argv[1:]
        code = _run(argv)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
