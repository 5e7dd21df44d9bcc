"""The chaos HTTP proxy: a Streamable HTTP reverse proxy that injects a fault plan between
any MCP client and a remote MCP server (``mcp-supervisor chaos --listen HOST:PORT
--upstream URL``).

Point the client at ``http://HOST:PORT/mcp``. Each request there is forwarded to the
upstream URL by an ``httpx2.AsyncClient`` whose transport is a
:class:`FaultyHTTPTransport`, so the proxy injects exactly what a supervisor
with the same plan would: the answer, JSON or an event stream (a POST's or the GET
stream's), is streamed back as it comes. Headers pass both ways, ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` among them, except the hop-by-hop ones; a request for any other
path goes to the same path on the upstream's origin, without faults.

What HTTP cannot say through a proxy is said as near as it can be: an injected ``kill``
(or an upstream whose connection broke) drops the client's connection after a ``200``
status line, before any body; an upstream that cannot be reached is ``502``. It is an
ASGI application served by hypercorn under trio; cancelling :func:`run_http_proxy` stops
it gracefully (open requests get :data:`GRACEFUL_TIMEOUT` seconds).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import httpx2
import trio

from .._serving import lifespan as _lifespan
from .._serving import listen, respond, serve_sockets
from ..config._plan import Plan
from ..log import get_logger
from ._inject._engine import FaultEngine, Injected
from ._inject._http import BYPASS, FaultyHTTPTransport
from ._inject._link import CallRecorder

__all__ = ["ENDPOINT", "GRACEFUL_TIMEOUT", "run_http_proxy", "server_name"]

log = get_logger("supervisor.faults.proxy")

#: The path the proxy serves MCP on.
ENDPOINT = "/mcp"
#: Largest request body forwarded, in bytes (MCP messages are far smaller).
MAX_REQUEST_BYTES = 64 * 2**20
#: How long open requests get to finish when the proxy stops.
GRACEFUL_TIMEOUT = 2.0
#: How long the upstream gets to accept a connection (reads wait as long as they must:
#: an event stream may be quiet for hours).
CONNECT_TIMEOUT = 10.0

#: Headers that concern one connection only, never forwarded (RFC 9110, 7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_REQUEST_SKIP = HOP_BY_HOP | {"host", "content-length"}
_RESPONSE_SKIP = HOP_BY_HOP | {"date", "server"}  # hypercorn writes its own date

Scope = dict[str, Any]
Receive = Any
Send = Any


def _url_host(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.is_unspecified:
        return "[::1]" if address.version == 6 else "127.0.0.1"
    return f"[{host}]" if address.version == 6 else host


def safe_url(url: str | httpx2.URL) -> str:
    """``url`` without user-info and query string, either of which may hold a secret."""
    parsed = httpx2.URL(str(url))
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        body += message.get("body", b"")
        if len(body) > MAX_REQUEST_BYTES:
            raise _TooLarge
        if not message.get("more_body", False):
            return bytes(body)


async def _plain(send: Send, status: int, text: str) -> None:
    await respond(send, status, text.encode() + b"\n", b"text/plain; charset=utf-8")


async def _drop(send: Send) -> None:
    """Drop the connection without an answer, as near as ASGI allows: a status line and no
    body, then the connection closes (the app returns with the body unfinished)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )


async def _once(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk


async def _cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


class _ProxyApp:
    """The ASGI application: every request forwarded through ``client``."""

    def __init__(self, client: httpx2.AsyncClient, upstream: httpx2.URL) -> None:
        self.client = client
        self.upstream = upstream
        self._shown = safe_url(upstream)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # a WebSocket: refused (403) by the server
        try:
            body = await _read_body(receive)
        except _Gone:
            return
        except _TooLarge:
            await _plain(send, 413, f"chaos: a request body is at most {MAX_REQUEST_BYTES} bytes")
            return
        request = self._request(scope, body)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            try:
                await self._relay(request, send)
            except Exception:
                log.warning("chaos proxy request failed", exc_info=True)
            nursery.cancel_scope.cancel()

    def _request(self, scope: Scope, body: bytes) -> httpx2.Request:
        path = scope.get("path", "/")
        query = bytes(scope.get("query_string", b""))
        extensions: dict[str, object] = {}
        if path.rstrip("/") == ENDPOINT:
            url = self.upstream.copy_with(query=query) if query else self.upstream
        else:
            raw_path = bytes(scope.get("raw_path") or path.encode())
            url = self.upstream.copy_with(raw_path=raw_path + (b"?" + query if query else b""))
            extensions[BYPASS] = True
        headers = [
            (bytes(name), bytes(value))
            for name, value in scope.get("headers", ())
            if bytes(name).decode("latin-1").lower() not in _REQUEST_SKIP
        ]
        return self.client.build_request(
            scope.get("method", "GET"), url, headers=headers, content=body, extensions=extensions
        )

    async def _relay(self, request: httpx2.Request, send: Send) -> None:
        try:
            response = await self.client.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as exc:
            await _plain(send, 502, f"chaos: cannot reach the upstream {self._shown}: {exc}")
            return
        except httpx2.TransportError:
            await _drop(send)  # a kill, or the upstream's connection broke
            return
        try:
            headers = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in response.headers.multi_items()
                if name.lower() not in _RESPONSE_SKIP
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": headers}
            )
            try:
                # an answer the plan rewrote is in memory already; others stream through
                chunks = _once(response.content) if response.is_stream_consumed else None
                async for chunk in chunks or response.aiter_raw():
                    if chunk:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx2.TransportError:
                return  # broken upstream: so is the client's connection (the body is unfinished)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            with trio.CancelScope(shield=True):
                await response.aclose()


async def run_http_proxy(
    plan: Plan,
    listen_host: str,
    listen_port: int,
    upstream_url: str,
    *,
    engine: FaultEngine | None = None,
    on_inject: Callable[[Injected], None] | None = None,
    history: Any = None,  # noqa: ANN401 - a CallHistory
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a fault-injecting proxy of ``upstream_url`` on ``listen_host:listen_port``
    until cancelled; start it with ``nursery.start``, which returns the proxy's MCP URL
    (``http://127.0.0.1:PORT/mcp``; port 0 picks a free one).

    ``engine`` may be passed to read its fault log afterwards; ``on_inject`` is called with
    each fault as it is injected. ``history``, a :class:`~supervisor.faults.CallHistory`,
    records every tool call a client makes through the proxy as it lived it
    (:class:`CallRecorder`); the calls still waiting for their outcome get it when
    the proxy stops. The proxy fronts one server, named by the upstream's ``host:port``
    (``127.0.0.1:8000``): its calls and every injected fault are recorded under that name
    — or the engine's ``server``, if it names one. Raises
    :class:`~supervisor.config._plan.PlanError` for a plan the proxy cannot carry out,
    ``ValueError`` for an upstream that is not an ``http(s)`` URL and ``OSError`` when the
    address cannot be bound.
    """
    plan.check_supported("an HTTP proxy (chaos --listen)", http=True)
    upstream = httpx2.URL(upstream_url)
    if upstream.scheme not in ("http", "https") or not upstream.host:
        raise ValueError(f"the upstream must be an http:// or https:// URL, not {upstream_url!r}")
    if engine is None:
        engine = FaultEngine(plan, on_inject=on_inject)
    if engine.server is None:
        engine.server = server_name(upstream)
    # stalled peers are left to the kernel's default (no TCP_USER_TIMEOUT), as before
    sockets = await listen(listen_host, listen_port, stall_timeout=None)
    calls = None
    if history is not None:
        history.start()
        calls = CallRecorder(history, server=engine.server)
    try:
        await _proxy(engine, upstream, sockets, calls, task_status)
    finally:
        if calls is not None:
            calls.finish()
        for sock in sockets:
            sock.close()


def server_name(url: httpx2.URL) -> str:
    """The name an HTTP proxy gives its upstream server: ``url``'s ``host:port`` (its
    scheme's port when it names none)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port or (443 if url.scheme == 'https' else 80)}"


async def _proxy(
    engine: FaultEngine,
    upstream: httpx2.URL,
    sockets: list[socket.socket],
    calls: CallRecorder | None,
    task_status: trio.TaskStatus[str],
) -> None:
    transport = FaultyHTTPTransport(httpx2.AsyncHTTPTransport(), engine, calls=calls)
    client = httpx2.AsyncClient(
        transport=transport,
        timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=None, write=None, pool=None),
        follow_redirects=False,
    )
    host, port = sockets[0].getsockname()[:2]
    url = f"http://{_url_host(host)}:{port}{ENDPOINT}"
    app = _ProxyApp(client, upstream)
    async with client, trio.open_nursery() as nursery:
        transport.start()
        await nursery.start(
            partial(
                serve_sockets,
                app,
                sockets,
                logger_name="supervisor.faults.proxy",
                graceful_timeout=GRACEFUL_TIMEOUT,
            )
        )
        log.info("chaos proxy listening", url=url, upstream=safe_url(upstream))
        task_status.started(url)
