"""The result of one ``rpent doctor`` probe, and running a list of probes side by side.

A probe is a function ``(options: DoctorOptions) -> Check``. :func:`run_probes` runs them on
threads (the slow ones wait on subprocesses: the EGL frame, the Meta-World interpreter, the Ray
import), so the whole check takes about as long as the slowest probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["OK", "WARN", "FAIL", "SKIP", "STATUSES", "Check", "DoctorOptions", "run_probes", "exit_code",
           "format_line"]

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
#: Every status a probe can report: ``ok`` works; ``warn`` an optional part is missing or degraded
#: (the main job still runs); ``fail`` something the main job needs is missing or broken (exit 1);
#: ``skip`` not checked (e.g. the Ray cluster start without ``--ray``).
STATUSES = (OK, WARN, FAIL, SKIP)


@dataclass
class Check:
    """One probe's finding.

    Attributes:
        name: short id (``python``, ``rendering``, ``libero``, ...), stable for scripts.
        status: one of :data:`STATUSES`.
        summary: one line: what was found.
        fix: one line: what to do about it (empty when nothing is to be done).
        required: the main job (``rpent --robot libero ... --planner scripted``) needs it: a
            ``fail`` of a required check makes ``rpent doctor`` exit 1.
        details: machine-readable facts (versions, paths, counts; never secret values).
        seconds: wall time the probe took.
    """

    name: str
    status: str
    summary: str
    fix: str = ""
    required: bool = False
    details: dict = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}; use one of {STATUSES}")

    def to_dict(self) -> dict:
        """JSON-able form (the ``checks`` items of ``rpent doctor --json``)."""
        return asdict(self)


@dataclass
class DoctorOptions:
    """What ``rpent doctor`` was asked to check.

    Attributes:
        logs_dir: where runs write their records (free disk space is checked there).
        ray_cluster: also start (and stop) a one-node local Ray cluster (takes 5-60 s).
        timeout_s: limit for each subprocess probe (EGL frame, Meta-World import, Ray import).
        environ: the environment the probes read (default: this process's).
    """

    logs_dir: Path = Path("logs")
    ray_cluster: bool = False
    timeout_s: float = 60.0
    environ: dict | None = None


Probe = Callable[[DoctorOptions], Check]


def run_probes(probes: Sequence[Probe], options: DoctorOptions) -> list[Check]:
    """Run ``probes`` concurrently; a probe that raises becomes a ``fail`` check naming the error.

    Returns:
        the checks in the order of ``probes``.
    """

    def one(probe: Probe) -> Check:
        t0 = time.monotonic()
        try:
            check = probe(options)
        except Exception as exc:  # noqa: BLE001 - a broken probe is reported, never a traceback
            name = getattr(probe, "check_name", probe.__name__.removeprefix("probe_"))
            check = Check(name, FAIL, f"the check itself failed: {type(exc).__name__}: {exc}",
                          "report this with the output of rpent doctor --json",
                          required=getattr(probe, "required", False))
        check.seconds = round(time.monotonic() - t0, 3)
        return check

    with ThreadPoolExecutor(max_workers=max(1, len(probes))) as pool:
        return list(pool.map(one, probes))


def exit_code(checks: Sequence[Check]) -> int:
    """1 when a required check failed, else 0."""
    return 1 if any(c.required and c.status == FAIL for c in checks) else 0


def format_line(check: Check, width: int = 12) -> str:
    """One line: ``" ok   rendering    MuJoCo rendered ...; fix: ..."``."""
    text = f"{check.status.upper():<5}{check.name:<{width}} {check.summary}"
    if check.fix:
        text += f"; fix: {check.fix}"
    return text
