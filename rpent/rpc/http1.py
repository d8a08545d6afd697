"""The few pieces of HTTP/1.1 (RFC 9112) the ``http`` transport speaks: message heads, parsed and written.

Both ends of :mod:`rpent.rpc.http` exchange ``content-length`` bodies only, so this module parses a
request or response *head* (start line + header fields) and formats one; bodies are read by the
transport straight into the buffer their arrays are decoded from. Parsing is strict where laxness
would be a risk (request smuggling, header injection): no obs-folded lines, no whitespace before a
field's colon, field names must be tokens, conflicting ``content-length`` values and
``transfer-encoding`` on a request are refused with the status a client should see.

(This replaced ``h11`` on the transport's hot path: h11's general state machine cost about ten times
the CPU of the rest of an rpent call on the 2-core dev machine, ``benchmarks/rpc_bench.py``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
"""Largest message head (start line + fields) either end reads, bytes (h11's default limit too)."""

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # control bytes other than TAB (CR/LF split lines first)
_REASONS = {200: "OK", 100: "Continue", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            411: "Length Required", 413: "Content Too Large", 431: "Request Header Fields Too Large",
            501: "Not Implemented", 503: "Service Unavailable"}


class HttpError(ValueError):
    """A message head that cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class RequestHead:
    """A parsed request head.

    Attributes:
        method: e.g. ``b"POST"``.
        target: the request target without its query (``b"/rpc"``).
        headers: field name (lower-case str) -> value (str, latin-1, stripped); repeated
            fields are joined with ``", "``.
        keep_alive: the connection may carry another request afterwards (HTTP/1.1 without
            ``connection: close``).
        content_length: the body length in bytes (0 when absent).
        expect_continue: the client waits for ``100 Continue`` before sending the body.
    """

    method: bytes
    target: bytes
    headers: dict[str, str]
    keep_alive: bool
    content_length: int
    expect_continue: bool


def _fields(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise HttpError(400, f"malformed header line {bytes(line[:80])!r} (folded, or not 'name: value')")
        if _CTL.search(value):
            raise HttpError(400, f"control character in header {name.decode('latin-1')!r}")
        key = name.decode("latin-1").lower()
        text = value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def bad_request_start(data: bytes) -> bool:
    """True if ``data`` (the first bytes of a connection or of a request) cannot begin an HTTP
    request line, so the peer can be answered 400 without waiting for a complete head."""
    line, crlf, _ = data.partition(b"\r\n")
    if not crlf and line.endswith(b"\r"):
        line = line[:-1]  # the LF has not arrived yet
    if _CTL.search(line) or b"\t" in line:
        return True
    method = line.split(b" ", 1)[0]
    return bool(method) and (len(method) > 32 or not _TOKEN.fullmatch(method))


def parse_request_head(raw: bytes) -> RequestHead:
    """Parse a request head (``raw`` = everything before the empty line that ends it).

    Raises:
        HttpError: 400 (malformed line or field, bad or conflicting ``content-length``),
            501 (``transfer-encoding``: this server reads ``content-length`` bodies only).
    """
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]) \
            or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise HttpError(400, f"bad HTTP request line {bytes(lines[0][:80])!r} (expected 'METHOD /path HTTP/1.1')")
    headers = _fields(lines[1:])
    if "transfer-encoding" in headers:
        raise HttpError(501, "transfer-encoding (chunked) request bodies are not supported: send a content-length")
    length = 0
    if "content-length" in headers:
        values = {v.strip() for v in headers["content-length"].split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise HttpError(400, f"bad content-length header {headers['content-length']!r}")
        length = int(values.pop())
    keep_alive = parts[2] == b"HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    expect = headers.get("expect", "").lower() == "100-continue"
    return RequestHead(parts[0], parts[1].split(b"?", 1)[0], headers, keep_alive, length, expect)


def parse_response_head(raw: bytes) -> tuple[int, dict[str, str], bool]:
    """Parse a response head (``raw`` = everything before the empty line that ends it).

    Returns:
        (status, headers, keep_alive): the status code, the fields (names lower-cased, values
        stripped, latin-1; repeated fields joined with ``", "``), and whether the connection may
        carry another request (HTTP/1.1 without ``connection: close``).
    Raises:
        HttpError: not an HTTP/1.x status line, or a malformed field line.
    """
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise HttpError(400, f"not an HTTP/1.x status line: {bytes(lines[0][:80])!r}")
    headers = _fields(lines[1:])
    keep_alive = parts[0] == b"HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    return int(parts[1]), headers, keep_alive


def response_head(status: int, content_type: str, length: int, *, close: bool = False) -> bytes:
    """The head of a response with a ``content-length`` body (``connection: close`` when ``close``)."""
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {length}\r\nserver: rpent\r\n")
    return (head + ("connection: close\r\n\r\n" if close else "\r\n")).encode("latin-1")


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
"""The interim response a client that sent ``expect: 100-continue`` waits for before its body."""
