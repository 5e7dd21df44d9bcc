"""Plain HTTP/1.1 on a trio stream with h11: one request at a time, keep-alive, limits.

Just what the dashboard needs: requests with small bodies, complete responses with a
``Content-Length``, and a hand-off of an upgrade request's stream to trio-websocket
(:class:`ReplayStream` gives wsproto the request bytes h11 has already consumed).
"""

from __future__ import annotations

import http
from collections.abc import Mapping

import attrs
import h11
import trio

__all__ = [
    "HttpConnection",
    "ReplayStream",
    "Request",
    "RequestError",
    "Response",
]

#: Largest request head (request line and headers) accepted, in bytes.
MAX_HEAD = 16 * 1024
#: Largest request body accepted, in bytes; the dashboard's requests have none.
MAX_BODY = 64 * 1024
#: How long a request may take to arrive, from its first byte to its last; also how
#: long an idle keep-alive connection is kept open.
REQUEST_TIMEOUT = 30.0

_RECEIVE_SIZE = 16 * 1024
# Bounds on what we read and drop after an error response, before closing.
_LINGER_TIMEOUT = 2.0
_LINGER_BYTES = 1024 * 1024


@attrs.frozen
class Request:
    """One HTTP request: ``headers`` has lower-case names (repeated ones joined by ``, ``)."""

    method: str
    target: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    raw: h11.Request = attrs.field(repr=False)

    @property
    def wants_upgrade(self) -> bool:
        """Whether this is a WebSocket upgrade request."""
        connection = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        return "upgrade" in connection and self.headers.get("upgrade", "").lower() == "websocket"


@attrs.frozen
class Response:
    """A complete response; ``headers`` are extra ones, besides the content headers."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


class RequestError(Exception):
    """The peer sent something we answer with ``status`` and then close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpConnection:
    """The server side of one HTTP/1.1 connection."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)

    @property
    def can_respond(self) -> bool:
        """Whether a response can still be sent on this connection."""
        return self._conn.our_state in (h11.IDLE, h11.SEND_RESPONSE)

    async def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            event = self._conn.next_event()
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                data = await self.stream.receive_some(_RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            self._conn.receive_data(data)

    async def read_request(self) -> Request | None:
        """The next request, or ``None`` when the peer closed (or idled out) between requests.

        Raises :class:`RequestError` for a malformed, oversized or too slow request.
        """
        started = False
        with trio.move_on_after(REQUEST_TIMEOUT) as scope:
            try:
                event = await self._next_event()
                if isinstance(event, h11.ConnectionClosed):
                    return None
                if not isinstance(event, h11.Request):
                    raise RequestError(400, "malformed request")
                started = True
                body = bytearray()
                while True:
                    part = await self._next_event()
                    if isinstance(part, h11.Data):
                        body += part.data
                        if len(body) > MAX_BODY:
                            raise RequestError(413, f"request body larger than {MAX_BODY} bytes")
                    elif isinstance(part, h11.EndOfMessage):
                        break
                    else:
                        raise RequestError(400, "incomplete request")
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                if status == 400 and self._conn.their_state is h11.SEND_BODY:
                    raise RequestError(400, "incomplete request body") from None
                raise RequestError(status, f"malformed request: {exc}") from None
        if scope.cancelled_caught:
            if started or self._conn.their_state is not h11.IDLE:
                raise RequestError(408, "request not received in time")
            return None
        return _request(event, bytes(body))

    async def send(
        self, response: Response, *, head_only: bool = False, close: bool = False
    ) -> None:
        """Send *response* (without its body for ``HEAD``); ``close`` ends the connection."""
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers,
        ]
        if close:
            headers.append(("Connection", "close"))
        conn = self._conn
        try:
            reason = http.HTTPStatus(response.status).phrase
        except ValueError:
            reason = ""
        data = conn.send(
            h11.Response(status_code=response.status, headers=headers, reason=reason.encode())
        )
        if response.body and not head_only:
            data += conn.send(h11.Data(data=response.body))
        data += conn.send(h11.EndOfMessage())
        await self.stream.send_all(data)

    async def linger(self) -> None:
        """After a response with ``close``: end our side, then read and drop what the peer
        still sends (bounded), so that closing does not reset the connection before the
        peer has read the response."""
        with trio.move_on_after(_LINGER_TIMEOUT):
            try:
                if isinstance(self.stream, trio.abc.HalfCloseableStream):
                    await self.stream.send_eof()
                drained = 0
                while drained < _LINGER_BYTES:
                    chunk = await self.stream.receive_some(_RECEIVE_SIZE)
                    if not chunk:
                        break
                    drained += len(chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    def next_cycle(self) -> bool:
        """Get ready for the next request on this connection; ``False`` when it must close."""
        if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
            self._conn.start_next_cycle()
            return True
        return False

    def replay(self, request: Request) -> ReplayStream:
        """The stream, as if *request* (an upgrade request) had not been read yet."""
        raw = request.raw
        head = bytearray(b"%s %s HTTP/%s\r\n" % (raw.method, raw.target, raw.http_version))
        for name, value in raw.headers.raw_items():
            head += name + b": " + value + b"\r\n"
        head += b"\r\n"
        trailing, _ = self._conn.trailing_data
        return ReplayStream(bytes(head) + trailing, self.stream)


def _request(event: h11.Request, body: bytes) -> Request:
    headers: dict[str, str] = {}
    for name, value in event.headers:
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    target = event.target.decode("latin-1")
    path, _, query = target.partition("?")
    return Request(
        method=event.method.decode("ascii"),
        target=target,
        path=path,
        query=query,
        headers=headers,
        body=body,
        raw=event,
    )


class ReplayStream(trio.abc.Stream):
    """A stream whose first bytes received are *prefix*, then whatever *stream* receives."""

    def __init__(self, prefix: bytes, stream: trio.abc.Stream) -> None:
        self._prefix = prefix
        self._stream = stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            await trio.lowlevel.checkpoint()
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()
