"""One incarnation's connection as the parts of its actor share it.

The live SDK client and its transport (``None`` between sessions), and the signals of the
connection's life: wanted (a request came for a lazy server), ready (connected, or a
login is needed), lost (a request found it closed), renew (a request found its session
forgotten by the server), probe now (the server looks hung), blocked on a login. Whoever
needs the connection waits here for it; a request that finds it dead gives itself back to
the mailbox here, for the next incarnation to send.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio
from mcp import Client

from ..actors import before_effect
from ..transports._receipts import Receipt
from ..transports._remote import TransportLike


class Link:
    """One incarnation's connection, as its parts see it."""

    __slots__ = (
        "auth_blocked",
        "client",
        "lost",
        "probe_now",
        "ready",
        "renew",
        "server",
        "transport",
        "wanted",
    )

    def __init__(self, server: Any) -> None:
        # ``server`` is its ServerHandle, which makes the actors: not imported here.
        self.server = server
        self.client: Client | None = None
        self.transport: TransportLike | None = None
        self.wanted = trio.Event()
        self.ready = trio.Event()
        self.lost = trio.Event()  # a request found the connection closed
        self.renew = trio.Event()  # a request found its session forgotten by the server
        self.probe_now = trio.Event()  # the server looks hung: probe it without waiting
        self.auth_blocked = trio.Event()  # waiting for an OAuth login: calls fail fast

    def dead(self) -> bool:
        """Whether the connection is known dead: nothing is sent on it."""
        transport = self.transport
        return self.lost.is_set() or (transport is not None and transport.closed.is_set())

    def receipt(self) -> Receipt:
        """A receipt for one request on this connection (see
        :mod:`~supervisor.transports._receipts`): undelivered until its transport says
        otherwise, if it tracks that."""
        receipt = Receipt()
        if getattr(self.transport, "tracks_delivery", False):
            receipt.delivered = False
        return receipt

    async def connected(self, not_this: Client | None = None) -> Client:
        """The live client, once there is one (other than ``not_this``); raises the
        server's auth error while it waits for a login."""
        self.wanted.set()
        while True:
            if self.server.auth_problem is not None:
                raise self.server.auth_exception()
            await self.ready.wait()  # also woken when a login is needed
            client = self.client
            if client is not None and client is not not_this:
                return client
            await trio.lowlevel.checkpoint()  # a session is being renewed: wait for it

    async def new_session(self, expired: Client) -> Client:
        """The server forgot ``expired``'s session: get (or wait for) a new one."""
        if self.client is expired:
            self.renew.set()
        return await self.connected(not_this=expired)

    async def requeue(self) -> None:
        """Give the current request back: this incarnation's connection is dead, and the
        request never reached the server, so the next incarnation sends it."""
        self.lost.set()  # makes sure the connection task notices and the incarnation ends
        with before_effect():
            # The incarnation ends (and the next one sends it), or the connection died
            # for want of an OAuth login: then it fails like any call made meanwhile.
            await self.auth_blocked.wait()
        raise self.server.auth_exception()

    def logged_in(self) -> None:
        """A login ended the wait: the connection that needed it is gone, the next one
        is fresh."""
        self.auth_blocked = trio.Event()
        self.lost = trio.Event()
        self.renew = trio.Event()


async def first(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as any of ``waits`` returns."""
    async with trio.open_nursery() as nursery:

        async def one(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        for wait in waits:
            nursery.start_soon(one, wait)
