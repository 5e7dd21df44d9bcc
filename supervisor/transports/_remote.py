"""Transports as the server actor uses them: each one's end made visible.

:class:`TransportLike` is what the actor needs of a transport; a
:class:`~supervisor.transports._stdio.StdioTransport` is one, and :class:`Remote` makes one
of an SDK-style transport (Streamable HTTP, legacy SSE, WebSocket, in-memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import trio

from ..errors import AuthorizationFailed, AuthRequired, TransportError
from ._encoding import encode
from ._forward_remote import RemoteForwarding
from ._receipts import Answers

if TYPE_CHECKING:
    from types import TracebackType

    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from .._sdk import TransportStreams


class TransportLike(Protocol):
    """A transport as the server actor uses it (see :mod:`supervisor.transports`): what
    :func:`~supervisor.transports._open.open_transport` makes."""

    closed: trio.Event
    answers: Answers

    @property
    def failure(self) -> TransportError | AuthRequired | AuthorizationFailed | None: ...
    async def __aenter__(self) -> TransportStreams: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> bool | None: ...


class Remote:
    """Adapts an SDK-style remote transport: its end is seen when its read stream ends,
    and each request's answer as it comes in (``answers``; ``made_by_client`` as for
    :class:`~supervisor.transports._receipts.Answers`). Each message is tried as JSON in
    its sender's task before the transport gets it (:func:`~._encoding.encode`): one
    that cannot be written fails alone there, never in the transport's writer;
    ``name`` is the server's, for those errors."""

    def __init__(
        self,
        inner,  # noqa: ANN001
        *,
        tracks_delivery: bool = False,
        made_by_client: Callable[[types.ErrorData], bool] | None = None,
        name: str | None = None,
    ) -> None:
        self._inner = inner
        self.name = name
        self.tracks_delivery = tracks_delivery
        self.closed = trio.Event()
        self.failure: TransportError | AuthRequired | AuthorizationFailed | None = None
        self.answers = Answers(made_by_client)
        #: HTTP status of the first response, for the legacy-SSE fallback
        self.first_status: int | None = None
        #: the host and port a connection is held to while connected, to see the server
        #: go at once (:mod:`~supervisor.transports._watch`); ``None``: not watched
        self.watch_at: tuple[str, int] | None = None
        #: the requests forwarded past the session (:mod:`._forward_remote`)
        self.forwarding = RemoteForwarding(name or "remote")

    def saw_status(self, status: int) -> None:
        if self.first_status is None:
            self.first_status = status

    async def __aenter__(self) -> TransportStreams:
        read, write = await self._inner.__aenter__()
        sending = _Sending(write, self.answers, self.name)
        self.forwarding.attach(sending)
        return _Watched(read, self), sending

    async def __aexit__(self, *exc: object) -> bool | None:
        self.forwarding.close()
        return await self._inner.__aexit__(*exc)

    def ended(self) -> None:
        """The server's side of the stream ended: the connection is gone."""
        self.lose(TransportError("the server closed the connection"))

    def lose(self, failure: TransportError | AuthRequired | AuthorizationFailed) -> None:
        """The connection is gone, for ``failure`` (unless it already was)."""
        if not self.closed.is_set():
            self.failure = failure
            self.closed.set()
            self.forwarding.close()


class _Watched:
    """A transport's read stream that tells its :class:`Remote` when it ends, and each
    answer to a request forwarded past the session to its caller, not to the session
    (:meth:`~._forward_remote.RemoteForwarding.claim`)."""

    def __init__(self, inner, remote: Remote) -> None:  # noqa: ANN001 - an SDK ReadStream
        self._inner = inner
        self._remote = remote

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)  # last_context, close, ...

    async def receive(self) -> SessionMessage | Exception:
        remote = self._remote
        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                remote.ended()
                raise
            remote.answers.received(item)
            if not remote.forwarding.claim(item):  # (else a forwarded request's answer)
                return item

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _Sending:
    """A transport's write stream that tries each message as JSON, then shows each
    request to :class:`Answers` (in the sender's task, where its receipt is)."""

    def __init__(
        self,
        inner,  # noqa: ANN001 - an SDK WriteStream
        answers: Answers,
        server: str | None = None,
    ) -> None:
        self._inner = inner
        self._answers = answers
        self._server = server

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def send(self, item: SessionMessage) -> None:
        # The transport writes it again: the text is not kept, only its failure is caught.
        encoded = encode(item, server=self._server)
        if encoded is None:
            return  # a notification that cannot be written: dropped
        await self.send_written(encoded[0])

    async def send_written(self, item: SessionMessage) -> None:
        """Send ``item``, known to be writable as JSON and to declare what it should
        (a forwarded request: :mod:`._forward_remote`)."""
        self._answers.sent(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Sending:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
