"""A message over ``maxMessageBytes``: read past without being kept, and the error its
request gets instead.

A transport that reads a server's raw messages (stdio lines, Streamable HTTP and SSE
bodies and events) never holds more of one than the limit: past it, the rest is read and
dropped, counting its bytes and keeping only :data:`SKIP_KEEP` bytes of each end
(:class:`Skipped`), where the id of the request it answered is looked for. That request
gets :func:`too_large` instead (code :data:`RESULT_TOO_LARGE`), which the supervisor
raises as :class:`~supervisor.errors.ResultTooLarge` for a call; the connection stays.
"""

from __future__ import annotations

import json
import re

import mcp_types as types

#: The JSON-RPC error code a request gets when its answer was over ``maxMessageBytes``
#: and was dropped (in the range JSON-RPC leaves to implementations).
RESULT_TOO_LARGE = -32099

#: Bytes kept of each end of a message that is skipped for its size, to find its id.
SKIP_KEEP = 4096
_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
#: a response's id near its start ({"jsonrpc": "2.0", "id": 7, "result": …}) ...
_ID_AT_START = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
#: ... or near its end ({"result": …, "id": 7, "jsonrpc": "2.0"})
_ID_AT_END = re.compile(rb'"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


class Skipped:
    """A message over the size limit, read past: its size and both ends."""

    def __init__(self, first: bytes | bytearray | memoryview) -> None:
        self.head = bytes(first[:SKIP_KEEP])
        self.tail = bytes(first[-SKIP_KEEP:])
        self.size = len(first)

    def add(self, more: bytes | bytearray | memoryview) -> None:
        self.size += len(more)
        if len(self.head) < SKIP_KEEP:
            self.head += bytes(more[: SKIP_KEEP - len(self.head)])
        self.tail = (self.tail + bytes(more[-SKIP_KEEP:]))[-SKIP_KEEP:]

    def response_id(self, *, start: bytes = b"") -> int | str | None:
        """The id of the response this message was, if one can be read from either end;
        ``start``: the message begins after the first occurrence of these bytes (an
        event's ``data:``)."""
        at = 0
        if start:
            found_at = self.head.find(start)
            at = -1 if found_at < 0 else found_at + len(start)
        found = (_ID_AT_START.match(self.head, at) if at >= 0 else None) or _ID_AT_END.search(
            self.tail
        )
        if found is None:
            return None
        try:
            value = json.loads(found.group(1))
        except ValueError:
            return None
        return value if isinstance(value, int | str) else None


def too_large(size: int, limit: int, *, sse_event: bool = False) -> types.ErrorData:
    """The error a request gets for an answer of ``size`` bytes over ``limit``: the
    ``maxMessageBytes`` limit, or with ``sse_event`` the bound of one legacy SSE event (the
    SDK's SSE reader's), when that is the smaller."""
    over = "a legacy SSE event may hold" if sse_event else "maxMessageBytes"
    data: dict[str, object] = {"size": size, "limit": limit}
    if sse_event:
        data["bound"] = "sse"
    return types.ErrorData(
        code=RESULT_TOO_LARGE,
        message=f"the answer was {size} bytes, more than {over} ({limit}); it was dropped, "
        "the connection kept",
        data=data,
    )
