"""How a supervisor runs its children's incarnations: started, watched to their exit, stopped.

Each incarnation runs in a task of the supervisor's nursery, which tells the supervisor's
loop (its control channel) how it exited; a stop asks the child first
(``request_stop``), waits its ``shutdown_timeout``, then cancels it. The shutdown order
is OTP's: every live child in reverse start order — one after the other where order
means something (``rest_for_one``, ``ordered_shutdown``), else concurrently, each within
its own deadline. Which child to start or stop, and when, is the supervisor's to say.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..log import get_logger
from ._children import Children
from ._errors import StartFailed, collapse
from ._slot import LIVE, Exited, Slot, StartedStatus
from ._spec import Child, Crashed, ExitReason, Normal, Restart, Shutdown
from ._stats import ChildState

log = get_logger("supervisor.actors")


class Incarnations:
    """Starts, watches and stops the incarnations of one supervisor's ``children``.

    ``adopt`` is shown each new incarnation before it starts (a nested supervisor takes
    its parent's hooks); ``below`` gives the incarnations of a child that is itself a
    supervisor (``None`` for any other child), so that killing reaches them too.
    """

    __slots__ = (
        "adopt",
        "below",
        "children",
        "close_on_exit",
        "control",
        "killed",
        "nursery",
    )

    def __init__(
        self,
        children: Children,
        *,
        adopt: Callable[[Child], None],
        below: Callable[[Child | None], Incarnations | None],
        close_on_exit: bool,
    ) -> None:
        self.children = children
        self.adopt = adopt
        self.below = below
        self.close_on_exit = close_on_exit
        #: while the supervisor runs: where the children's tasks run, and its loop's channel
        self.nursery: trio.Nursery | None = None
        self.control: trio.MemorySendChannel[object] | None = None
        #: the parent's patience ran out: no more asking, cancel at once
        self.killed = False

    async def start(self, slot: Slot) -> None:
        """Start one incarnation; raises StartFailed if it fails before it is ready."""
        assert self.nursery is not None
        slot.calm()
        slot.generation += 1
        slot.stopping = False
        slot.state = ChildState.STARTING
        slot.restart_at = None
        slot.done = trio.Event()
        slot.open_addresses()
        try:
            incarnation = slot.spec.start()
            self.adopt(incarnation)
            slot.incarnation = incarnation
            await self.nursery.start(self._run, slot, incarnation, slot.generation)
        except Exception as exc:
            slot.incarnation = None
            slot.state = ChildState.STOPPED
            slot.started_at = trio.current_time()  # it was never up: not stable either
            raise StartFailed(
                f"child {slot.spec.id!r} of supervisor {self.children.name!r} failed to start: "
                f"{Crashed(collapse(exc)).describe()}",
                child=slot.spec.id,
            ) from collapse(exc)

    async def _run(
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
        if slot.generation == generation and not slot.stopping and self.control is not None:
            self.control.send_nowait(Exited(slot, generation, reason))

    async def stop(self, slot: Slot) -> None:
        """Stop the slot's incarnation: ask, wait its shutdown_timeout, then cancel."""
        slot.stopping = True
        done, incarnation, scope = slot.done, slot.incarnation, slot.scope
        slot.incarnation = None
        if done is None or done.is_set():
            return
        try:
            if incarnation is not None and not self.killed:
                incarnation.request_stop()
        except Exception:
            log.exception("request_stop failed; cancelling", child=slot.spec.id)
        else:
            with trio.move_on_after(0 if self.killed else slot.spec.shutdown_timeout):
                await done.wait()
        if not done.is_set():
            below = self.below(incarnation)
            if below is not None:
                below.kill()  # its own children are shielded from our cancel
            if scope is not None:
                scope.cancel()
            await done.wait()

    async def _stop_for_good(self, slot: Slot) -> None:
        await self.stop(slot)
        slot.state = ChildState.STOPPED

    def kill(self) -> None:
        """The parent's patience ran out: cancel every child now, these and below."""
        self.killed = True
        for slot in self.children.slots:
            below = self.below(slot.incarnation)
            if below is not None:
                below.kill()
            if slot.scope is not None:
                slot.scope.cancel()

    async def stop_all(self, *, ordered: bool) -> None:
        """Stop every live child in reverse start order: one after the other when
        ``ordered``, else concurrently."""
        children = self.children
        try:
            live = [s for s in reversed(children.slots) if s.state in LIVE]
            if ordered:
                for slot in live:
                    await self._stop_for_good(slot)
            else:
                async with trio.open_nursery() as nursery:
                    for slot in live:
                        nursery.start_soon(self._stop_for_good, slot)
        finally:
            for slot in children.slots:
                slot.calm()
                if slot.scope is not None:
                    slot.scope.cancel()
                if self.close_on_exit or slot.spec.id not in children.initial_ids:
                    slot.close_addresses()

    def retire(self, slot: Slot) -> None:
        """The child will not run again by itself."""
        slot.calm()
        slot.state = ChildState.STOPPED
        slot.restart_at = None
        slot.close_addresses()
        if slot.spec.restart is Restart.TEMPORARY:
            self.children.remove(slot)
