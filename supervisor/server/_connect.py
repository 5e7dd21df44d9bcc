"""Connecting one session with the server, and serving it until it ends.

Connecting — the transport, the MCP handshake, the tool listing — holds one of the
server's start slots, if it has them (:mod:`._startup`): it waits its turn first, and
``initTimeout`` runs from then until the tools are listed. A 2026-07-28 connection
listens for change notices before it lists, so none slips in between. The first
connection lists resources and prompts too before it counts as connected; a later one
(a restart) is up as soon as it can take calls, and lists them right after. Then, until
the connection closes, is found lost or its session is to be renewed, the subscriptions
are kept (:mod:`._subscriptions`), the connection probed (:mod:`._probes`) and a
Streamable HTTP server's port watched.

A session ends with why it must be started over (the server forgot it; a ``type:
remote`` server refused Streamable HTTP and is tried again over legacy SSE), or with
the error that ends the incarnation: the handshake refused (an HTTP error status, said
with what to check), not done within ``initTimeout``, or the connection lost. Each end
is reported (:mod:`._reports`); one for want of an OAuth login is a state of its own
(:mod:`._login`).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import trio
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..actors._errors import collapse
from ..errors import (
    ConnectTimeout,
    HTTPStatusError,
    ServerRequestError,
    TransportError,
    status_phrase,
)
from ..events import _catalog as events
from ..transports._errors import safe_url
from ..transports._remote import TransportLike
from ..transports._stdio import StdioTransport
from ._client import open_client
from ._link import Link, first
from ._listing import Listings, listen_ack_wait
from ._login import AuthError, Login
from ._probes import Probed, keep_probing, watch_connection
from ._reports import Reports
from ._startup import Turn
from ._subscriptions import keep_subscriptions
from ._wire import ask_log_level


class Incarnation(Probed, Protocol):
    """What connecting needs of the server actor incarnation it connects: what probing
    needs (its connection is probed), whether it is stopping, and its nursery."""

    nursery: trio.Nursery

    @property
    def stopping(self) -> bool: ...


class Connector:
    """Runs one incarnation's sessions with the server, one at a time, each from its
    transport to its end."""

    __slots__ = ("_turn", "link", "listings", "login", "owner", "reports", "server", "state")

    def __init__(
        self,
        owner: Incarnation,
        link: Link,
        listings: Listings,
        reports: Reports,
        login: Login,
    ) -> None:
        self.owner = owner
        # ``server`` is its ServerHandle and ``state`` its ServerState (not imported here:
        # they import the actor, which imports this)
        self.server: Any = owner.server
        self.state: Any = owner.state
        self.link = link
        self.listings = listings
        self.reports = reports
        self.login = login
        self._turn: Turn | None = None  # a start slot queued for early, not yet used

    def queue(self) -> None:
        """Queue for a start slot now (the tree starts its children one after the other,
        so servers started or restarted together connect in that order)."""
        self._turn = self._take_turn()

    def _take_turn(self) -> Turn | None:
        slots = self.server.start_slots
        return None if slots is None else slots.turn()

    def close(self) -> None:
        """The incarnation ended: a start slot queued for and not used is the next
        server's."""
        if self._turn is not None:
            self._turn.close()

    async def session(self) -> str | None:
        """Connect and serve one session; why it must be started over, else it raises.

        Connecting (spawn, handshake, tool listing) holds one of the server's start
        slots, if it has them: it waits its turn first, and ``initTimeout`` runs from then.
        """
        turn = self._turn if self._turn is not None else self._take_turn()
        self._turn = None
        try:
            return await self._connect_and_serve(turn)
        finally:
            if turn is not None:
                turn.close()

    async def _connect_and_serve(self, turn: Turn | None) -> str | None:
        server = self.server
        config = server.config
        link = self.link
        reports = self.reports
        self.state.connecting()
        if turn is not None and not turn.holding:
            try:
                await turn.wait()
            except trio.Cancelled:
                reports.stopped(None, connected=False)
                raise
        # Tries in a row, counted from 1 as mcp.error and the status count them: the one
        # after n failures in a row is n + 1, and the last is the first plus the retries.
        retries = config.max_attempts if server.retries else 0
        server.emit(
            events.Connecting(
                server=server.name, attempt=self.state.attempt + 1, max_attempts=retries + 1
            )
        )
        transport = link.transport = server.transport()
        began = trio.current_time()
        connected = False
        try:
            # The handshake's deadline is lifted once it is done; the client context
            # (and the nurseries inside it) stays within this one scope throughout.
            with trio.CancelScope(deadline=began + config.init_timeout) as handshake:
                try:
                    nursery = self.owner.nursery
                    async with open_client(server, transport, self.listings, nursery) as client:
                        async with trio.open_nursery() as watchers:
                            # Listen for changes before listing: none can slip in between.
                            # The stream is optional: not acknowledged within a short
                            # wait of its own, the server is connected without it.
                            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                                await watchers.start(
                                    self.listings.listen_for_changes,
                                    client,
                                    listen_ack_wait(config.init_timeout),
                                )
                            tools = await self.listings.all_tools(client)
                            handshake.deadline = math.inf
                            connected = True
                            if turn is not None:
                                turn.close()  # listed: the next server may start
                            # The first connection lists resources and prompts before it
                            # counts as connected; a later one (a restart) is up as soon as
                            # it can take calls, and lists them right after (see below),
                            # the lists of the connection before served meanwhile.
                            relist = self.state.listed
                            if not relist:
                                await self.listings.extras(client, ("resources", "prompts"))
                            if server.log_level is not None:  # before any call is sent
                                await ask_log_level(server, client, server.log_level)
                            await watchers.start(  # before any call is sent, too
                                keep_subscriptions,
                                client,
                                server.subscribed,
                                server.name,
                                config.timeout,
                            )
                            reports.connected(client, tools, trio.current_time() - began)
                            if relist:
                                watchers.start_soon(self.listings.extras_after_connect, client)
                            watchers.start_soon(keep_probing, self.owner, client, transport)
                            address = getattr(transport, "watch_at", None)
                            if address is not None:
                                watchers.start_soon(
                                    watch_connection, self.owner, transport, address
                                )
                            await first(transport.closed.wait, link.lost.wait, link.renew.wait)
                            watchers.cancel_scope.cancel()
                        if not (transport.closed.is_set() or link.lost.is_set()):
                            link.renew = trio.Event()
                            link.ready = trio.Event()
                            link.client = None
                            return "session expired"  # leaving the client ends the session
                        raise transport.failure or TransportError(
                            f"the connection to MCP server {server.name!r} closed"
                        )
                except Exception as exc:  # the SDK wraps its errors in exception groups
                    error = collapse(exc)
                    if not isinstance(error, MCPError):
                        raise
                    if self._falls_back(transport, connected):
                        return "Streamable HTTP refused (HTTP 4xx): falling back to legacy SSE"
                    if not connected and (refused := self._refused(transport)) is not None:
                        raise refused from error
                    raise transport.failure or ServerRequestError(
                        f"MCP server {server.name!r} failed the handshake: {error.message}",
                        server=server.name,
                        code=error.code,
                    ) from error
            if handshake.cancelled_caught:
                # (what it wrote meanwhile, and whether it was fetching its package)
                said = transport.stalled() if isinstance(transport, StdioTransport) else ""
                raise transport.failure or ConnectTimeout(
                    f"MCP server {server.name!r} did not complete the MCP handshake within "
                    f"{config.init_timeout} s (initTimeout){said}",
                    server=server.name,
                )
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException as exc:
            if self.owner.stopping or isinstance(collapse(exc), trio.Cancelled):
                reports.stopped(transport, connected)
            elif isinstance(transport.failure, AuthError):
                self.login.blocked(transport.failure, connected)
            else:
                reports.failed(transport, connected, exc)
            raise

    def _falls_back(self, transport: TransportLike, connected: bool) -> bool:
        """A ``type: remote`` server answered the first POST with a 4xx: per the MCP
        spec's backwards compatibility, try it as a legacy SSE server (and keep to it)."""
        status = getattr(transport, "first_status", None)
        config = self.server.config
        if connected or self.state.use_sse or not getattr(config, "remote_fallback", False):
            return False
        if status is None or not 400 <= status < 500:
            return False
        self.state.fell_back_to_sse()
        return True

    def _refused(self, transport: TransportLike) -> HTTPStatusError | None:
        """The handshake's first answer was an HTTP error status: that error, retryable
        unless retrying will not change it (401, 403, 404, …), then naming what to check."""
        status = getattr(transport, "first_status", None)
        if status is None or status < 400:
            return None
        url = safe_url(str(self.server.config.url))
        phrase = status_phrase(status)
        message = f"MCP endpoint {url} answered the handshake with HTTP {status}{phrase}"
        if status in (404, 405, 410):
            message += "; check the URL: no MCP endpoint is there"
        elif status in (401, 403):
            broker = self.server.broker
            oauth = broker is not None and broker.speaks_oauth is not False
            message += "; the server wants credentials it did not get or accept: " + (
                "it refused even a fresh OAuth token (check the account's rights)"
                if oauth
                else "check the server's headers (it offers no OAuth login)"
            )
        return HTTPStatusError(message, url=url, status_code=status)
