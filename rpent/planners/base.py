"""The planner contract: the ``Planner`` protocol, its configuration and result, the
event hook, and the registry of backends.

A planner is the LLM runtime that drives the tool-calling loop. Every backend sees the
same rendered system prompt, user message and toolkit, so backends can be compared
head to head::

    from rpent.planners.base import PlannerConfig, create_planner, Steering
    planner = create_planner("api", PlannerConfig(model="anthropic:claude-sonnet-4-5"))
    result = planner.solve(system_prompt, user_message, toolkit,
                           steering=Steering(), on_event=lambda kind, payload: ...)
    result.finish, result.stats.to_dict(), result.error

Backends are imported lazily by name (:data:`PLANNER_BACKENDS`) so importing this
module never pulls an SDK, and there are no import cycles (backends import this
module, never the reverse).

Toolkit contract (docs/interfaces.md): ``specs() -> list[ToolSpec]``,
``execute(name, args, call_id) -> dict`` (never raises), ``cancel()``,
``clear_cancel()``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rpent.planners.steering import Steering

__all__ = [
    "DEFAULT_IMAGE_BUDGET_BYTES",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_TIMEOUT_S",
    "EventHook",
    "Finish",
    "Planner",
    "PlannerConfig",
    "PlannerConfigError",
    "PlannerResult",
    "PlannerStats",
    "PLANNER_BACKENDS",
    "REASONING_EFFORTS",
    "Steering",
    "Toolkit",
    "ToolSpecLike",
    "available_planners",
    "create_planner",
    "planner_class",
    "register_planner",
    "resolve_timeout_s",
]

DEFAULT_MAX_TURNS = 100
"""Default ``--max-turns`` (model requests, retries included); RPent reference §2.1."""
DEFAULT_MAX_TOKENS = 8192
"""Default ``--max-tokens`` per model response; RPent reference §2.1."""
DEFAULT_IMAGE_BUDGET_BYTES = 4 * 1024 * 1024
"""Decoded image bytes kept per request (newest first, always the 2 newest); RPent reference §8."""
REASONING_EFFORTS = ("none", "low", "medium", "high", "xhigh")
"""Accepted ``--reasoning-effort`` values; RPent reference §2.1."""


DEFAULT_TIMEOUT_S = 1200.0
"""Planner wall-clock limit when neither the flag nor an env var sets one (RPent reference §2.1)."""


def resolve_timeout_s(planner: str, explicit: float | None, environ: dict[str, str] | None = None,
                      interactive: bool = False) -> float | None:
    """The ``--planner-timeout-s`` default chain (RPent reference §2.1).

    ``explicit`` wins; else ``CODEX_TIMEOUT_S`` (codex only), then ``CELL_TIMEOUT_S``, then
    1200 s. Terminal-interactive api/claude_code sessions get no limit (None).

    Raises:
        PlannerConfigError: an env var is not a positive number.
    """
    if explicit is not None:
        return explicit
    if interactive and planner in ("api", "claude_code"):
        return None
    env = os.environ if environ is None else environ
    for var in (("CODEX_TIMEOUT_S",) if planner == "codex" else ()) + ("CELL_TIMEOUT_S",):
        raw = env.get(var)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                value = -1.0
            if not value > 0:
                raise PlannerConfigError(f"{var} must be a positive number of seconds, got {raw!r}")
            return value
    return DEFAULT_TIMEOUT_S


class PlannerConfigError(ValueError):
    """A planner option is invalid or missing; the message names the flag and the fix."""


@runtime_checkable
class ToolSpecLike(Protocol):
    """What a planner reads from ``toolkit.specs()`` entries."""

    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool


@runtime_checkable
class Toolkit(Protocol):
    """The toolkit contract planners are built against (docs/interfaces.md)."""

    def specs(self) -> list[Any]:
        """Tool specs: objects with ``name, description, input_schema, readonly``."""
        ...

    def execute(self, name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        """Run one tool; never raises (errors are ``{"error": ...}``)."""
        ...

    def cancel(self) -> None:
        """Ask the running tool to stop at its next env-step boundary."""
        ...

    def clear_cancel(self) -> None:
        """Reset the cancel flag before the next tool call."""
        ...


EventHook = Callable[[str, dict[str, Any]], None]
"""``on_event(kind, payload)``, called from the planner's thread.

Kinds and payloads (all JSON-able except ``tool_result.images``):

* ``request``: ``{"turn", "attempt", "provider", "model", "messages" (transcript form),
  "tools" (names), "params"}`` — before each model request (api planner).
* ``response``: ``{"turn", "content" (transcript form), "stop_reason", "usage", "raw"}``.
* ``text`` / ``thinking``: ``{"text"}``.
* ``tool_call``: ``{"name", "args", "call_id"}``.
* ``tool_result``: ``{"call_id", "name", "result" (without images), "is_error",
  "images": [{"label", "png": bytes, "ref"}], "elapsed_s"}``.
* ``usage``: ``{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}``.
* ``operator``: ``{"text"}`` — an operator line delivered to the model.
* ``retry``: ``{"attempt", "status", "error", "sleep_s"}``; ``error``: ``{"error"}``.

A hook that raises is logged and ignored; it never stops the run.
"""


@dataclass
class Finish:
    """An accepted ``finish`` tool call: the agent's claim, not a success label."""

    status: str
    summary: str


@dataclass
class PlannerStats:
    """Usage counters of one ``solve`` call.

    Attributes:
        turns_used: assistant replies received (model turns).
        tool_calls: tool calls executed.
        total_input_tokens: uncached input tokens, summed.
        total_output_tokens: output tokens, summed.
        cache_read_tokens: prompt-cache reads, summed.
        cache_write_tokens: prompt-cache writes, summed.
        requests: model requests sent, retries included (what ``max_turns`` caps for the
            api planner; for the SDK planners the number the CLI reports).
        elapsed_s: wall-clock seconds of ``solve``.
        cost_usd: cost reported by the backend (claude_code), else None.
    """

    turns_used: int = 0
    tool_calls: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    elapsed_s: float = 0.0
    cost_usd: float | None = None

    def add_usage(self, usage: dict[str, int]) -> None:
        """Add one reply's ``{"input_tokens", "output_tokens", "cache_read_tokens",
        "cache_write_tokens"}`` (missing keys count 0)."""
        self.total_input_tokens += int(usage.get("input_tokens") or 0)
        self.total_output_tokens += int(usage.get("output_tokens") or 0)
        self.cache_read_tokens += int(usage.get("cache_read_tokens") or 0)
        self.cache_write_tokens += int(usage.get("cache_write_tokens") or 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for the run record)."""
        return asdict(self)


@dataclass
class PlannerResult:
    """What ``Planner.solve`` returns; it never raises for provider/tool/timeout problems.

    Attributes:
        finish: the accepted finish, or None (max turns, timeout, error, interrupt, the
            model stopped calling tools).
        messages: transcript entries, images replaced by references:
            ``{"role": "user", "content": [...], "source": "task"|"operator"}``,
            ``{"role": "assistant", "content": [text|thinking|tool_use]}``,
            ``{"role": "tool", "name", "tool_call_id", "content", "is_error"}``.
        stats: :class:`PlannerStats`.
        error: None on a normal stop; else a one-line reason (provider error with hint,
            "API planner timed out after 30s", "interrupted by operator", ...).
        stop_reason: ``finished`` | ``end_turn`` | ``max_turns`` | ``timeout`` |
            ``interrupted`` | ``error`` | ``budget``.
        error_kind: class of ``error`` for programs (``rpent-check-llm``): ``auth`` (key
            rejected), ``network`` (provider unreachable), ``provider`` (other provider
            error), ``sdk`` (agent SDK/CLI failure), ``timeout``, ``interrupted``,
            ``internal``, ``policy_code`` (a ``--code-file`` policy's own code raised); None
            without error.
    """

    finish: Finish | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    stats: PlannerStats = field(default_factory=PlannerStats)
    error: str | None = None
    stop_reason: str = "end_turn"
    error_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (for ``transcript_<tag>.json``)."""
        return {"finish": asdict(self.finish) if self.finish else None, "messages": self.messages,
                "stats": self.stats.to_dict(), "error": self.error, "stop_reason": self.stop_reason,
                "error_kind": self.error_kind}


@dataclass
class PlannerConfig:
    """Options shared by the CLI and the TUI; each backend validates what applies to it.

    Attributes:
        model: ``--model``; api: ``anthropic:<id>`` | ``openai:<id>`` | ``openai-chat:<id>``;
            claude_code: bare id (default ``sonnet``); codex: bare id (else ``CODEX_MODEL``).
        base_url: ``--base-url`` (api only), overrides ``ANTHROPIC_BASE_URL``/``OPENAI_BASE_URL``.
        api_key: explicit key (tests, check-llm); None reads the provider's env var.
        max_turns: ``--max-turns`` (api: model requests incl. retries; SDKs: passed through).
        max_tokens: ``--max-tokens`` per response (api).
        timeout_s: ``--planner-timeout-s`` wall clock (s); None = no limit
            (the CLI resolves the env-var defaults before building this).
        reasoning_effort: one of :data:`REASONING_EFFORTS`, or None (provider default).
        no_images: ``--no-images`` (api): never send image bytes.
        image_budget_bytes: decoded image bytes kept per request (api).
        max_budget_usd: ``--claude-code-max-budget-usd`` (claude_code); None reads
            ``MAX_BUDGET_USD``, else 10.
        output_dir: run directory; the api planner appends ``llm_errors.jsonl`` there.
        cwd: working directory for the SDK CLIs (default: a fresh temp dir).
        max_retries: retries per request on 429/5xx/connection errors (api).
        env: extra environment for the SDK CLIs (overrides ``os.environ``).
        flash_dir: ``--flash-dir`` (flash): where ``<cell>_plan.json`` / ``_anchors.json`` are
            read; None = ``$RPENT_FLASH_DIR``, else ``<memory dir>/<robot>/flash``.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout_s: float | None = None
    reasoning_effort: str | None = None
    no_images: bool = False
    image_budget_bytes: int = DEFAULT_IMAGE_BUDGET_BYTES
    max_budget_usd: float | None = None
    output_dir: str | Path | None = None
    cwd: str | Path | None = None
    max_retries: int = 4
    env: dict[str, str] = field(default_factory=dict)
    flash_dir: str | Path | None = None

    def validate(self) -> None:
        """Check ranges shared by all backends.

        Raises:
            PlannerConfigError: with the flag name and the accepted range.
        """
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise PlannerConfigError(f"--max-turns must be an integer >= 1, got {self.max_turns!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise PlannerConfigError(f"--max-tokens must be an integer >= 1, got {self.max_tokens!r}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise PlannerConfigError(f"--planner-timeout-s must be > 0 seconds, got {self.timeout_s!r}")
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise PlannerConfigError(f"--reasoning-effort must be one of {', '.join(REASONING_EFFORTS)}, "
                                     f"got {self.reasoning_effort!r}")
        if self.image_budget_bytes < 0:
            raise PlannerConfigError("image_budget_bytes must be >= 0")
        if self.max_budget_usd is not None and not self.max_budget_usd > 0:
            raise PlannerConfigError(f"--claude-code-max-budget-usd must be > 0, got {self.max_budget_usd!r}")

    def getenv(self, name: str) -> str | None:
        """``self.env[name]`` if set, else ``os.environ[name]``, else None (empty counts as unset)."""
        value = self.env.get(name) if name in self.env else os.environ.get(name)
        return value or None

    @classmethod
    def field_names(cls) -> list[str]:
        """Names of all options (for building from argparse namespaces)."""
        return [f.name for f in fields(cls)]


class Planner(Protocol):
    """A planner backend. Construct with a :class:`PlannerConfig`; one ``solve`` per run."""

    name: str

    def solve(self, system_prompt: str, user_message: str, toolkit: Toolkit, *,
              steering: Steering | None = None, on_event: EventHook | None = None) -> PlannerResult:
        """Run the tool-calling loop until finish, max turns, timeout, interrupt or error.

        Args:
            system_prompt: rendered system prompt.
            user_message: rendered first user message (the task).
            toolkit: the toolkit (see :class:`Toolkit`).
            steering: operator lines and interrupts (CLI ``-i`` / TUI), or None.
            on_event: hook for the run layer and trajectory recorder (see :data:`EventHook`).

        Returns:
            :class:`PlannerResult`; problems are reported in ``error``, never raised.
        """
        ...


PLANNER_BACKENDS: dict[str, str] = {
    "api": "rpent.planners.api:ApiPlanner",
    "claude_code": "rpent.planners.claude_code:ClaudeCodePlanner",
    "codex": "rpent.planners.codex:CodexPlanner",
    "expert": "rpent.robots.metaworld.planner:ExpertPlanner",
    "flash": "rpent.flash.replay:FlashPlanner",
    "scripted": "rpent.planners.scripted:ScriptedPlanner",
}
"""Planner name -> ``"module:Class"``, imported on first use."""


def register_planner(name: str, target: str) -> None:
    """Add or replace a backend: ``target`` is ``"package.module:ClassName"``.

    Raises:
        ValueError: ``target`` is not of the form ``module:Class``.
    """
    if ":" not in target:
        raise ValueError(f"planner target must look like 'package.module:ClassName', got {target!r}")
    PLANNER_BACKENDS[name] = target


def available_planners() -> list[str]:
    """Registered planner names, sorted."""
    return sorted(PLANNER_BACKENDS)


def planner_class(name: str) -> type:
    """Import and return the backend class registered as ``name``.

    Raises:
        PlannerConfigError: unknown name (the message lists the known ones), or the
            backend's module cannot be imported (names the missing package).
    """
    target = PLANNER_BACKENDS.get(name)
    if target is None:
        raise PlannerConfigError(f"unknown planner {name!r}; choose one of: {', '.join(available_planners())}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PlannerConfigError(f"planner {name!r} cannot be loaded ({module_name}): {exc}; "
                                 f"install the project with its planner dependencies") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PlannerConfigError(f"planner {name!r}: {module_name} has no {attr}") from None


def create_planner(name: str, config: PlannerConfig | None = None) -> Planner:
    """Build the backend ``name`` with ``config`` (validated by the backend).

    Raises:
        PlannerConfigError: unknown planner or invalid options.
    """
    cls = planner_class(name)
    return cls(config or PlannerConfig())
