"""What a remote server sends over HTTP, bounded before anything parses it.

The SDK's Streamable HTTP and legacy SSE clients read a JSON answer whole
(``response.aread()``) and an event stream event by event. :class:`BoundedTransport`, the
``httpx2`` transport under them, hands them each body and each event only once it is
known to be within the server's limits — ``maxMessageBytes``, and the catalog limits for
a listing's page — and never holds more than about the limit of one:

- a body that is not an event stream (a JSON answer) is read up to the limit; past it,
  the rest is read and dropped, counting its bytes (and not read at all when its
  ``Content-Length`` already says so). The client is handed, in its place, the JSON-RPC
  error :func:`~._oversize.too_large` for the request the POST carried: that request
  fails (a call with :class:`~supervisor.errors.ResultTooLarge`), the connection stays.
- an event stream is cut into events as the SSE reader cuts them (lines end in CRLF, LF
  or CR; an event ends at an empty line), and each is handed on whole once its end has
  come, as UTF-8 (what the reader will decode it as). An event over the limit is read
  past the same way: if it was a response (its id found at either end) the client is
  handed an event carrying that error instead, for the request the stream answers; else
  it is only logged. The stream goes on.
- a page answering a listing, within the size limit, is shown to the connection's
  :class:`~._pages.PageGuard` first: over the catalog limits, the client is handed that
  listing's error instead (:class:`~supervisor.errors.CatalogTooLarge`), unparsed.

Requests ask for no content coding (``Accept-Encoding: identity``): a compressed answer
could be any size once inflated, so one that comes encoded all the same is not read; its
request gets a JSON-RPC parse error instead.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import httpx2
import mcp_types as types
import msgspec

from .._util._printable import printable
from ..config._limits import Limits
from ..log import get_logger
from ._oversize import Skipped, too_large
from ._pages import ANY, PageGuard, refusal_json

log = get_logger("supervisor.transports")

#: The most one legacy SSE event may hold: the SDK's SSE client reads its stream with
#: this bound (``sse_within_origin``'s default), and a larger event ends the connection.
SSE_EVENT_BYTES = 2**20

_EVENT_STREAM = "text/event-stream"
#: Lines of an event stream end in CRLF, LF or CR.
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: About what the HTTP client reads at a time.
_READ_CHUNK = 65536


class _Sent(msgspec.Struct):
    """A POST's message, as far as its answer needs: a request has a method and an id."""

    id: int | str | None = None
    method: str | None = None


_sent = msgspec.json.Decoder(_Sent)


class Layer(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport over another, ``inner``: entering, leaving and closing it
    enter, leave and close ``inner``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc_value, traceback)

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(Layer):
    """An ``httpx2`` transport that bounds every answer of ``inner`` (see the module):
    each body and event at most ``max_message_bytes``, each listing's page within
    ``pages``. ``server`` names the server in the log; with ``sse_event`` the limit is the
    bound of a legacy SSE event, not ``maxMessageBytes``, and the errors say so. Entering
    and leaving it enter and leave ``inner``."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        *,
        server: str,
        max_message_bytes: int,
        pages: PageGuard,
        sse_event: bool = False,
    ) -> None:
        super().__init__(inner)
        self.server = server
        self.limit = max_message_bytes
        self.pages = pages
        self.sse_event = sse_event

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["accept-encoding"] = "identity"
        request_id: int | str | None = None  # the request a POST carries, if it does
        if request.method == "POST":
            try:
                sent: _Sent | None = _sent.decode(await request.aread())
            except msgspec.DecodeError:
                sent = None  # not one message of ours
            if sent is not None and sent.method is not None and sent.id is not None:
                request_id = sent.id
                self.pages.sent(sent.method, sent.id)
        response = await self._inner.handle_async_request(request)
        inner = response.stream
        assert isinstance(inner, httpx2.AsyncByteStream)
        headers = response.headers
        coding = headers.get("content-encoding", "").strip().lower()
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if coding not in ("", "identity"):
            del headers["content-encoding"]
            response.stream = _Instead(inner, self._encoded(coding, request_id, media))
        elif media == _EVENT_STREAM:
            headers["content-type"] = f"{_EVENT_STREAM}; charset=utf-8"
            # A response on a stream resumed (Last-Event-ID) is the SDK's for the request
            # it resumes, whatever id it names: which one, only the SDK knows.
            resumed = request_id is None and "last-event-id" in request.headers
            response.stream = _Events(inner, self, request_id, ANY if resumed else request_id)
        else:
            response.stream = _Body(inner, self, request_id, _length(headers))
        return response

    def checked(self, message: memoryview | bytes, answering: object = None) -> bytes | None:
        """A listing's page over the catalog limits: the error to hand on instead."""
        if not self.pages.waiting:
            return None
        refused = self.pages.check(message, answering=answering)
        return None if refused is None else refusal_json(refused, server=self.server)

    def too_large(self, skipped: Skipped | int, request_id: int | str | None) -> bytes | None:
        """A message of ``skipped`` bytes was read past: the error for ``request_id`` (the
        request it answered, if known) to hand on instead, logged."""
        size = skipped if isinstance(skipped, int) else skipped.size
        log.warning(
            "message over maxMessageBytes skipped",
            server=self.server,
            size=size,
            limit=self.limit,
            request_id=request_id,
        )
        if request_id is None:
            return None
        return _error(request_id, too_large(size, self.limit, sse_event=self.sse_event))

    def _encoded(self, coding: str, request_id: int | str | None, media: str) -> bytes:
        log.warning(
            "an encoded answer was dropped unread (none was asked for)",
            server=self.server,
            coding=printable(coding[:40]),
            request_id=request_id,
        )
        if request_id is None:
            return b""
        error = types.ErrorData(
            code=types.PARSE_ERROR,
            message="the answer came compressed (Content-Encoding), though none was asked "
            "for (Accept-Encoding: identity); it was dropped unread",
        )
        answer = _error(request_id, error)
        return _event(answer) if media == _EVENT_STREAM else answer


def bounded(
    inner: httpx2.AsyncBaseTransport,
    limits: Limits | None,
    server: str,
    *,
    max_message_bytes: int | None = None,
    sse_event: bool = False,
) -> BoundedTransport:
    """``inner`` with what it receives bounded by ``limits`` (the defaults without): each
    body and event by their ``max_message_bytes`` (or by ``max_message_bytes``, if
    given), listing pages by their catalog limits; see :class:`BoundedTransport`."""
    limits = limits or Limits()
    pages = PageGuard(max_items=limits.max_tools_per_server, max_bytes=limits.max_catalog_bytes)
    return BoundedTransport(
        inner,
        server=server,
        max_message_bytes=max_message_bytes or limits.max_message_bytes,
        pages=pages,
        sse_event=sse_event,
    )


class _Body(httpx2.AsyncByteStream):
    """A body that is not an event stream: handed on whole once it is within the limit,
    else the error for ``request_id`` in its place (see the module)."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        owner: BoundedTransport,
        request_id: int | str | None,
        declared: int | None,
    ) -> None:
        self._inner = inner
        self._owner = owner
        self._request_id = request_id
        self._declared = declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        owner = self._owner
        limit = owner.limit
        if self._declared is not None and self._declared > limit:
            instead = owner.too_large(self._declared, self._request_id)  # not read at all
            if instead:
                yield instead
            return
        body = bytearray()
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size <= limit:
                body += chunk
            elif body:
                body = bytearray()  # over the limit: the rest is read past, nothing kept
        if size > limit:
            instead = owner.too_large(size, self._request_id)
            if instead:
                yield instead
            return
        with memoryview(body) as view:
            refused = owner.checked(view)
        if refused is not None:
            yield refused
        elif body:
            handed, body = bytes(body), bytearray()
            yield handed

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Events(httpx2.AsyncByteStream):
    """An event stream handed on event by event, each within the limit (see the module).

    ``request_id`` is the request whose answer the stream carries (a POST's), if any;
    ``answering`` is what a listing's page on it answers (see
    :meth:`~._pages.PageGuard.check`).
    """

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        owner: BoundedTransport,
        request_id: int | str | None,
        answering: object,
    ) -> None:
        self._inner = inner
        self._owner = owner
        self._request_id = request_id
        self._answering = answering

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._owner.limit
        ends = _EventEnds()
        buffer = bytearray()  # the event being read
        skipping: Skipped | None = None  # an event over the limit, being read past
        async for chunk in self._inner:
            if skipping is not None:
                piece = b"\r" + chunk if ends.held else chunk  # the CR held back, read now
                end = ends.find(piece, 0)
                with memoryview(piece) as view:
                    if end < 0:
                        skipping.add(view[: len(piece) - ends.held])
                        continue
                    skipping.add(view[:end])
                    buffer += view[end:]
                if instead := self._skipped(skipping):
                    yield instead
                skipping, start = None, 0
            else:
                start = len(buffer) - ends.held
                buffer += chunk
            taken = 0
            while (end := ends.find(buffer, start)) >= 0:
                with memoryview(buffer) as view:
                    handed = self._event(view[taken:end])
                if handed:
                    yield handed
                del handed
                taken = start = end
            del buffer[:taken]
            if len(buffer) > limit:
                with memoryview(buffer) as view:
                    skipping = Skipped(view[: len(buffer) - ends.held])
                buffer = bytearray()
            elif buffer.__alloc__() > 2 * _READ_CHUNK and len(buffer) <= _READ_CHUNK:
                buffer = bytearray(buffer)  # a long event was read: give its room back
        if skipping is not None:
            skipping.add(b"\r" if ends.held else b"")
            if instead := self._skipped(skipping):
                yield instead  # a stream that ended inside it: its end is the event's
        elif ends.held and (end := ends.find(buffer, len(buffer) - 1, last=True)) >= 0:
            if handed := self._event(bytes(buffer[:end])):
                yield handed  # its empty line ended in the stream's last byte, a CR
        # An event the stream ended inside is never dispatched by the SSE reader: dropped.

    def _event(self, event: memoryview | bytes) -> bytes | None:
        """What to hand on for one whole event (a view of the buffer, not kept)."""
        owner = self._owner
        if len(event) > owner.limit:
            return self._skipped(Skipped(event))
        if owner.pages.waiting:  # measured as sent (msgspec skips the items unread)
            data = _message_data(event)
            refused = None if data is None else owner.checked(data, self._answering)
            del data
            if refused is not None:
                return _event(refused, _id_line(event))
        try:
            str(event, "utf-8")  # valid: handed on as it is
        except UnicodeDecodeError:
            event = str(event, "utf-8", "replace").encode()  # as the reader will read it
            if len(event) > owner.limit:
                return self._skipped(Skipped(event))
        return bytes(event)

    def _skipped(self, skipped: Skipped) -> bytes | None:
        found = skipped.response_id(start=b"data:")
        # On a request's own stream the SDK takes any response for that request's.
        request_id = found if found is None or self._request_id is None else self._request_id
        instead = self._owner.too_large(skipped, request_id)
        return None if instead is None else _event(instead, _id_line(skipped.head))

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Instead(httpx2.AsyncByteStream):
    """``body`` in place of what ``inner`` holds, which is never read (only closed)."""

    def __init__(self, inner: httpx2.AsyncByteStream, body: bytes) -> None:
        self._inner = inner
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EventEnds:
    """Where the events of a stream read piece by piece end: at an empty line, lines
    ending in CRLF, LF or CR. A CR that ends a piece may be the first half of a CRLF: it
    is ``held`` — not read until what follows has come (the caller hands it back)."""

    def __init__(self) -> None:
        self._blank = True  # nothing read yet of the line being read
        self.held = False

    def find(self, data: bytes | bytearray, start: int, *, last: bool = False) -> int:
        """Where in ``data``, read on from ``start`` (the first byte not yet read), the
        next event ends (past its empty line), or -1 if it does not (``last``: nothing
        follows ``data``, a CR ending it is a line end)."""
        at = start
        self.held = False
        for found in _LINE_END.finditer(data, at):
            if found.start() > at:
                self._blank = False
            if not last and found.end() == len(data) and found.group() == b"\r":
                self.held = True  # a CR alone at the end: read it with what follows
                return -1
            at = found.end()
            if self._blank:
                return at  # an empty line: the event ends here, a new line begins
            self._blank = True
        if at < len(data):
            self._blank = False
        return -1


def _message_data(event: memoryview | bytes) -> memoryview | bytes | None:
    """The data of ``event`` if it is a ``message`` event with data, as the SSE reader
    reads it: the ``data`` lines joined by LF, one space after each colon dropped (one
    line: a view of it, not a copy)."""
    kind = b""
    data: list[memoryview | bytes] = []
    at = 0
    with memoryview(event) as view:
        for end in _LINE_END.finditer(event):
            line, at = view[at : end.start()], end.end()
            head = bytes(line[:6])  # "data" and "event" are the only names that matter
            colon = head.find(b":")
            if colon < 0:  # a line without a colon is a name with an empty value
                name, value = (head if len(line) == len(head) else b""), line[len(line) :]
            else:
                name, value = head[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                kind = bytes(value)
    if kind not in (b"", b"message") or not data or data == [b""]:
        return None  # (the reader skips a message event without data: a priming event)
    return data[0] if len(data) == 1 else b"\n".join(data)


def _event(message: bytes, id_line: bytes = b"") -> bytes:
    """One ``message`` event carrying ``message`` (one line of JSON), with the ``id``
    line of the event it stands for, if any (the id the client resumes from)."""
    return b"event: message\r\n" + id_line + b"data: " + message + b"\r\n\r\n"


def _id_line(event: memoryview | bytes) -> bytes:
    """The last ``id`` line (with its line end) among the whole lines before the first
    ``data`` line of ``event`` (or its first bytes), or nothing."""
    found = b""
    at = 0
    for end in _LINE_END.finditer(event):
        line = bytes(event[at : end.end()])
        at = end.end()
        if line.startswith(b"data"):
            break
        if line.startswith(b"id:") or line.rstrip(b"\r\n") == b"id":
            found = line
    return found


def _error(request_id: int | str, error: types.ErrorData) -> bytes:
    """The JSON-RPC error answering ``request_id``, as JSON."""
    message = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return message.model_dump_json(by_alias=True, exclude_none=True).encode()


def _length(headers: httpx2.Headers) -> int | None:
    """The body's declared length, if it declares one."""
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None
