"""The gateway's figures: a call through a running ``mcp-supervisor serve`` (over stdio,
its default, and over HTTP) beside a call the supervisor makes itself, many HTTP clients
at once, one ``mcp-supervisor call`` through the running gateway, process start
included, and the ``serve --http`` process's resident memory before and after the loads.

Each gateway is a real ``serve`` process of its own (``serve`` over stdio, ``serve
--http``), with one stdio echo fixture; the direct calls go through an
``open_supervisor`` in this process to another echo fixture of the same kind. Clients
are the ``mcp`` SDK's ``Client``, in this process: over the SDK's stdio transport, and
over Streamable HTTP (the stateless 2026-07-28 protocol).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import attrs
import httpx2
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from ..runtime import open_supervisor
from ..testing.servers._procs import open_http_fixture
from ._alternate import alternate, blocks
from ._cli import _environment, _start_ms
from ._fixtures import (
    _ECHO_ARGS,
    _SERVER_TIMEOUT,
    BenchError,
    _bare_client,
    _check_echo,
    _connect_all,
    _echo_config,
)
from ._memory import process_rss_kb
from ._suite import RoundFn, Suite

#: a call through ``serve`` (stdio, its default) ÷ the supervisor's own call, same kind
#: of backing server
GATEWAY_RATIO = "gateway_call_ratio"
#: the same through ``serve --http``
GATEWAY_HTTP_RATIO = "gateway_http_call_ratio"
#: calls/s of 50 concurrent HTTP clients × 200 calls each (quick: 10 × 20)
GATEWAY_THROUGHPUT = "gateway_throughput_50x200"
#: the 99th percentile latency of those calls, ms
GATEWAY_P99 = "gateway_throughput_50x200_p99_ms"
#: a call to a bare SDK server over Streamable HTTP ÷ the supervisor's own call: the floor
#: any Streamable HTTP hop sets under gateway_http_call_ratio, measured in the same rounds
GATEWAY_FLOOR = "gateway_bare_http_ratio"
#: calls/s through ``serve --http`` with 32 in flight ÷ the same load on a bare SDK echo
#: server over Streamable HTTP
GATEWAY_HTTP_THROUGHPUT = "gateway_http_throughput_ratio"
#: the gateway process's CPU per call in that load, ms
GATEWAY_HTTP_CPU = "gateway_http_cpu_per_call_ms"
#: that CPU per call ÷ the bare SDK echo server's own CPU per call in the same load
GATEWAY_HTTP_CPU_RATIO = "gateway_http_cpu_ratio"
#: per-call cost through ``serve --http --stateless`` ÷ through ``serve --http``
GATEWAY_STATELESS = "gateway_stateless_ratio"
#: ``mcp-supervisor call`` through the running gateway, process start included, ms
CLI_CALL_WARM = "cli_call_warm_ms"
#: the ``serve --http`` process's resident set, MiB, once its clients are connected
GATEWAY_RSS_IDLE = "gateway_rss_idle_mb"
#: the same after the round's loads
GATEWAY_RSS = "gateway_rss_mb"

#: how much more than a bare SDK HTTP hop a call through ``serve --http`` may cost
HTTP_OVER_FLOOR = 1.3


def http_call_target(medians: Mapping[str, float]) -> str | None:
    """``gateway_http_call_ratio ≤ 1.3 × gateway_bare_http_ratio``, the floor measured in
    the same rounds (``None`` when it was not)."""
    floor = medians.get(GATEWAY_FLOOR)
    return None if floor is None else f"<= {HTTP_OVER_FLOOR * floor:.3f}"


#: the figures of one load through ``serve --http`` and on the bare server, alternating
_HTTP_LOAD_KEYS = (GATEWAY_HTTP_THROUGHPUT, GATEWAY_HTTP_CPU, GATEWAY_HTTP_CPU_RATIO)
#: untimed calls of each contender before the rounds
_WARM_CALLS = 20
#: calls per block when alternating gateway and direct calls
_BLOCK = 25
#: concurrent clients, full run and quick run (the size is calls per client)
_CLIENTS = 50
_QUICK_CLIENTS = 10
#: requests in flight in the HTTP load
_IN_FLIGHT = 32
_TOKEN_ENV = "MCP_SUPERVISOR_GATEWAY_TOKEN"


@attrs.frozen
class _Served:
    """A running ``serve --http`` process: its URL and pid."""

    url: str
    pid: int


@asynccontextmanager
async def _serve(config: str, env: Mapping[str, str], *options: str) -> AsyncIterator[_Served]:
    """``mcp-supervisor serve --config config --http 127.0.0.1:0`` (and ``options``) as a
    process."""
    command = [sys.executable, "-m", "supervisor", "serve", "--config", config]
    process = await trio.lowlevel.open_process(
        [*command, "--http", "127.0.0.1:0", *options],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env),
    )
    assert process.stderr is not None
    said = b""
    found = None
    try:
        with trio.move_on_after(_SERVER_TIMEOUT):
            while (found := re.search(rb"gateway at (\S+)\n", said)) is None:
                chunk = await process.stderr.receive_some()
                if not chunk:
                    break
                said += chunk
        if found is None:
            raise BenchError(f"mcp-supervisor serve did not start: {said.decode()[-500:]}")

        async def drain() -> None:  # its log must not fill the pipe
            assert process.stderr is not None
            while await process.stderr.receive_some():
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield _Served(found[1].decode(), process.pid)
            nursery.cancel_scope.cancel()
    finally:
        # shielded: stopped and waited for even when the round is cancelled
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(_SERVER_TIMEOUT) as waited:
                await process.wait()
            if waited.cancelled_caught:
                process.kill()
                await process.wait()
            await process.stderr.aclose()


@asynccontextmanager
async def _client(url: str, token: str, mode: str = "auto") -> AsyncIterator[Client]:
    timeout = httpx2.Timeout(30, read=300)  # as the SDK's own client: calls may be long
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def _write_config(directory: Path) -> tuple[str, dict[str, object]]:
    """A gateway's config file in ``directory``: one eager stdio echo fixture."""
    settings = _echo_config(["echo"])
    directory.mkdir(exist_ok=True)
    path = directory / "mcp.json"
    path.write_text(json.dumps(settings), encoding="utf-8")
    return str(path), settings


@asynccontextmanager
async def _open_gateway() -> AsyncIterator[RoundFn]:
    """A ``serve --http`` process and a ``serve`` process over stdio, each with one echo
    fixture and a client of it, and a supervisor of another echo fixture in this process;
    all connected for every round."""
    # A short directory: the gateway's Unix socket path must fit in 108 bytes.
    work = tempfile.mkdtemp(prefix="mcps-bench-")
    try:
        config, settings = _write_config(Path(work))
        # a config of its own, so that each gateway has its own local socket
        stdio_config, _ = _write_config(Path(work) / "stdio")
        token = "bench-" + os.urandom(16).hex()
        env = _environment(os.path.join(work, "pycache")) | {
            "XDG_RUNTIME_DIR": os.path.join(work, "run"),
            _TOKEN_ENV: token,
        }
        stateless_config, _ = _write_config(Path(work) / "stateless")
        async with AsyncExitStack() as stack:
            served = await stack.enter_async_context(_serve(config, env))
            url = served.url
            client = await stack.enter_async_context(_client(url, token))
            # the handshake-era client: what --stateless changes is its sessions
            stateful = await stack.enter_async_context(_client(url, token, "legacy"))
            unsessioned = await stack.enter_async_context(
                _serve(stateless_config, env, "--stateless")
            )
            stateless = await stack.enter_async_context(_client(unsessioned.url, token, "legacy"))
            serve = ["-m", "supervisor", "serve", "--config", stdio_config]
            stdio = await stack.enter_async_context(
                _bare_client(StdioServerParameters(command=sys.executable, args=serve, env=env))
            )
            bare_server = await stack.enter_async_context(open_http_fixture("echo"))
            bare = await stack.enter_async_context(Client(bare_server.url))
            sup = await stack.enter_async_context(open_supervisor(settings))
            await _connect_all(sup)

            async def through() -> object:
                return await stdio.call_tool("echo_echo", _ECHO_ARGS)

            async def through_http() -> object:
                return await client.call_tool("echo_echo", _ECHO_ARGS)

            async def direct() -> object:
                return await sup.call("echo_echo", _ECHO_ARGS)

            async def bare_http() -> object:
                return await bare.call_tool("echo", _ECHO_ARGS)

            async def through_stateful() -> object:
                return await stateful.call_tool("echo_echo", _ECHO_ARGS)

            async def through_stateless() -> object:
                return await stateless.call_tool("echo_echo", _ECHO_ARGS)

            _check_echo(await direct(), "through the supervisor")
            _check_echo(await through(), "through the gateway over stdio")
            _check_echo(await through_http(), "through the gateway over HTTP")
            _check_echo(await bare_http(), "to the bare HTTP server")
            _check_echo(await through_stateless(), "through the stateless gateway")
            idle_kb = process_rss_kb(served.pid)
            contenders = (through, through_http, direct, bare_http)
            for _ in range(_WARM_CALLS):
                for call in (*contenders, through_stateful, through_stateless):
                    await call()
            gateway_load = _Load(url, "echo_echo", token)
            bare_load = _Load(bare_server.url, "echo")
            await gateway_load.run(_IN_FLIGHT * 2)  # warm: connections open
            await bare_load.run(_IN_FLIGHT * 2)
            cli = ["-m", "supervisor", "call", "--config", config, "echo_echo", '{"text": "x"}']
            await _start_ms(cli, env)  # fills the bytecode cache
            parity = itertools.count()

            async def paired(
                a: Callable[[], Awaitable[object]], b: Callable[[], Awaitable[object]], n: int
            ) -> tuple[float, float]:
                """Seconds of ``n`` sequential calls of ``a`` and of as many of ``b``,
                alternating in blocks — each warmed by a block of calls first, untimed:
                the round's other loads ran since their last calls, and whichever was
                timed first would pay alone for the caches and pages they took."""
                await _sequential(a, _BLOCK)
                await _sequential(b, _BLOCK)
                return await alternate(
                    partial(_sequential, a),
                    partial(_sequential, b),
                    blocks(n, _BLOCK),
                    next(parity) % 2 == 1,
                )

            async def against_direct(call: Callable[[], Awaitable[object]], n: int) -> float:
                """``n`` sequential calls of ``call`` ÷ as many direct ones, alternating."""
                ours, theirs = await paired(call, direct, n)
                return ours / theirs

            async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
                figures: dict[str, float] = {}
                if n := sizes.get(GATEWAY_RATIO, 0):
                    figures[GATEWAY_RATIO] = await against_direct(through, n)
                if n := sizes.get(GATEWAY_HTTP_RATIO, 0):
                    figures[GATEWAY_HTTP_RATIO] = await against_direct(through_http, n)
                if n := sizes.get(GATEWAY_FLOOR, 0):
                    figures[GATEWAY_FLOOR] = await against_direct(bare_http, n)
                if n := sizes.get(GATEWAY_THROUGHPUT, 0) or sizes.get(GATEWAY_P99, 0):
                    clients = _CLIENTS if n >= 200 else _QUICK_CLIENTS
                    rate, p99 = await _throughput(url, token, clients, n)
                    figures[GATEWAY_THROUGHPUT] = rate
                    figures[GATEWAY_P99] = p99
                if n := max(sizes.get(key, 0) for key in _HTTP_LOAD_KEYS):
                    used = {served.pid: 0.0, bare_server.pid: 0.0}

                    def counted(pid: int, load: _Load) -> Callable[[int], Awaitable[float]]:
                        async def run(calls: int) -> float:
                            before = _cpu_seconds(pid)
                            took = await load.run(calls)
                            used[pid] += _cpu_seconds(pid) - before
                            return took

                        return run

                    ours, theirs = await alternate(
                        counted(served.pid, gateway_load),
                        counted(bare_server.pid, bare_load),
                        blocks(n, -(-n // 4)),
                        next(parity) % 2 == 1,
                    )
                    figures[GATEWAY_HTTP_THROUGHPUT] = theirs / ours  # calls/s ÷ calls/s
                    figures[GATEWAY_HTTP_CPU] = used[served.pid] / n * 1000
                    figures[GATEWAY_HTTP_CPU_RATIO] = used[served.pid] / used[bare_server.pid]
                if n := sizes.get(GATEWAY_STATELESS, 0):
                    stateless_s, stateful_s = await paired(through_stateless, through_stateful, n)
                    figures[GATEWAY_STATELESS] = stateless_s / stateful_s
                figures |= await _rss_figures(sizes, served.pid, idle_kb, gateway_load)
                if n := sizes.get(CLI_CALL_WARM, 0):
                    times = [await _start_ms(cli, env) for _ in range(n)]
                    figures[CLI_CALL_WARM] = statistics.median(times)
                return figures

            yield round_
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _rss_figures(
    sizes: Mapping[str, int], pid: int, idle_kb: int, load: _Load
) -> dict[str, float]:
    """The ``serve --http`` process's RSS in MiB: read once its clients were connected
    (before any load), and now, after the round's loads — the 32-in-flight one run here
    first, ``sizes[GATEWAY_RSS]`` calls, if the round ran none."""
    figures: dict[str, float] = {}
    if sizes.get(GATEWAY_RSS_IDLE, 0):
        figures[GATEWAY_RSS_IDLE] = idle_kb / 1024
    if n := sizes.get(GATEWAY_RSS, 0):
        if not any(sizes.get(key, 0) for key in _HTTP_LOAD_KEYS):
            await load.run(n)
        figures[GATEWAY_RSS] = process_rss_kb(pid) / 1024
    return figures


async def _sequential(call: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return time.perf_counter() - start


async def _throughput(url: str, token: str, clients: int, calls: int) -> tuple[float, float]:
    """``clients`` SDK clients at once, each making ``calls`` sequential echo calls
    through the gateway: calls per second overall, and the 99th percentile latency, ms."""
    latencies: list[float] = []

    async def one(ready: trio.Event, go: trio.Event) -> None:
        async with _client(url, token) as client:
            await client.call_tool("echo_echo", _ECHO_ARGS)  # connected and warm
            ready.set()
            await go.wait()
            for _ in range(calls):
                start = time.perf_counter()
                result = await client.call_tool("echo_echo", _ECHO_ARGS)
                latencies.append(time.perf_counter() - start)
                if result.is_error:
                    raise BenchError(f"a call through the gateway failed: {result.content}")

    go = trio.Event()
    with trio.fail_after(_SERVER_TIMEOUT * 10):
        async with trio.open_nursery() as nursery:
            readies = [trio.Event() for _ in range(clients)]
            for ready in readies:
                nursery.start_soon(one, ready, go)
            for ready in readies:
                await ready.wait()
            start = time.perf_counter()
            go.set()
        elapsed = time.perf_counter() - start
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return clients * calls / elapsed, p99


class _Load:
    """Tool calls posted to ``url`` with ``httpx2`` alone, 2026-07-28 requests (no
    handshake, no session), their bodies encoded once: a load generator far cheaper per
    call than the servers it loads, so that it is not what limits them."""

    def __init__(self, url: str, tool: str, token: str | None = None) -> None:
        self.url = url
        meta = {PROTOCOL_VERSION_META_KEY: _MODERN, CLIENT_CAPABILITIES_META_KEY: {}}
        params = {"name": tool, "arguments": _ECHO_ARGS, "_meta": meta}
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        self.body = json.dumps(request).encode()
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Mcp-Protocol-Version": _MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"

    async def run(self, calls: int) -> float:
        """Seconds for ``calls`` calls, :data:`_IN_FLIGHT` at a time."""
        limits = httpx2.Limits(max_connections=_IN_FLIGHT, max_keepalive_connections=_IN_FLIGHT)
        left = iter(range(calls))
        async with httpx2.AsyncClient(limits=limits, timeout=_SERVER_TIMEOUT) as http:

            async def worker() -> None:
                for _ in left:
                    answer = await http.post(self.url, content=self.body, headers=self.headers)
                    if answer.status_code != 200 or b'"isError":true' in answer.content:
                        raise BenchError(f"a call to {self.url} failed: {answer.text[:300]}")

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(min(_IN_FLIGHT, calls)):
                    nursery.start_soon(worker)
            return time.perf_counter() - start


_MODERN = "2026-07-28"


def _cpu_seconds(pid: int) -> float:
    """CPU seconds the process ``pid`` used so far, to the nanosecond: the sum of its
    threads' run time (``/proc/PID/task/*/schedstat``). ``/proc/PID/stat`` counts in clock
    ticks (10 ms here), coarser than a short round's whole use, which it read as 0; it is
    the fallback where schedstat is missing. A thread that ends between two readings takes
    its time with it: the processes measured run their calls on one thread."""
    if not _SCHEDSTAT.exists():
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return sum(_ran_ns(task) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


_SCHEDSTAT = Path("/proc/self/schedstat")


def _ran_ns(task: Path) -> int:
    """Nanoseconds the thread ``task`` ran on a processor; 0 for one that ended since
    its directory was listed."""
    try:
        return int((task / "schedstat").read_text().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return 0


GATEWAY = Suite("gateway", _open_gateway, rounds=3, quick_rounds=1)


async def gateway_call_ratio(n: int) -> float:
    """``n`` sequential echo calls through a running gateway ÷ the same through the
    supervisor itself, blocks alternating."""
    return await GATEWAY.measure(GATEWAY_RATIO, n)


async def cli_call_warm_ms(n: int) -> float:
    """``mcp-supervisor call`` through a running gateway, ms, median of ``n`` processes."""
    return await GATEWAY.measure(CLI_CALL_WARM, n)
