"""A local server's stdin, each byte written into it counted: what it never read is told.

A :class:`~._stdio.StdioTransport` holds one :class:`StdinWriter`. Each message comes
from the session already written as JSON by its sender (:class:`~._receipts.ReceiptStream`)
and goes into the pipe as one line; a server that exited gets nothing more (what it
started may live on, holding the pipe). The writer counts every byte that went in, and
where each request's first byte went: once the server and what it started are gone
(Linux), a request whose bytes are all still unread in the pipe was never received, and
its :class:`~._receipts.Receipt` goes back to not delivered
(:meth:`StdinWriter.count_unread`), as does one written once the server was being killed
(:func:`_dying`) when it left nothing behind that may have read it.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import trio
from mcp.shared.message import SessionMessage

from . import _children
from ._fault_point import TO_SERVER, FaultPoint
from ._receipts import Receipt, Written
from ._stderr import pending

if TYPE_CHECKING:
    from ._faults import FaultLink

FromSession = anyio.abc.ObjectReceiveStream[Written]


class StdinWriter:
    """One server's stdin, written message by message, each byte counted."""

    __slots__ = ("_counted", "_late", "_starts", "sending", "written")

    def __init__(self, sending: Callable[[SessionMessage], None]) -> None:
        #: noted of each message on its way in (:meth:`~._conversation.Conversation.sending`)
        self.sending = sending
        #: bytes written into its stdin so far, and where each request's first byte went
        #: (by its receipt): what is still unread once it is gone was never received
        self.written = 0
        self._starts: weakref.WeakKeyDictionary[Receipt, int] = weakref.WeakKeyDictionary()
        #: requests written when the server was already being killed (see _dying)
        self._late: weakref.WeakSet[Receipt] = weakref.WeakSet()
        self._counted = False

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
        # Its /proc status, held open: read again for each request (see _dying).
        status = _status_fd(process.pid) if _children.LINUX and link is None else None
        try:
            async for receipt, message, data in from_session:
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
                start = self.written
                if receipt is not None:  # a listing's pages: where the first one went
                    self._starts.setdefault(receipt, start)
                    if status is not None and _dying(status):
                        self._late.add(receipt)
                try:
                    await self._send_line(process.stdin, line + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    # The pipe refused it. None of it went in: never received. Some of it
                    # (on Linux, where what is left unread is counted once the process
                    # is gone: count_unread): the server may have read that part.
                    if receipt is not None and (self.written == start or not _children.LINUX):
                        receipt.delivered = False
                    raise
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the process is gone: its exit is reported by the transport
        finally:
            if status is not None:
                os.close(status)

    async def _send_line(self, stdin: trio.abc.SendStream, line: bytes) -> None:
        """Write ``line`` into stdin as ``send_all`` does, counting each byte as it goes in
        (a write the pipe refuses half-way leaves the count exact)."""
        if not isinstance(stdin, trio.lowlevel.FdStream):
            await stdin.send_all(line)
            self.written += len(line)
            return
        fd = stdin.fileno()
        await trio.lowlevel.checkpoint()
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
                self.written += count

    def count_unread(self, process: trio.Process, *, left_family: bool) -> None:
        """The server and what it started are gone (it exited on its own, with no fault
        link between): each request whose bytes are all still unread in its stdin pipe
        was never received — its receipt goes back to not delivered, so it may be sent
        again. A request it read even a byte of stays delivered; one written once it was
        being killed goes back too, unless it left processes of its own behind
        (``left_family``), which may have read it. Counted once, on Linux (``FIONREAD``
        on the pipe's write end), and only when nothing holds the pipe's read end any
        more (then no byte more can be read, nor written); elsewhere nothing changes."""
        if self._counted:
            return
        self._counted = True
        stdin = process.stdin
        if not _children.LINUX or not isinstance(stdin, trio.lowlevel.FdStream):
            return
        try:
            fd = stdin.fileno()
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            events = poller.poll(0)
        except (OSError, ValueError):
            return
        if not any(mask & select.POLLERR for _, mask in events):
            return  # a reader is left (something it started that escaped): it may read on
        first_unread = self.written - pending(fd)
        for receipt, start in list(self._starts.items()):
            if start >= first_unread and receipt.delivered:
                receipt.delivered = False
        if not left_family:
            # Written once it was being killed: the bytes may have gone into a read its
            # thread was blocked in, but no code of its own ran after that read.
            for receipt in list(self._late):
                receipt.delivered = False


def _status_fd(pid: int) -> int | None:
    """An open ``/proc/PID/status`` of process ``pid`` for :func:`_dying` (``None`` when
    it cannot be opened): read again from its start, it tells the process's state then."""
    try:
        return os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


#: SIGKILL's bit in the pending-signal masks of ``/proc/PID/status``.
_KILL_BIT = 1 << (signal.SIGKILL - 1)


def _dying(status: int) -> bool:
    """Whether the process whose ``/proc/PID/status`` is open as ``status`` is being
    killed (Linux): SIGKILL is pending for it (``SigPnd``, or ``ShdPnd`` for the whole
    process). It runs no code of its own from then on — not even to handle what a read one
    of its threads was blocked in returns. ``False`` when that cannot be told."""
    try:
        text = os.pread(status, 4096, 0)  # about 1.5 KiB: its whole state, made anew
    except OSError:
        return False  # gone (reaped): its exit is reported, and counted, elsewhere
    for field in (b"\nSigPnd:", b"\nShdPnd:"):
        at = text.find(field)
        end = text.find(b"\n", at + 1)
        if at < 0 or end < 0:
            return False
        try:
            if int(text[at + len(field) : end], 16) & _KILL_BIT:
                return True
        except ValueError:
            return False
    return False
