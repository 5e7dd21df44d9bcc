"""Actors and their addresses: call, cast, deadlines, concurrency, restarts."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from supervisor.actors import (
    Actor,
    ActorStopped,
    ActorUnavailable,
    Address,
    Backoff,
    CallTimeout,
    CastAddress,
    GiveUp,
    Intensity,
    MailboxFull,
    RequestAborted,
    Restart,
    actor_spec,
    before_effect,
    open_tree,
)
from supervisor.actors._mailbox import AddressState

from .probes import Boom, Journal, Probe, until


def spec_for(journal: Journal, id: str = "p", **kw: object):  # noqa: ANN201
    concurrency = kw.pop("concurrency", 1)
    return actor_spec(id, lambda: Probe(id, journal, concurrency=concurrency), **kw)


async def test_call_returns_the_reply(journal: Journal) -> None:
    """A call gets the handler's return value."""
    spec = spec_for(journal)
    async with open_tree([spec]):
        assert await spec.address.call("hello") == "hello"
        assert await spec.address.call("whoami", timeout=30) == ("p", 1)


async def test_handler_error_reaches_caller_and_actor_carries_on(journal: Journal) -> None:
    """An exception from a call's handler is raised in the caller; the actor keeps serving."""
    spec = spec_for(journal)
    async with open_tree([spec]) as sup:
        with pytest.raises(Boom, match="handler error"):
            await spec.address.call("raise")
        assert await spec.address.call("whoami") == ("p", 1)
        assert sup.statistics().restarts == 0


async def test_crash_on_error_crashes_the_incarnation(journal: Journal) -> None:
    """With crash_on_error the caller gets the error and the incarnation restarts."""

    class Strict(Probe):
        crash_on_error = True

    spec = actor_spec("s", lambda: Strict("s", journal), backoff=Backoff.none())
    async with open_tree([spec]):
        with pytest.raises(Boom):
            await spec.address.call("raise")
        assert await spec.address.call("whoami") == ("s", 2)


async def test_failed_cast_crashes_the_incarnation(journal: Journal) -> None:
    """A cast whose handler raises has nobody to tell: the incarnation crashes."""
    spec = spec_for(journal, backoff=Backoff.none())
    async with open_tree([spec]):
        spec.address.cast("crash")
        assert await spec.address.call("whoami") == ("p", 2)


async def test_deadline_raises_timeout_and_cancels_handler(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A passed deadline raises CallTimeout at the deadline; the handler is cancelled."""
    spec = spec_for(journal)
    async with open_tree([spec]):
        start = trio.current_time()
        with pytest.raises(CallTimeout) as info:
            await spec.address.call("hang", timeout=2.5)
        assert trio.current_time() - start == pytest.approx(2.5)
        assert info.value.actor == "p" and info.value.timeout == 2.5
        assert "did not reply within 2.5 s" in str(info.value)
        await until(lambda: journal.of("handler-cancelled") == ["p"])
        # The sequential actor is free again: nothing leaked holds it.
        assert await spec.address.call("whoami", timeout=1) == ("p", 1)


async def test_timed_out_queued_call_is_never_handled(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A call that timed out while queued is skipped by the actor, not handled late."""
    seen: list[object] = []

    class Recorder(Probe):
        async def handle(self, message: object) -> object:
            seen.append(message)
            return await super().handle(message)

    spec = actor_spec("r", lambda: Recorder("r", journal))
    async with open_tree([spec]), trio.open_nursery() as nursery:
        nursery.start_soon(spec.address.call, ("sleep", 5))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(CallTimeout):
            await spec.address.call("late", timeout=1)
        await until(lambda: len(seen) == 1)
        assert await spec.address.call("after") == "after"
        assert seen == [("sleep", 5), "after"]


async def test_cancelled_caller_abandons_its_call(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A caller cancelled by its own scope cancels the handler of its timed call."""
    spec = spec_for(journal)
    async with open_tree([spec]):
        with trio.move_on_after(1):
            await spec.address.call("hang", timeout=100)
        await until(lambda: journal.of("handler-cancelled") == ["p"])


async def test_concurrent_actor_bounds_requests_in_flight(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Up to max_concurrency requests run at once; the rest wait in the mailbox."""
    spec = spec_for(journal, concurrency=3)
    finished: list[float] = []

    async def one() -> None:
        await spec.address.call(("sleep", 10))
        finished.append(trio.current_time())

    async with open_tree([spec]):
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(7):
                nursery.start_soon(one)
    # 7 requests of 10 s, 3 at a time: three waves.
    assert sorted(round(t - start) for t in finished) == [10, 10, 10, 20, 20, 20, 30]


async def test_one_timeout_does_not_disturb_others_in_flight(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """On a concurrent actor a request that times out leaves the others in flight alone."""
    spec = spec_for(journal, concurrency=64)
    results: list[object] = []

    async def ok() -> None:
        results.append(await spec.address.call(("sleep", 5), timeout=30))

    async with open_tree([spec]):
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(ok)
            with pytest.raises(CallTimeout):
                await spec.address.call("hang", timeout=1)
    assert results == [("p", 1)] * 50


async def test_queued_messages_survive_a_restart(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Calls sent while the actor waits to restart are served by the next incarnation."""
    spec = spec_for(journal, backoff=Backoff(initial=5))
    replies: list[object] = []

    async def ask(i: int) -> None:
        replies.append((i, await spec.address.call("whoami", timeout=30)))

    async with open_tree([spec]) as sup:
        spec.address.cast("crash")
        await spec.address.call("whoami")  # the first restart is at once
        spec.address.cast("crash")  # the second in a row waits the backoff
        await until(lambda: sup.statistics().children[0].state.value == "restarting")
        crashed_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(ask, i)
            await trio.testing.wait_all_tasks_blocked()
            assert spec.address.statistics().queued == 3
        assert trio.current_time() - crashed_at == pytest.approx(5, abs=0.01)
    assert sorted(replies) == [(0, ("p", 3)), (1, ("p", 3)), (2, ("p", 3))]


async def test_in_flight_requests_fail_when_the_incarnation_crashes(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A request being handled when its incarnation crashes fails with RequestAborted."""
    spec = spec_for(journal, concurrency=4, backoff=Backoff.none())
    async with open_tree([spec]):
        async with trio.open_nursery() as nursery:
            errors: list[BaseException] = []

            async def slow() -> None:
                try:
                    await spec.address.call(("sleep", 100))
                except RequestAborted as exc:
                    errors.append(exc)

            nursery.start_soon(slow)
            await trio.testing.wait_all_tasks_blocked()
            spec.address.cast("crash")
        assert len(errors) == 1
        assert "may have taken effect" in str(errors[0])
        assert isinstance(errors[0].__cause__, Boom)
        assert await spec.address.call("whoami") == ("p", 2)


async def test_a_busy_mailbox_does_not_starve_other_tasks() -> None:
    """A sequential actor with a full mailbox of casts still lets other tasks run between
    its messages (it yields to the scheduler for each one)."""
    handled: list[int] = []
    ticks_seen: list[int] = []
    ticks = 0

    class Counter(Actor):
        async def handle(self, message: object) -> object:
            assert isinstance(message, int)
            handled.append(message)
            ticks_seen.append(ticks)
            return None  # never awaits: only the mailbox loop can yield

    spec = actor_spec("busy", Counter, mailbox=1000)
    for i in range(500):
        spec.address.cast(i)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with open_tree([spec]), trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await until(lambda: len(handled) == 500)
        nursery.cancel_scope.cancel()
    assert handled == list(range(500))
    # The ticker ran throughout the burst, not only before or after it.
    assert ticks_seen[-1] - ticks_seen[0] >= 400


async def test_cast_to_full_mailbox_raises(journal: Journal) -> None:
    """cast never blocks: a full mailbox raises MailboxFull and keeps what it had."""
    address = Address("x", capacity=2)
    address.cast(1)
    address.cast(2)
    with pytest.raises(MailboxFull, match="'x' is full"):
        address.cast(3)
    assert address.statistics().queued == 2


async def test_full_mailbox_applies_backpressure_to_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call waits for room in a full mailbox, within its own deadline."""
    address = Address("x", capacity=1)
    address.cast("filler")
    with pytest.raises(CallTimeout):
        await address.call("more", timeout=1)


@pytest.mark.parametrize("capacity", [0, -1, 1.5])
def test_address_rejects_bad_capacity(capacity: float) -> None:
    """A mailbox needs room for at least one message."""
    with pytest.raises(ValueError, match="capacity"):
        Address("x", capacity=capacity)


async def test_unbounded_mailbox_is_allowed() -> None:
    """capacity=inf is an unbounded mailbox."""
    address = Address("x", capacity=math.inf)
    for i in range(1000):
        address.cast(i)
    assert address.statistics().queued == 1000


async def test_unavailable_actor_fails_fast_with_last_error(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A given-up actor fails calls at once, naming the attempts and the last error."""
    spec = spec_for(
        journal,
        backoff=Backoff.none(),
        give_up=GiveUp.MARK_UNAVAILABLE,
        intensity=Intensity(max_restarts=2, within_seconds=60),
    )
    async with open_tree([spec]):
        for _ in range(3):
            spec.address.cast("crash")
            await until(
                lambda: (
                    spec.address.state is not AddressState.OPEN
                    or spec.address.statistics().queued == 0
                )
            )
            await trio.testing.wait_all_tasks_blocked()
        assert spec.address.state is AddressState.UNAVAILABLE
        before = trio.current_time()
        with pytest.raises(ActorUnavailable) as info:
            await spec.address.call("whoami", timeout=10)
        assert trio.current_time() == before
        assert info.value.attempts == 2
        assert "after 2 restart attempts" in str(info.value)
        assert "Boom: p crashed" in str(info.value)


async def test_calls_after_the_tree_closed_fail_fast(journal: Journal) -> None:
    """Once the tree is gone its addresses are stopped: calls fail, never hang."""
    spec = spec_for(journal)
    async with open_tree([spec]):
        pass
    with pytest.raises(ActorStopped, match="'p' is stopped"):
        await spec.address.call("whoami")
    with pytest.raises(ActorStopped):
        spec.address.cast("x")


async def test_calls_queued_at_close_fail(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Calls still queued when the actor is stopped for good fail instead of hanging."""
    spec = spec_for(journal, restart=Restart.TEMPORARY)
    outcome: list[BaseException] = []

    async def ask(message: str) -> None:
        try:
            await spec.address.call(message)
        except (ActorStopped, RequestAborted) as exc:
            outcome.append(exc)

    async with open_tree([spec]) as sup, trio.open_nursery() as nursery:
        nursery.start_soon(ask, "hang")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "whoami")
        await trio.testing.wait_all_tasks_blocked()
        assert spec.address.statistics().queued == 1
        await sup.terminate_child("p")
    # The one in flight was aborted (it may have taken effect); the queued one stopped.
    assert sorted(type(e).__name__ for e in outcome) == ["ActorStopped", "RequestAborted"]


class Ticker(Actor):
    """Background tasks live as long as the incarnation; one that raises crashes it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def init(self) -> None:
        self.nursery.start_soon(self.tick)

    async def tick(self) -> None:
        await trio.sleep(1)
        self.log.append("tick")
        raise Boom("background failure")

    async def handle(self, message: object) -> object:
        return message


async def test_background_task_failure_crashes_the_incarnation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A background task that raises crashes its incarnation, which then restarts."""
    log: list[str] = []
    spec = actor_spec(
        "t",
        lambda: Ticker(log),
        backoff=Backoff.none(),
        intensity=Intensity(max_restarts=100, within_seconds=1),
    )
    async with open_tree([spec]) as sup:
        await until(lambda: sup.statistics().children[0].restarts >= 2)
        assert sup.statistics().children[0].last_exit == "Boom: background failure"


class Careful(Probe):
    """Waits (before any effect) for a gate to open, then answers with its incarnation."""

    gate: trio.Event

    async def handle(self, message: object) -> object:
        if isinstance(message, tuple) and message[0] == "careful":
            with before_effect():
                await Careful.gate.wait()
            if message[1] == "then-hang":
                await trio.sleep_forever()
            return (message[1], self.number)
        return await super().handle(message)


async def test_requests_before_their_effect_survive_a_crash(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A request still inside before_effect() when its incarnation dies is served again."""
    Careful.gate = trio.Event()
    spec = actor_spec("c", lambda: Careful("c", journal, concurrency=8), backoff=Backoff(initial=1))
    results: list[object] = []

    async def ask(tag: str) -> None:
        results.append(await spec.address.call(("careful", tag), timeout=60))

    async with open_tree([spec]):
        spec.address.cast("crash")
        await spec.address.call("whoami")  # the first restart is at once; the next waits
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "second")
            await trio.testing.wait_all_tasks_blocked()
            spec.address.cast("crash")
            await trio.testing.wait_all_tasks_blocked()
            assert spec.address.statistics().queued == 2
            assert [e.message for e in spec.address._requeued] == [
                ("careful", "first"),
                ("careful", "second"),  # given back in order
            ]
            Careful.gate.set()
    assert sorted(results) == [("first", 3), ("second", 3)]


async def test_requests_past_their_effect_are_aborted(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Once a handler left before_effect(), a crash fails its request: it may have acted."""
    Careful.gate = trio.Event()
    Careful.gate.set()
    spec = actor_spec("c", lambda: Careful("c", journal, concurrency=8), backoff=Backoff.none())
    async with open_tree([spec]), trio.open_nursery() as nursery:

        async def ask() -> None:
            with pytest.raises(RequestAborted):
                await spec.address.call(("careful", "then-hang"), timeout=60)

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        spec.address.cast("crash")


async def test_given_back_requests_fail_when_the_actor_stops_for_good(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Requests given back by a dead incarnation fail fast once the actor is stopped."""
    Careful.gate = trio.Event()
    spec = actor_spec(
        "c",
        lambda: Careful("c", journal, concurrency=8),
        restart=Restart.TRANSIENT,
        backoff=Backoff(initial=10),
    )
    async with open_tree([spec]) as sup, trio.open_nursery() as nursery:

        async def ask() -> None:
            with pytest.raises(ActorStopped):
                await spec.address.call(("careful", "x"), timeout=60)

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        spec.address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        await sup.terminate_child("c")


# -- cast-only addresses ------------------------------------------------------------------


def taken(address: CastAddress) -> list[object]:
    out = []
    while address.waiting:
        out.append(address.take())
    return out


def test_a_full_cast_only_mailbox_drops_its_oldest() -> None:
    """Without a key, a cast into a full cast-only mailbox pushes the oldest message out,
    and counts it."""
    address = CastAddress("c", capacity=3)
    for i in range(5):
        address.cast(i)
    stats = address.statistics()
    assert (stats.queued, stats.dropped, stats.casts) == (3, 2, 5)
    assert taken(address) == [2, 3, 4]


def test_a_keyed_cast_only_mailbox_keeps_the_latest_message_per_key() -> None:
    """With a key, a newer message replaces the one waiting under its key and goes to the
    back; a full mailbox of distinct keys drops its oldest."""
    address = CastAddress("c", capacity=2, key=lambda message: message[0])  # type: ignore[index]
    address.cast(("a", 1))
    address.cast(("b", 1))
    address.cast(("a", 2))
    assert address.statistics().dropped == 0
    assert taken(address) == [("b", 1), ("a", 2)]
    for name in "xyz":
        address.cast((name, 0))
    assert address.statistics().dropped == 1
    assert taken(address) == [("y", 0), ("z", 0)]


async def test_a_cast_only_address_refuses_calls() -> None:
    """Nobody would reply: call() on a cast-only address is a TypeError."""
    with pytest.raises(TypeError, match="^actor 'c' takes casts only: use cast\\(\\)$"):
        await CastAddress("c").call("hello")


def test_closing_a_cast_only_address_counts_what_was_waiting_as_dropped() -> None:
    """Nobody waits for a cast to fail: what waits when the address closes is dropped,
    counted, and later casts raise the closed address's error."""
    address = CastAddress("c")
    address.cast(1)
    address.cast(2)
    address.close_stopped()
    assert (address.statistics().queued, address.statistics().dropped) == (0, 2)
    with pytest.raises(ActorStopped):
        address.cast(3)


class Collector(Actor):
    """Records each message it handles and each call of idle(); crashes on "boom"."""

    def __init__(self, log: list[object]) -> None:
        self.log = log

    async def handle(self, message: object) -> None:
        if message == "boom":
            raise Boom("a bug in handling")
        self.log.append(message)

    async def idle(self) -> None:
        self.log.append("idle")


async def test_an_actor_of_a_cast_only_address_is_idle_once_per_burst() -> None:
    """Messages are handled in cast order; idle() runs when the incarnation starts and
    each time it has caught up with a burst, not once per message."""
    log: list[object] = []
    address = CastAddress("c")
    spec = actor_spec("c", lambda: Collector(log), address=address)
    async with open_tree([spec]):
        await trio.testing.wait_all_tasks_blocked()
        for i in range(3):
            address.cast(i)
        await trio.testing.wait_all_tasks_blocked()
        address.cast(3)
        await trio.testing.wait_all_tasks_blocked()
    assert log == ["idle", 0, 1, 2, "idle", 3, "idle"]


async def test_a_flood_of_casts_is_handled_in_batches() -> None:
    """A long burst is handled a batch at a time: idle() and other tasks run in between."""
    log: list[object] = []
    address = CastAddress("c", capacity=math.inf)
    spec = actor_spec("c", lambda: Collector(log), address=address)
    async with open_tree([spec]):
        await trio.testing.wait_all_tasks_blocked()
        for i in range(1000):
            address.cast(i)
        await trio.testing.wait_all_tasks_blocked()
    assert [m for m in log if m != "idle"] == list(range(1000))
    assert log.count("idle") == 1 + -(-1000 // 256)


async def test_a_crash_loses_only_the_cast_being_handled() -> None:
    """A handler that raises crashes the incarnation; the tree starts another, which
    serves the casts still waiting."""
    log: list[object] = []
    address = CastAddress("c")
    spec = actor_spec("c", lambda: Collector(log), address=address, backoff=Backoff.none())
    async with open_tree([spec]) as sup:
        await trio.testing.wait_all_tasks_blocked()
        for message in (1, "boom", 2):
            address.cast(message)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.statistics().children[0].restarts == 1
        assert address.statistics().incarnations == 2 and address.serving
    assert [m for m in log if m != "idle"] == [1, 2]


async def test_one_incarnation_at_a_time_serves_a_cast_only_address() -> None:
    """A second incarnation on the same cast-only address refuses to start."""
    spec = actor_spec("c", lambda: Collector([]), address=CastAddress("c"))
    async with trio.open_nursery() as nursery:
        await nursery.start(spec.start().run)
        with pytest.raises(RuntimeError, match="^actor 'c' is already running"):
            await spec.start().run()
        nursery.cancel_scope.cancel()
    assert not spec.address.serving
