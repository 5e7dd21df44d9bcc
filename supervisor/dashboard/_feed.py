"""The live feed: one bus subscription, fanned out to every open page without blocking.

The hub reads the supervisor's events (``sup.subscribe("*")``), hands each to its
*observe* callback (the strips'), and keeps the most recent ones, so that a page opened
late still shows a timeline. Each page gets an
:class:`Outbox`: bounded, dropping its oldest events when the page reads too slowly, and
filled without ever waiting. So neither a slow browser nor a stuck one holds up the hub,
and the hub, being an ordinary bus subscriber, never holds up the tree.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

import msgspec
import trio

from ..events._bus import Subscription
from ..events._catalog import Event
from ..server import HealthRecord
from ..timeline._element import Element

__all__ = ["Hub", "Outbox", "feed_message"]

#: Events kept for pages opened later.
HISTORY = 500
#: Events buffered for one page between two of its sends.
OUTBOX = 256
#: The bus subscription's own buffer (drop-oldest, like every subscription).
SUBSCRIPTION_BUFFER = 4096


class Outbox:
    """One page's pending events: bounded, drop-oldest, never blocks the writer."""

    def __init__(self, size: int = OUTBOX) -> None:
        self._items: deque[Event] = deque(maxlen=size)
        self._dropped = 0
        self._ready = trio.Event()

    def put(self, event: Event) -> None:
        if len(self._items) == self._items.maxlen:
            self._dropped += 1
        self._items.append(event)
        self._ready.set()

    async def take(self, timeout: float) -> tuple[list[Event], int]:
        """Wait up to *timeout* seconds for events; return them and how many were dropped."""
        with trio.move_on_after(timeout):
            await self._ready.wait()
        items, dropped = list(self._items), self._dropped
        self._items.clear()
        self._dropped = 0
        self._ready = trio.Event()
        return items, dropped


class Hub:
    """Fans the bus out to the open pages; see the module docstring."""

    def __init__(
        self, history: int = HISTORY, observe: Callable[[Event], None] | None = None
    ) -> None:
        self._history: deque[Event] = deque(maxlen=history)
        self._outboxes: set[Outbox] = set()
        self._observe = observe

    async def run(
        self, subscribe: Callable[..., Subscription], *, task_status: trio.TaskStatus[None]
    ) -> None:
        """Read events from ``subscribe("*")`` (a handle's or bus's method) until cancelled."""
        async with subscribe("*", buffer=SUBSCRIPTION_BUFFER) as events:
            task_status.started()
            async for event in events:
                if self._observe is not None:
                    self._observe(event)
                self._history.append(event)
                for outbox in self._outboxes:
                    outbox.put(event)

    def join(self) -> tuple[list[Event], Outbox]:
        """The events so far and an outbox for every later one, with nothing in between."""
        outbox = Outbox()
        self._outboxes.add(outbox)
        return list(self._history), outbox

    def recent(self) -> list[Event]:
        """The events kept for pages opened later, oldest first."""
        return list(self._history)

    def leave(self, outbox: Outbox) -> None:
        self._outboxes.discard(outbox)

    @property
    def pages(self) -> int:
        """How many pages are connected."""
        return len(self._outboxes)


def feed_message(
    kind: str,
    records: Mapping[str, HealthRecord],
    events: list[Event],
    dropped: int = 0,
    *,
    strips: Mapping[str, Element] | None = None,
    legend: Element | None = None,
    window: float | None = None,
) -> str:
    """One feed frame: ``{"type", "ts", "servers": [record...], "events": [...],
    "dropped"}``, with ``"strips"`` (each server's drawing, by name), ``"window"`` (the
    seconds they span) and ``"legend"`` when given."""
    message: dict[str, object] = {
        "type": kind,
        "ts": time.time(),
        "servers": list(records.values()),
        "events": events,
        "dropped": dropped,
    }
    if strips is not None:
        message["strips"] = strips
    if window is not None:
        message["window"] = window
    if legend is not None:
        message["legend"] = legend
    return msgspec.json.encode(message).decode()
