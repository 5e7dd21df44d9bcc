"""The keys measured against real MCP servers over stdio, each a :class:`Suite`: call
overhead, startup and shutdown (each the supervisor ÷ a bare SDK ``mcp.Client``), and
recovery from a killed server."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial

import trio
from mcp.client.stdio import StdioServerParameters

from ..actors._rules import backoff_delay
from ..config import load_config
from ..runtime import open_supervisor
from ._alternate import alternate, blocks
from ._fixtures import (
    _ECHO_ARGS,
    _SERVER_TIMEOUT,
    BenchError,
    _bare_client,
    _check_connected,
    _check_echo,
    _connect_all,
    _echo_config,
    _server_names,
    _tiny_config,
    _tiny_params,
)
from ._suite import QUICK_ROUNDS, ROUNDS, RoundFn, Suite

#: The keys measured against real fixture servers.
CALL_SEQ = "call_overhead_ratio_seq"
CALL_CONCURRENT = "call_overhead_ratio_concurrent"
STARTUP = "startup_8_ratio"
STARTUP_64 = "startup_64_ratio"
STARTUP_64_RESTARTS = "startup_64_restarts"
SHUTDOWN = "shutdown_8_ratio"
RECOVERY = "recovery_s"
RECOVERY_RATIO = "recovery_ratio"
RECOVERY_CONNECT = "recovery_connect_s"

#: Untimed calls through each contender once connected (first-use costs, caches).
_WARM_SERVER_CALLS = 50
#: A sequential round alternates blocks of this many calls between the two contenders.
_SEQ_BLOCK = 50
#: A concurrent round times this many batches of ``n`` calls per contender, alternately.
_CONCURRENT_BATCHES = 2
#: Each recovery round kills the server; the configuration makes every crash count as the
#: first after a stable run (a connection is "stable" at once), so every round is restarted
#: at once, as a crash of a server that had been up is.
_RECOVERY_SETTINGS: Mapping[str, object] = {"backoff": {"local": {"stableAfter": 0}}}


async def _timed_sequential(call: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return time.perf_counter() - start


async def _timed_concurrent(call: Callable[[], Awaitable[object]], n: int) -> float:
    """Seconds from starting ``n`` calls at once until the last is answered."""

    async def one() -> None:
        await call()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)
    return time.perf_counter() - start


@asynccontextmanager
async def _open_calls() -> AsyncIterator[RoundFn]:
    """One supervised echo fixture and one bare ``Client`` to another, both connected for
    every round; a round alternates blocks of calls between the two."""
    async with (
        open_supervisor(_echo_config(["echo"])) as sup,
        _bare_client() as bare,
    ):
        await _connect_all(sup)

        async def supervised() -> object:
            return await sup.call("echo_echo", _ECHO_ARGS)

        async def direct() -> object:
            return await bare.call_tool("echo", _ECHO_ARGS)

        _check_echo(await supervised(), "through the supervisor")
        _check_echo(await direct(), "to the bare client")
        for _ in range(_WARM_SERVER_CALLS):
            await supervised()
            await direct()
        parity = itertools.count()

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            flip = next(parity) % 2 == 1
            figures: dict[str, float] = {}
            if n := sizes.get(CALL_SEQ, 0):
                ours, bare = await alternate(
                    partial(_timed_sequential, supervised),
                    partial(_timed_sequential, direct),
                    blocks(n, _SEQ_BLOCK),
                    flip,
                )
                figures[CALL_SEQ] = ours / bare
            if n := sizes.get(CALL_CONCURRENT, 0):
                ours, bare = await alternate(
                    partial(_timed_concurrent, supervised),
                    partial(_timed_concurrent, direct),
                    [n] * _CONCURRENT_BATCHES,
                    flip,
                )
                figures[CALL_CONCURRENT] = ours / bare
            return figures

        yield round_


async def _supervisor_start_stop(
    n: int, config: Mapping[str, object] | None = None
) -> tuple[float, float, int]:
    """Seconds from entering ``open_supervisor`` (``n`` eager stdio echo servers, all
    starting at once; or ``config``) until all are connected, and from then until the
    block is left (every server stopped); and the restarts it took."""
    if config is None:
        config = _echo_config(_server_names(n), startupConcurrency=n)
    async with AsyncExitStack() as stack:
        start = time.perf_counter()
        sup = await stack.enter_async_context(open_supervisor(config))
        with trio.fail_after(_SERVER_TIMEOUT):
            await sup.connect_all()
        connected = time.perf_counter()
        _check_connected(sup)
        restarts = sum(record.restarts for record in sup.status().values())
        closing = time.perf_counter()
        await stack.aclose()
        closed = time.perf_counter()
    return connected - start, closed - closing, restarts


async def _bare_start_stop(
    n: int, params: StdioServerParameters | None = None
) -> tuple[float, float]:
    """Seconds until ``n`` bare ``Client``\\ s entered concurrently in one nursery are all
    connected (to echo fixtures, or ``params``' server), and until they have all exited,
    concurrently."""
    connected = 0
    all_connected = trio.Event()
    close = trio.Event()

    async def one() -> None:
        nonlocal connected
        async with _bare_client(params):
            connected += 1
            if connected == n:
                all_connected.set()
            await close.wait()

    with trio.fail_after(_SERVER_TIMEOUT):
        async with trio.open_nursery() as nursery:
            start = time.perf_counter()
            for _ in range(n):
                nursery.start_soon(one)
            await all_connected.wait()
            up = time.perf_counter()
            close.set()
    return up - start, time.perf_counter() - up


@asynccontextmanager
async def _open_startup() -> AsyncIterator[RoundFn]:
    """Each round starts (and stops) ``n`` servers under a supervisor and ``n`` bare
    clients, in alternating order; nothing is kept between rounds."""
    parity = itertools.count()

    async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
        n = max(sizes.values())
        if next(parity) % 2 == 1:
            bare = await _bare_start_stop(n)
            supervised = await _supervisor_start_stop(n)
        else:
            supervised = await _supervisor_start_stop(n)
            bare = await _bare_start_stop(n)
        return {STARTUP: supervised[0] / bare[0], SHUTDOWN: supervised[1] / bare[1]}

    yield round_


@asynccontextmanager
async def _open_startup_64() -> AsyncIterator[RoundFn]:
    """Each round starts ``n`` eager tiny stdio servers under a supervisor with default
    settings (start-up slots and all) and ``n`` bare clients to the same fixture, in
    alternating order, until all are connected; and counts the supervisor's restarts."""
    parity = itertools.count()
    params = _tiny_params()

    async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
        n = max(sizes.values())
        config = _tiny_config(n)
        if next(parity) % 2 == 1:
            bare = await _bare_start_stop(n, params)
            supervised = await _supervisor_start_stop(n, config)
        else:
            supervised = await _supervisor_start_stop(n, config)
            bare = await _bare_start_stop(n, params)
        return {STARTUP_64: supervised[0] / bare[0], STARTUP_64_RESTARTS: supervised[2]}

    yield round_


def _recovery_config() -> dict[str, object]:
    return _echo_config(["echo"], **_RECOVERY_SETTINGS)


def recovery_restart_delay() -> float:
    """The restart delay every recovery round waits: that of a first restart under the
    recovery benchmark's config (the local servers' default backoff) — none."""
    return backoff_delay(load_config(_recovery_config()).servers["echo"].backoff, 1)


def _recovery_target(medians: Mapping[str, float]) -> str | None:
    """``recovery_s ≤ restart delay + 1.5 × connect``, with the connect time measured in
    the same rounds (the delay of a first restart is 0)."""
    connect = medians.get(RECOVERY_CONNECT)
    if connect is None:
        return None
    return f"<= {recovery_restart_delay() + 1.5 * connect:.3f}"


async def _bare_cold_call() -> float:
    """Seconds a bare SDK ``mcp.Client`` takes from nothing to its first echo call to the
    echo fixture answered: spawn, handshake, the call (leaving it is not timed)."""
    with trio.fail_after(_SERVER_TIMEOUT):
        start = time.perf_counter()
        async with _bare_client() as bare:
            _check_echo(await bare.call_tool("echo", _ECHO_ARGS), "to the bare client")
            answered = time.perf_counter()
    return answered - start


@asynccontextmanager
async def _open_recovery() -> AsyncIterator[RoundFn]:
    """One supervised echo fixture, kept for every round; a round kills it with SIGKILL.

    A round's ``recovery_s`` starts at the kill and ends when the ``n`` calls made as soon
    as the crash is noticed (``mcp.local.crashed``) are all answered: it includes noticing
    the death, the restart delay (none: the first crash of a server that had been up is
    restarted at once), starting and connecting a new process, and the call itself.
    ``recovery_connect_s`` is that new connection's connect time (spawn to tool list), as
    the health record reports it. ``recovery_ratio`` is ``recovery_s`` ÷ a bare SDK
    client's cold connect and first call to the same fixture, timed in the same round
    (before or after the kill, alternately).
    """
    parity = itertools.count()
    async with open_supervisor(_recovery_config()) as sup:
        await _connect_all(sup)
        _check_echo(await sup.call("echo_echo", _ECHO_ARGS), "through the supervisor")

        async def call() -> None:
            _check_echo(await sup.call("echo_echo", _ECHO_ARGS), "after the restart")

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            n = max(sizes.values())
            bare_first = next(parity) % 2 == 1
            bare = await _bare_cold_call() if bare_first else 0.0
            pid = sup.status()["echo"].pid
            if pid is None:
                raise BenchError("the recovery server has no pid")
            with trio.fail_after(_SERVER_TIMEOUT):
                async with sup.subscribe("mcp.local.crashed") as events:
                    killed = time.perf_counter()
                    os.kill(pid, signal.SIGKILL)
                    async for event in events:
                        if getattr(event, "server", None) == "echo":
                            break
                    async with trio.open_nursery() as nursery:
                        for _ in range(n):
                            nursery.start_soon(call)
                    answered = time.perf_counter()
            record = sup.status()["echo"]
            if record.pid == pid or record.connect_time is None:
                raise BenchError(f"the recovery server did not restart: {record}")
            if not bare_first:
                bare = await _bare_cold_call()
            recovery = answered - killed
            return {
                RECOVERY: recovery,
                RECOVERY_RATIO: recovery / bare,
                RECOVERY_CONNECT: record.connect_time,
            }

        yield round_


CALLS = Suite("calls", _open_calls, rounds=ROUNDS, quick_rounds=QUICK_ROUNDS)
STARTUPS = Suite("startup", _open_startup, rounds=3, quick_rounds=1)
STARTUPS_64 = Suite("startup-64", _open_startup_64, rounds=3, quick_rounds=1)
RECOVERIES = Suite("recovery", _open_recovery, rounds=5, quick_rounds=2)


async def call_overhead_ratio_seq(n: int) -> float:
    """``n`` sequential echo calls through ``open_supervisor`` ÷ the same through a bare
    ``mcp.Client``, each to its own stdio echo fixture; blocks of 50 alternate."""
    return await CALLS.measure(CALL_SEQ, n)


async def call_overhead_ratio_concurrent(n: int) -> float:
    """``n`` echo calls in flight at once, until all are answered: supervisor ÷ bare."""
    return await CALLS.measure(CALL_CONCURRENT, n)


async def startup_8_ratio(n: int) -> float:
    """Eager start of ``n`` stdio servers until all are connected ÷ ``n`` bare clients
    entered concurrently in one nursery until all are connected."""
    return await STARTUPS.measure(STARTUP, n)


async def startup_64_ratio(n: int) -> float:
    """Eager start of ``n`` tiny stdio servers, default settings, until all are connected
    ÷ ``n`` bare clients to the same fixture entered concurrently until all are connected."""
    return await STARTUPS_64.measure(STARTUP_64, n)


async def startup_64_restarts(n: int) -> float:
    """Restarts the supervisor needed to connect ``n`` tiny stdio servers (none, if
    start-up holds at that scale)."""
    return await STARTUPS_64.measure(STARTUP_64_RESTARTS, n)


async def shutdown_8_ratio(n: int) -> float:
    """Leaving the supervisor with ``n`` connected stdio servers ÷ exiting ``n`` bare
    clients concurrently (both until every process has exited)."""
    return await STARTUPS.measure(SHUTDOWN, n)


async def recovery_s(n: int) -> float:
    """Seconds from kill -9 of a connected stdio server until the ``n`` calls made as soon
    as the crash is noticed are answered (one in the bench)."""
    return await RECOVERIES.measure(RECOVERY, n)


async def recovery_ratio(n: int) -> float:
    """``recovery_s`` ÷ a bare SDK client's cold connect and first call to the same fixture,
    in the same rounds."""
    return await RECOVERIES.measure(RECOVERY_RATIO, n)
