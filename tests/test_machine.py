"""The async rule-based state machine: rules under trio, invariants after each step, and a
failing run shrunk to its fewest steps."""

from __future__ import annotations

import pytest
import trio
from hypothesis import strategies as st

from supervisor.testing import AsyncStateMachine, Step, invariant, precondition, rule


class Bank(AsyncStateMachine):
    """A deliberately broken account: a withdrawal right after a deposit of 3 loses money."""

    def __init__(self) -> None:
        self.balance = 0
        self.expected = 0
        self.last = 0
        self.steps_run: list[str] = []

    @rule(amount=st.integers(1, 5))
    async def deposit(self, amount: int) -> None:
        await trio.lowlevel.checkpoint()  # rules run under trio
        self.balance += amount
        self.expected += amount
        self.last = amount

    @precondition(lambda self: self.balance > 0)
    @rule()
    async def withdraw(self) -> None:
        await trio.lowlevel.checkpoint()
        self.balance -= 1 if self.last != 3 else 2  # the bug
        self.expected -= 1
        self.last = 0

    @rule()
    async def audit(self) -> None:
        await trio.lowlevel.checkpoint()

    @invariant()
    def balanced(self) -> None:
        assert self.balance == self.expected, f"{self.balance} != {self.expected}"


def test_a_failure_shrinks_to_the_fewest_steps() -> None:
    test = Bank.as_test(max_examples=300, max_steps=15)
    with pytest.raises(AssertionError) as failed:
        test()
    notes = "\n".join(getattr(failed.value, "__notes__", []))
    assert "steps=[deposit(3), withdraw()]" in notes, notes
    assert "at step 2 of 2: withdraw()" in notes


def test_a_sequence_replays_as_written() -> None:
    Bank.run([Step("deposit", {"amount": 2}), Step("withdraw", {}), Step("audit", {})])
    with pytest.raises(AssertionError, match="at step 2 of 2"):
        Bank.run([Step("deposit", {"amount": 3}), Step("withdraw", {})])


def test_a_step_whose_precondition_fails_does_nothing() -> None:
    Bank.run([Step("withdraw", {}), Step("withdraw", {})])  # balance 0: both skipped


class Clocked(AsyncStateMachine):
    clock = staticmethod(lambda: trio.testing.MockClock(autojump_threshold=0))

    @rule(seconds=st.integers(1, 3600))
    async def wait(self, seconds: int) -> None:
        start = trio.current_time()
        await trio.sleep(seconds)
        assert trio.current_time() - start == seconds


test_rules_run_under_a_mock_clock_when_asked = Clocked.as_test(max_examples=10)
