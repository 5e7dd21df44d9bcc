"""Where a local server's fault link meets its process.

A :class:`~._stdio.StdioTransport` with ``faults`` carries every line, in either
direction, through a :class:`~._faults.FaultLink` (docs/faults.md). Its
:class:`FaultPoint` is the link's two ways to send — towards the session (parsed as an
unfaulted line is), into stdin — and its :class:`~._faults.FaultTarget`, the process
group and its pipes: ``kill`` is SIGKILL, ``hang`` SIGSTOP until SIGCONT, a close of the
way to the server closes its stdin, of the way back ends the read side.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING

import anyio
import trio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..errors import ProtocolViolation, TransportError
from ._group import ProcessGroup

if TYPE_CHECKING:
    from ._conversation import Conversation

#: The directions a message travels (as :mod:`supervisor.config._plan` names them).
TO_SERVER = "to_server"
TO_CLIENT = "to_client"

ToSession = MemoryObjectSendStream[SessionMessage | Exception]


class FaultPoint:
    """Where one server's fault link meets its process.

    Sending never raises: a line for a session that is gone, or for a stdin that is
    closed, is dropped (the exit, if that is why, is reported by the transport).
    """

    __slots__ = (
        "_stdin",
        "fail",
        "forwarding",
        "group",
        "killed",
        "name",
        "parse",
        "process",
        "read_closed",
        "stopped",
        "to_session",
    )

    def __init__(
        self,
        name: str,
        group: ProcessGroup,
        to_session: ToSession,
        talk: Conversation,
        fail: Callable[[TransportError], None],
    ) -> None:
        self.name = name
        #: the requests forwarded past the session, whose answers it hands over in turn
        self.forwarding = talk.forwarding
        self.group = group
        assert group.process is not None
        self.process = group.process
        self.to_session = to_session
        self.parse = talk.parse
        self.fail = fail
        self._stdin = trio.Lock()  # the link writes from more than one task
        #: the read side ended: a line that is not JSON-RPC, or an injected close
        self.read_closed = False
        self.stopped = False
        self.killed = False

    async def to_client(self, line: bytes) -> None:
        """Parse ``line`` and hand it to the session, as an unfaulted transport does: a
        line that is not JSON-RPC fails the connection with a :class:`ProtocolViolation`."""
        if self.read_closed:
            return
        try:
            message = self.parse(line)
        except ProtocolViolation as exc:
            self.fail(exc)
            await self._end_read_side()
            return
        if message is None:  # a forwarded request's answer, taken by its caller
            if self.forwarding is not None:
                await self.forwarding.deliver(self.to_session)
            return
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.to_session.send(message)

    async def to_server(self, line: bytes) -> None:
        """Write ``line`` (one message, no newline) into the server's stdin."""
        stdin = self.process.stdin
        assert stdin is not None
        if self.process.returncode is not None:
            return  # it exited: what it left running gets nothing (see StdinWriter.write)
        async with self._stdin:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stdin.send_all(line + b"\n")

    async def _end_read_side(self) -> None:
        self.read_closed = True
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.to_session.aclose()

    # -- the link's Target -----------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL to the process group: a crash, reported when the process exits."""
        self.killed = True
        self.group.signal(signal.SIGKILL)

    def stop(self) -> None:
        """SIGSTOP to the process group: the server stops answering."""
        self.stopped = True
        self.group.signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT to the process group."""
        self.stopped = False
        self.group.signal(signal.SIGCONT)

    async def close(self, direction: str) -> None:
        """Close the server's stdin (``to_server``), or end the read side
        (``to_client``): the connection is then lost, as when stdout ends."""
        if direction == TO_SERVER:
            stdin = self.process.stdin
            assert stdin is not None
            async with self._stdin:
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await stdin.aclose()
            return
        self.fail(
            TransportError(
                f"the connection to MCP server {self.name!r} was closed "
                "(an injected fault: close_stream)"
            )
        )
        await self._end_read_side()
