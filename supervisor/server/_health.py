"""Health: the running record of one server, and its snapshot."""

from __future__ import annotations

import collections
import enum

import attrs
import msgspec

#: Latency samples kept for the p50/p99 in the health record.
LATENCY_SAMPLES = 512


class ServerStatus(enum.Enum):
    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    FAILED = "failed"
    STOPPED = "stopped"


class HealthRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one server's health (DESIGN §5); times are unix seconds."""

    server: str
    type: str
    status: str
    connected_since: float | None
    last_ok: float | None
    last_error: str | None
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
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    pid: int | None


@attrs.define
class Health:
    """One server's running health, kept across incarnations."""

    status: ServerStatus = ServerStatus.IDLE
    connected_since: float | None = None
    disconnected_at: float | None = None
    last_ok: float | None = None
    last_error: str | None = None
    error_count: int = 0
    consecutive_failures: int = 0
    restarts: int = 0
    tool_count: int | None = None
    unsupported_tools: int | None = None
    connect_time: float | None = None
    next_retry_at: float | None = None
    calls_ok: int = 0
    calls_failed: int = 0
    pid: int | None = None
    latencies: collections.deque[float] = attrs.Factory(
        lambda: collections.deque(maxlen=LATENCY_SAMPLES)
    )

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
