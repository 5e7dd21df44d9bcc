"""What went into a local server's stdin, counted: what it never read is told.

A :class:`~._stdin.StdinWriter` holds one :class:`Intake`. It counts every byte that
went into the pipe, and where each request's first byte went: once the server and what
it started are gone (Linux), a request whose bytes are all still unread in the pipe was
never received, and its :class:`~._receipts.Receipt` goes back to not delivered
(:meth:`Intake.count_unread`), as does one written once the server was being killed
(:func:`process_state`) when it left nothing behind that may have read it.
"""

from __future__ import annotations

import os
import select
import signal
import weakref

import trio

from . import _children
from ._receipts import Receipt
from ._stderr import pending

__all__ = ["DYING", "GONE", "LIVE", "Intake", "process_state", "stat_fd", "state_of"]


class Intake:
    """The bytes written into one server's stdin, and where each request's went."""

    __slots__ = ("_counted", "_late", "_starts", "written")

    def __init__(self) -> None:
        #: bytes written into its stdin so far, and where each request's first byte went
        #: (by its receipt): what is still unread once it is gone was never received
        self.written = 0
        self._starts: weakref.WeakKeyDictionary[Receipt, int] = weakref.WeakKeyDictionary()
        #: requests written when the server was already being killed (see process_state)
        self._late: weakref.WeakSet[Receipt] = weakref.WeakSet()
        self._counted = False

    def going(self, receipt: Receipt | None, dying: bool) -> int:
        """The request of ``receipt`` is about to go in (into a server being killed, if
        ``dying``: :func:`process_state` said so just before): where its first byte goes.
        A listing's pages count from where the first one went."""
        start = self.written
        if receipt is not None:
            self._starts.setdefault(receipt, start)
            if dying:
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


def stat_fd(pid: int) -> int | None:
    """An open ``/proc/PID/stat`` of process ``pid`` for :func:`process_state` (``None``
    when it cannot be opened): read again from its start, it tells the process's state
    then — and once the process is reaped, reading it fails, whoever has its number now."""
    try:
        return os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


#: What :func:`process_state` tells of a process: it runs; it is being killed; it exited.
LIVE, DYING, GONE = 0, 1, 2
#: SIGKILL's bit in the pending-signal mask of ``/proc/PID/stat`` (its ``signal`` field).
_KILL_BIT = 1 << (signal.SIGKILL - 1)
#: The kernel's flag of a thread that a signal is killing (``PF_SIGNALED``), in the
#: ``flags`` field of ``/proc/PID/stat``.
_SIGNALED = 0x400
#: Where the ``flags`` (the 9th) and ``signal`` (the 31st) fields are among the fields
#: after the command's name (its 2nd, in parentheses: the state, the 3rd, comes first).
_FLAGS_FIELD, _SIGNAL_FIELD = 9 - 3, 31 - 3


def process_state(stat: int) -> int:
    """What the process whose ``/proc/PID/stat`` is open as ``stat`` is doing (Linux):
    :data:`DYING` while a signal kills it — it runs no code of its own from then on, not
    even to handle what a read one of its threads was blocked in returns; :data:`GONE`
    once it was reaped, or its main thread exited otherwise (a zombie: whether the
    process did, ``waitpid`` tells); :data:`LIVE` otherwise, and when that cannot be
    told.

    One read (about 300 bytes) tells it, where ``/proc/PID/status`` takes 1.5 KiB and
    ``waitpid`` a call of its own. What it shows is the main thread's, and a process
    being killed shows in it from the signal's sending until it is reaped: the kernel
    puts SIGKILL in every thread's own pending set as it sends it (``complete_signal``'s
    fatal path: for any signal that kills), and a thread that takes it off to act on it
    is marked ``PF_SIGNALED`` as it does, which it keeps as a zombie while the others
    exit. ``tests/test_receipts.py`` sends a real SIGKILL to a process held off its CPU,
    and reads it here."""
    try:
        text = os.pread(stat, 4096, 0)
    except OSError:
        return GONE  # reaped: its exit is reported, and counted, elsewhere
    fields = text[text.rfind(b")") + 2 :].split(b" ", _SIGNAL_FIELD + 1)
    try:
        flags, pending = int(fields[_FLAGS_FIELD]), int(fields[_SIGNAL_FIELD])
    except (IndexError, ValueError):
        return LIVE
    if pending & _KILL_BIT or flags & _SIGNALED:
        return DYING
    return GONE if fields[0] in (b"Z", b"X", b"x") else LIVE  # (its state: a zombie, dead)


def state_of(process: trio.Process, stat: int | None) -> int:
    """:func:`process_state` of ``process`` from its ``/proc/PID/stat`` open as ``stat``;
    without one (not Linux), :data:`GONE` once ``returncode`` says it exited, else
    :data:`LIVE`."""
    if stat is not None:
        return process_state(stat)
    return GONE if process.returncode is not None else LIVE
