"""Supervisors: start children in order, restart them by OTP's rules, stop them in reverse."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import attrs
import trio

from ..log import get_logger
from ._errors import (
    NoSuchChild,
    StartFailed,
    SupervisorError,
    SupervisorGaveUp,
    collapse,
    collapsing,
)
from ._mailbox import Address, Envelope
from ._requests import DynamicChildren
from ._rules import RestartWindow, backoff_delay, children_to_restart, should_restart
from ._spec import (
    Backoff,
    Child,
    ChildSpec,
    Crashed,
    ExitReason,
    GiveUp,
    Intensity,
    Normal,
    Restart,
    Shutdown,
    Strategy,
)
from ._stats import ChildState, ChildStatistics, Notify, SupervisorStatistics

log = get_logger("supervisor.actors")

_LIVE = (ChildState.STARTING, ChildState.RUNNING, ChildState.RESTARTING)


@attrs.define(eq=False)
class _Slot:
    spec: ChildSpec
    window: RestartWindow | None
    state: ChildState = ChildState.STOPPED
    incarnation: Child | None = None
    scope: trio.CancelScope | None = None
    done: trio.Event | None = None
    generation: int = 0
    stopping: bool = False
    restarts: int = 0
    attempt: int = 0
    started_at: float = 0.0
    restart_at: float | None = None
    last_exit: ExitReason | None = None

    def open_addresses(self) -> None:
        for address in self.spec.addresses:
            address.open()

    def close_addresses(self) -> None:
        for address in self.spec.addresses:
            address.close_stopped()

    def start_over(self) -> None:
        """Start the backoff and the child's own restart count over."""
        self.attempt = 0
        if self.window is not None:
            self.window.reset()


@attrs.frozen
class _Exited:
    slot: _Slot
    generation: int
    reason: ExitReason


class _Status:
    """Wraps a child's task status: once it has started, only its supervisor stops it.

    Until then outside cancellation reaches it (a hung start can be cancelled); from
    then on its scope is shielded, so even a cancelled supervisor stops its children
    in order, each gracefully first.
    """

    __slots__ = ("_inner", "_scope", "_slot", "started_ok")

    def __init__(self, inner: trio.TaskStatus[None], scope: trio.CancelScope, slot: _Slot) -> None:
        self._inner = inner
        self._scope = scope
        self._slot = slot
        self.started_ok = False

    def started(self, value: None = None) -> None:
        self.started_ok = True
        self._scope.shield = True
        self._slot.state = ChildState.RUNNING
        self._slot.started_at = trio.current_time()
        self._inner.started()


_STOP = object()


class Supervisor(DynamicChildren):
    """A supervisor node: a child that starts, watches and restarts other children.

    Children start one after the other in the given order, each counting as started once
    it said so; they stop in reverse order, each given its ``shutdown_timeout`` to
    finish after ``request_stop`` before it is cancelled. Shutdown is graceful even
    when the supervisor itself is cancelled: children are shielded from outside
    cancellation and stopped by the supervisor alone.

    When a child exits, its restart type says whether it restarts
    (:func:`should_restart`) and the strategy which siblings restart with it
    (:func:`children_to_restart`). Each such exit counts as one restart, whatever the
    number of siblings restarted alongside. Before restarting, the supervisor waits the
    failed child's backoff delay; its mailbox stays open meanwhile, so calls queue.

    More restarts than the intensity allows and the supervisor gives up according to
    the child's ``give_up``: ``MARK_UNAVAILABLE`` closes only that child;
    ``ESCALATE`` stops every child and raises :class:`SupervisorGaveUp`, which the
    parent handles like any crash. Run it with :func:`open_tree`, or nest it with
    :func:`supervisor_spec`.

    The defaults are OTP's spirit: restart at once (``Backoff.none()``), give up after
    more than 3 restarts within 5 s (``Intensity()``). With a backoff, choose a period
    long enough to hold ``max_restarts`` delays, or the window never fills up and the
    supervisor never gives up; a child's own ``intensity`` with a long period and
    ``GiveUp.MARK_UNAVAILABLE`` expresses "give up after N attempts in a row".
    """

    def __init__(
        self,
        children: Sequence[ChildSpec] = (),
        *,
        name: str = "root",
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: Intensity | None = None,
        backoff: Backoff | None = None,
        notify: Notify | None = None,
        rng: random.Random | None = None,
        close_on_exit: bool = False,
    ) -> None:
        self.name = name
        self.strategy = strategy
        self.intensity = intensity if intensity is not None else Intensity()
        self.backoff = backoff if backoff is not None else Backoff.none()
        self._notify = notify
        self._rng = rng  # None: the parent's, or a fresh one at run()
        self._close_on_exit = close_on_exit
        self._window = RestartWindow(self.intensity)
        self._restarts = 0
        self._slots: list[_Slot] = []
        self._initial_ids = frozenset(spec.id for spec in children)
        for spec in children:
            self._add_slot(spec)
        self._control: trio.MemorySendChannel[object] | None = None
        self._nursery: trio.Nursery | None = None
        self._stop_requested = False
        self._killed = False

    def __repr__(self) -> str:
        return f"<Supervisor {self.name!r} {self.strategy.value} children={len(self._slots)}>"

    # -- public API (adding and removing children: DynamicChildren) --------------------

    def request_stop(self) -> None:
        """Ask the supervisor to stop its children (in reverse order) and return."""
        self._stop_requested = True
        if self._control is not None:
            self._control.send_nowait(_STOP)

    def address(self, id: str) -> Address:
        """The mailbox of actor ``id``: a child, or an actor below a nested supervisor."""
        for slot in self._slots:
            for address in slot.spec.addresses:
                if address.name == id:
                    return address
        raise NoSuchChild(f"supervisor {self.name!r} has no actor {id!r} below it")

    def which_children(self) -> list[tuple[str, ChildState, Child | None]]:
        """``(id, state, current incarnation)`` of each child, in start order."""
        return [(s.spec.id, s.state, s.incarnation) for s in self._slots]

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            name=self.name,
            strategy=self.strategy,
            intensity=self.intensity,
            restarts=self._restarts,
            children=tuple(
                ChildStatistics(
                    id=s.spec.id,
                    state=s.state,
                    restart=s.spec.restart,
                    restarts=s.restarts,
                    attempt=s.attempt,
                    last_exit=None if s.last_exit is None else s.last_exit.describe(),
                    next_restart_at=s.restart_at if s.state is ChildState.RESTARTING else None,
                )
                for s in self._slots
            ),
        )

    # -- running -----------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        """Start the children, supervise them until stopped, then stop them.

        Returns :class:`Shutdown` once stopped on request. Raises
        :class:`SupervisorGaveUp` after escalating, and :class:`StartFailed` if an
        escalating child fails its first start (the children already started are
        stopped first) — bare, not in an exception group.
        """
        if self._control is not None:
            raise SupervisorError(f"supervisor {self.name!r} is already running")
        if self._rng is None:
            self._rng = random.Random()
        send, receive = trio.open_memory_channel[object](math.inf)
        self._control = send
        if self._stop_requested:
            send.send_nowait(_STOP)
        try:
            # Raised in the nursery's own body: not worth a group around it.
            with collapsing():
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    try:
                        for slot in list(self._slots):
                            await self._first_start(slot)
                        task_status.started()
                        await self._supervise(receive)
                        return Shutdown()
                    finally:
                        with trio.CancelScope(shield=True):
                            await self._stop_all()
        finally:
            self._nursery = None
            self._fail_requests(receive)
            self._control = None
            send.close()

    async def _first_start(self, slot: _Slot) -> None:
        try:
            await self._start(slot)
        except StartFailed as exc:
            if slot.spec.give_up is GiveUp.MARK_UNAVAILABLE:
                # Not worth failing its siblings for: handle it as a crash.
                await self._exited(slot, Crashed(collapse(exc.__cause__ or exc)))
            else:
                raise

    async def _supervise(self, receive: trio.MemoryReceiveChannel[object]) -> None:
        while True:
            item: object = None
            with trio.move_on_at(self._next_restart_at()):
                item = await receive.receive()
            if item is _STOP:
                return
            if isinstance(item, _Exited):
                slot = item.slot
                if (
                    slot.generation == item.generation
                    and not slot.stopping
                    and slot.state is ChildState.RUNNING
                    and slot in self._slots
                ):
                    await self._exited(slot, item.reason)
            elif isinstance(item, Envelope):
                await self._serve_request(item)
            await self._restart_due()

    def _next_restart_at(self) -> float:
        due = [s.restart_at for s in self._slots if s.state is ChildState.RESTARTING]
        return min(due, default=math.inf)  # type: ignore[arg-type]

    # -- one child ---------------------------------------------------------------------

    def _add_slot(self, spec: ChildSpec) -> _Slot:
        if any(s.spec.id == spec.id for s in self._slots):
            raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
        own = spec.intensity
        if own is None and spec.give_up is GiveUp.MARK_UNAVAILABLE:
            own = self.intensity
        slot = _Slot(spec=spec, window=None if own is None else RestartWindow(own))
        self._slots.append(slot)
        return slot

    def _slot(self, id: str) -> _Slot:
        for slot in self._slots:
            if slot.spec.id == id:
                return slot
        raise NoSuchChild(f"supervisor {self.name!r} has no child {id!r}")

    async def _start(self, slot: _Slot) -> None:
        """Start one incarnation; raises StartFailed if it fails before it is ready."""
        assert self._nursery is not None
        slot.generation += 1
        slot.stopping = False
        slot.state = ChildState.STARTING
        slot.restart_at = None
        slot.done = trio.Event()
        slot.open_addresses()
        try:
            incarnation = slot.spec.start()
            if isinstance(incarnation, Supervisor):
                # Nested supervisors report through our hook and draw jitter from our
                # generator, unless given their own.
                if incarnation._notify is None:
                    incarnation._notify = self._notify
                if incarnation._rng is None:
                    incarnation._rng = self._rng
            slot.incarnation = incarnation
            await self._nursery.start(self._child_task, slot, incarnation, slot.generation)
        except Exception as exc:
            slot.incarnation = None
            slot.state = ChildState.STOPPED
            slot.started_at = trio.current_time()  # it was never up: not stable either
            raise StartFailed(
                f"child {slot.spec.id!r} of supervisor {self.name!r} failed to start: "
                f"{Crashed(collapse(exc)).describe()}",
                child=slot.spec.id,
            ) from collapse(exc)

    async def _child_task(
        self,
        slot: _Slot,
        incarnation: Child,
        generation: int,
        task_status: trio.TaskStatus[None],
    ) -> None:
        done = slot.done
        assert done is not None
        scope = trio.CancelScope()
        slot.scope = scope
        status = _Status(task_status, scope, slot)
        reason: ExitReason = Shutdown()  # what being cancelled by us means
        try:
            with scope:
                result = await incarnation.run(task_status=status)
                reason = Normal() if result is None else result
                if not status.started_ok:
                    raise RuntimeError("returned before it said it started")
        except BaseException as exc:
            if not status.started_ok or isinstance(
                exc, trio.Cancelled | KeyboardInterrupt | SystemExit
            ):
                done.set()
                raise
            reason = Crashed(collapse(exc))
        finally:
            done.set()
            if slot.generation == generation:
                slot.last_exit = reason
        if slot.generation == generation and not slot.stopping and self._control is not None:
            self._control.send_nowait(_Exited(slot, generation, reason))

    async def _stop(self, slot: _Slot) -> None:
        """Stop the slot's incarnation: ask, wait its shutdown_timeout, then cancel."""
        slot.stopping = True
        done, incarnation, scope = slot.done, slot.incarnation, slot.scope
        slot.incarnation = None
        if done is None or done.is_set():
            return
        try:
            if incarnation is not None and not self._killed:
                incarnation.request_stop()
        except Exception:
            log.exception("request_stop failed; cancelling", child=slot.spec.id)
        else:
            with trio.move_on_after(0 if self._killed else slot.spec.shutdown_timeout):
                await done.wait()
        if not done.is_set():
            if isinstance(incarnation, Supervisor):
                incarnation._kill()  # its own children are shielded from our cancel
            if scope is not None:
                scope.cancel()
            await done.wait()

    def _kill(self) -> None:
        """Our parent's patience ran out: cancel every child now, ours and below."""
        self._killed = True
        for slot in self._slots:
            if isinstance(slot.incarnation, Supervisor):
                slot.incarnation._kill()
            if slot.scope is not None:
                slot.scope.cancel()

    async def _stop_all(self) -> None:
        try:
            for slot in reversed(self._slots):
                if slot.state in _LIVE:
                    await self._stop(slot)
                    slot.state = ChildState.STOPPED
        finally:
            for slot in self._slots:
                if slot.scope is not None:
                    slot.scope.cancel()
                if self._close_on_exit or slot.spec.id not in self._initial_ids:
                    slot.close_addresses()

    def _retire(self, slot: _Slot) -> None:
        """The child will not run again by itself."""
        slot.state = ChildState.STOPPED
        slot.restart_at = None
        slot.close_addresses()
        if slot.spec.restart is Restart.TEMPORARY and slot in self._slots:
            self._slots.remove(slot)

    # -- OTP's rules -------------------------------------------------------------------

    async def _exited(self, slot: _Slot, reason: ExitReason) -> None:
        """Apply the restart rules to a child that exited (or failed to restart)."""
        spec = slot.spec
        slot.last_exit = reason
        slot.incarnation = None
        if not should_restart(spec.restart, reason):
            self._retire(slot)
            return
        now = trio.current_time()
        backoff = spec.backoff if spec.backoff is not None else self.backoff
        if slot.attempt and now - slot.started_at >= backoff.stable_after:
            slot.start_over()  # it was stable
        slot.attempt += 1
        own_exceeded = slot.window is not None and slot.window.record(now)
        if spec.give_up is GiveUp.MARK_UNAVAILABLE:
            if own_exceeded:
                self._mark_unavailable(slot, reason)
                return
        elif own_exceeded or self._window.record(now):
            self._escalate(slot, reason, own=own_exceeded)
        self._restarts += 1

        restart_at = now + backoff_delay(backoff, slot.attempt, self._rng)
        live = [s.spec.id for s in self._slots if s.state in _LIVE or s is slot]
        victims = [self._slot(id) for id in children_to_restart(self.strategy, live, spec.id)]
        for other in reversed(victims):
            if other is slot:
                continue
            if other.state in (ChildState.STARTING, ChildState.RUNNING):
                await self._stop(other)
            if other.spec.restart is Restart.TEMPORARY:
                self._retire(other)
                continue
            other.state = ChildState.RESTARTING
            other.restart_at = max(restart_at, other.restart_at or restart_at)
        slot.state = ChildState.RESTARTING
        slot.restart_at = restart_at
        log.warning(
            "child exited; restarting",
            supervisor=self.name,
            child=spec.id,
            reason=reason.describe(),
            attempt=slot.attempt,
            delay=restart_at - now,
        )

    async def _restart_due(self) -> None:
        """Start, in start order, every child whose restart time has come."""
        while True:
            now = trio.current_time()
            slot = next(
                (
                    s
                    for s in self._slots
                    if s.state is ChildState.RESTARTING and s.restart_at is not None
                    and s.restart_at <= now
                ),
                None,
            )
            if slot is None:
                return
            slot.restarts += 1
            try:
                await self._start(slot)
            except StartFailed as exc:
                await self._exited(slot, Crashed(collapse(exc.__cause__ or exc)))
                continue
            self._emit(
                "supervisor.child.restarted",
                child=slot.spec.id,
                strategy=self.strategy.value,
                restarts=slot.restarts,
                reason=slot.last_exit.describe() if slot.last_exit else "",
            )

    def _mark_unavailable(self, slot: _Slot, reason: ExitReason) -> None:
        slot.state = ChildState.UNAVAILABLE
        slot.restart_at = None
        attempts = slot.attempt - 1
        for address in slot.spec.addresses:
            address.close_unavailable(reason.describe(), attempts)
        log.error(
            "child gave up; marked unavailable",
            supervisor=self.name,
            child=slot.spec.id,
            reason=reason.describe(),
            restarts=attempts,
        )
        self._emit(
            "supervisor.child.gave_up",
            child=slot.spec.id,
            restarts=attempts,
            reason=reason.describe(),
        )

    def _escalate(self, slot: _Slot, reason: ExitReason, own: bool) -> None:
        """Give up: report it and raise SupervisorGaveUp (the caller's finally stops all)."""
        if own and slot.window is not None:
            limit, restarts = slot.window.intensity, slot.attempt - 1
            whose = "its own restart intensity"
        else:
            limit, restarts = self.intensity, self._window.count(trio.current_time()) - 1
            whose = "the supervisor's restart intensity"
        log.error(
            "restart intensity exceeded; supervisor gives up",
            supervisor=self.name,
            child=slot.spec.id,
            reason=reason.describe(),
        )
        self._emit(
            "supervisor.escalated", child=slot.spec.id, restarts=restarts, reason=reason.describe()
        )
        error = SupervisorGaveUp(
            f"supervisor {self.name!r} gave up: child {slot.spec.id!r} exceeded {whose} "
            f"({limit.max_restarts} in {limit.within_seconds:g} s); "
            f"last exit: {reason.describe()}",
            supervisor=self.name,
            child=slot.spec.id,
            restarts=restarts,
        )
        if isinstance(reason, Crashed):
            raise error from reason.error
        raise error

    def _emit(self, kind: str, **fields: object) -> None:
        if self._notify is not None:
            try:
                self._notify(kind, supervisor=self.name, **fields)
            except Exception:
                log.exception("notify hook failed", kind=kind)
