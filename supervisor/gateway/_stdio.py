"""The gateway over stdio: JSON-RPC lines on standard input and output, read and written
by trio (the SDK's own stdio server wraps the files in worker threads).

Standard output is the protocol's alone: while the gateway serves, file descriptor 1 is
pointed at standard error, so a stray ``print`` from anywhere in the process lands there
instead of corrupting a message, and the messages go to a private duplicate of the
original descriptor. The client closing standard input ends the session. A line is read
as the SDK's 2026-07-28 HTTP transport reads a body, a lone surrogate escape
(``"\\ud800"``) included; a message that cannot be written back as JSON fails alone
(:mod:`supervisor.transports._encoding`). A 2026-07-28 ``tools/call`` that needs no
stream is served by the fast lane (:mod:`._stdio_fast`), past the SDK's stream loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
import msgspec
import trio
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage

from .._sdk import ReadStream, WriteStream, create_context_streams
from .._util._pipes import received
from ..errors import RequestUnencodable
from ..log import get_logger
from ..transports._encoding import encode
from ._core import Gateway
from ._stdio_fast import StdioFastLane

__all__ = ["DRAIN_TIMEOUT", "MAX_LINE_BYTES", "serve_stdio", "stdio_streams"]

log = get_logger("supervisor.gateway")

#: Seconds the last messages get to be written out when the session ends.
DRAIN_TIMEOUT = 5.0

#: The longest line (one message) read from standard input; a longer one is refused.
MAX_LINE_BYTES = 64 * 1024 * 1024

_ENCODER = msgspec.json.Encoder()


#: Makes a connection's fast lane: given the nursery its calls run in and how it writes
#: an answer (a JSON-RPC message, as JSON values).
Lane = Callable[[trio.Nursery, Callable[[dict[str, Any]], Awaitable[None]]], StdioFastLane]


@asynccontextmanager
async def stdio_streams(
    stdin: int = 0, stdout: int = 1, lane: Lane | None = None
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The session's message streams over the descriptors ``stdin`` and ``stdout``
    (a line that is not a JSON-RPC message reaches the session as its exception); the
    lines the fast lane ``lane`` makes takes are served there instead."""
    in_fd, out_fd = os.dup(stdin), os.dup(stdout)
    saved = os.dup(stdout) if stdout == 1 else None
    if saved is not None:
        os.dup2(2, 1)  # stray writes to standard output go to standard error
    reader = trio.lowlevel.FdStream(in_fd)
    writer = trio.lowlevel.FdStream(out_fd)
    to_session, from_wire = create_context_streams[SessionMessage | Exception](0)
    to_wire, from_session = create_context_streams[SessionMessage](0)

    writing = trio.Lock()  # the session's answers and the fast lane's, a line at a time
    fast: StdioFastLane | None = None
    buffer = bytearray()  # read, not yet taken: the reading's, whichever task reads

    async def reading(readers: trio.Nursery) -> None:
        """A task of the reading's: it reads (``read``) in a cancel scope of its own,
        the scope of the request it may serve itself once it has handed the reading on."""
        with trio.CancelScope() as scope:
            await read(readers, scope)

    async def read(readers: trio.Nursery, scope: trio.CancelScope) -> None:
        """Read standard input to its end, each line to the session or the fast lane;
        the task that reads it to its end closes the session's stream. A request the
        lane serves, alone in what was read, is served in this task, in ``scope`` (its
        own): the reading goes on in a new task of ``readers``, which runs once this one
        waits (so that the request is not left behind a round of trio's scheduler, nor
        behind a cancel scope of its own). Requests read together are each served in a
        task of their own."""
        handed_on = False
        try:
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                while True:
                    beside = False  # a request of this read was served beside it
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end]).strip()
                        del buffer[: end + 1]
                        if not line:
                            continue
                        taken = False if fast is None else fast.take(line)
                        if taken is False:
                            await to_session.send(_parse(line))
                        elif taken is not True:
                            assert fast is not None
                            if beside or buffer.find(b"\n") >= 0:
                                fast.start(taken)
                                beside = True
                                continue
                            handed_on = True
                            readers.start_soon(reading, readers)
                            await fast.serve(taken, scope)
                            return
                    if len(buffer) > MAX_LINE_BYTES:
                        await to_session.send(
                            ValueError(f"a message over {MAX_LINE_BYTES} bytes was dropped")
                        )
                        buffer.clear()
                    chunk = await received(reader, 65536)
                    if not chunk:
                        return
                    buffer.extend(chunk)
        finally:
            if not handed_on:
                to_session.close()

    async def write() -> None:
        async with from_session:
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                async for message in from_session:
                    try:  # one that cannot be written fails alone, not the writer
                        encoded = encode(message)
                    except RequestUnencodable as exc:
                        log.warning(
                            "a request that cannot be written as JSON dropped", error=str(exc)
                        )
                        continue
                    if encoded is not None:
                        async with writing:
                            await writer.send_all(encoded[1].encode() + b"\n")

    async def answer(message: dict[str, Any]) -> None:
        """Write the fast lane's answer ``message``; one that cannot be written as
        JSON is replaced as the session's would be (:func:`encode`)."""
        try:
            line = _ENCODER.encode(message)
        except (TypeError, ValueError, OverflowError):
            parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
            encoded = encode(SessionMessage(parsed))
            if encoded is None:
                return
            line = encoded[1].encode() + b"\n"
        else:
            line += b"\n"
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            if writing.locked():  # another answer is being written: after it
                async with writing:
                    await writer.send_all(line)
                return
            # Straight in, if the descriptor takes it now: no other task runs until this
            # one waits, so the lock is taken only to write the rest (in turn).
            try:
                sent = os.write(out_fd, line)
            except BlockingIOError:
                sent = 0
            if sent < len(line):
                writing.acquire_nowait()
                try:
                    await writer.send_all(line[sent:])
                finally:
                    writing.release()

    try:
        async with trio.open_nursery() as nursery, trio.open_nursery() as calls:
            if lane is not None:
                fast = lane(calls, answer)
            calls.start_soon(reading, calls)
            nursery.start_soon(write)
            try:
                yield from_wire, to_wire
            finally:
                # What the session sent is written out (for a bounded time), then done;
                # the reading, and the fast lane's calls, end with the session's
                # (cancelled, as its are).
                calls.cancel_scope.cancel()
                with suppress(anyio.ClosedResourceError):
                    await to_wire.aclose()
                nursery.cancel_scope.deadline = trio.current_time() + DRAIN_TIMEOUT
    finally:
        await reader.aclose()
        await writer.aclose()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        refused = exc
    # pydantic's parser refuses a lone surrogate escape ("\ud800"), which JSON's grammar
    # allows and the SDK's 2026-07-28 HTTP transport takes (it reads bodies with
    # json.loads): read as that reads it, such a request is answered — its arguments
    # refused by the gate — not dropped unanswered.
    try:
        value = json.loads(line, parse_constant=_no_constant)
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(value, by_name=False))
    except (ValueError, RecursionError):
        return refused


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


async def serve_stdio(gateway: Gateway, stdin: int = 0, stdout: int = 1) -> None:
    """Serve ``gateway`` to the one client on ``stdin``/``stdout`` until it closes its end
    (or this is cancelled), once the servers have made their first connections (at most
    15 s: :meth:`Gateway.first_listing`), so the capabilities declared are theirs."""
    # What the gateway declares is what its servers declare: learnt as they connect.
    await gateway.first_listing()
    server = gateway.server
    async with server.lifespan(server) as state:  # (as the SDK's Server.run does)

        def lane(
            calls: trio.Nursery, write: Callable[[dict[str, Any]], Awaitable[None]]
        ) -> StdioFastLane:
            return StdioFastLane(server, state, calls, write)

        async with stdio_streams(stdin, stdout, lane) as (read, write):
            await serve_dual_era_loop(
                server,
                read,
                write,
                lifespan_state=state,
                init_options=server.create_initialization_options(),
            )
