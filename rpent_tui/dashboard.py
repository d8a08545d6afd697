"""``rpent --dashboard``: the workbench in a browser, served by ``textual-serve`` over a session process.

textual-serve starts one app process per browser tab (per websocket) and stops it when the tab
closes (textual-serve's behaviour). Each tab therefore runs
``python -m rpent_tui.attached <session dir>``: a thin client of the one session process, so every tab sees
the same TaskRuns and operator requests, and closing a tab (or the dashboard server) leaves the
session running. Frames use the half-block renderer (terminal graphics do not reach a browser);
shift+F8 / F8 deliver ``episode.mp4`` and the latest frames as browser downloads.

Security: textual-serve has no authentication. The dashboard binds 127.0.0.1 unless told otherwise
(reach it through ``ssh -N -L 8000:127.0.0.1:8000 USER@HOST``); a non-loopback bind requires a
token (``--dashboard-token`` or ``$RPENT_DASHBOARD_TOKEN``), which the browser presents once as
``?token=...`` and then as an HttpOnly cookie; every route, the websocket included, checks it.
"""

from __future__ import annotations

import hmac
import ipaddress
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["TOKEN_ENV", "check_bind", "dashboard_command"]

#: Environment variable holding the dashboard token.
TOKEN_ENV = "RPENT_DASHBOARD_TOKEN"
_COOKIE = "rpent_dashboard"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token.

    Raises:
        ValueError: with the fix (set a token, or bind 127.0.0.1 and use an SSH port forward).
    """
    if not is_loopback(host) and not token:
        raise ValueError(f"--dashboard-host {host} is not loopback: set a token with --dashboard-token or "
                         f"${TOKEN_ENV} (then open http://HOST:PORT/?token=...), or keep 127.0.0.1 and forward the "
                         "port: ssh -N -L 8000:127.0.0.1:8000 USER@HOST")


def dashboard_command(session_dir: Path, extra: list[str] | None = None) -> str:
    """The shell command each browser tab runs: a workbench client attached to ``session_dir``
    (``rpent_tui.attached``; half-block images)."""
    argv = [sys.executable, "-m", "rpent_tui.attached", str(session_dir), *(extra or [])]
    return shlex.join(argv)


def make_server(command: str, host: str, port: int, token: str | None, title: str) -> Any:
    """A ``DashboardServer`` (textual-serve ``Server`` with the token check and per-request URLs)."""
    from aiohttp import web
    from textual_serve.server import Server

    class DashboardServer(Server):
        """textual-serve ``Server`` that checks the token on every route and builds the page's
        websocket URL from the request's own host (so any SSH forward port works)."""

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            if token:
                app.middlewares.append(self._check_token)
            return app

        @web.middleware
        async def _check_token(self, request: web.Request, handler: Any) -> web.StreamResponse:
            given = request.query.get("token") or request.cookies.get(_COOKIE) or ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                return web.Response(status=401, text="rpent dashboard: missing or wrong token; open "
                                                     "http://HOST:PORT/?token=<the dashboard token>\n")
            response = await handler(request)
            if request.query.get("token") and not response.prepared:
                response.set_cookie(_COOKIE, token, httponly=True, samesite="Strict")
            return response

        async def handle_index(self, request: web.Request) -> Any:
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def on_startup(self, app: web.Application) -> None:
            print(f"rpent: dashboard on http://{host}:{port}/ serving {title}", flush=True)

    return DashboardServer(command, host=host, port=port, title=title)
