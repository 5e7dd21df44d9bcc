"""The registry: every key ``mcp-supervisor bench`` measures, with its target,
unit and round sizes, in report order."""

from __future__ import annotations

from collections.abc import Sequence

from ..registry._bench import listing_ms_32k, registry_merge_ms_32k, search_ms_32k
from ._asyncio import ASYNCIO, ASYNCIO_RATIO, installed_frameworks
from ._auth import GATEWAY_AUTH, GATEWAY_AUTH_SUITE
from ._cli import CLI, CLI_BASELINE, CLI_HELP
from ._gateway import (
    CLI_CALL_WARM,
    GATEWAY,
    GATEWAY_FLOOR,
    GATEWAY_HTTP_CPU,
    GATEWAY_HTTP_CPU_RATIO,
    GATEWAY_HTTP_RATIO,
    GATEWAY_HTTP_THROUGHPUT,
    GATEWAY_P99,
    GATEWAY_RATIO,
    GATEWAY_RSS,
    GATEWAY_RSS_IDLE,
    GATEWAY_STATELESS,
    GATEWAY_THROUGHPUT,
    http_call_target,
)
from ._gateway_memory import GATEWAY_MEMORY, GATEWAY_SESSION, GATEWAY_TOOL
from ._inprocess import (
    _PIECES,
    BUS,
    BUS_EVENTS,
    BUS_RATIO,
    MAILBOX,
    MAILBOX_CALL,
    MAILBOX_RATIO,
    mailbox_call_timeout_us,
)
from ._memory import MEMORY, RSS
from ._reloads import RELOAD, RELOAD_ADD, RELOAD_ALONE, RELOAD_P99, RELOADS, RUNNING
from ._sandbox import SANDBOX, SANDBOX_CALL, SANDBOX_STARTUP
from ._servers import (
    _CONCURRENT_BATCHES,
    CALL_CONCURRENT,
    CALL_SEQ,
    CALLS,
    RECOVERIES,
    RECOVERY,
    RECOVERY_CONNECT,
    RECOVERY_RATIO,
    SHUTDOWN,
    STARTUP,
    STARTUP_64,
    STARTUP_64_RESTARTS,
    STARTUPS,
    STARTUPS_64,
    _recovery_target,
)
from ._suite import Measurement

#: Sequential calls per round of each contender in the gateway's paired keys: a call
#: there takes 0.5-2 ms, and a round of 200 lasted a fraction of a second, which a burst
#: of the machine's noise could tip either way.
_PAIRED_CALLS = 1000

#: what each framework's key times a call through
_FRAMEWORK_CALLS = {
    "langchain_tool_ratio": "LangChain's StructuredTool.ainvoke of a tool call",
    "openai_agents_tool_ratio": "the OpenAI Agents SDK MCPServer's call_tool",
    "pydantic_ai_tool_ratio": "the PydanticAI toolset's call_tool",
}

MEASUREMENTS: Sequence[Measurement] = (
    MAILBOX.measurement(
        MAILBOX_CALL,
        target=None,
        unit="µs/call",
        size=20_000,
        quick_size=2_000,
        note="Address.call round trip to an echo actor, no timeout, no I/O; informative, "
        "the machine-independent figure is mailbox_call_ratio",
    ),
    MAILBOX.measurement(
        MAILBOX_RATIO,
        target="<= 1.2",
        unit="ratio",
        size=20_000,
        quick_size=2_000,
        digits=3,
        note="mailbox_call_us ÷ a raw trio request/reply (request and reply event sent "
        "over a memory channel to a server task that sets them), n round trips each, "
        f"{_PIECES} pieces alternating",
    ),
    Measurement("mailbox_call_timeout_us", mailbox_call_timeout_us, None, "µs/call", 20_000, 2_000),
    BUS.measurement(
        BUS_EVENTS,
        target=None,
        unit="events/s",
        size=50_000,
        quick_size=5_000,
        digits=0,
        note="open_bus(): 1 publisher → 10 subscribers, publish to last receipt; "
        "informative, the machine-independent figure is bus_ratio",
    ),
    BUS.measurement(
        BUS_RATIO,
        target="<= 1.5",
        unit="ratio",
        size=50_000,
        quick_size=5_000,
        digits=3,
        note="raw trio fan-out (send_nowait into 10 memory channels, 10 reader tasks) "
        f"events/s ÷ bus_events_per_s, n events each, {_PIECES} pieces alternating; > 1 "
        "means the bus is slower",
    ),
    Measurement(
        "registry_merge_ms_32k",
        registry_merge_ms_32k,
        "<= 50",
        "ms",
        5,
        2,
        note="registry.merge of 32 servers × 1000 tools (names, clashes) from fresh "
        "Listings, each server's list checked beforehand, once, as when it arrives "
        "(listing_ms_32k); median of n merges per round",
    ),
    Measurement(
        "listing_ms_32k",
        listing_ms_32k,
        None,
        "ms",
        5,
        2,
        note="checking 32 × 1000 listed tools (names, descriptions, input schemas) into "
        "Listings, done once per tool list a server sends; median of n per round",
    ),
    Measurement(
        "search_ms_32k",
        search_ms_32k,
        "<= 5",
        "ms",
        50,
        20,
        note="one Catalog.search over 32 × 1000 tools, its index built beforehand; median "
        "of n searches per round",
    ),
    CALLS.measurement(
        CALL_SEQ,
        target="<= 1.05",
        unit="ratio",
        size=500,
        quick_size=100,
        digits=3,
        note="supervisor.call ÷ bare mcp.Client.call_tool, sequential echo calls over stdio, "
        "blocks of 50 alternating between the two",
    ),
    CALLS.measurement(
        CALL_CONCURRENT,
        target="<= 1.05",
        unit="ratio",
        size=200,
        quick_size=200,
        digits=3,
        note="time until all of n calls started at once are answered, supervisor ÷ bare "
        f"client; {_CONCURRENT_BATCHES} batches each per round, alternating",
    ),
    STARTUPS.measurement(
        STARTUP,
        target="<= 1.1",
        unit="ratio",
        size=8,
        quick_size=8,
        digits=3,
        note="entering open_supervisor with 8 eager stdio servers (startupConcurrency 8) "
        "until all are connected (tools listed) ÷ 8 bare mcp.Clients entered concurrently "
        "until all are connected",
    ),
    STARTUPS_64.measurement(
        STARTUP_64,
        target="<= 1.2",
        unit="ratio",
        size=64,
        quick_size=64,
        digits=3,
        note="entering open_supervisor with 64 eager stdio servers (the tiny stdlib-only "
        "fixture), default settings, until all are connected ÷ 64 bare mcp.Clients to the "
        "same fixture entered concurrently until all are connected",
    ),
    STARTUPS_64.measurement(
        STARTUP_64_RESTARTS,
        target="<= 0",
        unit="restarts",
        size=64,
        quick_size=64,
        digits=0,
        note="restarts the supervisor needed in the startup_64_ratio rounds (median round)",
    ),
    STARTUPS.measurement(
        SHUTDOWN,
        target="<= 1.1",
        unit="ratio",
        size=8,
        quick_size=8,
        digits=3,
        note="leaving open_supervisor with 8 connected stdio servers ÷ exiting 8 bare "
        "clients concurrently, each until every server process has exited",
    ),
    RECOVERIES.measurement(
        RECOVERY,
        target=_recovery_target,
        unit="s",
        size=1,
        quick_size=1,
        digits=3,
        note="from kill -9 of a connected stdio server until the call made as soon as "
        "mcp.local.crashed arrives is answered; default backoff (a first crash is restarted "
        "at once); target = restart delay (0) + 1.5 × recovery_connect_s",
    ),
    RECOVERIES.measurement(
        RECOVERY_RATIO,
        target="<= 1.5",
        unit="ratio",
        size=1,
        quick_size=1,
        digits=3,
        note="recovery_s ÷ a bare mcp.Client's cold connect (spawn, handshake) and first "
        "call to the same stdio echo fixture, timed in the same rounds",
    ),
    RECOVERIES.measurement(
        RECOVERY_CONNECT,
        target=None,
        unit="s",
        size=1,
        quick_size=1,
        digits=3,
        note="connect time (spawn to tool list) of the restarted server in the recovery "
        "rounds, from its health record",
    ),
    RELOADS.measurement(
        RELOAD,
        target="<= 1.2",
        unit="ratio",
        size=10,
        quick_size=3,
        digits=3,
        note="SupervisorHandle.reconfigure adding one tiny stdio server to a supervisor "
        f"running {RUNNING} (the fixture of startup_64_ratio), until the new server is "
        "connected ÷ entering open_supervisor with just that server (eager) until it is "
        "connected; n of each per round, alternating, the added server removed again "
        "(untimed) after each",
    ),
    RELOADS.measurement(
        RELOAD_ADD,
        target=None,
        unit="ms",
        size=10,
        quick_size=3,
        digits=1,
        note="that addition, ms (mean of the round's n)",
    ),
    RELOADS.measurement(
        RELOAD_ALONE,
        target=None,
        unit="ms",
        size=10,
        quick_size=3,
        digits=1,
        note="that lone start, ms (mean of the round's n)",
    ),
    RELOADS.measurement(
        RELOAD_P99,
        target="<= 1.1",
        unit="ratio",
        size=2000,
        quick_size=500,
        digits=3,
        note=f"the 99th percentile latency of n sequential echo calls to the {RUNNING} "
        "unchanged servers in turn while one server is added and removed by reconfigure, "
        "a reload a second (about the most often serve's file watch applies one; the calls "
        "go on until three reloads have ended, if n end sooner) ÷ that of n such calls with "
        "no reload; "
        "the two alternate in order from round to round",
    ),
    MEMORY.measurement(
        RSS,
        target="<= 300",
        unit="KiB/server",
        size=8,
        quick_size=4,
        digits=0,
        note="VmRSS growth per connected stdio server of a fresh client process (after one "
        "warm-up server); our process only, not the server processes",
    ),
    ASYNCIO.measurement(
        ASYNCIO_RATIO,
        target="<= 1.1",
        unit="ratio",
        size=500,
        quick_size=100,
        digits=3,
        note="sequential echo calls awaited from asyncio through supervisor.asyncio ÷ the "
        "same calls made by a trio task of the same supervisor (hosted by that asyncio "
        "loop, one stdio echo fixture); blocks of 25 alternating, in a process of its own",
    ),
    *(
        ASYNCIO.measurement(
            key,
            target=None,
            unit="ratio",
            size=200,
            quick_size=50,
            digits=3,
            note=f"sequential echo calls through {_FRAMEWORK_CALLS[key]} "
            "(supervisor.frameworks) ÷ the same calls awaited from asyncio through "
            "supervisor.asyncio, same process and supervisor; measured where the framework "
            "is installed",
        )
        for key in installed_frameworks()
    ),
    GATEWAY.measurement(
        GATEWAY_RATIO,
        target="<= 1.3",
        unit="ratio",
        size=_PAIRED_CALLS,
        quick_size=50,
        digits=3,
        note="sequential echo calls by an mcp.Client (the SDK's stdio transport) through a "
        "running `serve` process (stdio, its default) ÷ the same calls through "
        "open_supervisor in this process, each to its own stdio echo fixture; blocks of 25 "
        "alternating, after an untimed block of each",
    ),
    GATEWAY.measurement(
        GATEWAY_HTTP_RATIO,
        target=http_call_target,
        unit="ratio",
        size=_PAIRED_CALLS,
        quick_size=50,
        digits=3,
        note="the same through a running `serve --http` process, the mcp.Client over "
        "Streamable HTTP (2026-07-28); target: 1.3 × gateway_bare_http_ratio, its floor, "
        "of the same rounds",
    ),
    GATEWAY.measurement(
        GATEWAY_FLOOR,
        target=None,
        unit="ratio",
        size=_PAIRED_CALLS,
        quick_size=50,
        digits=3,
        note="sequential echo calls by an mcp.Client to a bare SDK echo server over "
        "Streamable HTTP (its own process) ÷ the supervisor's own calls, same rounds: what "
        "one Streamable HTTP hop costs by itself, the floor under gateway_http_call_ratio",
    ),
    GATEWAY.measurement(
        GATEWAY_HTTP_THROUGHPUT,
        target=None,
        unit="ratio",
        size=2000,
        quick_size=200,
        digits=3,
        note="calls/s through a running `serve --http` (one stdio echo fixture behind it) "
        "÷ calls/s to a bare SDK echo server over Streamable HTTP (its own process), the "
        "same load on each: n tools/call requests of 2026-07-28, 32 in flight, posted with "
        "httpx2 alone (bodies encoded once, no SDK client: a generator that is not the "
        "bottleneck); quarters alternating. Information: on a small machine it measures the "
        "backing server's own cost as much as the gateway's (gateway_http_cpu_ratio is the "
        "gateway's)",
    ),
    GATEWAY.measurement(
        GATEWAY_HTTP_CPU,
        target=None,
        unit="ms",
        size=2000,
        quick_size=200,
        digits=2,
        note="CPU (user + system) of the `serve --http` process per call in that load",
    ),
    GATEWAY.measurement(
        GATEWAY_HTTP_CPU_RATIO,
        target="<= 0.5",
        unit="ratio",
        size=2000,
        quick_size=200,
        digits=3,
        note="CPU (user + system) of the `serve --http` process per call ÷ the bare SDK echo "
        "server's own CPU per call, in that same load (32 in flight, quarters alternating): "
        "what forwarding a call costs the gateway beside what serving it costs the SDK",
    ),
    GATEWAY_AUTH_SUITE.measurement(
        GATEWAY_AUTH,
        target=None,
        unit="µs/call",
        size=20_000,
        quick_size=2_000,
        digits=2,
        note="a team gateway's check of a request's JWT access token (kept after its "
        "first check: ES256, the issuer's keys fetched once) and its narrowing to the "
        "caller (policy grant, narrowed view), less a static-token gateway's comparison "
        "of the header, in this process, blocks of 500 alternating: what the "
        "resource-server check adds to each call",
    ),
    GATEWAY.measurement(
        GATEWAY_STATELESS,
        target="<= 1.0",
        unit="ratio",
        size=_PAIRED_CALLS,
        quick_size=50,
        digits=3,
        note="sequential echo calls by a handshake-era mcp.Client through `serve --http "
        "--stateless` ÷ the same through `serve --http` (sessions), blocks of 25 "
        "alternating: what going without sessions costs per call",
    ),
    GATEWAY.measurement(
        GATEWAY_THROUGHPUT,
        target=None,
        unit="calls/s",
        size=200,
        quick_size=20,
        digits=0,
        note="50 mcp.Clients at once (10 with --quick), each making n sequential echo calls "
        "through the running gateway (one stdio echo fixture behind it): calls per second, "
        "from the first call to the last answer",
    ),
    GATEWAY.measurement(
        GATEWAY_P99,
        target=None,
        unit="ms",
        size=200,
        quick_size=20,
        digits=1,
        note="the 99th percentile latency of those calls",
    ),
    GATEWAY.measurement(
        GATEWAY_RSS_IDLE,
        target=None,
        unit="MiB",
        size=1,
        quick_size=1,
        digits=1,
        note="VmRSS of the running `serve --http` process (one stdio echo fixture behind "
        "it, not counted) once its first clients are connected, before any load: a "
        "2026-07-28 mcp.Client that made one call, a handshake-era one with its session "
        "open; read once, as the suite opens",
    ),
    GATEWAY.measurement(
        GATEWAY_RSS,
        target=None,
        unit="MiB",
        size=2000,
        quick_size=200,
        digits=1,
        note="VmRSS of that process at the end of a round's loads: sequential calls, the "
        "50 mcp.Clients at once of gateway_throughput_50x200 (no sessions) and the 32 in "
        "flight of gateway_http_throughput_ratio (n tools/call requests, if the round ran "
        "none, before the reading); what it keeps under load, the earlier rounds' included",
    ),
    GATEWAY_MEMORY.measurement(
        GATEWAY_SESSION,
        target=None,
        unit="KiB/session",
        size=32,
        quick_size=16,
        digits=0,
        note="VmRSS growth of a fresh `serve --http` process (two stdio servers behind it, "
        "not counted) per handshake-era session: n mcp.Clients in legacy mode, each with "
        "its own HTTP connections, opened one after another, each initialized, its GET "
        "stream open and one call made, all kept open; from after a first such client "
        "listed the tools and made a call",
    ),
    GATEWAY_MEMORY.measurement(
        GATEWAY_TOOL,
        target=None,
        unit="KiB/tool",
        size=999,
        quick_size=999,
        digits=1,
        note="VmRSS of a fresh `serve --http` process whose two stdio servers each list n "
        "tools beside echo (of registry_merge_ms_32k's shape: a one-line description; an id "
        "string, described, and a limit integer) − that of one whose two servers list echo "
        "alone, ÷ 2n; both started at once, each read after a handshake-era client listed "
        "every tool and made a call: what the catalog costs the supervisor and the gateway "
        "together, per tool",
    ),
    GATEWAY.measurement(
        CLI_CALL_WARM,
        target="<= 150",
        unit="ms",
        size=5,
        quick_size=3,
        digits=0,
        note="wall time of `python -m supervisor call --config F echo_echo ARGS` while "
        "`serve` runs for F (the call goes through it), process start included, bytecode "
        "cached; median of n fresh processes per round; compare cli_help_baseline_ms",
    ),
    CLI.measurement(
        CLI_HELP,
        target="<= 200",
        unit="ms",
        size=5,
        quick_size=3,
        digits=0,
        note="wall time of `python -m supervisor --help`, process start included, bytecode "
        "cached; median of n fresh processes per round, alternating with "
        "cli_help_baseline_ms",
    ),
    CLI.measurement(
        CLI_BASELINE,
        target=None,
        unit="ms",
        size=5,
        quick_size=3,
        digits=0,
        note="wall time of `python -c pass` by the same interpreter, same rounds: what "
        "starting the interpreter costs on this machine",
    ),
    SANDBOX.measurement(
        SANDBOX_STARTUP,
        target=None,
        unit="ratio",
        size=4,
        quick_size=2,
        digits=3,
        note="entering open_supervisor with one eager stdlib-only stdio server in a sandbox "
        "(bubblewrap, no network) until it is connected ÷ the same server unsandboxed, n "
        "starts each, alternating",
    ),
    SANDBOX.measurement(
        SANDBOX_CALL,
        target=None,
        unit="ratio",
        size=500,
        quick_size=100,
        digits=3,
        note="sequential echo calls to that server sandboxed ÷ unsandboxed, one supervisor "
        "running both, blocks of 50 alternating",
    ),
)
