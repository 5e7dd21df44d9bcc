"""The dashboard as a plain ASGI application: the page, its live feed, its actions,
the login, metrics and health.

Routes (anything else is ``404``; a known path with another method is ``405``)::

    GET  /                          the page (HTML), with the state it starts from (the
                                    feed's ``hello``)
    GET  /app.js, /app.css          its script and style sheet
    GET  /timeline.css              the styles of its strips (the fault report's too)
    GET  /ws                        WebSocket upgrade: the live feed (read-only)
    GET  /login?token=TOKEN         sets the session cookie, then sends the browser to /
    POST /api/servers/NAME/restart  restart server NAME (login and Origin required)
    POST /api/servers/NAME/stop     stop server NAME (login and Origin required)
    GET  /metrics                   Prometheus text
    GET  /healthz                   JSON health, 200 or 503
    GET  /readyz                    JSON readiness: 503 while a required server is down

``HEAD`` is accepted wherever ``GET`` is; ``GET /ws`` without an upgrade is ``426``. A
WebSocket upgrade of another path gets the answer a plain request would (as the
upgrade's refusal). The security rules are in the package docstring; the checks are in
``_security``. A request that fails inside the app is logged and answered ``500``; the
``lifespan`` scope is acknowledged and otherwise unused.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import trio

from .._serving import lifespan as _lifespan
from ..actors import SupervisorError
from ..log import get_logger
from ..monitor._probes import readiness
from ..server._status import ServerStatus
from ..timeline._draw import TIMELINE_CSS
from ._feed import Hub
from ._http import (
    Disconnected,
    Receive,
    Request,
    RequestError,
    Response,
    Scope,
    Send,
    error,
    json,
    read_body,
    send_response,
)
from ._live import hello, serve_feed
from ._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from ._metrics import render_metrics
from ._security import Guard, Login
from ._strips import Strips

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["DashboardApp"]

log = get_logger("supervisor.dashboard")

_ACTIONS = ("restart", "stop")
_SNAPSHOT_PLACEHOLDER = "__DASHBOARD_SNAPSHOT__"
_STATIC = {
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}
_LOGIN = "/login"
_CHALLENGE = 'Bearer realm="mcp-supervisor dashboard"'
_HOW_TO_LOG_IN = (
    "open the login URL mcp-supervisor printed when the dashboard started "
    "(/login?token=TOKEN), or send 'Authorization: Bearer TOKEN'"
)

#: How long an action may take (a graceful stop first, for a restart).
_ACTION_TIMEOUT = 60.0


class DashboardApp:
    """The ASGI application of one :func:`~supervisor.dashboard.serve_dashboard` call.

    *stopping* is set when the dashboard stops: every open feed then closes (1001).
    """

    def __init__(
        self,
        sup: SupervisorHandle,
        guard: Guard,
        hub: Hub,
        strips: Strips,
        stopping: trio.Event,
    ) -> None:
        self.sup = sup
        self.hub = hub
        self.strips = strips
        self._guard = guard
        self._stopping = stopping
        self._routes: dict[str, Callable[[Request], Awaitable[Response]]] = {
            "/": self._page,
            _LOGIN: self._login,
            "/healthz": self._healthz,
            "/readyz": self._readyz,
            "/metrics": self._metrics,
            "/timeline.css": self._timeline_css,
            **{path: self._static for path in _STATIC},
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)

    # -- scopes ------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request.from_scope(scope)
        try:
            body = await read_body(receive, request.headers)
        except Disconnected:
            return
        except RequestError as exc:
            await send_response(send, error(exc.status, str(exc)))
            return
        request = Request.from_scope(scope, body)
        await send_response(send, await self._answer(request))

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        request = Request.from_scope(scope)
        if request.path != "/ws":
            await send_response(send, await self._answer(request), websocket=True)
            return
        refusal = self._check_upgrade(request)
        if refusal is not None:
            await send_response(send, refusal, websocket=True)
            return
        try:
            await serve_feed(receive, send, self.sup, self.hub, self.strips, self._stopping)
        except Exception:
            log.warning("dashboard feed failed", exc_info=True)

    async def _answer(self, request: Request) -> Response:
        try:
            return await self._respond(request)
        except Exception:
            # One failing request must never take the listener down, nor show a traceback.
            log.warning("dashboard request failed", exc_info=True)
            return error(500, "internal error")

    async def _respond(self, request: Request) -> Response:
        if not request.path.startswith("/"):
            return error(400, "request target must be a path")
        path = request.path
        if path.startswith("/api/"):
            return await self._action(request)
        route = self._routes.get(path)
        if route is None and path != "/ws":
            return error(404, "not found")
        if not self._guard.host_allowed(request.headers):
            return error(421, "this dashboard does not answer for that Host")
        if request.method not in ("GET", "HEAD"):
            return error(405, "method not allowed", allow="GET, HEAD")
        if path != _LOGIN and (refusal := self._check_read(request)) is not None:
            return refusal
        if route is None:  # /ws without an upgrade
            return error(426, "/ws is a WebSocket endpoint", upgrade="websocket")
        return await route(request)

    def _check_read(self, request: Request) -> Response | None:
        """Why reading is refused (``401``: it needs the login, beyond loopback), or
        ``None``."""
        if not self._guard.login_to_read:
            return None
        if self._guard.login(request.headers) in (Login.COOKIE, Login.BEARER):
            return None
        message = f"this dashboard needs its login to be read: {_HOW_TO_LOG_IN}"
        return error(401, message, challenge=_CHALLENGE)

    # -- the page ----------------------------------------------------------------------

    async def _page(self, request: Request) -> Response:
        """The page, with the state it starts from: the feed's ``hello`` as of now, in a
        JSON data block (``<`` escaped, so that nothing in it — a server's text — can end
        the block), so that its first render needs no feed. It holds no secret."""
        snapshot = hello(self.sup, self.hub.recent(), self.strips).replace("<", "\\u003c")
        page = _asset("index.html").replace(_SNAPSHOT_PLACEHOLDER, snapshot, 1)
        return Response(200, page.encode(), "text/html; charset=utf-8")

    async def _login(self, request: Request) -> Response:
        """``/login?token=TOKEN``: with this dashboard's token, set its session cookie and
        send the browser to the page (``303``, so that the token leaves the address bar);
        otherwise ``403``."""
        offered = urllib.parse.parse_qs(request.query).get("token", [""])[0]
        if not self._guard.token_ok(offered):
            log.info("dashboard login refused: wrong or missing token")
            return error(
                403,
                "refused: this login link's token is wrong; open the login URL "
                "mcp-supervisor printed when the dashboard started",
            )
        log.info("dashboard login")
        cookie = ("Set-Cookie", self._guard.session_cookie())
        return Response(303, b"", headers=(("Location", "/"), cookie))

    async def _timeline_css(self, request: Request) -> Response:
        return Response(200, TIMELINE_CSS.encode(), "text/css; charset=utf-8")

    async def _static(self, request: Request) -> Response:
        name, content_type = _STATIC[request.path]
        return Response(200, _asset(name).encode(), content_type)

    async def _healthz(self, request: Request) -> Response:
        statuses = {name: r.status for name, r in self.sup.status().items()}
        values = set(statuses.values()) - {ServerStatus.DISABLED}  # never started: not a problem
        # Only a server heard from within its window is up: `unverified` (like `degraded`)
        # makes it "degraded" beside a connected server, "unavailable" without one.
        if values <= {ServerStatus.CONNECTED, ServerStatus.IDLE}:
            state, code = "ok", 200
        elif ServerStatus.CONNECTED in values:
            state, code = "degraded", 200
        else:
            state, code = "unavailable", 503
        return json(code, {"status": state, "servers": statuses})

    async def _readyz(self, request: Request) -> Response:
        return json(*readiness(self.sup))

    async def _metrics(self, request: Request) -> Response:
        return Response(200, render_metrics(self.sup).encode(), METRICS_CONTENT_TYPE)

    # -- actions -----------------------------------------------------------------------

    async def _action(self, request: Request) -> Response:
        parts = request.path.split("/")  # "", "api", "servers", NAME, ACTION
        if len(parts) != 5 or parts[2] != "servers" or parts[4] not in _ACTIONS:
            return error(404, "not found")
        name, action = urllib.parse.unquote(parts[3]), parts[4]
        if not self._guard.host_allowed(request.headers):
            return error(421, "this dashboard does not answer for that Host")
        if request.method != "POST":
            return error(405, "actions are POST requests", allow="POST")
        login = self._guard.login(request.headers)
        if login not in (Login.COOKIE, Login.BEARER):
            log.info("dashboard action refused: not logged in", action=action)
            said = "a wrong one was sent" if login is Login.WRONG else "none was sent"
            message = f"refused: restart and stop need this dashboard's login ({said}): "
            return error(401, message + _HOW_TO_LOG_IN, challenge=_CHALLENGE)
        if not self._origin_ok(request, login):
            log.info("dashboard action refused: foreign or missing Origin", action=action)
            return error(403, "refused: the request does not come from this dashboard")
        if name not in self.sup.servers:
            return error(404, f"no MCP server named {name!r}")
        log.info("dashboard action", action=action, server=name)
        run = self.sup.restart if action == "restart" else self.sup.stop
        with trio.move_on_after(_ACTION_TIMEOUT) as scope:
            try:
                await run(name)
            except SupervisorError as exc:
                return error(409, str(exc))
        if scope.cancelled_caught:
            return error(504, f"{action} of {name!r} did not finish in {_ACTION_TIMEOUT:g} s")
        status = self.sup.status()[name].status
        return json(200, {"ok": True, "server": name, "action": action, "status": status})

    # -- the live feed -----------------------------------------------------------------

    def _check_upgrade(self, request: Request) -> Response | None:
        """Why this upgrade to ``/ws`` is refused (a response), or ``None`` to accept it.
        (The server has already checked the handshake itself: a ``GET`` with a key and
        version 13, else ``400``.)"""
        if not self._guard.host_allowed(request.headers):
            return error(421, "this dashboard does not answer for that Host")
        if (refusal := self._check_read(request)) is not None:
            return refusal
        if not self._origin_ok(request, self._guard.login(request.headers)):
            log.info("dashboard feed refused: foreign or missing Origin")
            return error(403, "refused: the request does not come from this dashboard")
        return None

    def _origin_ok(self, request: Request, login: Login) -> bool:
        """A browser always sends ``Origin`` on these requests, and cannot forge it: it
        must be the dashboard's own. A bearer token is never a browser's (no other site's
        page can add the header: its preflight is refused), so it may come without one."""
        if login is Login.BEARER and "origin" not in request.headers:
            return True
        return self._guard.origin_allowed(request.headers)


@lru_cache(maxsize=16)  # the few static assets: bounded
def _asset(name: str) -> str:
    package = __name__.rpartition(".")[0]  # supervisor.dashboard
    return resources.files(package).joinpath("static", name).read_text(encoding="utf-8")
