"""What the HTTP gateway's own server (:mod:`._wire_front`) makes of a connection's bytes:
its requests, each a :class:`_Message` (its head, then its body's chunks as they come),
parsed by httptools' C parser or by h11's behind the same callbacks (:class:`_H11Parser`).

A head's size is counted as it is parsed (request line and fields), and a head over the
server's bound, or with more than :data:`MAX_HEADERS` fields, is marked ``too_large``
(the connection answers it ``431``); what does not parse ends the requests taken
(``broken``: ``400``), and an ``Upgrade`` is served as a plain request, the last one.
"""

from __future__ import annotations

import importlib
from collections import deque
from typing import Any

import h11

__all__ = ["MAX_HEADERS", "PARSERS", "available"]

#: The most header fields a request may have: ``431`` beyond.
MAX_HEADERS = 100
#: Bytes read from a connection at a time.
READ = 65536
#: The parsers a server may use: the module each needs.
PARSERS = {"httptools": "httptools", "h11": "h11"}
_METHODS = {m: m.decode() for m in (b"GET", b"POST", b"DELETE", b"PUT", b"HEAD", b"OPTIONS")}
#: What h11 is told of the answer to each request, so that it parses the next.
_STAND_IN = h11.Response(status_code=200, headers=[(b"content-length", b"0")])
#: What h11 may hold of a head unparsed: more than the connection lets it be sent (which
#: answers it, 431) before it is whole.
_H11_BUFFER = 16 * READ


def available(parser: str) -> bool:
    """Whether the module that ``parser`` (one of :data:`PARSERS`) needs is installed."""
    try:
        importlib.import_module(PARSERS[parser])
    except ImportError:
        return False
    return True


class Parsing:
    """The parser named ``parser`` (one of :data:`PARSERS`): its type, and the errors it
    raises for what does not parse and for an upgrade."""

    __slots__ = ("error", "parser_type", "upgrade")

    def __init__(self, parser: str) -> None:
        self.parser_type: Any = _H11Parser
        self.error: type[Exception] = _Malformed
        self.upgrade: type[Exception] = _NeverRaised
        if parser == "httptools":
            httptools: Any = importlib.import_module("httptools")
            self.parser_type = httptools.HttpRequestParser
            self.error = httptools.HttpParserError
            self.upgrade = httptools.HttpParserUpgrade


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
        "names",
        "size",
        "too_large",
        "url",
        "values",
        "version",
    )

    def __init__(self) -> None:
        self.url = b""
        #: its header fields, names lowered, once its head is whole (``names`` and
        #: ``values`` as they come until then; over :data:`MAX_HEADERS` of them, it is
        #: ``too_large``)
        self.headers: list[tuple[bytes, bytes]] = []
        self.names: list[bytes] = []
        self.values: list[bytes] = []
        self.body: list[bytes] = []
        self.size = 0
        self.too_large = False
        self.headed = False
        self.complete = False
        self.expect = False
        self.keep_alive = False
        self.method = "GET"
        self.version = "1.1"


class Parsed:
    """A connection's requests as its parser gives them (whose callbacks are the ``on_*``
    methods), in order; heads over ``max_head`` bytes marked ``too_large``."""

    def __init__(self, parsing: Parsing, max_head: int) -> None:
        self.parsing = parsing
        self.max_head = max_head
        self.parser = parsing.parser_type(self)
        self.messages: deque[_Message] = deque()
        #: the header names and values of the request being parsed (its ``_Message``'s)
        self.names: list[bytes] = []
        self.values: list[bytes] = []
        #: no more requests are taken: the client sent what does not parse (``broken``),
        #: or asked for an upgrade (``last``)
        self.broken = False
        self.last = False

    # -- the parser's callbacks ----------------------------------------------------------

    def on_message_begin(self) -> None:
        message = _Message()
        self.messages.append(message)
        self.names = message.names
        self.values = message.values

    def on_url(self, url: bytes) -> None:
        message = self.messages[-1]
        message.url += url
        message.size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        # (called for each field: as little as it can be; the head is sized, its fields
        # counted and its names lowered once it is whole. Until then the fields are
        # those of what the connection has read, which stops past the head's bound.)
        self.names.append(name)
        self.values.append(value)

    def on_headers_complete(self) -> None:
        message = self.messages[-1]
        parser = self.parser
        method = parser.get_method()
        message.method = _METHODS.get(method) or method.decode("ascii")
        message.version = parser.get_http_version()
        message.keep_alive = parser.should_keep_alive()
        names, values = message.names, message.values
        # request line: method, target and version, each with its separator or line end;
        # each field: its name, ``: `` and its line end
        message.size += (
            len(method) + 12 + 2 + sum(map(len, names)) + sum(map(len, values)) + 4 * len(names)
        )
        if message.size > self.max_head or len(names) > MAX_HEADERS:
            message.too_large = True
        names = list(map(bytes.lower, names))
        message.headers = list(zip(names, values, strict=True))
        if b"expect" in names:
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
        except self.parsing.upgrade:
            self.last = True  # served as a plain request; the rest is not read
        except self.parsing.error:
            self.broken = True


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
