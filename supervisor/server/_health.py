"""Health: the running record of one server, its snapshot, and its metrics.

Durations (uptime, downtime, reconnect times, call latency) are measured on trio's clock
(:func:`trio.current_time`), so tests under ``autojump_clock`` see exact figures; the
health record's timestamps (``connected_since``, ``last_ok`` …) are unix seconds, for
people.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import attrs
import msgspec

from ._status import ServerStatus as ServerStatus


class HealthRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one server's health; times are unix seconds."""

    server: str
    type: str
    status: ServerStatus
    connected_since: float | None
    last_ok: float | None
    last_error: str | None
    #: a local server's last stderr lines (at most 20, oldest first) when its process
    #: failed with ``last_error``; empty for any other error
    stderr_tail: tuple[str, ...] = ()
    error_count: int
    consecutive_failures: int
    restarts: int
    tool_count: int | None
    #: listed tools the catalog skips as invalid (bad schema, bad or duplicate name)
    unsupported_tools: int | None
    connect_time: float | None
    next_retry_at: float | None
    retry_attempt: int
    calls_ok: int
    calls_failed: int
    #: calls the tool answered with an error of its own (``isError``): the server worked
    calls_tool_error: int = 0
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    pid: int | None
    #: a running local server's processes: ``pid`` first, then what it started (the
    #: real server under a launcher such as ``npx``), parents before children; empty
    #: while it does not run
    family: tuple[int, ...] = ()
    #: what that family uses now: resident memory in bytes (RSS, summed) and CPU time in
    #: seconds (user and system, of its processes and the children they reaped); ``None``
    #: while it does not run, and for a server that is not local
    rss_bytes: int | None = None
    cpu_seconds: float | None = None
    #: restarts (local) or reconnections (remote) tried in a row before the server is
    #: failed: its config's ``max_attempts`` (0 under ``open_supervisor(retries=False)``)
    max_attempts: int = 0
    #: after a failure, whether trying again could help: false when the executable is
    #: missing or not executable, or the endpoint answered 401, 403 or 404 (the server
    #: is then failed at once, not retried); ``None`` until a failure, and once connected
    retryable: bool | None = None
    #: what is run or reached: the command line (secret-looking arguments masked) or the
    #: URL (without user-info or query string)
    target: str | None = None
    #: the server's own name and version, as its handshake said (``serverInfo``), and the
    #: MCP protocol version agreed on: for the last connection, ``None`` until one
    server_name: str | None = None
    server_version: str | None = None
    protocol_version: str | None = None
    #: resources and prompts it listed last (kept while it restarts); ``None`` until a
    #: connection listed them, 0 when it does not offer them
    resource_count: int | None = None
    prompt_count: int | None = None
    #: when the server last sent anything on its connection (an answer, a notification),
    #: unix seconds; ``None`` while it has none
    last_heard: float | None = None
    #: how the live connection is probed when idle (``ping``, ``server/discover``, or
    #: ``tools/list`` for a server that does not answer ``ping``); ``None`` while not
    #: connected, or not probed (``pingInterval`` 0)
    probe_method: str | None = None
    #: probes sent, and those that went unanswered, over the server's life
    probes: int = 0
    probes_missed: int = 0
    #: how long the last answered probe took, in milliseconds
    last_probe_ms: float | None = None
    #: an idle connection is held to the server's port, so that its closing is seen at once
    watched: bool = False


# -- latency: a fixed log-bucket histogram ------------------------------------------------


def _bucket_bounds() -> tuple[float, ...]:
    """Upper bounds in seconds: two significant digits (1.0, 1.1 … 9.9 × 10^e) from 1 µs
    to 1000 s, each the float nearest its decimal, so ``0.0025`` is exactly ``0.0025``."""
    bounds = [float(f"{m}e{e - 1}") for e in range(-6, 3) for m in range(10, 100)]
    bounds.append(1000.0)
    return tuple(bounds)


#: The histogram's bucket upper bounds (seconds); bucket ``i`` holds ``(b[i-1], b[i]]``
#: and one more bucket holds everything above 1000 s. A bucket is at most 10 % wider
#: than its lower bound, so its midpoint is within 5 % of anything in it.
LATENCY_BOUNDS: tuple[float, ...] = _bucket_bounds()

#: The bounds (seconds) of the coarse cumulative buckets reported in
#: :attr:`ServerMetrics.latency_buckets` and the Prometheus histogram: 1, 2.5 and 5 per
#: decade from 100 µs to 50 s, then 100 s. Each is one of :data:`LATENCY_BOUNDS`.
REPORTED_BOUNDS: tuple[float, ...] = (
    *(float(f"{m}e{e}") for e in range(-4, 2) for m in ("1", "2.5", "5")),
    100.0,
)

_REPORTED_INDEX = tuple(LATENCY_BOUNDS.index(b) for b in REPORTED_BOUNDS)


@attrs.define
class LatencyHistogram:
    """Call latencies in fixed logarithmic buckets: O(1) memory and O(log buckets) per
    observation, quantiles within 5 % relative error of the exact (nearest-rank) ones.

    Keeps every observation since it was created — no window: the count, sum, min, max
    and the per-bucket counts are exact; only quantiles are estimated.
    """

    counts: list[int] = attrs.Factory(lambda: [0] * (len(LATENCY_BOUNDS) + 1))
    count: int = 0
    sum: float = 0.0
    min: float = math.inf
    max: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one latency (negative values count as 0)."""
        seconds = max(seconds, 0.0)
        self.counts[bisect.bisect_left(LATENCY_BOUNDS, seconds)] += 1
        self.count += 1
        self.sum += seconds
        self.min = min(self.min, seconds)
        self.max = max(self.max, seconds)

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile in seconds (``0 < q <= 1``), ``None`` with no observation.

        The estimate is the middle of the bucket holding the nearest-rank quantile (the
        smallest observation with at least ``ceil(q × count)`` observations at or below
        it), kept within the observed min and max: within 5 % of that exact value when
        it is 1 µs or more (below, the estimate is at most 1 µs).
        """
        if self.count == 0:
            return None
        rank = max(1, math.ceil(q * self.count))
        index, seen = 0, self.counts[0]
        while seen < rank:
            index += 1
            seen += self.counts[index]
        if index == len(LATENCY_BOUNDS):
            return self.max
        upper = LATENCY_BOUNDS[index]
        lower = LATENCY_BOUNDS[index - 1] if index else 0.0
        return min(max((lower + upper) / 2, self.min), self.max)

    def cumulative(self) -> tuple[tuple[float, int], ...]:
        """``(upper bound in seconds, observations at or below it)`` at
        :data:`REPORTED_BOUNDS` — a Prometheus histogram's ``le`` buckets (``+Inf`` is
        :attr:`count`)."""
        out = []
        seen = 0
        start = 0
        for index, bound in zip(_REPORTED_INDEX, REPORTED_BOUNDS, strict=True):
            seen += sum(self.counts[start : index + 1])
            start = index + 1
            out.append((bound, seen))
        return tuple(out)


# -- metrics -------------------------------------------------------------------------------


class ServerMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """One server's figures since the supervisor started (see docs/monitoring.md).

    Durations are seconds on trio's clock. ``downtime_s`` counts from a failure (a
    failed connection attempt or a lost connection) until connected again — backoff,
    reconnecting and a failed (given-up) state included — but not the time before the
    first attempt or after a deliberate stop. ``reconnects`` counts recoveries from
    such failures and ``reconnect_avg_s`` is their mean duration (``None`` before the
    first). A tool's own error result (``isError``) is the server working: it counts in
    ``calls_tool_error``, not ``calls_failed``. ``success_rate`` is ``(calls_ok +
    calls_tool_error) / (calls_ok + calls_tool_error + calls_failed)``, ``None`` before
    the first counted call. Latencies are estimated within 5 %.
    """

    server: str
    status: ServerStatus
    uptime_s: float
    downtime_s: float
    reconnects: int
    reconnect_avg_s: float | None
    restarts: int
    calls_ok: int
    calls_failed: int
    #: calls answered with the tool's own error (``isError``), apart from ``calls_ok``
    calls_tool_error: int = 0
    success_rate: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    #: answered calls timed, and their total latency in seconds
    latency_count: int
    latency_sum_s: float
    #: ``(upper bound s, calls at or below it)`` at :data:`REPORTED_BOUNDS`, cumulative
    latency_buckets: tuple[tuple[float, int], ...]
    tool_count: int | None
    #: when the server last sent anything on its connection (unix seconds), ``None``
    #: while it has none; its probes sent, and those that went unanswered
    last_heard: float | None = None
    probes: int = 0
    probes_missed: int = 0
    #: calls refused before they were sent, over the server's own ``rateLimit`` and
    #: over a team gateway's per-caller limits (``gateway.policy``)
    calls_rate_limited: int = 0
    calls_caller_limited: int = 0
    #: calls waiting now for a slot under its ``maxConcurrentCalls`` (0 without one)
    calls_waiting: int = 0
    #: a running local server's process family: resident memory in bytes and CPU time
    #: in seconds (as :attr:`HealthRecord.rss_bytes` and ``cpu_seconds``); ``None`` else
    rss_bytes: int | None = None
    cpu_seconds: float | None = None


@attrs.define
class Health:
    """One server's running health, kept across incarnations."""

    status: ServerStatus = ServerStatus.IDLE
    connected_since: float | None = None
    disconnected_at: float | None = None
    #: when the outage ``disconnected_at`` began, on trio's clock (what it is measured on)
    outage_since: float | None = None
    last_ok: float | None = None
    last_error: str | None = None
    #: the local process's last stderr lines, when ``last_error`` is its failure
    stderr_tail: tuple[str, ...] = ()
    error_count: int = 0
    consecutive_failures: int = 0
    restarts: int = 0
    tool_count: int | None = None
    unsupported_tools: int | None = None
    connect_time: float | None = None
    next_retry_at: float | None = None
    retryable: bool | None = None
    #: the last connection's handshake: the server's name and version, the protocol version
    server_name: str | None = None
    server_version: str | None = None
    protocol_version: str | None = None
    #: calls in a row that timed out on a live connection, and since when (trio's clock)
    #: it is degraded
    consecutive_timeouts: int = 0
    degraded_since: float | None = None
    calls_ok: int = 0
    calls_failed: int = 0
    #: answered with the tool's own error (``isError``): the server worked, the tool did not
    calls_tool_error: int = 0
    pid: int | None = None
    #: the connection's probes: how many, how many unanswered, the last one's time
    probes: int = 0
    probes_missed: int = 0
    last_probe_ms: float | None = None
    latency: LatencyHistogram = attrs.Factory(LatencyHistogram)
    # Up and down time, on trio's clock: the open interval's start, and the closed ones.
    up_since: float | None = None
    down_since: float | None = None
    uptime_total: float = 0.0
    downtime_total: float = 0.0
    reconnects: int = 0
    reconnect_total: float = 0.0

    def percentile(self, q: float) -> float | None:
        """The estimated ``q``-quantile of call latency, in milliseconds."""
        seconds = self.latency.quantile(q)
        return None if seconds is None else seconds * 1000

    # -- transitions: the server actor reports, the record follows ----------------------
    # ``wall`` is time.time() (what the record shows), ``now`` trio.current_time() (what
    # up and down time are counted on).

    def connected(
        self,
        tool_count: int,
        took: float,
        wall: float,
        now: float,
        *,
        server_name: str | None = None,
        server_version: str | None = None,
        protocol_version: str | None = None,
    ) -> float | None:
        """A connection was made with ``tool_count`` tools in ``took`` seconds, to a server
        that called itself ``server_name`` ``server_version`` (``None``: it did not say),
        speaking MCP ``protocol_version``.

        Returns how long the server was down (seconds on trio's clock) if this ends an
        outage.
        """
        self.server_name = server_name or None
        self.server_version = server_version or None
        self.protocol_version = protocol_version or None
        self.status = ServerStatus.CONNECTED
        self.connected_since = wall
        self.last_ok = wall
        self.consecutive_failures = 0
        self.tool_count = tool_count
        self.connect_time = took
        self.next_retry_at = None
        self.retryable = None
        self.consecutive_timeouts = 0
        self.degraded_since = None
        self.mark_connected(now)
        if self.disconnected_at is None:
            return None
        began = self.outage_since
        self.disconnected_at = self.outage_since = None
        return None if began is None else now - began

    def failed(
        self,
        error: str,
        wall: float,
        now: float,
        *,
        retryable: bool = True,
        stderr_tail: Sequence[str] = (),
    ) -> None:
        """A connection attempt failed or the connection was lost, with ``error``;
        ``retryable`` says whether trying again could help; ``stderr_tail``: a local
        server's last stderr lines."""
        self.status = ServerStatus.DISCONNECTED
        self.connected_since = None
        self.last_error = error
        self.stderr_tail = tuple(stderr_tail)
        self.retryable = retryable
        self.consecutive_timeouts = 0
        self.degraded_since = None
        self.error_count += 1
        self.consecutive_failures += 1
        if self.disconnected_at is None:
            self.disconnected_at, self.outage_since = wall, now
        self.mark_down(now)

    def timed_out(self, reason: str, limit: int, now: float) -> bool:
        """A call on the live connection timed out (at ``now``, trio's clock). True when
        that makes ``limit`` in a row: the server is now ``degraded``, with ``reason``."""
        if self.status is not ServerStatus.CONNECTED and self.status is not ServerStatus.DEGRADED:
            return False  # not on a live connection: its own state says what is wrong
        self.consecutive_timeouts += 1
        if self.status is ServerStatus.CONNECTED and self.consecutive_timeouts >= limit:
            self.status = ServerStatus.DEGRADED
            self.degraded_since = now
            self.last_error = reason
            self.stderr_tail = ()
            return True
        return False

    def probe_missed(self, reason: str, now: float) -> bool:
        """A probe went unanswered (at ``now``, trio's clock): a live connection is now
        ``degraded``, with ``reason``. True when that changed its status."""
        self.probes += 1
        self.probes_missed += 1
        if self.status is not ServerStatus.CONNECTED:
            return False
        self.status = ServerStatus.DEGRADED
        self.degraded_since = now
        self.last_error = reason
        self.stderr_tail = ()
        return True

    def found_down(self) -> None:
        """Health watching found the live connection dead (it is being ended): shown
        ``disconnected`` from now on, before the failure itself is recorded."""
        if self.status in (ServerStatus.CONNECTED, ServerStatus.DEGRADED):
            self.status = ServerStatus.DISCONNECTED

    def probed(self, took: float, wall: float) -> None:
        """A probe was answered in ``took`` seconds (at ``wall``)."""
        self.probes += 1
        self.last_probe_ms = took * 1000
        self.last_ok = wall

    def answered(self, now: float) -> float | None:
        """A call was answered (at ``now``, trio's clock): the timeouts in a row end.
        Returns how long the server was degraded (seconds) if this ends that."""
        self.consecutive_timeouts = 0
        if self.status is not ServerStatus.DEGRADED or self.degraded_since is None:
            return None
        self.status = ServerStatus.CONNECTED
        since, self.degraded_since = self.degraded_since, None
        return now - since

    def alive(self, wall: float) -> None:
        """The server answered something (at ``wall``, unix seconds)."""
        self.last_ok = wall

    def call_failed(self) -> None:
        """A call failed: no answer, a refusal, or an answer that was wrong."""
        self.calls_failed += 1

    def call_answered(self, latency: float, wall: float, *, tool_error: bool) -> None:
        """A call was answered after ``latency`` seconds (at ``wall``); ``tool_error``: with
        the tool's own error result (``isError``), which is the server working."""
        self.latency.observe(latency)
        self.last_ok = wall
        if tool_error:
            self.calls_tool_error += 1
        else:
            self.calls_ok += 1

    def stopped(self, was_connected: bool, now: float) -> None:
        """Stopped on purpose; a ``failed`` status (the tree gave up) stays."""
        self.mark_stopped(now)
        if self.status is not ServerStatus.FAILED:
            self.status = ServerStatus.DISCONNECTED if was_connected else ServerStatus.IDLE

    # -- up and down (``now``: trio.current_time()) -----------------------------------

    def mark_connected(self, now: float) -> None:
        """A connection was made: an outage (if any) ends and counts as a reconnect."""
        if self.down_since is not None:
            outage = now - self.down_since
            self.downtime_total += outage
            self.reconnect_total += outage
            self.reconnects += 1
            self.down_since = None
        if self.up_since is None:
            self.up_since = now

    def mark_down(self, now: float) -> None:
        """A connection attempt failed or a connection was lost: an outage begins (or
        goes on)."""
        self._close_up(now)
        if self.down_since is None:
            self.down_since = now

    def mark_stopped(self, now: float) -> None:
        """Stopped on purpose: neither up nor down from now on."""
        self._close_up(now)
        if self.down_since is not None:
            self.downtime_total += now - self.down_since
            self.down_since = None

    def _close_up(self, now: float) -> None:
        if self.up_since is not None:
            self.uptime_total += now - self.up_since
            self.up_since = None

    def uptime(self, now: float) -> float:
        """Seconds connected so far, the current connection included."""
        return self.uptime_total + (0.0 if self.up_since is None else now - self.up_since)

    def downtime(self, now: float) -> float:
        """Seconds down after failures so far, the current outage included."""
        return self.downtime_total + (0.0 if self.down_since is None else now - self.down_since)

    def metrics(
        self, server: str, status: ServerStatus, now: float, *, last_heard: float | None = None
    ) -> ServerMetrics:
        """The figures as of ``now`` (trio time); ``last_heard``: when the connection
        last heard from the server (unix seconds)."""
        worked = self.calls_ok + self.calls_tool_error
        calls = worked + self.calls_failed
        return ServerMetrics(
            server=server,
            status=status,
            uptime_s=self.uptime(now),
            downtime_s=self.downtime(now),
            reconnects=self.reconnects,
            reconnect_avg_s=self.reconnect_total / self.reconnects if self.reconnects else None,
            restarts=self.restarts,
            calls_ok=self.calls_ok,
            calls_failed=self.calls_failed,
            calls_tool_error=self.calls_tool_error,
            success_rate=worked / calls if calls else None,
            latency_p50_ms=self.percentile(0.50),
            latency_p99_ms=self.percentile(0.99),
            latency_count=self.latency.count,
            latency_sum_s=self.latency.sum,
            latency_buckets=self.latency.cumulative(),
            tool_count=self.tool_count,
            last_heard=last_heard,
            probes=self.probes,
            probes_missed=self.probes_missed,
        )
