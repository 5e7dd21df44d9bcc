"""Monitoring: the status table, metrics, the latency estimator, Prometheus text, the
session summary, and the ``status`` command that shows them."""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import pty
import random
import re
import signal
import subprocess
import sys
from types import SimpleNamespace
from typing import get_args

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor import log
from supervisor.errors import ToolArgumentsInvalid, ToolCallTimeout, ToolError, UnknownTool
from supervisor.monitor import (
    CallWindow,
    ServerMetrics,
    progress_line,
    prometheus_text,
    status_table,
    summary_text,
)
from supervisor.monitor._calls import KINDS
from supervisor.monitor._metrics import STATUSES, status_document
from supervisor.monitor._probes import readiness
from supervisor.monitor._table import _DETAIL_COLORS, ICONS, about, display_width
from supervisor.runtime import open_supervisor
from supervisor.server import HealthRecord, ServerStatus
from supervisor.server._health import LATENCY_BOUNDS, REPORTED_BOUNDS, Health, LatencyHistogram
from supervisor.testing.servers import stdio_params
from supervisor.tools._audit import AuditOutcome

from .probes import until

NOW = 1_800_000_000.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def record(server: str, status: str, **fields: object) -> HealthRecord:
    base: dict[str, object] = {
        "server": server,
        "type": "stdio",
        "status": status,
        "connected_since": None,
        "last_ok": None,
        "last_error": None,
        "error_count": 0,
        "consecutive_failures": 0,
        "restarts": 0,
        "tool_count": None,
        "unsupported_tools": None,
        "connect_time": None,
        "next_retry_at": None,
        "retry_attempt": 0,
        "calls_ok": 0,
        "calls_failed": 0,
        "latency_p50_ms": None,
        "latency_p99_ms": None,
        "pid": None,
        "max_attempts": 10,
    }
    return HealthRecord(**{**base, **fields})  # type: ignore[arg-type]


def sample_records() -> dict[str, HealthRecord]:
    """The records of the sample in docs/monitoring.md."""
    handshake = {"protocol_version": "2025-06-18"}
    records = [
        record(
            "github",
            "connected",
            type="http",
            target="https://api.githubcopilot.com/mcp",
            tool_count=12,
            last_ok=NOW - 30,
            server_name="github-mcp-server",
            server_version="0.9.1",
            resource_count=0,
            prompt_count=2,
            **handshake,
        ),
        record(
            "jira",
            "disconnected",
            type="sse",
            target="https://jira.example.com/sse",
            tool_count=0,
            last_error="connection refused",
            retry_attempt=5,
            next_retry_at=NOW + 7.2,
        ),
        record(
            "local-db",
            "connected",
            target="/usr/local/bin/uvx mcp-server-sqlite --db-path data.db",
            tool_count=5,
            last_ok=NOW - 150,
            server_name="sqlite",
            server_version="1.2.0",
            resource_count=3,
            prompt_count=1,
            **handshake,
        ),
        record(
            "custom-api",
            "connecting",
            type="ws",
            target="wss://api.example.com/mcp",
            retry_attempt=1,
        ),  # fmt: skip
        record(
            "notes",
            "failed",
            target="/usr/bin/python3 notes.py",
            last_ok=NOW - 3600,
            consecutive_failures=6,
            last_error="MCP server 'notes' (pid 4242) exited with code 1; last stderr line: "
            "'NOTES_FILE is not set'",
            server_name="notes",
            server_version="0.3.0",
            resource_count=1,
            prompt_count=0,
            **handshake,
        ),
        record("archive", "idle", target="npx -y @acme/archive-mcp"),
        record("legacy", "disabled", type="http", target="https://legacy.example.com/mcp"),
    ]
    return {r.server: r for r in records}


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "monitoring.md"


def documented_sample() -> str:
    """The table shown first in docs/monitoring.md."""
    text = DOCS.read_text()
    start = text.index("```\nMCP Server Status\n") + len("```\n")
    return text[start : text.index("\n```", start)]


SAMPLE = documented_sample()


class TestStatusTable:
    """The table is a pure function of the records and the clock."""

    def test_the_documented_sample(self) -> None:
        """Every server's row, then its second line (transport, command line or URL, what
        its handshake said, resources and prompts), then the whole reason a server is down;
        a disabled server is shown, and the footer counts it apart. docs/monitoring.md
        shows exactly this table."""
        assert status_table(sample_records(), now=NOW) == SAMPLE

    def test_the_second_line(self) -> None:
        """Only what is known; a program's directory left out, quoting kept; a long
        command line whole without a width."""
        assert about(record("a", "idle")) == "stdio"
        quoted = record("q", "idle", target="'/opt/my tools/srv' --flag 'x y'")
        assert about(quoted) == "stdio · srv --flag 'x y'"
        spaced = record("s", "idle", target="'/opt/my tools/my srv' -v")
        assert about(spaced) == "stdio · 'my srv' -v"
        url = record("u", "connected", type="http", target="https://h/mcp", server_name="x")
        assert about(url) == "http · https://h/mcp · x"  # a name without a version
        long = record("l", "idle", target="run " + "x" * 100)
        assert about(long) == "stdio · run " + "x" * 100
        assert f"      stdio · run {'x' * 100}" in status_table({"l": long}, now=NOW).splitlines()

    def test_without_a_width_every_line_is_whole(self) -> None:
        """No width (a pipe, a file): a long path, the handshake's parts after it, a long
        error in Details and the whole reason under it are all there, uncut."""
        path = "/tmp/a/very/long/path/that/goes/on/and/on/mcp-supervisor/supervisor/demo"
        error = "did not answer initialize within 10s (initTimeout); " + "e" * 150
        records = {
            "notes": record("notes", "connected", target=f"python {path}/servers/notes.py",
                            server_name="notes", protocol_version="2025-11-25",
                            resource_count=1, prompt_count=1, tool_count=4, last_ok=NOW),
            "slow": record("slow", "failed", consecutive_failures=5, last_error=error,
                           target=f"python {path}/servers/slow.py"),
        }  # fmt: skip
        lines = status_table(records, now=NOW).splitlines()
        assert "…" not in "".join(lines)
        assert lines[5] == (
            f"      stdio · python {path}/servers/notes.py · notes · MCP 2025-11-25 · "
            "1 resource, 1 prompt"
        )
        assert lines[6].endswith(
            "gave up after 5 attempts: did not answer initialize within 10s (initTimeout)"
        )
        assert lines[8] == "      ↳ " + error

    def test_at_a_width_a_path_is_cut_in_its_middle(self) -> None:
        """At a terminal's width the second line fits by cutting the command line's middle
        (``…``): the program, the file name and everything after the path stay."""
        path = "/tmp/a/very/long/path/that/goes/on/and/on/mcp-supervisor/supervisor/demo"
        notes = record("notes", "connected", target=f"python {path}/servers/notes.py",
                       server_name="notes", protocol_version="2025-11-25", resource_count=1,
                       prompt_count=1, tool_count=4, last_ok=NOW)  # fmt: skip
        for width in (80, 100, 119):
            second = status_table({"notes": notes}, now=NOW, width=width).splitlines()[5]
            assert display_width(second) == width, second
            head, cut, tail = second.partition("…")
            assert cut and head.startswith("      stdio · python /t")
            assert tail.endswith("notes.py · notes · MCP 2025-11-25 · 1 resource, 1 prompt")
        # Too narrow for all that: the path keeps a few columns, then the end is cut.
        second = status_table({"notes": notes}, now=NOW, width=40).splitlines()[5]
        assert display_width(second) == 40 and second.endswith("…")
        assert second.startswith("      stdio · python /…otes.py · notes")
        url = record("u", "idle", type="http", target="https://mcp.example.com/" + "p/" * 60)
        second = status_table({"u": url}, now=NOW, width=60).splitlines()[5]
        assert display_width(second) == 60 and "…" in second[:-1]
        assert second.startswith("      http · https://mcp.example") and second.endswith("/p/")

    def test_at_a_width_details_keep_their_retry(self) -> None:
        """A Details cell cut to the width cuts its error, keeping what comes before and
        after it (the retry countdown); the whole reason follows, wrapped to the width."""
        error = "cannot connect to https://mcp.example.com/" + "x" * 80 + ": connection refused"
        jira = record("jira", "disconnected", type="sse", target="https://h/sse",
                      last_error=error, retry_attempt=2, max_attempts=5,
                      next_retry_at=NOW + 8)  # fmt: skip
        lines = status_table({"jira": jira}, now=NOW, width=90).splitlines()
        assert display_width(lines[4]) <= 90
        assert lines[4].endswith("  cannot connect to https://… (retry 2/5 in 8s)")
        reason = [line.strip() for line in lines[6:-2]]
        assert reason[0].startswith("↳ cannot connect")
        assert " ".join(reason)[2:].replace(" ", "") == error.replace(" ", "")
        assert all(display_width(line) <= 90 for line in lines[6:-2])

    def test_every_state(self) -> None:
        """Failed (gave up, or misconfigured), idle, stopped and disabled; one of each,
        plural-aware; the whole reason under a row whose cell shows only its gist."""
        records = {
            r.server: r
            for r in [
                record(
                    "notes",
                    "failed",
                    consecutive_failures=6,
                    last_ok=NOW - 7200,
                    last_error="MCP server 'notes' (pid 41) exited with code 1; last stderr "
                    "line: 'boom'",
                ),
                record("misconfigured", "failed", last_error="missing variable ${TOKEN}"),
                record("lazy", "idle"),
                record("parked", "stopped", tool_count=1, last_ok=NOW - 3 * 86400),
                record("calc", "connected", tool_count=1, last_ok=NOW - 0.5),
                record("flaky", "disconnected", last_error="read timed out", retry_attempt=10),
                record("off", "disabled", target="off-server"),
            ]
        }
        expected = """\
MCP Server Status
───────────────────────────────────────────────────────────
  Server         Status  Tools  Last Heard     Details
───────────────────────────────────────────────────────────
  notes          🔴        —    2h ago         gave up after 6 attempts: exited with code 1
      stdio
      ↳ exited with code 1; last stderr line: 'boom'
  misconfigured  🔴        —    —              missing variable ${TOKEN}
      stdio
  lazy           ⚪        —    —              not started
      stdio
  parked         ⚪        1    3d ago         stopped
      stdio
  calc           🟢        1    just now
      stdio
  flaky          🔴        —    —              read timed out
      stdio
  off            ⚪        —    —              disabled
      stdio · off-server
───────────────────────────────────────────────────────────
  7 servers configured (1 disabled) | 1 connected | 1 tool available"""
        assert status_table(records, now=NOW) == expected

    def test_one_server_and_a_wide_tool_count(self) -> None:
        """Singular footer; a six-digit tool count widens its column and the rules."""
        records = {
            "big": record("big", "connected", tool_count=100000, last_ok=NOW - 59),
            "one": record("one", "stopped", tool_count=1),
        }
        assert status_table(records, now=NOW).splitlines()[1:] == [
            "─" * 58,
            "  Server       Status  Tools   Last Heard     Details",
            "─" * 58,
            "  big          🟢      100000  59s ago",
            "      stdio",
            "  one          ⚪           1  —              stopped",
            "      stdio",
            "─" * 58,
            "  2 servers configured | 1 connected | 100000 tools available",
        ]
        one = {"one": record("one", "connected", tool_count=1, last_ok=NOW - 61)}
        assert status_table(one, now=NOW).splitlines()[-1] == (
            "  1 server configured | 1 connected | 1 tool available"
        )

    def test_colour_only_on_request(self) -> None:
        """color=True adds ANSI colours, and only colours: without them it is the plain
        table; color=False has no escape at all."""
        coloured = status_table(sample_records(), now=NOW, color=True)
        assert "\x1b[31mconnection refused" in coloured  # red for a server that is down
        assert "\x1b[33mconnecting (attempt 2)" in coloured  # yellow while connecting
        assert ANSI.sub("", coloured) == SAMPLE
        assert "\x1b" not in status_table(sample_records(), now=NOW)

    def test_columns_align_by_display_width(self) -> None:
        """Each icon takes two terminal columns; every column starts at the same display
        column in the header and in each row, whatever the icon."""
        assert [display_width(icon) for icon in "🟢🟡🔴⚪"] == [2, 2, 2, 2]
        assert display_width("—…─") == 3 and display_width("e\u0301") == 1
        lines = SAMPLE.splitlines()
        header, rows = lines[2], [line for line in lines[4:-2] if line[2] != " "]
        assert len(rows) == 7
        tools_end = display_width(header[: header.index("Tools")]) + 3  # right-aligned digits
        active = display_width(header[: header.index("Last Heard")])
        details = display_width(header[: header.index("Details")])
        for row in rows:
            # (start, end) display columns of each cell, in order
            spans = [
                (display_width(row[: m.start()]), display_width(row[: m.end()]))
                for m in re.finditer(r"\S+(?: \S+)*", row)
            ]
            assert spans[2][1] == tools_end and spans[3][0] == active
            if len(spans) > 4:
                assert spans[4][0] == details

    def test_long_lines_are_cut_to_the_width(self) -> None:
        """Details are cut with … to fit ``width`` display columns; the error is shortened
        to its first clause without the server prefix."""
        long = record(
            "db", "failed", consecutive_failures=1, last_error="MCP server 'db' " + "x" * 200
        )
        lines = status_table({"db": long}, now=NOW, width=80).splitlines()
        row = next(line for line in lines if line.startswith("  db"))
        assert display_width(row) == 80 and row.endswith("…")
        assert "gave up after 1 attempt: xxx" in row and "MCP server" not in row

    def test_progress_line(self) -> None:
        """Servers settled (connected, failed or stopped) of all enabled ones."""
        assert progress_line(sample_records()) == "connecting 3/6…"  # disabled: not counted
        unheard = {"quiet": record("quiet", "unverified"), "lazy": record("lazy", "idle")}
        assert progress_line(unheard) == "connecting 1/2…"  # unverified: it did connect

    def test_every_status_has_an_icon_and_a_colour(self) -> None:
        """Each status is drawn deliberately: an icon, and a colour unless it is
        connected; only connected is green, unverified is orange."""
        assert set(ICONS) == set(ServerStatus)
        assert set(_DETAIL_COLORS) == set(ServerStatus) - {ServerStatus.CONNECTED}
        assert [s for s, icon in ICONS.items() if icon == "🟢"] == [ServerStatus.CONNECTED]
        assert ICONS[ServerStatus.UNVERIFIED] == "🟠"

    def test_last_heard_and_unverified(self) -> None:
        """The Last Heard column is when the connection last heard from the server (its last
        good exchange when that is not known); a connected server not heard from within
        its window is unverified: orange, not counted as connected, saying for how long
        it has not been heard from — in yellow on a terminal."""
        records = {
            "busy": record(
                "busy", "connected", tool_count=2, last_ok=NOW - 300, last_heard=NOW - 2
            ),
            "quiet": record(
                "quiet", "unverified", tool_count=1, last_ok=NOW - 90, last_heard=NOW - 42
            ),
            "older": record("older", "connected", tool_count=1, last_ok=NOW - 61),
        }
        assert status_table(records, now=NOW).splitlines()[4:] == [
            "  busy         🟢        2    2s ago",
            "      stdio",
            "  quiet        🟠        1    42s ago        not heard from for 42s",
            "      stdio",
            "  older        🟢        1    1m ago",
            "      stdio",
            "─" * 57,
            "  3 servers configured | 2 connected | 3 tools available",
        ]
        coloured = status_table(records, now=NOW, color=True)
        assert "\x1b[33mnot heard from for 42s" in coloured
        assert "\x1b[33m2 connected" in coloured  # not every server is up
        assert display_width("🟠") == 2
        never = {"new": record("new", "unverified", tool_count=1)}
        assert "not heard from yet" in status_table(never, now=NOW)


# -- the latency estimator ----------------------------------------------------------------


def exact_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


class TestLatencyHistogram:
    """Fixed log buckets: quantiles within 5 %, counts exact."""

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_accuracy_on_random_latencies(self, seed: int) -> None:
        """Log-normal latencies around a few ms: p50, p90, p99, p99.9 within 5 %."""
        rng = random.Random(seed)
        values = [rng.lognormvariate(math.log(0.003), 1.5) for _ in range(20_000)]
        histogram = LatencyHistogram()
        for value in values:
            histogram.observe(value)
        for q in (0.5, 0.9, 0.99, 0.999):
            exact = exact_quantile(values, q)
            estimate = histogram.quantile(q)
            assert estimate is not None
            assert abs(estimate - exact) <= 0.05 * exact, (q, estimate, exact)
        assert histogram.count == len(values)
        assert histogram.sum == pytest.approx(math.fsum(values))

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(st.floats(min_value=1e-6, max_value=900.0), min_size=1, max_size=200),
        st.floats(min_value=0.001, max_value=1.0),
    )
    def test_any_data_any_quantile(self, values: list[float], q: float) -> None:
        """For any latencies between 1 µs and 900 s, any quantile is within 5 %."""
        histogram = LatencyHistogram()
        for value in values:
            histogram.observe(value)
        exact = exact_quantile(values, q)
        estimate = histogram.quantile(q)
        assert estimate is not None and abs(estimate - exact) <= 0.05 * exact

    def test_cumulative_buckets_are_exact(self) -> None:
        """The reported buckets count exactly the values at or below each bound."""
        rng = random.Random(7)
        values = [rng.choice(REPORTED_BOUNDS) for _ in range(500)]
        values += [rng.uniform(0, 120) for _ in range(500)]
        histogram = LatencyHistogram()
        for value in values:
            histogram.observe(value)
        assert histogram.cumulative() == tuple(
            (bound, sum(v <= bound for v in values)) for bound in REPORTED_BOUNDS
        )
        assert set(REPORTED_BOUNDS) <= set(LATENCY_BOUNDS)

    def test_empty_and_extremes(self) -> None:
        """No observation: no quantile. Beyond the last bucket: the maximum; in the first
        (up to 1 µs), at most 1 µs."""
        histogram = LatencyHistogram()
        assert histogram.quantile(0.5) is None
        histogram.observe(5000.0)
        histogram.observe(0.0)
        assert histogram.quantile(1.0) == 5000.0
        assert 0.0 <= (histogram.quantile(0.5) or -1) <= 1e-6


# -- metrics -------------------------------------------------------------------------------


class TestHealthTimes:
    """Up and down time, reconnects, from explicit trio times."""

    def test_up_down_and_reconnects(self) -> None:
        """Connected 10 s, down 4 s, up 6 s, down 2 s and counting: exact sums."""
        health = Health()
        health.mark_connected(100.0)
        health.mark_down(110.0)
        health.mark_down(112.0)  # a failed reconnection attempt: the same outage
        health.mark_connected(114.0)
        health.mark_down(120.0)
        metrics = health.metrics("s", "disconnected", 122.0)
        assert (metrics.uptime_s, metrics.downtime_s) == (16.0, 6.0)
        assert metrics.reconnects == 1 and metrics.reconnect_avg_s == 4.0
        assert metrics.success_rate is None and metrics.latency_p50_ms is None

    def test_a_stop_is_neither_up_nor_down(self) -> None:
        """Stopped on purpose: the clocks stop, and the next connection is no reconnect."""
        health = Health()
        health.mark_connected(0.0)
        health.mark_stopped(5.0)
        health.mark_connected(50.0)
        metrics = health.metrics("s", "connected", 51.0)
        assert (metrics.uptime_s, metrics.downtime_s, metrics.reconnects) == (6.0, 0.0, 0)

    def test_transitions_keep_the_record(self) -> None:
        """connected / failed / stopped set the record's fields; an outage's length comes
        back from the connection that ends it; a stop keeps a `failed` status."""
        health = Health()
        assert health.connected(3, 0.5, wall=1000.0, now=0.0) is None  # no outage yet
        assert health.status is ServerStatus.CONNECTED and health.connected_since == 1000.0
        assert (health.tool_count, health.connect_time, health.last_ok) == (3, 0.5, 1000.0)
        health.failed("boom", wall=1010.0, now=10.0)
        health.failed("boom again", wall=1012.0, now=12.0)
        assert health.status is ServerStatus.DISCONNECTED and health.connected_since is None
        assert (health.last_error, health.error_count, health.consecutive_failures) == (
            "boom again",
            2,
            2,
        )
        assert health.disconnected_at == 1010.0  # the outage began at the first failure
        assert health.connected(4, 0.2, wall=1015.0, now=15.0) == 5.0
        assert (health.consecutive_failures, health.error_count) == (0, 2)
        assert health.disconnected_at is None and health.next_retry_at is None
        health.stopped(True, now=20.0)
        assert health.status is ServerStatus.DISCONNECTED
        health.stopped(False, now=21.0)
        assert health.status is ServerStatus.IDLE
        health.status = ServerStatus.FAILED
        health.stopped(True, now=22.0)
        assert health.status is ServerStatus.FAILED
        metrics = health.metrics("s", "failed", 30.0)
        assert (metrics.uptime_s, metrics.downtime_s, metrics.reconnects) == (15.0, 5.0, 1)


def stdio(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **extra}


async def test_a_tool_error_is_counted_apart_from_failures() -> None:
    """A tool's own error result (``isError``) is the server working: it counts in
    ``calls_tool_error`` and for the success rate, never in ``calls_failed``; the record,
    the metrics, the Prometheus text and the summary all say so."""
    config = {"mcpServers": {"notes": stdio("rich")}}
    async with open_supervisor(config) as sup:
        assert (await sup.call("notes_echo", {"text": "a"})).text == "a"
        for _ in range(2):
            with pytest.raises(ToolError):
                await sup.call("notes_fail", {"message": "no"})
        record = sup.status()["notes"]
        assert (record.calls_ok, record.calls_tool_error, record.calls_failed) == (1, 2, 0)
        notes = sup.metrics()["notes"]
        assert (notes.calls_ok, notes.calls_tool_error, notes.calls_failed) == (1, 2, 0)
        assert notes.success_rate == 1.0 and notes.latency_count == 3
        _, samples = parse_prometheus(prometheus_text(sup.metrics()))
        calls = {
            labels["result"]: value
            for name, labels, value in samples
            if name == "mcp_supervisor_server_calls_total"
        }
        assert calls == {"ok": 1.0, "tool_error": 2.0, "failed": 0.0}
    summary = sup.summary()
    assert (summary.calls_ok, summary.calls_tool_error, summary.calls_failed) == (1, 2, 0)
    assert "calls 1 ok / 2 tool errors / 0 failed (100%)" in summary_text(summary)
    assert "total: 1 server, 1 connected, 1 call ok, 2 tool errors, 0 failed, " in (
        summary_text(summary)
    )


def test_success_rate_counts_tool_errors_as_answers() -> None:
    """success_rate is (ok + tool errors) / (ok + tool errors + failed)."""
    health = Health(calls_ok=2, calls_tool_error=1, calls_failed=1)
    metrics = health.metrics("s", "connected", 0.0)
    assert (metrics.calls_ok, metrics.calls_tool_error, metrics.calls_failed) == (2, 1, 1)
    assert metrics.success_rate == 0.75
    assert Health(calls_tool_error=1).metrics("s", "connected", 0.0).success_rate == 1.0


async def test_metrics_of_a_server_killed_and_recovered() -> None:
    """kill -9, then recovery: one reconnect, its time counted as downtime, up + down is
    the time since the first connection; calls counted; the summary frozen and logged."""
    stream = io.StringIO()
    log.configure_logging(level="info", stream=stream, json=True, force=True)
    config = {
        "mcpServers": {
            "notes": stdio("rich", lazy=False, restartOnCrash=True),
            "calc": stdio("echo"),
        },
        "supervisor": {"backoff": {"local": {"initial": 0.2, "jitter": 0}}},
    }
    try:
        opened = trio.current_time()
        async with open_supervisor(config) as sup:
            await until(lambda: sup.status()["notes"].status == "connected", 20)
            seen_up = trio.current_time()
            assert (await sup.call("notes_echo", {"text": "a"})).text == "a"
            pid = sup.status()["notes"].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            await until(lambda: sup.metrics()["notes"].reconnects == 1, 20)
            assert (await sup.call("notes_echo", {"text": "b"})).text == "b"
            with pytest.raises(ToolError):
                await sup.call("notes_fail", {"message": "no"})
            before = trio.current_time()
            metrics = sup.metrics()
            after = trio.current_time()
            notes = metrics["notes"]
            assert list(metrics) == ["notes", "calc"]
            assert notes.status == "connected" and notes.restarts == 1
            assert notes.reconnect_avg_s is not None and notes.reconnect_avg_s >= 0.2
            assert notes.downtime_s == pytest.approx(notes.reconnect_avg_s)
            assert before - seen_up <= notes.uptime_s + notes.downtime_s <= after - opened
            # the tool's own error is the server working: counted apart, not a failure
            assert (notes.calls_ok, notes.calls_tool_error, notes.calls_failed) == (2, 1, 0)
            assert notes.success_rate == 1.0
            assert notes.latency_count == 3 and notes.latency_p50_ms is not None
            assert notes.latency_p99_ms is not None and notes.latency_p99_ms > 0
            assert metrics["calc"].status == "idle" and metrics["calc"].uptime_s == 0.0
            document = json.loads(json.dumps(status_document(sup.status(), metrics)))
            assert document["metrics"]["notes"]["reconnects"] == 1
        summary = sup.summary()
        assert summary is sup.summary()  # frozen when the block ended
        assert summary.servers["notes"].status == "connected"  # before the shutdown
        assert (summary.calls_ok, summary.calls_failed, summary.reconnects) == (2, 0, 1)
        assert summary.calls_tool_error == 1
        assert 0 < summary.duration_s <= trio.current_time() - opened
        assert "notes" in summary_text(summary)
    finally:
        log.reset_logging()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    summaries = [line for line in lines if line["event"] == "session summary"]
    assert len(summaries) == 1
    assert summaries[0]["level"] == "info" and summaries[0]["logger"] == "supervisor.runtime"
    assert summaries[0]["reconnects"] == 1 and summaries[0]["per_server"]["notes"]["calls_ok"] == 2


# -- Prometheus ----------------------------------------------------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE_LINE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')

FAMILIES = {
    "mcp_supervisor_server_up": "gauge",
    "mcp_supervisor_server_status": "gauge",
    "mcp_supervisor_server_tools": "gauge",
    "mcp_supervisor_server_uptime_seconds_total": "counter",
    "mcp_supervisor_server_downtime_seconds_total": "counter",
    "mcp_supervisor_server_restarts_total": "counter",
    "mcp_supervisor_server_reconnects_total": "counter",
    "mcp_supervisor_server_reconnect_seconds_total": "counter",
    "mcp_supervisor_server_probes_total": "counter",
    "mcp_supervisor_server_probes_missed_total": "counter",
    "mcp_supervisor_server_last_heard_timestamp_seconds": "gauge",
    "mcp_supervisor_server_resident_memory_bytes": "gauge",
    "mcp_supervisor_server_cpu_seconds_total": "counter",
    "mcp_supervisor_server_calls_total": "counter",
    "mcp_supervisor_server_calls_rate_limited_total": "counter",
    "mcp_supervisor_server_calls_waiting": "gauge",
    "mcp_supervisor_server_call_duration_seconds": "histogram",
}


def parse_prometheus(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    """A strict reader of the text format 0.0.4: every sample belongs to a family whose
    HELP and TYPE came first; names, labels and values are well formed."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    helps: set[str] = set()
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert re.fullmatch(NAME, name) and name not in helps and line.split(" ", 3)[3]
            helps.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name in helps and name not in types
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            types[name] = kind
        else:
            match = SAMPLE_LINE.match(line)
            assert match, line
            name, raw_labels, value = match.groups()
            labels = dict(LABEL.findall(raw_labels or ""))
            assert "".join(f'{k}="{v}",' for k, v in labels.items()).rstrip(",") == raw_labels
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            family = family if types.get(family) == "histogram" else name
            assert family in types, line
            samples.append((name, labels, float(value)))
    return types, samples


def metrics_for(server: str, **fields: object) -> ServerMetrics:
    base: dict[str, object] = {
        "server": server,
        "status": "connected",
        "uptime_s": 12.5,
        "downtime_s": 1.5,
        "reconnects": 1,
        "reconnect_avg_s": 1.5,
        "restarts": 1,
        "calls_ok": 9,
        "calls_failed": 1,
        "success_rate": 0.9,
        "latency_p50_ms": 1.0,
        "latency_p99_ms": 4.0,
        "latency_count": 10,
        "latency_sum_s": 0.02,
        "latency_buckets": LatencyHistogram().cumulative(),
        "tool_count": 3,
    }
    return ServerMetrics(**{**base, **fields})  # type: ignore[arg-type]


def test_prometheus_text_parses_line_by_line() -> None:
    """Every documented family, with HELP and TYPE, a server label on every sample, the
    status state set, and a cumulative histogram whose +Inf bucket is its count."""
    histogram = LatencyHistogram()
    for value in (0.0004, 0.002, 0.002, 0.3, 200.0):
        histogram.observe(value)
    metrics = {
        "notes": metrics_for(
            "notes",
            latency_buckets=histogram.cumulative(),
            latency_count=histogram.count,
            latency_sum_s=histogram.sum,
        ),
        'we"ird\\name': metrics_for('we"ird\\name', status="failed", calls_ok=0),
    }
    types, samples = parse_prometheus(prometheus_text(metrics))
    assert types == FAMILIES
    assert all("server" in labels for _, labels, _ in samples)
    by = {(name, tuple(sorted(labels.items()))): value for name, labels, value in samples}
    notes = ("server", "notes")
    assert by[("mcp_supervisor_server_up", (notes,))] == 1.0
    assert by[("mcp_supervisor_server_calls_total", (("result", "ok"), notes))] == 9
    assert by[("mcp_supervisor_server_calls_total", (("result", "failed"), notes))] == 1
    assert by[("mcp_supervisor_server_calls_total", (("result", "tool_error"), notes))] == 0
    assert by[("mcp_supervisor_server_reconnect_seconds_total", (notes,))] == 1.5
    weird = ("server", 'we\\"ird\\\\name')
    assert by[("mcp_supervisor_server_up", (weird,))] == 0.0
    assert by[("mcp_supervisor_server_status", (weird, ("status", "failed")))] == 1.0
    assert (
        sum(
            v
            for (n, labels), v in by.items()
            if n == "mcp_supervisor_server_status" and weird in labels
        )
        == 1.0
    )
    assert {dict(labels)["status"] for n, labels in by if n.endswith("_status")} == set(STATUSES)
    buckets = [
        (labels["le"], value)
        for name, labels, value in samples
        if name == "mcp_supervisor_server_call_duration_seconds_bucket"
        and labels["server"] == "notes"
    ]
    assert buckets[-1] == ("+Inf", 5)
    counts = [value for _, value in buckets]
    assert counts == sorted(counts) and dict(buckets)["0.001"] == 1 and dict(buckets)["0.5"] == 4
    assert by[("mcp_supervisor_server_call_duration_seconds_count", (notes,))] == 5


def test_prometheus_unverified_is_not_up_and_says_when_last_heard() -> None:
    """An unverified server (connected, not heard from within its window) is not up; a
    degraded one is. Each server heard from has its last-heard time; one never heard from
    has no sample. Probes sent and missed are counters."""
    metrics = [
        metrics_for("quiet", status="unverified", last_heard=NOW - 42, probes=7, probes_missed=1),
        metrics_for("slow", status="degraded", last_heard=NOW - 3, probes=4, probes_missed=1),
        metrics_for("lazy", status="idle"),
    ]
    types, samples = parse_prometheus(prometheus_text(metrics))
    assert types == FAMILIES
    by = {(name, labels["server"]): value for name, labels, value in samples if len(labels) == 1}
    assert by[("mcp_supervisor_server_up", "quiet")] == 0.0
    assert by[("mcp_supervisor_server_up", "slow")] == 1.0
    heard = "mcp_supervisor_server_last_heard_timestamp_seconds"
    assert (by[(heard, "quiet")], by[(heard, "slow")]) == (NOW - 42, NOW - 3)
    assert (heard, "lazy") not in by
    assert by[("mcp_supervisor_server_probes_total", "quiet")] == 7
    assert by[("mcp_supervisor_server_probes_missed_total", "quiet")] == 1
    assert by[("mcp_supervisor_server_probes_total", "lazy")] == 0
    state = {
        labels["status"]: value
        for name, labels, value in samples
        if name == "mcp_supervisor_server_status" and labels["server"] == "quiet"
    }
    assert state["unverified"] == 1.0 and sum(state.values()) == 1.0


class _Supervised:
    """What readiness reads of a supervisor: its servers' configs and health records."""

    def __init__(self, records: dict[str, HealthRecord], required: set[str]) -> None:
        self._records = records
        self.servers = {
            name: SimpleNamespace(config=SimpleNamespace(required=name in required))
            for name in records
        }

    def status(self) -> dict[str, HealthRecord]:
        return self._records


def test_readiness_counts_an_unverified_required_server_as_not_ready() -> None:
    """A required server connected or degraded is ready; unverified (not heard from
    within its window) is not, and is named with its status; an optional one never
    matters."""
    up = {"db": record("db", "connected"), "search": record("search", "unverified")}
    assert readiness(_Supervised(up, {"db"})) == (200, {"status": "ready"})
    slow = {"db": record("db", "degraded", last_error="calls time out")}
    assert readiness(_Supervised(slow, {"db"}))[0] == 200
    quiet = {"db": record("db", "unverified"), "search": record("search", "connected")}
    code, document = readiness(_Supervised(quiet, {"db"}))
    assert code == 503
    assert document == {
        "status": "not ready",
        "required_servers_down": {"db": {"status": "unverified", "last_error": None}},
    }


def test_readiness_counts_a_lost_required_server_as_not_ready() -> None:
    """A required server whose connection was lost is not ready while it reconnects —
    disconnected, then connecting again after that failure — though a first connection
    (connecting, no failure yet) and a lazy server not started (idle) are."""
    lost = {"db": record("db", "disconnected", last_error="gone", consecutive_failures=1)}
    assert readiness(_Supervised(lost, {"db"}))[0] == 503
    again = {"db": record("db", "connecting", last_error="gone", consecutive_failures=1)}
    code, document = readiness(_Supervised(again, {"db"}))
    assert code == 503
    assert document["required_servers_down"] == {
        "db": {"status": "connecting", "last_error": "gone"}
    }
    for first in (record("db", "connecting"), record("db", "idle")):
        assert readiness(_Supervised({"db": first}, {"db"}))[0] == 200


# -- the status command --------------------------------------------------------------------


def write_config(tmp_path: pathlib.Path, servers: dict[str, object]) -> str:
    """A config file for the CLI. Its stdio servers get a generous ``initTimeout``: on a
    loaded 2-core CI machine an SDK fixture can take more than the default 10 s to
    start, and these tests are about what ``status`` prints, not about that timeout."""
    for server in servers.values():
        if isinstance(server, dict) and "command" in server:
            server.setdefault("initTimeout", 60)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "supervisor", *args]


async def test_status_prints_the_table(tmp_path: pathlib.Path) -> None:
    """status: the table, plain when stdout is not a terminal; exit 1 when one failed."""
    config = write_config(
        tmp_path,
        {"alpha": stdio("echo"), "broken": {"command": "false", "maxRestarts": 0}},
    )
    done = await trio.run_process(
        cli("status", "--config", config), capture_stdout=True, capture_stderr=True, check=False
    )
    out = done.stdout.decode()
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[:4] == ["MCP Server Status", "─" * 57, lines[2], "─" * 57]
    assert lines[2].split() == ["Server", "Status", "Tools", "Last", "Heard", "Details"]
    assert re.fullmatch(r"  alpha {8}🟢 {8}3 {4}(just now|\d+s ago)", lines[4])
    second = r"      stdio · python\S* -m supervisor\.testing\.servers echo · fixture-echo · .+"
    assert re.fullmatch(second, lines[5])
    assert lines[6] == "  broken       🔴        —    —              tried once: exited with code 1"
    assert lines[7] == "      stdio · false"
    assert lines[-1] == "  2 servers configured | 1 connected | 3 tools available"


def long_path_servers(tmp_path: pathlib.Path) -> dict[str, object]:
    """A connected server, and a disabled one whose command line is a long path."""
    script = tmp_path.joinpath(*["a-rather-long-directory-name"] * 5, "server.py")
    return {
        "echo": stdio("echo"),
        "off": {"command": sys.executable, "args": [str(script), "--verbose"], "disabled": True},
    }


async def test_status_prints_whole_lines_to_a_pipe(tmp_path: pathlib.Path) -> None:
    """Piped, ``status`` prints every line whole, however narrow ``$COLUMNS`` says the
    terminal is: a pipe has no width. The second lines keep their long paths and all
    that follows them."""
    servers = long_path_servers(tmp_path)
    config = write_config(tmp_path, servers)
    done = await trio.run_process(
        cli("status", "--config", config),
        capture_stdout=True,
        capture_stderr=True,
        env={**os.environ, "COLUMNS": "40"},
    )
    lines = done.stdout.decode().splitlines()
    assert "…" not in done.stdout.decode()
    assert lines[2] == "  Server       Status  Tools  Last Heard     Details"
    assert re.fullmatch(
        r"      stdio · python\S* -m supervisor\.testing\.servers echo · fixture-echo · "
        r"MCP \d{4}-\d\d-\d\d · 0 resources, 0 prompts",
        lines[5],
    )
    script = servers["off"]["args"][0]  # type: ignore[index]
    assert re.fullmatch(rf"      stdio · python\S* {re.escape(script)} --verbose", lines[7])


async def read_terminal(master: int, output: bytearray) -> None:
    """Read what a terminal's other side is shown (``master``) into ``output``, to the end."""
    stream = trio.lowlevel.FdStream(master)
    try:
        while data := await stream.receive_some():
            output.extend(data)
    except (OSError, trio.BrokenResourceError):
        pass  # EIO: the terminal's other side is closed
    finally:
        await stream.aclose()


async def test_status_on_a_terminal_fits_each_line_in_its_width(tmp_path: pathlib.Path) -> None:
    """On a terminal, ``status`` fits each line in the terminal's width (``$COLUMNS``
    here): a command line is cut in its middle — its program, its last words and what the
    handshake said after it stay."""
    config = write_config(tmp_path, long_path_servers(tmp_path))
    master, slave = pty.openpty()
    output = bytearray()

    environ = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_terminal, master, output)
            process = await trio.lowlevel.open_process(
                cli("status", "--config", config),
                stdin=subprocess.DEVNULL,
                stdout=slave,
                stderr=subprocess.DEVNULL,
                env=environ,
            )
            os.close(slave)
            assert await process.wait() == 0
    lines = output.decode().replace("\r\n", "\n").splitlines()
    assert lines[0] == "MCP Server Status" and lines[-1].startswith("  2 servers configured")
    assert all(display_width(line) <= 100 for line in lines), lines
    assert re.fullmatch(
        r"      stdio · python\S* -m \S*…\S* echo · fixture-echo · "
        r"MCP \d{4}-\d\d-\d\d · 0 resources, 0 prompts",
        lines[5],
    )
    assert re.fullmatch(r"      stdio · python\S* /\S+…\S+/server\.py --verbose", lines[7])
    assert display_width(lines[7]) == 100


async def test_status_shows_disabled_servers_and_what_each_server_is(
    tmp_path: pathlib.Path,
) -> None:
    """A disabled server is in the table (⚪, "disabled") and in --json (status
    "disabled"), never started, and does not make the exit 1; every server's second line
    and record say its transport, command line or URL (secrets left out), what its
    handshake said, and its resource and prompt counts."""
    started = tmp_path / "started"
    code = f"open({str(started)!r}, 'w').close()"
    config = write_config(
        tmp_path,
        {
            "notes": stdio("rich"),
            "off": {
                "command": sys.executable,
                "args": ["-c", code, "--token", "s3cret-value"],
                "disabled": True,
            },
            "remote": {"url": "https://example.com/mcp?api_key=s3cret", "enabled": False},
        },
    )
    done = await trio.run_process(
        cli("status", "--config", config), capture_stdout=True, capture_stderr=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert re.fullmatch(
        r"      stdio · python\S* -m supervisor\.testing\.servers rich · fixture-rich · "
        r"MCP \d{4}-\d\d-\d\d · 2 resources, 2 prompts",
        lines[5],
    )
    assert lines[6] == "  off          ⚪        —    —              disabled"
    assert re.match(r"      stdio · python\S* -c 'open\(", lines[7])
    assert lines[7].endswith(".close()' --token ***")  # whole: a pipe has no width
    assert "s3cret" not in done.stdout.decode()
    assert lines[8] == "  remote       ⚪        —    —              disabled"
    assert lines[9] == "      http · https://example.com/mcp"
    assert lines[-1] == "  3 servers configured (2 disabled) | 1 connected | 13 tools available"
    done = await trio.run_process(
        cli("status", "--config", config, "--json"), capture_stdout=True, capture_stderr=True
    )
    document = json.loads(done.stdout)
    notes, off, remote = document["servers"]
    assert notes["type"] == "stdio" and notes["status"] == "connected"
    assert notes["target"].endswith(" -m supervisor.testing.servers rich")
    assert (notes["server_name"], notes["server_version"]) == ("fixture-rich", None)
    assert notes["protocol_version"] and (notes["resource_count"], notes["prompt_count"]) == (2, 2)
    assert (off["status"], off["type"], off["pid"], off["server_name"]) == (
        "disabled", "stdio", None, None
    )  # fmt: skip
    assert off["target"].endswith(" --token ***") and "s3cret" not in done.stdout.decode()
    assert (remote["status"], remote["target"]) == ("disabled", "https://example.com/mcp")
    assert set(document["metrics"]) == {"notes"}  # a disabled server has no metrics
    assert not started.exists()  # never started


async def test_status_json_contains_the_metrics(tmp_path: pathlib.Path) -> None:
    """status --json: one document with the records and each server's metrics."""
    config = write_config(tmp_path, {"alpha": stdio("echo"), "beta": stdio("echo")})
    done = await trio.run_process(
        cli("status", "--config", config, "--json"), capture_stdout=True, capture_stderr=True
    )
    document = json.loads(done.stdout)
    assert [s["server"] for s in document["servers"]] == ["alpha", "beta"]
    # status makes one attempt per server: no restarts would be tried
    assert document["servers"][0]["max_attempts"] == 0
    metrics = document["metrics"]
    assert set(metrics) == {"alpha", "beta"}
    assert set(metrics["alpha"]) >= {
        "server", "status", "uptime_s", "downtime_s", "reconnects", "reconnect_avg_s",
        "calls_ok", "calls_failed", "success_rate", "latency_p50_ms", "latency_p99_ms",
    }  # fmt: skip
    assert metrics["alpha"]["status"] == "connected" and metrics["alpha"]["uptime_s"] > 0


async def test_status_shows_progress_on_a_terminal(tmp_path: pathlib.Path) -> None:
    """With stderr on a terminal, "connecting n/N…" is drawn there, then erased."""
    config = write_config(tmp_path, {"alpha": stdio("echo"), "beta": stdio("echo")})
    master, slave = pty.openpty()
    output = bytearray()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_terminal, master, output)
            process = await trio.lowlevel.open_process(
                cli("status", "--config", config), stdout=subprocess.DEVNULL, stderr=slave
            )
            os.close(slave)
            assert await process.wait() == 0
    text = output.decode()
    assert re.search(r"connecting [0-2]/2…", text) and text.endswith("\r\x1b[K")


async def test_status_watch_redraws_until_ctrl_c(tmp_path: pathlib.Path) -> None:
    """--watch prints the table as servers change, and Ctrl-C ends it (exit 130, as
    every command stopped by Ctrl-C)."""
    config = write_config(tmp_path, {"alpha": stdio("echo")})
    process = await trio.lowlevel.open_process(
        cli("status", "--config", config, "--watch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    output = b""
    with trio.fail_after(60):
        while b"1 connected" not in output:
            output += await process.stdout.receive_some()
        assert output.count(b"MCP Server Status") >= 2  # drawn first, then redrawn
        process.send_signal(signal.SIGINT)
        assert await process.wait() == 130
    await process.stdout.aclose()


async def test_retry_details_are_there_as_soon_as_the_error_is_announced() -> None:
    """When ``mcp.error`` says "retry in", ``status()`` says so too (before the tree has
    scheduled the restart), and the table shows it. (The first crash is restarted at
    once; the second in a row waits the initial backoff.)"""
    config = {
        "mcpServers": {"calc": stdio("echo", lazy=False)},
        "supervisor": {"backoff": {"local": {"initial": 5, "jitter": 0, "maxAttempts": 3}}},
    }
    async with (
        open_supervisor(config) as sup,
        sup.subscribe("mcp.error", "mcp.connected") as events,
    ):
        await sup.connect_all()
        events.drain()
        os.kill(sup.status()["calc"].pid, signal.SIGKILL)
        with trio.fail_after(60):
            first = await events.receive()
            assert (first.kind, first.retry_in) == ("mcp.error", 0)
            assert (await events.receive()).kind == "mcp.connected"
        os.kill(sup.status()["calc"].pid, signal.SIGKILL)
        with trio.fail_after(10):
            event = await events.receive()
        assert event.kind == "mcp.error"
        record = sup.status()["calc"]
        assert (record.status, record.retry_attempt, record.max_attempts) == ("disconnected", 2, 3)
        assert record.next_retry_at is not None and event.retry_in is not None
        # When the retry is due, as announced: not how long this test took to look.
        assert record.next_retry_at == pytest.approx(event.ts + event.retry_in, abs=1)
        table = status_table({"calc": record}, now=record.next_retry_at - event.retry_in)
        assert "(retry 2/3 in 5s)" in table


# -- the recent calls the dashboard's strips draw ------------------------------------------


def test_a_call_window_keeps_the_slowest_call_of_each_second_and_outcome() -> None:
    """However many calls end in one second, a window keeps one per outcome class, the
    slowest; it forgets those that ended before its span."""
    window = CallWindow(seconds=10)
    for latency in (0.5, 0.1, 0.9, 0.2):  # four ok calls ending in second 100
        window.add("s", "s_echo", latency, "ok", now=100.5)
    window.add("s", "s_add", 0.3, "invalid_arguments", "ToolArgumentsInvalid", now=100.6)
    kept = window.calls("s", since=0)
    assert [(c.kind, c.latency) for c in kept] == [("ok", 0.9), ("fail", 0.3)]
    assert kept[0].at == pytest.approx(99.6) and kept[1].error == "ToolArgumentsInvalid"
    assert (window.added, window.thinned) == (5, 3)
    window.add("s", "s_echo", 0.1, "ok", now=101.2)  # a new second: kept
    assert len(window.calls("s", since=0)) == 3
    assert [c.at for c in window.calls("s", since=100.9)] == [pytest.approx(101.1)]
    window.add("s", "s_echo", 0.1, "indefinite", now=111.0)  # second 100 is out of the span
    assert [(c.kind, c.second) for c in window.calls("s", since=0)] == [("ok", 101), ("info", 111)]
    assert window.calls("other", since=0) == []


def test_every_audit_outcome_has_an_outcome_class_of_the_fault_report() -> None:
    """Each outcome the gate can give a call is drawn as one of the report's classes:
    answered ``ok``, the tool's own ``tool-error``, ``fail`` (not executed) or ``info``
    (may have been)."""
    assert set(KINDS) == set(get_args(AuditOutcome))
    assert set(KINDS.values()) == {"ok", "tool-error", "fail", "info"}
    assert KINDS["indefinite"] == "info" and KINDS["refused"] == "fail"


async def test_recent_calls_keeps_every_call_of_its_block_with_its_outcome() -> None:
    """Within ``recent_calls()`` each call that named a server is kept with its latency
    and outcome class (a tool error, invalid arguments, a timeout once sent); outside
    it, and for a name no server has, nothing is kept."""
    config = {"mcpServers": {"notes": stdio("rich"), "slow": stdio("slow")}}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        await sup.call("notes_echo", {"text": "before"})
        with sup.recent_calls() as window, sup.recent_calls(60) as other:
            await sup.call("notes_echo", {"text": "a"})
            with pytest.raises(ToolError):
                await sup.call("notes_fail", {"message": "no"})
            with pytest.raises(ToolArgumentsInvalid):
                await sup.call("notes_echo", {"text": 1})
            with pytest.raises(ToolCallTimeout):
                await sup.call("slow_sleep", {"seconds": 30}, timeout=0.2)
            with pytest.raises(UnknownTool):
                await sup.call("nobody_echo", {"text": "x"})
        await sup.call("notes_echo", {"text": "after"})
    notes = window.calls("notes", since=0)
    assert [(c.tool, c.kind, c.error) for c in notes] == [
        ("notes_echo", "ok", None),
        ("notes_fail", "tool-error", "ToolError"),
        ("notes_echo", "fail", "ToolArgumentsInvalid"),
    ]
    slow = window.calls("slow", since=0)
    assert [(c.tool, c.kind) for c in slow] == [("slow_sleep", "info")]
    assert slow[0].latency >= 0.2 and all(c.latency > 0 for c in notes)
    assert window.added == 4 and other.added == 4 and other.seconds == 60
