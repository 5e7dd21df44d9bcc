"""Receipts: whether a request reached the server, and whether its answer came back.

A transport that can tell marks each request's :class:`Receipt` (set in :data:`delivery`
around sending it) as it goes out and as its answer comes in (:class:`Answers`), so the
server actor knows whether a request that met a dead connection may be sent again, and
whether an error it raised is the server's own (:func:`connection_closed`).
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import trio
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from ._encoding import encode

if TYPE_CHECKING:
    from types import TracebackType


class Receipt:
    """Whether a request reached the server, and whether its answer came back, as far as
    the transport can tell.

    Set :data:`delivery` to a receipt around sending one request (or the requests of one
    listing). ``delivered`` stays ``None`` on a transport that cannot tell; a transport
    that can sets it to ``False`` when the request is queued and ``True`` once it has been
    handed to the server (for stdio: written into its stdin pipe). A request still
    ``False`` when the connection dies never reached the server, so sending it again is
    safe. A transport may also set ``True`` back to ``False`` as the connection dies, for a
    request it finds the server never read (stdio, on Linux: all its bytes still unread in
    the dead server's stdin pipe), before it reports the end of the connection.

    Deciding that a request never reached the server, to send it again elsewhere, is
    :meth:`withdraw`: it also keeps the transport from handing it over later (a writer
    that had not got to it yet) — the writer asks :meth:`deliver` first. Both check and
    set in one step (no checkpoint between), so exactly one of them wins.

    ``answered`` becomes ``True`` when the server's answer to the request comes in on the
    connection (see :class:`Answers`), and ``answer_code`` is that answer's error code
    (``None`` for a result): an error of that code the request then raises is the
    server's own — any other "Connection closed" is the SDK's.
    """

    __slots__ = (
        "__weakref__",
        "_progress_lot",
        "answer_code",
        "answered",
        "delivered",
        "http_status",
        "logs_before",
        "progress_done",
        "progress_seen",
        "withdrawn",
    )

    def __init__(self) -> None:
        self.delivered: bool | None = None
        self.withdrawn = False
        self.answered = False
        self.answer_code: int | None = None
        #: the HTTP status its response came with, on an HTTP transport (the last, if
        #: it took more than one: an OAuth retry)
        self.http_status: int | None = None
        #: log messages the connection had brought in when the answer came
        self.logs_before = 0
        #: progress notifications for the request that came in before its answer, and
        #: those its progress callback is done with (see :meth:`progress_settled`)
        self.progress_seen = 0
        self.progress_done = 0
        self._progress_lot: trio.lowlevel.ParkingLot | None = None

    def progress_handled(self) -> None:
        """The request's progress callback is done with one notification."""
        self.progress_done += 1
        if self._progress_lot is not None:
            self._progress_lot.unpark_all()

    async def progress_settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the progress notifications that came
        in before the answer are handled: the SDK hands each to the callback in a task of
        its own, which the answer may overtake — and a relay that passes them on must
        not be overtaken by the answer it passes on too."""
        with trio.move_on_after(timeout):
            while self.progress_done < self.progress_seen:
                if self._progress_lot is None:
                    self._progress_lot = trio.lowlevel.ParkingLot()
                await self._progress_lot.park()

    def withdraw(self) -> bool:
        """Whether the request certainly never reached the server — and now never will
        on this connection: ``True`` only while it is still queued (``delivered`` is
        ``False``)."""
        if self.delivered is False:
            self.withdrawn = True
            return True
        return False

    def deliver(self) -> bool:
        """The transport is about to hand the request to the server: ``False`` if it was
        withdrawn (then it must not be sent), else it counts as delivered from now on."""
        if self.withdrawn:
            return False
        self.delivered = True
        return True


#: What a transport's writer is given: each message's receipt, the message (``None``
#: for a forwarded one: :mod:`._forward`) and its JSON text.
Written = tuple[Receipt | None, SessionMessage | None, str | bytes]
#: The writer's queue, as its senders hold it.
ToWriter = anyio.abc.ObjectSendStream[Written]

#: The receipt of the request being sent from the current task, if any.
delivery: contextvars.ContextVar[Receipt | None] = contextvars.ContextVar(
    "supervisor_transport_delivery", default=None
)


def connection_closed(error: MCPError, receipt: Receipt) -> bool:
    """Whether ``error``, raised by the request ``receipt`` was set around, is the SDK
    saying that the connection closed before the answer came — not the server answering
    with an error of the same code.

    The SDK uses ``CONNECTION_CLOSED`` (-32000) for its own "Connection closed", and a
    server may send -32000 too: it is the first of JSON-RPC's implementation-defined
    server error codes, and many servers use it for any failure. The code cannot tell
    them apart; where the error came from can. The SDK makes its own when the read stream
    ends, when the write stream is gone, or when a request is sent after either — none of
    which passes through the transport's read side, where :class:`Answers` marks the
    receipt of every request the server answered. So: that code, and no answer came.
    """
    if error.code != types.CONNECTION_CLOSED:
        return False
    # An answer came but it was a result, or another error, and still the request says
    # "Connection closed": the answer never reached the SDK (the connection went first).
    return not receipt.answered or receipt.answer_code != types.CONNECTION_CLOSED


class Answers:
    """Tells each request's :class:`Receipt` when the server's answer to it comes in.

    ``sent`` is called with each outgoing message in the sender's task (where
    :data:`delivery` holds its receipt), ``received`` with each incoming one before the
    SDK sees it. Receipts are held weakly: a request whose answer never comes costs
    nothing once its sender is gone. ``made_by_client`` picks out the errors the
    transport's own client code puts on the read stream in place of an answer that can
    never come (the SDK's Streamable HTTP client does, for a response stream that ended
    without one): those answer nothing.

    ``heard`` is when (trio's clock) the server last sent anything — an answer, a
    notification, a request of its own: the connection's proof of life, which health
    probes are skipped for while it is recent (``None`` until the first).

    ``complete_by_default``: the connection speaks 2026-07-28, whose results carry a
    ``resultType`` — one without is ``complete``, as that protocol says a client must take
    it (SEP-2322); it is written in before the SDK, which requires it, reads the result.
    """

    def __init__(self, made_by_client: Callable[[types.ErrorData], bool] | None = None) -> None:
        self._waiting: weakref.WeakValueDictionary[types.RequestId, Receipt] = (
            weakref.WeakValueDictionary()
        )
        self._made_by_client = made_by_client
        #: log messages (``notifications/message``) received, and handed to the
        #: client's logging callback so far (see :meth:`logs_handled`)
        self.logs = 0
        self.logs_done = 0
        self._log_handled = trio.lowlevel.ParkingLot()
        self.heard: float | None = None
        self.complete_by_default = False

    def log_handled(self) -> None:
        """The client's logging callback is done with one log message."""
        self.logs_done += 1
        self._log_handled.unpark_all()

    async def logs_handled(self, receipt: Receipt, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the log messages that came in before
        ``receipt``'s answer are handled: the SDK hands each to the logging callback in
        a task of its own, which a caller's answer may overtake."""
        with trio.move_on_after(timeout):
            while self.logs_done < receipt.logs_before:
                await self._log_handled.park()

    def sent(self, item: SessionMessage) -> None:
        message = item.message
        receipt = delivery.get()
        if receipt is not None and isinstance(message, types.JSONRPCRequest):
            self.expect(coerce_request_id(message.id), receipt)

    def expect(self, request_id: types.RequestId, receipt: Receipt) -> None:
        """The request ``request_id``, whose receipt is ``receipt``, is on its way."""
        self._waiting[request_id] = receipt

    def answered(self, request_id: types.RequestId, code: int | None) -> None:
        """The server answered the request ``request_id``: with an error of ``code``, or
        (``None``) a result."""
        self.heard = trio.current_time()
        receipt = self._waiting.pop(request_id, None)
        if receipt is not None:
            receipt.answered = True
            receipt.answer_code = code
            receipt.logs_before = self.logs

    def received(self, item: object) -> None:
        message = item.message if isinstance(item, SessionMessage) else None
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message is not None:
                self.heard = trio.current_time()
            if isinstance(message, types.JSONRPCNotification):
                if message.method == "notifications/message":
                    self.logs += 1
                elif message.method == "notifications/progress":
                    self._progress(message.params)
            return
        if message.id is None:
            return
        if (
            self.complete_by_default
            and isinstance(message, types.JSONRPCResponse)
            and isinstance(message.result, dict)
        ):
            message.result.setdefault("resultType", "complete")
        if (
            isinstance(message, types.JSONRPCError)
            and self._made_by_client is not None
            and self._made_by_client(message.error)
        ):
            return
        code = message.error.code if isinstance(message, types.JSONRPCError) else None
        self.answered(coerce_request_id(message.id), code)

    def _progress(self, params: object) -> None:
        """Count a progress notification with the request it is for (the SDK's client
        makes each request's id its progress token), while its answer is awaited."""
        token = params.get("progressToken") if isinstance(params, dict) else None
        if isinstance(token, str | int) and not isinstance(token, bool):
            receipt = self._waiting.get(coerce_request_id(token))
            if receipt is not None:
                receipt.progress_seen += 1


#: Writes a message (its receipt, its JSON text, the message) now, in its sender's task,
#: if it can: ``False`` to queue it instead (:meth:`~._stdin.StdinWriter.write_now`).
WriteNow = Callable[[Receipt | None, bytes, SessionMessage], bool]


class ReceiptStream:
    """A write stream that remembers, with each message, the sender's receipt — and its
    JSON text, written in the sender's task (:func:`~._encoding.encode`: a request that
    cannot be written raises there, unsent; ``server`` names the server in errors). With
    ``now``, a message is handed to it first, to be written at once if it can."""

    def __init__(
        self,
        inner: anyio.abc.ObjectSendStream[Written],
        answers: Answers,
        server: str | None = None,
        now: WriteNow | None = None,
    ):
        self._inner = inner
        self._answers = answers
        self._server = server
        self._now = now

    async def send(self, item: SessionMessage) -> None:
        encoded = encode(item, server=self._server)
        if encoded is None:
            return  # a notification that cannot be written: dropped
        item, text = encoded
        receipt = delivery.get()
        if receipt is not None:
            receipt.delivered = False
        self._answers.sent(item)
        now = self._now
        if now is not None:
            await trio.lowlevel.checkpoint_if_cancelled()
            if now(receipt, text.encode(), item):
                return
        await self._inner.send((receipt, item, text))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> ReceiptStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
