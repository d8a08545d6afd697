"""``rpent-check-llm``: check that a planner's LLM provider is configured and usable.

    rpent-check-llm --planner api --model anthropic:claude-sonnet-4-5 [--base-url URL] [--json]
    rpent-check-llm --planner claude_code [--model sonnet] [--json]
    rpent-check-llm --planner codex [--model gpt-5.1] [--json]

Checks, in order: configuration (model id, provider prefix, SDK installed), the API key
variable, then a real one-tool round trip through the planner itself: the model is
asked to call the probe tool ``rpent_probe`` once, which ends the loop. Prints one line
(or a JSON object with ``--json``) and exits 0 on success, 1 on failure, naming the
failure class:

================== ==========================================================
missing_config      no/invalid ``--model``, api-only flag with an SDK planner
unsupported_provider ``--model`` prefix is not anthropic/openai/openai-chat
missing_api_key     the provider's key variable is not set
auth_failed         the provider rejected the key (401/403)
network_error       the provider cannot be reached (refused, DNS, timeout)
provider_error      the provider answered with another error, or the model did
                    not call the probe tool
sdk_error           the agent SDK or its bundled CLI is missing or failed
================== ==========================================================

Default timeouts (RPent reference §2.4): 30 s for ``api``, 90 s for the SDK planners.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["FAILURE_CLASSES", "CheckResult", "check_llm", "build_parser", "main"]

FAILURE_CLASSES = ("missing_config", "unsupported_provider", "missing_api_key", "auth_failed", "network_error",
                   "provider_error", "sdk_error")
PROBE_TOOL = "rpent_probe"
PROBE_SYSTEM = "You are a connectivity check. Follow the instruction exactly."
PROBE_USER = (f"Call the tool `{PROBE_TOOL}` exactly once with text \"ping\". That call ends the check; "
              f"do not do anything else.")
DEFAULT_TIMEOUT_S = {"api": 30.0, "claude_code": 90.0, "codex": 90.0}


@dataclass(frozen=True)
class _ProbeSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool


class ProbeToolkit:
    """A one-tool toolkit: ``rpent_probe(text)`` echoes ``text`` and finishes the loop."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def specs(self) -> list[_ProbeSpec]:
        """The single probe tool."""
        return [_ProbeSpec(PROBE_TOOL, "Connectivity probe: echoes text and ends the check.",
                           {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                           True)]

    def execute(self, name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        """Echo the probe; unknown names are errors (never raises)."""
        if name != PROBE_TOOL:
            return {"error": f"unknown tool: {name}"}
        self.calls.append(dict(args or {}))
        return {"_finish": True, "status": "ok", "summary": str((args or {}).get("text", ""))}

    def cancel(self) -> None:
        """Nothing to cancel."""

    def clear_cancel(self) -> None:
        """Nothing to clear."""


@dataclass
class CheckResult:
    """Outcome of :func:`check_llm`: ``ok``, ``failure_class`` (one of
    :data:`FAILURE_CLASSES` or None), ``message``, ``elapsed_s`` and planner ``stats``."""

    ok: bool
    planner: str
    model: str | None
    base_url: str | None
    failure_class: str | None
    message: str
    elapsed_s: float
    stats: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (the ``--json`` output)."""
        return dict(self.__dict__)


def check_llm(planner: str, model: str | None, base_url: str | None = None, timeout_s: float | None = None,
              env: dict[str, str] | None = None) -> CheckResult:
    """Run the checks described in the module docstring; never raises."""
    from rpent.planners.base import PlannerConfig, PlannerConfigError, create_planner

    start = time.monotonic()

    def done(ok: bool, failure: str | None, message: str, stats: dict | None = None) -> CheckResult:
        return CheckResult(ok, planner, model, base_url, failure, message, round(time.monotonic() - start, 3), stats)

    if planner not in DEFAULT_TIMEOUT_S:
        return done(False, "missing_config", f"unknown planner {planner!r}; choose api, claude_code or codex")
    if planner != "api" and base_url:
        return done(False, "missing_config", f"--base-url applies to --planner api only (got --planner {planner})")
    config = PlannerConfig(model=model, base_url=base_url, timeout_s=timeout_s or DEFAULT_TIMEOUT_S[planner],
                           max_turns=4, max_tokens=1024, max_retries=1, env=dict(env or {}))
    try:
        backend = create_planner(planner, config)
    except PlannerConfigError as exc:
        name = type(exc).__name__
        if name == "UnsupportedProviderError":
            return done(False, "unsupported_provider", str(exc))
        if name == "MissingApiKeyError" or "API_KEY" in str(exc):
            return done(False, "missing_api_key", str(exc))
        if "cannot be loaded" in str(exc):
            return done(False, "sdk_error", str(exc))
        return done(False, "missing_config", str(exc))
    except ImportError as exc:
        return done(False, "sdk_error", f"planner SDK not installed: {exc}")
    except Exception as exc:
        return done(False, "sdk_error", f"{type(exc).__name__}: {exc}")
    toolkit = ProbeToolkit()
    result = backend.solve(PROBE_SYSTEM, PROBE_USER, toolkit)
    stats = result.stats.to_dict()
    if toolkit.calls and result.finish is not None:
        return done(True, None, f"round trip ok: the model called {PROBE_TOOL} "
                                f"({stats['requests']} request(s), {stats['elapsed_s']:.2f}s)", stats)
    if result.error:
        kind = {"auth": "auth_failed", "network": "network_error", "provider": "provider_error",
                "sdk": "sdk_error", "timeout": "network_error"}.get(result.error_kind or "", "provider_error")
        text = result.error.lower()
        if kind == "sdk_error" and ("401" in text or "authentication" in text or "api key" in text):
            kind = "auth_failed"
        return done(False, kind, result.error, stats)
    return done(False, "provider_error", f"the model answered but did not call {PROBE_TOOL} "
                                         f"(stop reason {result.stop_reason})", stats)


def build_parser() -> argparse.ArgumentParser:
    """The ``rpent-check-llm`` argument parser."""
    parser = argparse.ArgumentParser(prog="rpent-check-llm",
                                     description="Check that a planner's LLM provider is configured and usable: "
                                                 "config, key, reachability and a one-tool round trip.",
                                     epilog="Exit status: 0 the round trip worked, 1 it failed (the line names the "
                                            "failure class).")
    parser.add_argument("--planner", default="api", choices=("api", "claude_code", "codex"),
                        help="api (default), claude_code or codex")
    parser.add_argument("--model", default=None,
                        help="api: anthropic:<id> | openai:<id> | openai-chat:<id>; SDK planners: bare id")
    parser.add_argument("--base-url", default=None, help="api only: override ANTHROPIC_BASE_URL / OPENAI_BASE_URL")
    parser.add_argument("--timeout-s", type=float, default=None, help="round-trip limit (default 30 s api, 90 s SDKs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns (and exits with) 0 on success, 1 on failure."""
    parser = build_parser()
    args = parser.parse_args(argv)
    res = check_llm(args.planner, args.model, args.base_url, args.timeout_s)
    if args.json:
        print(json.dumps(res.to_dict()))
    elif res.ok:
        print(f"ok: --planner {res.planner} --model {res.model or '(default)'}: {res.message}")
    else:
        print(f"FAILED [{res.failure_class}]: --planner {res.planner} --model {res.model or '(default)'}: "
              f"{res.message}", file=sys.stderr)
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
