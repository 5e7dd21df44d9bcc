"""What became of an incarnation's connection, reported to the server's state and bus.

Connected, failed, stopped, its process spawned, its calls timing out in a row or answered
again: each is written to the server's :class:`~supervisor.server._state.ServerState`
(through its named methods and its health record), published as the events it calls for,
logged, and the server's watchers told it changed. What happens after a failure (a
restart after a delay, or giving up) is the supervision tree's decision, which reaches
the server through its hook (:mod:`._hook`), not from here.
"""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types
import trio
from mcp import Client

from ..actors._errors import collapse
from ..errors import BoundExceeded, ToolCallTimeout
from ..events import _catalog as events
from ..log import get_logger, redact
from ..transports._remote import TransportLike
from ..transports._stdio import StdioTransport
from ._link import Link
from ._listing import describe

log = get_logger("supervisor.server")

#: A local server's last stderr lines kept with its failure (``mcp.local.crashed``, the
#: health record's ``stderr_tail``).
CRASH_TAIL_LINES = 20


class Reports:
    """Reports each turn of one incarnation's connection to its server."""

    __slots__ = ("link", "server", "state")

    def __init__(self, server: Any, state: Any, link: Link) -> None:
        # ``server`` is its ServerHandle and ``state`` its ServerState (not imported here:
        # they import the actor, which imports this)
        self.server = server
        self.state = state
        self.link = link

    def connected(self, client: Client, tools: list[types.Tool], took: float) -> None:
        """``client`` connected in ``took`` seconds and listed ``tools``: it is live."""
        server = self.server
        state = self.state
        self.link.client = client
        state.capabilities_declared(client.server_capabilities)
        state.tools_listed(tools)
        info = client.server_info
        downtime = state.health.connected(
            len(tools),
            took,
            time.time(),
            trio.current_time(),
            server_name=None if info is None else info.name,
            server_version=None if info is None else info.version,
            protocol_version=client.protocol_version,
        )
        self.link.ready.set()
        server.emit(events.Connected(server=server.name, tool_count=len(tools), connect_time=took))
        if downtime is not None:
            server.emit(events.HealthRecovered(server=server.name, downtime=downtime))
        log.info("connected", server=server.name, tools=len(tools), connect_time=round(took, 3))
        server.changed()

    def failed(self, transport: TransportLike, connected: bool, exc: BaseException) -> None:
        """The connection over ``transport`` failed with ``exc`` (``connected``: after
        its handshake)."""
        server = self.server
        error = transport.failure or collapse(exc)
        text = redact(describe(error))
        retryable = getattr(error, "retryable", True) is not False
        local = transport if isinstance(transport, StdioTransport) else None
        if local is not None and local.pid is None:
            local = None  # it never started: no process to speak of
        tail = [] if local is None else list(local.stderr_tail)[-CRASH_TAIL_LINES:]
        self.state.health.failed(
            text, time.time(), trio.current_time(), retryable=retryable, stderr_tail=tail
        )
        self.link.client = None
        if local is not None and isinstance(error, BoundExceeded) and error.resource == "memory":
            server.emit(
                events.LocalMemoryExceeded(server=server.name, rss=error.used, limit=error.limit)
            )
        if local is not None:
            server.emit(
                events.LocalCrashed(
                    server=server.name,
                    exit_code=local.returncode,
                    stderr_tail=tail,
                )
            )
        if connected:
            server.emit(events.Disconnected(server=server.name, reason=text, was_clean=False))
        # What happens next (a restart after a delay, or giving up) is the supervision
        # tree's decision: the server reports it when the tree makes it (decided()).
        server.changed()

    def stopped(self, transport: TransportLike | None, connected: bool) -> None:
        """The connection (over ``transport``, if one was made) was stopped on purpose."""
        server = self.server
        self.link.client = None
        self.state.health.stopped(connected, trio.current_time())
        if connected:
            server.emit(events.Disconnected(server=server.name, reason="stopped", was_clean=True))
        if isinstance(transport, StdioTransport) and transport.pid is not None:
            server.emit(events.LocalShutdown(server=server.name))
        server.changed()

    def spawned(self, pid: int) -> None:
        """The connection started the local server as process ``pid``."""
        self.state.spawned(pid)
        self.server.emit(events.LocalSpawned(server=self.server.name, pid=pid))

    def call_timed_out(self, exc: ToolCallTimeout) -> None:
        """A call to the server timed out: ``degradedAfter`` in a row on a live
        connection make it ``degraded``, and it is probed at once."""
        server = self.server
        health = self.state.health
        limit = server.config.degraded_after
        reason = (
            f"{limit} calls in a row timed out (the last: tool {exc.tool!r} after "
            f"{exc.timeout:g} s) although connected; probing it"
        )
        if not health.timed_out(reason, limit, trio.current_time()):
            return
        log.warning("server degraded", server=server.name, reason=reason)
        server.emit(events.HealthStale(server=server.name, last_ok=health.last_ok, reason=reason))
        self.link.probe_now.set()
        server.changed()

    def call_answered(self) -> None:
        """A call to the server was answered: the timeouts in a row end, and so does
        being ``degraded``."""
        server = self.server
        degraded_for = self.state.health.answered(trio.current_time())
        if degraded_for is not None:
            server.emit(events.HealthRecovered(server=server.name, downtime=degraded_for))
            server.changed()
