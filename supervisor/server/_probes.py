"""Health probes: a connected server is heard from, or found out, without waiting for a call.

Anything the server sends is proof of life (its connection's ``answers.heard``): calls
are heartbeats, so a busy server is never probed. One that has been silent for its
``pingInterval`` gets the cheapest request its protocol has — ``ping``, or
``server/discover`` for a 2026-07-28 server — and any answer, an MCP error included, is
life. A probe not answered within ``pingTimeout`` makes the server ``degraded`` (slow is
not dead) and it is probed again at once; a second miss in a row ends the connection
(``mcp.health.down``, found by ``probe``), and the supervision tree reconnects or
restarts it as for any lost connection. An HTTP 502, 503 or 504 (a proxy or load
balancer answering for a server it cannot reach) counts as a miss.

A server that does not answer ``ping`` — it says "method not found", or lets a ping go
unanswered while answering the ``tools/list`` sent after it — is probed with
``tools/list`` from then on (``mcp.health.probe_changed``; latched for the server's
life, not a failure).

A probe never starts a session, a process or a login: it is sent on the live
connection only, and a connection that ends while it is out is the actor's to handle. A
Streamable HTTP server's port is watched as well (:mod:`supervisor.transports._watch`),
so that its process dying is seen at once rather than at the next probe.
"""

from __future__ import annotations

import enum
import math
import time
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp_types as types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._util._deprecated import on_purpose
from ..errors import StaleConnection, TransportError
from ..events import _catalog as events
from ..log import get_logger
from ..transports._receipts import Receipt, connection_closed, delivery
from ..transports._watch import Watch, watch_port

if TYPE_CHECKING:
    from ..transports._remote import TransportLike


class Probed(Protocol):
    """What probing needs of the server actor whose connection it probes."""

    #: its ServerHandle and ServerState (not imported here: they import the actor,
    #: which imports this)
    server: Any
    state: Any
    watched: bool

    def probe(self) -> None: ...
    async def probe_asked(self) -> None: ...
    def lost(self) -> None: ...

log = get_logger("supervisor.server")

#: The HTTP statuses a proxy answers with for a server it cannot reach: a missed probe.
UNREACHABLE_STATUSES = frozenset({502, 503, 504})
#: How many probe timeouts a late answer to a probe is still waited for (to tell a slow
#: server from one that does not answer ``ping``).
LATE_ANSWER_TIMEOUTS = 4
#: Seconds a probe that met a closed connection waits for the connection's end to be
#: seen, before it counts as unanswered (only its answer's stream was cut).
CLOSE_GRACE = 1.0
#: The probe of a server that does not answer ``ping``.
FALLBACK_METHOD = "tools/list"


class Outcome(enum.Enum):
    ANSWERED = "answered"
    #: answered "method not found" to ``ping``
    UNSUPPORTED = "unsupported"
    #: a proxy answered for it that it cannot be reached
    UNREACHABLE = "unreachable"
    #: the connection, or the probe's answer stream, ended before its answer
    CLOSED = "closed"


@attrs.define
class _Asked:
    """One probe request, running in a task of its own: its outcome once it ends."""

    method: str
    began: float
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: Outcome | None = None
    status: int | None = None


def probe_method(client: Client, fallback: str | None) -> str:
    """How to probe the connection: ``server/discover`` on a 2026-07-28 one (which has
    no ``ping``), else ``ping`` unless the server is known not to answer it."""
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "server/discover"
    return fallback or "ping"


async def _send(client: Client, method: str) -> None:
    if method == "server/discover":
        await client.session.send_discover(client.protocol_version or "")
    elif method == "ping":
        await on_purpose(client.send_ping)
    else:
        await client.session.list_tools()


async def _ask(client: Client, asked: _Asked, limit: float) -> None:
    receipt = Receipt()
    token = delivery.set(receipt)
    try:
        with trio.move_on_after(limit):
            try:
                await _send(client, asked.method)
                asked.outcome = Outcome.ANSWERED
            except MCPError as exc:
                asked.status = receipt.http_status
                if connection_closed(exc, receipt):
                    asked.outcome = Outcome.CLOSED
                elif receipt.http_status in UNREACHABLE_STATUSES:
                    asked.outcome = Outcome.UNREACHABLE
                elif not receipt.answered:
                    pass  # the client's own error (its request timeout): no answer
                elif exc.code == types.METHOD_NOT_FOUND and asked.method == "ping":
                    asked.outcome = Outcome.UNSUPPORTED
                else:
                    asked.outcome = Outcome.ANSWERED  # an error answer is an answer
    finally:
        delivery.reset(token)
        asked.done.set()


async def keep_probing(actor: Probed, client: Client, transport: TransportLike) -> None:
    """Probe ``actor``'s connection while it lives (see the module's docstring); raises
    :class:`StaleConnection` when two probes in a row go unanswered."""
    server = actor.server
    state = actor.state
    interval = server.config.ping_interval
    timeout = server.ping_timeout
    answers = transport.answers
    missed: list[str] = []  # why each probe in a row went unanswered
    unanswered_ping: _Asked | None = None
    async with trio.open_nursery() as nursery:
        while True:
            if not missed:
                await _silence(actor, transport, interval)
            method = probe_method(client, state.probe_fallback)
            if missed and method == "ping":
                method = FALLBACK_METHOD  # does it answer something else?
            asked = _Asked(method, trio.current_time())
            nursery.start_soon(_ask, client, asked, timeout * LATE_ANSWER_TIMEOUTS)
            with trio.move_on_after(timeout):
                await asked.done.wait()
            outcome = asked.outcome
            if outcome is Outcome.CLOSED:
                # The connection ending is the actor's to see; an answer's stream cut
                # while the connection stays up (an HTTP response that ended without
                # one) is no answer: a miss.
                with trio.move_on_after(CLOSE_GRACE):
                    await transport.closed.wait()
                    await trio.sleep_forever()
                outcome = None
            if outcome is None and (answers.heard or -math.inf) > asked.began:
                outcome = Outcome.ANSWERED  # not this probe, but something came: alive
            elif outcome is not None and outcome is not Outcome.UNREACHABLE:
                took = trio.current_time() - asked.began
                state.health.probed(took, time.time())
            if outcome in (Outcome.ANSWERED, Outcome.UNSUPPORTED):
                if outcome is Outcome.UNSUPPORTED:
                    _fall_back(actor, "it answered ping with 'method not found'")
                elif (
                    asked.method == FALLBACK_METHOD
                    and unanswered_ping is not None
                    and unanswered_ping.outcome in (None, Outcome.CLOSED)  # (not even late)
                ):
                    _fall_back(
                        actor, f"it left a ping unanswered for {timeout} s, but answered tools/list"
                    )
                unanswered_ping = None
                if missed:
                    missed.clear()
                    _recovered(actor)
                continue
            why = (
                f"HTTP {asked.status} to a {asked.method} probe: it cannot be reached"
                if outcome is Outcome.UNREACHABLE
                else f"no answer to a {asked.method} probe within {timeout} s (pingTimeout)"
            )
            missed.append(why)
            if asked.method == "ping":
                unanswered_ping = asked
            if len(missed) == 1:
                _degraded(actor, why)
                continue
            _down(actor, "; then ".join(missed), found_by="probe")
            raise StaleConnection(
                f"MCP server {server.name!r} answered neither of two probes in a row: "
                + "; then ".join(missed),
                server=server.name,
            )


async def _silence(actor: Probed, transport: TransportLike, interval: float) -> None:
    """Return once the connection has heard nothing for ``interval`` seconds (never if
    it is 0), or a probe is asked for (:meth:`Probed.probe`)."""
    answers = transport.answers
    while True:
        heard = answers.heard if answers.heard is not None else trio.current_time()
        due = heard + interval if interval > 0 else math.inf
        with trio.move_on_at(due):
            await actor.probe_asked()
            return
        if answers.heard is None or trio.current_time() >= answers.heard + interval:
            return


def _fall_back(actor: Probed, reason: str) -> None:
    server = actor.server
    if actor.state.probe_fallback is not None:
        return
    actor.state.probe_latched(FALLBACK_METHOD)
    log.info("probing with tools/list", server=server.name, reason=reason)
    server.emit(
        events.HealthProbeChanged(server=server.name, method=FALLBACK_METHOD, reason=reason)
    )


def _degraded(actor: Probed, why: str) -> None:
    server = actor.server
    health = actor.state.health
    if health.probe_missed(why, trio.current_time()):
        log.warning("server degraded", server=server.name, reason=why)
        server.emit(events.HealthStale(server=server.name, last_ok=health.last_ok, reason=why))
        server.changed()


def _recovered(actor: Probed) -> None:
    server = actor.server
    degraded_for = actor.state.health.answered(trio.current_time())
    if degraded_for is not None:
        log.info("server answers again", server=server.name)
        server.emit(events.HealthRecovered(server=server.name, downtime=degraded_for))
        server.changed()


def _down(actor: Probed, why: str, *, found_by: str) -> None:
    server = actor.server
    actor.lost()  # from now on no call is sent on this connection
    actor.state.health.found_down()  # (its end, a hung process's stop, may take seconds)
    log.warning("server down", server=server.name, reason=why, found_by=found_by)
    server.emit(
        events.HealthDown(
            server=server.name, reason=why, found_by=found_by, last_ok=actor.state.health.last_ok
        )
    )
    server.changed()


async def watch_connection(
    actor: Probed, transport: TransportLike, address: tuple[str, int]
) -> None:
    """Hold a connection to the server's port (:func:`watch_port`): the port found closed
    ends the connection; a doubt has the server probed at once; while a connection is
    held, the actor is ``watched``."""
    server = actor.server

    def gone(why: str) -> None:
        _down(actor, why, found_by="watch")
        lose = getattr(transport, "lose", None)
        failure = TransportError(f"MCP server {server.name!r} is gone: {why}")
        if lose is not None:
            lose(failure)

    def doubt(why: str) -> None:
        actor.watched = False
        log.info("connection watch in doubt", server=server.name, reason=why)
        actor.probe()

    def holding() -> None:
        actor.watched = True

    host, port = address
    await watch_port(
        host,
        port,
        Watch(gone=gone, doubt=doubt, holding=holding),
        connect_timeout=server.ping_timeout,
    )
