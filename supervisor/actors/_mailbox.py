"""Addresses: bounded mailboxes that outlive the incarnations serving them."""

from __future__ import annotations

import collections
import enum
import math
from collections.abc import Callable, Hashable, Sized

import attrs
import trio
from trio.lowlevel import Abort, RaiseCancelT, Task, current_task, reschedule, wait_task_rescheduled

from ._errors import (
    ActorStopped,
    ActorUnavailable,
    CallTimeout,
    MailboxFull,
    RequestAborted,
)

_QUEUED, _RUNNING, _DONE, _ABANDONED = range(4)


class Envelope:
    """One message in a mailbox, with the slot its reply goes to.

    A cast has no reply slot (``wants_reply`` is false). The handler side calls
    :meth:`begin` before handling (false means the caller gave up: skip it), then
    :meth:`reply` or :meth:`fail`. The caller side abandons the envelope when its
    deadline passes or it is cancelled, which cancels a handler already running.
    """

    __slots__ = ("message", "deadline", "requeue", "_event", "_state", "_value", "_error", "_scope")

    def __init__(self, message: object, deadline: float, wants_reply: bool) -> None:
        self.message = message
        self.deadline = deadline
        #: true (or a predicate false) while nothing the handler did can have taken
        #: effect yet: see ``before_effect``
        self.requeue: bool | Callable[[], bool] = False
        self._event = trio.Event() if wants_reply else None
        self._state = _QUEUED
        self._value: object = None
        self._error: BaseException | None = None
        self._scope: trio.CancelScope | None = None

    @property
    def wants_reply(self) -> bool:
        return self._event is not None

    @property
    def done(self) -> bool:
        """Replied to or failed (not merely abandoned)."""
        return self._state == _DONE

    def begin(self, scope: trio.CancelScope | None) -> bool:
        """Mark as being handled under ``scope``; false if the caller already gave up."""
        if self._state != _QUEUED:
            return False
        self._state = _RUNNING
        self._scope = scope
        return True

    def reply(self, value: object) -> None:
        if self._state < _DONE:
            self._state = _DONE
            self._value = value
            if self._event is not None:
                self._event.set()

    def fail(self, error: BaseException) -> None:
        if self._state < _DONE:
            self._state = _DONE
            self._error = error
            if self._event is not None:
                self._event.set()

    def back_to_queue(self) -> bool:
        """Undo :meth:`begin` (the handler had no effect); false if the caller gave up."""
        if self._state != _RUNNING:
            return False
        self._state = _QUEUED
        self._scope = None
        self.requeue = False
        return True

    def abandon(self) -> None:
        """The caller stopped waiting: never start the handler, or cancel it."""
        if self._state < _DONE:
            if self._state == _RUNNING and self._scope is not None:
                self._scope.cancel()
            self._state = _ABANDONED

    def unwrap(self) -> object:
        if self._error is not None:
            raise self._error
        return self._value


class AddressState(enum.Enum):
    """Whether calls to an address queue or fail fast."""

    #: not started yet, running, or restarting: calls queue and are served in order
    OPEN = "open"
    #: the child gave up restarting: calls fail fast with ActorUnavailable
    UNAVAILABLE = "unavailable"
    #: the child was stopped for good: calls fail fast with ActorStopped
    STOPPED = "stopped"


@attrs.frozen
class AddressStatistics:
    """A snapshot of one address."""

    name: str
    state: AddressState
    #: messages waiting in the mailbox (including abandoned ones not yet skipped)
    queued: int
    capacity: float
    calls: int
    casts: int
    #: messages that reached no handler: pushed out of a full :class:`CastAddress`, or
    #: still waiting in one when it closed (a plain address never drops one)
    dropped: int = 0
    #: incarnations that have served it so far (1 + restarts, once it has started)
    incarnations: int = 0


class Address:
    """Where an actor's messages go: a bounded mailbox that outlives incarnations.

    Messages queued while the actor restarts are served by the next incarnation, each
    within its own deadline. The supervisor opens the address while the child runs or
    waits to restart, and closes it when the child is stopped or given up on; a closed
    address fails calls fast and fails every message still queued.
    """

    def __init__(self, name: str, capacity: int | float = 256) -> None:
        if capacity != math.inf and (capacity < 1 or int(capacity) != capacity):
            raise ValueError(f"mailbox capacity for {name!r} must be a positive int or inf")
        self.name = name
        self.capacity = capacity
        self._send, self._receive = trio.open_memory_channel[Envelope](capacity)
        # Requests a dead incarnation took but had not acted on: served first, in order.
        self._requeued: collections.deque[Envelope] = collections.deque()
        self._state = AddressState.OPEN
        # Makes the error a closed address raises: a fresh one each time.
        self._closed: Callable[[], ActorStopped | ActorUnavailable] | None = None
        self._calls = 0
        self._casts = 0
        self._serving = 0  # incarnations serving it now
        #: whether an incarnation is serving the mailbox now (not between restarts);
        #: read-only
        self.serving = False
        self._incarnations = 0

    def __repr__(self) -> str:
        return f"<Address {self.name!r} {self._state.value}>"

    @property
    def state(self) -> AddressState:
        return self._state

    async def call(self, message: object, timeout: float | None = None) -> object:
        """Send ``message`` and wait for the reply.

        Returns the handler's reply, raises the handler's error, or raises
        :class:`CallTimeout` once ``timeout`` seconds have passed (waiting for room in
        a full mailbox counts against it). A closed address raises at once. A call
        that times out or is cancelled is abandoned: never handled if still queued;
        if already running, its handler is cancelled — except for a call without a
        timeout, whose handler then runs to completion and its reply is dropped. A
        call whose incarnation died while handling it raises :class:`RequestAborted`.
        """
        if self._closed is not None:
            raise self._closed()
        self._calls += 1
        if timeout is None:
            # No deadline: no cancel scope, which costs as much as the rest; `_deliver`
            # inlined, for the same reason: this is the hot path of every actor call, and
            # the extra frame measured 3-5 % of mailbox_call_ratio.
            env = Envelope(message, math.inf, True)
            try:
                await self._send.send(env)
                if self._closed is not None:
                    self._fail_queued()
                # made with wants_reply: it has an event (no check here: the hot path)
                await env._event.wait()  # pyright: ignore[reportOptionalMemberAccess]
            except BaseException:
                env.abandon()
                raise
            if env._error is not None:
                raise env._error
            return env._value
        deadline = trio.current_time() + timeout
        env = Envelope(message, deadline, True)
        with trio.CancelScope(deadline=deadline):
            await self._deliver(env)
        if env.done:
            return env.unwrap()
        env.abandon()
        raise CallTimeout(
            f"actor {self.name!r} did not reply within {timeout} s",
            actor=self.name,
            timeout=timeout,
        )

    async def _deliver(self, env: Envelope) -> None:
        """Queue ``env`` (waiting for room) and wait for its reply; abandon it if cut short."""
        try:
            await self._send.send(env)
            if self._closed is not None:
                self._fail_queued()
            # every envelope queued here wants a reply: it has an event
            await env._event.wait()  # pyright: ignore[reportOptionalMemberAccess]
        except BaseException:
            env.abandon()
            raise

    def check_open(self) -> None:
        """Raise what a call would raise at once on a closed address; return if it is open."""
        if self._closed is not None:
            raise self._closed()

    def cast(self, message: object) -> None:
        """Queue ``message`` without waiting for it to be handled.

        Never blocks: raises :class:`MailboxFull` if there is no room, or the closed
        address's error.
        """
        if self._closed is not None:
            raise self._closed()
        try:
            self._send.send_nowait(Envelope(message, math.inf, False))
        except trio.WouldBlock:
            raise MailboxFull(
                f"mailbox of actor {self.name!r} is full ({self.capacity} messages); "
                "the message was dropped — slow down or raise its capacity",
                actor=self.name,
            ) from None
        self._casts += 1

    def statistics(self) -> AddressStatistics:
        return AddressStatistics(
            name=self.name,
            state=self._state,
            queued=self._receive.statistics().current_buffer_used + len(self._requeued),
            capacity=self.capacity,
            calls=self._calls,
            casts=self._casts,
            incarnations=self._incarnations,
        )

    # -- used by the supervisor and the actor runner -------------------------------------

    def begin_serving(self) -> None:
        """An incarnation starts serving the mailbox."""
        self._serving += 1
        self.serving = True
        self._incarnations += 1

    def end_serving(self) -> None:
        """An incarnation stopped serving the mailbox."""
        self._serving -= 1
        self.serving = self._serving > 0

    @property
    def receiver(self) -> trio.MemoryReceiveChannel[Envelope]:
        return self._receive

    def requeue(self, envelope: Envelope) -> None:
        """Give back a request whose handler had no effect: it is served first next time."""
        if envelope.back_to_queue():
            self._requeued.append(envelope)
            if self._closed is not None:
                self._fail_queued()

    def take_requeued(self) -> Envelope | None:
        """The oldest given-back request, if any."""
        return self._requeued.popleft() if self._requeued else None

    def open(self) -> None:
        """Accept and queue calls again."""
        self._state = AddressState.OPEN
        self._closed = None

    def close_unavailable(self, last_error: str | None, attempts: int) -> None:
        """Fail calls fast (and those queued) because the child was given up on."""
        self._state = AddressState.UNAVAILABLE
        self._closed = lambda: ActorUnavailable(
            f"actor {self.name!r} is unavailable after {attempts} restart attempts; "
            f"last error: {last_error}. Restart it explicitly once the cause is fixed.",
            actor=self.name,
            last_error=last_error,
            attempts=attempts,
        )
        self._fail_queued()

    def close_stopped(self) -> None:
        """Fail calls fast (and those queued) because the child was stopped for good."""
        self._state = AddressState.STOPPED
        self._closed = lambda: ActorStopped(
            f"actor {self.name!r} is stopped and will not restart by itself",
            actor=self.name,
        )
        self._fail_queued()

    def _fail_queued(self) -> None:
        assert self._closed is not None
        while self._requeued:
            self._requeued.popleft().fail(self._closed())
        while True:
            try:
                env = self._receive.receive_nowait()
            except trio.WouldBlock:
                return
            env.fail(self._closed())


class CastAddress(Address):
    """An address for casts only: sending never waits and never fails for want of room.

    Without ``key`` the mailbox is *drop-oldest*: a cast into a full one pushes the oldest
    waiting message out to make room. With ``key`` (a function of the message) it
    *coalesces*: a message replaces the one still waiting under the same key — last
    writer wins — and takes its place at the back, so at most one message per key waits;
    a full mailbox of distinct keys drops its oldest too. Each dropped message is counted
    (``statistics().dropped``), and so are those still waiting when the address closes:
    nobody is waiting for them to fail.

    ``call`` is refused (:exc:`TypeError`): nobody would wait for a reply. One
    incarnation at a time serves it (a second raises :exc:`RuntimeError` as it starts),
    handling the waiting messages in a row — yielding to the scheduler after a batch of
    them — and calling :meth:`Actor.idle <supervisor.actors.Actor.idle>` each time it has
    caught up. A message whose handler raises crashes the incarnation and is lost; those
    still waiting are served by the next incarnation.
    """

    def __init__(
        self,
        name: str,
        capacity: int | float = 256,
        *,
        key: Callable[[object], Hashable] | None = None,
    ) -> None:
        super().__init__(name, 1)  # the inherited channel is never used
        if capacity != math.inf and (capacity < 1 or int(capacity) != capacity):
            raise ValueError(f"mailbox capacity for {name!r} must be a positive int or inf")
        self.capacity = capacity
        self._key = key
        self._queue: collections.deque[object] = collections.deque()
        self._keyed: collections.OrderedDict[Hashable, object] = collections.OrderedDict()
        self._dropped = 0
        self._waiter: Task | None = None
        # For the runner's loop: what is waiting (true while not empty), and how to take
        # the oldest of it.
        self._pending: Sized = self._queue if key is None else self._keyed
        self._take_oldest: Callable[[], object] = (
            self._queue.popleft if key is None else self._take_keyed
        )

    def __repr__(self) -> str:
        return f"<CastAddress {self.name!r} {self._state.value}>"

    async def call(self, message: object, timeout: float | None = None) -> object:
        """Refused: a cast-only address has nobody to reply."""
        raise TypeError(f"actor {self.name!r} takes casts only: use cast()")

    def cast(self, message: object) -> None:
        """Queue ``message``; never blocks and never raises for want of room (the oldest
        waiting message makes room, or the one waiting under the same key is replaced).
        A closed address raises its error."""
        if self._closed is not None:
            raise self._closed()
        self._casts += 1
        key = self._key
        if key is None:
            queue = self._queue
            if len(queue) >= self.capacity:
                queue.popleft()
                self._dropped += 1
            queue.append(message)
        else:
            keyed = self._keyed
            k = key(message)
            if k in keyed:
                del keyed[k]
            elif len(keyed) >= self.capacity:
                keyed.popitem(last=False)
                self._dropped += 1
            keyed[k] = message
        task = self._waiter
        if task is not None:
            self._waiter = None
            reschedule(task)

    @property
    def waiting(self) -> int:
        """How many messages wait to be handled."""
        return len(self._pending)

    @property
    def dropped(self) -> int:
        """Messages that reached no handler so far (see :attr:`AddressStatistics.dropped`)."""
        return self._dropped

    def take(self) -> object:
        """Remove and return the oldest waiting message, without waiting.

        Raises:
          trio.WouldBlock: nothing is waiting.
        """
        if not self._pending:
            raise trio.WouldBlock
        return self._take_oldest()

    def _take_keyed(self) -> object:
        return self._keyed.popitem(last=False)[1]

    def statistics(self) -> AddressStatistics:
        return AddressStatistics(
            name=self.name,
            state=self._state,
            queued=self.waiting,
            capacity=self.capacity,
            calls=self._calls,
            casts=self._casts,
            dropped=self._dropped,
            incarnations=self._incarnations,
        )

    # -- used by the actor runner ----------------------------------------------------------

    def begin_serving(self) -> None:
        if self._serving:
            raise RuntimeError(
                f"actor {self.name!r} is already running: one incarnation at a time serves "
                "a cast-only address"
            )
        super().begin_serving()

    async def wait(self) -> None:
        """Park until a message is waiting (at once if one already is)."""
        if self.waiting:
            await trio.lowlevel.checkpoint()
            return
        self._waiter = current_task()

        def abort(_: RaiseCancelT) -> Abort:
            self._waiter = None
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    def _fail_queued(self) -> None:
        self._dropped += self.waiting
        self._queue.clear()
        self._keyed.clear()


def aborted(actor: str, cause: BaseException | None) -> RequestAborted:
    """The error for a request whose incarnation exited before replying."""
    why = "crashed" if cause is not None else "was stopped"
    error = RequestAborted(
        f"actor {actor!r} {why} while handling this request; it may have taken effect "
        "and was not retried",
        actor=actor,
    )
    error.__cause__ = cause
    return error
