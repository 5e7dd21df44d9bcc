"""A server's resource subscriptions, kept on each of its connections.

What callers subscribed to (:meth:`ServerHandle.subscribe_resource
<supervisor.server._managed.ServerHandle.subscribe_resource>`) is a :class:`Subscribed` set that
lives as long as the server; each connection asks the server for the same, so a
subscription outlives a restart. Only a server that declared ``resources.subscribe`` is
asked:

* on the session-based protocol, ``resources/subscribe`` for each URI subscribed to and
  ``resources/unsubscribe`` for each dropped, as the set changes; the server's
  ``notifications/resources/updated`` arrive with its other notifications;
* on 2026-07-28, one ``subscriptions/listen`` stream naming the URIs (besides the
  stream that hears of list changes), opened again when the set changes — a stream
  names its URIs once, when it is opened; its updates reach the client's message
  handler as notifications, as the session-based protocol's do.

A refusal, or no answer within the server's request timeout, is logged: the connection
goes on, and the next change or connection asks again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import trio
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._util._deprecated import on_purpose
from ..log import get_logger

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["Subscribed", "keep_subscriptions"]

log = get_logger("supervisor.server")

#: Seconds before a dropped listen stream is opened again.
RELISTEN_AFTER = 1.0


class Subscribed:
    """The resource URIs (the server's own) subscribed to, and their changes: each change
    numbered, so a caller can wait until the live connection has asked for it."""

    def __init__(self) -> None:
        self.uris: set[str] = set()
        #: changes made so far, and how many of them the live connection asked for
        self.changes = 0
        self.applied = 0
        #: whether a connection keeps the subscriptions now (its server offers them)
        self.kept = False
        self._changed = trio.Event()
        self._applied = trio.Event()

    def add(self, uri: str) -> bool:
        """Subscribe to ``uri``; whether that changed anything."""
        if uri in self.uris:
            return False
        self.uris.add(uri)
        self._tell()
        return True

    def discard(self, uri: str) -> bool:
        """Drop ``uri``; whether that changed anything."""
        if uri not in self.uris:
            return False
        self.uris.discard(uri)
        self._tell()
        return True

    def next_change(self) -> tuple[int, trio.Event]:
        """The number of changes so far and an event set at the next one (take them
        before reading :attr:`uris`)."""
        return self.changes, self._changed

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the live connection, if one keeps the
        subscriptions, has asked its server for every change made so far."""
        target = self.changes
        with trio.move_on_after(timeout):
            while self.kept and self.applied < target:
                await self._applied.wait()

    def asked(self, change: int) -> None:
        """The live connection asked its server for the changes up to ``change``."""
        self.applied = max(self.applied, change)
        self._wake()

    def keeping(self, kept: bool) -> None:
        """A connection starts (or stops) keeping the subscriptions: it has asked for
        none of them yet."""
        self.kept = kept
        self.applied = 0
        self._wake()

    def _tell(self) -> None:
        self.changes += 1
        self._changed.set()
        self._changed = trio.Event()

    def _wake(self) -> None:
        self._applied.set()
        self._applied = trio.Event()


async def keep_subscriptions(
    client: Client,
    subscribed: Subscribed,
    server: str,
    timeout: float,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep ``client``'s server subscribed to ``subscribed``'s URIs until cancelled (see
    the module docstring). The updates reach the client's message handler, whichever
    era: the SDK hands it a listen stream's events as notifications too. Reports
    started once the server was asked for what is subscribed to now (answered or not):
    a connection counts as up once its subscriptions are back."""
    resources = client.server_capabilities.resources
    if resources is None or not resources.subscribe:
        task_status.started()
        return
    reported = False

    def asked(change: int) -> None:
        nonlocal reported
        subscribed.asked(change)
        if not reported:
            reported = True
            task_status.started()

    subscribed.keeping(True)
    try:
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await _listen(client, subscribed, server, timeout, asked)
        else:
            await _ask(client, subscribed, server, timeout, asked)
    finally:
        subscribed.keeping(False)


async def _ask(
    client: Client,
    subscribed: Subscribed,
    server: str,
    timeout: float,
    asked_for: Callable[[int], None],
) -> None:
    asked: set[str] = set()
    while True:
        change, changed = subscribed.next_change()
        wanted = set(subscribed.uris)
        for uri in sorted(wanted - asked):
            if await _request(client, "resources/subscribe", uri, server, timeout):
                asked.add(uri)
        for uri in sorted(asked - wanted):
            await _request(client, "resources/unsubscribe", uri, server, timeout)
            asked.discard(uri)
        asked_for(change)
        await changed.wait()


async def _request(client: Client, method: str, uri: str, server: str, timeout: float) -> bool:
    """Send one ``resources/subscribe`` or ``resources/unsubscribe``; whether it was
    answered without an error."""
    session = client.session
    asking = (
        session.subscribe_resource
        if method == "resources/subscribe"
        else session.unsubscribe_resource
    )
    with trio.move_on_after(timeout):
        try:
            await on_purpose(asking, uri)  # gone by 2026-07-28: not used there
            return True
        except MCPError as exc:
            log.warning(
                "subscription refused", server=server, method=method, uri=uri, error=exc.message
            )
            return False
    log.warning("subscription not answered", server=server, method=method, uri=uri)
    return False


async def _listen(
    client: Client,
    subscribed: Subscribed,
    server: str,
    timeout: float,
    asked_for: Callable[[int], None],
) -> None:
    while True:
        change, changed = subscribed.next_change()
        uris = sorted(subscribed.uris)
        if not uris:
            asked_for(change)
            await changed.wait()
            continue
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on, changed, nursery.cancel_scope)
            try:
                # the acknowledgment within the request timeout; the stream then as long
                # as it lasts
                with trio.CancelScope(deadline=trio.current_time() + timeout) as ack:
                    async with client.listen(resource_subscriptions=uris) as subscription:
                        ack.deadline = math.inf
                        asked_for(change)  # acknowledged
                        async for _ in subscription:  # each reaches the message handler
                            pass
                if ack.cancelled_caught:
                    log.warning("resource subscriptions not acknowledged", server=server)
                    asked_for(change)
                await changed.wait()  # closed (or not opened): open it again on a change
            except (ListenNotSupportedError, MCPError, TimeoutError) as exc:
                log.warning("resource subscriptions refused", server=server, error=str(exc))
                asked_for(change)
                await changed.wait()
            except (SubscriptionLost, anyio.BrokenResourceError):
                asked_for(change)  # not taken: the connection does not wait for it
                await trio.sleep(RELISTEN_AFTER)
                nursery.cancel_scope.cancel()


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
