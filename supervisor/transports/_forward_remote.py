"""Forwarded requests on a remote connection: past the SDK's session, on its transport.

The gateway passes a plain ``tools/call`` on to a remote server (Streamable HTTP, legacy
SSE, WebSocket, in-memory) without the SDK's session (:mod:`supervisor.server._wire`): the
call's params and its answer's result stay JSON (only the JSON-RPC envelope the transport
takes is the SDK's model), no result model is made, and the answer's JSON is passed back
as it came. The connection's transport — the SDK's, or ours
for WebSocket — still carries it, so everything the transport does for the session's
requests it does for these: the session's id, the negotiated version, the request's
own headers (what the session's stamp adds: ``Mcp-Method``, ``Mcp-Name``,
``Mcp-Param-*`` under 2026-07-28 — :func:`~supervisor._sdk.stamped`), OAuth, redirects
kept within the origin, an answer as JSON or as an event stream (and its resumption),
the notifications and requests the server sends on the way (handed to the session as
they come), the bounds and the fault plan:

* a request gets an id from a range the session never reaches (:data:`~._forward.FIRST_ID`
  up), its params are tried as JSON in its sender's task (what cannot be written raises
  there, unsent: :func:`~._encoding.encode_params`), and it goes onto the connection's
  write stream (:class:`~._remote._Sending`), its receipt told it is on its way, as the
  session's requests do;
* its answer is taken off the read stream, after :class:`~._receipts.Answers` heard of
  it and before the session's reader could (:meth:`RemoteForwarding.claim`): in the
  reader's turn, after every message read before it — as the session's own answers;
* an error answer raises :class:`~mcp.shared.exceptions.MCPError` with its code, message
  and data, as the session raises it (the transport's own errors for an answer that can
  never come among them: a POST answered 202, a stream ended without an answer); the
  connection ending first raises the SDK's own "Connection closed"; a caller that gives
  up sends ``notifications/cancelled``, as the session does (which the SDK's Streamable
  HTTP transport turns into ending the request's own POST under 2026-07-28).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import mcp_types as types
import trio
import trio.lowlevel
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ClientMessageMetadata, SessionMessage

from ._encoding import encode_params
from ._forward import _ABANDON_WRITE_TIMEOUT, FIRST_ID, _raised, _Waiter

__all__ = ["RemoteForwarding"]


class _Sends(Protocol):
    """A connection's write stream (:class:`~._remote._Sending`)."""

    async def send(self, item: SessionMessage, /) -> None: ...
    async def send_written(self, item: SessionMessage, /) -> None: ...


class RemoteForwarding:
    """The forwarded requests of a remote connection to the server ``name``; see the
    module docstring."""

    __slots__ = ("_closed", "_next", "_sending", "_waiting", "name")

    def __init__(self, name: str) -> None:
        #: the server's name, in errors
        self.name = name
        self._sending: _Sends | None = None
        self._waiting: dict[int, _Waiter] = {}
        self._next = FIRST_ID
        self._closed = False

    @property
    def available(self) -> bool:
        """Whether a request can be forwarded now: the connection is up."""
        return self._sending is not None and not self._closed

    def attach(self, sending: _Sends) -> None:
        """Send each forwarded request on ``sending``, the connection's write stream."""
        self._sending = sending

    def close(self) -> None:
        """The connection is gone: each request still waiting fails with the SDK's
        "Connection closed"; none is forwarded from now on."""
        self._closed = True
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done.is_set():
                waiter.answer = MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
                waiter.done.set()

    async def request(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        """Send ``method`` with ``params`` (JSON) and ``headers`` (the session's stamp's)
        and return the answer's result; raises
        :class:`~mcp.shared.exceptions.MCPError` for an error answer, or the connection
        ending first, and :class:`~supervisor.errors.RequestUnencodable`, unsent, for
        params that cannot be written as JSON."""
        sending = self._sending
        if sending is None or self._closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        encode_params(method, params, server=self.name)  # (what cannot be written fails here)
        request_id = self._next
        self._next += 1
        message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        metadata = ClientMessageMetadata(headers=dict(headers)) if headers else None
        waiter = self._waiting[request_id] = _Waiter()
        written = False
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            written = True  # from here a cancelled write may still have been delivered
            try:
                await sending.send_written(SessionMessage(message, metadata=metadata))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                closed = MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
                raise closed from None
            await waiter.done.wait()
        except trio.Cancelled:
            if written and not waiter.done.is_set():
                await self._cancel(sending, request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
        answer = waiter.answer
        if isinstance(answer, MCPError):
            raise answer
        assert answer is not None
        return answer

    async def _cancel(self, sending: _Sends, request_id: int) -> None:
        """Tell the server the request ``request_id`` is abandoned, as the SDK does."""
        params = {"requestId": request_id, "reason": "caller cancelled"}
        notice = types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params=params
        )
        with trio.CancelScope(shield=True), trio.move_on_after(_ABANDON_WRITE_TIMEOUT):
            try:
                await sending.send(SessionMessage(notice))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    def claim(self, item: object) -> bool:
        """Whether ``item`` (read from the connection, heard of by its
        :class:`~._receipts.Answers`) answers a forwarded request: then it is handed to
        its caller here, and the session never sees it."""
        if not self._waiting:
            return False
        message = item.message if isinstance(item, SessionMessage) else None
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return False
        request_id = message.id
        if type(request_id) is not int:
            return False
        waiter = self._waiting.get(request_id)
        if waiter is None:
            return False
        if not waiter.done.is_set():
            if isinstance(message, types.JSONRPCError):
                waiter.answer = _raised(message.error)
            else:
                waiter.answer = dict(message.result)
            waiter.done.set()
        return True
