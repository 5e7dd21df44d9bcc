"""A local server's stderr, read to its end into a tail that its failures quote.

A :class:`~._stdio.StdioTransport` holds one :class:`StderrCapture`. Each line the server
writes on stderr is decoded, redacted, kept in the :class:`~._stderr.StderrTail` (less
what it wrote about the client's protocol probe) and handed to ``on_stderr``; a line
without its end is cut at 64 KiB. :attr:`StderrCapture.done` is set once stderr reached
its end, so that an exit is reported with its last line. A failure quotes the tail: an
exit names the line that says what went wrong (:func:`~._diagnosis.error_line`), a
handshake that timed out the last lines it had written when it was stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress

import trio

from ..log import redact
from ._diagnosis import downloader, error_line
from ._stderr import StderrTail, pending

#: Bytes read from a server's stderr at a time, and the most of a line without its end
#: held before it is taken as a line.
_READ_CHUNK = 65536
#: How many of its last stderr lines a handshake timeout's error shows.
STALLED_LINES = 3


class StderrCapture:
    """One server's stderr, read into a tail (:attr:`tail`) that its failures quote."""

    __slots__ = ("_at_stop", "done", "on_stderr", "stream", "tail")

    def __init__(self, lines: int, on_stderr: Callable[[str], None] | None) -> None:
        #: its last stderr lines, less what it wrote about our protocol probe (see
        #: :mod:`supervisor.transports._stderr`)
        self.tail = StderrTail(lines)
        self.on_stderr = on_stderr
        #: the process's stderr, once it is spawned
        self.stream: trio.abc.ReceiveStream | None = None
        #: set once stderr reached its end: an exit is reported after it (with its last line)
        self.done = trio.Event()
        self._at_stop: list[str] | None = None  # what it had said when we stopped it

    async def read(self) -> None:
        """Read :attr:`stream` to its end, line by line; then set :attr:`done`."""
        stream = self.stream
        assert stream is not None
        buffer = bytearray()
        try:
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                while True:
                    chunk = await stream.receive_some(_READ_CHUNK)
                    if not chunk:
                        break
                    # Counted before anything else runs: the probe's positions rely on it.
                    self.tail.received(len(chunk))
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        self._line(bytes(buffer[:end]), end + 1)
                        del buffer[: end + 1]
                    if len(buffer) > _READ_CHUNK:  # a line without end: keep it bounded
                        self._line(bytes(buffer), len(buffer))
                        buffer.clear()
            if buffer:
                self._line(bytes(buffer), len(buffer))
        finally:
            self.done.set()

    def _line(self, raw: bytes, size: int) -> None:
        line = redact(raw.decode("utf-8", "replace").rstrip("\r"))
        self.tail.add(line, size)
        if self.on_stderr is not None:
            self.on_stderr(line)

    def pending(self) -> int:
        """How many bytes the server wrote on stderr that are not read yet (``0`` where
        that cannot be told)."""
        stream = self.stream
        return pending(stream.fileno()) if isinstance(stream, trio.lowlevel.FdStream) else 0

    def stopping(self) -> None:
        """The transport is stopping the server: what it said until now is what a stalled
        handshake quotes (:meth:`stalled`)."""
        self._at_stop = list(self.tail)

    def last_said(self) -> str:
        """What an exit's reason adds: the line of its stderr that says what went wrong,
        ``"; last stderr line: …"`` (or ``"; error on stderr: …"`` when it is further up:
        a Node stack's ``Error: …`` before ``Node.js v20``), or nothing."""
        tail = self.tail
        said = error_line(list(tail))  # (it slices: a deque's view cannot)
        if said is None:
            return ""
        if said in (tail[-1], tail[-1].strip()):
            return f"; last stderr line: {said!r}"
        return f"; error on stderr: {said!r}"

    def stalled(self, command: str, args: Sequence[str]) -> str:
        """What a handshake that timed out adds to its error: the server's last stderr
        lines before it was stopped (up to :data:`STALLED_LINES`) and, when ``command``
        is a launcher that fetches its package on a first run (``npx``, ``uvx``,
        ``pipx run`` …), that it may still have been doing so. Starts with ``"; "``, or
        is empty."""
        tail = self.tail if self._at_stop is None else self._at_stop
        said = [line for line in tail if line.strip()][-STALLED_LINES:]
        text = ""
        if len(said) == 1:
            text = f"; last stderr line: {said[0]!r}"
        elif said:
            text = "; last stderr lines: " + ", ".join(repr(line) for line in said)
        launcher = downloader(command, args)
        if launcher is not None:
            text += (
                f"; {launcher} may still have been fetching the package (a first run "
                "downloads it): raise initTimeout, or install the package first"
            )
        return text
