"""Forwarded requests: sent as JSON and answered as JSON, past the SDK's session.

The gateway passes a plain ``tools/call`` on to a local server without rebuilding it,
or its answer, as the SDK's models (:mod:`supervisor.server._wire`). A
:class:`~._stdio.StdioTransport` carries such a request here, beside its SDK session,
on the same pipes and by the same rules:

* it gets an id from a range the session never reaches (:data:`FIRST_ID` up; the
  session counts from 0), so the two never meet;
* it goes into stdin through the transport's one writer, in turn with the session's
  messages — its :class:`~._receipts.Receipt` (set in ``delivery``) marked queued, then
  delivered, its bytes counted (:class:`~._stdin.StdinWriter`);
* its answer is taken off stdout before the session's parser sees it
  (:meth:`Forwarding.claim`): decoded once (msgspec), and handed to the waiting caller
  in its turn (:meth:`Forwarding.deliver`: once the session has taken in every message
  read before it, as the session's own answers are) — the receipt marked answered, the
  server heard from — a line over ``max_message_bytes`` answering it with the error the
  session's requests get;
* an error answer raises :class:`~mcp.shared.exceptions.MCPError` with its code,
  message and data, as the SDK's session raises it; the connection ending before the
  answer raises the SDK's own "Connection closed" (``CONNECTION_CLOSED``); a caller that
  gives up sends the server ``notifications/cancelled``, as the SDK's session does.

Nothing of this runs while no request is forwarded: :meth:`Forwarding.claim` looks at a
line only while an answer is awaited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import msgspec
import trio
import trio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.exceptions import MCPError

from ._receipts import Answers, Receipt, ToWriter, delivery

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage


__all__ = ["FIRST_ID", "Forwarding"]

#: The first id of a forwarded request: the SDK's session counts its own from 0, and
#: would need a trillion requests to get here; a server that keeps ids as JavaScript
#: numbers holds it exactly (below 2**53).
FIRST_ID = 1 << 40

#: Seconds the courtesy ``notifications/cancelled`` of an abandoned request may take to
#: be queued, as the SDK's session bounds its own.
_ABANDON_WRITE_TIMEOUT = 2.0


class _Head(msgspec.Struct):
    """What :meth:`Forwarding.claim` reads of a line first: its id, if any."""

    id: int | str | None = None


class _Answer(msgspec.Struct):
    """A JSON-RPC answer, its ``result`` or ``error`` as JSON values."""

    id: int
    jsonrpc: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


_HEAD = msgspec.json.Decoder(_Head)
_ANSWER = msgspec.json.Decoder(_Answer)
_ENCODER = msgspec.json.Encoder()


class _Waiter:
    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = trio.Event()
        #: the answer's result, or its error (an MCPError to raise)
        self.answer: dict[str, Any] | MCPError | None = None


class Forwarding:
    """The forwarded requests of the connection to the server ``name``; see the module
    docstring. ``answers`` is the transport's, which hears of each answer as it hears of
    the session's."""

    __slots__ = ("_answers", "_closed", "_next", "_now", "_queue", "_ready", "_waiting", "name")

    def __init__(self, name: str, answers: Answers) -> None:
        #: the server's name, in errors
        self.name = name
        self._answers = answers
        self._queue: ToWriter | None = None
        self._now: Callable[[Receipt | None, bytes], bool] | None = None
        self._waiting: dict[int, _Waiter] = {}
        #: answers claimed, to be handed over in their turn (:meth:`deliver`)
        self._ready: list[tuple[int, dict[str, Any] | MCPError]] = []
        self._next = FIRST_ID
        self._closed = False

    @property
    def available(self) -> bool:
        """Whether a request can be forwarded now: the connection is up."""
        return self._queue is not None and not self._closed

    def attach(self, queue: ToWriter, now: Callable[[Receipt | None, bytes], bool]) -> None:
        """Write each forwarded request into ``queue``, the transport's writer's — or
        have the writer write it ``now``, in its sender's task, when it can
        (:meth:`~._stdin.StdinWriter.write_now`)."""
        self._queue = queue
        self._now = now

    def close(self) -> None:
        """The connection is gone: each request still waiting fails with the SDK's
        "Connection closed"; none is forwarded from now on."""
        self._closed = True
        ready, self._ready = self._ready, []
        for request_id, answer in ready:  # read before it ended: answered
            self._deliver(request_id, answer)
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done.is_set():
                waiter.answer = MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
                waiter.done.set()

    async def request(self, method: str, params: bytes) -> dict[str, Any]:
        """Send ``method`` with ``params`` (written as JSON by the caller, which says
        what cannot be: :func:`~._encoding.encode_params`) and return the answer's
        result; raises :class:`~mcp.shared.exceptions.MCPError` for an error answer, or
        the connection ending first."""
        queue = self._queue
        if queue is None or self._closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        request_id = self._next
        self._next += 1
        line = b'{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}' % (
            request_id,
            _ENCODER.encode(method),
            params,
        )
        waiter = self._waiting[request_id] = _Waiter()
        receipt = delivery.get()
        if receipt is not None:
            receipt.delivered = False
            self._answers.expect(request_id, receipt)
        written = False
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            written = True  # from here a cancelled write may still have been delivered
            now = self._now
            if now is None or not now(receipt, line):
                try:
                    await queue.send((receipt, None, line))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    closed = MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
                    raise closed from None
            await waiter.done.wait()
        except trio.Cancelled:
            if written and not waiter.done.is_set():
                await self._cancel(queue, request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
        answer = waiter.answer
        if isinstance(answer, MCPError):
            raise answer
        assert answer is not None
        return answer

    async def _cancel(self, queue: ToWriter, request_id: int) -> None:
        """Tell the server the request ``request_id`` is abandoned, as the SDK does."""
        params = {"requestId": request_id, "reason": "caller cancelled"}
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        line = _ENCODER.encode(notice)
        if self._now is not None and self._now(None, line):
            return  # written at once, as the request was
        with trio.CancelScope(shield=True), trio.move_on_after(_ABANDON_WRITE_TIMEOUT):
            try:
                await queue.send((None, None, line))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    def claim(self, line: bytes) -> bool:
        """Whether ``line`` (read from stdout) answers a forwarded request: then it is
        handed to its caller here, and the session never sees it. A line this cannot
        read is the session's to parse (:meth:`claim_parsed` then)."""
        if not self._waiting:
            return False
        try:
            head = _HEAD.decode(line)
        except (msgspec.DecodeError, ValueError):
            return False
        request_id = head.id
        if type(request_id) is not int or request_id not in self._waiting:
            return False
        try:
            answer = _ANSWER.decode(line)
        except (msgspec.DecodeError, ValueError):
            return False  # (the session's parser reads it: claim_parsed)
        if answer.jsonrpc != "2.0":
            return False  # not JSON-RPC: the session's parser says so
        if answer.error is not None:
            try:
                error = types.ErrorData.model_validate(answer.error)
            except ValueError:
                return False  # not a JSON-RPC error: the session's parser says so
            self._claimed(request_id, _raised(error))
        elif answer.result is not None:
            self._claimed(request_id, answer.result)
        else:
            return False
        return True

    def claim_parsed(self, message: SessionMessage) -> bool:
        """Whether ``message``, as the session's parser read it, answers a forwarded
        request (one :meth:`claim` could not read: a number past 64 bits, say): then it
        is handed to its caller here."""
        if not self._waiting:
            return False
        answer = message.message
        if not isinstance(answer, types.JSONRPCResponse | types.JSONRPCError):
            return False
        request_id = answer.id
        if type(request_id) is not int or request_id not in self._waiting:
            return False
        if isinstance(answer, types.JSONRPCError):
            self._claimed(request_id, _raised(answer.error))
        else:
            self._claimed(request_id, dict(answer.result))
        return True

    def answer_error(self, request_id: object, error: types.ErrorData) -> bool:
        """Whether ``request_id`` is a forwarded request's: then it is answered with
        ``error`` (its answer was a line over ``max_message_bytes``)."""
        if type(request_id) is not int or request_id not in self._waiting:
            return False
        self._claimed(request_id, _raised(error))
        return True

    @property
    def claimed(self) -> bool:
        """Whether answers claimed wait to be handed over (:meth:`deliver`)."""
        return bool(self._ready)

    async def deliver(self, session: MemoryObjectSendStream[Any]) -> None:
        """Hand each answer claimed to its caller, once ``session`` (the stream to the
        SDK's session) has taken in every message read before it — waiting to receive
        the next, or gone: an answer does not overtake a notification the session has
        yet to act on (a cancellation of its handler, say), as the session's own
        answers do not."""
        while self._ready:
            stats = session.statistics()
            if stats.tasks_waiting_receive or not stats.open_receive_streams:
                break
            await (
                trio.lowlevel.checkpoint()
            )  # (the session's reader acts on what it took, then waits)
        ready, self._ready = self._ready, []
        for request_id, answer in ready:
            self._deliver(request_id, answer)

    def _claimed(self, request_id: int, answer: dict[str, Any] | MCPError) -> None:
        """The server answered ``request_id`` (heard now; handed over in turn)."""
        code = answer.error.code if isinstance(answer, MCPError) else None
        self._answers.answered(request_id, code)
        self._ready.append((request_id, answer))

    def _deliver(self, request_id: int, answer: dict[str, Any] | MCPError) -> None:
        waiter = self._waiting.get(request_id)
        if waiter is None:
            return  # its caller gave up meanwhile
        if self._answers.complete_by_default and isinstance(answer, dict):
            answer.setdefault("resultType", "complete")
        if not waiter.done.is_set():
            waiter.answer = answer
            waiter.done.set()


def _raised(error: types.ErrorData) -> MCPError:
    """The error an answer's ``error`` raises, as the SDK's session raises it."""
    return MCPError(code=error.code, message=error.message, data=error.data)
