"""The gateway over Streamable HTTP: the SDK's ASGI app behind a bearer token, served by
the gateway's own HTTP/1.1 server (:mod:`._wire_front`) or hypercorn, under trio.

* ``/mcp`` is the MCP endpoint (both protocol eras; sessions unless ``stateless``). Every
  request needs ``Authorization: Bearer TOKEN``; without it, or with another token, the
  answer is ``401`` with a ``WWW-Authenticate`` header. A request that carries an
  ``Origin`` other than the address it was sent to is refused (``403``), so a web page
  cannot drive the gateway from a browser (DNS rebinding included; on a loopback address
  the SDK also checks the ``Host`` header). A session's SSE streams start with a priming
  event and resume after a ``Last-Event-ID``, in that session only (:mod:`._resume`).
* ``/healthz``: ``200`` while the process serves, with every server's status.
* ``/readyz``: ``200``, or ``503`` while a server marked ``required: true`` is down
  (failed, stopped, or waiting for a login), naming it and its last error.
* ``/metrics``: the Prometheus text of every server's metrics (docs/monitoring.md).
* ``/status``: the ``status --json`` document; ``/tools?search=Q&limit=N``: the ``tools
  --json`` one; ``/resources`` and ``/prompts``: the ``resources --json`` and ``prompts
  --json`` ones, with the servers' statuses; ``/events?filter=GLOB``: the events as JSON
  lines, as they come (what ``status``, ``tools``, ``resources``, ``prompts`` and
  ``events`` show when they use this gateway).

``/healthz``, ``/readyz`` and ``/metrics`` need no token, like the dashboard's: probes
and scrapers rarely carry one. :func:`serve_local` serves the same routes on a Unix socket
only its user can reach (with the gateway's own HTTP server), without a token, and one
more when ``serve`` gives it a
``reload``: ``POST /reload`` applies the config file now (``mcp-supervisor reload``),
which no TCP listener serves (``404`` there).

A team gateway (``resource``: a :class:`~._resource.ResourceGate`) takes its callers'
OAuth access tokens in place of the one static token: it serves its protected-resource
metadata (``/.well-known/oauth-protected-resource/mcp``), answers a request without a
valid token with the challenge that leads MCP clients there, and hands each request's
:class:`~._resource.Caller` to the gateway (:data:`~._core.CALLER_SCOPE`), whose policy
narrows what that caller sees; ``/status``, ``/tools``, ``/resources``, ``/prompts`` and
``/events`` are narrowed the same way. A session is its caller's: the SDK's session
manager, told who each request's caller is, answers another caller's request in it
``404``, as for a session it does not know.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext, suppress
from functools import partial
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import attrs
import trio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from .._serving import listen, respond, serve_sockets
from .._util._printable import printable
from ..auth._broker import AuthProblem
from ..auth._login import _page
from ..auth._tickets import _BadTicket
from ..auth._users import CALLBACK_ROUTE, LOGIN_ROUTE, UserLogins
from ..dashboard._security import bearer, names_listener
from ..log import get_logger, redacting
from ..monitor import prometheus_text
from ..monitor._probes import readiness
from ._core import CALLER_SCOPE, LOCAL_SCOPE, Gateway
from ._fast import FastLane
from ._fast_legacy import LegacyLane
from ._policy import Narrowed
from ._resource import RETRY_AFTER, Caller, ResourceGate, _Refused
from ._resume import RETRY_MS, StreamHistory
from ._sessions import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, Sessions
from ._signin import SIGNED_IN_ROUTE, SignIn

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["HttpGatewayInfo", "new_token", "serve_http", "serve_local"]

log = get_logger("supervisor.gateway.http")

#: Seconds open requests (a listen stream, a call) get to finish when the gateway stops.
GRACEFUL_TIMEOUT = 2.0
#: The MCP endpoint's path.
MCP_PATH = "/mcp"
#: The largest request head (request line and headers) in bytes: ``431`` beyond.
MAX_HEAD = 16 * 1024
#: Seconds a request head may take to arrive (from the connection's start, or the previous
#: answer's end), and an idle kept-alive connection is kept: then it is closed.
IDLE_TIMEOUT = 5.0
#: Seconds a request's body may take to arrive whole, from its head: then ``408``, and
#: the connection is closed.
BODY_TIMEOUT = 60.0
_JSON = b"application/json"
#: Session owners kept (:meth:`_Front._owner`; past that, it forgets them all).
_OWNERS = 1024
#: Host headers whose check is kept (:meth:`_Front._names_listener`; past that, it forgets
#: them all).
_HOSTS = 256
_METRICS = b"text/plain; version=0.0.4; charset=utf-8"
_NAME = itemgetter(0)
_VALUE = itemgetter(1)


@attrs.frozen
class HttpGatewayInfo:
    """Where a running HTTP gateway is: ``url`` is the MCP endpoint
    (``http://127.0.0.1:8000/mcp``); ``token`` the bearer token it takes (left out of
    ``repr``; empty for a team gateway, which takes its callers' access tokens)."""

    url: str
    host: str
    port: int
    token: str = attrs.field(repr=False)


class _Request:
    """One HTTP request as the front's route handlers take it: the ASGI triple, its path
    and headers, and (behind a team gateway's resource gate) its authenticated caller.
    (A plain class: made for every request, it costs a third of an attrs one.)"""

    __slots__ = ("caller", "headers", "path", "receive", "scope", "send")

    def __init__(
        self,
        scope: Any,
        receive: Any,
        send: Any,
        path: str,
        headers: Mapping[str, str],
        caller: Caller | None = None,
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.path = path
        self.headers = headers
        self.caller = caller


@attrs.frozen
class _Route:
    """A path the front serves: its handler, the one method it answers (``None``: the
    handler answers each itself) and whether it is behind the token."""

    handler: Callable[[_Request], Awaitable[None]]
    method: str | None
    private: bool = False


class _Front:
    """The ASGI app in front of the SDK's: probes, metrics, status and events, the token
    (none on the local socket: ``token=None``), the origin, and on a loopback address the
    ``Host`` (``listener``: the host it was started on, and the port it must name or
    ``None``); ``sessions``, the
    session policy whose numbers ``/metrics`` adds (``None`` without sessions)."""

    def __init__(
        self,
        app: Any,
        gateway: Gateway,
        token: str | None,
        stopping: trio.Event,
        *,
        listener: tuple[str, int | None] | None = None,
        sessions: Sessions | None = None,
        fast: FastLane | None = None,
        legacy: LegacyLane | None = None,
        resource: ResourceGate | None = None,
        users: UserLogins | None = None,
        sign_in: SignIn | None = None,
        base_url: str = "",
        reload: Reload | None = None,
        history: StreamHistory | None = None,
    ) -> None:
        self.app = app
        #: the session-based SSE streams' events, which a request resumes in its session
        self._history = history
        #: the local socket's ``POST /reload`` (:func:`serve_local`'s ``reload``)
        self._reload = reload
        self._sign_in = sign_in
        self._base_url = base_url
        #: a team gateway's callers' own logins to its ``perUser`` servers (their pages)
        self._users = users
        #: 2026-07-28 tool calls that need no stream, served around the SDK's kernel
        self.fast = fast
        #: a stateless gateway's handshake-era tool calls that ask for no progress, the same
        self.legacy = legacy
        self.gateway = gateway
        self.sup = gateway.sup
        self._expected = None if token is None else token.encode()
        #: a team gateway's check of its callers' access tokens (in place of the token)
        self._resource = resource
        self._local = token is None and resource is None
        self._stopping = stopping
        self._listener = listener
        self._sessions = sessions
        #: the session owner of each caller's subject (:meth:`_owner`)
        self._owners: dict[str, AuthenticatedUser] = {}
        #: whether each Host header seen names the listener (:meth:`_names_listener`)
        self._hosts: dict[str, bool] = {}
        self._routes = self._route_table()

    def _route_table(self) -> dict[str, _Route]:
        """Each path this front serves, with the method it answers and whether it is
        behind the token: the probes and a team gateway's metadata and login pages are
        public; the MCP endpoint and the routes the CLI reads are not."""
        get = "GET"
        routes = {
            "/healthz": _Route(self._healthz, get),
            "/readyz": _Route(self._readyz, get),
            "/metrics": _Route(self._metrics, get),
            "/status": _Route(self._status, get, private=True),
            "/tools": _Route(self._tools, get, private=True),
            "/resources": _Route(self._resources, get, private=True),
            "/prompts": _Route(self._prompts, get, private=True),
            "/events": _Route(self._events, get, private=True),
            MCP_PATH: _Route(self._mcp, None, private=True),  # the SDK answers each method
        }
        if self._resource is not None:
            metadata = _Route(self._metadata, get)
            routes.update(dict.fromkeys(self._resource.metadata_paths, metadata))
        if self._sign_in is not None:  # it answers a method it does not take itself
            login = _Route(self._login_page, None)
            routes.update(dict.fromkeys((LOGIN_ROUTE, CALLBACK_ROUTE, SIGNED_IN_ROUTE), login))
        if self._reload is not None:
            routes[RELOAD_PATH] = _Route(self._reload_now, "POST")
        return routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Every HTTP request passes the same checks, in order: its ``Host`` (on a loopback
        listener: ``421`` for another name), its route (``404``) and method (``405`` with
        ``Allow``); then, for a route behind the token, its ``Origin`` (``403``) and its
        token or a team gateway's caller's access token (``401``, or the resource gate's
        answer) — only then its route's handler."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: the session manager's
            return
        path = scope["path"]
        headers = _headers(scope)
        host = headers.get("host")  # none from an HTTP/1.0 probe (haproxy's); a browser sends one
        if (
            self._listener is not None
            and host is not None
            and not (self._hosts.get(host) or self._names_listener(host))
        ):  # DNS rebinding: a page on an attacker's name reads nothing, probes included
            await _json(send, 421, {"error": "this gateway does not answer for that Host"})
            return
        route = self._routes.get(path)
        if route is None:
            await _json(send, 404, {"error": f"not found; the MCP endpoint is {MCP_PATH}"})
            return
        if route.method is not None and scope["method"] != route.method:
            body = json.dumps({"error": f"{path} answers {route.method} only"}).encode()
            await respond(send, 405, body, _JSON, [(b"allow", route.method.encode())])
            return
        request = _Request(scope, receive, send, path, headers)
        if not route.private:
            await route.handler(request)
        elif "origin" in headers and not _same_origin(headers):
            await _json(send, 403, {"error": "cross-origin requests are refused"})
        elif self._resource is not None:
            try:
                caller = await self._resource.authenticate(headers.get("authorization"))
            except _Refused as refused:
                extra = []
                if refused.challenge is not None:
                    extra.append((b"www-authenticate", refused.challenge.encode()))
                if refused.status == 503:
                    extra.append((b"retry-after", str(RETRY_AFTER).encode()))
                body = json.dumps({"error": refused.message}).encode()
                await respond(send, refused.status, body, _JSON, extra)
                return
            scope[CALLER_SCOPE] = caller
            if self._users is not None:  # for the servers that trade it (token exchange)
                token = bearer(headers.get("authorization") or "")
                assert token is not None  # it authenticated: a bearer token
                self._users.present(caller.subject, token, caller.expires_at)
            await route.handler(_Request(scope, receive, send, path, headers, caller))
        elif self._expected is not None and not _matches(
            headers.get("authorization"), self._expected
        ):
            await _unauthorized(send, given="authorization" in headers)
        else:
            await route.handler(request)

    def _names_listener(self, host: str) -> bool:
        """Whether the Host header ``host`` names this listener
        (:func:`~supervisor.dashboard._security.names_listener`): asked once for each."""
        named = self._hosts.get(host)
        if named is None:
            assert self._listener is not None
            named = names_listener(host, *self._listener)
            if len(self._hosts) >= _HOSTS:
                self._hosts.clear()
            self._hosts[host] = named
        return named

    # -- the public routes ---------------------------------------------------------------

    async def _healthz(self, request: _Request) -> None:
        statuses = {name: r.status for name, r in self.sup.status().items()}
        await _json(request.send, 200, {"status": "alive", "servers": statuses})

    async def _readyz(self, request: _Request) -> None:
        await _json(request.send, *readiness(self.sup))

    async def _metrics(self, request: _Request) -> None:
        text = prometheus_text(self.sup.metrics())
        if self._sessions is not None:
            text += self._sessions.prometheus()
        await respond(request.send, 200, text.encode(), _METRICS)

    async def _metadata(self, request: _Request) -> None:
        assert self._resource is not None
        await respond(request.send, 200, self._resource.metadata, _JSON)

    async def _reload_now(self, request: _Request) -> None:
        assert self._reload is not None
        await _json(request.send, *await self._reload(await _body(request.receive)))

    async def _login_page(self, request: _Request) -> None:
        """A caller's own login to a ``perUser`` server: its link (which has the browser
        sign in at the team's authorization server, :mod:`._signin`), the sign-in's
        answer (the browser must be the link's caller: then on to the backing server's
        authorization server, with the cookie that binds the login to this browser), and
        that server's answer, taken from that browser only (:mod:`supervisor.auth._users`).
        Public: the browser has no token; the link's ticket says whose login it is."""
        users, sign_in = self._users, self._sign_in
        assert users is not None and sign_in is not None
        scope, send, path = request.scope, request.send, request.path
        if scope["method"] != "GET":
            await respond(send, 405, b"", _HTML, [(b"allow", b"GET")])
            return
        query = scope.get("query_string", b"").decode("latin-1")
        if path == CALLBACK_ROUTE:
            cookies = "; ".join(  # HTTP/2 may send them in several fields
                v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"cookie"
            )
            status, page, extra = await users.callback(query, cookies)
            await respond(send, status, page, _HTML, [*extra, *_PRIVATE_PAGE])
            return
        bound: list[tuple[bytes, bytes]] = []
        try:
            if path == LOGIN_ROUTE:
                ticket = parse_qs(query).get("ticket", [""])[0]
                server, subject = await users.open_ticket(ticket)
                url = await sign_in.start(users.rows, self._base_url, server, subject)
            else:
                server, subject = await sign_in.finish(users.rows, self._base_url, query)
                url = await users.begin(server, subject)
                bound.append((b"set-cookie", users.binding(url)))
        except _BadTicket as exc:
            status = 403 if path == SIGNED_IN_ROUTE else 400
            await respond(send, status, _page(False, str(exc)), _HTML, _PRIVATE_PAGE)
        except AuthProblem as exc:
            await respond(send, 502, _page(False, printable(str(exc))), _HTML, _PRIVATE_PAGE)
        except trio.TooSlowError:
            said = "the authorization server did not answer in time; try the link again"
            await respond(send, 504, _page(False, said), _HTML, _PRIVATE_PAGE)
        else:
            location = [(b"location", url.encode()), *bound]
            await respond(send, 302, b"", _HTML, [*location, *_PRIVATE_PAGE])

    # -- the routes behind the token -------------------------------------------------------

    async def _status(self, request: _Request) -> None:
        await _json(request.send, 200, _status(self.sup, self._serves(request.caller)))

    async def _resources(self, request: _Request) -> None:
        document = await self.gateway.resources_document(caller=request.caller)
        await _json(request.send, 200, document)

    async def _prompts(self, request: _Request) -> None:
        await _json(request.send, 200, await self.gateway.prompts_document(caller=request.caller))

    async def _mcp(self, request: _Request) -> None:
        """The MCP endpoint: the fast lanes' tool calls, the SDK's app for the rest."""
        scope, headers, caller = request.scope, request.headers, request.caller
        if self._local:  # the local socket: its requests say so
            scope = {**scope, LOCAL_SCOPE: True}
        elif caller is not None:  # whose the sessions it opens are (the SDK checks it)
            scope["user"] = self._owner(caller)
        bound = None
        session_id = headers.get("mcp-session-id")
        # whose events it stores (none: as the task is, bound to no session; one a
        # request binds is unbound at its end)
        if self._history is not None and session_id is not None:
            bound = self._history.bind(session_id)
        try:
            if self.fast is not None and FastLane.wanted(scope, headers):
                await self.fast(scope, request.receive, request.send, headers, self.app)
            elif self.legacy is not None and LegacyLane.wanted(scope, headers):
                await self.legacy(scope, request.receive, request.send, headers, self.app)
            else:
                await self.app(scope, request.receive, request.send)
        finally:
            if bound is not None:
                StreamHistory.unbind(bound)

    def _owner(self, caller: Caller) -> AuthenticatedUser:
        """``caller`` as the SDK's session manager knows who opened a session: a session
        is its opener's — another caller's request in it is answered ``404``, as for a
        session that does not exist. By subject alone: a renewed token, or another client
        of the same caller, keeps the session."""
        owner = self._owners.get(caller.subject)
        if owner is None:
            token = AccessToken(token="", client_id="", scopes=[], subject=caller.subject)
            owner = AuthenticatedUser(token)
            if len(self._owners) >= _OWNERS:
                self._owners.clear()
            self._owners[caller.subject] = owner
        return owner

    def _serves(self, caller: Caller | None) -> Any:
        """Whether a server is served to ``caller`` (``None``: to everyone let in)."""
        if caller is None:
            return _everything
        grant = self.gateway.policy.grant(caller)
        return lambda server: self.gateway.serves(server) and grant.sees(server)

    async def _tools(self, request: _Request) -> None:
        """The ``tools --json`` document of what this gateway serves; ``?search=Q&limit=N``
        for the ``N`` best matches of ``Q``."""
        send, caller = request.send, request.caller
        query = parse_qs(request.scope.get("query_string", b"").decode("latin-1"))
        search = query.get("search", [None])[0]
        try:
            limit = int(query.get("limit", ["20"])[0])
        except ValueError:
            limit = 0
        if limit < 1:
            await _json(send, 400, {"error": "limit must be a whole number above 0"})
            return
        await _json(send, 200, await self.gateway.tools_document(search, limit, caller=caller))

    async def _events(self, request: _Request) -> None:
        """The events matching ``?filter=GLOB`` (all by default) as JSON lines, from the
        moment the answer starts until the client goes or the gateway stops — for a team
        gateway's caller, each narrowed to what the caller may see, or left out
        (:meth:`~._policy.Narrowed.event`)."""
        from ..events._catalog import encode

        receive, send, caller = request.receive, request.send, request.caller
        query = parse_qs(request.scope.get("query_string", b"").decode("latin-1"))
        pattern = query.get("filter", ["*"])[0] or "*"
        view = None
        if caller is not None:
            view = Narrowed(self.gateway, caller, self.gateway.policy.grant(caller))
        async with self.sup.subscribe(pattern) as events, trio.open_nursery() as nursery:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/jsonl")],
                }
            )

            async def until_gone() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            async def until_stopping() -> None:
                await self._stopping.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(until_gone)
            nursery.start_soon(until_stopping)
            async for event in events:
                told = event if view is None else view.event(event)
                if told is None:
                    continue
                body = encode(told) + b"\n"
                await send({"type": "http.response.body", "body": body, "more_body": True})
        with suppress(Exception):  # the client may be gone
            await send({"type": "http.response.body", "body": b""})


#: The local socket's route that applies the config file now (``mcp-supervisor reload``).
RELOAD_PATH = "/reload"
#: What ``POST /reload`` runs (``serve``'s): given the request's JSON document (``{}``
#: when it sent none, or not an object), the answer's status and JSON document.
Reload = Callable[[Mapping[str, Any]], Awaitable[tuple[int, object]]]
#: The largest ``POST /reload`` body read, in bytes.
_MAX_BODY = 64 * 1024


def _status(sup: SupervisorHandle, serves: Any) -> dict[str, object]:
    """The ``status --json`` document of the servers ``serves`` accepts."""
    from ..monitor._metrics import status_document

    records = {name: r for name, r in sup.status().items() if serves(name)}
    metrics = {name: m for name, m in sup.metrics().items() if serves(name)}
    return status_document(records, metrics, actors=sup.statistics())


def _everything(server: str) -> bool:
    return True


def _matches(authorization: str | None, expected: bytes) -> bool:
    """Whether the header carries the bearer token ``expected``."""
    offered = bearer(authorization or "")
    return offered is not None and hmac.compare_digest(offered.encode("utf-8", "replace"), expected)


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """A request's headers by name (lowered; a name given twice: its last value), as
    text: decoded without a Python step per header."""
    raw = scope["headers"]
    latin = repeat("latin-1")
    names = map(str.lower, map(bytes.decode, map(_NAME, raw), latin))
    return dict(zip(names, map(bytes.decode, map(_VALUE, raw), latin), strict=True))


def _same_origin(headers: Mapping[str, str]) -> bool:
    """Whether the request has no ``Origin`` or one naming the address it was sent to."""
    origin = headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc.lower() == headers.get("host", "").lower()


async def _body(receive: Any) -> Mapping[str, Any]:
    """A small request's JSON object (``{}`` when it is empty, too large, not JSON or
    not an object)."""
    data = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return {}
        data += message.get("body", b"")
        if len(data) > _MAX_BODY:
            return {}
        if not message.get("more_body", False):
            break
    try:
        document = json.loads(data or b"{}")
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


async def _json(send: Any, status: int, document: object) -> None:
    await respond(send, status, json.dumps(document).encode(), _JSON)


async def _unauthorized(send: Any, *, given: bool) -> None:
    challenge = 'Bearer realm="mcp-supervisor"'
    if given:
        challenge += ', error="invalid_token"'
    await respond(
        send,
        401,
        json.dumps(
            {
                "error": "this gateway needs 'Authorization: Bearer TOKEN': the token "
                "mcp-supervisor serve printed, or $MCP_SUPERVISOR_GATEWAY_TOKEN / --token-file"
            }
        ).encode(),
        _JSON,
        [(b"www-authenticate", challenge.encode())],
    )


def _user_logins(gateway: Gateway) -> UserLogins | None:
    """The supervisor's per-user logins (its ``perUser`` servers'), if it has any."""
    auth = getattr(gateway.sup, "_auth", None)
    return getattr(auth, "users", None)


#: A login page's headers: not kept, and its address (a ticket) not passed on.
_PRIVATE_PAGE = [(b"cache-control", b"no-store"), (b"referrer-policy", b"no-referrer")]
_HTML = b"text/html; charset=utf-8"


def new_token() -> str:
    """A random bearer token."""
    return secrets.token_urlsafe(32)


async def serve_http(
    gateway: Gateway,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    resource: ResourceGate | None = None,
    sign_in: SignIn | None = None,
    stateless: bool = False,
    session_idle: float = DEFAULT_SESSION_IDLE,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    fast: bool = True,
    front: str = "httptools",
    task_status: trio.TaskStatus[HttpGatewayInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` over Streamable HTTP on ``host``:``port`` until cancelled; start
    it with ``nursery.start``, which returns its :class:`HttpGatewayInfo` once listening
    (``port=0``: a free port). ``stateless``: no sessions, so any replica can answer any
    request (handshake-era clients then get no change notifications). Otherwise a session
    with no request in flight for ``session_idle`` seconds is closed (its id then answers
    ``404``), and at most ``max_sessions`` are open: a new one past that closes the one
    idle the longest, or is refused with ``503`` when every one is in use
    (:class:`~._sessions.Sessions`). ``fast=False`` turns the fast lanes off
    (:mod:`._fast`; stateless, :mod:`._fast_legacy` too): every request then goes
    through the SDK's own HTTP entry. ``front``
    is the HTTP server: the gateway's own (:mod:`._wire_front`), parsing with
    ``"httptools"`` (the default) or ``"h11"``, or ``"hypercorn"``, which costs several
    times more per request.

    Requests need the bearer ``token`` — or, for a team gateway, an access token that
    ``resource`` takes (:class:`~._resource.ResourceGate`): one of the two is given. A
    team gateway in front of ``perUser`` servers serves its callers' own logins to them,
    each browser signing in first through ``sign_in`` (:class:`~._signin.SignIn`,
    required then: :class:`ValueError` without)."""
    if (token is None) == (resource is None):
        raise ValueError("serve_http takes a token or a resource gate, one of the two")
    serve = _front(front)
    from mcp.server.transport_security import TransportSecuritySettings

    from ..dashboard._address import format_host, is_loopback

    security = None
    if is_loopback(host) or host == "localhost":  # DNS rebinding: check Host as well
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    # A session's SSE streams prime, and resume after Last-Event-ID (none without sessions).
    history = None if stateless else StreamHistory()
    app = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=stateless,
        event_store=history,
        retry_interval=None if history is None else RETRY_MS,
        transport_security=security,
        host=host,
        session_idle_timeout=session_idle,
        max_sessions=max_sessions,
    )
    manager = gateway.server.session_manager
    lane = FastLane(gateway.server, manager, security, gateway.served_schema) if fast else None
    legacy = LegacyLane(gateway.server, manager, security) if fast and stateless else None
    sessions = None
    if not stateless:
        sessions = Sessions(manager, idle=session_idle, bound=max_sessions, history=history)
    users = _user_logins(gateway) if resource is not None else None
    base_url = ""
    if users is not None:
        assert resource is not None
        logins = [name for name, c in users.servers.items() if c.auth.per_user == "login"]
        if sign_in is None and logins:
            raise ValueError(
                f"the servers {', '.join(logins)} are served per user: a team "
                "gateway needs supervisor.gateway.auth.signIn for their logins (the browser "
                "that opens a login link signs in first, as the caller it is for)"
            )
        elsewhere = [
            f"{name} ({c.auth.issuer})"
            for name, c in users.servers.items()
            if c.auth.per_user == "token_exchange"
            and c.auth.issuer is not None
            and c.auth.issuer.rstrip("/") != resource.issuer.rstrip("/")
        ]
        if elsewhere:
            raise ValueError(
                f"the servers {', '.join(elsewhere)} exchange callers' tokens at another "
                f"authorization server than the team gateway's ({resource.issuer}): a "
                "caller's token to the gateway goes to no other; leave out their issuer"
            )
        base_url = resource.resource.rstrip("/").removesuffix(MCP_PATH)
    sockets = await listen(host, port)
    try:
        bound_host: str  # (an IP socket's address: host and port first)
        bound_host, bound_port = sockets[0].getsockname()[:2]
        shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(bound_host, bound_host)  # noqa: S104
        info = HttpGatewayInfo(
            url=f"http://{format_host(shown)}:{bound_port}{MCP_PATH}",
            host=bound_host,
            port=bound_port,
            token=token or "",
        )
        stopping = trio.Event()
        checking = resource.running() if resource is not None else nullcontext()
        with redacting([token] if token else []):
            async with checking, trio.open_nursery() as nursery:
                if users is not None:
                    assert resource is not None
                    users.attach(base_url, gateway.key, nursery, exchanger=resource.issuer)
                await nursery.start(
                    partial(
                        serve,
                        _Front(
                            app,
                            gateway,
                            token,
                            stopping,
                            # any port: a balancer on this machine sends its own
                            listener=(host, None) if security is not None else None,
                            sessions=sessions,
                            fast=lane,
                            legacy=legacy,
                            resource=resource,
                            users=users,
                            sign_in=sign_in,
                            base_url=base_url,
                            history=history,
                        ),
                        sockets,
                        logger_name="supervisor.gateway.http",
                        max_head=MAX_HEAD,
                        stopping=stopping,
                        graceful_timeout=GRACEFUL_TIMEOUT,
                        idle_timeout=IDLE_TIMEOUT,
                        body_timeout=BODY_TIMEOUT,
                    )
                )
                log.info("gateway listening", url=info.url, stateless=stateless)
                task_status.started(info)
    finally:
        if users is not None:
            users.detach()
        for sock in sockets:
            sock.close()


def _front(name: str) -> Callable[..., Awaitable[None]]:
    """The HTTP server named ``name`` (``serve_http``'s ``front``), which serves an ASGI
    app on listening sockets with :func:`~supervisor._serving.serve_sockets`' arguments."""
    if name == "hypercorn":
        return serve_sockets
    from . import _wire_front

    if name not in _wire_front.PARSERS:
        raise ValueError(f"front is 'hypercorn', 'httptools' or 'h11', not {name!r}")
    if not _wire_front.available(name):
        raise ValueError(f"front={name!r} needs {_wire_front.PARSERS[name]} installed")
    return partial(_wire_front.serve_wire, parser=name)


async def serve_local(
    gateway: Gateway,
    config_path: str,
    *,
    reload: Reload | None = None,
    task_status: trio.TaskStatus[Path | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` on the Unix socket of ``config_path`` (:func:`~._local.local_socket`), for
    the CLI's commands, until cancelled; then remove the socket. Reports its path, or
    ``None`` — and returns — when another gateway already serves that config. With
    ``reload``, ``POST /reload`` runs it and answers what it returns (``serve``'s: the
    config file applied now); without, that route is not served."""
    from ._local import bind_local, local_socket

    path = local_socket(config_path)
    try:
        sock = bind_local(path)
    except OSError as exc:
        log.warning("no local socket for the CLI", path=str(path), error=str(exc))
        task_status.started(None)
        return
    if sock is None:
        log.info("another gateway serves this config's local socket", path=str(path))
        task_status.started(None)
        return
    from mcp.server.transport_security import TransportSecuritySettings

    # A Unix socket has no host to rebind: its file's mode is what keeps others out.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = gateway.server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, transport_security=security
    )
    fast = FastLane(gateway.server, gateway.server.session_manager, security, gateway.served_schema)
    stopping = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(
                    _front("httptools"),
                    _Front(app, gateway, None, stopping, fast=fast, reload=reload),
                    [sock],
                    logger_name="supervisor.gateway.local",
                    max_head=MAX_HEAD,
                    stopping=stopping,
                    graceful_timeout=GRACEFUL_TIMEOUT,
                    idle_timeout=IDLE_TIMEOUT,
                    body_timeout=BODY_TIMEOUT,
                )
            )
            log.info("gateway listening for the CLI", path=str(path))
            task_status.started(path)
    finally:
        sock.close()
        with suppress(OSError):
            if path.exists() and not _listening_elsewhere(path, sock):
                path.unlink()


def _listening_elsewhere(path: Path, closed: socket.socket) -> bool:
    """Whether the socket file at ``path`` is no longer ours (another gateway took it
    over after ours was found dead); ours is closed, so nothing answers there if not."""
    from ._local import _answers

    return _answers(path)
