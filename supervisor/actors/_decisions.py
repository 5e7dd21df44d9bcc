"""What a supervisor decided about a child, as typed values handed to its notify hook.

The supervisor is the only place where restarts are decided: whether a child that exited
restarts, after which delay, as which consecutive attempt, and when to give up. It
reports each decision once, through its ``notify`` hook, and everything else — a server's
health record, the events a subscriber sees — is derived from these values, never
computed again.

For one exit the hook receives, in order: a :class:`RestartScheduled` for every child the
strategy restarts (the failed one first, then its siblings in start order), or a
:class:`GaveUp`, or a :class:`NotRestarted`; later, a :class:`Restarted` as each one
starts again. Asked to, the supervisor stops a child for good (``terminate_child``: a
:class:`Terminated`) or starts it again with its counts started over (``restart_child``:
a :class:`StartedOver`, reported before the new incarnation starts).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ._spec import Intensity, Strategy


@attrs.frozen
class RestartScheduled:
    """``child`` will start again ``delay`` seconds from now (at ``at``, trio's clock).

    ``cause`` is the child whose exit made the strategy restart it — ``child`` itself, or
    a sibling under ``one_for_all``/``rest_for_one``. ``attempt`` is the child's count of
    consecutive restarts since it was last stable (what its backoff grew from); a sibling
    restarted alongside keeps its own count. ``reason`` describes the exit of ``cause``.
    """

    supervisor: str
    child: str
    cause: str
    strategy: Strategy
    attempt: int
    delay: float
    at: float
    reason: str

    @property
    def own(self) -> bool:
        """Whether ``child`` is restarted for its own exit (not a sibling's)."""
        return self.cause == self.child


@attrs.frozen
class Restarted:
    """A new incarnation of ``child`` has started; ``restarts`` counts them so far."""

    supervisor: str
    child: str
    strategy: Strategy
    restarts: int
    reason: str


@attrs.frozen
class GaveUp:
    """The supervisor will not restart ``child``: its restarts exceeded ``limit``.

    ``escalated`` is false when only the child was given up on (``mark-unavailable``:
    calls to it fail fast); true when the supervisor itself gave up, stopping all its
    children — ``own`` then says whether the child's own limit or the supervisor's was
    exceeded. ``attempt`` is the consecutive restart that was refused, ``restarts`` how
    many were counted against ``limit``. ``permanent``: no limit was reached — the child's
    error said restarting soon cannot help (:attr:`~._spec.Crashed.permanent`), so no restart
    was tried.
    """

    supervisor: str
    child: str
    attempt: int
    restarts: int
    limit: Intensity
    escalated: bool
    own: bool
    reason: str
    permanent: bool = False


@attrs.frozen
class NotRestarted:
    """``child`` exited and its restart type says it stays down (transient after a normal
    exit, temporary always); ``crashed`` tells an abnormal exit from a normal one."""

    supervisor: str
    child: str
    crashed: bool
    reason: str


@attrs.frozen
class Terminated:
    """``child`` was stopped for good on request (``terminate_child``): it stays down
    until it is restarted on request."""

    supervisor: str
    child: str


@attrs.frozen
class StartedOver:
    """``child`` starts again on request (``restart_child``, or ``replace_child`` with a
    new spec) with a fresh count: its ``attempt`` and ``restarts`` are started over (0).
    Reported before it starts."""

    supervisor: str
    child: str
    attempt: int
    restarts: int


Decision = RestartScheduled | Restarted | GaveUp | NotRestarted | Terminated | StartedOver

#: ``notify(decision)``: how a supervisor reports what it decided. It must not block;
#: an exception it raises is logged and ignored.
Notify = Callable[[Decision], None]
