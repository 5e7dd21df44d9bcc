"""Start slots: how many servers connect at once, and who goes next.

Starting a server — spawning it, the MCP handshake, its first listing — is mostly CPU
(a Python server spends a few hundred milliseconds importing). Many starting at once on a
small machine share the CPU so thinly that each takes many times longer, every one of them
runs out of its ``initTimeout``, and they all retry together. :class:`StartSlots` lets at
most ``limit`` connect at once; the rest wait their turn, first come first served.

Why not a :class:`trio.Semaphore`: its waiters are served in the order they *reached* it,
and trio runs the tasks that are ready at one moment in a random order, so servers started
in order would queue in a shuffled one. A :class:`Turn` is taken synchronously — by the
supervision tree's start sequence, in start order — and waited on later.
"""

from __future__ import annotations

import collections

import trio


class Turn:
    """One place in the queue of :class:`StartSlots`: wait for it with :meth:`wait`,
    give it up (or the slot it got) with :meth:`close`. Closing twice is harmless."""

    __slots__ = ("_granted", "_slots", "_state")

    def __init__(self, slots: StartSlots) -> None:
        self._slots = slots
        self._granted = trio.Event()
        self._state = "waiting"  # -> "holding" -> "closed"

    @property
    def holding(self) -> bool:
        """Whether this turn holds a slot now."""
        return self._state == "holding"

    async def wait(self) -> None:
        """Return once this turn holds a slot (at once if it does already)."""
        await self._granted.wait()

    def close(self) -> None:
        """Give the slot back (the next turn in the queue gets it), or leave the queue."""
        if self._state == "holding":
            self._slots._release()
        elif self._state == "waiting":
            self._slots._leave(self)
        self._state = "closed"

    def _grant(self) -> None:
        self._state = "holding"
        self._granted.set()


class StartSlots:
    """At most ``limit`` turns hold a slot at once; the others wait in the order they
    were taken (:meth:`turn`)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"start slots: limit must be at least 1, not {limit}")
        self.limit = limit
        self._holding = 0
        self._queue: collections.deque[Turn] = collections.deque()

    def __repr__(self) -> str:
        return f"<StartSlots {self._holding}/{self.limit} held, {len(self._queue)} waiting>"

    def turn(self) -> Turn:
        """Join the queue now (no checkpoint); the turn holds a slot once one is free
        and every turn taken before it has had one."""
        turn = Turn(self)
        self._queue.append(turn)
        self._admit()
        return turn

    def resize(self, limit: int) -> None:
        """Let ``limit`` turns hold a slot at once from now on (those holding one keep it)."""
        if limit < 1:
            raise ValueError(f"start slots: limit must be at least 1, not {limit}")
        self.limit = limit
        self._admit()

    def statistics(self) -> tuple[int, int]:
        """``(holding, waiting)``: slots held now, and turns waiting for one."""
        return self._holding, len(self._queue)

    def _admit(self) -> None:
        while self._queue and self._holding < self.limit:
            self._holding += 1
            self._queue.popleft()._grant()

    def _release(self) -> None:
        self._holding -= 1
        self._admit()

    def _leave(self, turn: Turn) -> None:
        self._queue.remove(turn)
