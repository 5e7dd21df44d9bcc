"""A supervisor's children table: its children's slots in start order, found by id.

OTP's supervisor keeps its children in one list it walks in start order (restarting) and
in reverse (stopping); so does this table. It knows which child owns which mailbox, the
restart window each child gets under its spec, and what a snapshot of them shows; it
starts and stops nothing (that is :mod:`._incarnations`'s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._errors import NoSuchChild, SupervisorError
from ._mailbox import Address
from ._rules import RestartWindow
from ._slot import Slot
from ._spec import Child, ChildSpec, GiveUp, Intensity
from ._stats import ChildState, ChildStatistics


def own_window(spec: ChildSpec, intensity: Intensity) -> RestartWindow | None:
    """The child's own restart window under ``spec`` (``intensity``: its supervisor's)."""
    own = spec.intensity
    if own is None and spec.give_up is GiveUp.MARK_UNAVAILABLE:
        own = intensity  # giving up on it alone needs a limit of its own
    return None if own is None else RestartWindow(own)


class Children:
    """The children of the supervisor ``name``, in start order (:attr:`slots`)."""

    __slots__ = ("initial_ids", "name", "slots")

    def __init__(self, name: str, specs: Sequence[ChildSpec], intensity: Intensity) -> None:
        self.name = name
        self.slots: list[Slot] = []
        #: the children it was made with (their addresses outlive a run of it)
        self.initial_ids = frozenset(spec.id for spec in specs)
        for spec in specs:
            self.add(spec, intensity)

    def __len__(self) -> int:
        return len(self.slots)

    def add(self, spec: ChildSpec, intensity: Intensity) -> Slot:
        """Append a slot for ``spec`` (``intensity``: its supervisor's, now)."""
        if any(s.spec.id == spec.id for s in self.slots):
            raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
        slot = Slot(spec=spec, window=own_window(spec, intensity))
        self.slots.append(slot)
        return slot

    def remove(self, slot: Slot) -> None:
        """Forget ``slot``, if it is still here."""
        if slot in self.slots:
            self.slots.remove(slot)

    def __getitem__(self, id: str) -> Slot:
        for slot in self.slots:
            if slot.spec.id == id:
                return slot
        raise NoSuchChild(f"supervisor {self.name!r} has no child {id!r}")

    def idle(self, id: str, hint: str) -> Slot:
        """Child ``id``, which must be stopped or unavailable (else ``hint`` says what to do)."""
        slot = self[id]
        if slot.state not in (ChildState.STOPPED, ChildState.UNAVAILABLE):
            raise SupervisorError(
                f"child {id!r} of supervisor {self.name!r} is {slot.state.value}; {hint}"
            )
        return slot

    def same_addresses(self, slot: Slot, spec: ChildSpec) -> None:
        """Refuse ``spec`` in ``slot``'s place unless it serves the same addresses."""
        if spec.addresses != slot.spec.addresses:
            raise ValueError(
                f"child {spec.id!r} of supervisor {self.name!r}: a spec in its place must "
                "serve the same addresses"
            )

    def window_under(
        self, slot: Slot, spec: ChildSpec, intensity: Intensity
    ) -> RestartWindow | None:
        """The child's own restart window under ``spec``, its restarts so far kept."""
        window = own_window(spec, intensity)
        if window is not None and slot.window is not None:
            window.adopt(slot.window)
        return window

    def arrange(self, ids: Sequence[str]) -> None:
        """Put the children in the order of ``ids``, those not named after them."""
        rank = {id: i for i, id in enumerate(ids)}
        self.slots.sort(key=lambda s: rank.get(s.spec.id, len(rank)))  # stable

    def address(self, id: str) -> Address:
        """The mailbox of actor ``id``: a child, or an actor below a nested supervisor."""
        for slot in self.slots:
            for address in slot.spec.addresses:
                if address.name == id:
                    return address
        raise NoSuchChild(f"supervisor {self.name!r} has no actor {id!r} below it")

    def next_restart_at(self) -> float:
        """When the first child waiting out its backoff is due (``inf``: none waits)."""
        due = [
            s.restart_at
            for s in self.slots
            if s.state is ChildState.RESTARTING and s.restart_at is not None
        ]
        return min(due, default=math.inf)

    def due(self, now: float) -> Slot | None:
        """The first child, in start order, whose restart time has come by ``now``."""
        for s in self.slots:
            if (
                s.state is ChildState.RESTARTING
                and s.restart_at is not None
                and s.restart_at <= now
            ):
                return s
        return None

    def which(self) -> list[tuple[str, ChildState, Child | None]]:
        """``(id, state, current incarnation)`` of each child, in start order."""
        return [(s.spec.id, s.state, s.incarnation) for s in self.slots]

    def statistics(self) -> tuple[ChildStatistics, ...]:
        """A snapshot of each child, in start order."""
        return tuple(
            ChildStatistics(
                id=s.spec.id,
                state=s.state,
                restart=s.spec.restart,
                restarts=s.restarts,
                attempt=s.attempt,
                last_exit=None if s.last_exit is None else s.last_exit.describe(),
                next_restart_at=s.restart_at if s.state is ChildState.RESTARTING else None,
            )
            for s in self.slots
        )
