"""Supervisors: start children in order, restart them by OTP's rules, stop them."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import cast

import attrs
import trio

from ..log import get_logger
from ._decisions import (
    Decision,
    GaveUp,
    Notify,
    NotRestarted,
    Restarted,
    RestartScheduled,
    StartedOver,
    Terminated,
)
from ._errors import (
    NoSuchChild,
    StartFailed,
    SupervisorError,
    SupervisorGaveUp,
    SupervisorNotRunning,
    collapse,
    collapsing,
)
from ._mailbox import Envelope
from ._requests import fail_requests, request
from ._rules import (
    RestartWindow,
    backoff_delay,
    children_to_restart,
    jitter_rng,
    should_restart,
)
from ._slot import LIVE, Exited, Hurried, Slot, StartedStatus
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
from ._stats import ChildState, ChildStatistics, SupervisorStatistics

log = get_logger("supervisor.actors")

_STOP = object()
#: Requests that stop a running child first: in a task of their own (see _drain_first).
_DRAIN_FIRST = frozenset({"terminate_child", "replace_child"})


@attrs.frozen(eq=False)
class _Drained:
    """A child a request stopped first (``_drain_first``) has stopped: serve the request."""

    env: Envelope
    op: str
    arg: object
    slot: Slot


class Tree:
    """A supervisor node: a child that starts, watches and restarts other children.

    Children start one after the other in the given order, each counting as started once
    it said so. On the way out each child is asked to stop (``request_stop``) and given
    its ``shutdown_timeout`` to finish before it is cancelled; children stop
    concurrently, each within its own deadline, except where order means something —
    under ``rest_for_one``, or with ``ordered_shutdown`` — where they stop one after the
    other in reverse start order. Shutdown is graceful even when the supervisor itself is
    cancelled: children are shielded from outside cancellation and stopped by it alone.

    When a child exits, its restart type says whether it restarts
    (:func:`should_restart`) and the strategy which siblings restart with it
    (:func:`children_to_restart`). Restart intensity is counted as OTP counts it: one
    restart per exit that triggers one, whatever the number of siblings restarted
    alongside, against the supervisor's ``intensity`` — for every child. A child with
    its own ``intensity`` (in the child spec; a ``MARK_UNAVAILABLE`` child without one
    gets a copy of the supervisor's) is counted against that first, from its last stable
    run on; exceeding it does what the child's ``give_up`` says:
    ``MARK_UNAVAILABLE`` gives up on that child alone (its calls fail fast, its siblings
    are untouched, nothing is counted against the supervisor), ``ESCALATE`` makes the
    supervisor give up. Exceeding the supervisor's intensity always makes it give up: it
    stops every child and raises :class:`SupervisorGaveUp`, which its parent handles
    like any crash.

    Before restarting, the supervisor waits the failed child's backoff delay; a sibling
    restarted alongside waits at least as long as it had left to wait already. Mailboxes
    stay open meanwhile, so calls queue. Each decision is reported through ``notify``
    (see :mod:`supervisor.actors._decisions`) before anything else happens.

    The defaults are OTP's: restart at once (``Backoff.none()``), give up after more
    than 3 restarts within 5 s (``Intensity()``). With a backoff, choose a period long
    enough to hold ``max_restarts`` delays, or the window never fills up; a child's own
    ``intensity`` with an infinite period and ``GiveUp.MARK_UNAVAILABLE`` expresses
    "give up on it after N attempts in a row".
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
        ordered_shutdown: bool = False,
    ) -> None:
        self.name = name
        self.strategy = strategy
        self.intensity = intensity if intensity is not None else Intensity()
        self.backoff = backoff if backoff is not None else Backoff.none()
        self._notify = notify
        self._rng = rng  # None: the parent's, or a fresh one at run()
        self._close_on_exit = close_on_exit
        self._ordered_shutdown = ordered_shutdown
        self._ordered = ordered_shutdown or strategy is Strategy.REST_FOR_ONE
        self._window = RestartWindow(self.intensity)
        self._restarts = 0
        self._slots: list[Slot] = []
        self._initial_ids = frozenset(spec.id for spec in children)
        for spec in children:
            self._add_slot(spec)
        self._control: trio.MemorySendChannel[object] | None = None
        self._nursery: trio.Nursery | None = None
        self._stop_requested = False
        self._killed = False

    def __repr__(self) -> str:
        return f"<Tree {self.name!r} {self.strategy.value} children={len(self._slots)}>"

    # -- public API --------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the supervisor to stop its children and return."""
        self._stop_requested = True
        if self._control is not None:
            self._control.send_nowait(_STOP)

    def address(self, id: str):  # noqa: ANN201 - an Address
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

    # OTP's start_child / terminate_child / restart_child / delete_child. Each is a
    # request on the control channel, served by the loop between exits and restarts, so
    # it never interleaves with them.

    async def start_child(self, spec: ChildSpec) -> None:
        """Add ``spec`` as the last child and start it.

        Raises :class:`StartFailed` if it fails to start (it is then not added), or
        ``ValueError`` if a child of that id exists.
        """
        await request(self._control, self.name, "start_child", spec)

    async def terminate_child(self, id: str) -> None:
        """Stop a child for good (gracefully, then cancelled). Its spec stays, unless
        it is temporary; calls to it fail fast until :meth:`restart_child`."""
        await request(self._control, self.name, "terminate_child", id)

    async def restart_child(self, id: str) -> None:
        """Start again a child that is stopped or unavailable, with a fresh restart count.

        Raises :class:`SupervisorError` if it is running, :class:`StartFailed` if it
        fails to start.
        """
        await request(self._control, self.name, "restart_child", id)

    async def delete_child(self, id: str) -> None:
        """Forget a child that is stopped or unavailable."""
        await request(self._control, self.name, "delete_child", id)

    # Beyond OTP: what a reconfiguration does to a running tree. None of it is a crash,
    # and none of it is counted against a restart intensity.

    async def replace_child(self, spec: ChildSpec) -> None:
        """Put ``spec`` in the place of the child of its id, and start it: the running
        incarnation (if any) is stopped gracefully first, as for a shutdown. The spec must
        serve the same addresses, which stay open throughout: calls queued meanwhile are
        served by the new incarnation. The child's counts start over (reported as
        :class:`StartedOver`). A new incarnation that fails to start is handled as a
        crash of the child.
        """
        await request(self._control, self.name, "replace_child", spec)

    async def update_child(self, spec: ChildSpec) -> None:
        """Take ``spec`` for the child of its id from its next decision on (restart type,
        backoff, give-up, own intensity — its restarts so far still count — and shutdown
        timeout), without stopping it. The spec must serve the same addresses."""
        await request(self._control, self.name, "update_child", spec)

    async def arrange(self, ids: Sequence[str]) -> None:
        """Put the children in the order of ``ids`` (those not named keep their order,
        after them): the order ``rest_for_one`` and ``one_for_all`` restart in, and the
        reverse of the order they stop in."""
        await request(self._control, self.name, "arrange", tuple(ids))

    async def set_policy(self, strategy: Strategy, intensity: Intensity) -> None:
        """Use ``strategy`` and ``intensity`` for the decisions from now on (the restarts
        already counted still count against the new intensity)."""
        await request(self._control, self.name, "set_policy", (strategy, intensity))

    # -- running -----------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        """Start the children, supervise them until stopped, then stop them.

        Returns :class:`Shutdown` once stopped on request. Raises
        :class:`SupervisorGaveUp` after giving up, and :class:`StartFailed` if an
        escalating child fails its first start (the children already started are
        stopped first) — bare, not in an exception group.
        """
        if self._control is not None:
            raise SupervisorError(f"supervisor {self.name!r} is already running")
        if self._rng is None:
            self._rng = jitter_rng.get() or random.Random()
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
            fail_requests(receive, self.name)
            self._control = None
            send.close()

    async def _first_start(self, slot: Slot) -> None:
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
            if isinstance(item, Exited):
                slot = item.slot
                if (
                    slot.generation == item.generation
                    and not slot.stopping
                    and slot.state is ChildState.RUNNING
                    and slot in self._slots
                ):
                    await self._exited(slot, item.reason)
            elif isinstance(item, Hurried):
                slot = item.slot
                if slot.state is ChildState.RESTARTING and slot.restart_at == item.restart_at:
                    slot.restart_at = trio.current_time()
            elif isinstance(item, Envelope):
                await self._serve_request(item)
            elif isinstance(item, _Drained):
                await self._serve_drained(item)
            await self._restart_due()

    def _next_restart_at(self) -> float:
        due = [
            s.restart_at
            for s in self._slots
            if s.state is ChildState.RESTARTING and s.restart_at is not None
        ]
        return min(due, default=math.inf)

    # -- one child ---------------------------------------------------------------------

    def _add_slot(self, spec: ChildSpec) -> Slot:
        if any(s.spec.id == spec.id for s in self._slots):
            raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
        own = spec.intensity
        if own is None and spec.give_up is GiveUp.MARK_UNAVAILABLE:
            own = self.intensity  # giving up on it alone needs a limit of its own
        slot = Slot(spec=spec, window=None if own is None else RestartWindow(own))
        self._slots.append(slot)
        return slot

    def _slot(self, id: str) -> Slot:
        for slot in self._slots:
            if slot.spec.id == id:
                return slot
        raise NoSuchChild(f"supervisor {self.name!r} has no child {id!r}")

    async def _start(self, slot: Slot) -> None:
        """Start one incarnation; raises StartFailed if it fails before it is ready."""
        assert self._nursery is not None
        slot.calm()
        slot.generation += 1
        slot.stopping = False
        slot.state = ChildState.STARTING
        slot.restart_at = None
        slot.done = trio.Event()
        slot.open_addresses()
        try:
            incarnation = slot.spec.start()
            if isinstance(incarnation, Tree):
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
        slot: Slot,
        incarnation: Child,
        generation: int,
        task_status: trio.TaskStatus[None],
    ) -> None:
        done = slot.done
        assert done is not None
        scope = trio.CancelScope()
        slot.scope = scope
        status = StartedStatus(task_status, scope, slot)
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
            self._control.send_nowait(Exited(slot, generation, reason))

    async def _stop(self, slot: Slot) -> None:
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
            if isinstance(incarnation, Tree):
                incarnation._kill()  # its own children are shielded from our cancel
            if scope is not None:
                scope.cancel()
            await done.wait()

    async def _stop_for_good(self, slot: Slot) -> None:
        await self._stop(slot)
        slot.state = ChildState.STOPPED

    def _kill(self) -> None:
        """Our parent's patience ran out: cancel every child now, ours and below."""
        self._killed = True
        for slot in self._slots:
            if isinstance(slot.incarnation, Tree):
                slot.incarnation._kill()
            if slot.scope is not None:
                slot.scope.cancel()

    async def _stop_all(self) -> None:
        try:
            live = [s for s in reversed(self._slots) if s.state in LIVE]
            if self._ordered:
                for slot in live:
                    await self._stop_for_good(slot)
            else:
                async with trio.open_nursery() as nursery:
                    for slot in live:
                        nursery.start_soon(self._stop_for_good, slot)
        finally:
            for slot in self._slots:
                slot.calm()
                if slot.scope is not None:
                    slot.scope.cancel()
                if self._close_on_exit or slot.spec.id not in self._initial_ids:
                    slot.close_addresses()

    def _retire(self, slot: Slot) -> None:
        """The child will not run again by itself."""
        slot.calm()
        slot.state = ChildState.STOPPED
        slot.restart_at = None
        slot.close_addresses()
        if slot.spec.restart is Restart.TEMPORARY and slot in self._slots:
            self._slots.remove(slot)

    # -- requests ----------------------------------------------------------------------

    async def _serve_request(self, env: Envelope) -> None:
        if not env.begin(None):
            return
        op, arg = cast("tuple[str, object]", env.message)  # what `request` queues
        try:
            if op in _DRAIN_FIRST and self._drain_first(env, op, arg):
                return  # served once the child has stopped (see _serve_drained)
            await getattr(self, "_op_" + op)(arg)
        except (SupervisorError, ValueError) as exc:
            env.fail(exc)
        else:
            env.reply(None)

    def _drain_first(self, env: Envelope, op: str, arg: object) -> bool:
        """Stop the running child ``op`` (``terminate_child``, ``replace_child``) is
        about in a task of its own — up to its ``shutdown_timeout`` — while this loop
        goes on serving its siblings' exits and restarts; the operation is served once
        it has stopped. Whether it was started (``False``: nothing runs to stop)."""
        spec = arg if isinstance(arg, ChildSpec) else None
        slot = self._slot(spec.id if spec is not None else cast(str, arg))  # else: an id
        if spec is not None:
            self._same_addresses(slot, spec)
        if slot.state not in (ChildState.STARTING, ChildState.RUNNING):
            return False
        assert self._nursery is not None and self._control is not None
        slot.leaving += 1  # (a second request waits for the same stop)
        control = self._control

        async def drain() -> None:
            try:
                await self._stop(slot)
            finally:
                try:
                    control.send_nowait(_Drained(env, op, arg, slot))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    slot.leaving -= 1  # the supervisor stopped meanwhile
                    env.fail(SupervisorNotRunning(f"supervisor {self.name!r} stopped"))

        self._nursery.start_soon(drain)
        return True

    async def _serve_drained(self, drained: _Drained) -> None:
        drained.slot.leaving -= 1
        env = drained.env
        try:
            await getattr(self, "_op_" + drained.op)(drained.arg)
        except (SupervisorError, ValueError) as exc:
            env.fail(exc)
        else:
            env.reply(None)

    async def _op_start_child(self, spec: ChildSpec) -> None:
        slot = self._add_slot(spec)
        try:
            await self._start(slot)
        except StartFailed:
            self._slots.remove(slot)
            slot.close_addresses()
            raise

    async def _op_terminate_child(self, id: str) -> None:
        slot = self._slot(id)
        if slot.state in (ChildState.STARTING, ChildState.RUNNING):
            await self._stop(slot)
        self._retire(slot)
        self._emit(Terminated(supervisor=self.name, child=id))

    async def _op_restart_child(self, id: str) -> None:
        slot = self._idle_slot(id, "only a stopped or unavailable child can be restarted")
        slot.restarts = 0
        slot.start_over()
        self._emit(
            StartedOver(
                supervisor=self.name, child=id, attempt=slot.attempt, restarts=slot.restarts
            )
        )
        try:
            await self._start(slot)
        except StartFailed:
            self._retire(slot)
            raise

    async def _op_delete_child(self, id: str) -> None:
        slot = self._idle_slot(id, "terminate it before deleting it")
        slot.close_addresses()
        self._slots.remove(slot)

    def _same_addresses(self, slot: Slot, spec: ChildSpec) -> None:
        if spec.addresses != slot.spec.addresses:
            raise ValueError(
                f"child {spec.id!r} of supervisor {self.name!r}: a spec in its place must "
                "serve the same addresses"
            )

    def _own_window(self, slot: Slot, spec: ChildSpec) -> RestartWindow | None:
        """The child's own restart window under ``spec``, its restarts so far kept."""
        own = spec.intensity
        if own is None and spec.give_up is GiveUp.MARK_UNAVAILABLE:
            own = self.intensity
        if own is None:
            return None
        window = RestartWindow(own)
        if slot.window is not None:
            window.adopt(slot.window)
        return window

    async def _op_replace_child(self, spec: ChildSpec) -> None:
        slot = self._slot(spec.id)
        self._same_addresses(slot, spec)
        if slot.state in (ChildState.STARTING, ChildState.RUNNING):
            await self._stop(slot)
        slot.calm()
        slot.spec = spec
        slot.window = self._own_window(slot, spec)
        slot.restarts = 0
        slot.start_over()
        slot.last_exit = None
        self._emit(
            StartedOver(
                supervisor=self.name, child=spec.id, attempt=slot.attempt, restarts=slot.restarts
            )
        )
        try:
            await self._start(slot)
        except StartFailed as exc:
            await self._exited(slot, Crashed(collapse(exc.__cause__ or exc)))

    async def _op_update_child(self, spec: ChildSpec) -> None:
        slot = self._slot(spec.id)
        self._same_addresses(slot, spec)
        slot.window = self._own_window(slot, spec)
        slot.spec = spec

    async def _op_arrange(self, ids: tuple[str, ...]) -> None:
        rank = {id: i for i, id in enumerate(ids)}
        self._slots.sort(key=lambda s: rank.get(s.spec.id, len(rank)))  # stable

    async def _op_set_policy(self, policy: tuple[Strategy, Intensity]) -> None:
        strategy, intensity = policy
        self.strategy = strategy
        self._ordered = self._ordered_shutdown or strategy is Strategy.REST_FOR_ONE
        if intensity != self.intensity:
            window = RestartWindow(intensity)
            window.adopt(self._window)
            self.intensity, self._window = intensity, window

    def _idle_slot(self, id: str, hint: str) -> Slot:
        """Child ``id``, which must be stopped or unavailable (else ``hint`` says what to do)."""
        slot = self._slot(id)
        if slot.state not in (ChildState.STOPPED, ChildState.UNAVAILABLE):
            raise SupervisorError(
                f"child {id!r} of supervisor {self.name!r} is {slot.state.value}; {hint}"
            )
        return slot

    # -- OTP's rules -------------------------------------------------------------------

    async def _exited(self, slot: Slot, reason: ExitReason) -> None:
        """Apply the restart rules to a child that exited (or failed to restart)."""
        spec = slot.spec
        slot.last_exit = reason
        slot.incarnation = None
        if not should_restart(spec.restart, reason):
            self._retire(slot)
            if isinstance(reason, Crashed):
                log.warning(
                    "child crashed; not restarted",
                    supervisor=self.name,
                    child=spec.id,
                    restart=spec.restart.value,
                    reason=reason.describe(),
                )
            self._emit(
                NotRestarted(
                    supervisor=self.name,
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
        if self._window.record(now):
            self._escalate(slot, reason, own=False)
        self._restarts += 1

        delay = backoff_delay(backoff, slot.attempt, self._rng)
        restart_at = now + delay
        slot.state = ChildState.RESTARTING
        slot.restart_at = restart_at
        log.warning(
            "child exited; restarting",
            supervisor=self.name,
            child=spec.id,
            reason=reason.describe(),
            attempt=slot.attempt,
            delay=delay,
        )
        self._scheduled(slot, spec.id, now, reason)
        self._hurry(slot)
        # (A child being stopped on request is not restarted with its siblings.)
        live = [s.spec.id for s in self._slots if s.state in LIVE and not s.leaving]
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
        assert self._nursery is not None and self._control is not None
        slot.calm()
        scope = slot.hurrying = trio.CancelScope()
        control = self._control

        async def hurrying() -> None:
            with scope:
                try:
                    await hurry()
                except Exception:
                    log.exception("hurrying a restart failed", supervisor=self.name, child=slot.id)
                    return
                control.send_nowait(Hurried(slot, restart_at))

        self._nursery.start_soon(hurrying)

    def _scheduled(self, slot: Slot, cause: str, now: float, reason: ExitReason) -> None:
        """Report that ``slot`` will restart at its ``restart_at`` because ``cause`` exited."""
        assert slot.restart_at is not None
        self._emit(
            RestartScheduled(
                supervisor=self.name,
                child=slot.spec.id,
                cause=cause,
                strategy=self.strategy,
                attempt=slot.attempt,
                delay=slot.restart_at - now,
                at=slot.restart_at,
                reason=reason.describe(),
            )
        )

    async def _restart_due(self) -> None:
        """Start, in start order, every child whose restart time has come."""
        while True:
            now = trio.current_time()
            slot = next(
                (
                    s
                    for s in self._slots
                    if s.state is ChildState.RESTARTING
                    and s.restart_at is not None
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
                Restarted(
                    supervisor=self.name,
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
            supervisor=self.name,
            child=slot.spec.id,
            reason=reason.describe(),
            restarts=attempts,
            permanent=permanent,
        )
        self._emit(
            GaveUp(
                supervisor=self.name,
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
            limit, restarts = self.intensity, self._window.count(now) - 1
            whose = "the supervisor's restart intensity"
        log.error(
            "child cannot be restarted; supervisor gives up"
            if permanent
            else "restart intensity exceeded; supervisor gives up",
            supervisor=self.name,
            child=slot.spec.id,
            reason=reason.describe(),
        )
        self._emit(
            GaveUp(
                supervisor=self.name,
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
            f"supervisor {self.name!r} gave up: {why}; last exit: {reason.describe()}",
            supervisor=self.name,
            child=slot.spec.id,
            restarts=restarts,
        )
        if isinstance(reason, Crashed):
            raise error from reason.error
        raise error

    def _emit(self, decision: Decision) -> None:
        if self._notify is not None:
            try:
                self._notify(decision)
            except Exception:
                log.exception("notify hook failed", decision=type(decision).__name__)
