"""Fault injection at the HTTP level of MCP's Streamable HTTP transport.

:class:`FaultyHTTPTransport` wraps any ``httpx2`` transport and carries every exchange
through a :class:`~._engine.FaultEngine`. It serves both protocol eras — sessions
(``Mcp-Session-Id``, a standalone GET stream) and the stateless 2026-07-28 one — and both
kinds of answer, a JSON body or an event stream (``text/event-stream``):

- a POST body is one message travelling ``to_server``;
- an ``application/json`` body is one message travelling ``to_client``, and so is the
  data of each ``message`` event of an event stream (a POST's answer or the GET stream).

The actions mean what they mean on a message stream (:class:`~._link.Link`), as far as
HTTP lets them. Going ``to_server``:

``delay``
    the request waits that long before it is forwarded;
``drop``
    a request is never forwarded nor answered: the exchange waits until cancelled (the
    client's timeout); a notification or a response is answered ``202`` unforwarded;
``duplicate``
    the request is sent twice upstream: a copy first (its answer read and discarded),
    then the message itself, whose answer the client gets;
``reorder``
    the request is held until the next one has been sent, or :data:`REORDER_HOLD_S`;
``garbage_line``
    a POST whose body is not JSON-RPC goes upstream first (its answer discarded);
``truncate``
    the body is cut in half and forwarded: the client gets the server's answer to that;
``close_stream``
    nothing is forwarded and the request's answer is an event stream that ends at once
    (a notification's: ``202``);
``error``
    a request is answered with that JSON-RPC error in the server's place, unforwarded
    (a response is replaced by the error, a notification is dropped: ``202``);
``http_status``
    the answer is that HTTP status, unforwarded;
``expire_session``
    a request carrying ``Mcp-Session-Id`` is answered ``404`` "Session not found", as a
    restarted server answers, and the session is ended upstream (``DELETE``), so it stays
    unknown there; a request without a session (2026-07-28) passes unchanged;
``kill``, ``exit_on_initialize``
    the connection drops without an answer: ``httpx2.RemoteProtocolError`` (a crashed
    server's), and every other exchange in flight breaks the same way;
``hang``
    neither this request nor any later one, nor any event of an open stream, gets
    anywhere until ``hang_ms`` has passed (for ever without it), as with a stopped server;
``list_changed``
    a ``notifications/tools/list_changed`` event comes first in the request's answer (a
    JSON answer becomes an event stream for it; a ``202`` has no room for it).

Going ``to_client``, a JSON body or an event: ``delay`` holds it back; ``drop`` leaves it
out (a JSON answer never comes; an event stream whose answer was dropped stays open, so
the client waits as for any lost answer); ``duplicate`` delivers it twice and
``list_changed`` puts the notification before it (a JSON answer becomes an event stream
to carry both); ``reorder`` holds it until the next message to the client has gone, or
:data:`REORDER_HOLD_S` (an event stream reads on meanwhile: the next event of the stream
overtakes it, if one comes); ``garbage_line`` sends an
event that is not JSON-RPC before it (a JSON body is replaced by the garbage: it has room
for one message); ``truncate`` cuts it in half; ``close_stream`` ends the stream there (a
JSON answer becomes an event stream that ends at once); ``error`` replaces an answer with
the error (a request from the server is left out and the error POSTed upstream as the
client's answer); ``kill`` breaks the stream as a crash does; ``http_status`` and
``expire_session`` replace a JSON answer (an event stream's status line has gone: the
stream ends there instead).

``slow_start``: the first exchanges wait until ``slow_start_ms`` after
:meth:`FaultyHTTPTransport.start`.

The 1 s bound of ``reorder`` in an event stream needs the transport to be entered
(``async with httpx2.AsyncClient(transport=...)``, which enters it): it then reads each
stream in a task of its own. Otherwise a held event waits for the next event of its
stream, or for its end. GET and DELETE requests carry no message; they wait out
``slow_start`` and ``hang`` like the rest. Bodies come upstream unencoded
(``Accept-Encoding: identity``); an encoded one, or one over :data:`MAX_BODY_BYTES`, passes
unexamined.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, aclosing, suppress
from types import TracebackType
from typing import cast

import httpx2
import trio

from ...config._plan import TO_CLIENT, TO_SERVER, Action
from ...log import get_logger
from ...tools._outcome import describe_error
from ._engine import FaultEngine, Message
from ._link import (
    LIST_CHANGED,
    REORDER_HOLD_S,
    CallRecorder,
    Exchange,
    garbage,
    json_error,
    mcp_error,
)

__all__ = [
    "BYPASS",
    "MAX_BODY_BYTES",
    "MCP_SESSION_ID",
    "FaultyHTTPTransport",
    "session_not_found",
]

log = get_logger("supervisor.faults.http")

#: The session header of the handshake era.
MCP_SESSION_ID = "mcp-session-id"
#: A JSON body or an event larger than this passes through unexamined.
MAX_BODY_BYTES = 64 * 2**20
#: A request extension: a request with it set passes untouched (the chaos proxy's
#: requests for paths other than the MCP endpoint).
BYPASS = "mcp_supervisor.faults.bypass"
#: A request extension set when tool calls are recorded: the exchange, which an answer
#: belongs to (the recorder's scope).
_EXCHANGE = "mcp_supervisor.faults.exchange"
#: The body a server that does not know a session answers with (the SDK's words).
SESSION_NOT_FOUND = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
)

_SSE = "text/event-stream"
_JSON = "application/json"
#: Lines end in CRLF, LF or CR; an event ends at an empty line (two line ends in a row).
_LINE_END = re.compile(rb"\r\n|\r|\n")
_EVENT_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n){2}")
#: Headers that describe a body that is about to change.
_BODY_HEADERS = frozenset({"content-length", "transfer-encoding"})


def session_not_found(request: httpx2.Request | None = None) -> httpx2.Response:
    """The ``404`` a Streamable HTTP server answers for a session it does not know."""
    return _answer(request, 404, SESSION_NOT_FOUND, _JSON)


def _answer(
    request: httpx2.Request | None,
    status: int,
    content: bytes = b"",
    content_type: str | None = None,
) -> httpx2.Response:
    headers = {"content-type": content_type} if content_type else {}
    return httpx2.Response(status, headers=headers, content=content, request=request)


def _injected_status(request: httpx2.Request, status: int) -> httpx2.Response:
    if status < 200 or status in (204, 304):
        return _answer(request, status)
    return _answer(
        request, status, f"chaos: injected HTTP {status}\n".encode(), "text/plain; charset=utf-8"
    )


def _rebuilt(
    response: httpx2.Response,
    request: httpx2.Request,
    *,
    content: bytes | None = None,
    stream: httpx2.AsyncByteStream | None = None,
    content_type: str | None = None,
) -> httpx2.Response:
    """``response``'s status and headers with another body (and content type)."""
    drop = _BODY_HEADERS | ({"content-type"} if content_type else set())
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in drop]
    if content_type:
        headers.append(("content-type", content_type))
    if content_type == _SSE and "cache-control" not in response.headers:
        headers.append(("cache-control", "no-cache"))
    extensions = {k: v for k, v in response.extensions.items() if k in _KEPT_EXTENSIONS}
    return httpx2.Response(
        response.status_code,
        headers=headers,
        content=content,
        stream=stream,
        request=request,
        extensions=extensions,
    )


_KEPT_EXTENSIONS = ("http_version", "reason_phrase")


def _media_type(headers: httpx2.Headers) -> str:
    return headers.get("content-type", "").partition(";")[0].strip().lower()


def _encoded(headers: httpx2.Headers) -> bool:
    return headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")


# -- server-sent events ---------------------------------------------------------------


def event(data: bytes, event_id: bytes | None = None) -> bytes:
    """One ``message`` event carrying ``data`` (with ``event_id``, if given)."""
    lines = [b"event: message"]
    if event_id is not None:
        lines.append(b"id: " + event_id)
    lines.extend(b"data: " + line for line in _LINE_END.split(data))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _event_data(raw: bytes) -> tuple[bytes | None, bytes | None]:
    """The data and id of the ``message`` event ``raw``; no data for other events, for
    comments and for events without data (a priming event)."""
    kind = b"message"
    data: list[bytes] = []
    event_id: bytes | None = None
    for line in _LINE_END.split(raw):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            kind = value
        elif name == b"id":
            event_id = value
    if kind != b"message" or not data or not any(data):
        return None, event_id
    return b"\n".join(data), event_id


async def _raw_events(body: AsyncIterable[bytes]) -> AsyncGenerator[tuple[bytes, bool], None]:
    """Each event of an event stream, as its bytes with the empty line that ends it, and
    whether to examine it. Past :data:`MAX_BODY_BYTES` without an event's end, the rest
    of the stream comes as it arrives, unexamined."""
    buffer = bytearray()
    whole = True
    async for chunk in body:
        if not whole:
            yield chunk, False
            continue
        buffer += chunk
        start = 0
        # a CR at the very end may be the first half of a CRLF: wait for what follows
        while found := _EVENT_END.search(buffer, start, len(buffer) - buffer.endswith(b"\r")):
            yield bytes(buffer[start : found.end()]), True
            start = found.end()
        del buffer[:start]
        if len(buffer) > MAX_BODY_BYTES:
            whole = False
            yield bytes(buffer), False
            buffer.clear()
    if buffer:
        yield bytes(buffer), whole


def _body(response: httpx2.Response) -> httpx2.AsyncByteStream:
    """``response``'s body: an async transport's response, whose stream is async."""
    return cast("httpx2.AsyncByteStream", response.stream)


async def _read_upto(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of ``response``'s body, and whether that was all of it."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in _body(response):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), False
    return b"".join(chunks), True


class _Rest(httpx2.AsyncByteStream):
    """What was read of a body, then the rest of it."""

    def __init__(self, head: bytes, response: httpx2.Response) -> None:
        self._head = head
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._head
        async for chunk in _body(self._response):
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


# -- holding back (reorder) -----------------------------------------------------------


class _Hold:
    """A message held back by ``reorder`` until another overtakes it or time runs out."""

    __slots__ = ("deadline", "owner", "poke", "released")

    def __init__(self, owner: object, poke: Callable[[], None] | None) -> None:
        self.owner = owner
        self.poke = poke
        self.deadline = trio.current_time() + REORDER_HOLD_S
        self.released = trio.Event()

    def release(self) -> None:
        self.released.set()
        if self.poke is not None:
            self.poke()

    @property
    def over(self) -> bool:
        return self.released.is_set() or trio.current_time() >= self.deadline


# -- the transport --------------------------------------------------------------------


class FaultyHTTPTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that injects ``engine``'s faults into the exchanges it
    passes to ``inner`` (see the module's docstring for what each action does).

    Entering it (an ``httpx2.AsyncClient`` using it enters it with itself: ``async with
    client``) enters ``inner`` and opens the nursery in which event streams are read;
    leaving it, in the same task, stops those readers and leaves ``inner``. Used without
    being entered, it works the same but for the 1 s bound of ``reorder`` in an event
    stream. :meth:`start` starts the engine's clock and decides ``slow_start``; the first
    exchange does it otherwise.

    One engine may serve several transports in turn (a supervisor makes one per
    connection): each is a start of the server, for ``slow_start``.

    ``calls`` records the tool calls POSTed through it as the client lives them: invoked
    when the request comes, sent once its body went upstream, and the answer that reaches
    the client (a JSON body returned, or an event of a stream handed on); an answer
    belongs to its request's exchange. The owner calls ``calls.finish()`` at the end.
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        engine: FaultEngine,
        *,
        calls: CallRecorder | None = None,
    ) -> None:
        self.inner = inner
        self.engine = engine
        self.calls = calls
        self._started = False
        self._ready_at = -math.inf
        self._hang_until = -math.inf
        self._garbage = 0
        self._holds: dict[str, _Hold | None] = {TO_SERVER: None, TO_CLIENT: None}
        #: the cancel scopes of exchanges in flight and the event streams open: a kill
        #: breaks them all
        self._exchanges: set[trio.CancelScope] = set()
        self._streams: set[_EventStream] = set()
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> FaultyHTTPTransport:
        await self.inner.__aenter__()
        manager = trio.open_nursery()
        self._nursery = await manager.__aenter__()
        self._nursery_manager = manager
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        manager, nursery = self._nursery_manager, self._nursery
        self._nursery_manager = self._nursery = None
        try:
            if manager is not None and nursery is not None:
                # The readers never raise; the block's own exception leaves as it is.
                nursery.cancel_scope.cancel()
                await manager.__aexit__(None, None, None)
        finally:
            await self.inner.__aexit__(exc_type, exc_value, traceback)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def start(self) -> None:
        """Start the engine's clock (if not yet) and decide ``slow_start``: exchanges wait
        until that long after now. Only the first call does anything."""
        if self._started:
            return
        self._started = True
        self.engine.start()
        wait_ms = sum(action.ms or 0.0 for action in self.engine.decide_start())
        self._ready_at = trio.current_time() + wait_ms / 1000

    # -- exchanges ------------------------------------------------------------------

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.extensions.get(BYPASS):
            return await self.inner.handle_async_request(request)
        self.start()
        request.headers["accept-encoding"] = "identity"
        exchange: Exchange | None = None
        if self.calls is not None:
            exchange = Exchange(request.headers.get(MCP_SESSION_ID))
            request.extensions[_EXCHANGE] = exchange
        # without an answer, why the exchange ended (for the calls it carries)
        why = "the exchange was broken off (the client closed it, or the proxy stopped)"
        scope = trio.CancelScope()
        self._exchanges.add(scope)
        try:
            with scope:
                try:
                    response = await self._exchange(request)
                except httpx2.HTTPError as exc:
                    why = f"the exchange failed ({describe_error(exc)})"
                    raise
                if exchange is not None:
                    self._answered(response, exchange)
                    exchange = None
                return response
            why = "the connection was lost (an injected kill)"
        finally:
            self._exchanges.discard(scope)
            if exchange is not None and self.calls is not None:
                self.calls.unanswered(exchange, why)
        raise _no_response(request)  # a kill cancelled the exchange

    def _answered(self, response: httpx2.Response, exchange: Exchange) -> None:
        """Tell the recorder what an answer says of the exchange's call.

        A 4xx refused it before it ran. An answer made in memory tells of each message
        (an event stream read as it comes tells of each event itself, and of its end);
        then, if none answered the call, a 5xx leaves it unanswered (it may have run), a
        JSON-RPC error naming no id refused it (the server could not read the request),
        and anything else leaves it unanswered too."""
        assert self.calls is not None
        status = response.status_code
        in_memory = response.is_stream_consumed and not _encoded(response.headers)
        if 400 <= status < 500:
            self.calls.refused(exchange, _status_text(response, in_memory))
            return
        if in_memory:
            media_type = _media_type(response.headers)
            if media_type == _JSON:
                self.calls.delivered(TO_CLIENT, response.content, exchange)
            elif media_type == _SSE:
                for raw in _EVENT_END.split(response.content):
                    data, _ = _event_data(raw)
                    if data is not None:
                        self.calls.delivered(TO_CLIENT, data, exchange)
        if status >= 500:
            self.calls.unanswered(exchange, _status_text(response, in_memory))
        elif in_memory:
            found = _json_error(response)
            if found is not None and not found[1]:  # the request unread: never run
                self.calls.refused(exchange, mcp_error(found[0]))
            else:
                self.calls.unanswered(exchange, "the answer carried no response to the call")

    async def _exchange(self, request: httpx2.Request) -> httpx2.Response:
        if trio.current_time() < self._ready_at:
            await trio.sleep_until(self._ready_at)
        await self._gate()
        if request.method != "POST":
            response = await self.inner.handle_async_request(request)
            return await self._to_client(request, response)
        body = await request.aread()
        message = self.engine.classify(TO_SERVER, body)
        actions = self.engine.decide(TO_SERVER, message)
        if self.calls is not None and message.method == "tools/call" and message.is_request:
            self.calls.invoked(message, request.extensions.get(_EXCHANGE))
        elif self.calls is not None and message.method == "notifications/cancelled":
            self.calls.cancelled(message, request.extensions.get(_EXCHANGE))
        return await self._post(request, body, message, actions)

    async def _post(
        self, request: httpx2.Request, body: bytes, message: Message, actions: list[Action]
    ) -> httpx2.Response:
        copies = 1
        hold = announce = False
        for action in actions:
            kind = action.kind
            if kind == "delay":
                await trio.sleep(action.delay_ms / 1000)
            elif kind == "hang":
                self._hang(action.ms)
            elif kind == "garbage_line":
                self._garbage += 1
                await self._side(request, "POST", garbage(self._garbage))
            elif kind == "duplicate":
                copies += 1
            elif kind == "reorder":
                hold = True
            elif kind == "list_changed":
                announce = True
            elif kind in ("kill", "exit_on_initialize"):
                self._kill()
                raise _no_response(request)
            elif kind == "drop":
                self._went(TO_SERVER)
                if message.is_request:
                    await trio.sleep_forever()
                return _answer(request, 202)
            elif kind == "truncate":
                body, copies, hold = body[: max(1, len(body) // 2)], 1, False
                break
            elif kind == "close_stream":
                if message.is_request:
                    return _answer(request, 200, b"", _SSE)
                return _answer(request, 202)
            elif kind == "error":
                self._went(TO_SERVER)
                if message.id is not None and message.is_request:
                    return _answer(
                        request, 200, json_error(message.id, action.code, action.message), _JSON
                    )
                if message.id is None or not message.is_response:
                    return _answer(request, 202)
                # the client's answer to the server's request: the error goes instead
                body, copies, hold = json_error(message.id, action.code, action.message), 1, False
                break
            elif kind == "http_status":
                return _injected_status(request, action.status)
            elif kind == "expire_session":
                if request.headers.get(MCP_SESSION_ID):
                    await self._side(request, "DELETE")
                    return session_not_found(request)
            else:  # pragma: no cover - every action is handled above
                raise AssertionError(f"unknown action {kind}")
        if hold:
            await self._hold(TO_SERVER)
        await self._gate()
        for _ in range(copies - 1):
            await self._side(request, "POST", body)
        if body is not request.content:
            request = _with_body(request, body)
        response = await self._forward(request)
        return await self._to_client(request, response, [LIST_CHANGED] if announce else [])

    async def _forward(self, request: httpx2.Request) -> httpx2.Response:
        """Send a message upstream; once it is out, a message held back is released."""
        outer = request.extensions.get("trace")

        async def trace(event_name: str, info: dict[str, object]) -> None:
            if event_name.endswith("send_request_body.complete"):
                self._went(TO_SERVER)
                self._sent(request, request.content)
            if outer is not None:
                await outer(event_name, info)

        request.extensions["trace"] = trace
        response = await self.inner.handle_async_request(request)
        self._went(TO_SERVER)
        self._sent(request, request.content)
        return response

    def _sent(self, origin: httpx2.Request, body: bytes) -> None:
        """``body``, POSTed for ``origin``'s exchange, reached the server (a call it
        carries was sent)."""
        if self.calls is not None:
            self.calls.delivered(TO_SERVER, body, origin.extensions.get(_EXCHANGE))

    async def _side(self, origin: httpx2.Request, method: str, content: bytes = b"") -> None:
        """Send a request of our own upstream, as ``origin``'s client would (its headers,
        its session), and discard the answer: a duplicate, garbage, an injected answer to
        a server's request, a session's end."""
        headers = [
            (k, v)
            for k, v in origin.headers.multi_items()
            if k.lower() not in (*_BODY_HEADERS, "last-event-id")
        ]
        extensions = {k: v for k, v in origin.extensions.items() if k == "timeout"}
        side = httpx2.Request(
            method, origin.url, headers=headers, content=content, extensions=extensions
        )
        try:
            response = await self.inner.handle_async_request(side)
            if method == "POST":
                self._sent(origin, content)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx2.HTTPError as exc:
            log.debug("injected request failed", method=method, error=str(exc))

    # -- answers --------------------------------------------------------------------

    async def _to_client(
        self, request: httpx2.Request, response: httpx2.Response, first: Sequence[bytes] = ()
    ) -> httpx2.Response:
        """``response`` with the faults of the messages it carries."""
        if _encoded(response.headers):
            return response
        media_type = _media_type(response.headers)
        if media_type == _SSE:
            stream = _EventStream(self, request, response, list(first))
            return _rebuilt(response, request, stream=stream)
        if media_type == _JSON:
            return await self._json(request, response, list(first))
        return response

    async def _json(
        self, request: httpx2.Request, response: httpx2.Response, first: list[bytes]
    ) -> httpx2.Response:
        body, whole = await _read_upto(response, MAX_BODY_BYTES)
        if not whole:
            return _rebuilt(response, request, stream=_Rest(body, response))
        await response.aclose()
        if not body.strip():
            return _rebuilt(response, request, content=body)
        message = self.engine.classify(TO_CLIENT, body)
        actions = self.engine.decide(TO_CLIENT, message)
        copies = 1
        hold = False
        for action in actions:
            kind = action.kind
            if kind == "delay":
                await trio.sleep(action.delay_ms / 1000)
            elif kind == "hang":
                self._hang(action.ms)
            elif kind == "garbage_line":
                self._garbage += 1
                return _rebuilt(response, request, content=garbage(self._garbage))
            elif kind == "duplicate":
                copies += 1
            elif kind == "reorder":
                hold = True
            elif kind == "list_changed":
                first.append(LIST_CHANGED)
            elif kind in ("kill", "exit_on_initialize"):
                self._kill()
                raise _no_response(request)
            elif kind == "drop":
                self._went(TO_CLIENT)
                await trio.sleep_forever()
            elif kind == "truncate":
                self._went(TO_CLIENT)
                return _rebuilt(response, request, content=body[: max(1, len(body) // 2)])
            elif kind == "close_stream":
                return _rebuilt(response, request, content=b"", content_type=_SSE)
            elif kind == "error":
                self._went(TO_CLIENT)
                error = b""
                if message.id is not None:
                    error = json_error(message.id, action.code, action.message)
                return _rebuilt(response, request, content=error)
            elif kind == "http_status":
                return _injected_status(request, action.status)
            elif kind == "expire_session":
                if request.headers.get(MCP_SESSION_ID):
                    await self._side(request, "DELETE")
                    return session_not_found(request)
            else:  # pragma: no cover - every action is handled above
                raise AssertionError(f"unknown action {kind}")
        if hold:
            await self._hold(TO_CLIENT)
        await self._gate()
        self._went(TO_CLIENT)
        if first or copies > 1:
            events = b"".join(event(data) for data in [*first, *[body] * copies])
            return _rebuilt(response, request, content=events, content_type=_SSE)
        return _rebuilt(response, request, content=body)

    # -- shared state ---------------------------------------------------------------

    def _hang(self, ms: float | None) -> None:
        until = math.inf if ms is None else trio.current_time() + ms / 1000
        self._hang_until = max(self._hang_until, until)

    async def _gate(self) -> None:
        """Wait while the server hangs."""
        if trio.current_time() < self._hang_until:
            await trio.sleep_until(self._hang_until)
            await self._gate()  # a later hang may have made it longer

    def _kill(self) -> None:
        """The server crashed: every exchange in flight and every open stream breaks (a
        restarted server hangs no more)."""
        self._hang_until = -math.inf
        for scope in list(self._exchanges):
            scope.cancel()
        for stream in list(self._streams):
            stream.cut()

    def _begin_hold(
        self, direction: str, owner: object, poke: Callable[[], None] | None = None
    ) -> _Hold | None:
        """Hold a message going ``direction`` back, unless one already is."""
        if self._holds[direction] is not None:
            return None
        hold = self._holds[direction] = _Hold(owner, poke)
        return hold

    def _end_hold(self, direction: str, hold: _Hold) -> None:
        if self._holds[direction] is hold:
            self._holds[direction] = None

    async def _hold(self, direction: str) -> None:
        hold = self._begin_hold(direction, object())
        if hold is None:
            return
        try:
            with trio.move_on_at(hold.deadline):
                await hold.released.wait()
        finally:
            self._end_hold(direction, hold)

    def _went(self, direction: str, by: object = None) -> None:
        """A message went ``direction``: it overtook the one held back, which goes now."""
        hold = self._holds[direction]
        if hold is not None and hold.owner is not by:
            self._holds[direction] = None
            hold.release()


def _json_error(response: httpx2.Response) -> tuple[dict[str, object], bool] | None:
    """The JSON-RPC error object of an in-memory JSON answer, if it is one, and whether it
    names a request (``"id": null`` does not: the server could not read the one it got)."""
    if _media_type(response.headers) != _JSON:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    return error, body.get("id") is not None


def _status_text(response: httpx2.Response, in_memory: bool) -> str:
    """``HTTP 404 Not Found``, with the JSON-RPC error its body holds, if any."""
    status = response.status_code
    phrase = response.reason_phrase or httpx2.codes.get_reason_phrase(status)
    text = f"HTTP {status} {phrase}".rstrip()
    found = _json_error(response) if in_memory else None
    return text if found is None else f"{text} ({mcp_error(found[0])})"


def _no_response(request: httpx2.Request) -> httpx2.RemoteProtocolError:
    """The error of a connection that closed before its answer (a crashed server's)."""
    return httpx2.RemoteProtocolError(
        "Server disconnected without sending a response.", request=request
    )


def _broken(request: httpx2.Request) -> httpx2.RemoteProtocolError:
    """The error of a connection that closed in the middle of an answer."""
    return httpx2.RemoteProtocolError(
        "peer closed connection without sending complete message body: incomplete chunked read",
        request=request,
    )


def _with_body(request: httpx2.Request, body: bytes) -> httpx2.Request:
    headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _BODY_HEADERS]
    return httpx2.Request(
        request.method, request.url, headers=headers, content=body, extensions=request.extensions
    )


async def _until_over(hold: _Hold) -> None:
    with trio.move_on_at(hold.deadline):
        await hold.released.wait()


class _Failed:
    """An upstream error, passed from a stream's reader to its consumer."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_END = object()
_WAKE = object()


class _EventStream(httpx2.AsyncByteStream):
    """An event stream from upstream, each ``message`` event carried through the plan."""

    def __init__(
        self,
        transport: FaultyHTTPTransport,
        request: httpx2.Request,
        upstream: httpx2.Response,
        first: list[bytes],
    ) -> None:
        self._transport = transport
        self._request = request
        self._upstream = upstream
        self._first = first
        self._send: trio.MemorySendChannel[object] | None = None
        self._receive: trio.MemoryReceiveChannel[object] | None = None
        self._reader: trio.CancelScope | None = None
        self._direct: AsyncGenerator[tuple[bytes, bool], None] | None = None
        self._waiting: trio.CancelScope | None = None
        self._cut = False
        self._closed = False
        self._exchange = request.extensions.get(_EXCHANGE)
        #: an event had an id: the client may resume the stream (and get the answer)
        #: elsewhere
        self._resumable = False
        #: why the stream ended, once it did by itself
        self._why: str | None = None

    # -- reading upstream -----------------------------------------------------------

    def _open(self) -> None:
        nursery = self._transport._nursery
        if nursery is None:
            self._direct = _raw_events(_body(self._upstream))
            return
        self._send, self._receive = trio.open_memory_channel[object](1)
        self._reader = trio.CancelScope()
        nursery.start_soon(self._read, self._send, self._reader)

    async def _read(self, send: trio.MemorySendChannel[object], scope: trio.CancelScope) -> None:
        """Pass each upstream event on; never raises (it runs in the transport's nursery)."""
        try:
            with scope:
                try:
                    async with aclosing(_raw_events(_body(self._upstream))) as events:
                        async for item in events:
                            await send.send(item)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the consumer is gone
                except Exception as exc:
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await send.send(_Failed(exc))
        finally:
            send.close()
            with trio.CancelScope(shield=True):
                await self._upstream.aclose()

    def _wake(self) -> None:
        """Wake the consumer waiting for the next event (a held event may go now)."""
        if self._send is not None:
            with suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                self._send.send_nowait(_WAKE)

    async def _next(self, deadline: float) -> object:
        """The next upstream item, :data:`_END`, or :data:`_WAKE` (woken or out of time)."""
        if self._receive is not None:
            with trio.move_on_at(deadline):
                try:
                    return await self._receive.receive()
                except trio.EndOfChannel:
                    return _END
            return _WAKE
        assert self._direct is not None
        try:
            return await self._direct.__anext__()
        except StopAsyncIteration:
            return _END

    async def _await(self, work: Callable[..., Awaitable[object]], *args: object) -> object:
        """``await work(*args)``, broken off by a kill."""
        scope = self._waiting = trio.CancelScope()
        result: object = None
        with scope:
            result = await work(*args)
        self._waiting = None
        if self._cut:
            raise _broken(self._request)
        return result

    def cut(self) -> None:
        """Break the stream, as a crashed server's connection breaks."""
        self._cut = True
        self._why = "the connection was lost (an injected kill)"
        if self._waiting is not None:
            self._waiting.cancel()

    def _handed(self, chunk: bytes) -> bytes:
        """``chunk``, an event about to be handed to the client, told to the recorder."""
        calls = self._transport.calls
        if calls is not None:
            data, _ = _event_data(chunk)
            if data is not None:
                calls.delivered(TO_CLIENT, data, self._exchange)
        return chunk

    # -- the byte stream ------------------------------------------------------------

    async def __aiter__(self) -> AsyncIterator[bytes]:
        transport = self._transport
        transport._streams.add(self)
        try:
            async for chunk in self._events():
                yield chunk
                if self._cut:
                    raise _broken(self._request)
        finally:
            transport._streams.discard(self)

    async def _events(self) -> AsyncIterator[bytes]:
        transport, engine = self._transport, self._transport.engine
        for data in self._first:
            yield self._handed(event(data))
        self._open()
        held: bytes | None = None
        hold: _Hold | None = None
        answer_dropped = False
        while True:
            if held is not None and hold is not None and hold.over:
                yield self._handed(held)
                transport._end_hold(TO_CLIENT, hold)
                held = hold = None
            item = await self._await(self._next, math.inf if hold is None else hold.deadline)
            if item is _WAKE:
                continue
            if item is _END:
                break
            if isinstance(item, _Failed):
                self._why = f"the event stream failed ({describe_error(item.error)})"
                raise item.error
            raw, examine = cast("tuple[bytes, bool]", item)  # what is left: an event
            data, event_id = _event_data(raw) if examine else (None, None)
            self._resumable = self._resumable or event_id is not None
            if data is None:
                yield raw
                continue
            message = engine.classify(TO_CLIENT, data)
            actions = engine.decide(TO_CLIENT, message)
            out: bytes | None = raw
            copies = 1
            hold_this = False
            for action in actions:
                kind = action.kind
                if kind == "delay":
                    await self._await(trio.sleep, action.delay_ms / 1000)
                elif kind == "hang":
                    transport._hang(action.ms)
                elif kind == "garbage_line":
                    transport._garbage += 1
                    yield self._handed(event(garbage(transport._garbage)))
                elif kind == "duplicate":
                    copies += 1
                elif kind == "reorder":
                    hold_this = True
                elif kind == "list_changed":
                    yield self._handed(event(LIST_CHANGED))
                elif kind in ("kill", "exit_on_initialize"):
                    transport._kill()
                    self._why = "the connection was lost (an injected kill)"
                    raise _broken(self._request)
                elif kind == "drop":
                    out = None
                    answer_dropped = answer_dropped or message.is_response
                    break
                elif kind == "truncate":
                    out = event(data[: max(1, len(data) // 2)], event_id)
                    copies, hold_this = 1, False
                    break
                elif kind in ("close_stream", "http_status", "expire_session"):
                    self._why = f"the event stream was ended (an injected {kind})"
                    return  # the status line has gone: the stream can only end
                elif kind == "error":
                    out = None
                    if message.id is not None and message.is_response:
                        out = event(json_error(message.id, action.code, action.message), event_id)
                    elif message.id is not None and message.is_request:
                        error = json_error(message.id, action.code, action.message)
                        await self._await(transport._side, self._request, "POST", error)
                    copies, hold_this = 1, False
                    break
                else:  # pragma: no cover - every action is handled above
                    raise AssertionError(f"unknown action {kind}")
            await self._await(transport._gate)
            if out is not None and hold_this and held is None:
                hold = transport._begin_hold(TO_CLIENT, self, self._wake)
                if hold is not None:
                    held, copies = out, copies - 1
            if out is not None:
                for _ in range(copies):
                    yield self._handed(out)
            if out is None or not hold_this:
                transport._went(TO_CLIENT, by=self)
                if held is not None and hold is not None:
                    yield self._handed(held)
                    transport._end_hold(TO_CLIENT, hold)
                    held = hold = None
        if held is not None and hold is not None:
            # nothing more in this stream to overtake it: wait for another message, as a
            # JSON answer does, or the end of the hold
            await self._await(_until_over, hold)
            yield self._handed(held)
            transport._end_hold(TO_CLIENT, hold)
        if answer_dropped:
            # as for any answer lost on the way: the client waits until it gives up
            await self._await(trio.sleep_forever)
        self._why = self._why or "the event stream ended without the answer"

    def _over(self) -> None:
        """Tell the recorder that the calls this stream was to answer got no answer from
        it — unless the client may resume it and get the answer (its session's end, or
        the proxy's, settles those)."""
        calls = self._transport.calls
        if calls is None or self._exchange is None or self._resumable:
            return
        why = (
            self._why or "the event stream was closed (the client closed it, or the proxy stopped)"
        )
        calls.unanswered(self._exchange, why)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._over()
        if self._reader is not None:
            self._reader.cancel()  # the reader closes the upstream response
            if self._receive is not None:
                self._receive.close()
            return
        if self._direct is not None:
            with suppress(Exception):
                await self._direct.aclose()
        await self._upstream.aclose()
