"""Fixtures that misbehave below the MCP layer, so they need no SDK: hang and garbage.

Stdio loops read the process's real stdin/stdout; the ASGI apps serve any HTTP path, so
they stand in for both a Streamable HTTP endpoint and a legacy SSE endpoint.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..._util._serving import lifespan as _lifespan
from ..._util._serving import respond

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
