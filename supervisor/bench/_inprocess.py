"""The in-process keys (no I/O): actor mailbox round trips and event bus throughput, each
measured against a raw trio baseline in the same round.

Two suites, each with its contenders opened once for all rounds: ours (an actor's
``Address.call``; the bus from ``open_bus()``) and the raw trio equivalent (a request sent
over a memory channel to a server task that replies; ``send_nowait`` into one memory
channel per reader). A round cuts its ``n`` operations into :data:`_PIECES` pieces and times
each piece for both contenders, alternately (ABBA), so machine noise hits both alike; it
reports the absolute figure of ours and the ratio ours ÷ raw.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from functools import partial

import trio

from ..actors import Actor, actor_spec, open_tree
from ..events._bus import Bus, open_bus
from ..events._catalog import BusDropped, Connecting, Event
from ._alternate import Timer, alternate, blocks
from ._suite import QUICK_ROUNDS, ROUNDS, RoundFn, Suite

#: The keys: ours (informative) and ours against the raw trio baseline (with a target).
MAILBOX_CALL = "mailbox_call_us"
MAILBOX_RATIO = "mailbox_call_ratio"
BUS_EVENTS = "bus_events_per_s"
BUS_RATIO = "bus_ratio"

#: Subscribers of the bus benchmark, and the patterns they use (alternating).
BUS_SUBSCRIBERS = 10
_BUS_PATTERNS = ("*", "mcp.*")
#: The publisher yields to the scheduler once per this many events, as a real tree would.
_BUS_YIELD_EVERY = 64
#: Mailbox capacity of the echo actor, and buffer of the raw request channel.
_MAILBOX = 256
#: Untimed calls before each timed mailbox round (first-use costs, caches).
_WARM_CALLS = 200
#: Untimed events through each bus contender when its suite opens.
_WARM_EVENTS = 1_000
#: A round times each contender on this many pieces of its ``n`` operations, alternately.
_PIECES = 4

#: ``figures(ours_s, raw_s, n)``: a round's keys from the two contenders' total seconds
#: for the same ``n`` operations.
Figures = Callable[[float, float, int], dict[str, float]]


def mailbox_figures(ours_s: float, raw_s: float, n: int) -> dict[str, float]:
    """``mailbox_call_us`` (ours, µs per round trip) and ``mailbox_call_ratio`` (ours ÷
    the raw memory-channel request/reply), from each side's seconds for ``n`` round trips."""
    return {MAILBOX_CALL: ours_s / n * 1e6, MAILBOX_RATIO: ours_s / raw_s}


def bus_figures(ours_s: float, raw_s: float, n: int) -> dict[str, float]:
    """``bus_events_per_s`` (ours) and ``bus_ratio`` (raw events/s ÷ ours, so > 1 means
    the bus is slower), from each side's seconds to fan out the same ``n`` events."""
    return {BUS_EVENTS: n / ours_s, BUS_RATIO: (n / raw_s) / (n / ours_s)}


def _contest(ours: Timer, raw: Timer, figures: Figures) -> RoundFn:
    """A suite's round: the asked size split into :data:`_PIECES` pieces, each timed for
    ``ours`` and ``raw`` alternately (ABBA, starting with the other one each round), and
    ``figures`` of the two totals."""
    parity = itertools.count()

    async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
        n = max(sizes.values())
        pieces = blocks(n, -(-n // _PIECES))
        ours_s, raw_s = await alternate(ours, raw, pieces, next(parity) % 2 == 1)
        return figures(ours_s, raw_s, n)

    return round_


# --- mailbox ---------------------------------------------------------------------------


class _Echo(Actor):
    """Replies with the message it was sent."""

    async def handle(self, message: object) -> object:
        return message


class _Request:
    """A raw request: the message, and where and when its reply lands."""

    __slots__ = ("done", "message", "reply")

    def __init__(self, message: object) -> None:
        self.message = message
        self.reply: object = None
        self.done = trio.Event()


@asynccontextmanager
async def _open_raw_echo() -> AsyncIterator[Callable[[object], Awaitable[object]]]:
    """``call(message)``: the raw trio round trip — a request (message and a reply event)
    sent over a memory channel to a server task, which sets the reply and the event."""
    send, receive = trio.open_memory_channel[_Request](_MAILBOX)

    async def serve() -> None:
        async for request in receive:
            request.reply = request.message
            request.done.set()

    async def call(message: object) -> object:
        request = _Request(message)
        await send.send(request)
        await request.done.wait()
        return request.reply

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        with send:  # closing it ends the server task
            yield call


async def _timed_calls(call: Callable[[object], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await call(i)
    return time.perf_counter() - start


@asynccontextmanager
async def _open_mailbox() -> AsyncIterator[RoundFn]:
    """An echo actor (in a one-child tree) and the raw echo server task, both running for
    every round and warmed up; a round times sequential calls to each."""
    spec = actor_spec("echo", _Echo, mailbox=_MAILBOX)
    async with open_tree([spec]), _open_raw_echo() as raw_call:
        ours_call = spec.address.call
        for contender in (ours_call, raw_call):
            if await contender("ping") != "ping":
                raise RuntimeError("mailbox benchmark: the echo did not echo")
            for i in range(_WARM_CALLS):
                await contender(i)
        yield _contest(
            partial(_timed_calls, ours_call), partial(_timed_calls, raw_call), mailbox_figures
        )


async def _mailbox_timeout_round(n: int) -> float:
    spec = actor_spec("echo", _Echo, mailbox=_MAILBOX)
    address = spec.address
    async with open_tree([spec]):
        for i in range(_WARM_CALLS):
            await address.call(i, 30.0)
        start = time.perf_counter()
        for i in range(n):
            await address.call(i, 30.0)
        elapsed = time.perf_counter() - start
    return elapsed / n * 1e6


MAILBOX = Suite("mailbox", _open_mailbox, rounds=ROUNDS, quick_rounds=QUICK_ROUNDS)


async def mailbox_call_us(n: int) -> float:
    """Microseconds per in-process ``Address.call(msg)`` round trip, no timeout.

    ``n`` sequential calls to an actor (in a one-child tree) whose ``handle`` returns the
    message; no I/O. (One round of the mailbox suite, which times the raw baseline too.)
    """
    return await MAILBOX.measure(MAILBOX_CALL, n)


async def mailbox_call_ratio(n: int) -> float:
    """``Address.call`` round trip ÷ the raw trio memory-channel request/reply, ``n`` of
    each, alternating."""
    return await MAILBOX.measure(MAILBOX_RATIO, n)


async def mailbox_call_timeout_us(n: int) -> float:
    """Microseconds per ``Address.call(msg, timeout=30)`` round trip (a deadline per call)."""
    return await _mailbox_timeout_round(n)


# --- bus -------------------------------------------------------------------------------

#: A reader of the fan-out: subscribes, reports ``started``, then consumes ``n`` events.
_Reader = Callable[[trio.TaskStatus[None]], Awaitable[None]]


async def _fanout_s(publish: Callable[[Event], None], readers: Sequence[_Reader], n: int) -> float:
    """Seconds from the first of ``n`` publishes until every reader has received all.

    The readers start (and subscribe) first, untimed. The publisher builds each event
    (``Connecting(...)``) and yields to the scheduler every :data:`_BUS_YIELD_EVERY`
    events, so readers run interleaved with it.
    """
    remaining = len(readers)
    all_received = trio.Event()
    finished = 0.0

    async def run(reader: _Reader, task_status: trio.TaskStatus[None]) -> None:
        nonlocal remaining, finished
        await reader(task_status)
        remaining -= 1
        if remaining == 0:
            finished = time.perf_counter()
            all_received.set()

    async with trio.open_nursery() as nursery:
        for reader in readers:
            await nursery.start(run, reader)
        checkpoint = trio.lowlevel.checkpoint
        start = time.perf_counter()
        for i in range(n):
            publish(Connecting(server="bench", attempt=i, max_attempts=0))
            if i % _BUS_YIELD_EVERY == _BUS_YIELD_EVERY - 1:
                await checkpoint()
        await all_received.wait()
    return finished - start


async def _consume(events: AsyncIterable[Event], n: int) -> None:
    received = 0
    async for event in events:
        if type(event) is BusDropped:
            raise RuntimeError(f"bus benchmark subscriber dropped {event.count} events")
        received += 1
        if received == n:
            return
    raise RuntimeError(f"bus benchmark reader got {received} of {n} events")


async def _bus_fanout_s(bus: Bus, n: int) -> float:
    """Ours: ``bus.publish`` to :data:`BUS_SUBSCRIBERS` subscriptions (half ``"*"``, half
    ``"mcp.*"``), each buffering ``n`` events so nothing is dropped."""

    def reader(pattern: str) -> _Reader:
        async def read(task_status: trio.TaskStatus[None]) -> None:
            async with bus.subscribe(pattern, buffer=n) as events:
                task_status.started()
                await _consume(events, n)

        return read

    patterns = itertools.islice(itertools.cycle(_BUS_PATTERNS), BUS_SUBSCRIBERS)
    return await _fanout_s(bus.publish, [reader(p) for p in patterns], n)


async def _raw_fanout_s(n: int) -> float:
    """The raw baseline: ``send_nowait`` of each event into :data:`BUS_SUBSCRIBERS` trio
    memory channels (each buffering ``n``), one reader task per channel."""
    channels = [trio.open_memory_channel[Event](n) for _ in range(BUS_SUBSCRIBERS)]
    sends = [send for send, _ in channels]

    def publish(event: Event) -> None:
        for send in sends:
            send.send_nowait(event)

    def reader(receive: trio.MemoryReceiveChannel[Event]) -> _Reader:
        async def read(task_status: trio.TaskStatus[None]) -> None:
            with receive:
                task_status.started()
                await _consume(receive, n)

        return read

    try:
        return await _fanout_s(publish, [reader(receive) for _, receive in channels], n)
    finally:
        for send in sends:
            send.close()


@asynccontextmanager
async def _open_bus_contest() -> AsyncIterator[RoundFn]:
    """A bus from ``open_bus()``, running for every round; each piece of a round
    subscribes anew on it, and makes fresh raw channels."""
    async with open_bus() as bus:
        ours = partial(_bus_fanout_s, bus)
        await ours(_WARM_EVENTS)
        await _raw_fanout_s(_WARM_EVENTS)
        yield _contest(ours, _raw_fanout_s, bus_figures)


BUS = Suite("bus", _open_bus_contest, rounds=ROUNDS, quick_rounds=QUICK_ROUNDS)


async def bus_events_per_s(n: int) -> float:
    """Events per second from one publisher to 10 concurrently consuming subscribers.

    End to end: ``n`` divided by the time from the first publish until every subscriber
    has received all ``n`` events. Half the subscribers match ``"*"``, half ``"mcp.*"``;
    each buffer holds ``n`` events, so nothing is dropped (a drop is an error). The
    publisher builds each event (``Connecting(...)``) and yields to the scheduler every
    64 events, so subscribers run interleaved with it. (One round of the bus suite, which
    times the raw baseline too.)
    """
    return await BUS.measure(BUS_EVENTS, n)


async def bus_ratio(n: int) -> float:
    """Raw trio fan-out events/s ÷ the bus's, ``n`` events each, alternating."""
    return await BUS.measure(BUS_RATIO, n)
