"""The registry's value types: a :class:`Measurement` (one key) and a :class:`Suite` (keys
measured together, around resources opened once)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial

import attrs

#: Timed rounds per plain measurement (after one warm-up round), and of a suite as cheap
#: as one (suites of costly rounds run fewer).
ROUNDS = 15
QUICK_ROUNDS = 5

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
    #: the target, e.g. ``"<= 15"``; ``None`` for an informative extra key; or a
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
