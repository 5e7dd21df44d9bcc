"""Metrics for scripts and scrapers: the ``status --json`` document, the Prometheus text
exposition, and the session summary."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping

import msgspec

from .._util._plural import plural
from ..actors._stats import SupervisorStatistics
from ..server import HealthRecord, ServerMetrics
from ..server._status import ServerStatus

#: Every ``status`` value a server can have metrics in (a disabled server has none), for
#: the ``mcp_supervisor_server_status`` state set.
STATUSES = tuple(s for s in ServerStatus if s is not ServerStatus.DISABLED)


def status_document(
    records: Mapping[str, HealthRecord],
    metrics: Mapping[str, ServerMetrics] | None = None,
    *,
    now: float | None = None,
    actors: SupervisorStatistics | None = None,
) -> dict[str, object]:
    """The ``status --json`` document: ``{"ts": unix seconds, "servers": [health record,
    ...], "metrics": {name: metrics, ...}, "actors": [...]}``; ``metrics`` is left out
    when not given, and so is ``actors``: the root tree's children (the bus, the
    registry, the servers' supervisor) with their state, restarts and last exit."""
    document: dict[str, object] = {
        "ts": time.time() if now is None else now,
        "servers": [msgspec.to_builtins(r) for r in records.values()],
    }
    if metrics is not None:
        document["metrics"] = {name: msgspec.to_builtins(m) for name, m in metrics.items()}
    if actors is not None:
        document["actors"] = [
            {
                "actor": child.id,
                "state": child.state.value,
                "restarts": child.restarts,
                "last_exit": child.last_exit,
            }
            for child in actors.children
        ]
    return document


# -- Prometheus ----------------------------------------------------------------------------


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in pairs) + "}"


#: One sample: the name's suffix (``_bucket`` …), its labels as written, its value.
_Sample = tuple[str, str, float]

_PREFIX = "mcp_supervisor_server"

#: The families with one sample per server, in the order written: name (after
#: :data:`_PREFIX`), type, help, and the value of one server's sample.
_PER_SERVER: tuple[tuple[str, str, str, Callable[[ServerMetrics], float]], ...] = (
    (
        "tools",
        "gauge",
        "Tools the MCP server listed last.",
        lambda m: m.tool_count or 0,
    ),
    (
        "uptime_seconds_total",
        "counter",
        "Seconds the MCP server has been connected.",
        lambda m: m.uptime_s,
    ),
    (
        "downtime_seconds_total",
        "counter",
        "Seconds the MCP server has been down after a failure, until connected again.",
        lambda m: m.downtime_s,
    ),
    (
        "restarts_total",
        "counter",
        "Times the MCP server was restarted (after failures, or on request).",
        lambda m: m.restarts,
    ),
    (
        "reconnects_total",
        "counter",
        "Times the MCP server was connected again after a failure.",
        lambda m: m.reconnects,
    ),
    (
        "reconnect_seconds_total",
        "counter",
        "Seconds from each failure to the reconnection that ended it, summed.",
        lambda m: (m.reconnect_avg_s or 0.0) * m.reconnects,
    ),
    (
        "probes_total",
        "counter",
        "Health probes sent to the MCP server's idle connection.",
        lambda m: m.probes,
    ),
    (
        "probes_missed_total",
        "counter",
        "Health probes the MCP server left unanswered.",
        lambda m: m.probes_missed,
    ),
)


def _family(name: str, kind: str, help: str, samples: Iterable[_Sample]) -> list[str]:
    """One metric family in the exposition format: its HELP and TYPE lines, its samples."""
    lines = [f"# HELP {name} {help}", f"# TYPE {name} {kind}"]
    lines.extend(f"{name}{suffix}{labels} {_number(v)}" for suffix, labels, v in samples)
    return lines


def _server(m: ServerMetrics, *more: tuple[str, str]) -> str:
    """The labels of one server's sample: ``server`` first, then ``more``."""
    return _labels([("server", m.server), *more])


def _up_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    up = (ServerStatus.CONNECTED, ServerStatus.DEGRADED)
    return [("", _server(m), int(m.status in up)) for m in servers]


def _heard_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    """A sample for each server heard from on its connection (none for the others)."""
    return [("", _server(m), m.last_heard) for m in servers if m.last_heard is not None]


def _usage_samples(servers: list[ServerMetrics], field: str) -> list[_Sample]:
    """A sample for each running local server's family (none for the others)."""
    return [("", _server(m), value) for m in servers if (value := getattr(m, field)) is not None]


def _status_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    """A state set: one sample per server and status, 1 for its current one."""
    return [("", _server(m, ("status", s)), int(m.status == s)) for m in servers for s in STATUSES]


def _call_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    return [
        ("", _server(m, ("result", result)), n)
        for m in servers
        for result, n in (
            ("ok", m.calls_ok),
            ("tool_error", m.calls_tool_error),
            ("failed", m.calls_failed),
        )
    ]


def _limited_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    return [
        ("", _server(m, ("by", by)), n)
        for m in servers
        for by, n in (("server", m.calls_rate_limited), ("caller", m.calls_caller_limited))
    ]


def _histogram_samples(servers: list[ServerMetrics]) -> list[_Sample]:
    """Each server's cumulative buckets (``+Inf`` last), then its sum and count."""
    samples: list[_Sample] = []
    for m in servers:
        samples += [("_bucket", _server(m, ("le", repr(b))), n) for b, n in m.latency_buckets]
        samples.append(("_bucket", _server(m, ("le", "+Inf")), m.latency_count))
        samples.append(("_sum", _server(m), m.latency_sum_s))
        samples.append(("_count", _server(m), m.latency_count))
    return samples


def prometheus_text(metrics: Mapping[str, ServerMetrics] | Iterable[ServerMetrics]) -> str:
    """The servers' metrics in the Prometheus text exposition format 0.0.4 — what a
    ``/metrics`` endpoint serves (content type ``text/plain; version=0.0.4``).

    Every sample has a ``server`` label; the families (names, types and units are
    listed in docs/monitoring.md) are ``mcp_supervisor_server_up``,
    ``_server_status``, ``_server_tools``, ``_server_uptime_seconds_total``,
    ``_server_downtime_seconds_total``, ``_server_restarts_total``,
    ``_server_reconnects_total``, ``_server_reconnect_seconds_total``,
    ``_server_probes_total``, ``_server_probes_missed_total``,
    ``_server_last_heard_timestamp_seconds`` (only for a server heard from),
    ``_server_resident_memory_bytes`` and ``_server_cpu_seconds_total`` (only for a
    running local server: its process family's), ``_server_calls_total``
    (``result="ok|tool_error|failed"``), ``_server_calls_rate_limited_total``
    (``by="server|caller"``), ``_server_calls_waiting`` and the histogram
    ``_server_call_duration_seconds``. Ends with a newline.
    """
    servers = list(metrics.values() if isinstance(metrics, Mapping) else metrics)
    p = _PREFIX
    out = _family(
        f"{p}_up",
        "gauge",
        "1 if the MCP server is connected or degraded, else 0 (0 while unverified: "
        "connected, but not heard from within its window).",
        _up_samples(servers),
    )
    out += _family(
        f"{p}_status",
        "gauge",
        "The MCP server's status: 1 for the current one, 0 for the others.",
        _status_samples(servers),
    )
    for name, kind, help, value in _PER_SERVER:
        out += _family(f"{p}_{name}", kind, help, [("", _server(m), value(m)) for m in servers])
    out += _family(
        f"{p}_last_heard_timestamp_seconds",
        "gauge",
        "Unix time the MCP server last sent anything on its connection.",
        _heard_samples(servers),
    )
    out += _family(
        f"{p}_resident_memory_bytes",
        "gauge",
        "Resident memory (RSS) of the local MCP server's process family, summed.",
        _usage_samples(servers, "rss_bytes"),
    )
    out += _family(
        f"{p}_cpu_seconds_total",
        "counter",
        "CPU time (user and system) of the local MCP server's process family and the "
        "children it reaped; starts again from 0 at a restart.",
        _usage_samples(servers, "cpu_seconds"),
    )
    out += _family(
        f"{p}_calls_total",
        "counter",
        "Tool calls handed to the MCP server's connection, by result (tool_error: the "
        "tool answered with an error of its own).",
        _call_samples(servers),
    )
    out += _family(
        f"{p}_calls_rate_limited_total",
        "counter",
        "Tool calls refused over a rate limit, not sent: by the MCP server's own "
        "rateLimit (by=server), or by a team gateway's limit on the caller (by=caller).",
        _limited_samples(servers),
    )
    out += _family(
        f"{p}_calls_waiting",
        "gauge",
        "Tool calls waiting for their turn under the MCP server's maxConcurrentCalls.",
        [("", _server(m), m.calls_waiting) for m in servers],
    )
    out += _family(
        f"{p}_call_duration_seconds",
        "histogram",
        "Latency of answered tool calls, from the moment the call had a connection.",
        _histogram_samples(servers),
    )
    return "\n".join(out) + "\n"


# -- the session summary -------------------------------------------------------------------


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What one ``open_supervisor`` session did: each server's metrics when it ended
    (before the servers were shut down), and the totals."""

    #: seconds from opening the supervisor to the end of its block (trio's clock)
    duration_s: float
    servers: dict[str, ServerMetrics]
    #: servers connected when the block ended
    connected: int
    calls_ok: int
    calls_failed: int
    reconnects: int
    restarts: int
    #: calls answered with the tool's own error (``isError``)
    calls_tool_error: int = 0


def summarize(metrics: Mapping[str, ServerMetrics], duration_s: float) -> SessionSummary:
    """The summary of a session that lasted ``duration_s`` with these final metrics."""
    values = list(metrics.values())
    return SessionSummary(
        duration_s=duration_s,
        servers=dict(metrics),
        connected=sum(m.status == ServerStatus.CONNECTED for m in values),
        calls_ok=sum(m.calls_ok for m in values),
        calls_failed=sum(m.calls_failed for m in values),
        calls_tool_error=sum(m.calls_tool_error for m in values),
        reconnects=sum(m.reconnects for m in values),
        restarts=sum(m.restarts for m in values),
    )


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}s"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def _tool_errors(n: int, sep: str = " / ") -> str:
    """``N tool errors`` and ``sep``, or nothing when there were none."""
    return f"{plural(n, 'tool error')}{sep}" if n else ""


def summary_text(summary: SessionSummary) -> str:
    """The summary for people: one line per server and a total line (no trailing
    newline)."""
    lines = [f"Session summary ({summary.duration_s:.1f}s)"]
    width = max([6, *(len(name) for name in summary.servers)])
    for name, m in summary.servers.items():
        rate = "" if m.success_rate is None else f" ({m.success_rate:.0%})"
        reconnects = plural(m.reconnects, "reconnect")
        if m.reconnect_avg_s is not None:
            reconnects += f" (avg {_seconds(m.reconnect_avg_s)})"
        lines.append(
            f"  {name:<{width}}  {m.status}, up {_seconds(m.uptime_s)}, down "
            f"{_seconds(m.downtime_s)}, {reconnects}, calls {m.calls_ok} ok / "
            f"{_tool_errors(m.calls_tool_error)}{m.calls_failed} failed{rate}, "
            f"p50 {_ms(m.latency_p50_ms)}, "
            f"p99 {_ms(m.latency_p99_ms)}"
        )
    lines.append(
        f"  total: {plural(len(summary.servers), 'server')}, {summary.connected} connected, "
        f"{plural(summary.calls_ok, 'call')} ok, {_tool_errors(summary.calls_tool_error, ', ')}"
        f"{summary.calls_failed} failed, "
        f"{plural(summary.reconnects, 'reconnect')}, {plural(summary.restarts, 'restart')}"
    )
    return "\n".join(lines)
