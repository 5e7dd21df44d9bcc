"""The benchmark suite behind ``mcp-supervisor bench`` (DESIGN §9).

Each measured key has one function: ``await fn(n)`` runs one round of ``n`` operations and
returns that round's figure. :data:`MEASUREMENTS` lists them with their DESIGN target and
round sizes; :func:`run_bench` runs one untimed warm-up round of each, then the timed
rounds *interleaved* — round 1 of every measurement, then round 2 of every measurement …
— so machine noise hits all alike, and reports the median round of each.

Add a measurement by writing ``async def my_key(n: int) -> float`` and appending a
:class:`Measurement` to :data:`MEASUREMENTS`. Benchmarks are not tests: they report figures
and never fail on a missed target.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from .actors import Actor, actor_spec, open_tree
from .bus import Bus, Subscription
from .events import BusDropped, Connecting

__all__ = [
    "MEASUREMENTS",
    "Measurement",
    "bus_events_per_s",
    "format_table",
    "mailbox_call_timeout_us",
    "mailbox_call_us",
    "meets_target",
    "run_bench",
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


@attrs.frozen
class Measurement:
    """One benchmark key: how to measure it, its target and its round sizes."""

    #: the key in the JSON output
    key: str
    #: ``await run(n)`` measures one round of ``n`` operations and returns its figure
    run: Callable[[int], Awaitable[float]]
    #: the DESIGN §9 target, e.g. ``"<= 15"``; ``None`` for an informative extra key
    target: str | None
    unit: str
    #: operations per round: full run, ``--quick`` run
    size: int
    quick_size: int
    #: decimals kept in the output
    digits: int = 2


MEASUREMENTS: Sequence[Measurement] = (
    Measurement("mailbox_call_us", mailbox_call_us, "<= 15", "µs/call", 20_000, 2_000),
    Measurement("mailbox_call_timeout_us", mailbox_call_timeout_us, None, "µs/call", 20_000, 2_000),
    Measurement("bus_events_per_s", bus_events_per_s, ">= 200000", "events/s", 50_000, 5_000, 0),
)

#: Timed rounds per measurement (after one warm-up round).
ROUNDS = 15
QUICK_ROUNDS = 5


async def run_bench(
    quick: bool = False, measurements: Sequence[Measurement] = MEASUREMENTS
) -> dict[str, object]:
    """Measure every key and return the JSON-ready report.

    The report holds each key's median round, plus ``"meta"`` (interpreter, trio,
    platform, CPUs, ``quick``, rounds and round sizes) and ``"targets"`` (each key's
    DESIGN §9 target, ``None`` where DESIGN sets none).
    """
    rounds = QUICK_ROUNDS if quick else ROUNDS
    sizes = {m.key: m.quick_size if quick else m.size for m in measurements}
    figures: dict[str, list[float]] = {m.key: [] for m in measurements}
    for m in measurements:  # warm-up round, not reported
        await m.run(max(1, sizes[m.key] // 10))
    for _ in range(rounds):
        for m in measurements:
            gc.collect()
            figures[m.key].append(await m.run(sizes[m.key]))

    report: dict[str, object] = {}
    for m in measurements:
        report[m.key] = round(statistics.median(figures[m.key]), m.digits or None)
    report["meta"] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "trio": trio.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "quick": quick,
        "rounds": rounds,
        "round_sizes": sizes,
    }
    report["targets"] = {m.key: m.target for m in measurements}
    return report


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
    rows = [("key", "median", "unit", "target", "")]
    for m in measurements:
        if m.key not in report:
            continue
        value = report[m.key]
        assert isinstance(value, int | float)
        met = meets_target(value, m.target)
        verdict = "" if met is None else ("ok" if met else "MISSED")
        shown = f"{value:,.{m.digits}f}"
        rows.append((m.key, shown, m.unit, m.target or "-", verdict))
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
    return "\n".join(lines)
