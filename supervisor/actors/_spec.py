"""Value types of the supervision tree: restart types, strategies, exit reasons, specs."""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    import trio

    from ._mailbox import Address


class Restart(enum.Enum):
    """When a child that exited is restarted (OTP's restart types)."""

    #: always restarted, whatever its exit reason
    PERMANENT = "permanent"
    #: restarted only after an abnormal exit (a crash)
    TRANSIENT = "transient"
    #: never restarted; removed from the supervisor when it exits
    TEMPORARY = "temporary"


class Strategy(enum.Enum):
    """Which children are restarted when one of them has to be (OTP's strategies)."""

    #: only the child that exited
    ONE_FOR_ONE = "one_for_one"
    #: every child: the others are stopped in reverse start order, then all start in order
    ONE_FOR_ALL = "one_for_all"
    #: the child that exited and every child started after it
    REST_FOR_ONE = "rest_for_one"


class GiveUp(enum.Enum):
    """What happens when a child's restarts exceed the allowed intensity."""

    #: the supervisor stops all its children and fails (OTP); its parent decides what next
    ESCALATE = "escalate"
    #: only this child is given up on: calls to it fail fast, its siblings are untouched
    MARK_UNAVAILABLE = "mark-unavailable"


@attrs.frozen
class Normal:
    """The child returned on its own: its work is done."""

    def describe(self) -> str:
        return "normal"


@attrs.frozen
class Shutdown:
    """The child stopped because it was asked to (by its supervisor or itself)."""

    def describe(self) -> str:
        return "shutdown"


@attrs.frozen
class Crashed:
    """The child raised: an abnormal exit. ``error`` is the exception.

    An error whose ``retryable`` attribute is ``False`` says that restarting soon cannot
    help (a missing executable, a refused login): :attr:`permanent`, and the supervisor
    gives up on the child at once instead of spending its restarts.
    """

    error: BaseException

    @property
    def permanent(self) -> bool:
        """Whether the error says restarting soon cannot help (``retryable is False``)."""
        return getattr(self.error, "retryable", True) is False

    def describe(self) -> str:
        text = str(self.error)
        name = type(self.error).__name__
        return f"{name}: {text}" if text else name


ExitReason = Normal | Shutdown | Crashed


@attrs.frozen
class Intensity:
    """At most ``max_restarts`` restarts within any ``within_seconds`` (OTP's intensity/period).

    One more restart than that and the supervisor gives up. ``max_restarts=0`` means the
    first restart already gives up; ``math.inf`` (:meth:`unlimited`) never gives up.
    """

    max_restarts: float = attrs.field(default=3, validator=attrs.validators.ge(0))
    within_seconds: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))

    @classmethod
    def unlimited(cls) -> Intensity:
        """No limit: restarts are never counted against anything."""
        return cls(max_restarts=math.inf, within_seconds=math.inf)

    @property
    def limited(self) -> bool:
        return self.max_restarts != math.inf

    def describe(self) -> str:
        if not self.limited:
            return "no limit"
        n = int(self.max_restarts)
        if self.within_seconds == math.inf:
            return f"{n} in a row"
        return f"{n} in {self.within_seconds:g} s"


@attrs.frozen
class Backoff:
    """Delay before each restart: exponential, capped, optionally jittered, reset when stable.

    The first restart of a child (its first exit, or the first after it stayed up
    ``stable_after`` seconds) is at once, as OTP restarts; backoff is for a child that
    exits again soon: the n-th consecutive restart (n ≥ 2) waits
    ``initial * multiplier ** (n - 2)`` seconds, at most ``maximum`` — 0, ``initial``,
    ``initial * multiplier``, …. With ``jitter`` j each delay is multiplied by a random
    factor in ``[1 - j, 1]``, so it never exceeds the unjittered delay. A child that
    stayed up at least ``stable_after`` seconds starts again from the first (immediate)
    restart. ``Backoff.none()`` restarts immediately every time, as OTP itself does.
    """

    initial: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    maximum: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    jitter: float = attrs.field(
        default=0.0, validator=[attrs.validators.ge(0), attrs.validators.le(1)]
    )
    stable_after: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))

    @classmethod
    def none(cls) -> Backoff:
        """Restart at once, every time."""
        return cls(initial=0.0, maximum=0.0)


class Child(Protocol):
    """One incarnation of a supervised child.

    ``run`` calls ``task_status.started()`` once it is ready (its start-up errors surface
    at that point), then works until it returns or raises. Returning ``None`` or
    :class:`Normal` is a normal exit, returning :class:`Shutdown` says it stopped on
    request, raising is a crash. ``request_stop`` asks it to finish gracefully; if it
    has not returned after its spec's ``shutdown_timeout`` it is cancelled.
    """

    # ``...``: a protocol's default is only declared (trio is not imported at run time,
    # so that the config loader, which uses these values, does not load it)
    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> ExitReason | None: ...

    def request_stop(self) -> None: ...


@attrs.frozen
class ChildSpec:
    """How to start, restart and stop one child.

    ``start`` makes a fresh incarnation for every (re)start. ``intensity`` is the child's
    own restart limit (reset when it has been stable); ``give_up`` says what exceeding it
    does. A ``MARK_UNAVAILABLE`` child's restarts count only against its own limit
    (``intensity``, or the supervisor's when unset), so a crash-looping child cannot use
    up its siblings' allowance. An ``ESCALATE`` child's restarts count against the
    supervisor's intensity as in OTP, and against its own limit too when one is set.
    ``backoff`` overrides the supervisor's. ``addresses`` are the mailboxes this child
    serves — an actor's own, or those of every actor below a nested supervisor: they
    outlive incarnations, stay open (calls queue) while the child restarts, and are
    closed (calls fail fast) when the supervisor stops it for good or gives up on it.
    ``hurry``, if given, is awaited while the child waits out a backoff delay: when it
    returns (the child looks able to start again — a server's port that opened), the
    restart happens at once; the restart counts as any other.
    """

    id: str
    start: Callable[[], Child]
    restart: Restart = Restart.PERMANENT
    shutdown_timeout: float = attrs.field(default=5.0, validator=attrs.validators.ge(0))
    give_up: GiveUp = GiveUp.ESCALATE
    intensity: Intensity | None = None
    backoff: Backoff | None = None
    addresses: tuple[Address, ...] = ()
    hurry: Callable[[], Awaitable[None]] | None = None

    @property
    def address(self) -> Address:
        """The mailbox of an actor child (the spec's only address)."""
        if len(self.addresses) != 1:
            raise AttributeError(f"child {self.id!r} is not an actor with one address")
        return self.addresses[0]
