"""A local server's stdin, written message by message, each byte counted.

A :class:`~._stdio.StdioTransport` holds one :class:`StdinWriter`. Each message comes
from the session already written as JSON by its sender (:class:`~._receipts.ReceiptStream`)
and goes into the pipe as one line; a server that exited gets nothing more (what it
started may live on, holding the pipe). A message — the session's, or a forwarded
request (:mod:`._forward`) — is written in its sender's task instead while the writer
waits for its next message with none queued for it, so nothing is overtaken
(:meth:`StdinWriter.write_now`): no hop to the writer's task. The writer's
:class:`~._intake.Intake` counts every byte that went in, and tells, once the server is
gone, which requests it never read.
"""

from __future__ import annotations

import errno
import os
import select
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage

from . import _children
from ._fault_point import TO_SERVER, FaultPoint
from ._intake import DYING, GONE, Intake, stat_fd, state_of
from ._receipts import Receipt, Written

if TYPE_CHECKING:
    from ._faults import FaultLink

FromSession = anyio.abc.ObjectReceiveStream[Written]


class StdinWriter:
    """One server's stdin, written message by message, each byte counted."""

    __slots__ = ("_now", "intake", "sending")

    def __init__(self, sending: Callable[[SessionMessage], None]) -> None:
        #: noted of each message on its way in (:meth:`~._conversation.Conversation.sending`)
        self.sending = sending
        #: what went in, counted (what it never read is told)
        self.intake = Intake()
        #: while the writer waits for its next message: the process, its status and the
        #: writer's queue (a line may then be written now, by its sender: :meth:`write_now`)
        self._now: tuple[trio.Process, int | None, MemoryObjectReceiveStream[Written]] | None = None

    async def write(
        self,
        process: trio.Process,
        from_session: FromSession,
        link: FaultLink | None,
        point: FaultPoint | None,
    ) -> None:
        """Write each message from the session into ``process``'s stdin (or hand it to
        ``link``, towards ``point``), until the session or the pipe closes."""
        # Each message comes written as JSON by its sender (ReceiptStream): one that
        # cannot be failed there, alone, and never reaches this task.
        assert process.stdin is not None
        sending = self.sending
        # Its /proc stat, held open: read again for each request (see process_state).
        status = stat_fd(process.pid) if _children.LINUX and link is None else None
        queue = from_session if isinstance(from_session, MemoryObjectReceiveStream) else None
        idle = (process, status, queue) if link is None and queue is not None else None
        try:
            while True:
                self._now = idle
                try:
                    receipt, message, data = await from_session.receive()
                except anyio.EndOfStream:
                    break
                finally:
                    self._now = None
                if process.returncode is not None:
                    # It exited: what it started may live on, holding the pipes (a
                    # launcher's real server), and gets no request; it is being stopped.
                    return  # (the request stays undelivered)
                if receipt is not None and not receipt.deliver():
                    continue  # given up as never sent (and sent again elsewhere): not now
                if message is not None:
                    sending(message)
                line = data if isinstance(data, bytes) else data.encode()
                if link is not None:
                    assert point is not None  # the link is the server's side of the pipe
                    await link.carry(TO_SERVER, line, point.to_server, point.to_client)
                    continue
                dying = receipt is not None and state_of(process, status) == DYING
                start = self.intake.going(receipt, dying)
                try:
                    await self._send_line(process.stdin, line + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    # The pipe refused it. None of it went in: never received. Some of it
                    # (on Linux, where what is left unread is counted once the process
                    # is gone: count_unread): the server may have read that part.
                    unread = self.intake.written == start or not _children.LINUX
                    if receipt is not None and unread:
                        receipt.delivered = False
                    raise
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the process is gone: its exit is reported by the transport
        finally:
            self._now = None
            if status is not None:
                os.close(status)

    def write_now(
        self, receipt: Receipt | None, line: bytes, message: SessionMessage | None = None
    ) -> bool:
        """Write ``line`` (one message, no newline; its ``receipt``, if any; the session's
        ``message`` it is, if it is one) now, in its sender's task — whether it was: only
        while the writer waits for its next message, nothing queued since it took its
        last (so nothing queued is overtaken and no line is half-written), with no fault
        link, and only a line the pipe takes whole in one write (``PIPE_BUF``) or not at
        all. It is counted, marked and noted as the writer would. ``False``: queue it
        instead — and from then on, until the writer takes it, nothing is written now
        (every sender of the writer's asks here first)."""
        now = self._now
        if now is None:
            return False
        process, status, queue = now
        stdin = process.stdin
        state = state_of(process, status)  # exited? being killed?
        if (
            len(line) >= select.PIPE_BUF
            or state == GONE  # (the writer's to see: what it started may hold the pipe)
            or not isinstance(stdin, trio.lowlevel.FdStream)
            or queue.statistics().tasks_waiting_send  # (one queued before the writer took it)
        ):
            self._now = None  # it is queued next: what comes after it waits its turn
            return False
        if receipt is not None and not receipt.deliver():
            return True  # given up as never sent (and sent again elsewhere): not now
        self.intake.going(receipt, state == DYING)
        try:
            count = os.write(stdin.fileno(), line + b"\n")
        except (BlockingIOError, OSError):  # full, or gone: the writer's to say
            if receipt is not None:
                receipt.delivered = False
            self._now = None
            return False
        self.intake.written += count
        if message is not None:
            self.sending(message)
        return True

    async def _send_line(self, stdin: trio.abc.SendStream, line: bytes) -> None:
        """Write ``line`` into stdin as ``send_all`` does, counting each byte as it goes in
        (a write the pipe refuses half-way leaves the count exact)."""
        if not isinstance(stdin, trio.lowlevel.FdStream):
            await stdin.send_all(line)
            self.intake.written += len(line)
            return
        fd = stdin.fileno()  # (no checkpoint first: receiving the line was one)
        with memoryview(line) as view:
            sent = 0
            while sent < len(line):
                try:
                    with view[sent:] as rest:
                        count = os.write(fd, rest)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(fd)  # closed meanwhile: ClosedResourceError
                    continue
                except OSError as exc:
                    if exc.errno == errno.EBADF:
                        raise trio.ClosedResourceError("stdin was closed") from None
                    raise trio.BrokenResourceError from exc
                sent += count
                self.intake.written += count
