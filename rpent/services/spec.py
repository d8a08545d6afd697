"""ServiceSpec: what the supervisor needs to know to start (or reach) one RPC service."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rpent.rpc.endpoint import parse_endpoint

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class ServiceSpec:
    """Description of one service (env server, VLA server, SAM3 server, ...).

    Attributes:
        name: unique service name; also the log file name ``<log_dir>/<name>.log``
            (letters, digits, ``_ . -``).
        argv: command line of the server (e.g. ``[sys.executable, "-m", "rpent.robots.libero.env_server", ...]``).
            Ignored when ``endpoint`` is set.
        env: extra environment variables, laid over the supervisor's environment.
        endpoint: ``[protocol://]HOST:PORT`` of an already running server; when set nothing is
            spawned, the supervisor only checks ``healthz``.
        transport: ``"http"`` or ``"socket"`` for a spawned server.
        cwd: working directory of the child (default: the supervisor's).
        server_args: append ``--transport T --host 127.0.0.1 --port 0 --parent-watch`` to ``argv``
            (the flags of :func:`rpent.rpc.cli.add_server_args`). Turn off for a command that
            takes them itself.
        ready_timeout_s: seconds from spawn to readiness line + healthz (model loading counts).
        healthz_timeout_s: seconds for the ``healthz`` call.
        stop_grace_s: seconds between SIGTERM and SIGKILL at teardown.

    Raises:
        ValueError: bad name, empty argv without endpoint, malformed endpoint, unknown
            transport, non-positive timeouts.
    """

    name: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    endpoint: str | None = None
    transport: str = "http"
    cwd: str | None = None
    server_args: bool = True
    ready_timeout_s: float = 600.0
    healthz_timeout_s: float = 10.0
    stop_grace_s: float = 5.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(
                f"service name {self.name!r} is not valid: use letters, digits, '_', '.', '-' (it names the log file)"
            )
        if self.endpoint is not None:
            parse_endpoint(self.endpoint)
        elif not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise ValueError(f"service {self.name!r}: give argv (list of str) to spawn it, or an endpoint to reach it")
        if self.transport not in ("http", "socket"):
            raise ValueError(f"service {self.name!r}: transport must be 'http' or 'socket', got {self.transport!r}")
        for key in ("ready_timeout_s", "healthz_timeout_s", "stop_grace_s"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"service {self.name!r}: {key} must be a positive number of seconds, got {value!r}")
        bad = [k for k, v in self.env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise ValueError(f"service {self.name!r}: env values must be str; fix {bad}")
