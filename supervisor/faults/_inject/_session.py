"""Faults for transports that carry whole messages, not lines: in-memory and WebSocket.

:class:`FaultyTransport` wraps an SDK transport (an async context manager yielding the
``(read_stream, write_stream)`` pair of ``SessionMessage``) and puts a
:class:`~._link.Link` between it and the session. Each message is serialised as the
transports themselves do (``model_dump_json(by_alias=True, exclude_unset=True)``), carried
through the link, and parsed back on its way. What the link's actions mean here:

- a line that is not a JSON-RPC message (``garbage_line``, ``truncate``) reaching the
  session is what the transport delivers for an unparseable frame: an ``Exception`` item
  on the read stream (``parse`` makes it; WebSocket's is its
  :class:`~supervisor.errors.WebSocketFrameError`), which the session passes to its
  message handler and survives. Going to the server such a line cannot be carried (the
  transport takes messages, not text): it is dropped, and logged;
- ``kill`` (and ``exit_on_initialize``) lose the connection: both streams are closed and
  ``lost`` is told why, so the server actor sees its transport closed and restarts it;
- ``hang`` stops every message in both directions until resumed (``hang_ms``, or when
  the transport is left);
- ``close_stream`` towards the server closes the server's read side (it ends as on
  EOF); towards the client it ends the session's read side and the connection is lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from types import TracebackType

import anyio
import mcp_types as types
import trio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..._sdk import ReadStream, TransportStreams, WriteStream
from ...config._plan import TO_CLIENT, TO_SERVER
from ...errors import ProtocolViolation, TransportError
from ...log import get_logger, redact
from ._engine import FaultEngine
from ._link import Link

__all__ = ["FaultyTransport", "parse_message"]

log = get_logger("supervisor.faults")

_PREVIEW = 120
_CLOSED = (anyio.BrokenResourceError, anyio.ClosedResourceError, trio.ClosedResourceError)

Parse = Callable[[bytes], SessionMessage | Exception]


def parse_message(line: bytes, name: str = "server") -> SessionMessage | Exception:
    """``line`` as a message, or the :class:`~supervisor.errors.ProtocolViolation` that
    says it is not one (an item for the read stream, not raised)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        preview = redact(line[:_PREVIEW].decode("utf-8", "replace"))
        error = ProtocolViolation(
            f"MCP server {name!r} sent a message that is not JSON-RPC: {preview!r}"
        )
        error.__cause__ = exc
        return error


def _dump(item: SessionMessage) -> bytes:
    return item.message.model_dump_json(by_alias=True, exclude_unset=True).encode()


class FaultyTransport:
    """``inner`` (an SDK transport) with ``engine``'s faults injected into its messages.

    ``name`` is the server's, for messages; ``parse`` turns a line for the session into a
    message or the error item the transport would deliver (default:
    :func:`parse_message`); ``lost`` is called with the reason when an injected fault
    loses the connection (the server actor's transport marks itself closed with it).
    Entered once, like the transport it wraps.
    """

    def __init__(
        self,
        inner: AbstractAsyncContextManager[TransportStreams],
        engine: FaultEngine,
        *,
        name: str,
        parse: Parse | None = None,
        lost: Callable[[TransportError], None] | None = None,
    ) -> None:
        self._inner = inner
        self.engine = engine
        self.name = name
        self._parse = parse or (lambda line: parse_message(line, name))
        self._lost = lost
        self._stack: AsyncExitStack | None = None
        self._running = trio.Event()  # cleared while an injected hang holds messages
        self._running.set()
        self._nursery: trio.Nursery | None = None
        self._to_session: MemoryObjectSendStream[SessionMessage | Exception] | None = None
        self._to_server: WriteStream[SessionMessage] | None = None
        self._session_closed = False
        self._server_closed = False

    async def __aenter__(self) -> TransportStreams:
        if self._stack is not None:
            raise RuntimeError("a FaultyTransport can be entered only once")
        stack = AsyncExitStack()
        streams = await stack.enter_async_context(self._run())
        self._stack = stack
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def _run(self) -> AsyncIterator[TransportStreams]:
        for action in self.engine.decide_start():  # slow_start: the connection waits
            await trio.sleep((action.ms or 0.0) / 1000)
        async with self._inner as (inner_read, inner_write):
            to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
                0
            )
            write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
            self._to_session, self._to_server = to_session, inner_write
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                link = Link(self.engine, self, nursery, to_client=self._to_client_line)
                nursery.start_soon(self._pump_in, link, inner_read)
                nursery.start_soon(self._pump_out, link, from_session)
                try:
                    yield read_stream, write_stream
                finally:
                    link.retire()
                    self.resume()
                    nursery.cancel_scope.cancel()
                    for stream in (read_stream, write_stream, to_session, from_session):
                        stream.close()

    # -- the two pumps ---------------------------------------------------------------

    async def _pump_in(
        self, link: Link, inner_read: ReadStream[SessionMessage | Exception]
    ) -> None:
        """Server → session, through the link; when the server's side ends, so does the
        session's."""
        with suppress(*_CLOSED):
            async for item in inner_read:
                if isinstance(item, Exception):  # the transport's own error item
                    await self._deliver(item)
                    continue
                line = _dump(item)
                await link.carry(
                    TO_CLIENT, line, self._sender(line, item, self._deliver), self._to_server_line
                )
            await link.flush()
        self._end_session()

    async def _pump_out(
        self, link: Link, from_session: anyio.abc.ObjectReceiveStream[SessionMessage]
    ) -> None:
        """Session → server, through the link; when the session's side ends, so does the
        server's."""
        with suppress(*_CLOSED):
            async for item in from_session:
                line = _dump(item)
                await link.carry(
                    TO_SERVER, line, self._sender(line, item, self._send), self._to_client_line
                )
            await link.flush()
        self._close_server()

    def _sender(
        self,
        original: bytes,
        item: SessionMessage,
        send: Callable[[SessionMessage | Exception], Awaitable[None]],
    ) -> Callable[[bytes], Awaitable[None]]:
        """A ``forward`` for one message: the original message object (with its
        metadata) when the link passes the line on unchanged, else the line parsed."""

        async def forward(line: bytes) -> None:
            await send(item if line is original else self._parse(line))

        return forward

    async def _to_client_line(self, line: bytes) -> None:
        await self._deliver(self._parse(line))

    async def _to_server_line(self, line: bytes) -> None:
        await self._send(self._parse(line))

    async def _deliver(self, item: SessionMessage | Exception) -> None:
        """Hand ``item`` to the session (waiting out a hang); dropped once its side ended."""
        await self._running.wait()
        if self._session_closed or self._to_session is None:
            return
        with suppress(*_CLOSED):
            await self._to_session.send(item)

    async def _send(self, item: SessionMessage | Exception) -> None:
        """Hand ``item`` to the server (waiting out a hang); a line that is not a message
        cannot be, and is dropped."""
        await self._running.wait()
        if self._server_closed or self._to_server is None:
            return
        if isinstance(item, Exception):
            log.debug("injected non-message to the server dropped", server=self.name, error=item)
            return
        with suppress(*_CLOSED):
            await self._to_server.send(item)

    def _end_session(self) -> None:
        self._session_closed = True
        if self._to_session is not None:
            self._to_session.close()

    def _close_server(self) -> None:
        self._server_closed = True
        stream = self._to_server
        if stream is not None and self._nursery is not None:
            self._nursery.start_soon(_aclose, stream)

    def _lose(self, how: str) -> None:
        if self._lost is not None:
            self._lost(TransportError(f"the connection to MCP server {self.name!r} was {how}"))

    # -- the link's Target -----------------------------------------------------------

    def kill(self) -> None:
        """The connection is lost: both sides end, and the transport says why."""
        self._lose("lost (an injected fault: kill)")
        self._end_session()
        self._close_server()
        self._running.set()

    def stop(self) -> None:
        """Hold every message, both ways, until :meth:`resume`."""
        if self._running.is_set():
            self._running = trio.Event()

    def resume(self) -> None:
        self._running.set()

    async def close(self, direction: str) -> None:
        """End the server's read side (``to_server``) or the session's (``to_client``:
        the connection is lost)."""
        if direction == TO_SERVER:
            self._close_server()
            return
        self._lose("closed (an injected fault: close_stream)")
        self._end_session()


async def _aclose(stream: WriteStream[SessionMessage]) -> None:
    with suppress(*_CLOSED):
        await stream.aclose()
