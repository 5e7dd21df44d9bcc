"""One child's place in a supervisor: its spec, state, current incarnation and counters."""

from __future__ import annotations

import attrs
import trio

from ._rules import RestartWindow
from ._spec import Child, ChildSpec, ExitReason
from ._stats import ChildState

LIVE = (ChildState.STARTING, ChildState.RUNNING, ChildState.RESTARTING)


@attrs.define(eq=False)
class Slot:
    spec: ChildSpec
    #: the child's own restart limit (``spec.intensity``), if it has one
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
    #: the task awaiting ``spec.hurry`` while the child waits out its backoff
    hurrying: trio.CancelScope | None = None
    #: requests (terminate, replace) stopping it while its siblings carry on
    leaving: int = 0

    @property
    def id(self) -> str:
        return self.spec.id

    def open_addresses(self) -> None:
        for address in self.spec.addresses:
            address.open()

    def close_addresses(self) -> None:
        for address in self.spec.addresses:
            address.close_stopped()

    def calm(self) -> None:
        """No more hurrying its restart: it started, or will not restart by itself."""
        if self.hurrying is not None:
            self.hurrying.cancel()
            self.hurrying = None

    def start_over(self) -> None:
        """Start the backoff and the child's own restart count over."""
        self.attempt = 0
        if self.window is not None:
            self.window.reset()


@attrs.frozen
class Hurried:
    """A restarting child's ``spec.hurry`` returned: what its supervisor's loop receives."""

    slot: Slot
    restart_at: float


@attrs.frozen
class Exited:
    """A child's task ended: what its supervisor's loop receives."""

    slot: Slot
    generation: int
    reason: ExitReason


class StartedStatus:
    """Wraps a child's task status: once it has started, only its supervisor stops it.

    Until then outside cancellation reaches it (a hung start can be cancelled); from
    then on its scope is shielded, so even a cancelled supervisor stops its children
    itself, each gracefully first.

    A child that says it started after its start was cancelled has not started: trio
    leaves such a task in ``nursery.start()``'s own nursery, to be cancelled there, and
    ``start()`` waits for it to end. It is not shielded then (a shielded child nobody
    will stop would keep ``start()`` waiting for ever) and :attr:`started_ok` stays false.
    """

    __slots__ = ("_inner", "_scope", "_slot", "_task", "started_ok")

    def __init__(self, inner: trio.TaskStatus[None], scope: trio.CancelScope, slot: Slot) -> None:
        self._inner = inner
        self._scope = scope
        self._slot = slot
        #: the child's task, which ``started()`` moves into the supervisor's nursery
        self._task = trio.lowlevel.current_task()
        self.started_ok = False

    def started(self, value: None = None) -> None:
        task = self._task
        waiting_in = task.parent_nursery
        self._inner.started()
        if task.parent_nursery is waiting_in and self._inner is not trio.TASK_STATUS_IGNORED:
            return  # the start was cancelled: see the class's docstring
        self.started_ok = True
        self._scope.shield = True
        self._slot.state = ChildState.RUNNING
        self._slot.started_at = trio.current_time()
