"""Two contenders timed in the same round, alternately (ABBA), so noise hits both alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

#: ``await timer(n)``: seconds a contender takes for ``n`` operations.
Timer = Callable[[int], Awaitable[float]]


async def alternate(
    measure_a: Timer, measure_b: Timer, pieces: Sequence[int], flip: bool
) -> tuple[float, float]:
    """Total seconds of ``a`` and of ``b``, each timed on every piece, in ABBA order
    (``flip`` starts with ``b``)."""
    a = b = 0.0
    for i, size in enumerate(pieces):
        if (i % 2 == 1) != flip:
            b += await measure_b(size)
            a += await measure_a(size)
        else:
            a += await measure_a(size)
            b += await measure_b(size)
    return a, b


def blocks(n: int, block: int) -> list[int]:
    """``n`` operations cut into pieces of ``block`` (the last may be smaller)."""
    return [min(block, n - i) for i in range(0, n, block)]
