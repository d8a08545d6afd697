"""The session model: configuration, service and TaskRun views, and the events handed to a sink.

Plain dataclasses with no Textual and no trio: ``rpent.session.core.Session`` mutates them on its trio
thread, ``rpent.session.server`` puts them on the wire, and the TUI and the dashboard render them. Model:
the upstream Dashboard's Session/TaskRun.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpent.paths import file_blocker
from rpent.session.commands import TaskCommand
from rpent.session.operator import OperatorReply, OperatorRequest

__all__ = [
    "ENV_ENDPOINT_REFUSED",
    "SERVICE_STATES",
    "TERMINAL_TASK_STATES",
    "SessionConfig",
    "SessionConfigError",
    "SessionNotReady",
    "ServiceView",
    "TaskRunView",
    "SessionChanged",
    "RunEvents",
    "ServiceLog",
    "OperatorPrompt",
    "OperatorResolved",
    "atomic_write_json",
    "one_line_error",
]

#: The seed's reason (RPent's reference §2.3 and the product document), verbatim.
ENV_ENDPOINT_REFUSED = (
    "Dashboard task control cannot use --env-endpoint because each TaskRun requires a fresh owned env_server"
)
#: Service states shown in the Services screen.
SERVICE_STATES = ("pending", "starting", "ready", "failed", "stopped")
#: TaskRun states (rpent_reference.md §7 ``task_state`` plus ``error`` from the run layer).
TERMINAL_TASK_STATES = ("succeeded", "failed", "aborted", "cancelled", "error")
#: Lines of each service's log kept in memory for the log pane (the full log stays on disk).
LOG_RING_LINES = 5000
#: Poll period (s) for log tails and supervisor state (4 Hz, the reference's batched log cadence).
POLL_S = 0.25


class SessionConfigError(ValueError):
    """The session cannot start with these options (message says which option and why)."""


class SessionNotReady(RuntimeError):
    """A TaskRun was requested while the shared services are not ready (starting or failed)."""


def one_line_error(exc: BaseException) -> str:
    """One line for the screen: the leaf errors of ``exc`` (trio nurseries wrap errors in exception
    groups; the operator must see the run layer's own message, never ``ExceptionGroup: ...``)."""
    def leaves(e: BaseException) -> list[BaseException]:
        if isinstance(e, BaseExceptionGroup):
            return [leaf for sub in e.exceptions for leaf in leaves(sub)]
        return [e]

    parts = []
    for leaf in leaves(exc):
        text = (str(leaf).strip().splitlines() or [""])[0]
        # the run layer's refusals are complete sentences; other errors keep their type as a hint
        parts.append(text if isinstance(leaf, (FileExistsError, ValueError)) and text
                     else f"{type(leaf).__name__}: {text}".rstrip(": "))
    return "; ".join(dict.fromkeys(parts))


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temporary file in the same directory + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# -- events handed to the UI sink (plain dataclasses; the app wraps them in Textual messages) ---------
@dataclass(frozen=True)
class SessionChanged:
    """Session or service state changed; read ``Session.snapshot`` fields. Coalescable."""


@dataclass(frozen=True)
class RunEvents:
    """A batch of run events (docs/interfaces.md ``RunEvent`` dicts) of TaskRun ``run_id``, already applied to its view."""

    run_id: str
    events: list[dict[str, Any]]


@dataclass(frozen=True)
class ServiceLog:
    """New log lines of service ``name`` (already appended to ``ServiceView.lines``)."""

    name: str
    lines: list[str]


@dataclass(frozen=True)
class OperatorPrompt:
    """TaskRun ``run_id`` waits for the operator to answer ``request``."""

    run_id: str
    request: OperatorRequest


@dataclass(frozen=True)
class OperatorResolved:
    """The pending request of TaskRun ``run_id`` was answered (or cancelled)."""

    run_id: str
    request: OperatorRequest
    reply: OperatorReply


# -- configuration -------------------------------------------------------------------------------------
@dataclass
class SessionConfig:
    """Options of a TUI session (the ``rpent-tui`` flags).

    Attributes:
        robot: robot name of :mod:`rpent.robots.registry` (``libero``, ``metaworld``); every TaskRun
            drives it, and ``/rpent-task`` checks suites and tasks against it.
        planner: planner kind (``api``, ``claude_code``, ``codex``, ``scripted`` ...).
        model: planner model id (``anthropic:<id>`` for ``api``), or None.
        output_dir: session directory; TaskRuns record under ``<output_dir>/tasks/``.
        vla_endpoint / sam3_endpoint: attach to running shared services instead of spawning them.
        env_endpoint: refused (``ENV_ENDPOINT_REFUSED``); kept only to reject it with the reason.
        shared_services: which shared services the session starts (subset of ``("vla", "sam3")``).
        run_options: extra ``RunConfig`` fields for every TaskRun (``libero_type``,
            ``max_episode_steps``, ``policy_mode``, ``record_trajectory``,
            ``require_operator_verdict``, ``base_url`` ...).
    """

    output_dir: Path
    robot: str = "libero"
    planner: str = "api"
    model: str | None = None
    vla_endpoint: str | None = None
    sam3_endpoint: str | None = None
    env_endpoint: str | None = None
    shared_services: tuple[str, ...] = ("vla", "sam3")
    run_options: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Check the options.

        Raises:
            SessionConfigError: ``--env-endpoint`` given (the seed's reason), an unknown robot, an
                unknown shared service name, or a shared service the robot's toolkit does not use
                (``metaworld`` uses none).
        """
        if self.env_endpoint:
            raise SessionConfigError(ENV_ENDPOINT_REFUSED)
        out = Path(self.output_dir)
        blocker = file_blocker(out)
        if blocker is not None:
            raise SessionConfigError(f"--output-dir {out}: {blocker} is a file, not a directory; "
                                     "choose a directory for the session")
        from rpent.robots.registry import get_robot

        try:
            adapter = get_robot(self.robot)
        except ValueError as exc:
            raise SessionConfigError(f"--robot: {exc}") from None
        unknown = [s for s in self.shared_services if s not in ("vla", "sam3")]
        if unknown:
            raise SessionConfigError(f"unknown shared service(s) {unknown}; choose from: vla, sam3")
        usable = tuple(getattr(adapter, "services", ("vla", "sam3")))
        unused = [s for s in self.shared_services if s not in usable]
        if unused:
            raise SessionConfigError(f"--robot {self.robot} uses no {', '.join(unused)} service (its toolkit uses: "
                                     f"{', '.join(usable) or 'none'}); drop it from --shared (e.g. --shared none)")


    def validate_planner(self) -> None:
        """Check ``planner`` and ``model`` as ``rpent`` does at start, so that a session never starts
        TaskRuns that all fail on their planner (``rpent-tui --planner api`` without ``--model``).

        Raises:
            SessionConfigError: an unknown planner name, or an ``api`` model without a known provider
                prefix (the message names the accepted forms).
        """
        from rpent.planners.base import available_planners

        names = available_planners()
        if self.planner not in names:
            raise SessionConfigError(f"--planner {self.planner!r} is not a planner; choose from: {', '.join(names)}")
        if self.planner == "api":
            from rpent.planners.api.model_spec import parse_model_spec

            try:
                parse_model_spec(self.model)
            except ValueError as exc:
                raise SessionConfigError(str(exc)) from None


# -- views (the model the UI renders) ------------------------------------------------------------------
@dataclass
class ServiceView:
    """One service as shown in the Services screen.

    Attributes:
        name: service name (``vla``, ``sam3``, ``env_server@0001`` ...).
        scope: ``shared`` or the owning TaskRun id.
        state: one of ``SERVICE_STATES``.
        endpoint: ``proto://host:port`` once known.
        pid: process id when spawned locally (None when attached to an endpoint).
        started_at: wall-clock time (s since the epoch) it became ready.
        last_error: last failure message.
        log_path: the service's log file (full log).
        lines: the newest ``LOG_RING_LINES`` log lines.
        total_lines: log lines received so far (a viewer compares it with what it has shown).
    """

    name: str
    scope: str = "shared"
    state: str = "pending"
    endpoint: str | None = None
    pid: int | None = None
    started_at: float | None = None
    last_error: str | None = None
    log_path: Path | None = None
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_RING_LINES))
    total_lines: int = 0

    def uptime_s(self, now: float | None = None) -> float | None:
        """Seconds since ready, while ready; else None."""
        if self.started_at is None or self.state != "ready":
            return None
        return max(0.0, (now or time.time()) - self.started_at)


@dataclass
class TaskRunView:
    """One TaskRun as shown in the Run screen.

    Attributes:
        id: ``0001``, ``0002`` ... in start order.
        command: suite/task/seed.
        output_dir: ``<session>/tasks/NNNN_<suite>_t<task>_s<seed>``.
        state: ``starting`` -> ``running`` -> ``succeeded|failed|cancelled|error``.
        detail: last status detail.
        transcript: planner events in arrival order (``{"kind": "planner", "event": ...}`` dicts).
        timeline: step events (``{"step", "terminated", "truncated", "success", "tool"}``).
        frames: latest camera frames, ``{"main": png, "wrist": png}``; ``frames_step`` their step.
        tokens_in / tokens_out / tool_calls: planner usage counters.
        outcome: the run layer's outcome dict once finished.
        operator: the pending operator request, if any.
        replaced_by: id of the TaskRun that replaced this one (a new task while it ran).
        robot: the session's ``--robot`` the TaskRun drove (``libero``, ``metaworld``).
    """

    id: str
    command: TaskCommand
    output_dir: Path
    state: str = "starting"
    detail: str = ""
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    frames: dict[str, bytes] = field(default_factory=dict)
    frames_step: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    outcome: dict[str, Any] | None = None
    error: str | None = None
    operator: OperatorRequest | None = None
    cancel_requested: bool = False
    replaced_by: str | None = None
    planner: str | None = None
    model: str | None = None
    robot: str = "libero"

    @property
    def finished(self) -> bool:
        """True once the TaskRun reached a terminal state."""
        return self.state in TERMINAL_TASK_STATES

    def apply(self, event: Mapping[str, Any]) -> None:
        """Fold one run event (docs/interfaces.md ``RunEvent``) into this view."""
        kind = event.get("kind")
        if kind == "status":
            state = event.get("state")
            if isinstance(state, str) and not self.finished:
                self.state = state
            self.detail = str(event.get("detail", ""))
        elif kind == "planner":
            sub = event.get("event")
            if sub == "usage":
                self.tokens_in = int(event.get("input_tokens", event.get("total_input_tokens", self.tokens_in)) or 0)
                self.tokens_out = int(event.get("output_tokens", event.get("total_output_tokens", self.tokens_out)) or 0)
                if "tool_calls" in event:
                    self.tool_calls = int(event["tool_calls"] or 0)
                return
            if sub == "tool_call":
                self.tool_calls += 1
            self.transcript.append(dict(event))
        elif kind == "step":
            self.timeline.append(dict(event))
        elif kind == "frames":
            for label in ("main", "wrist"):
                if isinstance(event.get(label), (bytes, bytearray)):
                    self.frames[label] = bytes(event[label])
            self.frames_step = event.get("step")
        elif kind == "operator_request":
            self.transcript.append({"kind": "planner", "event": "request", **{k: v for k, v in event.items() if k != "kind"}})
        elif kind == "finished":
            outcome = event.get("outcome")
            self.outcome = dict(outcome) if isinstance(outcome, Mapping) else None
            stats = (self.outcome or {}).get("stats") or {}
            if isinstance(stats, Mapping):
                self.tokens_in = int(stats.get("total_input_tokens", self.tokens_in) or 0)
                self.tokens_out = int(stats.get("total_output_tokens", self.tokens_out) or 0)
                self.tool_calls = int(stats.get("tool_calls", self.tool_calls) or 0)

    def record(self) -> dict[str, Any]:
        """The ``taskrun.json`` content (JSON-able)."""
        return {
            "schema_version": 1,
            "id": self.id,
            "robot": self.robot,
            "suite": self.command.suite,
            "task": self.command.task,
            "seed": self.command.seed,
            "planner": self.planner,
            "model": self.model,
            "state": self.state,
            "detail": self.detail,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tool_calls": self.tool_calls,
            "steps": len(self.timeline),
            "environment_success": (self.outcome or {}).get("environment_success"),
            "environment_success_unknown": (self.outcome or {}).get("environment_success_unknown"),
            "environment_unstable": (self.outcome or {}).get("environment_unstable"),
            "label": (self.outcome or {}).get("label"),
            "operator_verdict": (self.outcome or {}).get("operator_verdict"),
            "verdict_required": (self.outcome or {}).get("verdict_required"),
            "disagreement": (self.outcome or {}).get("disagreement"),
            "finish": (self.outcome or {}).get("finish"),
            "replaced_by": self.replaced_by,
            "error": self.error,
            "outcome": self.outcome,
        }
