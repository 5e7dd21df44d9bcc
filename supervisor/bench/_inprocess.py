"""The in-process keys: actor mailbox round trips and event bus throughput (no I/O)."""

from __future__ import annotations

import time

import trio

from ..actors import Actor, actor_spec, open_tree
from ..bus import Bus, Subscription
from ..events import BusDropped, Connecting

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
