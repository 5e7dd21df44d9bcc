"""Resource subscriptions through the gateway: clients' subscriptions routed by URI to the
backing server that offers the resource, its updates routed back to the subscribers only.

A handshake-era client subscribes with ``resources/subscribe`` (``unsubscribe`` ends it)
and hears ``notifications/resources/updated`` on its standalone channel; a 2026-07-28
client names URIs in a ``subscriptions/listen`` stream and hears them there, for as long
as the stream is open. A URI is subscribed to at its backing server
(:meth:`SupervisorHandle.subscribe_resource
<supervisor.runtime.SupervisorHandle.subscribe_resource>`, which asks each new connection
again: a subscription outlives a restart) while one client or stream wants it, and
dropped there once none does — a client that goes away without unsubscribing is noticed
at the next update of that URI.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import mcp_types as types
import trio
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

from ..errors import SupervisorError
from ..events._catalog import ResourceUpdated as ResourceUpdatedEvent
from ..events._catalog import kind_of
from ..log import get_logger

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..runtime import SupervisorHandle

__all__ = ["ResourceSubscriptions"]

log = get_logger("supervisor.gateway")

#: Seconds one client gets to take an update before it is skipped.
NOTIFY_TIMEOUT = 5.0


class ResourceSubscriptions:
    """Who is subscribed to which resource URI, through the gateway over ``sup``; the
    updates of 2026-07-28 listeners are published on ``bus``."""

    def __init__(
        self,
        sup: SupervisorHandle,
        bus: InMemorySubscriptionBus,
        allowed: Callable[[ServerRequestContext[Any, Any], str], bool] | None = None,
    ) -> None:
        self.sup = sup
        self._bus = bus
        #: whether a request's caller may hear of a URI (a team gateway's policy)
        self.allowed = allowed
        #: the handshake-era connections subscribed to each URI
        self._connections: dict[str, weakref.WeakSet[Any]] = {}
        #: the 2026-07-28 listen streams open on each URI
        self._streams: Counter[str] = Counter()
        #: the backing server each URI is subscribed to
        self._owners: dict[str, str] = {}
        #: serves ``subscriptions/listen``, noting the URIs of each stream
        self.listen = _Listen(self, bus)

    def wanted(self, uri: str) -> bool:
        """Whether a client or a stream is subscribed to ``uri``."""
        return bool(self._connections.get(uri)) or self._streams[uri] > 0

    async def subscribe(self, connection: Any, uri: str) -> None:
        """The client of ``connection`` subscribes to ``uri``; raises
        :class:`~supervisor.errors.UnknownResource` when no backing server offers it."""
        await self._hold(uri)
        if connection is not None:
            self._connections.setdefault(uri, weakref.WeakSet()).add(connection)

    async def unsubscribe(self, connection: Any, uri: str) -> None:
        """The client of ``connection`` is no longer subscribed to ``uri``."""
        held = self._connections.get(uri)
        if held is not None and connection is not None:
            held.discard(connection)
        await self._release(uri)

    @asynccontextmanager
    async def streaming(self, uris: Sequence[str]) -> AsyncIterator[None]:
        """While the block runs, a listen stream is subscribed to ``uris`` (one no backing
        server offers is honoured and never fires, as the protocol has it)."""
        for uri in uris:
            self._streams[uri] += 1
            with suppress(SupervisorError):
                await self._hold(uri)
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):  # the stream ends by being cancelled
                for uri in uris:
                    self._streams[uri] -= 1
                    await self._release(uri)

    async def _hold(self, uri: str) -> None:
        if uri not in self._owners:
            self._owners[uri] = await self.sup.subscribe_resource(uri)

    async def _release(self, uri: str) -> None:
        """Drop ``uri`` at its backing server once nobody wants it."""
        if self.wanted(uri):
            return
        self._connections.pop(uri, None)
        self._streams.pop(uri, None)
        owner = self._owners.pop(uri, None)
        if owner is not None:
            await self.sup.unsubscribe_resource(uri, server=owner)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Pass each update of a subscribed resource on, until cancelled."""
        async with self.sup.subscribe(kind_of(ResourceUpdatedEvent)) as updates:
            task_status.started()
            async for event in updates:
                if isinstance(event, ResourceUpdatedEvent):
                    await self.updated(event.uri)

    async def updated(self, uri: str) -> None:
        """The resource ``uri`` changed: tell its subscribers, and only them."""
        connections = list(self._connections.get(uri, ()))
        async with trio.open_nursery() as nursery:
            for connection in connections:
                nursery.start_soon(_tell, connection, uri)
        await self._bus.publish(ResourceUpdated(uri=uri))
        await self._release(uri)  # its clients may all be gone


async def _tell(connection: Any, uri: str) -> None:
    with trio.move_on_after(NOTIFY_TIMEOUT), suppress(Exception):
        await connection.send_resource_updated(uri)


class _Listen(ListenHandler):
    """The SDK's ``subscriptions/listen`` handler, the stream's resource URIs subscribed
    to at their backing servers while it is open."""

    def __init__(self, subscriptions: ResourceSubscriptions, bus: InMemorySubscriptionBus) -> None:
        super().__init__(bus)
        self._subscriptions = subscriptions

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        asked = params.notifications.resource_subscriptions or ()
        allowed = self._subscriptions.allowed
        if allowed is not None:  # a team gateway's caller hears only what they may read
            kept = [uri for uri in asked if allowed(ctx, uri)]
            if len(kept) != len(asked):
                notifications = params.notifications.model_copy(
                    update={"resource_subscriptions": kept}
                )
                params = params.model_copy(update={"notifications": notifications})
                asked = kept
        uris = list(dict.fromkeys(asked))
        async with self._subscriptions.streaming(uris):
            return await super().__call__(ctx, params)
