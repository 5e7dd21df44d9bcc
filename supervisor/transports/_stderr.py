"""A local server's last stderr lines, without the echo of the client's protocol probe.

The SDK's client (``mode="auto"``) opens every connection with a ``server/discover``
request and falls back to the ``initialize`` handshake when the server answers it with an
error. A server built on mcp 1.x does not know that method: it logs a pydantic validation
error about it on stderr — "Failed to validate request: 31 validation errors for
ClientRequest" and some ninety lines naming ``server/discover`` — before it answers. Those
lines are our probe's echo, not the server's own words: a crash's reason ("last stderr
line") and ``mcp.local.crashed``'s ``stderr_tail`` must not be made of them.

:class:`StderrTail` tells them apart by where they are in the stream and by what they say:

- *Where*: the transport reports the stderr byte position when the probe goes into the
  server's stdin (:meth:`StderrTail.probe_sent`) and when the server's error answer to it
  comes out of stdout (:meth:`StderrTail.probe_answered`), each time counting the bytes
  already in the pipe but not yet read (:func:`pending`). A server writes its log line
  before its answer, so whatever it wrote about the probe lies between the two positions,
  however the two pipes' reads interleave here.
- *What*: the server may also write its own start-up output in that window (it reads the
  probe once it is up, and warns of a missing setting first). So within the window the echo
  begins at the first line that names the method — or, up to two lines before it, at the
  line heading the same record, mcp 1.x's "… validation errors for ClientRequest" — and
  runs to the window's end. The lines before it stay.

Nothing is removed for a probe answered with a result (a 2026-07-28 server), for one
never answered (a server that dies starting: its traceback is all its own), or for a
window that never names the method (a server that refuses it silently and prints a banner
meanwhile). Only the first probe of a connection is looked at: later ones are pings.
"""

from __future__ import annotations

import collections
import fcntl
import struct
import termios
from collections.abc import Iterator, Sequence
from typing import overload

import attrs

#: The method of the client's protocol probe.
PROBE_METHOD = "server/discover"
#: How many lines before the first naming the method may head the echo's record.
_HEAD_LINES = 2
_HEAD_MARK = "validat"  # "Failed to validate request: …", "N validation errors for …"


def pending(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` (0 where the platform will not tell)."""
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", raw)[0])


@attrs.frozen
class _Line:
    text: str
    #: byte offsets of the line in the stream, its newline included in ``end``
    start: int
    end: int


class StderrTail(Sequence[str]):
    """The last ``maxlen`` stderr lines of one process, oldest first, less the probe's echo.

    It reads as a sequence of the lines' texts. The reader reports each chunk's size as it
    is read (:meth:`received`, before anything else runs) and each line as it is split
    (:meth:`add`); the probe's two moments come from the other pipes' tasks.
    """

    def __init__(self, maxlen: int) -> None:
        self._lines: collections.deque[_Line] = collections.deque(maxlen=maxlen)
        #: bytes read from stderr so far
        self.position = 0
        self._line_start = 0
        self._window_start: int | None = None
        self._window_end: int | None = None
        self._settled = False  # the probe was answered, or its echo looked at

    def __iter__(self) -> Iterator[str]:
        return (line.text for line in self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):  # (a deque takes no slice)
            return [line.text for line in list(self._lines)[index]]
        return self._lines[index].text

    def __repr__(self) -> str:
        return f"StderrTail({list(self)!r})"

    def received(self, size: int) -> None:
        """``size`` more bytes were read from the stream."""
        self.position += size

    def add(self, text: str, size: int) -> None:
        """The next line, ``text``, took ``size`` bytes of the stream (its newline included)."""
        line = _Line(text, self._line_start, self._line_start + size)
        self._line_start = line.end
        self._lines.append(line)
        if self._window_end is not None and line.end >= self._window_end:
            self._settle()

    def probe_sent(self, in_pipe: int) -> None:
        """The probe went into the server's stdin; ``in_pipe`` stderr bytes were unread."""
        if self._window_start is None:
            self._window_start = self.position + in_pipe

    def probe_answered(self, refused: bool, in_pipe: int) -> None:
        """The server answered the probe (with an error if ``refused``); ``in_pipe`` stderr
        bytes were unread then. The echo goes once every line up to there is read."""
        if self._settled or self._window_start is None:
            return
        if not refused:
            self._settled = True
            return
        self._window_end = self.position + in_pipe
        if self._line_start >= self._window_end:
            self._settle()

    def _settle(self) -> None:
        self._settled = True
        start, end = self._window_start, self._window_end
        assert start is not None and end is not None
        self._window_end = None
        window = [line for line in self._lines if line.start >= start and line.end <= end]
        first = next((i for i, line in enumerate(window) if PROBE_METHOD in line.text), None)
        if first is None:
            return
        head = first
        for i in range(first - 1, max(first - 1 - _HEAD_LINES, -1), -1):
            if _HEAD_MARK in window[i].text.lower():
                head = i
                break
        echo = set(map(id, window[head:]))
        kept = [line for line in self._lines if id(line) not in echo]
        self._lines = collections.deque(kept, maxlen=self._lines.maxlen)
