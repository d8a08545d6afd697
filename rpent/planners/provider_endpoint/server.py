"""The local provider endpoint: a threaded HTTP server that speaks the Anthropic
Messages API and the OpenAI Responses and Chat Completions APIs, answering from a
script (see :mod:`.script`).

Server choice: the standard library's ``http.server.ThreadingHTTPServer`` (one thread
per connection, HTTP/1.1 keep-alive). It needs no dependency, and SSE replies are
written as chunked transfer encoding, which every SDK and both bundled CLIs read.

Routes (the query string is ignored when matching: the Claude Code CLI posts to
``/v1/messages?beta=true``):

================================  =====================================================
``POST /v1/messages``             Anthropic Messages, JSON or SSE (``"stream": true``)
``POST /v1/messages/count_tokens`` Anthropic token count (estimate)
``POST /v1/responses``            OpenAI Responses, JSON or SSE
``POST /v1/chat/completions``     OpenAI Chat Completions, JSON or SSE (``data:`` lines)
``GET /v1/models``                one model entry (both vendors' list shapes merged)
``GET /healthz``                  ``{"ok": true}``
================================  =====================================================

Every model request is recorded (:attr:`ProviderEndpoint.requests`) for assertions,
and optionally appended to a JSONL file. Binds 127.0.0.1 by default.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from rpent.planners.provider_endpoint import wire_anthropic, wire_chat, wire_responses
from rpent.planners.provider_endpoint.script import Fault, ReceivedRequest, Responder, Turn
from rpent.planners.provider_endpoint.wire_common import estimate_tokens, reply_usage

__all__ = ["ProviderEndpoint"]

_ROUTES = {"/v1/messages": "anthropic", "/messages": "anthropic",
           "/v1/messages/count_tokens": "count_tokens", "/messages/count_tokens": "count_tokens",
           "/v1/responses": "responses", "/responses": "responses",
           "/v1/chat/completions": "chat", "/chat/completions": "chat"}
_PARSERS = {"anthropic": wire_anthropic.parse, "responses": wire_responses.parse, "chat": wire_chat.parse}
_REDACTED = {"authorization", "x-api-key", "cookie"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout, interrupt) is normal here: stay quiet about it."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class ProviderEndpoint:
    """A scripted Anthropic/OpenAI-compatible HTTP server on a loopback port.

    Args:
        responder: a :class:`~.script.Script` or any ``callable(ReceivedRequest) -> Turn``.
        host: bind address (default 127.0.0.1; never bind wider unless you mean it).
        port: TCP port; 0 picks a free one (read :attr:`port` after :meth:`start`).
        api_key: when set, requests must carry it (``x-api-key`` or ``Authorization:
            Bearer``) or get 401, to exercise auth-failure handling.
        record_path: JSONL file to append every recorded request to (created), or None.
        log: stream for one line per request (``None`` = silent).
        model_id: the id ``GET /v1/models`` lists.

    Use as a context manager, or call :meth:`start` / :meth:`close`.
    ``base_url`` is what Anthropic clients take (``ANTHROPIC_BASE_URL``);
    ``openai_base_url`` (``…/v1``) is what OpenAI clients take (``OPENAI_BASE_URL``).
    """

    def __init__(self, responder: Responder, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, record_path: str | Path | None = None,
                 log: TextIO | None = None, model_id: str = "scripted-model") -> None:
        self.responder = responder
        self.host = host
        self.api_key = api_key
        self.record_path = Path(record_path) if record_path else None
        self.log = log
        self.model_id = model_id
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._seen_prefixes: set[str] = set()
        self._httpd = _Server((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound TCP port."""
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://host:port`` (Anthropic SDK / Claude Code ``ANTHROPIC_BASE_URL``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://host:port/v1`` (OpenAI SDK ``OPENAI_BASE_URL``, codex provider ``base_url``)."""
        return self.base_url + "/v1"

    def start(self) -> "ProviderEndpoint":
        """Serve in a background daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="provider-endpoint", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`close` (used by the CLI)."""
        self._httpd.serve_forever()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "ProviderEndpoint":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- queries for tests ---------------------------------------------------------------
    def model_requests(self, api: str | None = None) -> list[ReceivedRequest]:
        """Recorded model requests (count_tokens excluded), optionally of one ``api``."""
        with self._lock:
            return [r for r in self.requests if r.api != "count_tokens" and (api is None or r.api == api)]

    # -- request handling ----------------------------------------------------------------
    def _record(self, req: ReceivedRequest) -> None:
        """Write an answered request to ``--record`` and the log (it is in ``requests`` since it arrived)."""
        if self.record_path is not None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            entry = {"index": req.index, "api": req.api, "path": req.path, "query": req.query,
                     "status": req.status, "turn_index": req.turn_index, "model": req.model,
                     "stream": req.stream, "tool_names": req.tool_names,
                     "tool_results": [r.__dict__ for r in req.tool_results], "image_count": req.image_count,
                     "last_user_text": req.last_user_text, "headers": req.headers, "body": req.body}
            with self._lock, self.record_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
        if self.log is not None:
            print(f"[provider-endpoint] #{req.index} {req.api} {req.path} model={req.model} stream={req.stream} "
                  f"tools={len(req.tool_names)} tool_results={len(req.tool_results)} images={req.image_count} "
                  f"-> {req.status} turn={req.turn_index}", file=self.log, flush=True)

    def _cache_state(self, api: str, body: dict[str, Any]) -> tuple[int, bool]:
        if api == "anthropic":
            prefix = wire_anthropic.cacheable_prefix(body)
        else:  # OpenAI caches the instructions/tools prefix automatically
            prefix = {"instructions": body.get("instructions"), "tools": body.get("tools"),
                      "system": [m for m in body.get("messages") or [] if m.get("role") in ("system", "developer")]}
        if not prefix or not any(prefix.values()):
            return 0, False
        key = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
        with self._lock:
            first = key not in self._seen_prefixes
            self._seen_prefixes.add(key)
        if api != "anthropic":
            return (0, False) if first else (estimate_tokens(prefix), False)
        return estimate_tokens(prefix), first


def _make_handler(ep: ProviderEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "rpent-provider-endpoint/1"

        def log_message(self, fmt: str, *args: Any) -> None:  # silence the default stderr log
            pass

        # -- plumbing --
        def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _start_sse(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _end_chunks(self) -> None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            path = urlsplit(self.path).path.rstrip("/")
            if path in ("/v1/models", "/models"):
                entry = {"id": ep.model_id, "object": "model", "type": "model", "display_name": ep.model_id,
                         "created": 0, "created_at": "1970-01-01T00:00:00Z", "owned_by": "rpent"}
                self._send_json(200, {"object": "list", "data": [entry], "has_more": False,
                                      "first_id": ep.model_id, "last_id": ep.model_id, "models": []})
            elif path in ("/healthz", ""):
                self._send_json(200, {"ok": True})
            else:
                self._send_json(404, {"error": {"message": f"no route GET {path}", "type": "not_found"}})

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            split = urlsplit(self.path)
            path = split.path.rstrip("/")
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            api = _ROUTES.get(path)
            if api is None:
                self._send_json(404, {"error": {"message": f"no route POST {path}; served: {sorted(_ROUTES)}",
                                                "type": "not_found_error"}})
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body is not a JSON object")
            except ValueError as exc:
                self._send_json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                 "message": f"request body is not JSON: {exc}"}})
                return
            headers = {k.lower(): ("<redacted>" if k.lower() in _REDACTED else v) for k, v in self.headers.items()}
            parsed = _PARSERS.get(api, wire_anthropic.parse)(body)
            # listed before it is answered: a client that has its reply always finds its request
            with ep._lock:
                req = ReceivedRequest(index=len(ep.requests), api=api, path=path, query=split.query,
                                      headers=headers, body=body, model=str(body.get("model", "")),
                                      stream=bool(body.get("stream", False)), **parsed)
                ep.requests.append(req)
            try:
                self._answer(req, body)
            finally:
                ep._record(req)

        def _auth_ok(self) -> bool:
            if ep.api_key is None:
                return True
            given = self.headers.get("x-api-key") or ""
            bearer = self.headers.get("authorization") or ""
            return given == ep.api_key or bearer == f"Bearer {ep.api_key}"

        def _answer(self, req: ReceivedRequest, body: dict[str, Any]) -> None:
            if not self._auth_ok():
                self._fault(req, Fault(401, "invalid x-api-key / bearer token (scripted endpoint api_key)"))
                return
            if req.api == "count_tokens":
                req.status = 200
                self._send_json(200, {"input_tokens": estimate_tokens(body)})
                return
            try:
                turn = ep.responder(req)
            except Exception as exc:  # a broken responder function must not kill the server thread
                self._fault(req, Fault(500, f"script responder raised {type(exc).__name__}: {exc}"))
                return
            if not isinstance(turn, Turn):
                self._fault(req, Fault(500, f"script responder returned {type(turn).__name__}, expected Turn"))
                return
            if turn.delay_s:
                time.sleep(turn.delay_s)
            if turn.fault is not None:
                self._fault(req, turn.fault)
                return
            cached, first = ep._cache_state(req.api, body)
            usage = reply_usage(turn, body, cached, first)
            model = req.model or ep.model_id
            req.status = 200
            if req.api == "anthropic":
                if req.stream:
                    self._sse_named(wire_anthropic.reply_events(turn, model, req.tool_names, usage))
                else:
                    self._send_json(200, wire_anthropic.reply_message(turn, model, req.tool_names, usage))
            elif req.api == "responses":
                ns = wire_responses.namespace_map(body.get("tools") or [])
                if req.stream:
                    self._sse_named(wire_responses.reply_events(turn, model, req.tool_names, usage, ns))
                else:
                    self._send_json(200, wire_responses.reply_response(turn, model, req.tool_names, usage, ns))
            else:
                if req.stream:
                    include = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._start_sse()
                    for c in wire_chat.reply_chunks(turn, model, req.tool_names, usage, include):
                        self._chunk(f"data: {json.dumps(c)}\n\n".encode())
                    self._chunk(b"data: [DONE]\n\n")
                    self._end_chunks()
                else:
                    self._send_json(200, wire_chat.reply_completion(turn, model, req.tool_names, usage))

        def _sse_named(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            self._start_sse()
            for name, data in events:
                self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self._end_chunks()

        def _fault(self, req: ReceivedRequest, fault: Fault) -> None:
            req.status = fault.status
            headers = {}
            if fault.retry_after_s is not None:
                headers["retry-after"] = f"{fault.retry_after_s:g}"
                headers["retry-after-ms"] = str(int(fault.retry_after_s * 1000))
            if req.api in ("anthropic", "count_tokens"):
                self._send_json(fault.status, wire_anthropic.error_body(fault), headers)
            else:
                self._send_json(fault.status, wire_responses.error_body(fault), headers)

    return Handler

