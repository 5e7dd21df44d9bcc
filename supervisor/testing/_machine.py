"""Rule-based state-machine tests with async rules, under trio.

Hypothesis' own stateful testing calls rules synchronously, so it cannot drive a
supervisor. Here a test is a *sequence of steps* that hypothesis generates and shrinks as
an ordinary list, and each example runs the whole sequence in one ``trio.run``::

    class Servers(AsyncStateMachine):
        @asynccontextmanager
        async def running(self):
            async with open_supervisor(config) as self.sup:
                yield

        @rule(server=st.sampled_from(["a", "b"]))
        async def kill(self, server): ...

        @invariant()
        async def answers(self): ...

    test_servers = Servers.as_test(max_examples=20, max_steps=12)

A failure is reported with the shortest sequence of steps hypothesis found that still
fails, e.g. ``steps=[kill('a'), call('a'), hang('b')]``, and replays from that list.
Invariants are checked after every step; :meth:`AsyncStateMachine.finish` (if
overridden) runs once after the last step, still inside :meth:`~AsyncStateMachine.running`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import trio

__all__ = ["AsyncStateMachine", "Step", "invariant", "precondition", "rule"]


class Step:
    """One rule applied with its arguments; printed as a call (``kill('a')``)."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name
        self.args = args

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(repr(v) for v in self.args.values())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Step) and (self.name, self.args) == (other.name, other.args)

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.args.items())))


def _mark(function: Callable[..., Any], name: str, value: object) -> None:
    """Set the mark ``name`` on ``function`` (the machine's class reads it back)."""
    setattr(function, name, value)


def rule(**strategies: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: ANN401
    """Mark an async method as a rule; its keyword arguments are drawn from
    ``strategies`` (hypothesis strategies)."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError(f"rule {function.__name__} must be an async method")
        _mark(function, "_machine_rule", strategies)
        return function

    return mark


def invariant() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a method (async or not) to be checked after every step."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        _mark(function, "_machine_invariant", True)
        return function

    return mark


def precondition(
    condition: Callable[[Any], bool],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A rule applies only when ``condition(machine)`` holds; otherwise its step does
    nothing (and shrinking removes it)."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        _mark(function, "_machine_precondition", condition)
        return function

    return mark


class AsyncStateMachine:
    """Subclass with :func:`rule` and :func:`invariant` methods; see the module."""

    #: set by :meth:`as_test`'s caller to run under ``trio.testing.MockClock``
    clock: ClassVar[staticmethod[[], trio.abc.Clock] | None] = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Whatever the steps need (a supervisor, servers) for the example's duration."""
        yield

    async def finish(self) -> None:
        """Checks made once after the last step (default: none)."""

    @classmethod
    def _rules(cls) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
        found = {}
        for name, member in inspect.getmembers(cls, predicate=inspect.isfunction):
            strategies = getattr(member, "_machine_rule", None)
            if strategies is not None:
                found[name] = (member, strategies)
        if not found:
            raise TypeError(f"{cls.__name__} has no @rule methods")
        return found

    @classmethod
    def _invariants(cls) -> list[Callable[..., Any]]:
        return [
            member
            for _, member in inspect.getmembers(cls, predicate=inspect.isfunction)
            if getattr(member, "_machine_invariant", False)
        ]

    @classmethod
    def steps(cls, *, max_steps: int = 20, min_steps: int = 1) -> Any:  # noqa: ANN401
        """A hypothesis strategy of step sequences over this machine's rules."""
        from hypothesis import strategies as st

        options = []
        for name, (_, strategies) in sorted(cls._rules().items()):
            args = st.fixed_dictionaries(strategies) if strategies else st.just({})
            options.append(args.map(lambda drawn, name=name: Step(name, drawn)))
        return st.lists(st.one_of(options), min_size=min_steps, max_size=max_steps)

    @classmethod
    def run(cls, steps: Sequence[Step]) -> None:
        """Run ``steps`` in a fresh machine, in a new ``trio.run``."""
        clock = cls.clock() if cls.clock is not None else None
        trio.run(cls._run, list(steps), clock=clock)

    @classmethod
    async def _run(cls, steps: list[Step]) -> None:
        rules = cls._rules()
        invariants = cls._invariants()
        machine = cls()
        async with machine.running():
            for index, step in enumerate(steps):
                function, _ = rules[step.name]
                condition = getattr(function, "_machine_precondition", None)
                if condition is not None and not condition(machine):
                    continue
                try:
                    await function(machine, **step.args)
                    for check in invariants:
                        result = check(machine)
                        if inspect.isawaitable(result):
                            await result
                except Exception as exc:
                    exc.add_note(f"at step {index + 1} of {len(steps)}: {step!r}")
                    raise
            await machine.finish()

    @classmethod
    def as_test(
        cls, *, max_examples: int = 25, max_steps: int = 20, **settings: Any
    ) -> Callable[..., None]:
        """A test function (for pytest) that runs generated step sequences and shrinks
        a failing one to the fewest steps."""
        from hypothesis import given
        from hypothesis import settings as hypothesis_settings

        @hypothesis_settings(max_examples=max_examples, deadline=None, **settings)
        @given(steps=cls.steps(max_steps=max_steps))
        def test(steps: list[Step]) -> None:
            cls.run(steps)

        test.__name__ = f"test_{cls.__name__}"
        test.__qualname__ = test.__name__
        test.__doc__ = cls.__doc__
        return test
