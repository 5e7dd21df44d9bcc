"""Reading a pipe in one of trio's scheduling rounds, not two.

trio's ``FdStream.receive_some`` checkpoints first, then reads, then — the pipe empty,
as it is each time a whole message has been read — waits until it is readable and
reads again: a round of trio's scheduler for the checkpoint, another for the wait. A
reader that takes one message at a time (a server's stdout, the gateway's stdin) pays
both for every message. :func:`received` waits first (a checkpoint itself), then reads.
"""

from __future__ import annotations

import errno
import os

import trio

__all__ = ["received"]


async def received(stream: trio.abc.ReceiveStream, max_bytes: int) -> bytes | bytearray:
    """What ``stream.receive_some(max_bytes)`` returns (``b""`` at its end), for a pipe
    (a ``FdStream``) read once it is readable; any other stream is asked as it is. Its
    one reader must be the only task that reads it."""
    if not isinstance(stream, trio.lowlevel.FdStream):
        return await stream.receive_some(max_bytes)
    fd = stream.fileno()
    if fd < 0:
        raise trio.ClosedResourceError("file was already closed")
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue  # (woken for nothing)
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("file was already closed") from None
            raise trio.BrokenResourceError from exc
