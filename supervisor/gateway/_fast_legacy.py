"""The fast lane of a stateless HTTP gateway for handshake-era clients: a ``tools/call``
that asks for no progress, served around the SDK's kernel.

Without sessions, the SDK's entry serves each handshake-era POST on a fresh transport:
four pairs of memory streams, a task running the transport and one its message router,
a dispatcher that runs the request in a task of its own, the request parsed into
pydantic models, and an SSE response that runs five tasks of its own — nine tasks for
one request, whose answer passes through three of those streams. The request's
handler sees a connection born ready at the request's protocol version (no client info,
no capabilities: there was no ``initialize``), a dispatch context that carries
notifications onto the answer's event stream and refuses requests to the client (their
answers would have nowhere to land), and the HTTP request; the dispatcher writes the
answer as a JSON-RPC message in one SSE event. Under it all is the SDK's kernel
(:func:`mcp.server.runner.serve_one`: its middleware, params validation, the gateway's
handler, the result sieved for the version); the lane keeps the kernel as the one path
and takes only the exchange around it, for a request it can answer byte for byte as the
SDK would:

1. a POST without ``Mcp-Session-Id`` whose ``MCP-Protocol-Version`` is a handshake-era
   version, no header given twice, whose ``Accept`` takes both JSON and an event stream
   and whose ``Content-Type`` is JSON (as the SDK's transport checks them); the body,
   read whole within the SDK's size limit, must parse (the SDK's parser) as one JSON-RPC
   ``tools/call`` request with params whose ``_meta`` holds no ``progressToken``; the
   SDK's transport-security check (on loopback ``Host`` and ``Origin``) must pass;
2. the request is served by ``serve_one``'s steps (:mod:`._kernel`) in this task, a
   second one watching for the client going away, which cancels the call (as the SDK's
   path does), and sending the SDK's keep-alive comment every 15 s of a long call (a
   third writes the handler's notifications, if it sends any);
3. the answer is the SDK's: ``200`` and its event-stream headers, each notification the
   handler sends for the request (a backing server's log message) as an event, then the
   answer as the last, written as the SDK's dispatcher writes it (a handler's error
   mapped as it maps it).

Anything else — another method, a progress token, a session, a request that fails a
check — goes to the SDK's app with its body, untouched, which answers it exactly as it
would have (its error included).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

import anyio
import pydantic_core
import trio
from mcp.server.connection import Connection
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from .._sdk import lifespan_state
from ._fast import _read, _replay, takes_both  # (the body read whole, given back; Accept)
from ._kernel import serve_once

__all__ = ["Channel", "LegacyLane", "event"]

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: What the SDK's stateless entry tells the handler of the transport.
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
#: The headers the SDK's transport gives an answer's event stream (sse-starlette adds
#: its own to them: :func:`_stream_headers`).
_SDK_STREAM_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "Connection": "keep-alive",
    "Content-Type": "text/event-stream",
}
#: Seconds between keep-alive comments on an answer's event stream (sse-starlette's).
PING_INTERVAL = EventSourceResponse.DEFAULT_PING_INTERVAL
_SEP = EventSourceResponse.DEFAULT_SEPARATOR
_REQUEST = frozenset({"jsonrpc", "id", "method", "params"})
#: Notifications held for the answer's stream before a sender waits (the SDK's buffer).
_BUFFER = 16
#: Where the SDK's dispatcher logs a handler's unmapped failure.
_SDK_LOG = logging.getLogger("mcp.shared.jsonrpc_dispatcher")


class _Nothing:
    """An empty event source: what :func:`_stream_headers` builds its response around."""

    def __aiter__(self) -> _Nothing:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration


def _stream_headers() -> list[tuple[bytes, bytes]]:
    """The headers of the SDK's answer to a handshake-era POST: its event stream's, as
    sse-starlette completes them."""
    return list(EventSourceResponse(_Nothing(), headers=_SDK_STREAM_HEADERS).raw_headers)


class _Stream:
    """The answer's event stream, its head sent (at once, as the SDK's is): each event
    in turn under one lock — the notifications a handler sends (from any task) written
    by a task of the lane's own, so that a sender cancelled midway cannot cut one."""

    __slots__ = ("_drained", "_lock", "_nursery", "_outbox", "_send", "closed")

    def __init__(self, send: Send, nursery: trio.Nursery) -> None:
        self._send = send
        self._nursery = nursery
        self._lock = trio.Lock()
        #: the notifications' channel to their writer, once there is one
        self._outbox: trio.MemorySendChannel[bytes] | None = None
        self._drained = trio.Event()
        #: the request's handler is done: what it sends now is dropped (the SDK's too)
        self.closed = False

    async def _write(self, body: bytes, more: bool) -> None:
        async with self._lock:
            await self._send({"type": "http.response.body", "body": body, "more_body": more})

    async def notify(self, event: bytes) -> None:
        if self.closed:
            return
        if self._outbox is None:
            self._outbox, inbox = trio.open_memory_channel[bytes](_BUFFER)
            self._nursery.start_soon(self._writer, inbox)
        try:
            await self._outbox.send(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # the answer is written: too late, as on the SDK's path

    async def _writer(self, inbox: trio.MemoryReceiveChannel[bytes]) -> None:
        async with inbox:
            async for event in inbox:
                await self._write(event, True)
        self._drained.set()

    async def ping(self) -> None:
        """sse-starlette's keep-alive comment (its time is now's)."""
        comment = ServerSentEvent(comment=f"ping - {datetime.now(UTC)}", sep=_SEP)
        async with self._lock:
            if not self.closed:
                await self._send(
                    {"type": "http.response.body", "body": comment.encode(), "more_body": True}
                )

    async def finish(self, event: bytes) -> None:
        """Write the last event (the answer), after the notifications sent before it."""
        self.closed = True
        if self._outbox is not None:
            await self._outbox.aclose()
            await self._drained.wait()
        await self._write(event, False)


class Channel:
    """The dispatch context of one lane request (the SDK's ``DispatchContext``
    protocol), as the SDK's stateless entry makes it: notifications ride the answer's
    event stream; a request to the client is refused (its answer could not come back);
    no progress (the lane takes no request that asks for it)."""

    __slots__ = ("_stream", "cancel_requested", "message_metadata", "request_id")

    transport = _TRANSPORT
    can_send_request = False

    def __init__(
        self, request_id: str | int, message_metadata: ServerMessageMetadata, stream: _Stream
    ) -> None:
        self.request_id = request_id
        self.message_metadata = message_metadata
        self.cancel_requested = anyio.Event()  # (never set: no session, no cancellation)
        self._stream = stream

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if self._stream.closed:
            return  # the handler is done: dropped, as the SDK's dispatcher drops it
        if params is not None:
            message = JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))
        else:  # (no "params": null, as the SDK's dispatcher leaves it out)
            message = JSONRPCNotification(jsonrpc="2.0", method=method)
        await self._stream.notify(event(message))

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


class LegacyLane:
    """Serves the eligible handshake-era ``tools/call`` POSTs of a stateless gateway's
    ``server`` (its SDK server, whose session ``manager`` holds its lifespan state and
    body limit; ``security``: its transport-security settings) around the SDK's kernel;
    see the module docstring."""

    def __init__(self, server: Any, manager: Any, security: Any) -> None:
        self._server = server
        self._manager = manager
        self._security = TransportSecurityMiddleware(security)
        self._limit: int = manager.max_request_body_size
        self._head = _stream_headers()

    @staticmethod
    def wanted(scope: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
        """Whether the request's head allows the lane at all (cheap: headers only)."""
        if scope["method"] != "POST" or "mcp-session-id" in headers:
            return False
        if headers.get("mcp-protocol-version") not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        if len(headers) != len(scope["headers"]):
            return False  # a header given twice: the SDK reads the first, not the last
        content_type = headers.get("content-type", "").split(";")[0].split(",")
        if not any(part.strip() == "application/json" for part in content_type):
            return False
        return takes_both(headers.get("accept", ""))

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        app: Callable[[Any, Any, Any], Awaitable[None]],
    ) -> None:
        """Serve the request (:meth:`wanted` said yes) here, or pass it to ``app``."""
        if _declared(headers) > self._limit:
            await app(scope, receive, send)  # refused on its header alone (413)
            return
        body, complete = await _read(receive, self._limit)
        if complete is None:
            return  # the client went before its request was all there
        request = _request(body) if complete else None
        http = Request(scope, receive)
        if request is None or await self._security.validate_request(http, is_post=True):
            await app(scope, _replay(body, complete, receive), send)
            return
        await self._serve(http, receive, send, headers["mcp-protocol-version"], request)

    async def _serve(
        self,
        http: Request,
        receive: Receive,
        send: Send,
        version: str,
        request: dict[str, Any],
    ) -> None:
        metadata = ServerMessageMetadata(request_context=http)
        await send({"type": "http.response.start", "status": 200, "headers": self._head})
        async with trio.open_nursery() as nursery:
            stream = _Stream(send, nursery)
            nursery.start_soon(_watch, receive, stream, nursery.cancel_scope)
            try:
                channel = Channel(request["id"], metadata, stream)
                await stream.finish(event(await self._answer(channel, version, request)))
            finally:  # (cancelled too: what the handler's other tasks send now is dropped)
                stream.closed = True
            nursery.cancel_scope.cancel()

    async def _answer(
        self, channel: Channel, version: str, request: dict[str, Any]
    ) -> JSONRPCResponse | JSONRPCError:
        """The answer to ``request``, served by the SDK's kernel on a connection born
        ready at ``version``, as the SDK's stateless entry makes it; a handler's error
        mapped as the SDK's dispatcher maps it."""
        request_id = request["id"]
        connection = Connection.from_envelope(version, None, None)
        try:
            result = await serve_once(
                self._server,
                channel,
                "tools/call",
                request["params"],
                connection,
                lifespan_state(self._manager),
            )
        except Exception as exc:  # noqa: BLE001 — the SDK's dispatcher's mapping
            error = handler_exception_to_error_data(exc)
            if error is None:
                _SDK_LOG.exception("handler for %r raised", "tools/call")
                error = ErrorData(code=0, message=str(exc))
            return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)


def event(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    """``message`` as one event of the SDK's answer stream."""
    data = message.model_dump_json(by_alias=True, exclude_unset=True)
    if "\r" in data or "\n" in data:  # (JSON has none; sse-starlette would split them)
        return ServerSentEvent(data, event="message", sep=_SEP).encode()
    return f"event: message{_SEP}data: {data}{_SEP}{_SEP}".encode()


def _request(body: bytes) -> dict[str, Any] | None:
    """The body's JSON-RPC request (parsed as the SDK parses it), if it is a
    ``tools/call`` the lane takes: params an object, its ``_meta`` (if any) an object
    without a ``progressToken``."""
    try:
        request = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(request, dict) or not request.keys() <= _REQUEST:
        return None
    if request.get("jsonrpc") != "2.0" or request.get("method") != "tools/call":
        return None
    request_id, params = request.get("id"), request.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta", {})
    if not isinstance(meta, dict) or "progressToken" in meta:
        return None
    return request


def _declared(headers: Mapping[str, str]) -> int:
    """The body's size its ``Content-Length`` declares, read as the SDK's limit reads
    it (``0`` for none, or one that is no number)."""
    try:
        return int(headers.get("content-length", "0"))
    except ValueError:
        return 0


async def _watch(receive: Receive, stream: _Stream, scope: trio.CancelScope) -> None:
    """Cancel the request (``scope``) when its client goes; meanwhile keep its stream
    alive as the SDK's does."""
    while True:
        with trio.move_on_after(PING_INTERVAL):
            while (await receive()).get("type") != "http.disconnect":
                pass
            scope.cancel()  # the client went: the call is cancelled
            return
        await stream.ping()
