"""The server actor: one incarnation holds at most one SDK session with the server.

An incarnation is started by the supervision tree and serves the server's mailbox; it
reports to the tree by how it ends (a crash, a normal exit when a local server ended
cleanly on its own) and writes the server's :class:`~._state.ServerState` through its
named methods. It owns its parts, each in a module of its own:

* :class:`~._link.Link` — its connection as the parts share it: client, transport, the
  signals of its life, and the waits for it;
* :class:`~._connect.Connector` — connecting one session after another, and serving each
  until it ends;
* :class:`~._login.Login` — a connection that needs an OAuth login, waiting for one;
* :class:`~._listing.Listings` — listing what the server offers, again when it changed;
* :class:`~._requests.Requests` — sending one request on the connection, and what became
  of it (:mod:`._wire` puts it on the SDK client, :mod:`._refusals` says its failures);
* :class:`~._direct.DirectCalls` — calls that skip the mailbox, in their callers' tasks;
* :class:`~._reports.Reports` — what became of the connection, to the state and the bus.

The actor itself answers its mailbox's messages and runs the connection task: sessions
one after another (a server that forgot the session gets a new one; a ``remote`` server
that refuses Streamable HTTP is tried again over legacy SSE; a login ends the wait for
one), until the incarnation ends.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import trio
from mcp import Client

from ..actors import Actor, Normal, before_effect
from ..errors import ServerExited
from ..events import _catalog as events
from ..log import get_logger
from ..transports._remote import TransportLike
from . import _tasks as tasks
from ._connect import Connector
from ._direct import MAX_IN_FLIGHT, DirectCalls
from ._link import Link
from ._listing import Listings
from ._login import Login
from ._messages import (
    CallTool,
    Complete,
    GetPrompt,
    ListTools,
    ReadResource,
    TaskRequest,
    _NotSent,
)
from ._reports import Reports
from ._requests import CallAnswer as CallAnswer
from ._requests import Requests
from ._wire import ask_log_level, made_for, prompt, read

log = get_logger("supervisor.server")

#: How long a probe may take before it counts as unanswered.
PING_TIMEOUT = 10.0


class ServerActor(Actor):
    """One incarnation: at most one SDK ``Client`` session with the server, its work
    done by its parts (see the module)."""

    max_concurrency = MAX_IN_FLIGHT

    def __init__(self, server: Any) -> None:
        # ``server`` is its ServerHandle, which makes the actors: not imported here.
        self.server = server
        #: the server's state: this actor writes it (see :class:`ServerState`)
        self.state = state = server.state
        self.number = state.began(self)
        self.link = link = Link(server)
        self.reports = reports = Reports(server, state, link)
        self.login = Login(server, state, link)
        self.requests = requests = Requests(server, state.health, link, self.number)
        self.direct_calls = direct = DirectCalls(link, requests)
        #: the client, if a call may skip the mailbox (see :meth:`DirectCalls.client`)
        self.direct = direct.client
        #: run a call in the caller's own task (see :meth:`DirectCalls.call`)
        self.call_directly = direct.call
        #: a call to the server timed out (see :meth:`Reports.call_timed_out`)
        self.call_timed_out = reports.call_timed_out
        #: a call to the server was answered (see :meth:`Reports.call_answered`)
        self.call_answered = reports.call_answered
        #: this incarnation's connection started the local server as a process
        self.spawned = reports.spawned
        #: an idle connection is held to the server's port (see :mod:`._probes`)
        self.watched = False

    @property
    def client(self) -> Client | None:
        """The live connection's SDK client (``None`` between sessions)."""
        return self.link.client

    @property
    def transport(self) -> TransportLike | None:
        """The transport of the connection made last."""
        return self.link.transport

    async def init(self) -> None:
        server = self.server
        self.state.live(self)
        self.listings = Listings(server, self.nursery, lambda: self.link.client)
        self.connector = Connector(self, self.link, self.listings, self.reports, self.login)
        if server.users is not None:  # a perUser server's callers' sessions run here
            server.users.attach(self.nursery)
        eager = not server.config.lazy or self.number > 1 or server.address.statistics().queued > 0
        if eager:
            self.link.wanted.set()
            # Queue for a start slot now: the tree starts its children one after the other,
            # so servers started (or restarted) together connect in that order.
            self.connector.queue()
        self.nursery.start_soon(self._connection)

    # -- requests ----------------------------------------------------------------------

    async def handle(self, message: object) -> object:
        with before_effect():  # nothing is sent until connected: a failure re-queues it
            client = await self.link.connected()
        requests = self.requests
        if isinstance(message, CallTool):
            try:
                return await requests.call_tool(client, message, self.link.receipt(), direct=False)
            except _NotSent:
                await self.link.requeue()
        if isinstance(message, ListTools):
            return list(self.server.tools)
        if isinstance(message, ReadResource):
            uri, rounds = message.uri, message.rounds
            with made_for(message.capabilities):
                return await requests.fetch(
                    client, message, f"resource {uri!r}", lambda c: read(c, uri, rounds)
                )
        if isinstance(message, GetPrompt):
            name, arguments, rounds = message.name, message.arguments, message.rounds
            with made_for(message.capabilities):
                return await requests.fetch(
                    client,
                    message,
                    f"prompt {name!r}",
                    lambda c: prompt(
                        c, name, None if arguments is None else dict(arguments), rounds
                    ),
                )
        if isinstance(message, Complete):
            return await requests.fetch(
                client,
                message,
                "completion",
                lambda c: c.complete(
                    message.ref,
                    dict(message.argument),
                    None if message.context is None else dict(message.context),
                ),
            )
        if isinstance(message, TaskRequest):
            method, params = message.method, message.params
            return await requests.fetch(
                client,
                message,
                f"{method} of task {params.get('taskId')!r}",
                lambda c: tasks.request(c, method, params),
            )
        raise TypeError(f"server actor cannot handle {message!r}")

    async def drain(self) -> None:
        """Graceful stop: no new direct calls; wait for those in flight to finish."""
        await self.direct_calls.drain()

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Ask the connected server to send its log messages from ``level`` up (see
        :func:`~._wire.ask_log_level`)."""
        client = self.link.client
        if client is not None:
            await ask_log_level(self.server, client, level)

    # -- what probing asks of it (see :mod:`._probes`) ---------------------------------

    def probe(self) -> None:
        """Probe the connection now (calls in a row timed out, or its watch is in doubt):
        see :mod:`._probes`."""
        self.link.probe_now.set()

    def lost(self) -> None:
        """The connection is found dead: no call is sent on it from now on."""
        self.link.lost.set()

    async def probe_asked(self) -> None:
        """Return when :meth:`probe` is next called."""
        link = self.link
        await link.probe_now.wait()
        link.probe_now = trio.Event()

    def heard(self) -> float | None:
        """When (trio's clock) the live connection last heard from the server."""
        link = self.link
        transport = link.transport
        return None if transport is None or link.client is None else transport.answers.heard

    # -- the connection ----------------------------------------------------------------

    async def _connection(self) -> None:
        # One session after another: a server that forgot our session (it restarted
        # behind the same URL) gets a new one within this incarnation, and a `remote`
        # server that refuses Streamable HTTP is tried again over legacy SSE.
        try:
            await self.link.wanted.wait()
            while (why := await self._session_or_login()) is not None:
                if why == "logged in":
                    continue
                if why == "session expired":
                    self.server.emit(
                        events.Disconnected(server=self.server.name, reason=why, was_clean=False)
                    )
                else:
                    log.info(why, server=self.server.name)
        except ServerExited as exc:
            if exc.exit_code != 0:
                raise
            # The server ended on its own, cleanly: a normal exit, which a transient
            # server is not restarted after (a permanent one is).
            self.exit(Normal())
        finally:
            self.connector.close()  # ended before it connected: the next server's turn
            self.link.client = None
            self.direct_calls.end()
            if self.server.users is not None:
                self.server.users.detach(self.nursery)
            self.state.ended(self)

    async def _session_or_login(self) -> str | None:
        """One session; or, when it needs an OAuth login, the wait for one (no crash, no
        restart spent), then ``"logged in"`` to start the next."""
        try:
            return await self.connector.session()
        except BaseException:
            if self.stopping or not self.login.needed():
                raise
        await self.login.wait()
        return "logged in"
