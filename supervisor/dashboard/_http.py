"""HTTP over ASGI, as much as the dashboard needs: a request with a small body, read within
bounds, and complete responses that always carry the security headers.

The HTTP server (hypercorn) parses the request head and enforces its size; this module
bounds the body: more than :data:`MAX_BODY` bytes is ``413`` (a body of up to
:data:`DRAIN_LIMIT` bytes is read to its end first, so that the connection can answer
cleanly; a larger declared one is refused at once), and a body that does not arrive
within :data:`REQUEST_TIMEOUT` seconds is ``408``. Every :class:`Response` is sent with
a ``Content-Length`` and :data:`~._security.SECURITY_HEADERS`, either as an ordinary
response or as the refusal of a WebSocket upgrade (the ASGI ``websocket.http.response``
extension).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import msgspec
import trio

from ._security import SECURITY_HEADERS

__all__ = [
    "Disconnected",
    "Receive",
    "Request",
    "RequestError",
    "Response",
    "Scope",
    "Send",
    "error",
    "json",
    "read_body",
    "send_response",
]

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: Largest request body accepted, in bytes; the dashboard's requests have none.
MAX_BODY = 64 * 1024
#: A too large body up to this size is still read (and dropped) before the 413.
DRAIN_LIMIT = 1024 * 1024
#: How long a request body may take to arrive.
REQUEST_TIMEOUT = 30.0

_JSON = "application/json"


@attrs.frozen
class Request:
    """One request: ``path`` is as sent (not percent-decoded) without the query;
    ``headers`` has lower-case names (repeated ones joined by ``, ``)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes = b""

    @classmethod
    def from_scope(cls, scope: Scope, body: bytes = b"") -> Request:
        """The request of an ASGI ``http`` or ``websocket`` scope."""
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            key = bytes(name).decode("latin-1").lower()
            text = bytes(value).decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return cls(
            method=scope.get("method", "GET"),
            path=bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
            query=bytes(scope.get("query_string", b"")).decode("latin-1"),
            headers=headers,
            body=body,
        )


@attrs.frozen
class Response:
    """A complete response; ``headers`` are extra ones, besides the content and security
    headers."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        headers = [
            ("Content-Type", self.content_type),
            ("Content-Length", str(len(self.body))),
            *SECURITY_HEADERS,
            *self.headers,
        ]
        return [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers
        ]


class RequestError(Exception):
    """The request is answered with ``status`` (and *message*) without being looked at."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Disconnected(Exception):
    """The peer left before its request was complete: there is nobody to answer."""


def error(
    status: int, message: str, *, allow: str = "", upgrade: str = "", challenge: str = ""
) -> Response:
    """A JSON error, ``{"error": message}``, with ``Allow``, ``Upgrade`` or
    ``WWW-Authenticate`` (*challenge*) if given."""
    headers: tuple[tuple[str, str], ...] = ()
    if allow:
        headers += (("Allow", allow),)
    if upgrade:
        headers += (("Upgrade", upgrade),)
    if challenge:
        headers += (("WWW-Authenticate", challenge),)
    return Response(status, msgspec.json.encode({"error": message}), _JSON, headers)


def json(status: int, value: object) -> Response:
    return Response(status, msgspec.json.encode(value), _JSON)


async def read_body(receive: Receive, headers: Mapping[str, str]) -> bytes:
    """The request body (see the module docstring for the bounds).

    Raises :class:`RequestError` (413, 408) or :class:`Disconnected`.
    """
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > DRAIN_LIMIT:
        raise RequestError(413, f"request body larger than {MAX_BODY} bytes")
    body = bytearray()
    size = 0
    with trio.move_on_after(REQUEST_TIMEOUT) as timer:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > DRAIN_LIMIT:
                raise RequestError(413, f"request body larger than {MAX_BODY} bytes")
            if size <= MAX_BODY:
                body += chunk
            if not message.get("more_body", False):
                break
    if timer.cancelled_caught:
        raise RequestError(408, "request not received in time")
    if size > MAX_BODY:
        raise RequestError(413, f"request body larger than {MAX_BODY} bytes")
    return bytes(body)


async def send_response(send: Send, response: Response, *, websocket: bool = False) -> None:
    """Send *response* (as the refusal of a WebSocket upgrade when *websocket*)."""
    kind = "websocket.http.response" if websocket else "http.response"
    await send(
        {"type": f"{kind}.start", "status": response.status, "headers": response.raw_headers()}
    )
    await send({"type": f"{kind}.body", "body": response.body, "more_body": False})
