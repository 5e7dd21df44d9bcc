"""Supervisors: start children in order, restart them by OTP's rules, stop them.

A :class:`Tree` is the supervisor node; its parts, each in a module of its own, are the
children table (:mod:`._children`), the running of their incarnations and the shutdown
order (:mod:`._incarnations`), the restart rules applied to an exit
(:mod:`._restarts`), and the requests it serves while running (:mod:`._operations`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import trio

from ..log import get_logger
from ._children import Children
from ._decisions import Decision, Notify
from ._errors import StartFailed, SupervisorError, collapse, collapsing
from ._incarnations import Incarnations
from ._mailbox import Address, Envelope
from ._operations import Drained, Operations
from ._requests import fail_requests, request
from ._restarts import Restarts
from ._rules import jitter_rng
from ._slot import Exited, Hurried, Slot
from ._spec import (
    Backoff,
    Child,
    ChildSpec,
    Crashed,
    ExitReason,
    GiveUp,
    Intensity,
    Shutdown,
    Strategy,
)
from ._stats import ChildState, SupervisorStatistics

log = get_logger("supervisor.actors")

_STOP = object()


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
    (:func:`~._rules.should_restart`) and the strategy which siblings restart with it
    (:func:`~._rules.children_to_restart`). Restart intensity is counted as OTP counts it: one
    restart per exit that triggers one, whatever the number of siblings restarted
    alongside, against the supervisor's ``intensity`` — for every child. A child with
    its own ``intensity`` (in the child spec; a ``MARK_UNAVAILABLE`` child without one
    gets a copy of the supervisor's) is counted against that first, from its last stable
    run on; exceeding it does what the child's ``give_up`` says:
    ``MARK_UNAVAILABLE`` gives up on that child alone (its calls fail fast, its siblings
    are untouched, nothing is counted against the supervisor), ``ESCALATE`` makes the
    supervisor give up. Exceeding the supervisor's intensity always makes it give up: it
    stops every child and raises :class:`~._errors.SupervisorGaveUp`, which its parent handles
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

    Its parts: the children table (:class:`~._children.Children`), their incarnations
    started, watched and stopped (:class:`~._incarnations.Incarnations`), the restart
    rules applied to each exit (:class:`~._restarts.Restarts`), and the requests served
    while it runs (:class:`~._operations.Operations`); the tree runs the loop that
    hands each of them its work.
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
        self._notify = notify
        self._ordered_shutdown = ordered_shutdown
        intensity = intensity if intensity is not None else Intensity()
        self._children = Children(name, children, intensity)
        self._incarnations = Incarnations(
            self._children, adopt=self._adopt, below=_below, close_on_exit=close_on_exit
        )
        self._restarts = Restarts(
            self._children,
            self._incarnations,
            strategy=strategy,
            intensity=intensity,
            backoff=backoff if backoff is not None else Backoff.none(),
            report=self._emit,
            rng=rng,  # None: the parent's, or a fresh one at run()
        )
        self._operations = Operations(
            self._children, self._incarnations, self._restarts, self._emit
        )
        self._stop_requested = False

    def __repr__(self) -> str:
        return f"<Tree {self.name!r} {self.strategy.value} children={len(self._children)}>"

    @property
    def strategy(self) -> Strategy:
        return self._restarts.strategy

    @property
    def intensity(self) -> Intensity:
        return self._restarts.intensity

    @property
    def backoff(self) -> Backoff:
        """The backoff of the children that have none of their own."""
        return self._restarts.backoff

    # -- public API --------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the supervisor to stop its children and return."""
        self._stop_requested = True
        control = self._incarnations.control
        if control is not None:
            control.send_nowait(_STOP)

    def address(self, id: str) -> Address:
        """The mailbox of actor ``id``: a child, or an actor below a nested supervisor."""
        return self._children.address(id)

    def which_children(self) -> list[tuple[str, ChildState, Child | None]]:
        """``(id, state, current incarnation)`` of each child, in start order."""
        return self._children.which()

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            name=self.name,
            strategy=self.strategy,
            intensity=self.intensity,
            restarts=self._restarts.count,
            children=self._children.statistics(),
        )

    # OTP's start_child / terminate_child / restart_child / delete_child. Each is a
    # request on the control channel, served by the loop between exits and restarts, so
    # it never interleaves with them.

    async def start_child(self, spec: ChildSpec) -> None:
        """Add ``spec`` as the last child and start it.

        Raises :class:`StartFailed` if it fails to start (it is then not added), or
        ``ValueError`` if a child of that id exists.
        """
        await request(self._incarnations.control, self.name, "start_child", spec)

    async def terminate_child(self, id: str) -> None:
        """Stop a child for good (gracefully, then cancelled). Its spec stays, unless
        it is temporary; calls to it fail fast until :meth:`restart_child`."""
        await request(self._incarnations.control, self.name, "terminate_child", id)

    async def restart_child(self, id: str) -> None:
        """Start again a child that is stopped or unavailable, with a fresh restart count.

        Raises :class:`SupervisorError` if it is running, :class:`StartFailed` if it
        fails to start.
        """
        await request(self._incarnations.control, self.name, "restart_child", id)

    async def delete_child(self, id: str) -> None:
        """Forget a child that is stopped or unavailable."""
        await request(self._incarnations.control, self.name, "delete_child", id)

    # Beyond OTP: what a reconfiguration does to a running tree. None of it is a crash,
    # and none of it is counted against a restart intensity.

    async def replace_child(self, spec: ChildSpec) -> None:
        """Put ``spec`` in the place of the child of its id, and start it: the running
        incarnation (if any) is stopped gracefully first, as for a shutdown. The spec must
        serve the same addresses, which stay open throughout: calls queued meanwhile are
        served by the new incarnation. The child's counts start over (reported as
        :class:`~._decisions.StartedOver`). A new incarnation that fails to start is handled as a
        crash of the child.
        """
        await request(self._incarnations.control, self.name, "replace_child", spec)

    async def update_child(self, spec: ChildSpec) -> None:
        """Take ``spec`` for the child of its id from its next decision on (restart type,
        backoff, give-up, own intensity — its restarts so far still count — and shutdown
        timeout), without stopping it. The spec must serve the same addresses."""
        await request(self._incarnations.control, self.name, "update_child", spec)

    async def arrange(self, ids: Sequence[str]) -> None:
        """Put the children in the order of ``ids`` (those not named keep their order,
        after them): the order ``rest_for_one`` and ``one_for_all`` restart in, and the
        reverse of the order they stop in."""
        await request(self._incarnations.control, self.name, "arrange", tuple(ids))

    async def set_policy(self, strategy: Strategy, intensity: Intensity) -> None:
        """Use ``strategy`` and ``intensity`` for the decisions from now on (the restarts
        already counted still count against the new intensity)."""
        await request(self._incarnations.control, self.name, "set_policy", (strategy, intensity))

    # -- running -----------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        """Start the children, supervise them until stopped, then stop them.

        Returns :class:`Shutdown` once stopped on request. Raises
        :class:`~._errors.SupervisorGaveUp` after giving up, and :class:`StartFailed` if an
        escalating child fails its first start (the children already started are
        stopped first) — bare, not in an exception group.
        """
        incarnations = self._incarnations
        if incarnations.control is not None:
            raise SupervisorError(f"supervisor {self.name!r} is already running")
        if self._restarts.rng is None:
            self._restarts.rng = jitter_rng.get() or random.Random()
        send, receive = trio.open_memory_channel[object](math.inf)
        incarnations.control = send
        if self._stop_requested:
            send.send_nowait(_STOP)
        try:
            # Raised in the nursery's own body: not worth a group around it.
            with collapsing():
                async with trio.open_nursery() as nursery:
                    incarnations.nursery = nursery
                    try:
                        for slot in list(self._children.slots):
                            await self._first_start(slot)
                        task_status.started()
                        await self._supervise(receive)
                        return Shutdown()
                    finally:
                        with trio.CancelScope(shield=True):
                            await incarnations.stop_all(ordered=self._ordered)
        finally:
            incarnations.nursery = None
            fail_requests(receive, self.name)
            incarnations.control = None
            send.close()

    @property
    def _ordered(self) -> bool:
        """Whether its children stop one after the other (else concurrently)."""
        return self._ordered_shutdown or self.strategy is Strategy.REST_FOR_ONE

    async def _first_start(self, slot: Slot) -> None:
        try:
            await self._incarnations.start(slot)
        except StartFailed as exc:
            if slot.spec.give_up is GiveUp.MARK_UNAVAILABLE:
                # Not worth failing its siblings for: handle it as a crash.
                await self._restarts.exited(slot, Crashed(collapse(exc.__cause__ or exc)))
            else:
                raise

    async def _supervise(self, receive: trio.MemoryReceiveChannel[object]) -> None:
        children, restarts, operations = self._children, self._restarts, self._operations
        while True:
            item: object = None
            with trio.move_on_at(children.next_restart_at()):
                item = await receive.receive()
            if item is _STOP:
                return
            if isinstance(item, Exited):
                slot = item.slot
                if (
                    slot.generation == item.generation
                    and not slot.stopping
                    and slot.state is ChildState.RUNNING
                    and slot in children.slots
                ):
                    await restarts.exited(slot, item.reason)
            elif isinstance(item, Hurried):
                slot = item.slot
                if slot.state is ChildState.RESTARTING and slot.restart_at == item.restart_at:
                    slot.restart_at = trio.current_time()
            elif isinstance(item, Envelope):
                await operations.serve(item)
            elif isinstance(item, Drained):
                await operations.serve_drained(item)
            await restarts.restart_due()

    def _adopt(self, incarnation: Child) -> None:
        """A nested supervisor reports through our hook and draws jitter from our
        generator, unless given its own."""
        if isinstance(incarnation, Tree):
            if incarnation._notify is None:
                incarnation._notify = self._notify
            if incarnation._restarts.rng is None:
                incarnation._restarts.rng = self._restarts.rng

    def _emit(self, decision: Decision) -> None:
        if self._notify is not None:
            try:
                self._notify(decision)
            except Exception:
                log.exception("notify hook failed", decision=type(decision).__name__)


def _below(incarnation: Child | None) -> Incarnations | None:
    """The incarnations of a child that is itself a supervisor."""
    return incarnation._incarnations if isinstance(incarnation, Tree) else None
