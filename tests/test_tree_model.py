"""Random crash/exit sequences: the tree agrees with a small reference model of OTP."""

from __future__ import annotations

import math
from collections import Counter

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.actors import (
    Backoff,
    GiveUp,
    Intensity,
    Restart,
    Strategy,
    SupervisorGaveUp,
    actor_spec,
    open_tree,
)

from .probes import Journal, Probe

# The model is written from OTP's documentation, independently of the code under test.


@attrs.define
class ModelChild:
    id: str
    restart: Restart
    give_up: GiveUp
    state: str = "running"  # running | stopped | unavailable
    window: list[float] = attrs.Factory(list)


@attrs.define
class Model:
    strategy: Strategy
    intensity: Intensity
    children: list[ModelChild]
    now: float = 0.0
    window: list[float] = attrs.Factory(list)
    starts: Counter[str] = attrs.Factory(Counter)
    gave_up: bool = False

    def __attrs_post_init__(self) -> None:
        self.starts.update(c.id for c in self.children)

    def running(self) -> list[ModelChild]:
        return [c for c in self.children if c.state == "running"]

    def _exceeds(self, window: list[float]) -> bool:
        window[:] = [t for t in window if t >= self.now - self.intensity.within_seconds]
        window.append(self.now)
        return len(window) > self.intensity.max_restarts

    def exit(self, child: ModelChild, how: str) -> None:
        restarts = child.restart is Restart.PERMANENT or (
            child.restart is Restart.TRANSIENT and how == "crash"
        )
        if not restarts:
            child.state = "stopped"
            if child.restart is Restart.TEMPORARY:
                self.children.remove(child)
            return
        # A mark-unavailable child has a window of its own (the supervisor's limits),
        # checked first; every restart then counts against the supervisor's window.
        if child.give_up is GiveUp.MARK_UNAVAILABLE and self._exceeds(child.window):
            child.state = "unavailable"
            return
        if self._exceeds(self.window):
            self.gave_up = True
            return
        live = [c for c in self.children if c.state == "running" or c is child]
        if self.strategy is Strategy.ONE_FOR_ONE:
            victims = [child]
        elif self.strategy is Strategy.ONE_FOR_ALL:
            victims = live
        else:
            victims = live[live.index(child) :]
        for v in victims:
            if v is not child and v.restart is Restart.TEMPORARY:
                self.children.remove(v)
                continue
            v.state = "running"
            self.starts[v.id] += 1


child_plans = st.lists(
    st.tuples(st.sampled_from(list(Restart)), st.sampled_from(list(GiveUp))),
    min_size=1,
    max_size=4,
)
operations = st.lists(
    st.tuples(st.sampled_from(["crash", "normal", "shutdown", "advance"]), st.integers(0, 7)),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plans=child_plans,
    strategy=st.sampled_from(list(Strategy)),
    max_restarts=st.integers(0, 3),
    within=st.sampled_from([5.0, 10.0]),
    ops=operations,
)
def test_tree_agrees_with_reference_model(
    plans: list[tuple[Restart, GiveUp]],
    strategy: Strategy,
    max_restarts: int,
    within: float,
    ops: list[tuple[str, int]],
) -> None:
    """Which children restart, and when the supervisor gives up, match the OTP model."""
    intensity = Intensity(max_restarts=max_restarts, within_seconds=within)
    ids = [f"c{i}" for i in range(len(plans))]
    model = Model(
        strategy,
        intensity,
        [ModelChild(id, r, g) for id, (r, g) in zip(ids, plans, strict=True)],
    )
    journal = Journal()
    specs = {
        id: actor_spec(
            id,
            (lambda id=id: Probe(id, journal)),
            restart=r,
            give_up=g,
            backoff=Backoff(initial=0, maximum=0, stable_after=math.inf),
        )
        for id, (r, g) in zip(ids, plans, strict=True)
    }
    clock = trio.testing.MockClock()

    def check(sup: object) -> None:
        actual = {id: state for id, state, _ in sup.which_children()}  # type: ignore[attr-defined]
        expected_states = {c.id: c.state for c in model.children}
        assert {id: s.value for id, s in actual.items()} == expected_states
        assert Counter(journal.of("start")) == model.starts

    async def main() -> bool:
        try:
            async with open_tree(
                list(specs.values()), strategy=strategy, intensity=intensity
            ) as sup:
                check(sup)
                for op, index in ops:
                    if op == "advance":
                        clock.jump(index + 0.5)
                        model.now += index + 0.5
                        continue
                    running = model.running()
                    if not running:
                        continue
                    child = running[index % len(running)]
                    model.exit(child, op)
                    specs[child.id].address.cast(op)
                    await trio.testing.wait_all_tasks_blocked()
                    await trio.lowlevel.checkpoint()
                    assert not model.gave_up, "the model gave up but the tree did not"
                    check(sup)
        except SupervisorGaveUp:
            return True
        return False

    gave_up = trio.run(main, clock=clock)
    assert gave_up == model.gave_up
    # Every incarnation that started has stopped: nothing is left running.
    assert len(journal.of("stop")) == len(journal.of("start"))


def test_model_detects_a_wrong_rule() -> None:
    """The reference model is not vacuous: it disagrees with a tree that restarts too much."""
    model = Model(
        Strategy.ONE_FOR_ALL,
        Intensity(1, 5),
        [ModelChild("a", Restart.PERMANENT, GiveUp.ESCALATE),
         ModelChild("b", Restart.TRANSIENT, GiveUp.ESCALATE)],
    )
    model.exit(model.children[1], "normal")
    assert model.starts == Counter({"a": 1, "b": 1})
    model.exit(model.children[0], "crash")
    assert model.starts == Counter({"a": 2, "b": 1})  # b stopped: not restarted
    model.exit(model.children[0], "crash")
    assert model.gave_up
