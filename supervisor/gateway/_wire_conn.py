"""A connection of the HTTP gateway's own server (:mod:`._wire_front`): what every
connection of one server shares (:class:`_Server`: the app, the limits, the connections
open), and one connection (:class:`_Wire`): its requests read, parsed
(:mod:`._wire_parse`) and served in order, each by an exchange (:mod:`._wire_exchange`'s
``_Exchange``); heads bounded in size and time, the connection's close.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Protocol

import trio

from ..log import get_logger
from ._wire_parse import READ, Parsed, Parsing, _Message

#: Seconds a closing connection's unread input is drained, so that the answer is not lost
#: to a reset.
_LINGER = 1.0
STATUS = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}
#: Reads taken at once one after another, at most, before the others' turn.
_STREAK = 16
#: Answers the server gives itself: a head too large, one that does not parse.
_TOO_LARGE = b'{"error": "request head too large"}'
_MALFORMED = b'{"error": "malformed request"}'

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


class Exchange(Protocol):
    """One request being served on a connection (:mod:`._wire_exchange`'s ``_Exchange``)."""

    async def serve(self) -> bool:
        """Have the app answer the request; whether the connection may take another."""
        ...

    def gone(self) -> None:
        """The client closed the connection (or it broke)."""
        ...


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
        exchange: Callable[[_Wire, _Message], Exchange],
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
        #: set when a connection opens (:meth:`sweep` waits for one)
        self.opened = trio.Event()
        self.date = _Date()
        self.parsing = Parsing(parser)
        #: what serves each request
        self.exchange = exchange

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
        self.opened.set()
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
            if wire.heading:
                wire.waiting.cancel()
        if not self.wires:
            self.all_closed.set()

    async def sweep(self) -> None:
        """Close each connection whose head is late (*idle_timeout*), a quarter of that
        time after at most: one timer for them all, none per request."""
        while True:
            if not self.wires:
                self.opened = trio.Event()
                await self.opened.wait()
            await trio.sleep(self.idle_timeout / 4)
            now = trio.current_time()
            for wire in self.wires:
                if wire.heading and now >= wire.deadline:
                    wire.waiting.cancel()


class _Wire(Parsed):
    """One connection: its stream, and the requests parsed from it, served in order.

    Two tasks: one reads and parses the connection while reading is wanted
    (:meth:`wanting`), the other serves its requests one after another. The reader
    reads a head as it comes, a body as it comes (one read ahead of the app at most),
    and while a request whose body is whole is served, at most one read of the next (no
    more until its answer is written): so it learns at once of a client that goes with
    its answer pending, and tells the exchange (``gone``), with no task of the
    request's own."""

    def __init__(self, server: _Server, stream: trio.SocketStream) -> None:
        super().__init__(server.parsing, server.max_head)
        self.server = server
        self.stream = stream
        #: the request being served
        self.exchange: Exchange | None = None
        #: bytes read since a head was first waited for
        self.unheaded = 0
        #: no more requests are taken: the client closed its side
        self.eof = False
        #: the reader's wait for reading to be wanted, and the server's for what it reads
        self.wanted = trio.lowlevel.ParkingLot()
        #: whether the reader waits in ``wanted`` (rarely: it most often waits on the
        #: socket, and then needs no waking)
        self.parked = False
        self.arrived = trio.lowlevel.ParkingLot()
        #: cancelled when the connection waits for a head too long, or is idle when the
        #: server stops: it closes
        self.waiting = trio.CancelScope()
        #: whether it waits for a head (:meth:`next_head`), and until when
        self.heading = False
        self.deadline = math.inf
        socket = stream.socket
        #: the socket's descriptor, which :meth:`read` and :meth:`send` use
        self.fd = socket.fileno()
        self.client = _address(socket.getpeername())
        self.local = _address(socket.getsockname())

    # -- the connection ------------------------------------------------------------------

    async def run(self) -> None:
        """Serve requests until the connection is to close (or waits too long for one:
        ``waiting`` cancelled), reading them meanwhile."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.read)
            with self.waiting:
                await self.serve_all()
            nursery.cancel_scope.cancel()

    async def serve_all(self) -> None:
        """Serve requests, one after another, until the connection is to close."""
        server = self.server
        while True:
            message = await self.next_head()
            if message is None:
                return
            if message.too_large:
                await self.refuse(431, _TOO_LARGE)
                return
            exchange = server.exchange(self, message)
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
        if server.stopping.is_set():
            return None
        self.unheaded = 0
        self.deadline = trio.current_time() + server.idle_timeout
        self.heading = True  # (too slow, or shutting down: ``waiting`` is cancelled)
        if self.parked:  # (the reader stops after a read ahead)
            self.wanted.unpark_all()
        try:
            while not (messages and messages[0].headed):
                if self.broken:
                    await self.refuse(400, _MALFORMED)
                    return None
                if self.unheaded > server.max_head:
                    await self.refuse(431, _TOO_LARGE)
                    return None
                if self.eof:
                    return None
                await self.arrived.park()
            return messages[0]
        finally:
            self.heading = False

    async def more_body(self) -> None:
        """Wait for more of the body of the request served (or for the client to go)."""
        if self.parked:
            self.wanted.unpark_all()
        await self.arrived.park()

    def wanting(self) -> bool:
        """Whether the reader is to read: a head is not whole yet (and not over the
        bound), a body is not (and none of it waits for the app: at most one read
        ahead of it), or a request whose body is whole is served and nothing of the
        next is read yet."""
        if self.eof or self.broken or self.last:
            return False
        messages = self.messages
        if not messages or not messages[0].headed:
            return self.unheaded <= self.max_head
        if not messages[0].complete:
            return not messages[0].body
        return len(messages) == 1

    async def read(self) -> None:
        """Read and parse the connection while reading is wanted, until the client
        closes it (or it breaks); each read told to the server, the client's going to
        the exchange served. A read the socket has ready is taken at once, not after a
        round of trio's scheduler (one in :data:`_STREAK` is) — except after a read that
        ended a request, whose client is most likely waiting for its answer: then the
        socket is waited on first, which saves a read that finds nothing."""
        fd, wanted, arrived, messages = self.fd, self.wanted, self.arrived, self.messages
        streak = 0
        ended = False
        while True:
            if not self.wanting():
                self.parked = True
                try:
                    await wanted.park()
                finally:
                    self.parked = False
                streak = 0
                continue
            if ended:
                ended = False
                await trio.lowlevel.wait_readable(fd)
                streak = 0
                continue
            if streak >= _STREAK:  # the others' turn
                await trio.lowlevel.checkpoint()
                streak = 0
            try:
                data = os.read(fd, READ)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                streak = 0
                continue
            except OSError:  # reset
                data = b""
            if not data:
                self.eof = True
                if self.exchange is not None:
                    self.exchange.gone()
                arrived.unpark_all()
                return
            streak += 1
            self.unheaded += len(data)
            self.feed(data)
            ended = bool(messages) and messages[-1].complete
            arrived.unpark_all()

    async def send(self, data: bytes) -> None:
        """Write ``data`` whole: at once as far as the socket takes it (not after a round
        of trio's scheduler), the rest as it drains; :class:`OSError` when the client is
        gone."""
        fd = self.fd
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)

    async def refuse(self, status: int, body: bytes) -> None:
        """Answer ``status`` with the JSON ``body`` ourselves; the connection then closes."""
        head = (
            STATUS[status]
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
                    while drained < 16 * READ and (data := await stream.receive_some(READ)):
                        drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            pass
        finally:
            await stream.aclose()


def _address(address: Any) -> tuple[str, int] | None:
    """An IP socket's address as ASGI gives it (``None`` for a Unix socket's)."""
    if isinstance(address, str | bytes):
        return None
    return (str(address[0]), int(address[1]))
