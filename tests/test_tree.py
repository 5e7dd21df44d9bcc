"""The supervision tree follows OTP's rules: restart types, strategies, intensity, order."""

from __future__ import annotations

import math
import random
import warnings

import msgspec
import pytest
import structlog.testing
import trio
import trio.testing

from supervisor.actors import (
    ActorStopped,
    ActorUnavailable,
    Backoff,
    ChildSpec,
    ChildState,
    GaveUp,
    GiveUp,
    Intensity,
    NoSuchChild,
    NotRestarted,
    Restart,
    Restarted,
    RestartScheduled,
    Shutdown,
    StartFailed,
    Strategy,
    SupervisorError,
    SupervisorGaveUp,
    SupervisorNotRunning,
    Tree,
    actor_spec,
    open_tree,
    supervisor_spec,
)
from supervisor.actors._decisions import Decision
from supervisor.actors._mailbox import AddressState
from supervisor.events._bus import Bus
from supervisor.events._catalog import tree_event

from .probes import Journal, Probe, deaf, until

GENEROUS = Intensity(max_restarts=100, within_seconds=1)


def spec(journal: Journal, id: str, **kw: object) -> ChildSpec:
    kw.setdefault("backoff", Backoff.none())
    return actor_spec(id, lambda: Probe(id, journal), **kw)  # type: ignore[arg-type]


class Notices:
    """Collects what the tree reports through its notify hook, as the bus publishes it
    (``supervisor.*`` events), and every decision as it came."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, object]]] = []
        self.decisions: list[Decision] = []

    def __call__(self, decision: Decision) -> None:
        self.decisions.append(decision)
        event = tree_event(decision)
        if event is not None:
            fields = msgspec.structs.asdict(event)
            del fields["ts"]
            self.items.append((event.kind, fields))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.items]

    def of(self, kind: str) -> list[dict[str, object]]:
        return [f for k, f in self.items if k == kind]


# -- restart type x exit reason x strategy ------------------------------------------------

# Written out by hand from OTP's rules, not computed by the code under test.
RESTARTS = {
    (Restart.PERMANENT, "crash"): True,
    (Restart.PERMANENT, "normal"): True,
    (Restart.PERMANENT, "shutdown"): True,
    (Restart.TRANSIENT, "crash"): True,
    (Restart.TRANSIENT, "normal"): False,
    (Restart.TRANSIENT, "shutdown"): False,
    (Restart.TEMPORARY, "crash"): False,
    (Restart.TEMPORARY, "normal"): False,
    (Restart.TEMPORARY, "shutdown"): False,
}
VICTIMS = {
    Strategy.ONE_FOR_ONE: ["b"],
    Strategy.ONE_FOR_ALL: ["a", "b", "c"],
    Strategy.REST_FOR_ONE: ["b", "c"],
}


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.value)
@pytest.mark.parametrize("exit", ["crash", "normal", "shutdown"])
@pytest.mark.parametrize("restart", list(Restart), ids=lambda r: r.value)
async def test_restart_matrix(
    journal: Journal, restart: Restart, exit: str, strategy: Strategy
) -> None:
    """The exiting child's restart type and reason decide; the strategy picks the siblings."""
    notices = Notices()
    children = [spec(journal, "a"), spec(journal, "b", restart=restart), spec(journal, "c")]
    async with open_tree(children, strategy=strategy, intensity=GENEROUS, notify=notices) as sup:
        journal.clear()
        children[1].address.cast(exit)
        await trio.testing.wait_all_tasks_blocked()
        events = [(what, who) for what, who, _ in journal.entries]
        states = {id: state for id, state, _ in sup.which_children()}
        if RESTARTS[(restart, exit)]:
            victims = VICTIMS[strategy]
            others = [v for v in victims if v != "b"]
            assert events == (
                [("stop", "b")]
                + [("stop", v) for v in reversed(others)]
                + [("start", v) for v in victims]
            )
            assert [n["child"] for n in notices.of("supervisor.child.restarted")] == victims
            restarted = notices.of("supervisor.child.restarted")
            assert all(n["strategy"] == strategy.value for n in restarted)
            assert set(states.values()) == {ChildState.RUNNING}
            assert sup.statistics().restarts == 1
            assert await children[1].address.call("whoami") == ("b", 2)
        else:
            assert events == [("stop", "b")]
            assert notices.items == []
            if restart is Restart.TEMPORARY:
                assert "b" not in states  # OTP forgets temporary children that exit
            else:
                assert states["b"] is ChildState.STOPPED
            assert states["a"] is states["c"] is ChildState.RUNNING
            with pytest.raises(ActorStopped):
                await children[1].address.call("whoami")


async def test_one_for_all_removes_temporary_siblings(journal: Journal) -> None:
    """Temporary siblings stopped for a one_for_all restart are not restarted."""
    children = [spec(journal, "a", restart=Restart.TEMPORARY), spec(journal, "b")]
    async with open_tree(children, strategy=Strategy.ONE_FOR_ALL, intensity=GENEROUS) as sup:
        children[1].address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        assert [id for id, _, _ in sup.which_children()] == ["b"]
        assert journal.of("start") == ["a", "b", "b"]


# -- order -------------------------------------------------------------------------------


async def test_start_in_order_stop_in_reverse_where_order_matters(journal: Journal) -> None:
    """Children start in the given order; with ordered_shutdown they stop in reverse."""
    async with open_tree([spec(journal, x) for x in "abcd"], ordered_shutdown=True):
        assert journal.of("start") == ["a", "b", "c", "d"]
    assert journal.of("stop") == ["d", "c", "b", "a"]


async def test_rest_for_one_children_stop_in_reverse_order(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Under rest_for_one order means something: each child waits for those after it."""
    children = [deaf(spec(journal, x, shutdown_timeout=2)) for x in "abc"]
    async with open_tree(children, strategy=Strategy.REST_FOR_ONE):
        pass
    assert journal.of("stop") == ["c", "b", "a"]
    assert [journal.times("stop", x)[0] for x in "cba"] == pytest.approx([2, 4, 6])


async def test_independent_children_stop_concurrently(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Under one_for_one each child stops within its own deadline, all at once: two
    children that each take their whole shutdown_timeout take it once, not twice."""
    children = [deaf(spec(journal, x, shutdown_timeout=3)) for x in "ab"]
    children.append(spec(journal, "c"))
    async with open_tree(children):
        pass
    assert sorted(journal.of("stop")) == ["a", "b", "c"]
    assert journal.times("stop", "c")[0] == pytest.approx(0)
    assert journal.times("stop", "a")[0] == journal.times("stop", "b")[0] == pytest.approx(3)


async def test_each_child_is_ready_before_the_next_starts(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A child counts as started only once it said so; the next waits for that."""

    class Slow(Probe):
        async def init(self) -> None:
            await trio.sleep(3)
            await super().init()

    children = [actor_spec("slow", lambda: Slow("slow", journal)), spec(journal, "next")]
    async with open_tree(children):
        slow, nxt = journal.times("start", "slow")[0], journal.times("start", "next")[0]
        assert slow == nxt == pytest.approx(3)


async def test_shutdown_is_graceful_then_cancelled(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A child that ignores the stop request is cancelled after its shutdown_timeout."""
    stubborn = deaf(spec(journal, "b", shutdown_timeout=3))
    async with open_tree([spec(journal, "a"), stubborn, spec(journal, "c")], ordered_shutdown=True):
        pass
    assert journal.of("stop") == ["c", "b", "a"]
    c_stop, b_stop = journal.times("stop", "c")[0], journal.times("stop", "b")[0]
    assert b_stop - c_stop == pytest.approx(3)
    assert journal.times("stop", "a")[0] == pytest.approx(b_stop)


async def test_cancelling_the_root_stops_everything_in_order(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancelling the root still stops every child, in reverse order, gracefully first."""
    stubborn = deaf(spec(journal, "b", shutdown_timeout=2))
    inner = supervisor_spec(
        "inner", [spec(journal, "x"), spec(journal, "y")], ordered_shutdown=True
    )
    children = [spec(journal, "a"), stubborn, inner, spec(journal, "c")]
    with trio.move_on_after(10) as scope:
        async with open_tree(children, ordered_shutdown=True):
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert journal.of("start") == ["a", "b", "x", "y", "c"]
    assert journal.of("stop") == ["c", "y", "x", "b", "a"]
    # The stubborn child got its full shutdown_timeout before being cancelled.
    assert journal.times("stop", "b")[0] - journal.times("stop", "x")[0] == pytest.approx(2)


async def test_cancelling_a_hung_start_is_possible(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A child stuck before it is ready can be cancelled from outside."""

    class Hung(Probe):
        async def init(self) -> None:
            await trio.sleep_forever()

    with trio.move_on_after(5) as scope:
        async with open_tree([spec(journal, "a"), actor_spec("h", lambda: Hung("h", journal))]):
            pytest.fail("the tree must not report started")
    assert scope.cancelled_caught
    assert journal.of("stop") == ["a"]


#: The tree is cancelled at the instant a child says it has started: nothing in between
#: (the window a signal hit while a command's servers connected). Run apart: before the
#: fix, the child was shielded where nobody would stop it, and the run never ended.
CANCELLED_AS_IT_STARTS = """
import trio, trio.testing
from supervisor.actors import Actor, actor_spec, open_tree

class Child(Actor):
    async def init(self):
        scope.cancel()  # no checkpoint after this: started() comes next

    async def handle(self, message):
        return message

async def main():
    global scope
    other = actor_spec("other", Child)
    with trio.CancelScope() as scope:
        async with open_tree([actor_spec("first", lambda: Actor()), other]):
            raise AssertionError("the tree must not report started")
    print("ended", scope.cancelled_caught)

trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
"""


def test_a_start_cancelled_as_the_child_says_it_started_ends() -> None:
    """A child that says it started after its start was cancelled is cancelled with it,
    not shielded: the tree ends instead of waiting for ever."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", CANCELLED_AS_IT_STARTS],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the tree never ended: a child started as it was cancelled was shielded")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ended", "True"]


# -- intensity ---------------------------------------------------------------------------


async def crash_and_settle(address: object, times: int = 1) -> None:
    for _ in range(times):
        address.cast("crash")  # type: ignore[attr-defined]
        await trio.testing.wait_all_tasks_blocked()


async def test_intensity_exceeded_stops_children_and_escalates(journal: Journal) -> None:
    """One restart more than max_restarts within the period: children stop, root fails."""
    notices = Notices()
    children = [spec(journal, "a"), spec(journal, "b"), spec(journal, "c")]
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_tree(
            children, intensity=Intensity(max_restarts=2, within_seconds=10), notify=notices
        ):
            await crash_and_settle(children[1].address, 3)
            pytest.fail("the root should have given up")
    assert info.value.child == "b"
    assert "exceeded the supervisor's restart intensity (2 in 10 s)" in str(info.value)
    assert info.value.restarts == 2
    assert journal.of("start") == ["a", "b", "c", "b", "b"]
    assert sorted(journal.of("stop")[-2:]) == ["a", "c"]
    assert notices.kinds()[-1] == "supervisor.escalated"
    assert notices.of("supervisor.escalated")[0]["child"] == "b"


async def test_siblings_restarted_alongside_do_not_count(journal: Journal) -> None:
    """A one_for_all restart of three children counts as one restart."""
    children = [spec(journal, "a"), spec(journal, "b"), spec(journal, "c")]
    with pytest.raises(SupervisorGaveUp):
        async with open_tree(
            children,
            strategy=Strategy.ONE_FOR_ALL,
            intensity=Intensity(max_restarts=1, within_seconds=10),
        ) as sup:
            await crash_and_settle(children[0].address)
            assert sup.statistics().restarts == 1
            assert all(c.state is ChildState.RUNNING for c in sup.statistics().children)
            await crash_and_settle(children[2].address)
            pytest.fail("the second restart should exceed the intensity")


async def test_restarts_outside_the_period_are_forgotten(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Crashes further apart than the period never add up to giving up."""
    child = spec(journal, "a")
    async with open_tree([child], intensity=Intensity(max_restarts=1, within_seconds=10)):
        for _ in range(5):
            await crash_and_settle(child.address)
            await trio.sleep(11)
        assert await child.address.call("whoami") == ("a", 6)


async def test_mark_unavailable_leaves_siblings_untouched(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A mark-unavailable child that exceeds its intensity is closed alone; siblings run on."""
    notices = Notices()
    flaky = spec(
        journal,
        "b",
        give_up=GiveUp.MARK_UNAVAILABLE,
        intensity=Intensity(max_restarts=2, within_seconds=60),
    )
    children = [spec(journal, "a"), flaky, spec(journal, "c")]
    async with open_tree(
        children, strategy=Strategy.ONE_FOR_ALL, intensity=Intensity(3, 60), notify=notices
    ) as sup:
        journal.clear()
        await crash_and_settle(flaky.address, 3)
        states = {id: state for id, state, _ in sup.which_children()}
        assert states == {
            "a": ChildState.RUNNING, "b": ChildState.UNAVAILABLE, "c": ChildState.RUNNING
        }
        # one_for_all restarted the siblings for the first two crashes, not for the give-up
        assert journal.of("start").count("a") == 2
        gave_up = notices.of("supervisor.child.gave_up")
        assert gave_up == [
            {"supervisor": "root", "child": "b", "restarts": 2, "reason": "Boom: b crashed"}
        ]
        (decision,) = [d for d in notices.decisions if isinstance(d, GaveUp)]
        assert decision == GaveUp(
            supervisor="root", child="b", attempt=3, restarts=2,
            limit=Intensity(max_restarts=2, within_seconds=60), escalated=False, own=True,
            reason="Boom: b crashed",
        )
        assert states["b"] is ChildState.UNAVAILABLE
        assert sup.statistics().children[1].next_restart_at is None
        with pytest.raises(ActorUnavailable) as unavailable:
            await flaky.address.call("whoami")
        assert (unavailable.value.attempts, unavailable.value.last_error) == (
            2, "Boom: b crashed"
        )
        assert await children[0].address.call("whoami") == ("a", 3)
        # Two restarts counted against the supervisor's window; the give-up is not one.
        assert sup.statistics().restarts == 2
        await sup.restart_child("b")
        assert await flaky.address.call("whoami") == ("b", 4)
        assert sup.statistics().children[1].restarts == 0


async def test_every_restart_counts_against_the_supervisors_intensity(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A mark-unavailable child's restarts are counted by the supervisor too, as OTP
    counts them: with intensity 1 per 100 s the second restart makes it give up, however
    large the child's own budget."""
    notices = Notices()
    flaky = spec(
        journal, "b", give_up=GiveUp.MARK_UNAVAILABLE, intensity=Intensity(10, math.inf)
    )
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_tree(
            [spec(journal, "a"), flaky], intensity=Intensity(1, 100), notify=notices
        ):
            await crash_and_settle(flaky.address, 2)
            pytest.fail("the supervisor should have given up")
    assert "exceeded the supervisor's restart intensity (1 in 100 s)" in str(info.value)
    assert journal.of("start").count("b") == 2
    escalated = [d for d in notices.decisions if isinstance(d, GaveUp)]
    assert escalated == [
        GaveUp(
            supervisor="root", child="b", attempt=2, restarts=1, limit=Intensity(1, 100),
            escalated=True, own=False, reason="Boom: b crashed",
        )
    ]


async def test_an_escalating_childs_own_limit_is_reported_as_its_own(journal: Journal) -> None:
    """Exceeding its own limit names that limit and its count, not the supervisor's."""
    strict = spec(journal, "s", intensity=Intensity(max_restarts=1, within_seconds=60))
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_tree([strict], intensity=Intensity(10, 30)):
            await crash_and_settle(strict.address, 2)
            pytest.fail("expected escalation")
    assert "exceeded its own restart intensity (1 in 60 s)" in str(info.value)
    assert info.value.restarts == 1
    assert (info.value.supervisor, info.value.child) == ("root", "s")
    assert str(info.value).endswith("last exit: Boom: s crashed")


async def test_a_sibling_waiting_out_a_longer_backoff_is_not_restarted_early(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """rest_for_one: c's second crash in a row waits 8 s; a's two crashes a second later
    (the first restarted at once) restart a and b after a's 1 s backoff, and c still at
    8 s, not earlier."""
    a = spec(journal, "a", backoff=Backoff(initial=1, maximum=1))
    c = spec(journal, "c", backoff=Backoff(initial=8, maximum=8))
    notices = Notices()
    children = [a, spec(journal, "b"), c]
    async with open_tree(
        children, strategy=Strategy.REST_FOR_ONE, intensity=GENEROUS, notify=notices
    ):
        c.address.cast("crash")
        await c.address.call("whoami")  # restarted at once
        c.address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(1)
        a.address.cast("crash")
        await a.address.call("whoami")  # restarted at once, b with it; c keeps waiting
        await children[1].address.call("whoami")
        assert journal.times("start", "a")[-1] == pytest.approx(1)
        assert journal.times("start", "b")[-1] == pytest.approx(1)
        a.address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        await c.address.call("whoami")
        assert journal.times("start", "a")[-1] == pytest.approx(2)
        assert journal.times("start", "b")[-1] == pytest.approx(2)  # with a, after a's delay
        assert journal.times("start", "c")[-1] == pytest.approx(8)
    scheduled = [(d.child, d.cause, d.at) for d in notices.decisions
                 if isinstance(d, RestartScheduled)]
    assert scheduled == [
        ("c", "c", 0), ("c", "c", 8),
        ("a", "a", 1), ("b", "a", 1), ("c", "a", 8),
        ("a", "a", 2), ("b", "a", 2), ("c", "a", 8),
    ]
    second_a = [d for d in notices.decisions if isinstance(d, RestartScheduled)
                and d.child == "a"][1]
    assert second_a == RestartScheduled(
        supervisor="root", child="a", cause="a", strategy=Strategy.REST_FOR_ONE, attempt=2,
        delay=pytest.approx(1), at=pytest.approx(2), reason="Boom: a crashed",
    )
    sibling_c = [d for d in notices.decisions if isinstance(d, RestartScheduled)][-1]
    assert (sibling_c.attempt, sibling_c.delay) == (2, pytest.approx(7))  # its own count


async def test_escalating_child_with_its_own_limit(journal: Journal) -> None:
    """An escalating child's own intensity, when set, escalates before the supervisor's."""
    strict = spec(journal, "s", intensity=Intensity(max_restarts=1, within_seconds=60))
    with pytest.raises(SupervisorGaveUp):
        async with open_tree([spec(journal, "a"), strict], intensity=GENEROUS):
            await crash_and_settle(strict.address, 2)
            pytest.fail("expected escalation")


async def test_nested_supervisor_give_up_is_handled_by_parent(journal: Journal) -> None:
    """An inner supervisor that gives up is restarted by its parent's strategy."""
    notices = Notices()
    p, q = spec(journal, "p"), spec(journal, "q")
    inner = supervisor_spec(
        "inner",
        [p, q],
        strategy=Strategy.REST_FOR_ONE,
        intensity=Intensity(max_restarts=1, within_seconds=60),
        notify=notices,
        child_backoff=Backoff.none(),
    )
    x = spec(journal, "x")
    async with open_tree([x, inner], intensity=GENEROUS, notify=notices) as sup:
        journal.clear()
        await crash_and_settle(p.address, 2)
        assert notices.kinds() == [
            "supervisor.child.restarted",  # inner restarts p (rest_for_one: and q)
            "supervisor.child.restarted",
            "supervisor.escalated",  # p's second crash: inner gives up
            "supervisor.child.restarted",  # root restarts inner
        ]
        assert notices.items[-1][1]["child"] == "inner"
        assert "x" not in journal.of("stop")
        # p's crash stopped it; giving up stopped q; the root restarted both in order.
        assert journal.of("stop")[-2:] == ["p", "q"]
        assert journal.of("start")[-2:] == ["p", "q"]
        # Calls to the inner actors work again through the same addresses.
        assert await p.address.call("whoami") == ("p", 3)
        assert sup.statistics().restarts == 1


async def test_nested_give_ups_exhaust_the_parent(journal: Journal) -> None:
    """Repeated inner give-ups count against the parent, which then gives up too."""
    p = spec(journal, "p")
    inner = supervisor_spec(
        "inner", [p], intensity=Intensity(0, 60), child_backoff=Backoff.none()
    )
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_tree([inner], intensity=Intensity(max_restarts=1, within_seconds=60)):
            await crash_and_settle(p.address, 2)
            pytest.fail("expected the root to give up")
    assert info.value.supervisor == "root" and info.value.child == "inner"
    assert isinstance(info.value.__cause__, SupervisorGaveUp)


# -- backoff -----------------------------------------------------------------------------


async def test_backoff_sequence_and_reset(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """The first restart is at once, the next ones double from initial up to the cap, and
    the sequence starts over once the child was stable."""
    child = spec(
        journal, "a", backoff=Backoff(initial=1, maximum=8, stable_after=50), intensity=GENEROUS
    )
    async with open_tree([child], intensity=Intensity(100, 1000)) as sup:
        for _ in range(6):
            await child.address.call("whoami")  # wait for the restart to happen
            child.address.cast("crash")
        await child.address.call("whoami")
        starts = journal.times("start", "a")
        assert [round(b - a, 6) for a, b in zip(starts, starts[1:], strict=False)] == [
            0, 1, 2, 4, 8, 8
        ]
        assert sup.statistics().children[0].attempt == 6
        await trio.sleep(50)  # stable now
        child.address.cast("crash")
        await child.address.call("whoami")
        starts = journal.times("start", "a")
        assert starts[-1] - starts[-2] == pytest.approx(50)  # at once again
        assert sup.statistics().children[0].attempt == 1
        child.address.cast("crash")  # soon after: backoff again
        await child.address.call("whoami")
        starts = journal.times("start", "a")
        assert starts[-1] - starts[-2] == pytest.approx(1)
        assert sup.statistics().children[0].attempt == 2


async def test_the_first_crash_restarts_at_once_the_next_waits_initial(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """OTP restarts at once: a child's first crash is restarted with no delay (the
    decision says so); a second crash in a row waits ``initial``, then ``initial ×
    multiplier`` — a child that exits at once every time does not spin."""
    notices = Notices()
    child = spec(journal, "a", backoff=Backoff(initial=3, maximum=30), intensity=GENEROUS)
    async with open_tree([child], intensity=Intensity(100, 1000), notify=notices):
        await trio.sleep(10)
        for _ in range(3):
            child.address.cast("crash")
            await child.address.call("whoami")
    starts = journal.times("start", "a")
    assert starts == [0, pytest.approx(10), pytest.approx(13), pytest.approx(19)]
    scheduled = [(d.attempt, d.delay) for d in notices.decisions
                 if isinstance(d, RestartScheduled)]
    assert scheduled == [(1, 0), (2, pytest.approx(3)), (3, pytest.approx(6))]


async def test_backoff_jitter_applies(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """With jitter each delay lies between (1 - jitter) and 1 times the plain delay."""
    child = spec(journal, "a", backoff=Backoff(initial=4, maximum=4, jitter=0.5))
    async with open_tree([child], intensity=Intensity(100, 1), rng=random.Random(1)):
        for _ in range(7):
            await child.address.call("whoami")
            child.address.cast("crash")
        await child.address.call("whoami")
    starts = journal.times("start", "a")
    first, *delays = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert first == 0  # the first restart is at once, jitter or not
    assert all(2 <= d <= 4 for d in delays)
    assert len({round(d, 6) for d in delays}) > 1


async def test_restart_statistics_while_waiting(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """statistics() shows a child waiting out its backoff and when it is due."""
    child = spec(journal, "a", backoff=Backoff(initial=7))
    async with open_tree([child]) as sup:
        child.address.cast("crash")
        await child.address.call("whoami")  # the first restart is at once
        child.address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        (stats,) = sup.statistics().children
        assert stats.state is ChildState.RESTARTING
        assert stats.next_restart_at == pytest.approx(trio.current_time() + 7)
        assert stats.last_exit == "Boom: a crashed"


# -- start failures ----------------------------------------------------------------------


async def test_escalating_child_failing_its_first_start_fails_the_tree(
    journal: Journal,
) -> None:
    """As in OTP, a child that cannot start fails the supervisor's start; others stop."""
    journal.fail_starts["b"] = 1
    with pytest.raises(StartFailed) as info:
        async with open_tree([spec(journal, "a"), spec(journal, "b"), spec(journal, "c")]):
            pytest.fail("must not start")
    assert str(info.value) == (
        "child 'b' of supervisor 'root' failed to start: Boom: b failed to start"
    )
    assert info.value.child == "b" and str(info.value.__cause__) == "b failed to start"
    assert journal.of("start") == ["a"]
    assert journal.of("stop") == ["a"]


async def test_mark_unavailable_child_failing_to_start_is_retried(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A mark-unavailable child that fails its first start is retried, siblings unharmed."""
    journal.fail_starts["b"] = 2
    notices = Notices()
    flaky = spec(journal, "b", give_up=GiveUp.MARK_UNAVAILABLE, backoff=Backoff(initial=1))
    async with open_tree([spec(journal, "a"), flaky, spec(journal, "c")], notify=notices):
        assert journal.of("start") == ["a", "c"]
        assert await flaky.address.call("whoami", timeout=10) == ("b", 3)
        assert journal.times("start", "b")[0] == pytest.approx(0 + 1)
    first = next(d for d in notices.decisions if isinstance(d, RestartScheduled))
    assert (first.child, first.reason) == ("b", "Boom: b failed to start")


async def test_failed_restarts_count_as_restarts(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A restart whose start fails counts against the intensity and is tried again."""
    child = spec(journal, "a", backoff=Backoff(initial=1))
    async with open_tree([child], intensity=Intensity(5, 100)) as sup:
        journal.fail_starts["a"] = 2
        child.address.cast("crash")
        assert await child.address.call("whoami", timeout=60) == ("a", 4)
        assert sup.statistics().restarts == 3
        assert sup.statistics().children[0].restarts == 3


async def test_a_restart_that_fails_to_start_is_decided_with_its_start_error(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A restart whose start fails is an exit of its own: the next decision names the
    start error; another child due at the same moment is restarted all the same."""
    notices = Notices()
    a = spec(journal, "a", backoff=Backoff(initial=1))
    b = spec(journal, "b", backoff=Backoff(initial=1))
    async with open_tree([a, b], intensity=Intensity(10, 100), notify=notices):
        journal.fail_starts["a"] = 1
        a.address.cast("crash")
        b.address.cast("crash")
        assert await b.address.call("whoami", timeout=60) == ("b", 2)
        assert await a.address.call("whoami", timeout=60) == ("a", 3)
    reasons = [(d.child, d.reason) for d in notices.decisions if isinstance(d, RestartScheduled)]
    assert ("a", "Boom: a failed to start") in reasons
    restarted = [(d.child, d.reason) for d in notices.decisions if isinstance(d, Restarted)]
    assert ("b", "Boom: b crashed") in restarted
    assert ("a", "Boom: a failed to start") in restarted


@pytest.mark.parametrize(
    ("restart", "message", "crashed"),
    [(Restart.TEMPORARY, "crash", True), (Restart.TRANSIENT, "normal", False)],
)
async def test_a_child_not_restarted_is_reported_as_such(
    journal: Journal, restart: Restart, message: str, crashed: bool
) -> None:
    """A child its restart type leaves down: a NotRestarted decision, field by field;
    a crash of it is logged as a warning, a normal exit is not."""
    notices = Notices()
    child = spec(journal, "t", restart=restart)
    with structlog.testing.capture_logs() as logs:
        async with open_tree([child], notify=notices) as sup:
            child.address.cast(message)
            await until(lambda: bool(notices.decisions))
            # As in OTP, a temporary child is deleted; a transient one stays, stopped.
            kept = {} if restart is Restart.TEMPORARY else {"t": ChildState.STOPPED}
            assert {id: state for id, state, _ in sup.which_children()} == kept
    reason = "Boom: t crashed" if crashed else "normal"
    assert notices.decisions == [
        NotRestarted(supervisor="root", child="t", crashed=crashed, reason=reason)
    ]
    logged = [e for e in logs if e.get("child") == "t"]
    if crashed:
        assert logged == [
            {
                "event": "child crashed; not restarted",
                "log_level": "warning",
                "supervisor": "root",
                "child": "t",
                "restart": "temporary",
                "reason": "Boom: t crashed",
            }
        ]
    else:
        assert logged == []


async def test_every_decision_is_logged_once_with_its_facts(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """The tree logs what it decided: a restart (warning), giving up on a child (error),
    giving up itself (error) — each once, naming the supervisor, child and reason."""
    flaky = spec(
        journal,
        "b",
        give_up=GiveUp.MARK_UNAVAILABLE,
        intensity=Intensity(max_restarts=1, within_seconds=60),
        backoff=Backoff(initial=2),
    )
    with structlog.testing.capture_logs() as logs:
        async with open_tree([flaky], intensity=Intensity(5, 60)):
            await crash_and_settle(flaky.address)
            await trio.sleep(5)
            await crash_and_settle(flaky.address)
        with pytest.raises(SupervisorGaveUp):
            async with open_tree([spec(journal, "c")], intensity=Intensity(0, 60)) as sup:
                sup.address("c").cast("crash")
                await trio.sleep(10)
    assert [e for e in logs if e.get("supervisor") == "root"] == [
        {
            "event": "child exited; restarting",
            "log_level": "warning",
            "supervisor": "root",
            "child": "b",
            "reason": "Boom: b crashed",
            "attempt": 1,
            "delay": 0.0,  # the first restart is at once
        },
        {
            "event": "child gave up; marked unavailable",
            "log_level": "error",
            "supervisor": "root",
            "child": "b",
            "reason": "Boom: b crashed",
            "restarts": 1,
            "permanent": False,
        },
        {
            "event": "restart intensity exceeded; supervisor gives up",
            "log_level": "error",
            "supervisor": "root",
            "child": "c",
            "reason": "Boom: c crashed",
        },
    ]


class Hopeless(Exception):
    """An error that says restarting soon cannot help."""

    retryable = False


class Broken(Probe):
    """Crashes with a Hopeless error on the "hopeless" cast."""

    async def handle(self, message: object) -> object:
        if message == "hopeless":
            raise Hopeless("the executable is gone")
        return await super().handle(message)


@pytest.mark.parametrize("give_up", [GiveUp.MARK_UNAVAILABLE, GiveUp.ESCALATE])
async def test_a_permanent_error_gives_up_at_once_and_says_why(
    journal: Journal, give_up: GiveUp, autojump_clock: trio.testing.MockClock
) -> None:
    """An exit whose error has ``retryable = False``: no restart, no backoff; the child is
    given up on as its give_up says, the decision says permanent, the log says so once."""
    notices = Notices()
    child = actor_spec(
        "h",
        lambda: Broken("h", journal),
        give_up=give_up,
        intensity=Intensity(max_restarts=5, within_seconds=60),
        backoff=Backoff(initial=10),
    )
    with structlog.testing.capture_logs() as logs:
        if give_up is GiveUp.ESCALATE:
            with pytest.raises(SupervisorGaveUp) as info:
                async with open_tree([child], notify=notices, intensity=Intensity.unlimited()):
                    child.address.cast("hopeless")
                    await trio.sleep(100)
            assert str(info.value) == (
                "supervisor 'root' gave up: child 'h' cannot be restarted (its error says "
                "restarting cannot help); last exit: Hopeless: the executable is gone"
            )
        else:
            async with open_tree([child], notify=notices, intensity=Intensity.unlimited()) as sup:
                child.address.cast("hopeless")
                await trio.sleep(100)
                assert sup.which_children()[0][1] is ChildState.UNAVAILABLE
    assert journal.of("start") == ["h"]  # never restarted
    assert notices.decisions == [
        GaveUp(
            supervisor="root",
            child="h",
            attempt=1,
            restarts=0,
            limit=Intensity(max_restarts=5, within_seconds=60),
            escalated=give_up is GiveUp.ESCALATE,
            own=True,
            reason="Hopeless: the executable is gone",
            permanent=True,
        )
    ]
    logged = [e for e in logs if e.get("child") == "h"]
    if give_up is GiveUp.ESCALATE:
        assert logged == [
            {
                "event": "child cannot be restarted; supervisor gives up",
                "log_level": "error",
                "supervisor": "root",
                "child": "h",
                "reason": "Hopeless: the executable is gone",
            }
        ]
    else:
        assert logged == [
            {
                "event": "child gave up; marked unavailable",
                "log_level": "error",
                "supervisor": "root",
                "child": "h",
                "reason": "Hopeless: the executable is gone",
                "restarts": 0,
                "permanent": True,
            }
        ]


async def test_asking_for_an_unknown_child_names_it(journal: Journal) -> None:
    """A request about a child the supervisor does not have names both."""
    async with open_tree([spec(journal, "a")]) as sup:
        with pytest.raises(NoSuchChild) as info:
            await sup.terminate_child("zz")
    assert str(info.value) == "supervisor 'root' has no child 'zz'"


# -- dynamic children --------------------------------------------------------------------


async def test_dynamic_children(journal: Journal) -> None:
    """start_child, terminate_child, restart_child and delete_child behave as in OTP."""
    async with open_tree([spec(journal, "a")]) as sup:
        extra = spec(journal, "z")
        await sup.start_child(extra)
        assert await extra.address.call("whoami") == ("z", 1)
        with pytest.raises(ValueError, match="already has a child 'z'"):
            await sup.start_child(spec(journal, "z"))
        with pytest.raises(SupervisorError, match="is running"):
            await sup.restart_child("z")
        with pytest.raises(SupervisorError, match="terminate it before"):
            await sup.delete_child("z")
        await sup.terminate_child("z")
        assert journal.of("stop") == ["z"]
        with pytest.raises(ActorStopped):
            await extra.address.call("whoami")
        await sup.restart_child("z")
        assert await extra.address.call("whoami") == ("z", 2)
        await sup.terminate_child("z")
        await sup.delete_child("z")
        assert [id for id, _, _ in sup.which_children()] == ["a"]
        with pytest.raises(NoSuchChild):
            await sup.terminate_child("nope")
        journal.fail_starts["y"] = 1
        with pytest.raises(StartFailed):
            await sup.start_child(spec(journal, "y"))
        assert [id for id, _, _ in sup.which_children()] == ["a"]
    with pytest.raises(SupervisorNotRunning):
        await sup.start_child(spec(journal, "late"))


async def test_dynamic_children_stop_with_the_tree(journal: Journal) -> None:
    """Children added at run time stop with the others, in reverse start order."""
    async with open_tree([spec(journal, "a")], ordered_shutdown=True) as sup:
        await sup.start_child(spec(journal, "b"))
    assert journal.of("stop") == ["b", "a"]


async def test_a_replaced_child_serves_the_calls_queued_meanwhile(
    journal: Journal, autojump_clock: trio.abc.Clock
) -> None:
    """replace_child lets the running incarnation finish its call (a graceful stop) while
    a call made meanwhile waits at the same address, for the new incarnation."""
    async with open_tree([spec(journal, "a")]) as sup:
        address = sup.address("a")
        answers: dict[str, object] = {}

        async def ask(key: str, message: object) -> None:
            answers[key] = await address.call(message)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "in flight", ("sleep", 1.0))
            await trio.sleep(0.1)
            nursery.start_soon(sup.replace_child, spec(journal, "a", address=address))
            await trio.sleep(0.1)
            nursery.start_soon(ask, "queued", "whoami")
        assert answers == {"in flight": ("a", 1), "queued": ("a", 2)}
        assert journal.of("stop") == ["a"] and journal.of("start") == ["a", "a"]
        with pytest.raises(ValueError, match="same addresses"):
            await sup.replace_child(spec(journal, "a"))


async def test_replacing_a_child_is_never_counted_as_a_restart(journal: Journal) -> None:
    """Replacements report a start over and count nothing: more of them than the
    intensity allows restarts give nothing up."""
    notices = Notices()
    strict = Intensity(max_restarts=0, within_seconds=60)
    async with open_tree([spec(journal, "a")], intensity=strict, notify=notices) as sup:
        address = sup.address("a")
        for _ in range(3):
            await sup.replace_child(spec(journal, "a", address=address))
        assert await address.call("whoami") == ("a", 4)
        assert sup.statistics().restarts == 0
    assert [type(d).__name__ for d in notices.decisions] == ["StartedOver"] * 3


async def test_an_updated_child_spec_decides_its_next_exit(
    journal: Journal, autojump_clock: trio.abc.Clock
) -> None:
    """update_child changes how the running child is treated from its next exit on,
    without stopping it."""
    async with open_tree([spec(journal, "a"), spec(journal, "b")]) as sup:
        address = sup.address("a")
        await sup.update_child(spec(journal, "a", address=address, restart=Restart.TEMPORARY))
        assert journal.of("stop") == []
        address.cast("crash")
        await until(lambda: journal.of("stop") == ["a"])
        await until(lambda: [id for id, *_ in sup.which_children()] == ["b"])
        assert journal.of("start") == ["a", "b"]  # not restarted: temporary now


async def test_the_order_and_the_strategy_change_live(
    journal: Journal, autojump_clock: trio.abc.Clock
) -> None:
    """arrange puts the children in a new order and set_policy a new strategy: a crash
    then restarts them by the new strategy, in the new order."""
    async with open_tree([spec(journal, "a"), spec(journal, "b")], intensity=GENEROUS) as sup:
        await sup.start_child(spec(journal, "c"))
        await sup.arrange(["c", "a", "b"])
        assert [id for id, *_ in sup.which_children()] == ["c", "a", "b"]
        await sup.set_policy(Strategy.REST_FOR_ONE, GENEROUS)
        journal.clear()
        sup.address("c").cast("crash")
        await until(lambda: len(journal.of("start")) == 3)
        assert journal.of("stop") == ["c", "b", "a"]  # the crashed one, then those after it
        assert journal.of("start") == ["c", "a", "b"]


# -- events ------------------------------------------------------------------------------


async def test_tree_events_reach_bus_subscribers(journal: Journal) -> None:
    """With the bus's notify as hook, subscribers see restarts and give-ups as events."""
    bus = Bus()

    def publish(decision: Decision) -> None:
        event = tree_event(decision)
        if event is not None:
            bus.publish(event)

    flaky = spec(journal, "b", give_up=GiveUp.MARK_UNAVAILABLE, intensity=Intensity(1, 60))
    async with bus.subscribe("supervisor.*") as events:
        async with open_tree([spec(journal, "a"), flaky], notify=publish, name="top"):
            await crash_and_settle(flaky.address, 2)
        got = events.drain()
    assert [e.kind for e in got] == ["supervisor.child.restarted", "supervisor.child.gave_up"]
    restarted, gave_up = got
    assert (restarted.supervisor, restarted.child, restarted.strategy, restarted.restarts) == (
        "top", "b", "one_for_one", 1
    )
    assert (gave_up.child, gave_up.restarts, gave_up.reason) == ("b", 1, "Boom: b crashed")


async def test_nested_supervisors_report_through_the_parent_hook(journal: Journal) -> None:
    """A nested supervisor without its own notify hook uses its parent's."""
    notices = Notices()
    p = spec(journal, "p")
    inner = supervisor_spec("inner", [p], intensity=GENEROUS)
    async with open_tree([inner], notify=notices) as sup:
        assert sup.address("p") is p.address  # actors below nested supervisors are found
        await crash_and_settle(p.address)
    assert notices.of("supervisor.child.restarted") == [
        {"supervisor": "inner", "child": "p", "strategy": "one_for_one", "restarts": 1,
         "reason": "Boom: p crashed"}
    ]
    with pytest.raises(NoSuchChild):
        sup.address("nobody")


async def test_an_error_in_the_block_comes_out_bare(journal: Journal) -> None:
    """open_tree's nursery is its own business: the block's error is raised unwrapped."""
    with pytest.raises(KeyError, match="mine"):
        async with open_tree([spec(journal, "a")]):
            raise KeyError("mine")
    assert journal.of("stop") == ["a"]


async def test_a_child_is_running_as_soon_as_it_answers(journal: Journal) -> None:
    """statistics() never shows a child that already serves calls as still starting."""
    child = spec(journal, "a")
    async with open_tree([child]) as sup:
        child.address.cast("crash")
        assert await child.address.call("whoami") == ("a", 2)
        assert sup.statistics().children[0].state is ChildState.RUNNING


async def test_failed_restarts_are_not_stable(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A child that ran long, then keeps failing to start, still runs out of attempts."""
    flaky = spec(
        journal,
        "f",
        give_up=GiveUp.MARK_UNAVAILABLE,
        intensity=Intensity(max_restarts=3, within_seconds=1000),
        backoff=Backoff(initial=1, stable_after=30),
    )
    async with open_tree([flaky]) as sup:
        await trio.sleep(100)  # stable for a long time
        journal.fail_starts["f"] = 10**6
        flaky.address.cast("crash")
        await until(lambda: sup.statistics().children[0].state is ChildState.UNAVAILABLE)
        assert trio.current_time() == pytest.approx(100 + 0 + 1 + 2)


async def test_a_nested_supervisors_shutdown_timeout_bounds_its_children(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """When a nested supervisor's own shutdown_timeout runs out, its children are cancelled."""
    slow = deaf(spec(journal, "slow", shutdown_timeout=100))
    inner = supervisor_spec("inner", [slow], shutdown_timeout=2)
    async with open_tree([inner]):
        pass
    assert trio.current_time() == pytest.approx(2)
    assert journal.of("stop") == ["slow"]


async def test_a_child_that_failed_to_be_added_fails_its_calls(journal: Journal) -> None:
    """start_child that fails closes the new child's address: calls fail, never hang."""
    journal.fail_starts["y"] = 1
    y = spec(journal, "y")
    async with open_tree() as sup:
        with pytest.raises(StartFailed):
            await sup.start_child(y)
        with pytest.raises(ActorStopped):
            await y.address.call("whoami")


async def test_run_raises_the_give_up_bare(journal: Journal) -> None:
    """Tree.run raises SupervisorGaveUp itself, not inside an exception group."""
    child = spec(journal, "a")
    sup = Tree([child], intensity=Intensity(0, 10))

    async def crash_soon() -> None:
        await trio.testing.wait_all_tasks_blocked()
        child.address.cast("crash")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(crash_soon)
        with pytest.raises(SupervisorGaveUp):
            await sup.run()


async def test_jitter_below_the_root_is_reproducible(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nested supervisors draw jitter from the root's generator: same seed, same delays."""

    async def run_once(seed: int) -> list[float]:
        journal = Journal()
        p = spec(journal, "p", backoff=Backoff(initial=4, maximum=4, jitter=0.9))
        inner = supervisor_spec("inner", [p], intensity=GENEROUS)
        async with open_tree([inner], rng=random.Random(seed)):
            for _ in range(4):
                await p.address.call("whoami")
                p.address.cast("crash")
            await p.address.call("whoami")
        starts = journal.times("start", "p")
        return [round(b - a, 9) for a, b in zip(starts, starts[1:], strict=False)]

    assert await run_once(5) == await run_once(5) != await run_once(6)


# -- what the errors say ------------------------------------------------------------------


async def test_requests_to_a_supervisor_that_is_not_running_name_it(journal: Journal) -> None:
    """Each dynamic-children request to a stopped supervisor says which one."""
    sup = Tree([spec(journal, "a")], name="idle-sup")
    for call in (
        sup.start_child(spec(journal, "b")),
        sup.terminate_child("a"),
        sup.restart_child("a"),
        sup.delete_child("a"),
    ):
        with pytest.raises(SupervisorNotRunning, match="supervisor 'idle-sup' is not running"):
            await call


async def test_wrong_state_requests_say_what_to_do(journal: Journal) -> None:
    """restart_child of a running child and delete_child of a running one are refused
    with the hint; an unknown actor's address names it."""
    async with open_tree([spec(journal, "a")], name="top") as sup:
        with pytest.raises(SupervisorError) as restarting:
            await sup.restart_child("a")
        assert str(restarting.value) == (
            "child 'a' of supervisor 'top' is running; "
            "only a stopped or unavailable child can be restarted"
        )
        with pytest.raises(SupervisorError) as deleting:
            await sup.delete_child("a")
        assert str(deleting.value) == (
            "child 'a' of supervisor 'top' is running; terminate it before deleting it"
        )
        with pytest.raises(NoSuchChild, match="supervisor 'top' has no actor 'ghost' below it"):
            sup.address("ghost")


async def test_a_parent_out_of_patience_cancels_a_nested_tree_at_once(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A nested supervisor whose own shutdown_timeout runs out has every child below it
    cancelled then and there, without each child's own (longer) graceful wait."""
    slow = [deaf(spec(journal, x, shutdown_timeout=50)) for x in "xy"]
    inner = supervisor_spec("inner", slow, shutdown_timeout=2, ordered_shutdown=True)
    async with open_tree([inner]):
        pass
    assert sorted(journal.of("stop")) == ["x", "y"]
    assert journal.times("stop", "x")[0] == journal.times("stop", "y")[0] == pytest.approx(2)


async def test_statistics_describe_the_supervisor_and_each_child(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """statistics() names the supervisor, its strategy and intensity, and per child its
    restart type; next_restart_at is set only while a child waits to restart."""
    a = spec(journal, "a", restart=Restart.TRANSIENT, backoff=Backoff(initial=5, maximum=5))
    async with open_tree(
        [a], name="top", strategy=Strategy.ONE_FOR_ALL, intensity=GENEROUS
    ) as sup:
        stats = sup.statistics()
        assert (stats.name, stats.strategy, stats.intensity) == (
            "top", Strategy.ONE_FOR_ALL, GENEROUS
        )
        (child,) = stats.children
        assert (child.restart, child.state, child.next_restart_at) == (
            Restart.TRANSIENT, ChildState.RUNNING, None
        )
        a.address.cast("crash")
        await a.address.call("whoami")  # the first restart is at once
        a.address.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        (child,) = sup.statistics().children
        assert child.state is ChildState.RESTARTING
        assert child.next_restart_at == pytest.approx(trio.current_time() + 5)


class Returns:
    """A bare child whose run returns what it was given (an exit reason, or None)."""

    def __init__(self, result: object) -> None:
        self.result = result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED):  # noqa: ANN201
        task_status.started()
        await trio.lowlevel.checkpoint()
        return self.result

    def request_stop(self) -> None:
        pass


@pytest.mark.parametrize(
    ("result", "reason", "crashed"),
    [(None, "normal", False), (Shutdown(), "shutdown", False)],
)
async def test_a_child_returning_is_a_normal_exit_or_the_reason_it_returns(
    result: object, reason: str, crashed: bool
) -> None:
    """A child whose run returns None exited normally; one returning an exit reason
    exited for that reason — a transient child is then not restarted."""
    notices = Notices()
    child = ChildSpec(id="r", start=lambda: Returns(result), restart=Restart.TRANSIENT)
    async with open_tree([child], notify=notices):
        await until(lambda: bool(notices.decisions))
    assert notices.decisions == [
        NotRestarted(supervisor="root", child="r", crashed=crashed, reason=reason)
    ]


async def test_a_supervisors_defaults(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Named root, OTP's intensity, no backoff, unordered shutdown, addresses left open:
    two children that each take their whole shutdown_timeout stop together, and their
    mailboxes still queue calls once the supervisor has returned."""
    children = [deaf(spec(journal, x, shutdown_timeout=3)) for x in "ab"]
    sup = Tree(children)
    assert sup.name == "root" and sup.intensity == Intensity()
    assert sup.backoff == Backoff.none()
    assert Tree([], backoff=Backoff(initial=3)).backoff == Backoff(initial=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        sup.request_stop()
    assert journal.times("stop", "a") == journal.times("stop", "b") == pytest.approx([3])
    assert [child.address.state for child in children] == [AddressState.OPEN] * 2


async def test_a_restart_waiting_out_its_backoff_is_hurried_by_its_spec(
    journal: Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A child's ``hurry`` returning while it waits out a 30 s backoff restarts it at
    once (a server's port that opened again); one that does not return leaves the delay
    as it was, and a hurry awaited for an earlier wait is forgotten once it restarted."""
    import attrs

    ready = trio.Event()
    hurries = 0

    async def hurry() -> None:
        nonlocal hurries
        hurries += 1
        await ready.wait()

    a = attrs.evolve(spec(journal, "a", backoff=Backoff(initial=30, maximum=30)), hurry=hurry)
    with trio.fail_after(100):  # a stop waiting on a pending hurry would hang
        async with open_tree([a], intensity=GENEROUS):
            a.address.cast("crash")
            await a.address.call("whoami")  # the first crash: restarted at once, no hurry
            assert hurries == 0
            a.address.cast("crash")  # the second waits 30 s ...
            await trio.testing.wait_all_tasks_blocked()
            assert hurries == 1
            await trio.sleep(5)
            ready.set()  # ... unless its hurry returns
            await a.address.call("whoami")
            assert journal.times("start", "a")[-1] == pytest.approx(5)
            ready = trio.Event()
            a.address.cast("crash")  # the third: 30 s again, and nothing hurries it
            await a.address.call("whoami")
            assert journal.times("start", "a")[-1] == pytest.approx(35)
            assert hurries == 2
            ready.set()  # the forgotten wait's event: no restart of a running child
            await trio.testing.wait_all_tasks_blocked()
            assert len(journal.times("start", "a")) == 4
            ready = trio.Event()
            a.address.cast("crash")  # left waiting, its hurry pending: the tree still stops
            await trio.testing.wait_all_tasks_blocked()
            assert hurries == 3
            stopping = trio.current_time()
        assert trio.current_time() - stopping < 30  # not after the delay, nor never


async def test_a_sibling_restarts_while_a_child_is_stopped_on_request(
    journal: Journal, autojump_clock: trio.abc.Clock
) -> None:
    """Stopping a child on request (terminate, replace) waits for its call in flight —
    up to its shutdown timeout — without holding up the tree: a sibling that crashes
    meanwhile is restarted at once, not after the stop."""
    async with open_tree(
        [spec(journal, "slow", shutdown_timeout=30.0), spec(journal, "b")],
        intensity=GENEROUS,
    ) as sup:
        slow = sup.address("slow")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow.call, ("sleep", 20.0))
            await trio.sleep(1)
            nursery.start_soon(sup.terminate_child, "slow")
            nursery.start_soon(sup.terminate_child, "slow")  # a second request waits too
            await trio.sleep(1)
            sup.address("b").cast("crash")
            await until(lambda: journal.of("start").count("b") == 2)
            restarted_at = trio.current_time()
        stopped_at = journal.times("stop", "slow")[0]
        assert restarted_at < 5 < stopped_at  # the call in flight finished at 21 s
        assert [s for id, s, _ in sup.which_children() if id == "slow"] == [ChildState.STOPPED]


def test_the_old_name_of_tree_still_works_and_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``supervisor.actors.Supervisor`` is :class:`Tree` under its old name: its first use
    warns (a ``DeprecationWarning`` naming the new name), a later one does not."""
    import supervisor.actors as actors
    from supervisor._util import _renamed

    monkeypatch.setattr(_renamed, "_warned", set())
    with pytest.warns(DeprecationWarning, match=r"supervisor\.actors\.Tree"):
        assert actors.Supervisor is Tree
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from supervisor.actors import Supervisor
    assert Supervisor is Tree
