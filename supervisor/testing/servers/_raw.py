"""Fixtures that misbehave below the MCP layer, so they need no SDK: hang and garbage,
and a server's optional streams answered off the transport spec (:class:`TroubledStreams`).

Stdio loops read the process's real stdin/stdout; the ASGI apps serve any HTTP path, so
they stand in for both a Streamable HTTP endpoint and a legacy SSE endpoint.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..._serving import lifespan as _lifespan
from ..._serving import respond

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def garbage_line(n: int) -> str:
    """The `n`-th garbage line (no newline): not JSON, so never a JSON-RPC message."""
    return f"garbage line {n}: this is not JSON-RPC {{{{ <<<"


def first_method(line: bytes) -> str:
    """Best-effort JSON-RPC method of a raw message line, for the stderr diagnostics."""
    try:
        message = json.loads(line)
    except ValueError:
        return "<not JSON>"
    if not isinstance(message, dict):
        return "<not an object>"
    return str(message.get("method", "<no method>"))


def hang_stdio() -> int:
    """Read stdin and never answer; report the first message's method on stderr.

    Returns 0 once stdin closes (the client shutting down).
    """
    seen = 0
    for line in sys.stdin.buffer:
        seen += 1
        if seen == 1:
            print(
                f"fixture hang-init received {first_method(line)}; never answering",
                file=sys.stderr,
                flush=True,
            )
    return 0


def garbage_stdio() -> int:
    """Write a garbage line at start and one per line read; never a valid message.

    Returns 0 once stdin closes.
    """
    n = 1
    sys.stdout.write(garbage_line(n) + "\n")
    sys.stdout.flush()
    for _line in sys.stdin.buffer:
        n += 1
        sys.stdout.write(garbage_line(n) + "\n")
        sys.stdout.flush()
    return 0


async def hang_app(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI app that accepts every request and never responds (not even headers)."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    while (await receive())["type"] != "http.disconnect":
        pass


async def garbage_app(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI app that answers every request 200 with a body that is not JSON.

    A POST gets ``content-type: application/json`` with a garbage body; a GET (an SSE
    stream) gets ``text/event-stream`` carrying one ``message`` event of garbage, then ends.
    """
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    more = True
    while more:  # drain the request body
        message = await receive()
        more = message["type"] == "http.request" and message.get("more_body", False)
    if scope["method"] == "GET":
        content_type = b"text/event-stream"
        body = f"event: message\ndata: {garbage_line(1)}\n\n".encode()
    else:
        content_type = b"application/json"
        body = (garbage_line(1) + "\n").encode()
    await respond(send, 200, body, content_type)


class TroubledStreams:
    """``app`` (a Streamable HTTP endpoint, such as an ``MCPServer``'s) with its optional
    streams misbehaving; everything else goes to ``app`` as it came.

    Each ``subscriptions/listen`` POST (the 2026-07-28 change notice stream) — and, with
    ``get``, each GET (the session-based protocol's stream) — is answered by ``how``:

    ``json``
        ``200`` with ``content-type: application/json``, one line acknowledging the
        subscription (``notifications/subscriptions/acknowledged`` with the filter asked
        for, a GET's line naming none), and a body held open until the client goes: what
        the MCP conformance suite's reference server (0.2.0-alpha.11) answers a listen
        with, where the transport wants an event stream.
    ``error``
        ``503`` with a plain text body.
    ``hang``
        Nothing at all, not even a status line, until the client goes.

    ``None`` (which ``how`` may be set to at any time) passes them on to ``app`` too: the
    streams work from then on. ``answered`` counts the requests answered by ``how``
    (each listen tried again counts), ``held`` those held open now.
    """

    def __init__(self, app: ASGIApp, how: str | None, *, get: bool = False) -> None:
        if how not in ("json", "error", "hang", None):
            raise ValueError(f"how must be 'json', 'error', 'hang' or None, not {how!r}")
        self.app = app
        self.how = how
        self.get = get
        self.answered = 0
        self.held = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        troubled = self.how is not None
        if not troubled or scope["type"] != "http" or scope["method"] not in ("GET", "POST"):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET":
            if not self.get:
                await self.app(scope, receive, send)
                return
            await self._answer(receive, send, None)
            return
        chunks: list[bytes] = []
        more = True
        while more:  # the whole body, to see what it asks
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "subscriptions/listen":
            await self._answer(receive, send, request)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _answer(self, receive: Receive, send: Send, request: dict[str, Any] | None) -> None:
        self.answered += 1
        if self.how == "error":
            await respond(send, 503, b"listen streams are out of order\n", b"text/plain")
            return
        if self.how == "json":
            params = (request or {}).get("params") or {}
            line = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "notifications": params.get("notifications") or {},
                    "_meta": {"io.modelcontextprotocol/subscriptionId": (request or {}).get("id")},
                },
            }
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": json.dumps(line).encode() + b"\n",
                    "more_body": True,
                }
            )
        self.held += 1
        try:
            while (await receive())["type"] != "http.disconnect":  # held open until it goes
                pass
        finally:
            self.held -= 1
