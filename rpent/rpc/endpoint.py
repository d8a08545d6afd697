"""RPC endpoint strings: ``[protocol://]HOST:PORT``.

Accepted forms (``protocol`` is ``http`` (the default) or ``socket``)::

    127.0.0.1:5555            -> http://127.0.0.1:5555
    http://localhost:8000
    socket://127.0.0.1:5555
    socket://[::1]:5555       (IPv6 literal in brackets)

Port 0 is accepted only where ``allow_port_zero=True`` (a server asking the OS for a free port).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

PROTOCOLS = ("http", "socket")
DEFAULT_PROTOCOL = "http"
ACCEPTED_FORM = (
    "[protocol://]HOST:PORT with protocol one of http (default), socket; "
    "HOST a hostname, IPv4 address or [IPv6]; PORT 1-65535 "
    "(e.g. 'socket://127.0.0.1:5555', 'http://localhost:8000', '127.0.0.1:8000')"
)

_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9\-_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Endpoint:
    """A parsed RPC endpoint.

    Attributes:
        protocol: ``"http"`` or ``"socket"`` (the transport).
        host: hostname or IP literal, without IPv6 brackets (e.g. ``"::1"``).
        port: TCP port, 0-65535 (0 only for a server that binds an OS-chosen port).

    ``str(ep)`` gives the canonical form ``protocol://host:port`` (IPv6 hosts bracketed).
    """

    protocol: str
    host: str
    port: int

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown RPC protocol {self.protocol!r}; expected {ACCEPTED_FORM}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"RPC port {self.port!r} out of range; expected {ACCEPTED_FORM}")
        if not self.host:
            raise ValueError(f"RPC endpoint has an empty host; expected {ACCEPTED_FORM}")

    @property
    def host_for_url(self) -> str:
        """The host as it appears in a URL: IPv6 literals bracketed (``[::1]``)."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def is_loopback(self) -> bool:
        """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ``::1``)."""
        return is_loopback_host(self.host)

    def __str__(self) -> str:
        return f"{self.protocol}://{self.host_for_url}:{self.port}"


def is_loopback_host(host: str) -> bool:
    """True if ``host`` is ``localhost`` or a loopback IP literal; False for wildcard/other hosts."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_endpoint(text: str | Endpoint, *, allow_port_zero: bool = False) -> Endpoint:
    """Parse ``[protocol://]HOST:PORT`` into an :class:`Endpoint`.

    Args:
        text: the endpoint string (surrounding whitespace ignored); an ``Endpoint`` passes through.
        allow_port_zero: accept port 0 (a server binding an OS-chosen port).

    Returns:
        Endpoint with protocol defaulting to ``http``.

    Raises:
        ValueError: malformed string (e.g. ``'http//x'``, missing port, port out of range,
            unknown protocol, path/query after the port); the message quotes the input and
            shows the accepted form.
    """
    if isinstance(text, Endpoint):
        return text
    if not isinstance(text, str):
        raise ValueError(f"RPC endpoint must be a string, got {type(text).__name__}; expected {ACCEPTED_FORM}")
    raw = text
    s = text.strip()

    def bad(why: str) -> ValueError:
        return ValueError(f"invalid RPC endpoint {raw!r}: {why}; expected {ACCEPTED_FORM}")

    if not s:
        raise bad("empty string")
    protocol = DEFAULT_PROTOCOL
    if "://" in s:
        protocol, s = s.split("://", 1)
        protocol = protocol.lower()
        if protocol not in PROTOCOLS:
            raise bad(f"unknown protocol {protocol!r}")
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:?/", s):
        raise bad(f"protocol separator must be '://' (got {s.split('/', 1)[0] + '/'!r}...)")
    if "/" in s or "?" in s or "#" in s or "@" in s:
        raise bad("no path, query, user or fragment allowed after HOST:PORT")
    if s.startswith("["):
        close = s.find("]")
        if close < 0:
            raise bad("unterminated '[' in IPv6 host")
        host = s[1:close]
        rest = s[close + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"{host!r} is not an IPv6 address") from None
        if not rest.startswith(":"):
            raise bad("missing ':PORT' after the host")
        port_text = rest[1:]
    else:
        if s.count(":") != 1:
            if s.count(":") == 0:
                raise bad("missing ':PORT'")
            raise bad("too many ':' (write IPv6 hosts in brackets, e.g. [::1]:5555)")
        host, port_text = s.split(":", 1)
        if not host:
            raise bad("empty host")
        if not _HOST_RE.match(host):
            raise bad(f"{host!r} is not a valid hostname or IPv4 address")
    if not port_text.isdigit():
        raise bad(f"port {port_text!r} is not a number")
    port = int(port_text)
    lo = 0 if allow_port_zero else 1
    if not lo <= port <= 65535:
        raise bad(f"port {port} out of range {lo}-65535")
    return Endpoint(protocol=protocol, host=host, port=port)
