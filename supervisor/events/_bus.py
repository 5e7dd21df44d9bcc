"""The event bus: an actor that fans events out to subscribers without slowing publishers.

Publishers call :meth:`Bus.publish` (or :meth:`Bus.notify`), a plain synchronous method: it
never blocks and never awaits. The bus actor is an :class:`~supervisor.actors.Actor` of
:attr:`Bus.address`, a drop-oldest :class:`~supervisor.actors.CastAddress`. While it runs
(:attr:`Bus.spec`, a child of the supervision tree, or :func:`open_bus`), ``publish`` only
casts the event to that mailbox; the actor's task fans it out. A full mailbox drops its
*oldest* event, and every subscriber is told how many were lost. Without a running actor
(a bus used on its own, outside a tree) ``publish`` fans out at once.

Each subscriber has its own bounded buffer; when a subscriber falls behind, it loses its
*oldest* events and is told how many with a :class:`~supervisor.events.BusDropped` event,
so one slow reader never slows the supervision tree or any other reader::

    async with open_bus() as bus:
        async with bus.subscribe("mcp.*", "tools.conflict") as events:
            async for event in events:
                print(event.kind, event.ts)

A supervision tree publishes what it decides here with ``open_tree(children,
notify=bus.notify)``: each restart and give-up as its ``supervisor.*`` event.

Subscriptions and the mailbox belong to the :class:`Bus`, not to one incarnation of its
actor: a fan-out that raises (a bug) crashes the incarnation, the event being fanned out is
dropped (and counted), the tree starts a new incarnation, and subscribers go on receiving
what is published next. Everything runs inside one :func:`trio.run`; the bus is not
thread-safe.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from fnmatch import fnmatchcase
from types import MappingProxyType, TracebackType
from typing import Final

import attrs
import trio
from trio.lowlevel import (
    Abort,
    RaiseCancelT,
    Task,
    cancel_shielded_checkpoint,
    checkpoint_if_cancelled,
    current_task,
    reschedule,
    wait_task_rescheduled,
)

from ..actors import Actor, Child, ChildSpec, actor_spec
from ..actors._decisions import Decision
from ..actors._mailbox import CastAddress
from ._catalog import BusDropped, Event, make_event, tree_event

__all__ = ["Bus", "BusStatistics", "Subscription", "SubscriptionStatistics", "open_bus"]

DEFAULT_BUFFER: Final = 1024
"""Events a subscription holds before it starts dropping its oldest ones."""

DEFAULT_MAILBOX: Final = 65536
"""Events the actor's mailbox holds before publishing drops the oldest one."""

_YIELD_EVERY: Final = 64
"""A subscriber that never runs dry still yields to the scheduler once per this many events."""

_DROPPED_KIND: Final = BusDropped.__struct_config__.tag


@attrs.frozen
class SubscriptionStatistics:
    """A snapshot of one subscription, from :meth:`Subscription.statistics`.

    Attributes:
      patterns: The glob patterns the subscription matches kinds against.
      buffer_size: How many events it holds before dropping its oldest.
      buffered: How many events are waiting to be read.
      dropped_total: How many events it lost to overflow, reported or not yet reported.
      delivered: How many published events it has handed to its reader (drop notices
        excluded), so ``delivered + dropped_total + buffered`` is every matching event
        published while it was open.
      waiting: Whether a task is parked waiting for its next event.
    """

    patterns: tuple[str, ...]
    buffer_size: int
    buffered: int
    dropped_total: int
    delivered: int
    waiting: bool


@attrs.frozen
class BusStatistics:
    """A snapshot of a bus, from :meth:`Bus.statistics`.

    Attributes:
      subscribers: How many subscriptions are currently open.
      published: How many events were published while the bus was open.
      per_kind: ``published`` broken down by event kind (kinds never published are absent).
      closed: Whether :meth:`Bus.close` has been called.
      queued: Events in the actor's mailbox, not fanned out yet.
      lost: Events that reached no subscriber: pushed out of a full mailbox, or being
        fanned out when the fan-out crashed.
      running: Whether an incarnation of the bus actor is running.
      incarnations: How many incarnations have started (1 + restarts).
    """

    subscribers: int
    published: int
    per_kind: Mapping[str, int]
    closed: bool
    queued: int = 0
    lost: int = 0
    running: bool = False
    incarnations: int = 0


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class _Route:
    """Per event class: the subscriptions it goes to (``None`` = recompute) and a counter."""

    __slots__ = ("kind", "subs", "published")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.subs: tuple[Subscription, ...] | None = None
        self.published = 0


class Bus:
    """Fans events out to subscribers, each filtering kinds by glob.

    Every subscriber receives the events whose kind matches one of its patterns, in publish
    order, starting with the first event published after it subscribed. Subscribers never
    see each other's drop notices. Use one bus per :func:`trio.run`.

    ``with bus:`` closes the bus on exit.
    """

    #: The bus actor's mailbox (drop-oldest): events published, not fanned out yet.
    address: CastAddress
    #: The bus actor as a supervision-tree child, its address included.
    spec: ChildSpec

    def __init__(self, mailbox: int = DEFAULT_MAILBOX) -> None:
        if mailbox < 1:
            raise ValueError(f"bus mailbox must hold at least 1 event, got {mailbox}")
        # Insertion-ordered set of open subscriptions: fan-out follows subscription order.
        self._subscriptions: dict[Subscription, None] = {}
        self._routes: dict[type[Event], _Route] = {}
        self._closed = False
        self.address = CastAddress("bus", mailbox)
        self.spec = actor_spec(
            "bus", lambda: _BusActor(self), address=self.address, shutdown_timeout=5.0
        )
        self._told = 0  # of the mailbox's drops, those every subscriber was told of
        self._crashed = 0  # events lost to a crashed fan-out

    # --- publishing (hot path) -------------------------------------------------------

    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every open subscription whose patterns match its kind.

        Synchronous and non-blocking whatever the subscribers do: with the actor running
        the event waits in the mailbox (a full one drops its oldest event, and every
        subscriber will be told); a subscription whose buffer is full drops its oldest
        event to make room (and will be told). Publishing to a closed bus does nothing.
        ``bus.dropped`` events are never fanned out; they are only made by the bus, for the
        subscriber that lost events.
        """
        if self._closed:
            return
        address = self.address
        if address.serving:
            address.cast(event)
        else:
            self._fan_out(event)

    def _lost(self, count: int) -> None:
        """``count`` events were lost to a crashed fan-out: tell every subscriber."""
        self._crashed += count
        self._tell(count)

    def _tell_dropped(self) -> None:
        """Tell every subscriber of the events the mailbox dropped since it was last told."""
        dropped = self.address.dropped
        count, self._told = dropped - self._told, dropped
        if count:
            self._tell(count)

    def _tell(self, count: int) -> None:
        for sub in self._subscriptions:
            sub._dropped += count
            sub._wake()

    def _fan_out(self, event: Event) -> None:
        route = self._routes.get(type(event))
        if route is None:
            route = self._routes[type(event)] = _Route(event.kind)
        route.published += 1
        subs = route.subs
        if subs is None:
            subs = self._resolve(route)
        for sub in subs:
            buffer = sub._buffer
            if len(buffer) == sub._size:
                sub._dropped += 1  # the append below pushes the oldest out (deque maxlen)
            buffer.append(event)
            task = sub._waiter
            if task is not None:
                sub._waiter = None
                reschedule(task)

    def notify(self, kind: str | Decision, /, **fields: object) -> None:
        """Publish the event of ``kind`` built from ``fields`` (see :func:`make_event`).

        Given a supervision tree's decision instead of a kind, publish the ``supervisor.*``
        event it makes, if any, as :meth:`decided` does: so ``bus.notify`` is also a tree's
        notice hook, ``open_tree(children, notify=bus.notify)``.

        Raises:
          ValueError: ``kind`` is not in the event catalog.
          TypeError: the fields do not fit that kind, or ``kind`` is neither a kind nor a
            decision (a decision takes no fields).
        """
        if isinstance(kind, str):
            if not self._closed:
                self.publish(make_event(kind, **fields))
        elif isinstance(kind, Decision) and not fields:
            self.decided(kind)
        else:
            raise TypeError(
                f"bus.notify takes an event kind and its fields, or a supervision tree's "
                f"decision alone; got {kind!r}"
                + (f" with fields {sorted(fields)}" if fields else "")
            )

    def decided(self, decision: Decision) -> None:
        """Publish the ``supervisor.*`` event a supervision tree's decision makes, if any
        (:func:`~supervisor.events.tree_event`): a tree's notice hook on this bus,
        ``open_tree(children, notify=bus.decided)`` (or ``notify=bus.notify``, the same).
        A scheduled restart, or an exit that is not restarted, publishes nothing."""
        event = tree_event(decision)
        if event is not None:
            self.publish(event)

    def _resolve(self, route: _Route) -> tuple[Subscription, ...]:
        kind = route.kind
        if kind == _DROPPED_KIND:
            subs: tuple[Subscription, ...] = ()
        else:
            subs = tuple(sub for sub in self._subscriptions if sub._matches(kind))
        route.subs = subs
        return subs

    def _invalidate(self) -> None:
        for route in self._routes.values():
            route.subs = None

    # --- subscribing -----------------------------------------------------------------

    def subscribe(self, *patterns: str, buffer: int = DEFAULT_BUFFER) -> Subscription:
        """Open a subscription to the events whose kind matches any of ``patterns``.

        Patterns are :func:`fnmatch.fnmatchcase` globs over dotted kinds (``"mcp.*"``,
        ``"supervisor.child.*"``, ``"tools.registered"``); none means ``"*"``, everything.
        The subscription holds at most ``buffer`` unread events.

        Use it as a context manager (``async with`` or ``with``); events published from
        the moment it is entered are delivered, and leaving it unsubscribes::

            async with bus.subscribe("mcp.local.*", buffer=100) as events:
                async for event in events:
                    ...

        Raises:
          trio.ClosedResourceError: the bus is closed.
          ValueError: ``buffer`` is less than 1.
          TypeError: a pattern is not a string.
        """
        if self._closed:
            raise trio.ClosedResourceError("cannot subscribe: the event bus is closed")
        if buffer < 1:
            raise ValueError(f"subscription buffer must be at least 1, got {buffer}")
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise TypeError(f"subscription patterns must be str, got {pattern!r}")
        return Subscription(self, patterns or ("*",), buffer)

    def _add(self, sub: Subscription) -> None:
        if self._closed:
            raise trio.ClosedResourceError("cannot subscribe: the event bus is closed")
        # What was published before this subscription goes to the others first: a new
        # subscription starts with the first event published after it was entered.
        self.flush()
        self._subscriptions[sub] = None
        self._invalidate()

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subscriptions:
            del self._subscriptions[sub]
            self._invalidate()

    # --- the actor --------------------------------------------------------------------

    def incarnation(self) -> Child:
        """A fresh incarnation of the bus actor, serving :attr:`address`: a
        supervision-tree child (``spec.start``). While it runs, publishing only queues;
        it fans out."""
        return self.spec.start()

    def flush(self) -> None:
        """Fan out, now, every event waiting in the mailbox."""
        address = self.address
        self._tell_dropped()
        while address.waiting:
            # the mailbox is untyped (take() gives an object): only events are cast to it
            self._fan_out(address.take())  # pyright: ignore[reportArgumentType]

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the bus. Idempotent.

        Events still in the mailbox are fanned out first. Later publishes are ignored and
        later subscribes fail. Each open subscription still yields the events already in
        its buffer, then its iteration ends (:exc:`StopAsyncIteration`;
        :exc:`trio.EndOfChannel` from :meth:`Subscription.receive`); readers parked
        waiting are woken to end.
        """
        if self._closed:
            return
        self.flush()
        self._closed = True
        for sub in self._subscriptions:
            sub._wake()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def __enter__(self) -> Bus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def statistics(self) -> BusStatistics:
        """Return a :class:`BusStatistics` snapshot."""
        per_kind: dict[str, int] = {}
        for route in self._routes.values():
            if route.published:
                per_kind[route.kind] = per_kind.get(route.kind, 0) + route.published
        mailbox = self.address.statistics()
        return BusStatistics(
            subscribers=len(self._subscriptions),
            published=sum(per_kind.values()),
            per_kind=MappingProxyType(per_kind),
            closed=self._closed,
            queued=mailbox.queued,
            lost=mailbox.dropped + self._crashed,
            running=self.address.serving,
            incarnations=mailbox.incarnations,
        )


class Subscription:
    """One subscriber's view of a :class:`Bus`: an async iterator of events.

    Made by :meth:`Bus.subscribe`; usable only while its context is entered. Events come in
    publish order. If the buffer overflowed since the last read, the next event is a
    :class:`~supervisor.events.BusDropped` saying how many of the oldest events were lost,
    followed by the retained ones.

    Iteration is cancellable: a cancelled read loses no event (the event stays buffered).
    Each read is a checkpoint when it has to wait; when events are already buffered it
    returns at once (still raising :exc:`trio.Cancelled` if cancelled) and yields to the
    scheduler once every few dozen events, so a busy subscriber cannot starve others.
    One task at a time may read; a second concurrent waiter gets
    :exc:`trio.BusyResourceError`.

    Iteration ends (after the buffered events) when the bus is closed. Reading after
    leaving the context raises :exc:`trio.ClosedResourceError`; reading before entering
    it raises :exc:`RuntimeError`.
    """

    __slots__ = (
        "_buffer",
        "_bus",
        "_delivered",
        "_dropped",
        "_dropped_total",
        "_matched",
        "_patterns",
        "_size",
        "_state",
        "_waiter",
    )

    def __init__(self, bus: Bus, patterns: tuple[str, ...], buffer: int) -> None:
        """Internal: use :meth:`Bus.subscribe`."""
        self._bus = bus
        self._patterns = patterns
        self._size = buffer
        self._buffer: deque[Event] = deque(maxlen=buffer)
        self._dropped = 0  # lost since the last BusDropped notice
        self._dropped_total = 0  # lost and already reported
        self._delivered = 0
        self._waiter: Task | None = None
        self._state = _State.UNOPENED
        self._matched: dict[str, bool] = {}

    def _matches(self, kind: str) -> bool:
        matched = self._matched.get(kind)
        if matched is None:
            matched = self._matched[kind] = any(fnmatchcase(kind, p) for p in self._patterns)
        return matched

    @property
    def patterns(self) -> tuple[str, ...]:
        """The glob patterns this subscription matches event kinds against."""
        return self._patterns

    # --- reading ---------------------------------------------------------------------

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        buffer = self._buffer
        if buffer and not self._dropped and (self._delivered + 1) % _YIELD_EVERY:
            # Fast path: an event is ready, no notice is due, no yield is due.
            await checkpoint_if_cancelled()
            self._delivered += 1
            return buffer.popleft()
        return await self._next_slow()

    async def _next_slow(self) -> Event:
        buffer = self._buffer
        if buffer:
            await checkpoint_if_cancelled()
            if not self._dropped:
                # Every _YIELD_EVERY-th event: let other tasks run. The state may change.
                await cancel_shielded_checkpoint()
        if not buffer:
            await self._wait()
        if self._dropped:
            return self._notice()
        self._delivered += 1
        return buffer.popleft()

    async def receive(self) -> Event:
        """Wait for and return the next event.

        Raises:
          trio.EndOfChannel: the bus is closed and every buffered event has been read.
          trio.ClosedResourceError: the subscription's context has been left.
          trio.BusyResourceError: another task is already waiting on this subscription.
        """
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise trio.EndOfChannel from None

    def receive_nowait(self) -> Event:
        """Return the next buffered event without waiting.

        Raises:
          trio.WouldBlock: nothing is buffered yet.
          trio.EndOfChannel: the bus is closed and every buffered event has been read.
          trio.ClosedResourceError: the subscription's context has been left.
        """
        if not self._buffer:
            self._check_state()
            if self._bus._closed:
                raise trio.EndOfChannel
            raise trio.WouldBlock
        if self._dropped:
            return self._notice()
        self._delivered += 1
        return self._buffer.popleft()

    def drain(self) -> list[Event]:
        """Return every buffered event without waiting, oldest first (maybe ``[]``).

        A pending drop notice comes first, as it would when iterating.

        Raises:
          trio.ClosedResourceError: the subscription's context has been left.
        """
        self._check_state()
        events: list[Event] = []
        if self._dropped:
            events.append(self._notice())
        events.extend(self._buffer)
        self._delivered += len(self._buffer)
        self._buffer.clear()
        return events

    def _notice(self) -> BusDropped:
        count = self._dropped
        self._dropped = 0
        self._dropped_total += count
        return BusDropped(count=count)

    async def _wait(self) -> None:
        """Park until something is buffered; raise if iteration is over instead."""
        await checkpoint_if_cancelled()
        while not self._buffer:
            self._check_state()
            if self._bus._closed:
                raise StopAsyncIteration
            if self._waiter is not None:
                raise trio.BusyResourceError("another task is already reading this subscription")
            self._waiter = current_task()

            def abort(_: RaiseCancelT) -> Abort:
                self._waiter = None
                return Abort.SUCCEEDED

            await wait_task_rescheduled(abort)

    def _wake(self) -> None:
        task = self._waiter
        if task is not None:
            self._waiter = None
            reschedule(task)

    def _check_state(self) -> None:
        if self._state is _State.OPEN:
            return
        if self._state is _State.UNOPENED:
            raise RuntimeError(
                "subscription not entered: use `async with bus.subscribe(...) as events:`"
            )
        raise trio.ClosedResourceError("this subscription's context has been left")

    # --- lifecycle -------------------------------------------------------------------

    def _open(self) -> Subscription:
        if self._state is not _State.UNOPENED:
            raise RuntimeError("a subscription can be entered only once")
        self._bus._add(self)
        self._state = _State.OPEN
        return self

    def _close(self) -> None:
        if self._state is _State.OPEN:
            self._state = _State.CLOSED
            self._bus._remove(self)
            self._buffer.clear()
            self._dropped = 0
            self._wake()

    def __enter__(self) -> Subscription:
        return self._open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    async def __aenter__(self) -> Subscription:
        return self._open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def statistics(self) -> SubscriptionStatistics:
        """Return a :class:`SubscriptionStatistics` snapshot."""
        return SubscriptionStatistics(
            patterns=self._patterns,
            buffer_size=self._size,
            buffered=len(self._buffer),
            dropped_total=self._dropped_total + self._dropped,
            delivered=self._delivered,
            waiting=self._waiter is not None,
        )


class _BusActor(Actor):
    """One incarnation of the bus actor: fans out each event cast to the bus's address.

    A fan-out that raises crashes it; the event it was fanning out is counted as lost. A
    graceful stop fans out what is still waiting.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def handle(self, message: object) -> None:
        try:
            # the mailbox is untyped (it gives objects): only events are cast to it
            self.bus._fan_out(message)  # pyright: ignore[reportArgumentType]
        except BaseException:
            self.bus._lost(1)
            raise

    async def idle(self) -> None:
        # Caught up (no subscriber ran meanwhile): tell them what the mailbox dropped.
        self.bus._tell_dropped()

    async def drain(self) -> None:
        self.bus.flush()


@asynccontextmanager
async def open_bus(mailbox: int = DEFAULT_MAILBOX) -> AsyncIterator[Bus]:
    """A bus with its actor running for the duration of the block; closed when it ends
    (after the actor fanned out what was left)."""
    with Bus(mailbox) as bus:
        async with trio.open_nursery() as nursery:
            actor = bus.incarnation()
            await nursery.start(actor.run)
            try:
                yield bus
            finally:
                actor.request_stop()
