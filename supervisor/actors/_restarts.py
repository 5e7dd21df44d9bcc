"""What a supervisor decides when a child exits: OTP's restart rules, counted and scheduled.

A child that exits is restarted or not by its restart type (:func:`should_restart`),
with the siblings its supervisor's strategy names (:func:`children_to_restart`) — all
of them stopped first, in reverse start order, and started again in start order once
the failed child's backoff delay is over. Each exit that triggers a restart is counted
once against the supervisor's intensity and the child's own; exceeding the child's own
gives up on it alone (``MARK_UNAVAILABLE``) or on the supervisor (``ESCALATE``),
exceeding the supervisor's gives up on the supervisor (:class:`SupervisorGaveUp`).
Every decision is reported through the supervisor's hook before it takes effect.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import trio

from ..log import get_logger
from ._children import Children
from ._decisions import Decision, GaveUp, NotRestarted, Restarted, RestartScheduled
from ._errors import StartFailed, SupervisorGaveUp, collapse
from ._incarnations import Incarnations
from ._rules import RestartWindow, backoff_delay, children_to_restart, should_restart
from ._slot import LIVE, Hurried, Slot
from ._spec import Backoff, Crashed, ExitReason, GiveUp, Intensity, Restart, Strategy
from ._stats import ChildState

log = get_logger("supervisor.actors")


class Restarts:
    """One supervisor's restart policy applied to its children's exits.

    Holds the policy (``strategy``, ``intensity``, the default ``backoff``), the
    supervisor's restart window and the count of restarts it decided on; ``report``
    is the supervisor's decision hook, ``rng`` the generator backoff jitter is drawn
    from (``None`` until it runs).
    """

    __slots__ = (
        "backoff",
        "children",
        "count",
        "incarnations",
        "intensity",
        "report",
        "rng",
        "strategy",
        "window",
    )

    def __init__(
        self,
        children: Children,
        incarnations: Incarnations,
        *,
        strategy: Strategy,
        intensity: Intensity,
        backoff: Backoff,
        report: Callable[[Decision], None],
        rng: random.Random | None,
    ) -> None:
        self.children = children
        self.incarnations = incarnations
        self.strategy = strategy
        self.intensity = intensity
        self.backoff = backoff
        self.report = report
        self.rng = rng
        self.window = RestartWindow(intensity)
        #: restarts decided on, ever: one per exit that triggered one
        self.count = 0

    def set_policy(self, strategy: Strategy, intensity: Intensity) -> None:
        """Decide by ``strategy`` and ``intensity`` from now on (the restarts already
        counted still count)."""
        self.strategy = strategy
        if intensity != self.intensity:
            window = RestartWindow(intensity)
            window.adopt(self.window)
            self.intensity, self.window = intensity, window

    async def exited(self, slot: Slot, reason: ExitReason) -> None:
        """Apply the restart rules to a child that exited (or failed to restart)."""
        spec = slot.spec
        name = self.children.name
        slot.last_exit = reason
        slot.incarnation = None
        if not should_restart(spec.restart, reason):
            self.incarnations.retire(slot)
            if isinstance(reason, Crashed):
                log.warning(
                    "child crashed; not restarted",
                    supervisor=name,
                    child=spec.id,
                    restart=spec.restart.value,
                    reason=reason.describe(),
                )
            self.report(
                NotRestarted(
                    supervisor=name,
                    child=spec.id,
                    crashed=isinstance(reason, Crashed),
                    reason=reason.describe(),
                )
            )
            return
        now = trio.current_time()
        backoff = spec.backoff if spec.backoff is not None else self.backoff
        if slot.attempt and now - slot.started_at >= backoff.stable_after:
            slot.start_over()  # it was stable
        slot.attempt += 1
        if isinstance(reason, Crashed) and reason.permanent:
            # Restarting soon cannot help: give up now, as the child's give_up says.
            if spec.give_up is GiveUp.MARK_UNAVAILABLE:
                self._mark_unavailable(slot, reason, permanent=True)
                return
            self._escalate(slot, reason, own=True, permanent=True)
        if slot.window is not None and slot.window.record(now):
            if spec.give_up is GiveUp.MARK_UNAVAILABLE:
                self._mark_unavailable(slot, reason)
                return
            self._escalate(slot, reason, own=True)
        if self.window.record(now):
            self._escalate(slot, reason, own=False)
        self.count += 1

        delay = backoff_delay(backoff, slot.attempt, self.rng)
        restart_at = now + delay
        slot.state = ChildState.RESTARTING
        slot.restart_at = restart_at
        log.warning(
            "child exited; restarting",
            supervisor=name,
            child=spec.id,
            reason=reason.describe(),
            attempt=slot.attempt,
            delay=delay,
        )
        self._scheduled(slot, spec.id, now, reason)
        self._hurry(slot)
        # (A child being stopped on request is not restarted with its siblings.)
        slots = self.children.slots
        live = [s.spec.id for s in slots if s.state in LIVE and not s.leaving]
        victims = [self.children[id] for id in children_to_restart(self.strategy, live, spec.id)]
        for other in reversed(victims):
            if other is slot:
                continue
            if other.state in (ChildState.STARTING, ChildState.RUNNING):
                await self.incarnations.stop(other)
            if other.spec.restart is Restart.TEMPORARY:
                self.incarnations.retire(other)
                continue
            other.state = ChildState.RESTARTING
            # A sibling already waiting out a longer backoff keeps waiting.
            other.restart_at = max(restart_at, other.restart_at or restart_at)
        for other in victims:
            if other is not slot and other.state is ChildState.RESTARTING:
                self._scheduled(other, spec.id, now, reason)

    def _hurry(self, slot: Slot) -> None:
        """Await the child's ``spec.hurry`` while it waits out its delay (see ChildSpec)."""
        hurry, restart_at = slot.spec.hurry, slot.restart_at
        if hurry is None or restart_at is None or restart_at <= trio.current_time():
            return
        nursery, control = self.incarnations.nursery, self.incarnations.control
        assert nursery is not None and control is not None
        slot.calm()
        scope = slot.hurrying = trio.CancelScope()
        name = self.children.name

        async def hurrying() -> None:
            with scope:
                try:
                    await hurry()
                except Exception:
                    log.exception("hurrying a restart failed", supervisor=name, child=slot.id)
                    return
                control.send_nowait(Hurried(slot, restart_at))

        nursery.start_soon(hurrying)

    def _scheduled(self, slot: Slot, cause: str, now: float, reason: ExitReason) -> None:
        """Report that ``slot`` will restart at its ``restart_at`` because ``cause`` exited."""
        assert slot.restart_at is not None
        self.report(
            RestartScheduled(
                supervisor=self.children.name,
                child=slot.spec.id,
                cause=cause,
                strategy=self.strategy,
                attempt=slot.attempt,
                delay=slot.restart_at - now,
                at=slot.restart_at,
                reason=reason.describe(),
            )
        )

    async def restart_due(self) -> None:
        """Start, in start order, every child whose restart time has come."""
        while True:
            slot = self.children.due(trio.current_time())
            if slot is None:
                return
            slot.restarts += 1
            try:
                await self.incarnations.start(slot)
            except StartFailed as exc:
                await self.exited(slot, Crashed(collapse(exc.__cause__ or exc)))
                continue
            self.report(
                Restarted(
                    supervisor=self.children.name,
                    child=slot.spec.id,
                    strategy=self.strategy,
                    restarts=slot.restarts,
                    reason=slot.last_exit.describe() if slot.last_exit else "",
                )
            )

    def _mark_unavailable(self, slot: Slot, reason: ExitReason, permanent: bool = False) -> None:
        assert slot.window is not None
        slot.calm()
        slot.state = ChildState.UNAVAILABLE
        slot.restart_at = None
        attempts = slot.attempt - 1
        for address in slot.spec.addresses:
            address.close_unavailable(reason.describe(), attempts)
        log.error(
            "child gave up; marked unavailable",
            supervisor=self.children.name,
            child=slot.spec.id,
            reason=reason.describe(),
            restarts=attempts,
            permanent=permanent,
        )
        self.report(
            GaveUp(
                supervisor=self.children.name,
                child=slot.spec.id,
                attempt=slot.attempt,
                restarts=attempts,
                limit=slot.window.intensity,
                escalated=False,
                own=True,
                reason=reason.describe(),
                permanent=permanent,
            )
        )

    def _escalate(self, slot: Slot, reason: ExitReason, own: bool, permanent: bool = False) -> None:
        """Give up: report it and raise SupervisorGaveUp (the caller's finally stops all).

        ``permanent``: no limit was exceeded; the child's error said restarting cannot help.
        """
        name = self.children.name
        now = trio.current_time()
        if permanent:
            limit = slot.window.intensity if slot.window is not None else self.intensity
            restarts = slot.attempt - 1
            whose = ""
        elif own:
            assert slot.window is not None
            limit, restarts = slot.window.intensity, slot.window.count(now) - 1
            whose = "its own restart intensity"
        else:
            limit, restarts = self.intensity, self.window.count(now) - 1
            whose = "the supervisor's restart intensity"
        log.error(
            "child cannot be restarted; supervisor gives up"
            if permanent
            else "restart intensity exceeded; supervisor gives up",
            supervisor=name,
            child=slot.spec.id,
            reason=reason.describe(),
        )
        self.report(
            GaveUp(
                supervisor=name,
                child=slot.spec.id,
                attempt=slot.attempt,
                restarts=restarts,
                limit=limit,
                escalated=True,
                own=own,
                reason=reason.describe(),
                permanent=permanent,
            )
        )
        why = (
            f"child {slot.spec.id!r} cannot be restarted (its error says restarting cannot help)"
            if permanent
            else f"child {slot.spec.id!r} exceeded {whose} ({limit.describe()})"
        )
        error = SupervisorGaveUp(
            f"supervisor {name!r} gave up: {why}; last exit: {reason.describe()}",
            supervisor=name,
            child=slot.spec.id,
            restarts=restarts,
        )
        if isinstance(reason, Crashed):
            raise error from reason.error
        raise error
