"""The requests a running supervisor serves between its children's exits and restarts.

OTP's ``start_child``, ``terminate_child``, ``restart_child`` and ``delete_child``, and
what a reconfiguration asks of a running tree (``replace_child``, ``update_child``,
``arrange``, ``set_policy``) — none of it a crash, none of it counted against a restart
intensity. Each arrives on the supervisor's control channel as an :class:`Envelope` of
``(op, arg)`` (:func:`._requests.request`) and is answered once done. A request that
stops a running child first (``terminate_child``, ``replace_child``) stops it in a task
of its own, up to its ``shutdown_timeout``, while the loop goes on serving the
siblings; the request is served once the child has stopped (:class:`Drained`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import attrs
import trio

from ._children import Children
from ._decisions import Decision, StartedOver, Terminated
from ._errors import StartFailed, SupervisorError, SupervisorNotRunning, collapse
from ._incarnations import Incarnations
from ._mailbox import Envelope
from ._restarts import Restarts
from ._slot import Slot
from ._spec import ChildSpec, Crashed, Intensity, Strategy
from ._stats import ChildState

#: Requests that stop a running child first: in a task of their own (see _drain_first).
_DRAIN_FIRST = frozenset({"terminate_child", "replace_child"})


@attrs.frozen(eq=False)
class Drained:
    """A child a request stopped first (``_drain_first``) has stopped: serve the request."""

    env: Envelope
    op: str
    arg: object
    slot: Slot


class Operations:
    """Serves the control requests of the supervisor whose parts these are."""

    __slots__ = ("children", "incarnations", "report", "restarts")

    def __init__(
        self,
        children: Children,
        incarnations: Incarnations,
        restarts: Restarts,
        report: Callable[[Decision], None],
    ) -> None:
        self.children = children
        self.incarnations = incarnations
        self.restarts = restarts
        self.report = report

    async def serve(self, env: Envelope) -> None:
        """Serve one request (or start stopping the child it is about first)."""
        if not env.begin(None):
            return
        op, arg = cast("tuple[str, object]", env.message)  # what `request` queues
        try:
            if op in _DRAIN_FIRST and self._drain_first(env, op, arg):
                return  # served once the child has stopped (see serve_drained)
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
        slot = self.children[spec.id if spec is not None else cast(str, arg)]  # else: an id
        if spec is not None:
            self.children.same_addresses(slot, spec)
        if slot.state not in (ChildState.STARTING, ChildState.RUNNING):
            return False
        incarnations = self.incarnations
        nursery, control = incarnations.nursery, incarnations.control
        assert nursery is not None and control is not None
        slot.leaving += 1  # (a second request waits for the same stop)
        name = self.children.name

        async def drain() -> None:
            try:
                await incarnations.stop(slot)
            finally:
                try:
                    control.send_nowait(Drained(env, op, arg, slot))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    slot.leaving -= 1  # the supervisor stopped meanwhile
                    env.fail(SupervisorNotRunning(f"supervisor {name!r} stopped"))

        nursery.start_soon(drain)
        return True

    async def serve_drained(self, drained: Drained) -> None:
        """Serve the request that stopped its child first, now that it has stopped."""
        drained.slot.leaving -= 1
        env = drained.env
        try:
            await getattr(self, "_op_" + drained.op)(drained.arg)
        except (SupervisorError, ValueError) as exc:
            env.fail(exc)
        else:
            env.reply(None)

    def _started_over(self, slot: Slot) -> None:
        slot.restarts = 0
        slot.start_over()
        self.report(
            StartedOver(
                supervisor=self.children.name,
                child=slot.spec.id,
                attempt=slot.attempt,
                restarts=slot.restarts,
            )
        )

    async def _op_start_child(self, spec: ChildSpec) -> None:
        slot = self.children.add(spec, self.restarts.intensity)
        try:
            await self.incarnations.start(slot)
        except StartFailed:
            self.children.remove(slot)
            slot.close_addresses()
            raise

    async def _op_terminate_child(self, id: str) -> None:
        slot = self.children[id]
        if slot.state in (ChildState.STARTING, ChildState.RUNNING):
            await self.incarnations.stop(slot)
        self.incarnations.retire(slot)
        self.report(Terminated(supervisor=self.children.name, child=id))

    async def _op_restart_child(self, id: str) -> None:
        slot = self.children.idle(id, "only a stopped or unavailable child can be restarted")
        self._started_over(slot)
        try:
            await self.incarnations.start(slot)
        except StartFailed:
            self.incarnations.retire(slot)
            raise

    async def _op_delete_child(self, id: str) -> None:
        slot = self.children.idle(id, "terminate it before deleting it")
        slot.close_addresses()
        self.children.remove(slot)

    async def _op_replace_child(self, spec: ChildSpec) -> None:
        slot = self.children[spec.id]
        self.children.same_addresses(slot, spec)
        if slot.state in (ChildState.STARTING, ChildState.RUNNING):
            await self.incarnations.stop(slot)
        slot.calm()
        slot.spec = spec
        slot.window = self.children.window_under(slot, spec, self.restarts.intensity)
        slot.last_exit = None
        self._started_over(slot)
        try:
            await self.incarnations.start(slot)
        except StartFailed as exc:
            await self.restarts.exited(slot, Crashed(collapse(exc.__cause__ or exc)))

    async def _op_update_child(self, spec: ChildSpec) -> None:
        slot = self.children[spec.id]
        self.children.same_addresses(slot, spec)
        slot.window = self.children.window_under(slot, spec, self.restarts.intensity)
        slot.spec = spec

    async def _op_arrange(self, ids: tuple[str, ...]) -> None:
        self.children.arrange(ids)

    async def _op_set_policy(self, policy: tuple[Strategy, Intensity]) -> None:
        self.restarts.set_policy(*policy)
