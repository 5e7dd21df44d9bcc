"""What went into a local server's stdin, counted: what it never read is told.

A :class:`~._stdin.StdinWriter` holds one :class:`Intake`. It counts every byte that
went into the pipe, and where each request's first byte went: once the server and what
it started are gone (Linux), a request whose bytes are all still unread in the pipe was
never received, and its :class:`~._receipts.Receipt` goes back to not delivered
(:meth:`Intake.count_unread`), as does one written once the server was being killed
(:func:`_dying`) when it left nothing behind that may have read it.
"""

from __future__ import annotations

import os
import re
import select
import signal
import weakref

import trio

from . import _children
from ._receipts import Receipt
from ._stderr import pending

__all__ = ["Intake", "status_fd"]


class Intake:
    """The bytes written into one server's stdin, and where each request's went."""

    __slots__ = ("_counted", "_late", "_starts", "written")

    def __init__(self) -> None:
        #: bytes written into its stdin so far, and where each request's first byte went
        #: (by its receipt): what is still unread once it is gone was never received
        self.written = 0
        self._starts: weakref.WeakKeyDictionary[Receipt, int] = weakref.WeakKeyDictionary()
        #: requests written when the server was already being killed (see _dying)
        self._late: weakref.WeakSet[Receipt] = weakref.WeakSet()
        self._counted = False

    def going(self, receipt: Receipt | None, status: int | None) -> int:
        """The request of ``receipt`` is about to go in (the server's ``/proc`` status
        open as ``status``, if it can be): where its first byte goes. A listing's pages
        count from where the first one went."""
        start = self.written
        if receipt is not None:
            self._starts.setdefault(receipt, start)
            if status is not None and _dying(status):
                self._late.add(receipt)
        return start

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


def status_fd(pid: int) -> int | None:
    """An open ``/proc/PID/status`` of process ``pid`` for :func:`_dying` (``None`` when
    it cannot be opened): read again from its start, it tells the process's state then."""
    try:
        return os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


#: SIGKILL's bit in the pending-signal masks of ``/proc/PID/status``.
_KILL_BIT = 1 << (signal.SIGKILL - 1)
#: The two masks, as the kernel writes them: ``SigPnd`` (the thread's), ``ShdPnd``.
_PENDING = re.compile(rb"\nSigPnd:([^\n]*)\nShdPnd:([^\n]*)\n")


def _dying(status: int) -> bool:
    """Whether the process whose ``/proc/PID/status`` is open as ``status`` is being
    killed (Linux): SIGKILL is pending for it (``SigPnd``, or ``ShdPnd`` for the whole
    process). It runs no code of its own from then on — not even to handle what a read one
    of its threads was blocked in returns. ``False`` when that cannot be told."""
    try:
        text = os.pread(status, 4096, 0)  # about 1.5 KiB: its whole state, made anew
    except OSError:
        return False  # gone (reaped): its exit is reported, and counted, elsewhere
    both = _PENDING.search(text)  # (where the kernel writes them: one after the other)
    if both is not None:
        try:
            return bool((int(both[1], 16) | int(both[2], 16)) & _KILL_BIT)
        except ValueError:
            pass  # as the fields are read one by one below
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
