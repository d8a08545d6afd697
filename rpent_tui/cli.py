"""``rpent-tui``: start a TUI session (shared services once, TaskRuns on demand) in the terminal.

Example::

    rpent-tui --robot libero --planner api --model anthropic:claude-opus-4-8 \\
        --vla-endpoint http://127.0.0.1:8220 --output-dir logs/tui_session

This starts a session process (detached: it outlives this terminal and SSH connection; see
``rpent.session``) and attaches the UI to it. F10 detaches; ctrl+q asks whether to stop the session
or detach; ``rpent-tui --attach [SESSION]`` re-attaches (several clients may attach at once),
``--list`` lists your running sessions (``--list --all``: every owner's), ``--stop SESSION`` stops one, ``--in-process`` keeps the session
inside the UI process (it ends with the UI), ``--foreground`` runs the session process here without a UI.

Then, on the Run screen (F3): ``/rpent-task libero_goal 0 0``. Meta-World (its own interpreter,
``scripts/install_metaworld.sh``): ``rpent-tui --robot metaworld --planner expert``, then
``/rpent-task --suite mt10 --task pick-place-v3 --seed 0`` (or ``/rpent-task mt10 pick-place-v3 0``). ``--env-endpoint`` is refused
(every TaskRun needs a fresh, owned env server). Images: ``--images auto|sixel|kitty|halfblock|none``
(``auto`` queries the terminal before the UI starts; force a mode over slow SSH links).
Exit status: 0 on quit, 128+N when stopped by signal N (SIGHUP 129, SIGTERM 143), 1 on a crash,
2 on bad options or when stderr is not a terminal (the UI is drawn on stderr; ``2> file`` is
refused with a one-line message on stdout and stderr).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import tomllib
from pathlib import Path

__all__ = ["build_parser", "main", "session_config_from_args", "STDERR_NOT_A_TERMINAL"]

#: Why ``rpent-tui`` refuses to start when stderr is redirected.
STDERR_NOT_A_TERMINAL = ("stderr is not a terminal (the UI is drawn on stderr, so '2> file' would leave a blank "
                         "screen); run rpent-tui without redirecting stderr")


#: the app's screen modes (``rpent_tui.app.SCREEN_MODES``, F2-F9), named here so that --help and a
#: bad --screen need no Textual import
SCREENS = ("services", "run", "editor", "trajectories", "flywheel", "batch", "leaderboard", "explore")

def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-tui`` argument parser."""
    p = argparse.ArgumentParser(prog="rpent-tui", description="rpent operator's workbench (terminal UI).",
                                epilog="Exit status: 0 on quit, 128+N when stopped by signal N (SIGHUP 129, SIGTERM "
                                       "143), 1 on a crash, 2 on bad options or when stderr is not a terminal.")
    s = p.add_argument_group("session")
    s.add_argument("--robot", default="libero", help="robot of every TaskRun (rpent.robots.registry: libero, metaworld; the offline planner of metaworld is --planner expert); default libero")
    s.add_argument("--planner", default="api", help="planner kind: api, claude_code, codex, scripted ... (default api)")
    s.add_argument("--model", default=None, help="planner model id; api needs a provider prefix, e.g. anthropic:<id>")
    s.add_argument("--base-url", default=None, help="api planner only: provider base URL override")
    s.add_argument("--output-dir", type=Path, default=None,
                   help="session directory; TaskRuns record under <dir>/tasks/NNNN_<suite>_t<task>_s<seed>/ "
                        "(default logs/tui_<UTC stamp>)")
    s.add_argument("--vla-endpoint", default=None, help="[protocol://]HOST:PORT of a running VLA server (else spawned once)")
    s.add_argument("--sam3-endpoint", default=None, help="[protocol://]HOST:PORT of a running SAM3 server (else spawned once)")
    s.add_argument("--env-endpoint", default=None, help=argparse.SUPPRESS)
    s.add_argument("--shared", default="auto",
                   help="shared services of the session: 'auto' (vla when --vla-endpoint or $PI05_CHECKPOINT_PATH is set, "
                        "sam3 when --sam3-endpoint or $SAM3_CHECKPOINT_PATH is set, as rpent.run decides; only those the "
                        "robot's toolkit uses: none for metaworld), "
                        "a comma-separated subset of vla,sam3, or 'none' (default auto)")
    s.add_argument("--vla-server-args", default="", help="extra arguments for a spawned VLA server (shell-quoted string)")
    r = p.add_argument_group("every TaskRun")
    r.add_argument("--libero-type", default=None, choices=("standard", "pro"), help="LIBERO variant (default $LIBERO_TYPE, else pro)")
    r.add_argument("--max-episode-steps", type=int, default=None, help="env horizon in env steps (run layer default 10000)")
    r.add_argument("--max-turns", type=int, default=None, help="planner requests per TaskRun (run layer default 100)")
    r.add_argument("--policy-mode", default=None, choices=("tools", "code"), help="tool calls (default) or code-as-policy")
    r.add_argument("--record-trajectory", action="store_true", help="also write trajectories/<task_id>/ for flywheel export (every planner: "
                        "tool calls, executed actions, VLA predictions; model requests/replies with --planner api)")
    r.add_argument("--record-observations", choices=("vla", "all"), default=None,
                   help="with --record-trajectory: 'all' also records the camera images and state of every scripted "
                        "action, so the flywheel's v2 rules (F6) can export scripted runs; default vla")
    r.add_argument("--require-operator-verdict", action="store_true",
                   help="finish is accepted only after an operator verdict (the real-robot rule, also in simulation)")
    u = p.add_argument_group("terminal")
    u.add_argument("--images", default=None, help="auto|sixel|kitty|halfblock|none (default $RPENT_IMAGES, else auto)")
    u.add_argument("--theme", default=None, help="Textual theme, e.g. textual-dark, textual-light, textual-ansi, nord")
    u.add_argument("--keymap", type=Path, default=None,
                   help="TOML file with a [keymap] table: binding id = \"keys\" (ids are listed in the F1 help)")
    u.add_argument("--frame-interval", type=float, default=1.0,
                   help="minimum seconds between camera-frame repaints on the Run screen (default 1; SSH bandwidth)")
    u.add_argument("--repaint-interval", type=float, default=0.3,
                   help="minimum seconds between Run-screen transcript repaints (default 0.3; SSH bandwidth)")
    u.add_argument("--fps", type=int, default=None, help="max repaints per second (sets TEXTUAL_FPS; lower saves SSH bandwidth)")
    u.add_argument("--no-mouse", action="store_true", help="leave the mouse to the terminal (native selection in tmux)")
    u.add_argument("--logs-dir", type=Path, default=None, help="where Trajectories/Flywheel look for runs (default the session dir)")
    u.add_argument("--code-timeout-s", type=float, default=120.0, help="code-policy cell timeout in s (default 120)")
    u.add_argument("--code-max-calls", type=int, default=100, help="robot calls per code-policy cell (default 100)")
    u.add_argument("--screen", default="run", choices=SCREENS, help="first screen (default run)")
    a = p.add_argument_group("session process (the session outlives this terminal; see rpent.session)")
    a.add_argument("--attach", nargs="?", const="", default=None, metavar="SESSION",
                   help="attach to a running session (your NAME from --list, OWNER/NAME, or its directory; "
                        "default: your only one)")
    a.add_argument("--list", action="store_true",
                   help="list your running sessions (name, owner, start time, TaskRuns, clients) and exit")
    a.add_argument("--all", action="store_true", help="with --list: every owner's sessions in this registry")
    a.add_argument("--stop", default=None, metavar="SESSION",
                   help="stop a running session and its services, then exit (your NAME, another owner's exact "
                        "OWNER/NAME, or its directory)")
    a.add_argument("--foreground", action="store_true",
                   help="run the session process in this terminal without a UI (debugging); attach from another one")
    a.add_argument("--in-process", action="store_true",
                   help="run the session inside this UI process: it ends when the UI ends (no detach)")
    return p


def session_config_from_args(args: argparse.Namespace):
    """``SessionConfig`` from parsed flags.

    Raises:
        SessionConfigError: ``--env-endpoint`` (the seed's reason), unknown robot or shared service.
    """
    from rpent.session.model import SessionConfig

    choice = args.shared.strip()
    if choice == "auto":
        shared = tuple(name for name, endpoint, env in (("vla", args.vla_endpoint, "PI05_CHECKPOINT_PATH"),
                                                        ("sam3", args.sam3_endpoint, "SAM3_CHECKPOINT_PATH"))
                       if endpoint or os.environ.get(env))
        try:  # only the services the robot's toolkit uses (metaworld: none); an unknown robot fails in validate()
            from rpent.robots.registry import get_robot

            usable = tuple(getattr(get_robot(args.robot), "services", ("vla", "sam3")))
            shared = tuple(s for s in shared if s in usable)
        except ValueError:
            pass
    elif choice in ("", "none"):
        shared = ()
    else:
        shared = tuple(x.strip() for x in choice.split(",") if x.strip())
    options = {"libero_type": args.libero_type, "max_episode_steps": args.max_episode_steps,
               "max_turns": args.max_turns, "policy_mode": args.policy_mode, "base_url": args.base_url,
               "record_trajectory": args.record_trajectory or None,
               "record_observations": args.record_observations,
               "require_operator_verdict": args.require_operator_verdict or None}
    output_dir = args.output_dir or Path("logs") / f"tui_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    config = SessionConfig(output_dir=output_dir, robot=args.robot, planner=args.planner, model=args.model,
                           vla_endpoint=args.vla_endpoint, sam3_endpoint=args.sam3_endpoint,
                           env_endpoint=args.env_endpoint, shared_services=shared,
                           run_options={k: v for k, v in options.items() if v is not None})
    config.validate()
    return config


def _load_keymap(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"--keymap {path}: {exc}") from None
    table = data.get("keymap", data)
    bad = [k for k, v in table.items() if not isinstance(v, str)]
    if bad:
        raise ValueError(f"--keymap {path}: values must be key strings like \"ctrl+r\"; fix {bad}")
    return dict(table)


def main(argv: list[str] | None = None) -> int:
    """Parse flags, resolve the image mode (before Textual owns the terminal), run the app."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from .services.images import ImageModeError, prepare_textual_image, query_terminal, resolve_image_mode
    from rpent.session.core import Session
    from rpent.session.defaults import default_shared_specs
    from rpent.session.model import SessionConfigError

    if args.list or args.stop is not None:
        return _manage_sessions(args, parser)
    try:
        config = None if args.attach is not None else session_config_from_args(args)
        keymap = _load_keymap(args.keymap)
        image_mode = resolve_image_mode(args.images)
    except (SessionConfigError, ImageModeError, ValueError) as exc:
        parser.exit(2, f"rpent-tui: error: {exc}\n")
    if args.fps is not None:
        if args.fps <= 0:
            parser.exit(2, "rpent-tui: error: --fps must be a positive number of repaints per second\n")
        os.environ["TEXTUAL_FPS"] = str(args.fps)
    try:
        if config is not None:
            config.validate_planner()  # as rpent does at start: every TaskRun would fail on it
    except SessionConfigError as exc:
        parser.exit(2, f"rpent-tui: error: {exc}\n")
    if not sys.stderr.isatty() and not getattr(args, "foreground", False):
        # Textual draws the whole UI on stderr: with `2> err.log` the screen would stay blank.
        message = f"rpent-tui: error: {STDERR_NOT_A_TERMINAL}; nothing was started (service and run logs are " \
                  "written as files under the session directory, <dir>/session.log and <dir>/tasks/)\n"
        if sys.stdout.isatty():
            sys.stdout.write(message)
        parser.exit(2, message)
    # one terminal query, before Textual reads stdin (late replies would eat the operator's keys)
    info = query_terminal() if image_mode in ("sixel", "kitty") else None
    prepare_textual_image(image_mode, info)

    from .app import AppOptions, RpentApp

    if not args.in_process:
        return _session_main(args, parser, config, keymap, image_mode)
    specs = default_shared_specs(config)
    extra = shlex.split(args.vla_server_args)
    if extra:
        specs = [type(s)(**{**s.__dict__, "argv": s.argv + extra}) if s.name == "vla" and s.endpoint is None else s
                 for s in specs]
    options = AppOptions(image_mode=image_mode, code_timeout_s=args.code_timeout_s, code_max_calls=args.code_max_calls,
                         logs_dir=args.logs_dir, start_mode=args.screen, theme=args.theme, keymap=keymap,
                         frame_interval_s=args.frame_interval, repaint_interval_s=args.repaint_interval)
    app = RpentApp(lambda sink: Session(config, sink, shared_specs=specs), options)
    app.run(mouse=not args.no_mouse)
    return int(app.return_code or 0)


def _app_options(args: argparse.Namespace, keymap: dict[str, str], image_mode: str):
    from .app import AppOptions

    return AppOptions(image_mode=image_mode, code_timeout_s=args.code_timeout_s, code_max_calls=args.code_max_calls,
                      logs_dir=args.logs_dir, start_mode=args.screen, theme=args.theme, keymap=keymap,
                      frame_interval_s=args.frame_interval, repaint_interval_s=args.repaint_interval)


def _session_main(args: argparse.Namespace, parser: argparse.ArgumentParser, config, keymap: dict[str, str],
                  image_mode: str) -> int:
    """Start (or find) the session process, then attach the UI to it (or serve it here with --foreground)."""
    from rpent.session.layout import SessionNotFound, resolve_session
    from rpent.session.process import SessionStartError, serve, write_session_options

    from .attached import run_attached, start_or_attach

    owned = None
    try:
        if args.attach is not None:
            paths = resolve_session(args.attach or None)
        elif args.foreground:
            from rpent.session.layout import SessionPaths

            paths = SessionPaths(Path(config.output_dir).resolve())
            write_session_options(paths, config, shlex.split(args.vla_server_args))
            print(f"rpent-tui: session {paths.name} in the foreground; attach with rpent-tui --attach {paths.root}",
                  file=sys.stderr)
            return serve(paths, foreground=True)
        else:
            paths, owned = start_or_attach(config, shlex.split(args.vla_server_args))
    except (SessionNotFound, SessionStartError, FileExistsError, ValueError) as exc:
        parser.exit(2, f"rpent-tui: error: {exc}\n")
    return run_attached(paths, _app_options(args, keymap, image_mode), mouse=not args.no_mouse, owned=owned)


def _manage_sessions(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``--list`` and ``--stop SESSION``."""
    from rpent.session.layout import SessionNotFound, list_sessions, resolve_session, session_owner
    from rpent.session.process import stop_session

    if args.list:
        sessions = list_sessions(everyone=args.all)
        for info in sessions:
            print(info.line())
        if not sessions:
            print("no running sessions" + ("" if args.all else f" of yours ({session_owner()}; --all lists everyone's)")
                  + " (start one with rpent-tui [flags])")
        return 0
    try:
        paths = resolve_session(args.stop, purpose="stop")
    except SessionNotFound as exc:
        parser.exit(1, f"rpent-tui: {exc}\n")
    ok = stop_session(paths)
    print(f"rpent-tui: session {paths.name} {'stopped' if ok else 'did not stop in time (see ' + str(paths.log) + ')'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
