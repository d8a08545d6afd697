"""Provider errors of the api planner: normalisation of SDK exceptions, retry policy,
and the ``llm_errors.jsonl`` log.

Both official SDKs (``anthropic``, ``openai``) raise ``APIStatusError`` (with
``status_code`` and the HTTP ``response``), ``APIConnectionError`` and
``APITimeoutError``; :func:`from_sdk_exception` maps them onto :class:`ProviderError`.
Retryable: 408, 409, 429, 5xx (incl. Anthropic's 529 overloaded), connection errors
and timeouts. The wait honours ``retry-after-ms`` / ``retry-after`` (bounded by
:data:`MAX_RETRY_AFTER_S`), else exponential backoff 1, 2, 4, 8 … s capped at
:data:`MAX_BACKOFF_S`.
"""

from __future__ import annotations

import email.utils
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_BACKOFF_S", "MAX_RETRY_AFTER_S", "LlmErrorLog", "ProviderError", "backoff_s", "from_sdk_exception"]

MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 60.0
IMAGE_HINT = "hint: the provider rejected image input; rerun with --no-images for text-only models"


@dataclass
class ProviderError(Exception):
    """A failed model request.

    Attributes:
        message: provider message (or exception text).
        status: HTTP status, or None for connection errors/timeouts.
        kind: short class (``rate_limit``, ``server``, ``bad_request``, ``auth``,
            ``connection``, ``timeout``, ``other``).
        retry_after_s: the server's requested wait (s), or None.
        retryable: worth retrying.
        provider: provider prefix (``anthropic``, ``openai``, ``openai-chat``).
    """

    message: str
    status: int | None = None
    kind: str = "other"
    retry_after_s: float | None = None
    retryable: bool = False
    provider: str = ""

    def __str__(self) -> str:
        where = f"{self.provider} " if self.provider else ""
        code = f"HTTP {self.status} " if self.status is not None else ""
        text = f"provider error ({where}{code}{self.kind}): {self.message}"
        if self.status is not None and 400 <= self.status < 500 and "image" in self.message.lower():
            text += f" ({IMAGE_HINT})"
        return text


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _message_of(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(body.get("message"), str):
            return body["message"]
    return str(getattr(exc, "message", None) or exc)


def from_sdk_exception(exc: BaseException, provider: str) -> ProviderError:
    """Map an ``anthropic``/``openai`` SDK exception (or any exception) to :class:`ProviderError`."""
    cls_names = {c.__name__ for c in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if "APITimeoutError" in cls_names:
        return ProviderError(f"request timed out: {exc}", None, "timeout", None, True, provider)
    if "APIConnectionError" in cls_names:
        cause = exc.__cause__ or exc.__context__
        detail = f"{exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
        return ProviderError(f"cannot reach the provider: {detail}", None, "connection", None, True, provider)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        retry_after = _retry_after(getattr(response, "headers", None))
        if status == 429:
            kind = "rate_limit"
        elif status >= 500:
            kind = "server"
        elif status in (401, 403):
            kind = "auth"
        else:
            kind = "bad_request"
        retryable = status in (408, 409, 429) or status >= 500
        return ProviderError(_message_of(exc), status, kind, retry_after, retryable, provider)
    return ProviderError(f"{type(exc).__name__}: {exc}", None, "other", None, False, provider)


def backoff_s(attempt: int, retry_after_s: float | None) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based)."""
    if retry_after_s is not None:
        return min(retry_after_s, MAX_RETRY_AFTER_S)
    return min(2.0 ** attempt, MAX_BACKOFF_S)


class LlmErrorLog:
    """Appends one JSON line per failed model request to ``<output_dir>/llm_errors.jsonl``.

    Each line: ``{"time" (unix s), "provider", "model", "turn", "attempt", "status",
    "kind", "message", "retry_after_s", "will_retry", "sleep_s"}``. Lines are written
    with a single ``write`` + flush + fsync so a crash never leaves a partial record
    behind an earlier one. ``output_dir=None`` disables logging.
    """

    def __init__(self, output_dir: str | Path | None) -> None:
        self.path = Path(output_dir) / "llm_errors.jsonl" if output_dir else None
        self._lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        """Append ``entry`` (plus ``time``)."""
        if self.path is None:
            return
        line = json.dumps({"time": time.time(), **entry}) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
