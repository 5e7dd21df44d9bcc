"""MCP over WebSocket, client and server, on trio-websocket.

The ``mcp`` 2.x SDK ships no WebSocket transport, so this module supplies both ends of
the convention the 1.x SDK used: the HTTP upgrade negotiates the subprotocol ``mcp``, and
every JSON-RPC message travels as one text frame.

* :func:`websocket_client` is an SDK ``Transport``: pass it to ``mcp.Client`` (or enter it
  and hand the two streams to a ``ClientSession``).
* :func:`serve_websocket` serves an ``MCPServer`` or low-level ``Server`` over WebSocket,
  one server session per connection; the gateway and the test fixtures use it.

Errors, defined in :mod:`supervisor.errors` (under its ``TransportError``) and re-exported
here::

    WebSocketError                    root of this module's errors
    ├── WebSocketConnectError         the connection could not be opened: refused, DNS,
    │   │                             TLS, timeout, or the HTTP upgrade was rejected
    │   └── WebSocketSubprotocolError the server would not speak subprotocol "mcp"
    ├── WebSocketFrameError           a frame was not one JSON-RPC message (binary frame,
    │                                 invalid JSON, not JSON-RPC)
    └── WebSocketClosed               the peer closed the connection abnormally

Only the connect errors are raised (from entering :func:`websocket_client`). Once
connected, frame errors and an abnormal close are delivered as ``Exception`` items on the
read stream, as the SDK's stdio transport does with unparseable lines, so the session
passes them to its ``message_handler`` and keeps running; after a close the read stream
ends, and the session fails every pending and later request with
``MCPError(CONNECTION_CLOSED)``. Error messages name the URL without its user-info or
query string, and never the request headers.
"""

from __future__ import annotations

import http
import math
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, NoReturn

import anyio
import attrs
import mcp_types
import trio
import trio_websocket
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from .._sdk import TransportStreams, lowlevel_server
from ..config._limits import (
    DEFAULT_MAX_CATALOG_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_TOOLS_PER_SERVER,
)
from ..errors import (
    RequestUnencodable,
    WebSocketClosed,
    WebSocketConnectError,
    WebSocketError,
    WebSocketFrameError,
    WebSocketSubprotocolError,
)
from ..log import get_logger
from ._encoding import encode
from ._errors import translate
from ._pages import PageGuard, refusal

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "SUBPROTOCOL",
    "WebSocketClosed",
    "WebSocketConnectError",
    "WebSocketError",
    "WebSocketFrameError",
    "WebSocketSubprotocolError",
    "serve_connection",
    "serve_websocket",
    "websocket_client",
]

log = get_logger(__name__)

#: The WebSocket subprotocol both ends must agree on.
SUBPROTOCOL = "mcp"

#: Largest message accepted by default, in characters (text) or bytes (binary): 16 MiB.
DEFAULT_MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_BYTES

# Close codes that mean "we are done", as opposed to a failure worth reporting.
_NORMAL_CLOSE_CODES = frozenset({1000, 1001})

# Bounded waits on the way out: for the writer to flush what the session already handed
# over, and for the peer to answer our close frame. Neither can hang an exit.
_FLUSH_TIMEOUT = 0.5
_CLOSE_TIMEOUT = 2.0


# ---------------------------------------------------------------------------- client


@asynccontextmanager
async def websocket_client(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 10,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    max_items: int = DEFAULT_MAX_TOOLS_PER_SERVER,
    max_catalog_bytes: int = DEFAULT_MAX_CATALOG_BYTES,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[TransportStreams]:
    """Connect to an MCP server over WebSocket; an SDK ``Transport``.

    Opens ``url`` (``ws://`` or ``wss://``; ``wss`` uses *ssl_context*, by default the
    system's trust store) offering subprotocol ``mcp`` and sending *headers* with the upgrade
    request, then yields ``(read_stream, write_stream)`` of ``SessionMessage``.

    Raises :class:`WebSocketConnectError` (naming the URL, never the headers) when the
    connection cannot be opened within *connect_timeout* seconds, and
    :class:`WebSocketSubprotocolError` when the server does not select ``mcp``;
    ``ValueError`` for a URL that is not ``ws``/``wss`` or a header that cannot be sent.
    Refusal, TLS failures and HTTP rejection are reported at once; a server that drops
    the connection in the middle of the upgrade is reported when *connect_timeout* runs
    out (trio-websocket does not surface that case). User-info in the URL is not sent.

    While connected: a binary frame, or a text frame that is not one JSON-RPC message,
    arrives as a :class:`WebSocketFrameError` item; a message longer than
    *max_message_size* closes the connection with code 1009. A page answering a listing
    request (``tools/list``, ``resources/list``, ``resources/templates/list``,
    ``prompts/list``) with more than *max_items* items, or more than *max_catalog_bytes*
    bytes of them, is dropped before it is parsed and arrives as a JSON-RPC error for
    that request (code ``-32098``, its ``data`` the page's ``count`` and ``size``); the
    connection is kept. When the connection
    closes, the read stream ends, preceded by a :class:`WebSocketClosed` item unless
    the close was normal. Leaving the context closes the connection with code 1000,
    waiting a bounded time for the peer's answer, also when cancelled; no task
    outlives the context.
    """
    target = _Target.parse(url)
    if ssl_context is not None and not target.secure:
        raise ValueError("ssl_context is only for wss:// URLs")
    safe_url = target.safe_url
    extra_headers = _encode_headers(headers or {})
    # Every exception is re-raised after the nursery closes, so neither a connect error
    # nor the caller's own exception reaches the caller wrapped in an ExceptionGroup.
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            ws, holder = await _connect(
                nursery, target, extra_headers, connect_timeout, max_message_size, ssl_context
            )
            guard = PageGuard(max_items=max_items, max_bytes=max_catalog_bytes)
            bridge = _Bridge(ws, safe_url, nursery, guard)
            try:
                yield bridge.streams
            finally:
                await bridge.aclose()
                holder.cancel()
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = exc
        finally:
            nursery.cancel_scope.cancel()
    if error is not None:
        raise error


async def _connect(
    nursery: trio.Nursery,
    target: _Target,
    extra_headers: list[tuple[bytes, bytes]],
    connect_timeout: float,
    max_message_size: int,
    ssl_context: ssl.SSLContext | None,
) -> tuple[trio_websocket.WebSocketConnection, trio.CancelScope]:
    """Open the connection, held open by a task in *nursery*; translate every failure.

    Returns the connection and the cancel scope that releases it.
    """
    safe_url = target.safe_url
    try:
        # `nursery.start` cancels the half-open connection along with its task when the
        # deadline passes, and raises the task's own error unwrapped.
        with trio.move_on_after(connect_timeout):
            ws, holder = await nursery.start(
                partial(
                    _hold_connection,
                    target,
                    extra_headers=extra_headers,
                    max_message_size=max_message_size,
                    ssl_context=ssl_context,
                )
            )
            if ws.subprotocol != SUBPROTOCOL:
                await _close(ws, code=1002, reason=f"subprotocol {SUBPROTOCOL!r} required")
                holder.cancel()
                raise WebSocketSubprotocolError(
                    f"WebSocket server at {safe_url} did not accept subprotocol {SUBPROTOCOL!r} "
                    f"(it selected {ws.subprotocol!r}); is this an MCP WebSocket endpoint?",
                    url=safe_url,
                    subprotocol=ws.subprotocol,
                )
            log.debug("websocket connected", url=safe_url)
            return ws, holder
    except (trio_websocket.HandshakeError, OSError, trio.BrokenResourceError) as exc:
        raise translate(exc, url=safe_url) from exc
    raise WebSocketConnectError(
        f"cannot open WebSocket {safe_url}: timed out after {connect_timeout:g} s "
        "(TCP connect and WebSocket upgrade)",
        url=safe_url,
    )


async def _hold_connection(
    target: _Target,
    *,
    extra_headers: list[tuple[bytes, bytes]],
    max_message_size: int,
    ssl_context: ssl.SSLContext | None,
    task_status: trio.TaskStatus[tuple[trio_websocket.WebSocketConnection, trio.CancelScope]],
) -> None:
    """Open a client connection, report it with the scope that ends it, keep it open.

    We open the TCP (or TLS) stream ourselves rather than use ``open_websocket_url``,
    so that it is closed on every failure: trio-websocket leaves a rejected
    connection's socket open for as long as the exception lives, after its own
    handshake timeout waits for a reader task that a silent server never ends, and
    reports a failed TLS handshake only as that timeout.

    Once connected the scope is shielded: a cancellation of the caller must not kill
    trio-websocket's reader task before our close handshake, which needs it, is done.
    The owner cancels the scope itself afterwards.
    """
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
    if target.secure:
        stream = await trio.open_ssl_over_tcp_stream(
            target.host,
            target.port,
            ssl_context=ssl_context or ssl.create_default_context(),
            https_compatible=True,
        )
    else:
        stream = await trio.open_tcp_stream(target.host, target.port)
    try:
        if isinstance(stream, trio.SSLStream):
            # Now, not lazily inside trio-websocket, which would turn a certificate
            # error into a wait for connect_timeout.
            await stream.do_handshake()
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as reader_nursery:
                ws = await trio_websocket.wrap_client_stream(
                    reader_nursery,
                    stream,
                    target.host_header,
                    target.resource,
                    subprotocols=[SUBPROTOCOL],
                    extra_headers=extra_headers,
                    max_message_size=max_message_size,
                )
                scope.shield = True
                task_status.started((ws, scope))
                await trio.sleep_forever()
    except BaseExceptionGroup as group:
        # A rejected handshake is raised by trio-websocket's reader task, so it comes
        # out of the reader nursery wrapped; hand the one real error to `_connect`.
        real = group.subgroup(lambda exc: not isinstance(exc, trio.Cancelled))
        leaves = list(_leaves(real)) if real is not None else []
        if len(leaves) != 1:
            raise
        raise leaves[0] from None
    finally:
        await trio.aclose_forcefully(stream)


# ---------------------------------------------------------------------------- server


async def serve_websocket(
    server: MCPServer | Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    ssl_context: ssl.SSLContext | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve *server* over WebSocket until cancelled; use with ``nursery.start``.

    Binds *host*:*port* (``port=0`` picks a free port) and reports the URL clients
    should use, e.g. ``ws://127.0.0.1:41234/``, through ``task_status.started``; when
    the host resolves to several addresses, that is the first listener's URL.

    Each connection gets its own server session (and its own run of the server's
    lifespan), in whichever protocol era the client opens with: the 2026-07-28
    ``server/discover`` probe that ``mcp.Client`` sends by default, or the legacy
    ``initialize`` handshake. Any path is accepted. An upgrade request that does not
    offer subprotocol ``mcp`` is rejected with HTTP 400. A failing connection is
    logged and closed; it never stops the server. Cancelling stops accepting and
    closes every connection.
    """
    lowlevel = _lowlevel(server)
    # Connections live in a nursery that outside cancellation does not reach: on
    # shutdown each session is cancelled by us and still runs its close handshake, which
    # needs trio-websocket's reader task for that connection alive. Whatever remains
    # after the sessions have finished (or their bounded wait ran out) is cancelled: a
    # client that neither completes its upgrade nor closes after a rejection, say.
    sessions: dict[trio.CancelScope, trio.Event] = {}
    closing = False

    async def handle(request: trio_websocket.WebSocketRequest) -> None:
        if closing:
            return
        peer = _peer(request.remote)
        done = trio.Event()
        with trio.CancelScope() as scope:
            sessions[scope] = done
            try:
                if SUBPROTOCOL not in request.proposed_subprotocols:
                    log.debug("websocket upgrade without subprotocol mcp rejected", peer=peer)
                    body = f"this endpoint requires WebSocket subprotocol {SUBPROTOCOL!r}\n"
                    await request.reject(http.HTTPStatus.BAD_REQUEST, body=body.encode())
                    return
                ws = await request.accept(subprotocol=SUBPROTOCOL)
                await serve_connection(lowlevel, ws)
            except trio_websocket.ConnectionClosed:
                log.debug("websocket client left during the handshake", peer=peer)
            except Exception:
                # One broken connection must not take the listener (and its siblings) down.
                log.exception("websocket connection failed", peer=peer)
            finally:
                del sessions[scope]
                done.set()

    # Bound before the nursery, so that "address already in use" is raised as it is.
    listeners: Sequence[trio.SocketListener | trio.SSLListener[trio.SocketStream]]
    if ssl_context is None:
        listeners = await trio.open_tcp_listeners(port, host=host)
    else:
        listeners = await trio.open_ssl_over_tcp_listeners(
            port, ssl_context, host=host, https_compatible=True
        )
    async with trio.open_nursery() as nursery:
        connections: trio.Nursery = await nursery.start(_shielded_nursery)
        try:
            # What `trio_websocket.serve_websocket` does after binding; it closes the
            # listeners when it stops.
            ws_server = trio_websocket.WebSocketServer(
                handle,
                listeners,
                handler_nursery=connections,
                max_message_size=max_message_size,
            )
            await nursery.start(ws_server.run)
            url = f"{_peer(ws_server.listeners[0])}/"
            log.debug("websocket server listening", url=url)
            task_status.started(url)
            await trio.sleep_forever()
        finally:
            closing = True
            with trio.CancelScope(shield=True):
                pending = list(sessions.items())
                for scope, _ in pending:
                    scope.cancel()
                with trio.move_on_after(_FLUSH_TIMEOUT + _CLOSE_TIMEOUT):
                    for _, done in pending:
                        await done.wait()
            connections.cancel_scope.cancel()
    raise AssertionError("unreachable: serving ends only by cancellation or failure")


async def _shielded_nursery(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
    """Provide a nursery that outside cancellation does not reach, until its scope is cancelled."""
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.shield = True
        task_status.started(nursery)
        await trio.sleep_forever()


async def serve_connection(
    server: MCPServer | Server[Any], ws: trio_websocket.WebSocketConnection
) -> None:
    """Run one server session over an accepted connection until either side ends it.

    For embedders with their own trio-websocket server (custom paths, authentication
    of the upgrade request): accept with ``subprotocol="mcp"``, then call this. Returns
    when the client closes the connection or the session ends, after closing the
    connection: code 1000, or 1001 (going away) when cancelled. The close waits at most
    2.5 s for the client; it completes at once only while trio-websocket's reader task
    for *ws* still runs, so cancel this call, not the connection's own nursery, to
    shut down gracefully (:func:`serve_websocket` does).
    """
    lowlevel = _lowlevel(server)
    async with trio.open_nursery() as nursery:
        bridge = _Bridge(ws, _peer(ws.remote), nursery)
        try:
            # `Server.run` is what `MCPServer.run_stdio_async` and the SDK's in-memory
            # transport call: it enters the lifespan and serves the era the client opens
            # with (modern `server/discover` or legacy `initialize`) until the read
            # stream ends; it closes the write stream itself.
            await lowlevel.run(*bridge.streams, lowlevel.create_initialization_options())
        finally:
            shutting_down = trio.current_effective_deadline() == -math.inf  # we are cancelled
            await bridge.aclose(code=1001 if shutting_down else 1000)
            nursery.cancel_scope.cancel()


def _lowlevel(server: MCPServer | Server[Any]) -> Server[Any]:
    # `mcp.Client` and the SDK's in-memory transport unwrap an MCPServer the same way.
    return lowlevel_server(server)


# ---------------------------------------------------------------------------- framing


class _Bridge:
    """Pumps between a WebSocket and the pair of streams the SDK's sessions use.

    The two pump tasks run in the given nursery; :meth:`aclose` ends them gracefully.
    With a *guard* (a client's), listing requests are shown to it on their way out, and
    each text frame on its way in, before it is parsed.
    """

    def __init__(
        self,
        ws: trio_websocket.WebSocketConnection,
        peer: str,
        nursery: trio.Nursery,
        guard: PageGuard | None = None,
    ) -> None:
        self._ws = ws
        self._peer = peer
        # anyio streams, not trio channels: the SDK's dispatcher catches anyio's errors.
        read_writer, self._read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self._write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self._writer_done = trio.Event()
        nursery.start_soon(_pump_in, ws, read_writer, peer, guard)
        nursery.start_soon(self._writer, write_reader, guard)

    @property
    def streams(self) -> TransportStreams:
        return self._read_stream, self._write_stream

    async def _writer(
        self, source: MemoryObjectReceiveStream[SessionMessage], guard: PageGuard | None
    ) -> None:
        try:
            await _pump_out(self._ws, source, self._peer, guard)
        finally:
            self._writer_done.set()

    async def aclose(self, code: int = 1000) -> None:
        """Flush what the session already sent, then close the socket; bounded, shielded."""
        with trio.CancelScope(shield=True):
            self._read_stream.close()
            self._write_stream.close()
            with trio.move_on_after(_FLUSH_TIMEOUT):
                await self._writer_done.wait()
            await _close(self._ws, code=code)


async def _pump_in(
    ws: trio_websocket.WebSocketConnection,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    peer: str,
    guard: PageGuard | None,
) -> None:
    """Frames → items, until the connection closes; then end the read stream. A page
    *guard* refuses becomes its request's error, the frame dropped unparsed."""
    async with sink:
        while True:
            try:
                frame = await ws.get_message()
            except trio_websocket.ConnectionClosed as closed:
                reason = closed.reason
                log.debug("websocket closed", peer=peer, code=reason and reason.code)
                if reason is not None and reason.code not in _NORMAL_CLOSE_CODES:
                    error = WebSocketClosed(
                        f"WebSocket connection to {peer} closed abnormally: code {reason.code} "
                        f"({reason.name})" + (f": {reason.reason}" if reason.reason else ""),
                        url=peer,
                        code=reason.code,
                        reason=reason.reason,
                    )
                    try:
                        await sink.send(error)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass
                return
            refused = guard.check(frame) if guard is not None and isinstance(frame, str) else None
            item = _parse_frame(frame, peer) if refused is None else refusal(refused, server=peer)
            del frame  # not kept while the session takes the item, nor while the next one comes
            try:
                await sink.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the session is gone; exit closes the socket
            del item


async def _pump_out(
    ws: trio_websocket.WebSocketConnection,
    source: MemoryObjectReceiveStream[SessionMessage],
    peer: str,
    guard: PageGuard | None,
) -> None:
    """Items → text frames, until the session closes its write stream or the socket dies;
    each request is shown to *guard* first. A message that cannot be written as JSON
    (:func:`~._encoding.encode`) is not sent — an answer is replaced by an error — and the
    rest go on (a client's were tried by its sender already: :mod:`._remote`)."""
    async with source:
        async for item in source:
            try:
                encoded = encode(item, server=peer)
            except RequestUnencodable as exc:
                log.warning("a request that cannot be written as JSON dropped", error=str(exc))
                continue
            if encoded is None:
                continue
            item, text = encoded
            request = item.message
            if guard is not None and isinstance(request, mcp_types.JSONRPCRequest):
                guard.sent(request.method, request.id)
            try:
                await ws.send_message(text)
            except trio_websocket.ConnectionClosed:
                # Closing `source` (on return) makes the session's next send fail with
                # CONNECTION_CLOSED; the reader ends the read stream on its own.
                return


def _parse_frame(frame: str | bytes, peer: str) -> SessionMessage | Exception:
    """One frame → one message, or the error that says why it is not one."""
    if isinstance(frame, bytes):
        return WebSocketFrameError(
            f"binary frame ({len(frame)} bytes) from {peer}: MCP over WebSocket uses text frames",
            url=peer,
        )
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(frame, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError, for bad JSON and bad shape alike
        error = WebSocketFrameError(
            f"text frame ({len(frame)} characters) from {peer} is not a JSON-RPC message",
            url=peer,
        )
        error.__cause__ = exc
        return error
    return SessionMessage(message)


async def _close(
    ws: trio_websocket.WebSocketConnection, *, code: int = 1000, reason: str | None = None
) -> None:
    """Close *ws* with a close handshake, bounded and shielded; idempotent."""
    with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
        await ws.aclose(code, reason)


# ---------------------------------------------------------------------------- helpers


def _peer(endpoint: trio_websocket.Endpoint | str) -> str:
    """An endpoint as a URL (``ws://127.0.0.1:8000``), for messages and logs."""
    return endpoint.url if isinstance(endpoint, trio_websocket.Endpoint) else endpoint


@attrs.frozen
class _Target:
    """Where a ``ws://`` or ``wss://`` URL points."""

    host: str
    port: int
    resource: str  # path and query, as sent in the request line
    secure: bool
    safe_url: str  # the URL without user-info and query string, for messages and logs

    @classmethod
    def parse(cls, url: str) -> _Target:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("ws", "wss"):
            raise ValueError(
                f"a WebSocket URL must start with ws:// or wss://, not {parts.scheme!r}://"
            )
        if not parts.hostname:
            raise ValueError("a WebSocket URL needs a host")
        secure = parts.scheme == "wss"
        path = parts.path or "/"
        netloc = parts.netloc.rpartition("@")[2]
        return cls(
            host=parts.hostname,
            port=parts.port or (443 if secure else 80),
            resource=f"{path}?{parts.query}" if parts.query else path,
            secure=secure,
            safe_url=urllib.parse.urlunsplit((parts.scheme, netloc, path, "", "")),
        )

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.secure else 80
        return host if self.port == default_port else f"{host}:{self.port}"


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _encode_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """Headers as trio-websocket wants them; a bad one is named, its value never shown."""
    encoded = []
    for name, value in headers.items():
        try:
            raw_name, raw_value = name.encode("ascii"), value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"header {name!r} has characters HTTP cannot carry") from None
        if (
            not raw_name
            or any(c in raw_name for c in b" \t\r\n:")
            or any(c in raw_value for c in b"\r\n\0")
        ):
            raise ValueError(f"header {name!r} has characters HTTP cannot carry")
        encoded.append((raw_name, raw_value))
    return encoded
