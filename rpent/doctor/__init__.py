"""``rpent doctor``: check in a few seconds that this machine can run rpent, one line per check
with the fix.

::

    rpent doctor                  # one line per check; exit 1 when the main job cannot run
    rpent doctor --json           # the same as one JSON object, for scripts
    rpent doctor --ray            # also start and stop a local Ray cluster (5-60 s)

Checks (:mod:`rpent.doctor.probes`): Python and rpent versions; MuJoCo rendering one frame through
EGL (in a subprocess with a timeout); the CUDA/EGL device mapping; LIBERO assets; free disk space
under the logs directory; the Pi0.5 / APXInf / SAM3 checkpoints that the environment names; NVIDIA
GPUs and their memory; which provider keys are set (never their values); tmux and a truecolor
terminal for the TUI; Chromium for the dashboard tests; Ray; the Meta-World environment.

Exit status: 0 when every check the main job needs passed (``ok`` or ``warn``), 1 when one of them
failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rpent.doctor.checks import FAIL, OK, SKIP, STATUSES, WARN, Check, DoctorOptions, exit_code, format_line, run_probes

__all__ = ["Check", "DoctorOptions", "STATUSES", "OK", "WARN", "FAIL", "SKIP", "build_parser", "run_doctor", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent doctor`` argument parser."""
    p = argparse.ArgumentParser(
        prog="rpent doctor",
        description="Check that this machine can run rpent: one line per check with the fix.",
        epilog="Exit codes: 0 the main job can run (warnings name optional parts), 1 something it needs is "
               "missing, 2 bad arguments.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (checks with status, summary, fix, "
                                                       "details) instead of lines")
    p.add_argument("--logs-dir", default="logs", metavar="DIR",
                   help="where runs write their records; its free space is checked (default logs)")
    p.add_argument("--ray", action="store_true",
                   help="also start and stop a one-node local Ray cluster (takes 5-60 s; default: import only)")
    p.add_argument("--timeout-s", type=float, default=60.0,
                   help="limit for each subprocess check: the EGL frame, the Meta-World and Ray imports (default 60)")
    return p


def run_doctor(options: DoctorOptions) -> list[Check]:
    """Run every probe of :data:`rpent.doctor.probes.PROBES` concurrently; returns the checks in order."""
    from rpent.doctor.probes import PROBES

    return run_probes(PROBES, options)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rpent doctor``; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    if not args.timeout_s > 0:
        print(f"rpent doctor: error: --timeout-s must be > 0 seconds, got {args.timeout_s:g}", file=sys.stderr)
        return 2
    options = DoctorOptions(logs_dir=Path(args.logs_dir), ray_cluster=args.ray, timeout_s=args.timeout_s)
    t0 = time.monotonic()
    checks = run_doctor(options)
    code = exit_code(checks)
    if args.json:
        import rpent

        print(json.dumps({"rpent": rpent.__version__, "exit_code": code, "ok": code == 0,
                          "seconds": round(time.monotonic() - t0, 3),
                          "checks": [c.to_dict() for c in checks]}, indent=2))
        return code
    width = max(len(c.name) for c in checks) + 2
    for check in checks:
        print(format_line(check, width))
    failed = [c.name for c in checks if c.required and c.status == FAIL]
    if failed:
        print(f"rpent doctor: the main job cannot run: fix {', '.join(failed)} ({time.monotonic() - t0:.1f} s)")
    else:
        print(f"rpent doctor: the main job can run ({time.monotonic() - t0:.1f} s)")
    return code
