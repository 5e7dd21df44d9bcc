from __future__ import annotations

import inspect

import pytest
import structlog
import trio
import trio.testing

from supervisor.actors import Actor, Backoff, actor_spec, open_tree
from supervisor.events._bus import (
    Bus,
    BusStatistics,
    Subscription,
    SubscriptionStatistics,
    open_bus,
)
from supervisor.events._catalog import (
    BusDropped,
    Connecting,
    Event,
    LocalSpawned,
    ToolsRegistered,
)


def connecting(i: int) -> Connecting:
    return Connecting(server="s", attempt=i, max_attempts=0)


def attempts(events: list[Event]) -> list[int]:
    return [e.attempt for e in events if isinstance(e, Connecting)]


async def collect(sub: Subscription, out: list[Event]) -> None:
    async for event in sub:
        out.append(event)


# --- filtering --------------------------------------------------------------------------


def test_glob_filters_by_kind() -> None:
    """`mcp.*` matches mcp.local.spawned but not tools.registered."""
    bus = Bus()
    with bus.subscribe("mcp.*") as sub:
        bus.publish(LocalSpawned(server="fs", pid=1))
        bus.publish(ToolsRegistered(server="fs", names=["a"]))
        assert [e.kind for e in sub.drain()] == ["mcp.local.spawned"]


def test_multiple_patterns() -> None:
    """An event is delivered once if it matches any of several patterns."""
    bus = Bus()
    with bus.subscribe("tools.*", "mcp.local.spawned", "mcp.*.spawned") as sub:
        bus.publish(LocalSpawned(server="fs", pid=1))
        bus.publish(connecting(1))
        bus.publish(ToolsRegistered(server="fs", names=["a"]))
        assert [e.kind for e in sub.drain()] == ["mcp.local.spawned", "tools.registered"]


def test_no_pattern_means_everything() -> None:
    """subscribe() with no pattern receives every kind."""
    bus = Bus()
    with bus.subscribe() as sub:
        assert sub.patterns == ("*",)
        bus.notify("tools.conflict", name="x", servers=["a", "b"])
        bus.publish(connecting(1))
        assert [e.kind for e in sub.drain()] == ["tools.conflict", "mcp.connecting"]


def test_matching_is_case_sensitive() -> None:
    """Patterns match kinds case-sensitively."""
    bus = Bus()
    with bus.subscribe("MCP.*") as sub:
        bus.publish(connecting(1))
        assert sub.drain() == []


def test_only_events_after_subscribing() -> None:
    """A subscription sees only events published after it was entered."""
    bus = Bus()
    bus.publish(connecting(1))
    with bus.subscribe() as sub:
        bus.publish(connecting(2))
        assert attempts(sub.drain()) == [2]


def test_notify_builds_and_publishes() -> None:
    """notify(kind, **fields) publishes the catalog event of that kind."""
    bus = Bus()
    with bus.subscribe() as sub:
        bus.notify(
            "supervisor.child.restarted",
            supervisor="root",
            child="gh",
            strategy="one_for_one",
            restarts=1,
            reason="Crashed(OSError)",
        )
        [event] = sub.drain()
        assert event.kind == "supervisor.child.restarted"
        with pytest.raises(ValueError, match="no.such.kind"):
            bus.notify("no.such.kind")


def test_bad_subscribe_arguments() -> None:
    """A buffer below 1 or a non-string pattern is refused at subscribe()."""
    bus = Bus()
    with pytest.raises(ValueError, match="buffer"):
        bus.subscribe(buffer=0)
    with pytest.raises(TypeError, match="str"):
        bus.subscribe(["mcp.*"])  # type: ignore[arg-type]


# --- fan-out and ordering ---------------------------------------------------------------


async def test_every_subscriber_gets_every_matching_event_in_order() -> None:
    """Concurrent subscribers each receive all their matching events in publish order."""
    bus = Bus()
    everything: list[list[Event]] = [[] for _ in range(3)]
    only_mcp: list[Event] = []

    async def reader(out: list[Event], *patterns: str, task_status=trio.TASK_STATUS_IGNORED):
        async with bus.subscribe(*patterns) as sub:
            task_status.started()
            await collect(sub, out)

    async with trio.open_nursery() as nursery:
        for out in everything:
            await nursery.start(reader, out)
        await nursery.start(reader, only_mcp, "mcp.*")
        for i in range(100):
            bus.publish(connecting(i))
            bus.publish(ToolsRegistered(server="s", names=[str(i)]))
            if i % 7 == 0:
                await trio.lowlevel.checkpoint()
        bus.close()

    for out in everything:
        assert attempts(out) == list(range(100))
        assert len(out) == 200
    assert attempts(only_mcp) == list(range(100))
    assert len(only_mcp) == 100


async def test_parked_subscriber_is_woken() -> None:
    """A subscriber waiting for its next event receives it as soon as it is published."""
    bus = Bus()
    async with bus.subscribe() as sub, trio.open_nursery() as nursery:
        got: list[Event] = []

        async def read_one() -> None:
            got.append(await sub.receive())

        nursery.start_soon(read_one)
        await trio.testing.wait_all_tasks_blocked()
        assert sub.statistics().waiting
        bus.publish(connecting(1))
    assert attempts(got) == [1]


# --- overflow ---------------------------------------------------------------------------


async def test_slow_subscriber_loses_oldest_and_is_told() -> None:
    """After N+k publishes a buffer=N reader gets BusDropped(count=k), then the newest N."""
    n, k = 8, 5
    bus = Bus()
    async with bus.subscribe(buffer=n) as slow, bus.subscribe(buffer=1000) as fast:
        for i in range(n + k):
            bus.publish(connecting(i))
        first = await slow.receive()
        assert isinstance(first, BusDropped)
        assert first.count == k
        rest = [await slow.receive() for _ in range(n)]
        assert attempts(rest) == list(range(k, n + k))
        assert slow.drain() == []
        assert attempts(fast.drain()) == list(range(n + k))

        stats = slow.statistics()
        assert (stats.dropped_total, stats.delivered, stats.buffered) == (k, n, 0)
        assert fast.statistics().dropped_total == 0


def test_drop_notice_counts_since_last_notice() -> None:
    """Each BusDropped counts only the losses since the previous notice."""
    bus = Bus()
    with bus.subscribe(buffer=2) as sub:
        for i in range(5):
            bus.publish(connecting(i))
        events = sub.drain()
        assert events[0] == BusDropped(count=3, ts=events[0].ts)
        assert attempts(events[1:]) == [3, 4]
        for i in range(5, 8):
            bus.publish(connecting(i))
        events = sub.drain()
        assert isinstance(events[0], BusDropped) and events[0].count == 1
        assert attempts(events[1:]) == [6, 7]
        assert sub.statistics().dropped_total == 4


def test_drop_notices_are_private() -> None:
    """A drop notice goes only to the subscriber that lost events, and is never fanned out."""
    bus = Bus()
    with bus.subscribe(buffer=1) as lossy, bus.subscribe("*") as other:
        bus.publish(connecting(1))
        bus.publish(connecting(2))
        bus.publish(BusDropped(count=99))
        assert attempts(other.drain()) == [1, 2]
        events = lossy.drain()
        assert [type(e) for e in events] == [BusDropped, Connecting]
        assert events[0].count == 1


def test_publish_is_synchronous_and_never_waits_for_readers() -> None:
    """publish is a plain function and completes even if a subscriber never reads."""
    assert not inspect.iscoroutinefunction(Bus.publish)
    assert not inspect.iscoroutinefunction(Bus.notify)
    bus = Bus()
    with bus.subscribe(buffer=8) as sub:
        for i in range(10_000):
            bus.publish(connecting(i))
        stats = sub.statistics()
        assert (stats.buffered, stats.dropped_total, stats.delivered) == (8, 9_992, 0)
        assert attempts(sub.drain()) == list(range(9_992, 10_000))


async def test_publish_with_parked_and_idle_subscribers() -> None:
    """publish returns at once inside trio whether subscribers are parked or never read."""
    bus = Bus()
    got: list[Event] = []
    async with bus.subscribe(buffer=4) as idle, bus.subscribe(buffer=4) as parked:
        async with trio.open_nursery() as nursery:

            async def read_one() -> None:
                got.append(await parked.receive())

            nursery.start_soon(read_one)
            await trio.testing.wait_all_tasks_blocked()
            for i in range(1_000):
                bus.publish(connecting(i))
        assert idle.statistics().dropped_total == 996
        # The parked reader only ran after the loop: its first event is the drop notice.
        assert got == [BusDropped(count=996, ts=got[0].ts)]
        assert attempts(parked.drain()) == [996, 997, 998, 999]


# --- cancellation -----------------------------------------------------------------------


async def test_waiting_subscriber_can_be_cancelled(autojump_clock: trio.testing.MockClock) -> None:
    """A reader parked waiting is cancellable and loses no later event."""
    bus = Bus()
    async with bus.subscribe() as sub:
        with trio.move_on_after(10) as scope:
            await sub.receive()
        assert scope.cancelled_caught
        assert not sub.statistics().waiting
        bus.publish(connecting(1))
        assert attempts([await sub.receive()]) == [1]


async def test_cancelled_read_keeps_the_event() -> None:
    """A read cancelled while an event is buffered raises Cancelled and leaves it buffered."""
    bus = Bus()
    async with bus.subscribe() as sub:
        bus.publish(connecting(1))
        with trio.CancelScope() as scope:
            scope.cancel()
            await sub.receive()
            pytest.fail("receive should have raised Cancelled")
        assert sub.statistics().buffered == 1
        assert attempts([await sub.receive()]) == [1]


async def test_busy_subscriber_yields_to_the_scheduler() -> None:
    """A reader that always has events buffered still lets other tasks run regularly."""
    bus = Bus()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    async with bus.subscribe(buffer=1000) as sub, trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        for i in range(640):
            bus.publish(connecting(i))
        for _ in range(640):
            await sub.receive()
        nursery.cancel_scope.cancel()
    # One tick per yield, less the ticker's start-up and its final cancelled checkpoint.
    assert ticks >= 640 // 64 - 2


async def test_the_bus_actor_fans_a_flood_out_in_batches_and_keeps_running() -> None:
    """Thousands of events published at once: the actor fans them out a batch at a time,
    letting other tasks run in between, delivers all in order, and is still running for
    the events that come after."""
    flood = 2000
    inbox_seen: list[int] = []
    async with open_bus(mailbox=4 * flood) as bus, bus.subscribe(buffer=4 * flood) as sub:

        async def ticker() -> None:
            while True:
                inbox_seen.append(bus.statistics().queued)
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            for i in range(flood):
                bus.publish(connecting(i))
            nursery.start_soon(ticker)
            received = [(await sub.receive()).attempt for _ in range(flood)]  # type: ignore[attr-defined]
            nursery.cancel_scope.cancel()
        assert received == list(range(flood))
        # Other tasks ran while part of the flood was still waiting in the inbox.
        assert any(0 < queued < flood for queued in inbox_seen), inbox_seen[:20]
        assert bus.statistics().running and bus.statistics().incarnations == 1
        bus.publish(connecting(-1))
        with trio.fail_after(5):
            assert (await sub.receive()).attempt == -1  # type: ignore[attr-defined]


async def test_second_concurrent_reader_is_refused() -> None:
    """Only one task at a time may wait on a subscription."""
    bus = Bus()
    async with bus.subscribe() as sub, trio.open_nursery() as nursery:
        nursery.start_soon(sub.receive)
        await trio.testing.wait_all_tasks_blocked()
        only = "^another task is already reading this subscription$"
        with pytest.raises(trio.BusyResourceError, match=only):
            await sub.receive()
        bus.publish(connecting(1))


# --- closing and unsubscribing ----------------------------------------------------------


async def test_close_ends_iteration_after_buffered_events() -> None:
    """Closing the bus lets readers finish what is buffered, then ends their iteration."""
    bus = Bus()
    got: list[Event] = []
    async with bus.subscribe() as sub:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect, sub, got)
            await trio.testing.wait_all_tasks_blocked()
            bus.publish(connecting(1))
            bus.publish(connecting(2))
            bus.close()
        assert attempts(got) == [1, 2]
        with pytest.raises(trio.EndOfChannel):
            await sub.receive()
        with pytest.raises(trio.EndOfChannel):
            sub.receive_nowait()


async def test_close_wakes_parked_readers() -> None:
    """A reader parked waiting when the bus closes ends its iteration."""
    bus = Bus()
    got: list[Event] = []
    async with bus.subscribe() as sub, trio.open_nursery() as nursery:
        nursery.start_soon(collect, sub, got)
        await trio.testing.wait_all_tasks_blocked()
        bus.close()
    assert got == []


async def test_closed_bus_refuses_subscribers_and_ignores_publishes() -> None:
    """Subscribing to a closed bus fails clearly; publishing to it does nothing."""
    bus = Bus()
    with bus:
        pass
    assert bus.closed
    with pytest.raises(trio.ClosedResourceError, match="closed"):
        bus.subscribe()
    bus.publish(connecting(1))
    bus.notify("mcp.local.shutdown", server="fs")
    assert bus.statistics() == BusStatistics(subscribers=0, published=0, per_kind={}, closed=True)
    bus.close()  # idempotent


async def test_leaving_the_context_unsubscribes() -> None:
    """After its context exits a subscription gets nothing more and cannot be read."""
    bus = Bus()
    async with bus.subscribe() as sub:
        assert bus.statistics().subscribers == 1
        bus.publish(connecting(1))
    assert bus.statistics().subscribers == 0
    bus.publish(connecting(2))
    assert sub.statistics().buffered == 0
    with pytest.raises(trio.ClosedResourceError):
        await sub.receive()
    with pytest.raises(trio.ClosedResourceError):
        sub.drain()


async def test_leaving_the_context_wakes_a_parked_reader() -> None:
    """A reader parked on a subscription whose context is left gets ClosedResourceError."""
    bus = Bus()
    sub = bus.subscribe()
    with pytest.RaisesGroup(trio.ClosedResourceError):
        async with trio.open_nursery() as nursery:
            async with sub:
                nursery.start_soon(sub.receive)
                await trio.testing.wait_all_tasks_blocked()


async def test_subscription_must_be_entered_once() -> None:
    """Reading an unentered subscription or entering it twice is a RuntimeError."""
    bus = Bus()
    sub = bus.subscribe()
    with pytest.raises(RuntimeError, match="async with"):
        await sub.receive()
    with sub:
        pass
    with pytest.raises(RuntimeError, match="once"):
        with sub:
            pass


def test_receive_nowait_would_block() -> None:
    """receive_nowait raises WouldBlock when nothing is buffered."""
    bus = Bus()
    with bus.subscribe() as sub:
        with pytest.raises(trio.WouldBlock):
            sub.receive_nowait()
        bus.publish(connecting(1))
        assert attempts([sub.receive_nowait()]) == [1]


# --- statistics and load ----------------------------------------------------------------


def test_statistics() -> None:
    """statistics() reports subscribers, published counts per kind and buffer state."""
    bus = Bus()
    with bus.subscribe("mcp.*", buffer=3) as sub:
        bus.publish(connecting(1))
        bus.publish(connecting(2))
        bus.publish(ToolsRegistered(server="s", names=[]))
        sub.receive_nowait()
        assert sub.statistics() == SubscriptionStatistics(
            patterns=("mcp.*",),
            buffer_size=3,
            buffered=1,
            dropped_total=0,
            delivered=1,
            waiting=False,
        )
        stats = bus.statistics()
        assert stats.subscribers == 1
        assert stats.published == 3
        assert stats.per_kind == {"mcp.connecting": 2, "tools.registered": 1}
        assert not stats.closed


async def test_ten_thousand_events_to_ten_subscribers() -> None:
    """A publisher loop of 10,000 events reaches all 10 concurrent subscribers, in order."""
    bus = Bus()
    outs: list[list[Event]] = [[] for _ in range(10)]

    async def reader(out: list[Event], task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with bus.subscribe(buffer=10_000) as sub:
            task_status.started()
            await collect(sub, out)

    async with trio.open_nursery() as nursery:
        for out in outs:
            await nursery.start(reader, out)
        for i in range(10_000):
            bus.publish(connecting(i))
            if i % 100 == 0:
                await trio.lowlevel.checkpoint()
        bus.close()

    for out in outs:
        assert attempts(out) == list(range(10_000))
    assert bus.statistics().published == 10_000


# --- the bus actor -------------------------------------------------------------------------


def test_drain_counts_what_it_delivers() -> None:
    """drain() hands events to the reader: they count in statistics().delivered."""
    bus = Bus()
    with bus.subscribe() as sub:
        for i in range(3):
            bus.publish(connecting(i))
        assert attempts(sub.drain()) == [0, 1, 2]
        assert sub.statistics().delivered == 3


async def test_the_actor_fans_out_in_publish_order() -> None:
    """With the actor running, publish only queues; subscribers get every event, in order."""
    async with open_bus() as bus:
        assert bus.statistics().running
        async with bus.subscribe(buffer=5000) as sub:
            for i in range(3000):
                bus.publish(connecting(i))
            assert bus.statistics().queued > 0  # not fanned out in the publisher's task
            got = [await sub.receive() for _ in range(3000)]
        assert attempts(got) == list(range(3000))
    assert bus.closed and not bus.statistics().running


async def test_a_full_mailbox_drops_its_oldest_and_tells_every_subscriber() -> None:
    """Publishing never blocks: a full mailbox loses its oldest event, and each subscriber
    hears how many were lost before the events that were kept."""
    async with open_bus(mailbox=4) as bus:
        async with bus.subscribe("mcp.*") as a, bus.subscribe("*") as b:
            for i in range(6):
                bus.publish(connecting(i))  # the actor has not run yet: 2 pushed out
            for sub in (a, b):
                first = await sub.receive()
                assert isinstance(first, BusDropped) and first.count == 2
                assert attempts([await sub.receive() for _ in range(4)]) == [2, 3, 4, 5]
        assert bus.statistics().lost == 2


async def test_closing_fans_out_what_is_still_queued() -> None:
    """Events published just before the bus closes still reach subscribers."""
    async with open_bus() as bus:
        sub = bus.subscribe()
        sub.__enter__()
        bus.publish(connecting(7))
    assert attempts(sub.drain()) == [7]
    sub.__exit__(None, None, None)


async def test_a_crashing_fan_out_restarts_the_actor_and_subscriptions_survive() -> None:
    """A fan-out that raises crashes the bus actor; the tree starts a new one, the event
    it was fanning out is lost (and said so), and subscribers go on receiving."""
    from supervisor.actors import ChildSpec, open_tree

    bus = Bus()
    fan_out = bus._fan_out
    broken = {"times": 1}

    def flaky_fan_out(event: Event) -> None:
        if isinstance(event, Connecting) and event.attempt == 1 and broken["times"]:
            broken["times"] -= 1
            raise RuntimeError("a bug in fan-out")
        fan_out(event)

    bus._fan_out = flaky_fan_out  # type: ignore[method-assign]
    async with bus.subscribe() as sub:
        async with open_tree([ChildSpec("bus", bus.incarnation)]):
            for i in range(3):
                bus.publish(connecting(i))
            got = [await sub.receive() for _ in range(3)]
            assert attempts(got) == [0, 2]
            assert [e.count for e in got if isinstance(e, BusDropped)] == [1]
            assert bus.statistics().incarnations == 2
            bus.publish(connecting(3))
            assert attempts([await sub.receive()]) == [3]


def test_receive_nowait_counts_each_event_delivered() -> None:
    """Every event handed out by receive_nowait() counts in statistics().delivered."""
    bus = Bus()
    with bus.subscribe() as sub:
        for i in range(3):
            bus.publish(connecting(i))
        sub.receive_nowait()
        sub.receive_nowait()
        assert sub.statistics().delivered == 2


async def test_with_the_actor_a_new_subscription_sees_only_later_events() -> None:
    """Events still queued in the mailbox when a subscription is entered go to the
    subscriptions that existed when they were published, not to the new one."""
    async with open_bus() as bus:
        async with bus.subscribe() as early:
            bus.publish(connecting(1))
            assert bus.statistics().queued == 1
            async with bus.subscribe() as late:
                bus.publish(connecting(2))
                assert attempts([await late.receive()]) == [2]
            assert attempts([await early.receive(), await early.receive()]) == [1, 2]


async def test_iterating_past_the_yield_boundary_counts_every_event() -> None:
    """delivered counts each event read, on the fast path and the slow one alike."""
    bus = Bus()
    async with bus.subscribe(buffer=500) as sub:
        for i in range(200):
            bus.publish(connecting(i))
        got = [await sub.receive() for _ in range(200)]
        assert attempts(got) == list(range(200))
        assert sub.statistics().delivered == 200


async def test_misuse_is_said_plainly() -> None:
    """A closed bus, an unentered or left subscription each say what went wrong."""
    bus = Bus()
    sub = bus.subscribe()
    with pytest.raises(RuntimeError, match="^subscription not entered: use `async with"):
        sub.receive_nowait()
    with sub:
        pass
    left = "^this subscription's context has been left$"
    with pytest.raises(trio.ClosedResourceError, match=left):
        sub.receive_nowait()
    with pytest.raises(RuntimeError, match="^a subscription can be entered only once$"):
        sub.__enter__()
    bus.close()
    closed = "^cannot subscribe: the event bus is closed$"
    with pytest.raises(trio.ClosedResourceError, match=closed):
        bus.subscribe()


# --- the tree's notice hook --------------------------------------------------------------


class _Greeter(Actor):
    async def handle(self, message: object) -> str:
        if message == "crash":
            raise RuntimeError("boom")
        return f"hello, {message}"


@pytest.mark.parametrize("hook", ["notify", "decided"])
async def test_bus_notify_and_decided_are_each_a_trees_notice_hook(
    hook: str, autojump_clock: trio.testing.MockClock
) -> None:
    """`open_tree(notify=bus.notify)`, as the README writes it, publishes what the tree
    decided exactly as `notify=bus.decided` does: the restart, not the scheduled one, and
    nothing is logged as a failed hook."""
    bus = Bus()
    greeter = actor_spec("greeter", _Greeter, backoff=Backoff(initial=0.1))
    with structlog.testing.capture_logs() as logs, bus.subscribe("supervisor.*") as events:
        async with open_tree([greeter], notify=getattr(bus, hook)):
            greeter.address.cast("crash")
            assert await greeter.address.call("again", timeout=5) == "hello, again"
        got = events.drain()
    assert [(e.kind, e.child, e.restarts) for e in got] == [
        ("supervisor.child.restarted", "greeter", 1)
    ]
    assert [e for e in logs if e["log_level"] == "error"] == []


def test_bus_notify_refuses_what_is_neither_a_kind_nor_a_decision() -> None:
    """Anything but a kind with its fields, or a decision alone, is a TypeError saying so."""
    bus = Bus()
    with pytest.raises(TypeError, match="an event kind and its fields, or a supervision tree"):
        bus.notify(42)  # type: ignore[arg-type]
