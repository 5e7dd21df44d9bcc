"""Capturing a supervisor's events in a test, and waiting for the ones that matter.

::

    async with capture_events(sup) as events:
        ...  # kill a server, say
        await events.wait_for("mcp.connected", server="calc", timeout=5)

:meth:`CapturedEvents.wait_for` returns the first matching event *after the last one it
returned* (so waiting twice for ``mcp.connected`` waits for a reconnection), looking at the
events already captured first; on timeout it fails with :class:`EventTimeout`, an
``AssertionError`` that lists what was seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Protocol

import trio

if TYPE_CHECKING:
    from ..events._bus import Subscription
    from ..events._catalog import Event

__all__ = ["CapturedEvents", "EventTimeout", "capture_events"]


class EventTimeout(AssertionError, TimeoutError):
    """No event matching what :meth:`CapturedEvents.wait_for` asked came in time."""


class CapturedEvents:
    """Every event a subscription received, in order; see :func:`capture_events`."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._cursor = 0
        self._arrived = trio.Event()

    def _add(self, event: object) -> None:
        self.events.append(event)
        self._arrived.set()
        self._arrived = trio.Event()

    def kinds(self, server: str | None = None) -> list[str]:
        """The kinds captured so far (of ``server``'s events only, if given)."""
        return [
            e.kind for e in self.events if server is None or getattr(e, "server", None) == server
        ]

    def matching(self, kind: str = "*", **fields: object) -> list[Any]:
        """The captured events whose kind matches the glob ``kind`` and whose fields equal
        ``fields``."""
        return [e for e in self.events if _matches(e, kind, fields)]

    async def wait_for(self, kind: str, *, timeout: float = 5.0, **fields: object) -> Any:  # noqa: ANN401
        """The next event (after the one last returned) whose kind matches the glob
        ``kind`` and whose fields equal ``fields``; :class:`EventTimeout` after
        ``timeout`` seconds."""
        with trio.move_on_after(timeout):
            while True:
                for i in range(self._cursor, len(self.events)):
                    if _matches(self.events[i], kind, fields):
                        self._cursor = i + 1
                        return self.events[i]
                await self._arrived.wait()
        wanted = ", ".join([repr(kind), *(f"{k}={v!r}" for k, v in fields.items())])
        seen = ", ".join(_short(e) for e in self.events[self._cursor :][-20:]) or "none"
        raise EventTimeout(f"no event {wanted} within {timeout} s; events since: {seen}")


def _matches(event: object, kind: str, fields: dict[str, object]) -> bool:
    if not fnmatchcase(getattr(event, "kind", ""), kind):
        return False
    return all(getattr(event, k, _MISSING) == v for k, v in fields.items())


_MISSING = object()


def _short(event: Event) -> str:
    server = getattr(event, "server", None)
    return f"{event.kind}({server})" if server else str(event.kind)


class _Subscribable(Protocol):
    """A supervisor from ``open_supervisor``, or a bus: what has events to subscribe to."""

    def subscribe(self, *patterns: str, buffer: int = ...) -> Subscription: ...


@asynccontextmanager
async def capture_events(
    sup: _Subscribable, *patterns: str, buffer: int = 65536
) -> AsyncIterator[CapturedEvents]:
    """Capture the events of ``sup`` (a supervisor from ``open_supervisor``, or a bus)
    whose kinds match ``patterns`` (default: all) for the block's duration."""
    captured = CapturedEvents()
    subscription = sup.subscribe(*(patterns or ("*",)), buffer=buffer)
    async with subscription as events, trio.open_nursery() as nursery:

        async def collect() -> None:
            async for event in events:
                captured._add(event)

        nursery.start_soon(collect)
        try:
            yield captured
        finally:
            nursery.cancel_scope.cancel()
