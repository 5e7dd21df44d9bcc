"""Calls that skip the mailbox: run in their callers' own tasks, on the live connection.

The mailbox is for waiting (connecting, restarting); a connected server needs no queue.
A call goes straight onto the connection while it is live, not stopping, not dying, with
room for one more request in flight (:data:`MAX_IN_FLIGHT`). A graceful stop lets those
in flight finish; the incarnation's end cancels them like it aborts the mailbox's
requests — a call that had not reached the server (or may run twice, by the embedder's
opt-in) goes through the mailbox after all, any other may have taken effect.
"""

from __future__ import annotations

from typing import Any

import trio
from mcp import Client

from ..errors import CallMayHaveTakenEffect
from ._link import Link
from ._messages import CallTool, _NotSent
from ._requests import CallAnswer, Requests

#: Requests one connection serves at once; more wait in the mailbox.
MAX_IN_FLIGHT = 256


class DirectCalls:
    """The calls running in their callers' own tasks on one incarnation's connection."""

    __slots__ = ("_closing", "_ended", "_none_left", "_requests", "_scopes", "in_flight", "link")

    def __init__(self, link: Link, requests: Requests) -> None:
        self.link = link
        self._requests = requests
        self._scopes: set[trio.CancelScope] = set()
        #: calls on the connection now
        self.in_flight = 0
        self._none_left = trio.Event()
        self._closing = False
        self._ended = False

    def client(self) -> Client | None:
        """The client, if a call may skip the mailbox: connected, not stopping, not
        dying, with room for one more request in flight."""
        link = self.link
        client = link.client
        if client is None or self._closing or link.lost.is_set() or self.in_flight >= MAX_IN_FLIGHT:
            return None
        return client

    async def call(self, client: Client, message: CallTool, deadline: float) -> CallAnswer:
        """Run a call in the caller's own task, on the connected client.

        Raises :class:`_NotSent` when the call must go through the mailbox after all (the
        connection died before the request went out, or its session expired); the
        incarnation's end (:meth:`end`) wakes it like it aborts the mailbox's requests.
        Raises :class:`trio.TooSlowError` at ``deadline``.
        """
        requests = self._requests
        receipt = self.link.receipt()
        scope = trio.CancelScope(deadline=deadline)
        self._scopes.add(scope)
        self.in_flight += 1
        try:
            with scope:
                return await requests.call_tool(client, message, receipt, direct=True)
            if not self._ended:
                raise trio.TooSlowError
            # Cancelled by the end of this incarnation.
            server: Any = requests.server
            safe = server.retry_idempotent and requests.idempotent(message.tool)
            if receipt.withdraw() or safe:
                raise _NotSent
            raise CallMayHaveTakenEffect.during(server.name, message.tool)
        finally:
            self._scopes.discard(scope)
            self.in_flight -= 1
            if self.in_flight == 0:
                self._none_left.set()

    async def drain(self) -> None:
        """Graceful stop: no new direct calls; wait for those in flight to finish."""
        self._closing = True
        if self.in_flight:
            self._none_left = trio.Event()
            await self._none_left.wait()

    def end(self) -> None:
        """The incarnation ended: no new direct calls, and those in flight are cancelled."""
        self._closing = self._ended = True
        for scope in list(self._scopes):
            scope.cancel()
