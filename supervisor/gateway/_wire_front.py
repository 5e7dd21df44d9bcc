"""The HTTP gateway's own HTTP/1.1 server under trio, in place of hypercorn: requests parsed
by httptools' C parser (``serve_http(front="httptools")``; httptools must be installed) or
by h11's, which hypercorn brings (``front="h11"``).

Each connection is one task that parses its requests and calls the ASGI app (the gateway's
front, :class:`~._http._Front`, which makes every check of its own) in that task, one
request after another. What the server itself holds to, as hypercorn does in
:mod:`supervisor._serving`:

* **Heads.** A request head (request line and headers) over *max_head* bytes, or with more
  than :data:`MAX_HEADERS` fields, is answered ``431`` and its connection closed, whether
  it arrives whole in one read or a piece at a time; a head that does not parse, ``400``.
* **Slow clients.** A head must arrive whole within *idle_timeout* seconds of the
  connection's start or the previous answer's end (an idle kept-alive connection is then
  closed, without an answer); a body within *body_timeout* seconds of its request being
  handed to the app, or the app is cancelled and the request answered ``408`` (unless
  its answer had begun), and the connection closed.
* **Bodies.** A body is handed to the app as it arrives, ``Content-Length`` or chunked
  (the parser refuses both at once); ``Expect: 100-continue`` is answered when the app
  first asks for the body. A request answered before its body was all there closes its
  connection after the answer. How large a body may be is the app's to say (the SDK's
  ``413``).
* **Keep-alive and pipelining.** HTTP/1.1 connections are kept (HTTP/1.0 ones when they
  ask, and are told so; not with h11), requests served in order; while one is served, at
  most one read of the next is taken in, and no more until the answer is written.
  ``Upgrade`` is not taken up: the request is served as a plain one (with httptools, its
  connection closed after it).
* **Answers.** The app's headers as it gave them, a ``date``, and framing:
  ``Content-Length`` when the app gave it or sent its body whole, else chunked (closed
  at the end for HTTP/1.0); a header carrying a line break is refused (the app fails).
  An answer with a ``Content-Length``, or JSON, is written with its body, in one write;
  any other (an event stream) has its head written at once.
* **Shutdown.** Like :func:`~supervisor._serving.serve_sockets`: *stopping* is set,
  listeners close, idle connections close, open requests get *graceful_timeout* seconds,
  then the app's lifespan ends.
"""

from __future__ import annotations

import importlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from email.utils import formatdate
from functools import partial
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

import h11
import trio

from .._serving import SHUTDOWN_MARGIN
from ..log import get_logger

__all__ = ["MAX_HEADERS", "PARSERS", "available", "serve_wire"]

#: The most header fields a request may have: ``431`` beyond.
MAX_HEADERS = 100
#: Bytes read from a connection at a time.
_READ = 65536
#: Seconds a closing connection's unread input is drained, so that the answer is not lost
#: to a reset.
_LINGER = 1.0
_ASGI = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT = {"type": "http.disconnect"}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_STATUS = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}
_METHODS = {m: m.decode() for m in (b"GET", b"POST", b"DELETE", b"PUT", b"HEAD", b"OPTIONS")}
#: Answers the server gives itself: a head too large, one that does not parse, a body late.
_TOO_LARGE = b'{"error": "request head too large"}'
_MALFORMED = b'{"error": "malformed request"}'
#: What h11 is told of the answer to each request, so that it parses the next.
_STAND_IN = h11.Response(status_code=200, headers=[(b"content-length", b"0")])
#: The parsers a server may use: the module each needs.
PARSERS = {"httptools": "httptools", "h11": "h11"}

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
#: What h11 may hold of a head unparsed: more than the connection lets it be sent (which
#: answers it, 431) before it is whole.
_H11_BUFFER = 16 * _READ


def available(parser: str) -> bool:
    """Whether the module that ``parser`` (one of :data:`PARSERS`) needs is installed."""
    try:
        importlib.import_module(PARSERS[parser])
    except ImportError:
        return False
    return True


class _Date:
    """The ``date`` header line, made once a second."""

    __slots__ = ("line", "second")

    def __init__(self) -> None:
        self.second = 0
        self.line = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self.line


class _Message:
    """One request as the parser gives it: its head, then its body's chunks as they come."""

    __slots__ = (
        "body",
        "complete",
        "expect",
        "headed",
        "headers",
        "keep_alive",
        "method",
        "size",
        "too_large",
        "url",
        "version",
    )

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.too_large = False
        self.headed = False
        self.complete = False
        self.expect = False
        self.keep_alive = False
        self.method = "GET"
        self.version = "1.1"


class _Server:
    """What every connection of one server shares: the app, its lifespan state, the
    limits, and the connections open (which a shutdown closes)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        logger_name: str,
        stopping: trio.Event,
        max_head: int,
        idle_timeout: float,
        body_timeout: float,
        parser: str,
    ) -> None:
        self.app = app
        self.log = get_logger(logger_name)
        self.stopping = stopping
        self.max_head = max_head
        self.idle_timeout = idle_timeout
        self.body_timeout = body_timeout
        self.state: dict[str, Any] = {}
        self.wires: set[_Wire] = set()
        self.all_closed = trio.Event()
        self.date = _Date()
        self.parser_type: Any = _H11Parser
        self.parse_error: type[Exception] = _Malformed
        self.upgrade: type[Exception] = _NeverRaised
        if parser == "httptools":
            httptools: Any = importlib.import_module("httptools")
            self.parser_type = httptools.HttpRequestParser
            self.parse_error = httptools.HttpParserError
            self.upgrade = httptools.HttpParserUpgrade

    async def accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        """Take connections from ``listener`` until it closes, each served in ``nursery``."""
        while True:
            try:
                stream = await listener.accept()
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            except OSError as exc:  # out of descriptors, and the like: the peer is gone
                self.log.warning("cannot accept a connection", error=str(exc))
                await trio.sleep(0.1)
                continue
            nursery.start_soon(self.serve, stream)

    async def serve(self, stream: trio.SocketStream) -> None:
        """Serve one connection until it closes."""
        try:
            wire = _Wire(self, stream)
        except OSError:  # gone before it was served (its peer's address is no more)
            await stream.aclose()
            return
        self.wires.add(wire)
        try:
            await wire.run()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            self.log.error("an HTTP connection failed", exc_info=True)
        finally:
            self.wires.discard(wire)
            if self.stopping.is_set() and not self.wires:
                self.all_closed.set()
            await wire.close()

    def close_idle(self) -> None:
        """Close each connection that waits for a request (shutting down)."""
        for wire in self.wires:
            wire.waiting.cancel()
        if not self.wires:
            self.all_closed.set()


class _Wire:
    """One connection: its stream, its parser (whose callbacks are the ``on_*`` methods)
    and the requests parsed from it, served in order."""

    def __init__(self, server: _Server, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.parser = server.parser_type(self)
        self.messages: deque[_Message] = deque()
        #: the request being served
        self.exchange: _Exchange | None = None
        #: bytes read while waiting for a head
        self.unheaded = 0
        #: no more requests are taken: the client closed its side, or sent what does not
        #: parse (``broken``), or asked for an upgrade
        self.eof = False
        self.broken = False
        self.last = False
        self.reading = False
        self.waiting = trio.CancelScope()
        socket = stream.socket
        self.client = _address(socket.getpeername())
        self.local = _address(socket.getsockname())

    # -- the parser's callbacks ----------------------------------------------------------

    def on_message_begin(self) -> None:
        self.messages.append(_Message())

    def on_url(self, url: bytes) -> None:
        message = self.messages[-1]
        message.url += url
        message.size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        message = self.messages[-1]
        message.size += len(name) + len(value) + 4
        if len(message.headers) >= MAX_HEADERS:
            message.too_large = True
        elif not message.too_large:
            message.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        message = self.messages[-1]
        parser = self.parser
        method = parser.get_method()
        message.method = _METHODS.get(method) or method.decode("ascii")
        message.version = parser.get_http_version()
        message.keep_alive = parser.should_keep_alive()
        # request line: method, target and version, each with its separator or line end
        message.size += len(method) + 12 + 2
        if message.size > self.server.max_head:
            message.too_large = True
        for name, value in message.headers:
            if name == b"expect" and value.lower() == b"100-continue":
                message.expect = True
        message.headed = True

    def on_body(self, body: bytes) -> None:
        self.messages[-1].body.append(body)

    def on_message_complete(self) -> None:
        self.messages[-1].complete = True

    def feed(self, data: bytes) -> None:
        """Parse ``data``; what does not parse ends the requests taken (``broken``), after
        those parsed whole before it."""
        try:
            self.parser.feed_data(data)
        except self.server.upgrade:
            self.last = True  # served as a plain request; the rest is not read
        except self.server.parse_error:
            self.broken = True

    # -- the connection ------------------------------------------------------------------

    async def run(self) -> None:
        """Serve requests until the connection is to close."""
        server = self.server
        while True:
            message = await self.next_head()
            if message is None:
                return
            if message.too_large:
                await self.refuse(431, _TOO_LARGE)
                return
            exchange = _Exchange(self, message)
            self.exchange = exchange
            if not await exchange.serve():
                return
            self.messages.popleft()
            if self.last or server.stopping.is_set():
                return

    async def next_head(self) -> _Message | None:
        """The next request whose head is whole, or ``None`` when the connection is to
        close (after answering what cannot be served: a head too large, or that does not
        parse)."""
        messages = self.messages
        if messages and messages[0].headed:
            return messages[0]
        if self.last or self.eof:
            return None
        server = self.server
        self.unheaded = 0
        self.waiting = trio.CancelScope(deadline=trio.current_time() + server.idle_timeout)
        if server.stopping.is_set():
            return None
        with self.waiting:
            while not (messages and messages[0].headed):
                if self.broken:
                    await self.refuse(400, _MALFORMED)
                    return None
                if self.unheaded > server.max_head:
                    await self.refuse(431, _TOO_LARGE)
                    return None
                data = await self.stream.receive_some(_READ)
                if not data:
                    self.eof = True
                    return None
                self.unheaded += len(data)
                self.feed(data)
            return messages[0]
        return None  # too slow, or shutting down

    async def receive_more(self) -> bool:
        """Read and parse more of the connection; ``False`` when the client closed it."""
        self.reading = True
        try:
            data = await self.stream.receive_some(_READ)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        finally:
            self.reading = False
        if not data:
            self.eof = True
            if self.exchange is not None:
                self.exchange.end()
            return False
        self.feed(data)
        return True

    async def refuse(self, status: int, body: bytes) -> None:
        """Answer ``status`` with the JSON ``body`` ourselves; the connection then closes."""
        head = (
            _STATUS[status]
            + b"content-type: application/json\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\nconnection: close\r\n"
            + self.server.date()
            + b"\r\n"
        )
        await self.stream.send_all(head + body)

    async def close(self) -> None:
        """Close the connection, its client told first (its unread input drained a
        while, so that our last answer is not lost to a reset)."""
        stream = self.stream
        try:
            await stream.send_eof()
            if not self.eof and not self.server.stopping.is_set():
                with trio.move_on_after(_LINGER):
                    drained = 0
                    while drained < 16 * _READ and (data := await stream.receive_some(_READ)):
                        drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            pass
        finally:
            await stream.aclose()


class _Exchange:
    """One request and its answer: the ASGI ``receive`` and ``send`` the app is given."""

    __slots__ = (
        "chunked",
        "clock",
        "closing",
        "ended",
        "final",
        "finished",
        "head",
        "message",
        "sent_head",
        "started",
        "status",
        "wire",
    )

    def __init__(self, wire: _Wire, message: _Message) -> None:
        self.wire = wire
        self.message = message
        self.started = False
        self.finished = False
        self.final = False
        self.chunked = False
        self.closing = not message.keep_alive or wire.last
        self.status = 200
        self.head: list[tuple[bytes, bytes]] = []
        self.sent_head = False
        #: the body's deadline (``None``: it was whole before the app was called)
        self.clock: trio.CancelScope | None = None
        #: set when the answer is written, or the client gone, for a second reader
        self.ended: trio.Event | None = None

    async def serve(self) -> bool:
        """Have the app answer the request; whether the connection may take another."""
        wire, message = self.wire, self.message
        server = wire.server
        scope = self.scope()
        try:
            if message.complete:
                await server.app(scope, self.receive, self.send)
            else:
                self.clock = trio.CancelScope(deadline=trio.current_time() + server.body_timeout)
                with self.clock:
                    await server.app(scope, self.receive, self.send)
                if self.clock.cancelled_caught and not self.started:
                    said = f"the request's body did not arrive within {server.body_timeout:g} s"
                    await wire.refuse(408, b'{"error": "' + said.encode() + b'"}')
                    return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        except Exception:
            server.log.error("the HTTP app failed", exc_info=True)
            if not self.started:
                await wire.refuse(500, b'{"error": "internal error"}')
            return False
        if not self.started:
            await wire.refuse(500, b'{"error": "no answer"}')
            return False
        self.end()
        return self.finished and message.complete and not self.closing

    def scope(self) -> dict[str, Any]:
        """The request's ASGI scope."""
        wire, message = self.wire, self.message
        url = message.url
        if url[:1] == b"/":
            raw_path, _, query = url.partition(b"?")
        else:  # absolute form (a proxy's), or ``*``
            parts = urlsplit(url)
            raw_path, query = parts.path or b"/", parts.query
        path = raw_path.decode("latin-1")
        if "%" in path:
            path = unquote(path, encoding="latin-1")
        state = wire.server.state
        return {
            "type": "http",
            "asgi": _ASGI,
            "http_version": message.version,
            "method": message.method,
            "scheme": "http",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": message.headers,
            "client": wire.client,
            "server": wire.local,
            "state": state.copy() if state else {},
            "extensions": {},
        }

    async def receive(self) -> MutableMapping[str, Any]:
        """The request's body as it arrives; then, once the client goes or the answer is
        written, ``http.disconnect``."""
        wire, message = self.wire, self.message
        if wire.exchange is not self:
            return dict(_DISCONNECT)  # a request served already
        while True:
            if message.body or (message.complete and not self.final):
                body = message.body[0] if len(message.body) == 1 else b"".join(message.body)
                message.body.clear()
                if message.complete:
                    self.final = True
                    if self.clock is not None:
                        self.clock.deadline = math.inf
                return {"type": "http.request", "body": body, "more_body": not message.complete}
            if message.complete or wire.eof or wire.broken or wire.last:
                return await self.until_gone()
            if message.expect and not self.started:
                message.expect = False
                await wire.stream.send_all(_CONTINUE)
            if not await wire.receive_more():
                return dict(_DISCONNECT)

    async def until_gone(self) -> MutableMapping[str, Any]:
        """``http.disconnect`` once the client closes the connection or the answer is
        written; meanwhile at most one read of the next request is taken in."""
        wire = self.wire
        while not (self.finished or wire.eof):
            if wire.reading or len(wire.messages) > 1 or wire.broken or wire.last:
                if self.ended is None:
                    self.ended = trio.Event()
                await self.ended.wait()
                break
            if not await wire.receive_more():
                break
        return dict(_DISCONNECT)

    async def send(self, message: MutableMapping[str, Any]) -> None:
        """Write the app's answer."""
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the answer has started already")
            self.started = True
            self.status = message["status"]
            self.head = head = list(message.get("headers", ()))
            if self.clock is not None:
                self.clock.deadline = math.inf
            if not _whole(head):  # a stream: its head now, whenever its first event comes
                self.sent_head = True
                await self.write(self.head_bytes(b"", True))
            return
        if kind != "http.response.body":
            return
        if not self.started or self.finished:
            raise RuntimeError("no answer to send a body in")
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if self.sent_head:
            data = b""
        else:
            data = self.head_bytes(body, more)
            self.sent_head = True
        if self.message.method != "HEAD":
            if self.chunked:
                if body:
                    data += b"%x\r\n" % len(body) + body + b"\r\n"
                if not more:
                    data += b"0\r\n\r\n"
            else:
                data += body
        if not more:
            self.finished = True
        if data:
            await self.write(data)
        if not more:
            self.end()

    async def write(self, data: bytes) -> None:
        """Send ``data`` to the client, unless it is gone."""
        try:
            await self.wire.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.wire.eof = True
            self.closing = True

    def head_bytes(self, body: bytes, more: bool) -> bytes:
        """The answer's status line and headers, with its framing."""
        lines = [_STATUS.get(self.status) or b"HTTP/1.1 %d \r\n" % self.status]
        framed = False
        for name, value in self.head:
            if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name:
                raise RuntimeError("a response header with a line break")
            lowered = name.lower()
            if lowered == b"content-length" or lowered == b"transfer-encoding":
                framed = True
            elif lowered == b"connection" and b"close" in value.lower():
                self.closing = True
            lines.append(b"%s: %s\r\n" % (name, value))
        status = self.status
        if framed or status < 200 or status in (204, 304):
            pass
        elif not more:
            lines.append(b"content-length: %d\r\n" % len(body))
        elif self.message.version == "1.1":
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        else:
            self.closing = True  # its end is the connection's
        if self.closing or self.wire.server.stopping.is_set():
            self.closing = True
            lines.append(b"connection: close\r\n")
        elif self.message.version == "1.0":  # it asked to be kept: say it is
            lines.append(b"connection: keep-alive\r\n")
        lines.append(self.wire.server.date())
        lines.append(b"\r\n")
        return b"".join(lines)

    def end(self) -> None:
        """Wake a second reader: the answer is written, or the request is over."""
        if self.ended is not None:
            self.ended.set()


class _Malformed(Exception):
    """A request that does not parse (h11's, in httptools' stead)."""


class _NeverRaised(Exception):
    """h11's parser asks for no upgrade: it is never raised."""


class _H11Parser:
    """h11's parser behind what the connection uses of httptools' ``HttpRequestParser``:
    each request's events replayed as its callbacks. h11 answers nothing until our side
    has: each whole request is given a stand-in answer (whose bytes are dropped) so that
    it parses the next; HTTP/1.0 connections are not kept."""

    __slots__ = ("_callbacks", "_connection", "_keep_alive", "_method", "_version")

    def __init__(self, callbacks: Any) -> None:
        self._callbacks = callbacks
        # above the connection's own bound on a head, which is what answers it (431)
        self._connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_H11_BUFFER)
        self._method = b"GET"
        self._version = "1.1"
        self._keep_alive = True

    def get_method(self) -> bytes:
        return self._method

    def get_http_version(self) -> str:
        return self._version

    def should_keep_alive(self) -> bool:
        return self._keep_alive

    def feed_data(self, data: bytes) -> None:
        connection, callbacks = self._connection, self._callbacks
        connection.receive_data(data)
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as exc:
                raise _Malformed(str(exc)) from None
            if isinstance(event, h11.Data):
                callbacks.on_body(event.data)
            elif isinstance(event, h11.Request):
                self._head(event)
            elif isinstance(event, h11.EndOfMessage):
                callbacks.on_message_complete()
            elif event is h11.PAUSED:
                connection.send(_STAND_IN)
                connection.send(h11.EndOfMessage())
                if connection.our_state is not h11.DONE:
                    return  # the connection is to close: nothing more is parsed
                connection.start_next_cycle()
            else:  # NEED_DATA, or the client closed its side
                return

    def _head(self, request: h11.Request) -> None:
        callbacks = self._callbacks
        callbacks.on_message_begin()
        callbacks.on_url(request.target)
        keep_alive = request.http_version == b"1.1"
        lengths = 0
        for name, value in request.headers:
            callbacks.on_header(name, value)
            if name == b"connection" and b"close" in value.lower():
                keep_alive = False
            elif name == b"content-length" or name == b"transfer-encoding":
                lengths += 1 if name == b"content-length" else 2
        if lengths == 3:  # a body two servers could read two ways
            raise _Malformed("Content-Length with Transfer-Encoding")
        self._method = request.method
        self._version = request.http_version.decode()
        self._keep_alive = keep_alive
        callbacks.on_headers_complete()


def _whole(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether an answer with ``headers`` is sent whole at once, its head with its body: it
    has a ``Content-Length``, or is JSON. Any other (an event stream) may wait for its
    first event: its head is written at once."""
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-length":
            return True
        if lowered == b"content-type" and value.partition(b";")[0].strip() == b"application/json":
            return True  # (not JSON lines, a stream)
    return False


def _address(address: Any) -> tuple[str, int] | None:
    """An IP socket's address as ASGI gives it (``None`` for a Unix socket's)."""
    if isinstance(address, str | bytes):
        return None
    return (str(address[0]), int(address[1]))


async def _lifespan(
    app: ASGIApp,
    state: dict[str, Any],
    stop: trio.Event,
    log: Any,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The app's lifespan: started before any request, ended (``stop``) after the last.
    An app without one (it fails at once) is served without."""
    said_startup = False
    started = False

    async def receive() -> dict[str, Any]:
        nonlocal said_startup
        if not said_startup:
            said_startup = True
            return {"type": "lifespan.startup"}
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal started
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            started = True
            task_status.started()
        elif kind == "lifespan.startup.failed":
            raise RuntimeError(f"the app did not start: {message.get('message', '')}")

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
    try:
        await app(scope, receive, send)
    except Exception:
        if started:
            raise
        log.warning("the HTTP app has no lifespan", exc_info=True)
        task_status.started()
        return
    if not started:
        task_status.started()


async def serve_wire(
    app: ASGIApp,
    sockets: Sequence[Any],
    *,
    logger_name: str,
    stopping: trio.Event | None = None,
    max_head: int,
    idle_timeout: float,
    graceful_timeout: float,
    body_timeout: float,
    parser: str = "httptools",
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* on *sockets* (listening stdlib sockets, which the caller closes) until
    cancelled; start it with ``nursery.start``, which returns once it serves. The
    arguments are :func:`~supervisor._serving.serve_sockets`' (with the limits the module
    docstring says), and so is the shutdown: bounded by *graceful_timeout* and
    :data:`~supervisor._serving.SHUTDOWN_MARGIN`. *parser* is one of :data:`PARSERS`."""
    stopping = trio.Event() if stopping is None else stopping
    server = _Server(
        app,
        logger_name=logger_name,
        stopping=stopping,
        max_head=max_head,
        idle_timeout=idle_timeout,
        body_timeout=body_timeout,
        parser=parser,
    )
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(partial(_serve, server, sockets, graceful_timeout, scope))
            task_status.started()
            await trio.sleep_forever()
        finally:
            stopping.set()
            scope.deadline = min(
                scope.deadline, trio.current_time() + graceful_timeout + SHUTDOWN_MARGIN
            )


async def _serve(
    server: _Server,
    sockets: Sequence[Any],
    graceful_timeout: float,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None],
) -> None:
    """The lifespan, then the listeners, in *scope* (shielded once serving) until
    *stopping*; then the graceful shutdown."""
    with scope:
        stop = trio.Event()
        async with trio.open_nursery() as life:
            await life.start(partial(_lifespan, server.app, server.state, stop, server.log))
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in sockets]
            async with trio.open_nursery() as connections:
                for listener in listeners:
                    connections.start_soon(server.accept, listener, connections)
                scope.shield = True
                task_status.started()
                await server.stopping.wait()
                for listener in listeners:
                    await listener.aclose()
                server.close_idle()
                with trio.move_on_after(graceful_timeout):
                    await server.all_closed.wait()
                connections.cancel_scope.cancel()
            stop.set()
