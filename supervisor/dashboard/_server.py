"""The dashboard's one listener: the page, its live feed, its actions, metrics and health.

Routes (anything else is ``404``; a known path with another method is ``405``)::

    GET  /                          the page (HTML), with this process's action token
    GET  /app.js, /app.css          its script and style sheet
    GET  /ws                        WebSocket upgrade: the live feed (read-only)
    POST /api/servers/NAME/restart  restart server NAME (token and Origin required)
    POST /api/servers/NAME/stop     stop server NAME (token and Origin required)
    GET  /metrics                   Prometheus text
    GET  /healthz                   JSON health, 200 or 503

``HEAD`` is accepted wherever ``GET`` is. The security rules are in the package docstring.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import attrs
import msgspec
import trio
import trio_websocket

from ..actors import SupervisorError
from ..log import get_logger, redacting
from ._address import format_host
from ._feed import Hub, feed_message
from ._http import HttpConnection, ReplayStream, Request, RequestError, Response
from ._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from ._metrics import render_metrics

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["DashboardInfo", "TOKEN_HEADER", "serve_dashboard"]

log = get_logger("supervisor.dashboard")

#: The request header that carries the action token.
TOKEN_HEADER = "X-Dashboard-Token"

#: Every response carries these. The page loads only its own script and style sheet
#: (no inline code, so no nonce is needed) and talks only to its own origin.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)

_ACTIONS = ("restart", "stop")
_TOKEN_PLACEHOLDER = "__DASHBOARD_TOKEN__"
_JSON = "application/json"
_STATIC = {
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}
# Routes that are not tied to the page and so take any Host header: a scraper may know
# this machine by any name. They are read-only and carry no token.
_ANY_HOST = frozenset({"/metrics", "/healthz"})

#: How often an open page gets fresh figures (call counts, latencies) without an event.
REFRESH_INTERVAL = 2.0
#: Bounds on the feed: the upgrade, one send to a page, the closing handshake.
_HANDSHAKE_TIMEOUT = 10.0
_SEND_TIMEOUT = 30.0
_CLOSE_TIMEOUT = 2.0
#: How long an action may take (a graceful stop first, for a restart).
_ACTION_TIMEOUT = 60.0


@attrs.frozen
class DashboardInfo:
    """Where a running dashboard is: reported by :func:`serve_dashboard` once it listens.

    ``url`` is the page's address (``http://127.0.0.1:8080/``; for a wildcard host, the
    loopback address of its family); ``host`` and ``port`` are the bound ones. ``token``
    is the action token embedded in the page; it is left out of ``repr``.
    """

    url: str
    host: str
    port: int
    token: str = attrs.field(repr=False)


async def serve_dashboard(
    sup: SupervisorHandle,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: trio.TaskStatus[DashboardInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the web dashboard of *sup* on *host*:*port* until cancelled.

    Use with ``nursery.start``: it reports a :class:`DashboardInfo` once listening
    (``port=0`` picks a free port). A new random action token is made for each call.
    An address that cannot be bound raises ``OSError`` from ``start``. One failing
    connection is logged and closed, never the listener. Cancelling stops accepting,
    closes every page's feed (code 1001, bounded) and returns.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    if port == 0:
        # Each address of a name such as "localhost" would get its own free port.
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    bound_host, bound_port = listeners[0].socket.getsockname()[:2]
    token = secrets.token_urlsafe(32)
    url_host = _url_host(host, bound_host)
    info = DashboardInfo(
        url=f"http://{format_host(url_host)}:{bound_port}/",
        host=bound_host,
        port=bound_port,
        token=token,
    )
    dashboard = _Dashboard(sup, token, host, bound_port)
    with redacting([token]):  # the token is redacted from logs while the dashboard serves
        async with trio.open_nursery() as nursery:
            await nursery.start(dashboard.hub.run, sup.subscribe)
            await nursery.start(trio.serve_listeners, dashboard.handle, listeners)
            log.info("dashboard listening", url=info.url)
            task_status.started(info)


def _url_host(requested: str, bound: str) -> str:
    try:
        address = ipaddress.ip_address(bound)
    except ValueError:
        return bound
    if address.is_unspecified:
        return "::1" if address.version == 6 else "127.0.0.1"
    return requested if requested.lower() == "localhost" else bound


class _Dashboard:
    """Request handling for one :func:`serve_dashboard` call."""

    def __init__(self, sup: SupervisorHandle, token: str, host: str, port: int) -> None:
        self.sup = sup
        self.hub = Hub()
        self._token = token.encode("ascii")
        self._token_text = token
        self._host = host.lower()
        self._port = port
        self._routes: dict[str, Callable[[Request], Awaitable[Response]]] = {
            "/": self._page,
            "/healthz": self._healthz,
            "/metrics": self._metrics,
            **{path: self._static for path in _STATIC},
        }

    # -- connections -------------------------------------------------------------------

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one connection: requests in turn, or one WebSocket feed."""
        conn = HttpConnection(stream)
        try:
            while True:
                try:
                    request = await conn.read_request()
                except RequestError as exc:
                    if conn.can_respond:
                        await conn.send(_error(exc.status, str(exc)), close=True)
                        await conn.linger()
                    return
                if request is None:
                    return
                if request.path == "/ws" and request.wants_upgrade:
                    refusal = self._check_upgrade(request)
                    if refusal is not None:
                        await conn.send(refusal, close=True)
                        await conn.linger()
                        return
                    await self._serve_feed(conn.replay(request))
                    return
                response = await self._respond(request)
                await conn.send(response, head_only=request.method == "HEAD")
                if not conn.next_cycle():
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the peer went away
        except Exception:
            # One broken connection must never take the listener down.
            log.warning("dashboard connection failed", exc_info=True)
        finally:
            await trio.aclose_forcefully(stream)

    async def _respond(self, request: Request) -> Response:
        if not request.target.startswith("/"):
            return _error(400, "request target must be a path")
        path = request.path
        if path.startswith("/api/"):
            return await self._action(request)
        route = self._routes.get(path)
        if route is None and path != "/ws":
            return _error(404, "not found")
        if path not in _ANY_HOST and not self._host_allowed(request):
            return _error(421, "this dashboard does not answer for that Host")
        if request.method not in ("GET", "HEAD"):
            return _error(405, "method not allowed", allow="GET, HEAD")
        if route is None:  # /ws without an upgrade
            return _error(426, "/ws is a WebSocket endpoint", upgrade="websocket")
        return await route(request)

    # -- security checks ---------------------------------------------------------------

    def _host_allowed(self, request: Request) -> bool:
        """The Host header names this listener: an IP address, ``localhost`` or the host
        it was started with, and its port. A DNS-rebinding page (an attacker's name
        pointing at 127.0.0.1) is refused here, so it never sees the page or its token."""
        hostname, port = _authority(request.headers.get("host", ""))
        if hostname is None or port != self._port:
            return False
        if hostname in ("localhost", self._host):
            return True
        try:
            ipaddress.ip_address(hostname)
        except ValueError:
            return False
        return True

    def _origin_allowed(self, request: Request) -> bool:
        """The Origin header is the dashboard's own origin (the one its Host names)."""
        origin = request.headers.get("origin")
        if origin is None:
            return False
        try:
            parts = urllib.parse.urlsplit(origin)
            origin_port = parts.port or 80
        except ValueError:
            return False
        if parts.scheme != "http" or parts.path or parts.username is not None:
            return False
        hostname, port = _authority(request.headers.get("host", ""))
        return hostname is not None and (parts.hostname, origin_port) == (hostname, port)

    def _token_ok(self, request: Request) -> bool:
        offered = request.headers.get(TOKEN_HEADER.lower(), "").encode("latin-1")
        return hmac.compare_digest(offered, self._token)

    # -- the page ----------------------------------------------------------------------

    async def _page(self, request: Request) -> Response:
        page = _asset("index.html").replace(_TOKEN_PLACEHOLDER, html.escape(self._token_text))
        return _ok(page.encode(), "text/html; charset=utf-8")

    async def _static(self, request: Request) -> Response:
        name, content_type = _STATIC[request.path]
        return _ok(_asset(name).encode(), content_type)

    async def _healthz(self, request: Request) -> Response:
        statuses = {name: r.status for name, r in self.sup.status().items()}
        values = set(statuses.values())
        if values <= {"connected", "idle"}:
            state, code = "ok", 200
        elif "connected" in values:
            state, code = "degraded", 200
        else:
            state, code = "unavailable", 503
        body = msgspec.json.encode({"status": state, "servers": statuses})
        return Response(code, body, _JSON, SECURITY_HEADERS)

    async def _metrics(self, request: Request) -> Response:
        return _ok(render_metrics(self.sup).encode(), METRICS_CONTENT_TYPE)

    # -- actions -----------------------------------------------------------------------

    async def _action(self, request: Request) -> Response:
        parts = request.path.split("/")  # "", "api", "servers", NAME, ACTION
        if len(parts) != 5 or parts[2] != "servers" or parts[4] not in _ACTIONS:
            return _error(404, "not found")
        name, action = urllib.parse.unquote(parts[3]), parts[4]
        if not self._host_allowed(request):
            return _error(421, "this dashboard does not answer for that Host")
        if request.method != "POST":
            return _error(405, "actions are POST requests", allow="POST")
        if not self._origin_allowed(request):
            log.info("dashboard action refused: foreign or missing Origin", action=action)
            return _error(403, "refused: the request does not come from this dashboard")
        if not self._token_ok(request):
            log.info("dashboard action refused: missing or wrong token", action=action)
            return _error(403, f"refused: the {TOKEN_HEADER} header is missing or wrong")
        if name not in self.sup.servers:
            return _error(404, f"no MCP server named {name!r}")
        log.info("dashboard action", action=action, server=name)
        run = self.sup.restart if action == "restart" else self.sup.stop
        with trio.move_on_after(_ACTION_TIMEOUT) as scope:
            try:
                await run(name)
            except SupervisorError as exc:
                return _error(409, str(exc))
        if scope.cancelled_caught:
            return _error(504, f"{action} of {name!r} did not finish in {_ACTION_TIMEOUT:g} s")
        status = self.sup.status()[name].status
        body = msgspec.json.encode({"ok": True, "server": name, "action": action, "status": status})
        return Response(200, body, _JSON, SECURITY_HEADERS)

    # -- the live feed -----------------------------------------------------------------

    def _check_upgrade(self, request: Request) -> Response | None:
        """Why this upgrade request is refused (a response), or ``None`` to accept it."""
        if not self._host_allowed(request):
            return _error(421, "this dashboard does not answer for that Host")
        if request.method != "GET":
            return _error(405, "method not allowed", allow="GET")
        if not self._origin_allowed(request):
            log.info("dashboard feed refused: foreign or missing Origin")
            return _error(403, "refused: the request does not come from this dashboard")
        if request.headers.get("sec-websocket-version") != "13":
            return Response(
                426,
                b'{"error": "WebSocket version 13 required"}',
                _JSON,
                (*SECURITY_HEADERS, ("Sec-WebSocket-Version", "13")),
            )
        if not request.headers.get("sec-websocket-key"):
            return _error(400, "Sec-WebSocket-Key missing")
        return None

    async def _serve_feed(self, stream: ReplayStream) -> None:
        """Accept the upgrade and feed the page until it leaves or we are cancelled."""
        async with trio.open_nursery() as nursery:
            # trio-websocket's reader task must outlive our cancellation long enough for
            # the closing handshake; it gets a nursery that only we cancel.
            reader: trio.Nursery = await nursery.start(_shielded_nursery)
            ws: trio_websocket.WebSocketConnection | None = None
            try:
                try:
                    with trio.fail_after(_HANDSHAKE_TIMEOUT):
                        ws_request = await trio_websocket.wrap_server_stream(
                            reader, stream, max_message_size=4096
                        )
                        ws = await ws_request.accept(extra_headers=_encoded(SECURITY_HEADERS))
                except (trio_websocket.ConnectionClosed, trio.TooSlowError):
                    log.debug("dashboard page left during the WebSocket handshake")
                    return
                await self._feed(ws)
            finally:
                if ws is not None:
                    cancelled = trio.current_effective_deadline() == float("-inf")
                    with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
                        await ws.aclose(1001 if cancelled else 1000)
                reader.cancel_scope.cancel()

    async def _feed(self, ws: trio_websocket.WebSocketConnection) -> None:
        """``hello`` (recent events and every record), then an ``update`` per burst of
        events, or every :data:`REFRESH_INTERVAL` seconds when there are none."""
        history, outbox = self.hub.join()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_ignore_incoming, ws, nursery.cancel_scope)
                message = feed_message("hello", self.sup.status(), history)
                while True:
                    with trio.move_on_after(_SEND_TIMEOUT) as sending:
                        try:
                            await ws.send_message(message)
                        except trio_websocket.ConnectionClosed:
                            nursery.cancel_scope.cancel()
                            return
                    if sending.cancelled_caught:
                        log.info("dashboard page too slow to read its feed; closing it")
                        nursery.cancel_scope.cancel()
                        return
                    events, dropped = await outbox.take(REFRESH_INTERVAL)
                    message = feed_message("update", self.sup.status(), events, dropped)
        finally:
            self.hub.leave(outbox)


async def _ignore_incoming(ws: trio_websocket.WebSocketConnection, scope: trio.CancelScope) -> None:
    """The feed is one-way: read and drop what the page sends; end the feed on close."""
    try:
        while True:
            await ws.get_message()
    except trio_websocket.ConnectionClosed:
        scope.cancel()


async def _shielded_nursery(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
    """A nursery that outside cancellation does not reach, until its own scope is cancelled."""
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.shield = True
        task_status.started(nursery)
        await trio.sleep_forever()


def _authority(host_header: str) -> tuple[str | None, int | None]:
    """``(hostname, port)`` of a Host header (port 80 when absent); ``(None, None)`` if bad."""
    if not host_header or any(c in host_header for c in "@/?#\\ "):
        return None, None
    try:
        parts = urllib.parse.urlsplit("//" + host_header)
        return parts.hostname, parts.port or 80
    except ValueError:
        return None, None


@lru_cache(maxsize=len(_STATIC) + 1)  # bounded: index.html and the static files
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _ok(body: bytes, content_type: str) -> Response:
    return Response(200, body, content_type, SECURITY_HEADERS)


def _error(status: int, message: str, *, allow: str = "", upgrade: str = "") -> Response:
    headers = SECURITY_HEADERS
    if allow:
        headers = (*headers, ("Allow", allow))
    if upgrade:
        headers = (*headers, ("Upgrade", upgrade))
    return Response(status, msgspec.json.encode({"error": message}), _JSON, headers)


def _encoded(headers: tuple[tuple[str, str], ...]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in headers]
