"""One request of the HTTP gateway's own server (:mod:`._wire_front`) and its answer:
the ASGI scope, ``receive`` and ``send`` the app is given (:class:`_Exchange`), the body
handed over as it arrives within its time, ``Expect: 100-continue`` answered when the
app first asks for the body, ``http.disconnect`` once the client goes or the answer is
written, and the answer framed and written (its head with its body, in one write, when
it is whole).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote, urlsplit

import trio

from ._wire_conn import STATUS, _Wire
from ._wire_parse import _Message

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT = {"type": "http.disconnect"}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: The ASGI extension (in ``scope["extensions"]``) by which an app learns of a client
#: gone before its answer is written, with no task of its own, and writes a whole JSON
#: answer in one step. Its value is the request's :class:`_Exchange`: its ``watch``, given
#: a :class:`trio.CancelScope`, has that scope cancelled then; its ``cancel``, called
#: with nothing, has the app's call itself cancelled then (the connection is closed, with
#: no answer), with no scope of the request's own; its ``whole_body(limit)`` is the
#: request's body when it is all there (``None`` when not: ``receive`` then gives it);
#: its ``answer(status, body)`` answers
#: ``status`` with the JSON ``body`` as ``send``'s two messages would (an
#: ``application/json`` head), their steps skipped.
GONE = "supervisor.gone"
#: Distinct answer headers whose head lines are kept (past that, it forgets them all).
_HEADS = 256


class _Exchange:
    """One request and its answer: the ASGI ``receive`` and ``send`` the app is given."""

    __slots__ = (
        "chunked",
        "cancels",
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
        "watchers",
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
        self.head = _NO_HEADERS
        self.sent_head = False
        #: whether the client's going cancels the app's call (the :data:`GONE` ``cancel``)
        self.cancels = False
        #: the body's deadline (``None``: it was whole before the app was called)
        self.clock: trio.CancelScope | None = None
        #: set when the answer is written, or the client gone, for a second reader
        self.ended: trio.Event | None = None
        #: cancelled when the client goes before the answer is written (:meth:`watch`)
        self.watchers: list[trio.CancelScope] | None = None

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
        if self.ended is not None:  # (:meth:`end`)
            self.ended.set()
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
            "extensions": {GONE: self},
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
            await wire.more_body()

    def whole_body(self, limit: int) -> bytes | None:
        """The request's body, if it is all there, not given yet and at most ``limit``
        bytes: given as ``receive`` would give it (which then says ``http.disconnect``);
        else ``None``, and ``receive`` gives it (the :data:`GONE` extension's)."""
        message = self.message
        if not message.complete or self.final or self.wire.exchange is not self:
            return None
        chunks = message.body
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(body) > limit:
            return None
        chunks.clear()
        self.final = True
        if self.clock is not None:
            self.clock.deadline = math.inf
        return body

    async def until_gone(self) -> MutableMapping[str, Any]:
        """``http.disconnect`` once the client closes the connection or the answer is
        written."""
        if not (self.finished or self.wire.eof):
            if self.ended is None:
                self.ended = trio.Event()
            await self.ended.wait()
        return dict(_DISCONNECT)

    def watch(self, cancel_scope: trio.CancelScope) -> None:
        """Have ``cancel_scope`` cancelled when the client goes before the answer is
        written (at once if it is gone): the :data:`GONE` extension's ``watch``."""
        if self.wire.eof:
            cancel_scope.cancel()
        elif self.watchers is None:
            self.watchers = [cancel_scope]
        else:
            self.watchers.append(cancel_scope)

    def cancel(self) -> None:
        """Have the app's call cancelled when the client goes before the answer is
        written (at once if it is gone): the :data:`GONE` extension's ``cancel``. What
        is cancelled is the connection's serving (its ``waiting`` scope), which the
        connection needs no more then."""
        if self.wire.eof:
            self.wire.waiting.cancel()
        else:
            self.cancels = True

    def gone(self) -> None:
        """The client closed the connection (or it broke): what waits for it is told,
        and what watches for it cancelled, if the answer is not all written."""
        self.end()
        if self.finished:
            return
        if self.cancels:
            self.wire.waiting.cancel()
        if self.watchers is not None:
            for cancel_scope in self.watchers:
                cancel_scope.cancel()

    async def send(self, message: MutableMapping[str, Any]) -> None:
        """Write the app's answer."""
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the answer has started already")
            self.started = True
            self.status = message["status"]
            self.head = head = _head(message.get("headers", ()))
            if self.clock is not None:
                self.clock.deadline = math.inf
            if not head.whole:  # a stream: its head now, whenever its first event comes
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

    async def answer(self, status: int, body: bytes) -> None:
        """Answer ``status`` with the JSON ``body``, whole, in one write: what ``send``'s
        ``http.response.start`` with an ``application/json`` head and one
        ``http.response.body`` do (the :data:`GONE` extension's ``answer``)."""
        if self.started:
            raise RuntimeError("the answer has started already")
        self.started = self.sent_head = self.finished = True
        self.status = status
        self.head = _JSON_HEAD
        if self.clock is not None:
            self.clock.deadline = math.inf
        data = self.head_bytes(body, False)
        try:  # (:meth:`write`'s)
            await self.wire.send(data if self.message.method == "HEAD" else data + body)
        except OSError:
            self.wire.eof = True
            self.closing = True
        if self.ended is not None:  # (:meth:`end`)
            self.ended.set()

    async def write(self, data: bytes) -> None:
        """Send ``data`` to the client, unless it is gone."""
        try:
            await self.wire.send(data)
        except OSError:
            self.wire.eof = True
            self.closing = True

    def head_bytes(self, body: bytes, more: bool) -> bytes:
        """The answer's status line and headers, with its framing."""
        head = self.head
        status = self.status
        lines = (STATUS.get(status) or b"HTTP/1.1 %d \r\n" % status) + head.lines
        if head.closes:
            self.closing = True
        if head.framed or status < 200 or status in (204, 304):
            pass
        elif not more:
            lines += b"content-length: %d\r\n" % len(body)
        elif self.message.version == "1.1":
            self.chunked = True
            lines += b"transfer-encoding: chunked\r\n"
        else:
            self.closing = True  # its end is the connection's
        # (a body not all read yet is not read after the answer: the connection closes)
        server = self.wire.server
        if self.closing or not self.message.complete or server.stopping.is_set():
            self.closing = True
            lines += b"connection: close\r\n"
        elif self.message.version == "1.0":  # it asked to be kept: say it is
            lines += b"connection: keep-alive\r\n"
        return lines + server.date() + b"\r\n"

    def end(self) -> None:
        """Wake a second reader: the answer is written, or the request is over."""
        if self.ended is not None:
            self.ended.set()


class _Head:
    """What an answer's headers (as the app gives them) make of its head: their lines,
    and whether they frame its body (``Content-Length`` or ``Transfer-Encoding``), say
    ``Connection: close``, and have it sent whole at once, its head with its body
    (``whole``: a ``Content-Length``, or JSON; any other — an event stream — may wait
    for its first event: its head is written at once). A header carrying a line break
    is refused (:class:`RuntimeError`)."""

    __slots__ = ("closes", "framed", "lines", "whole")

    def __init__(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        lines = []
        self.framed = self.closes = self.whole = False
        for name, value in headers:
            if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name:
                raise RuntimeError("a response header with a line break")
            lowered = name.lower()
            if lowered == b"content-length":
                self.framed = self.whole = True
            elif lowered == b"transfer-encoding":
                self.framed = True
            elif lowered == b"connection" and b"close" in value.lower():
                self.closes = True
            elif lowered == b"content-type":
                if value.partition(b";")[0].strip() == b"application/json":
                    self.whole = True  # (not JSON lines, a stream)
            lines.append(b"%s: %s\r\n" % (name, value))
        self.lines = b"".join(lines)


_NO_HEADERS = _Head(())
_JSON_HEAD = _Head(((b"content-type", b"application/json"),))


#: each distinct answer headers' :class:`_Head` (:data:`_HEADS` of them)
_KEPT: dict[tuple[tuple[bytes, bytes], ...], _Head] = {}


def _head(headers: Iterable[tuple[bytes, bytes]]) -> _Head:
    """The :class:`_Head` of an answer's ``headers``: kept for each distinct headers, as
    most answers have the same."""
    key = tuple(headers)
    try:
        made = _KEPT.get(key)
    except TypeError:  # (an unhashable header: a list)
        return _Head(key)
    if made is None:
        made = _Head(key)
        if len(_KEPT) >= _HEADS:
            _KEPT.clear()
        _KEPT[key] = made
    return made
