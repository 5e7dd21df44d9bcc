"""Bounds on callers: rate limits (token buckets) and a server's concurrent-call slots.

A rate is written ``"<count>/<period>"`` — ``"10/s"``, ``"60/min"``, ``"1000/h"``,
``"5/10s"`` (a number before the unit multiplies it); periods are ``s``, ``min``, ``h``
and ``d`` (``sec``, ``second``, ``m``, ``minute``, ``hour``, ``day`` are read too). It
is kept by a :class:`TokenBucket`: ``count`` calls may be made at once (the bucket starts
full), and it refills steadily, one call every ``period / count`` seconds — so a burst
takes what is saved up, and a steady caller gets ``count`` calls a period.

A call over a limit is refused before anything is sent
(:class:`~supervisor.errors.RateLimited`, with the seconds until it would fit:
``retry_after``): the library's per-server limit (a server's ``rateLimit``) and the
gateway's per-caller limits (``gateway.policy``'s ``rateLimit``) both refuse through
:func:`refuse`.

:class:`CallSlots` bounds the calls in flight at one server (``maxConcurrentCalls``):
calls past the bound wait their turn, in order, within their own deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar

import trio
from trio.lowlevel import ParkingLot

from ..config._rates import MAX_COUNT as MAX_COUNT
from ..config._rates import Rate, parse_rate
from ..errors import RateLimited

__all__ = ["CallSlots", "Rate", "TokenBucket", "caller_admission", "parse_rate", "refuse"]

#: The check of its caller's own limits (a team gateway's policy, per caller) that a
#: call made in this context passes too, beside its server's: called with the server's
#: name and the tool's merged name, it raises :class:`~supervisor.errors.RateLimited`,
#: or takes the caller's tokens. ``None``: the caller has no limits.
caller_admission: ContextVar[Callable[[str, str], None] | None] = ContextVar(
    "supervisor_caller_admission", default=None
)


class TokenBucket:
    """One :class:`Rate` kept on trio's clock (see the module docstring): full at first
    (at ``now``, or at its first use)."""

    __slots__ = ("rate", "_tokens", "_at")

    def __init__(self, rate: Rate, now: float | None = None) -> None:
        self.rate = rate
        self._tokens = float(rate.count)
        self._at = now

    def _refill(self, now: float) -> None:
        rate = self.rate
        if self._at is None:
            self._at = now
        elif now > self._at:
            self._tokens = min(
                float(rate.count), self._tokens + (now - self._at) * rate.count / rate.period
            )
            self._at = now

    def wait(self, now: float) -> float:
        """Seconds until a call fits (0: it fits now); nothing is taken."""
        self._refill(now)
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) * self.rate.period / self.rate.count

    def take(self, now: float) -> None:
        """Take one call's token (after :meth:`wait` said it fits)."""
        self._refill(now)
        self._tokens -= 1.0

    def full(self, now: float) -> bool:
        """Whether it is full again: it holds nothing a caller has spent."""
        self._refill(now)
        return self._tokens >= self.rate.count


def refuse(
    wait: float, rate: Rate, *, server: str, tool: str, by: str, caller: str | None = None
) -> RateLimited:
    """The refusal of a call of ``tool`` over ``rate`` (``by``: ``"server"``, the
    server's own ``rateLimit``, or ``"caller"``, a gateway policy's), fit in ``wait`` s."""
    retry_after = max(math.ceil(wait * 1000) / 1000, 0.001)
    whose = (
        f"MCP server {server!r}'s rateLimit ({rate})"
        if by == "server"
        else f"the gateway's rate limit for {caller!r} ({rate})"
    )
    return RateLimited(
        f"tool {tool!r} was not called: over {whose}; nothing was sent. Try again in "
        f"{retry_after:g} s",
        server=server,
        tool=tool,
        retry_after=retry_after,
        limit=rate.text,
        by=by,
    )


class CallSlots:
    """At most ``limit`` calls in flight at once; the others wait their turn, in the
    order they came (a waiter cancelled, or past its deadline, just leaves the queue).
    The limit may change while calls are in flight (a reconfiguration): a raised one
    lets waiters in at once, a lowered one takes effect as calls end."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: calls holding a slot now
        self.in_flight = 0
        #: the most calls that held a slot at once so far
        self.peak = 0
        self._lot = ParkingLot()

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        return len(self._lot)

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        while self.in_flight < limit and self._lot:
            self._take()
            self._lot.unpark()

    async def acquire(self) -> None:
        """Take a slot, waiting for one (cancellable) in order."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.in_flight < self.limit and not self._lot:
            self._take()
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        await self._lot.park()  # the slot is handed over by release(), or set_limit()

    def release(self) -> None:
        """Give a slot back: to the longest waiter, if the limit allows."""
        if self.in_flight <= self.limit and self._lot:
            self._lot.unpark()  # handed over: the count stays
            return
        self.in_flight -= 1

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
