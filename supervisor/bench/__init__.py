"""The benchmark suite behind ``mcp-supervisor bench``.

Each measured key has one function: ``await fn(n)`` runs one round of ``n`` operations and
returns that round's figure. :data:`MEASUREMENTS` lists them with their target and
round sizes; :func:`run_bench` runs one untimed warm-up round of each, then the timed
rounds *interleaved* — round 1 of every measurement, then round 2 of every measurement …
— so machine noise hits all alike, and reports the median round of each.

Keys measured against real MCP servers share a :class:`Suite`: resources opened once for
all its rounds (a supervisor and a bare ``mcp.Client`` already connected to their fixture
servers), a round that measures each of its keys at once (a startup round gives
``startup_8_ratio`` *and* ``shutdown_8_ratio``), and its own round counts, since starting
processes is expensive. A ratio's two contenders — the supervisor and a bare SDK
``mcp.Client`` against the same kind of fixture process; or, in process, an actor call and
the bus against their raw trio equivalents (memory-channel request/reply; ``send_nowait``
fan-out) — are measured in the same round, alternately (ABBA), so noise hits both alike;
each round yields one ratio and the report holds the median ratio.

Add a measurement by writing ``async def my_key(n: int) -> float`` and appending a
:class:`Measurement` to :data:`MEASUREMENTS` (or a :class:`Suite` and its members, made
with :meth:`Suite.measurement`). Benchmarks are not tests: they report figures and never
fail on a missed target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._alternate import Timer as Timer
    from ._cli import CLI as CLI
    from ._cli import CLI_BASELINE as CLI_BASELINE
    from ._cli import CLI_HELP as CLI_HELP
    from ._cli import cli_help_ms as cli_help_ms
    from ._fixtures import BenchError as BenchError
    from ._gateway import CLI_CALL_WARM as CLI_CALL_WARM
    from ._gateway import GATEWAY as GATEWAY
    from ._gateway import GATEWAY_FLOOR as GATEWAY_FLOOR
    from ._gateway import GATEWAY_HTTP_RATIO as GATEWAY_HTTP_RATIO
    from ._gateway import GATEWAY_P99 as GATEWAY_P99
    from ._gateway import GATEWAY_RATIO as GATEWAY_RATIO
    from ._gateway import GATEWAY_THROUGHPUT as GATEWAY_THROUGHPUT
    from ._gateway import cli_call_warm_ms as cli_call_warm_ms
    from ._gateway import gateway_call_ratio as gateway_call_ratio
    from ._inprocess import BUS as BUS
    from ._inprocess import BUS_EVENTS as BUS_EVENTS
    from ._inprocess import BUS_RATIO as BUS_RATIO
    from ._inprocess import BUS_SUBSCRIBERS as BUS_SUBSCRIBERS
    from ._inprocess import MAILBOX as MAILBOX
    from ._inprocess import MAILBOX_CALL as MAILBOX_CALL
    from ._inprocess import MAILBOX_RATIO as MAILBOX_RATIO
    from ._inprocess import Figures as Figures
    from ._inprocess import _consume as _consume
    from ._inprocess import _contest as _contest
    from ._inprocess import _open_raw_echo as _open_raw_echo
    from ._inprocess import _raw_fanout_s as _raw_fanout_s
    from ._inprocess import bus_events_per_s as bus_events_per_s
    from ._inprocess import bus_figures as bus_figures
    from ._inprocess import bus_ratio as bus_ratio
    from ._inprocess import mailbox_call_ratio as mailbox_call_ratio
    from ._inprocess import mailbox_call_timeout_us as mailbox_call_timeout_us
    from ._inprocess import mailbox_call_us as mailbox_call_us
    from ._inprocess import mailbox_figures as mailbox_figures
    from ._memory import MEMORY as MEMORY
    from ._memory import RSS as RSS
    from ._memory import _main as _main
    from ._memory import rss_per_server_kb as rss_per_server_kb
    from ._registry import MEASUREMENTS as MEASUREMENTS
    from ._run import _due as _due
    from ._run import format_table as format_table
    from ._run import meets_target as meets_target
    from ._run import run_bench as run_bench
    from ._run import select as select
    from ._servers import CALL_CONCURRENT as CALL_CONCURRENT
    from ._servers import CALL_SEQ as CALL_SEQ
    from ._servers import CALLS as CALLS
    from ._servers import RECOVERIES as RECOVERIES
    from ._servers import RECOVERY as RECOVERY
    from ._servers import RECOVERY_CONNECT as RECOVERY_CONNECT
    from ._servers import SHUTDOWN as SHUTDOWN
    from ._servers import STARTUP as STARTUP
    from ._servers import STARTUP_64 as STARTUP_64
    from ._servers import STARTUP_64_RESTARTS as STARTUP_64_RESTARTS
    from ._servers import STARTUPS as STARTUPS
    from ._servers import STARTUPS_64 as STARTUPS_64
    from ._servers import _recovery_target as _recovery_target
    from ._servers import call_overhead_ratio_concurrent as call_overhead_ratio_concurrent
    from ._servers import call_overhead_ratio_seq as call_overhead_ratio_seq
    from ._servers import recovery_backoff_initial as recovery_backoff_initial
    from ._servers import recovery_s as recovery_s
    from ._servers import shutdown_8_ratio as shutdown_8_ratio
    from ._servers import startup_8_ratio as startup_8_ratio
    from ._servers import startup_64_ratio as startup_64_ratio
    from ._servers import startup_64_restarts as startup_64_restarts
    from ._suite import QUICK_ROUNDS as QUICK_ROUNDS
    from ._suite import ROUNDS as ROUNDS
    from ._suite import Measurement as Measurement
    from ._suite import RoundFn as RoundFn
    from ._suite import Suite as Suite
    from ._suite import Target as Target

__getattr__, __dir__ = attach(__name__)
