"""The benchmark suite behind ``mcp-supervisor bench`` (DESIGN §9).

Each measured key has one function: ``await fn(n)`` runs one round of ``n`` operations and
returns that round's figure. :data:`MEASUREMENTS` lists them with their DESIGN target and
round sizes; :func:`run_bench` runs one untimed warm-up round of each, then the timed
rounds *interleaved* — round 1 of every measurement, then round 2 of every measurement …
— so machine noise hits all alike, and reports the median round of each.

Keys measured against real MCP servers share a :class:`Suite`: resources opened once for
all its rounds (a supervisor and a bare ``mcp.Client`` already connected to their fixture
servers), a round that measures each of its keys at once (a startup round gives
``startup_8_ratio`` *and* ``shutdown_8_ratio``), and its own round counts, since starting
processes is expensive. A ratio's two contenders — the supervisor and a bare SDK
``mcp.Client`` against the same kind of fixture process — are measured in the same round,
alternately (ABBA), so noise hits both alike; each round yields one ratio and the report
holds the median ratio.

Add a measurement by writing ``async def my_key(n: int) -> float`` and appending a
:class:`Measurement` to :data:`MEASUREMENTS` (or a :class:`Suite` and its members, made
with :meth:`Suite.measurement`). Benchmarks are not tests: they report figures and never
fail on a missed target.
"""

from __future__ import annotations

import gc
import itertools
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial

import attrs
import trio
from mcp import Client
from mcp.client.stdio import stdio_client

from .actors import Actor, actor_spec, open_tree
from .bus import Bus, Subscription
from .config import load_config
from .events import BusDropped, Connecting
from .runtime import SupervisorHandle, open_supervisor
from .testing.servers import stdio_params, stdio_server_parameters

__all__ = [
    "MEASUREMENTS",
    "BenchError",
    "Measurement",
    "Suite",
    "bus_events_per_s",
    "call_overhead_ratio_concurrent",
    "call_overhead_ratio_seq",
    "format_table",
    "mailbox_call_timeout_us",
    "mailbox_call_us",
    "meets_target",
    "recovery_s",
    "rss_per_server_kb",
    "run_bench",
    "shutdown_8_ratio",
    "startup_8_ratio",
]

#: Subscribers of the bus benchmark, and the patterns they use (alternating).
BUS_SUBSCRIBERS = 10
_BUS_PATTERNS = ("*", "mcp.*")
#: The publisher yields to the scheduler once per this many events, as a real tree would.
_BUS_YIELD_EVERY = 64
#: Untimed calls before each timed mailbox round (first-use costs, caches).
_WARM_CALLS = 200


class _Echo(Actor):
    """Replies with the message it was sent."""

    async def handle(self, message: object) -> object:
        return message


async def _mailbox_round(n: int, timeout: float | None) -> float:
    spec = actor_spec("echo", _Echo)
    address = spec.address
    async with open_tree([spec]):
        for i in range(_WARM_CALLS):
            await address.call(i, timeout)
        start = time.perf_counter()
        for i in range(n):
            await address.call(i, timeout)
        elapsed = time.perf_counter() - start
    return elapsed / n * 1e6


async def mailbox_call_us(n: int) -> float:
    """Microseconds per in-process ``Address.call(msg)`` round trip, no timeout.

    ``n`` sequential calls to an actor (in a one-child tree) whose ``handle`` returns the
    message; no I/O.
    """
    return await _mailbox_round(n, None)


async def mailbox_call_timeout_us(n: int) -> float:
    """Microseconds per ``Address.call(msg, timeout=30)`` round trip (a deadline per call)."""
    return await _mailbox_round(n, 30.0)


async def bus_events_per_s(n: int) -> float:
    """Events per second from one publisher to 10 concurrently consuming subscribers.

    End to end: ``n`` divided by the time from the first publish until every subscriber
    has received all ``n`` events. Half the subscribers match ``"*"``, half ``"mcp.*"``;
    each buffer holds ``n`` events, so nothing is dropped (a drop is an error). The
    publisher builds each event (``Connecting(...)``) and yields to the scheduler every
    64 events, so subscribers run interleaved with it.
    """
    bus = Bus()
    remaining = BUS_SUBSCRIBERS
    all_received = trio.Event()
    finished = 0.0

    async def subscriber(pattern: str, task_status: trio.TaskStatus[None]) -> None:
        nonlocal remaining, finished
        async with bus.subscribe(pattern, buffer=n) as events:
            task_status.started()
            await _consume(events, n)
        remaining -= 1
        if remaining == 0:
            finished = time.perf_counter()
            all_received.set()

    async with trio.open_nursery() as nursery:
        for i in range(BUS_SUBSCRIBERS):
            await nursery.start(subscriber, _BUS_PATTERNS[i % len(_BUS_PATTERNS)])
        checkpoint = trio.lowlevel.checkpoint
        publish = bus.publish
        start = time.perf_counter()
        for i in range(n):
            publish(Connecting(server="bench", attempt=i, max_attempts=0))
            if i % _BUS_YIELD_EVERY == _BUS_YIELD_EVERY - 1:
                await checkpoint()
        await all_received.wait()
    return n / (finished - start)


async def _consume(events: Subscription, n: int) -> None:
    received = 0
    async for event in events:
        if type(event) is BusDropped:
            raise RuntimeError(f"bus benchmark subscriber dropped {event.count} events")
        received += 1
        if received == n:
            return


# -- against real MCP servers over stdio -------------------------------------------------------


class BenchError(RuntimeError):
    """The benchmark could not measure: a fixture server did not start, answer or recover."""


#: The keys measured against real fixture servers.
CALL_SEQ = "call_overhead_ratio_seq"
CALL_CONCURRENT = "call_overhead_ratio_concurrent"
STARTUP = "startup_8_ratio"
SHUTDOWN = "shutdown_8_ratio"
RECOVERY = "recovery_s"
RECOVERY_CONNECT = "recovery_connect_s"
RSS = "rss_per_server_kb"

#: The tool every call benchmark calls (the echo fixture's), and its arguments.
_ECHO_ARGS: dict[str, object] = {"text": "x"}
#: Untimed calls through each contender once connected (first-use costs, caches).
_WARM_SERVER_CALLS = 50
#: A sequential round alternates blocks of this many calls between the two contenders.
_SEQ_BLOCK = 50
#: A concurrent round times this many batches of ``n`` calls per contender, alternately.
_CONCURRENT_BATCHES = 2
#: Bound on each wait for fixture servers (connecting, a crash being noticed, recovering),
#: so a broken setup fails the bench instead of hanging it.
_SERVER_TIMEOUT = 60.0
#: Each recovery round kills the server; the configuration makes every crash count as the
#: first (a connection is "stable" at once), so every round waits the *initial* backoff.
_RECOVERY_SETTINGS: Mapping[str, object] = {"backoff": {"local": {"stableAfter": 0}}}


def _echo_config(names: Sequence[str], **settings: object) -> dict[str, object]:
    """A config with one eager stdio echo fixture per name (tools ``<name>_echo`` …)."""
    command, args = stdio_params("echo")
    servers = {name: {"command": command, "args": list(args), "lazy": False} for name in names}
    config: dict[str, object] = {"mcpServers": servers}
    if settings:
        config["supervisor"] = dict(settings)
    return config


def _server_names(n: int) -> list[str]:
    return [f"echo{i}" for i in range(1, n + 1)]


async def _connect_all(sup: SupervisorHandle) -> None:
    """Wait until every server is connected; raise :class:`BenchError` if one is not."""
    with trio.fail_after(_SERVER_TIMEOUT):
        await sup.connect_all()
    _check_connected(sup)


def _check_connected(sup: SupervisorHandle) -> None:
    down = {n: r.last_error for n, r in sup.status().items() if r.status != "connected"}
    if down:
        raise BenchError(f"fixture servers did not connect: {down}")


@asynccontextmanager
async def _bare_client() -> AsyncIterator[Client]:
    """The baseline: a bare SDK ``mcp.Client`` over the SDK's own stdio transport, to an
    echo fixture process (its stderr discarded). Leaving it stops the process."""
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - /dev/null never blocks
        transport = stdio_client(stdio_server_parameters("echo"), errlog=errlog)
        async with Client(transport) as client:  # type: ignore[arg-type]
            yield client


def _check_echo(result: object, via: str) -> None:
    content = getattr(result, "content", None)
    text = getattr(content[0], "text", None) if content else None
    if getattr(result, "is_error", True) or text != _ECHO_ARGS["text"]:
        raise BenchError(f"the echo fixture answered {result!r} {via}")


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


async def _alternate(
    measure_a: Callable[[int], Awaitable[float]],
    measure_b: Callable[[int], Awaitable[float]],
    pieces: Sequence[int],
    flip: bool,
) -> float:
    """``a``'s total time ÷ ``b``'s, each piece measured for both, in ABBA order."""
    a = b = 0.0
    for i, size in enumerate(pieces):
        if (i % 2 == 1) != flip:
            b += await measure_b(size)
            a += await measure_a(size)
        else:
            a += await measure_a(size)
            b += await measure_b(size)
    return a / b


def _blocks(n: int, block: int) -> list[int]:
    return [min(block, n - i) for i in range(0, n, block)]


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
                figures[CALL_SEQ] = await _alternate(
                    partial(_timed_sequential, supervised),
                    partial(_timed_sequential, direct),
                    _blocks(n, _SEQ_BLOCK),
                    flip,
                )
            if n := sizes.get(CALL_CONCURRENT, 0):
                figures[CALL_CONCURRENT] = await _alternate(
                    partial(_timed_concurrent, supervised),
                    partial(_timed_concurrent, direct),
                    [n] * _CONCURRENT_BATCHES,
                    flip,
                )
            return figures

        yield round_


async def _supervisor_start_stop(n: int) -> tuple[float, float]:
    """Seconds from entering ``open_supervisor`` (``n`` eager stdio servers) until all are
    connected, and from then until the block is left (every server stopped)."""
    config = _echo_config(_server_names(n))
    async with AsyncExitStack() as stack:
        start = time.perf_counter()
        sup = await stack.enter_async_context(open_supervisor(config))
        with trio.fail_after(_SERVER_TIMEOUT):
            await sup.connect_all()
        connected = time.perf_counter()
        _check_connected(sup)
        closing = time.perf_counter()
        await stack.aclose()
        closed = time.perf_counter()
    return connected - start, closed - closing


async def _bare_start_stop(n: int) -> tuple[float, float]:
    """Seconds until ``n`` bare ``Client``\\ s entered concurrently in one nursery are all
    connected, and until they have all exited, concurrently."""
    connected = 0
    all_connected = trio.Event()
    close = trio.Event()

    async def one() -> None:
        nonlocal connected
        async with _bare_client():
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


def _recovery_config() -> dict[str, object]:
    return _echo_config(["echo"], **_RECOVERY_SETTINGS)


def recovery_backoff_initial() -> float:
    """The restart delay every recovery round waits: the local servers' default initial
    backoff, as the recovery benchmark's config has it."""
    return load_config(_recovery_config()).servers["echo"].backoff.initial


def _recovery_target(medians: Mapping[str, float]) -> str | None:
    """DESIGN §9: ``recovery_s ≤ backoff_initial + 1.5 × connect``, with the connect time
    measured in the same rounds."""
    connect = medians.get(RECOVERY_CONNECT)
    if connect is None:
        return None
    return f"<= {recovery_backoff_initial() + 1.5 * connect:.3f}"


@asynccontextmanager
async def _open_recovery() -> AsyncIterator[RoundFn]:
    """One supervised echo fixture, kept for every round; a round kills it with SIGKILL.

    A round's ``recovery_s`` starts at the kill and ends when the ``n`` calls made as soon
    as the crash is noticed (``mcp.local.crashed``) are all answered: it includes noticing
    the death, the restart delay (the initial backoff, 1 s by default), starting and
    connecting a new process, and the call itself. ``recovery_connect_s`` is that new
    connection's connect time (spawn to tool list), as the health record reports it.
    """
    async with open_supervisor(_recovery_config()) as sup:
        await _connect_all(sup)
        _check_echo(await sup.call("echo_echo", _ECHO_ARGS), "through the supervisor")

        async def call() -> None:
            _check_echo(await sup.call("echo_echo", _ECHO_ARGS), "after the restart")

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            n = max(sizes.values())
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
            return {RECOVERY: answered - killed, RECOVERY_CONNECT: record.connect_time}

        yield round_


def _vm_rss_kb() -> int:
    """This process's resident set size in KiB (``VmRSS``; it goes down when memory is
    returned). Without ``/proc``, the peak RSS from ``getrusage`` (which never does)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


async def _rss_growth_kb(n: int) -> float:
    """KiB of this process's RSS per stdio server connected (and called once), after one
    server already connected and called absorbed the one-time costs (lazy imports,
    first-use caches). Meaningful in a fresh process only: see :func:`rss_per_server_kb`."""
    async with open_supervisor(_echo_config(["warm"])) as warm:
        await _connect_all(warm)
        _check_echo(await warm.call("warm_echo", _ECHO_ARGS), "to the warm-up server")
        gc.collect()
        before = _vm_rss_kb()
        names = _server_names(n)
        async with open_supervisor(_echo_config(names)) as sup:
            await _connect_all(sup)
            for name in names:
                await sup.call(f"{name}_echo", _ECHO_ARGS)
            gc.collect()
            after = _vm_rss_kb()
    return (after - before) / n


async def rss_per_server_kb(n: int) -> float:
    """Client-side memory per connected stdio server: the VmRSS growth of a *fresh*
    Python process (running :func:`_rss_growth_kb`) per server, ``n`` servers.

    Only our process is measured — each server is a separate process, not counted. A fresh
    process, because in a process that already connected and closed servers (as the other
    benchmarks do) the allocator reuses the memory it kept from them, and the growth
    measured there is a few KiB whatever a server really costs.
    """
    command = [sys.executable, "-m", "supervisor.bench", "rss", str(n)]
    with trio.fail_after(_SERVER_TIMEOUT + 5 * n):
        done = await trio.run_process(
            command,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise BenchError(f"the RSS probe exited with {done.returncode}: " + " | ".join(tail))
    return float(done.stdout.split()[-1])


async def _rss_round(sizes: Mapping[str, int]) -> dict[str, float]:
    return {RSS: await rss_per_server_kb(max(sizes.values()))}


@asynccontextmanager
async def _open_memory() -> AsyncIterator[RoundFn]:
    """Nothing kept between rounds: each round is a fresh process."""
    yield _rss_round


# -- the registry --------------------------------------------------------------------------

#: One round of a suite: the size of each key to measure → each key's figure.
RoundFn = Callable[[Mapping[str, int]], Awaitable[Mapping[str, float]]]
#: A target: fixed (``"<= 1.05"``), ``None``, or computed from the run's medians.
Target = str | Callable[[Mapping[str, float]], str | None] | None


@attrs.frozen(eq=False)
class Suite:
    """Keys measured together: resources opened once for all rounds, and rounds that
    measure every key at once.

    ``async with open() as round_`` sets up (starts and connects servers, warms them up);
    ``await round_({key: size, ...})`` measures one round of the given keys and returns
    their figures (it may return more keys than asked). A suite runs ``rounds`` timed
    rounds (``quick_rounds`` with ``--quick``), spread evenly over the run's rounds.
    """

    name: str
    open: Callable[[], AbstractAsyncContextManager[RoundFn]]
    rounds: int
    quick_rounds: int

    async def measure(self, key: str, n: int) -> float:
        """One round of ``key`` alone, of size ``n``, the suite opened and closed around it."""
        async with self.open() as round_:
            return (await round_({key: n}))[key]

    def measurement(
        self,
        key: str,
        target: Target,
        unit: str,
        size: int,
        quick_size: int,
        digits: int = 2,
        note: str | None = None,
    ) -> Measurement:
        """A :class:`Measurement` of ``key`` in this suite."""
        return Measurement(
            key,
            partial(self.measure, key),
            target,
            unit,
            size,
            quick_size,
            digits,
            suite=self,
            note=note,
        )


@attrs.frozen
class Measurement:
    """One benchmark key: how to measure it, its target and its round sizes."""

    #: the key in the JSON output
    key: str
    #: ``await run(n)`` measures one round of ``n`` operations and returns its figure
    run: Callable[[int], Awaitable[float]]
    #: the DESIGN §9 target, e.g. ``"<= 15"``; ``None`` for an informative extra key; or a
    #: function of the run's medians (by key) returning one
    target: Target
    unit: str
    #: operations per round: full run, ``--quick`` run
    size: int
    quick_size: int
    #: decimals kept in the output
    digits: int = 2
    #: the suite measuring it with other keys (``run`` then measures one round alone)
    suite: Suite | None = None
    #: what the figure includes, for the report's ``meta.notes``
    note: str | None = None


CALLS = Suite("calls", _open_calls, rounds=15, quick_rounds=5)
STARTUPS = Suite("startup", _open_startup, rounds=3, quick_rounds=1)
RECOVERIES = Suite("recovery", _open_recovery, rounds=5, quick_rounds=2)
MEMORY = Suite("memory", _open_memory, rounds=3, quick_rounds=1)


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


async def shutdown_8_ratio(n: int) -> float:
    """Leaving the supervisor with ``n`` connected stdio servers ÷ exiting ``n`` bare
    clients concurrently (both until every process has exited)."""
    return await STARTUPS.measure(SHUTDOWN, n)


async def recovery_s(n: int) -> float:
    """Seconds from kill -9 of a connected stdio server until the ``n`` calls made as soon
    as the crash is noticed are answered (one in the bench)."""
    return await RECOVERIES.measure(RECOVERY, n)


MEASUREMENTS: Sequence[Measurement] = (
    Measurement("mailbox_call_us", mailbox_call_us, "<= 15", "µs/call", 20_000, 2_000),
    Measurement("mailbox_call_timeout_us", mailbox_call_timeout_us, None, "µs/call", 20_000, 2_000),
    Measurement("bus_events_per_s", bus_events_per_s, ">= 200000", "events/s", 50_000, 5_000, 0),
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
        note="entering open_supervisor with 8 eager stdio servers until all are connected "
        "(tools listed) ÷ 8 bare mcp.Clients entered concurrently until all are connected",
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
        "mcp.local.crashed arrives is answered; default initial backoff; target = "
        "backoff_initial + 1.5 × recovery_connect_s",
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
)

#: Timed rounds per measurement (after one warm-up round), suites aside.
ROUNDS = 15
QUICK_ROUNDS = 5


def _due(i: int, rounds: int, total: int) -> bool:
    """Whether something timed ``rounds`` times in ``total`` rounds runs in round ``i``
    (spread evenly; every round when ``rounds == total``)."""
    return (i * rounds) // total != ((i + 1) * rounds) // total


async def run_bench(
    quick: bool = False, measurements: Sequence[Measurement] = MEASUREMENTS
) -> dict[str, object]:
    """Measure every key and return the JSON-ready report.

    The report holds each key's median round, plus ``"meta"`` (interpreter, trio,
    platform, CPUs, ``quick``, rounds and round sizes, each key's rounds and notes) and
    ``"targets"`` (each key's DESIGN §9 target, ``None`` where DESIGN sets none; computed
    from the medians where DESIGN gives a formula).

    Measurements run interleaved: in each round every plain measurement runs once and
    every suite due in that round runs one round of all its keys. Suites are opened
    (their servers started and connected) before the first round and closed after the
    last, whatever happens.
    """
    rounds = QUICK_ROUNDS if quick else ROUNDS
    sizes = {m.key: m.quick_size if quick else m.size for m in measurements}
    figures: dict[str, list[float]] = {m.key: [] for m in measurements}
    # Participants in order of first appearance: a plain measurement, or a suite and
    # those of its members being measured.
    groups: dict[Suite, list[Measurement]] = {}
    order: list[Measurement | Suite] = []
    for m in measurements:
        if m.suite is None:
            order.append(m)
        else:
            if m.suite not in groups:
                order.append(m.suite)
            groups.setdefault(m.suite, []).append(m)
    counts = {
        m.key: rounds if m.suite is None else (m.suite.quick_rounds if quick else m.suite.rounds)
        for m in measurements
    }
    total = max([rounds, *counts.values()])

    for m in measurements:  # warm-up round, not reported (suites warm up as they open)
        if m.suite is None:
            await m.run(max(1, sizes[m.key] // 10))
    async with AsyncExitStack() as stack:
        opened = {suite: await stack.enter_async_context(suite.open()) for suite in groups}
        for i in range(total):
            for item in order:
                if isinstance(item, Suite):
                    members = groups[item]
                    if not _due(i, counts[members[0].key], total):
                        continue
                    gc.collect()
                    got = await opened[item]({m.key: sizes[m.key] for m in members})
                    for m in members:
                        figures[m.key].append(got[m.key])
                elif _due(i, rounds, total):
                    gc.collect()
                    figures[item.key].append(await item.run(sizes[item.key]))

    report: dict[str, object] = {}
    medians: dict[str, float] = {}
    for m in measurements:
        medians[m.key] = statistics.median(figures[m.key])
        report[m.key] = round(medians[m.key], m.digits or None)
    report["meta"] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "trio": trio.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "quick": quick,
        "rounds": rounds,
        "round_sizes": sizes,
        "rounds_by_key": counts,
        "notes": {m.key: m.note for m in measurements if m.note},
    }
    report["targets"] = {m.key: _target(m.target, medians) for m in measurements}
    return report


def _target(target: Target, medians: Mapping[str, float]) -> str | None:
    return target(medians) if callable(target) else target


def meets_target(value: float, target: str | None) -> bool | None:
    """Whether ``value`` satisfies a target such as ``"<= 15"``; ``None`` without one."""
    if target is None:
        return None
    op, _, number = target.partition(" ")
    bound = float(number)
    if op == "<=":
        return value <= bound
    if op == ">=":
        return value >= bound
    raise ValueError(f"unknown target {target!r}")


def format_table(
    report: dict[str, object], measurements: Sequence[Measurement] = MEASUREMENTS
) -> str:
    """The report as a human-readable table (one line per key, then the setting)."""
    targets = report.get("targets")
    rows = [("key", "median", "unit", "target", "")]
    for m in measurements:
        if m.key not in report:
            continue
        value = report[m.key]
        assert isinstance(value, int | float)
        target = targets.get(m.key) if isinstance(targets, dict) else None
        if target is None and isinstance(m.target, str):
            target = m.target
        met = meets_target(value, target)
        verdict = "" if met is None else ("ok" if met else "MISSED")
        shown = f"{value:,.{m.digits}f}"
        rows.append((m.key, shown, m.unit, target or "-", verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        f"{k:<{widths[0]}}  {v:>{widths[1]}}  {u:<{widths[2]}}  {t:<{widths[3]}}  {ok}".rstrip()
        for k, v, u, t, ok in rows
    ]
    meta = report.get("meta")
    if isinstance(meta, dict):
        lines.append("")
        lines.append(
            f"median of {meta['rounds']} interleaved rounds{' (--quick)' if meta['quick'] else ''}"
            f"; Python {meta['python']}, trio {meta['trio']}, {meta['cpu_count']} CPUs, "
            f"{meta['platform']}"
        )
        by_key = meta.get("rounds_by_key")
        if isinstance(by_key, dict):
            fewer = {k: r for k, r in by_key.items() if r != meta["rounds"]}
            if fewer:
                lines.append(
                    "fewer rounds (process starts are costly): "
                    + ", ".join(f"{k} {r}" for k, r in fewer.items())
                )
    return "\n".join(lines)


def _main(argv: Sequence[str]) -> int:
    """``python -m supervisor.bench rss N``: the fresh process :func:`rss_per_server_kb`
    runs; prints the KiB per server."""
    if len(argv) == 2 and argv[0] == "rss" and argv[1].isdigit() and int(argv[1]) > 0:
        figure = trio.run(_rss_growth_kb, int(argv[1]))
        print(f"{figure:.3f}")
        return 0
    print("usage: python -m supervisor.bench rss N", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
