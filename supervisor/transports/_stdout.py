"""A local server's stdout framed into messages for the session, each line bounded.

A :class:`~._stdio.StdioTransport` runs its :class:`StdoutReader` in its nursery. Each
line (a last one without its newline included) is parsed into the session's message
(:meth:`~._conversation.Conversation.parse`) — or taken by the caller of a forwarded
request it answers (:mod:`._forward`) — or carried through the fault link first; blank
lines are passed over. A line longer than ``max_message_bytes`` is skipped — read
and dropped up to its end, never held in memory — and the connection stays up: if it was
the answer to a request, that request gets an error instead (code
:data:`~._oversize.RESULT_TOO_LARGE`, naming the limit and its size).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import mcp_types as types
import trio
from mcp.shared.message import SessionMessage

from .._util._pipes import received
from ..log import get_logger
from ._fault_point import TO_CLIENT, FaultPoint, ToSession
from ._oversize import Skipped, too_large

if TYPE_CHECKING:
    from ._faults import FaultLink
    from ._forward import Forwarding

log = get_logger("supervisor.transports")

#: What makes a line the session's message (``None``: a forwarded request's answer, taken).
Parse = Callable[[bytes], SessionMessage | None]

#: Bytes read from a server's stdout at a time.
_READ_CHUNK = 65536


class StdoutReader:
    """One server's stdout, read line by line into the session."""

    __slots__ = ("forwarding", "limit", "name", "parse")

    def __init__(self, name: str, limit: int, parse: Parse, forwarding: Forwarding | None = None):
        self.name = name
        #: the most bytes a line may have (``max_message_bytes``)
        self.limit = limit
        self.parse = parse
        #: the requests forwarded past the session (a line over the limit may answer one)
        self.forwarding = forwarding

    async def read(
        self,
        stdout: trio.abc.ReceiveStream,
        to_session: ToSession,
        link: FaultLink | None,
        point: FaultPoint | None,
    ) -> bool:
        """Read ``stdout`` to its end into ``to_session`` (each line through ``link``
        towards ``point``, with faults): ``True`` once it ended, ``False`` when the fault
        point ended the read side first. A line that is not JSON-RPC raises
        :class:`~supervisor.errors.ProtocolViolation`."""
        parse, limit, forwarding = self.parse, self.limit, self.forwarding
        buffer = bytearray()
        skipping: Skipped | None = None  # a line over the limit, being read past
        while True:
            chunk = await received(stdout, _READ_CHUNK)
            ended = not chunk
            if ended:  # a last line without its newline is a line all the same
                if skipping is None and not buffer:
                    return True
                chunk = b"\n"
            if skipping is not None:
                end = chunk.find(b"\n")
                skipping.add(chunk if end < 0 else chunk[:end])
                if end < 0:
                    continue
                await self._skipped(skipping, to_session)
                skipping, chunk = None, chunk[end + 1 :]
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                with memoryview(buffer) as view:
                    line = bytes(view[:end])
                del buffer[: end + 1]
                if len(line) > limit:
                    await self._skipped(Skipped(line), to_session)
                elif not line.strip():
                    continue
                elif link is None:
                    message = parse(line)
                    del line  # the message is what lives on (a refused page: not even that)
                    if message is not None:
                        await to_session.send(message)
                    elif forwarding is not None and forwarding.claimed:
                        await forwarding.deliver(to_session)  # a forwarded request's answer
                    del message
                else:
                    assert point is not None
                    await link.carry(TO_CLIENT, line, point.to_client, point.to_server)
                    if point.read_closed:
                        return False  # a violation or an injected close ended the read side
                line = b""
            if len(buffer) > limit:
                skipping = Skipped(bytes(buffer))
                buffer.clear()
            if buffer.__alloc__() > 2 * _READ_CHUNK and len(buffer) <= _READ_CHUNK:
                buffer = bytearray(buffer)  # a long line was read: give its room back
            if ended:
                return True

    async def _skipped(self, skipped: Skipped, to_session: ToSession) -> None:
        """A line over ``max_message_bytes`` was read past: answer its request with an
        error, if it was a response whose id can be found; otherwise only log it."""
        limit = self.limit
        request_id = skipped.response_id()
        log.warning(
            "message over maxMessageBytes skipped",
            server=self.name,
            size=skipped.size,
            limit=limit,
            request_id=request_id,
        )
        if request_id is None:
            return
        error = too_large(skipped.size, limit)
        if (forwarding := self.forwarding) is not None and forwarding.answer_error(
            request_id, error
        ):
            await forwarding.deliver(to_session)
            return
        await to_session.send(
            SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        )
