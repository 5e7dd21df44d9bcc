"""What one server is as of now, as people are shown it: its status, health record and
metrics, read from its :class:`~._state.ServerState` and its live connection.

:func:`health_record` is the one place a :class:`~._health.HealthRecord` is assembled
from a server's :class:`~._health.Health`: a running server's record
(:meth:`Reading.record`) and a disabled one's (never started: a fresh health) both are.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import msgspec
import trio

from ..actors._mailbox import AddressState
from ..auth._broker import BrokerState
from ..log import redact
from ..transports import _bounds
from ..transports._stdio import StdioTransport
from ._health import Health, HealthRecord, ServerMetrics, ServerStatus
from ._probes import probe_method

if TYPE_CHECKING:
    from ..actors import Address
    from ..auth._broker import TokenBroker
    from ..config._model import ServerConfig
    from ._admission import Admission
    from ._state import ServerState


def health_record(
    server: str,
    type: str,
    status: ServerStatus,
    health: Health,
    *,
    target: str | None,
    retry_attempt: int = 0,
    max_attempts: int = 0,
    family: tuple[int, ...] = (),
    listed: tuple[int, int] | None = None,
    last_heard: float | None = None,
    probing: str | None = None,
    watched: bool = False,
) -> HealthRecord:
    """The record of the server ``server`` (of transport ``type``) shown as ``status``,
    from its running ``health``: the retry it waits for is left out once it failed;
    ``target`` is shown with the secrets known now redacted; ``family`` (its processes)
    is measured now; ``listed`` holds its resource and prompt counts once some connection
    listed them."""
    used = _bounds.usage(family) if family else None
    return HealthRecord(
        server=server,
        type=type,
        status=status,
        connected_since=health.connected_since,
        last_ok=health.last_ok,
        last_error=health.last_error,
        stderr_tail=health.stderr_tail,
        error_count=health.error_count,
        consecutive_failures=health.consecutive_failures,
        restarts=health.restarts,
        tool_count=health.tool_count,
        unsupported_tools=health.unsupported_tools,
        connect_time=health.connect_time,
        next_retry_at=health.next_retry_at if status is not ServerStatus.FAILED else None,
        retry_attempt=retry_attempt,
        calls_ok=health.calls_ok,
        calls_failed=health.calls_failed,
        calls_tool_error=health.calls_tool_error,
        latency_p50_ms=health.percentile(0.50),
        latency_p99_ms=health.percentile(0.99),
        pid=health.pid,
        family=family,
        rss_bytes=None if used is None else used.rss,
        cpu_seconds=None if used is None else used.cpu,
        max_attempts=max_attempts,
        retryable=health.retryable,
        target=None if target is None else redact(target),
        server_name=health.server_name,
        server_version=health.server_version,
        protocol_version=health.protocol_version,
        resource_count=None if listed is None else listed[0],
        prompt_count=None if listed is None else listed[1],
        last_heard=last_heard,
        probe_method=probing,
        probes=health.probes,
        probes_missed=health.probes_missed,
        last_probe_ms=health.last_probe_ms,
        watched=watched,
    )


class Handle(Protocol):
    """What reading a server reads of its handle (not imported here: the handle imports
    this)."""

    name: str
    config: ServerConfig
    error: str | None
    retries: bool
    ping_timeout: float
    target: str | None
    broker: TokenBroker | None
    state: ServerState
    admission: Admission

    @property
    def address(self) -> Address: ...


class Reading:
    """Reads one server's state and live connection into what is shown of it now."""

    __slots__ = ("_server",)

    def __init__(self, server: Handle) -> None:
        self._server = server

    def status(self) -> ServerStatus:
        """The server's status as shown: a connected server not heard from within its
        window (:meth:`window`) is ``unverified``."""
        status = self.live_status()
        if status is ServerStatus.CONNECTED and self._unheard() is not None:
            return ServerStatus.UNVERIFIED
        return status

    def live_status(self) -> ServerStatus:
        """The server's status as its actor and the tree left it (never ``unverified``):
        what decides whether its tools are offered."""
        server = self._server
        health = server.state.health
        state = server.address.state
        if server.error is not None or state is AddressState.UNAVAILABLE:
            return ServerStatus.FAILED
        if state is AddressState.STOPPED:
            # A crash that its restart type does not restart leaves it failed.
            failed = health.status is ServerStatus.FAILED
            return ServerStatus.FAILED if failed else ServerStatus.STOPPED
        status = health.status
        broker = server.broker
        if (
            status is ServerStatus.CONNECTING
            and broker is not None
            and broker.state is BrokerState.REFRESHING
        ):
            return ServerStatus.REFRESHING
        return status

    def window(self) -> float | None:
        """Seconds a connected server may go unheard from and still be shown up: its
        probe interval and two probes' timeouts (a probe, and the one after a miss),
        plus a second; ``None`` when it is not probed (``pingInterval`` 0)."""
        server = self._server
        interval = server.config.ping_interval
        return None if interval <= 0 else interval + 2 * server.ping_timeout + 1.0

    def record(self) -> HealthRecord:
        """The health record as of now."""
        server = self._server
        state = server.state
        listed = (len(state.resources), len(state.prompts)) if state.listed else None
        return health_record(
            server.name,
            # the transport in use: a `type: remote` server may have fallen back to SSE
            "sse" if state.use_sse else str(server.config.type),
            self.status(),
            state.health,
            target=server.target,
            retry_attempt=state.attempt,
            max_attempts=server.config.max_attempts if server.retries else 0,
            family=self._family(),
            listed=listed,
            last_heard=self._last_heard(),
            probing=self._probing(),
            watched=self._watched(),
        )

    def metrics(self) -> ServerMetrics:
        """Uptime, downtime, reconnects, calls and latency (docs/monitoring.md) as of now,
        with the counts of its callers' bounds."""
        server = self._server
        found = server.state.health.metrics(
            server.name, self.status(), trio.current_time(), last_heard=self._last_heard()
        )
        found = server.admission.counted(found)
        family = self._family()
        if not family:
            return found
        used = _bounds.usage(family)
        return msgspec.structs.replace(found, rss_bytes=used.rss, cpu_seconds=used.cpu)

    def _heard(self) -> float | None:
        """When (trio's clock) the live connection last heard from the server."""
        actor = self._server.state.current
        return None if actor is None else actor.heard()

    def _unheard(self) -> float | None:
        """Seconds since the live connection heard from the server, when that is longer
        than its window; ``None`` otherwise (or outside trio)."""
        window, heard = self.window(), self._heard()
        if window is None or heard is None:
            return None
        try:
            silent = trio.current_time() - heard
        except RuntimeError:  # not in trio's thread: nothing to say
            return None
        return silent if silent > window else None

    def _last_heard(self) -> float | None:
        """:meth:`_heard` in unix seconds."""
        heard = self._heard()
        if heard is None:
            return None
        try:
            return time.time() - (trio.current_time() - heard)
        except RuntimeError:
            return None

    def _probing(self) -> str | None:
        """How the live connection is probed when idle, if it is."""
        server = self._server
        actor = server.state.current
        client = None if actor is None else actor.client
        if client is None or server.config.ping_interval <= 0:
            return None
        return probe_method(client, server.state.probe_fallback)

    def _watched(self) -> bool:
        actor = self._server.state.current
        return actor is not None and actor.client is not None and actor.watched

    def _family(self) -> tuple[int, ...]:
        """The pids of the running local server's processes (see ``HealthRecord.family``)."""
        actor = self._server.state.current
        transport = None if actor is None else actor.transport
        return tuple(transport.family()) if isinstance(transport, StdioTransport) else ()
