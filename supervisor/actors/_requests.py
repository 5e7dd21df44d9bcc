"""Dynamic children: requests that add, stop, restart or forget a running supervisor's child."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from ._errors import StartFailed, SupervisorError, SupervisorNotRunning
from ._mailbox import Envelope
from ._spec import ChildSpec
from ._stats import ChildState

if TYPE_CHECKING:
    from ._tree import _Slot


class DynamicChildren:
    """OTP's ``start_child``/``terminate_child``/``restart_child``/``delete_child``.

    A mixin of :class:`Supervisor`. Each call is a request on the supervisor's control
    channel, served by its loop between handling exits and restarts, so it never
    interleaves with them; a supervisor that is not running, or stops before serving it,
    fails it with :class:`SupervisorNotRunning`.
    """

    # Provided by Supervisor.
    name: str
    _control: trio.MemorySendChannel[object] | None
    _slots: list[_Slot]

    if TYPE_CHECKING:

        def _add_slot(self, spec: ChildSpec) -> _Slot: ...
        def _slot(self, id: str) -> _Slot: ...
        async def _start(self, slot: _Slot) -> None: ...
        async def _stop(self, slot: _Slot) -> None: ...
        def _retire(self, slot: _Slot) -> None: ...

    async def start_child(self, spec: ChildSpec) -> None:
        """Add ``spec`` as the last child and start it.

        Raises :class:`StartFailed` if it fails to start (it is then not added), or
        ``ValueError`` if a child of that id exists.
        """
        await self._request("start_child", spec)

    async def terminate_child(self, id: str) -> None:
        """Stop a child for good (gracefully, then cancelled). Its spec stays, unless
        it is temporary; calls to it fail fast until :meth:`restart_child`."""
        await self._request("terminate_child", id)

    async def restart_child(self, id: str) -> None:
        """Start again a child that is stopped or unavailable, with a fresh restart count.

        Raises :class:`SupervisorError` if it is running, :class:`StartFailed` if it
        fails to start.
        """
        await self._request("restart_child", id)

    async def delete_child(self, id: str) -> None:
        """Forget a child that is stopped or unavailable."""
        await self._request("delete_child", id)

    # -- the caller's side -------------------------------------------------------------

    async def _request(self, op: str, arg: object) -> None:
        if self._control is None:
            raise SupervisorNotRunning(f"supervisor {self.name!r} is not running")
        env = Envelope((op, arg), math.inf, True)
        self._control.send_nowait(env)
        try:
            await env._event.wait()  # type: ignore[union-attr]
        except BaseException:
            env.abandon()
            raise
        env.unwrap()

    # -- the supervisor's side ---------------------------------------------------------

    def _fail_requests(self, receive: trio.MemoryReceiveChannel[object]) -> None:
        while True:
            try:
                item = receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            if isinstance(item, Envelope):
                item.fail(SupervisorNotRunning(f"supervisor {self.name!r} stopped"))

    async def _serve_request(self, env: Envelope) -> None:
        if not env.begin(trio.CancelScope()):
            return
        op, arg = env.message  # type: ignore[misc]
        try:
            await getattr(self, "_op_" + op)(arg)
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

    async def _op_restart_child(self, id: str) -> None:
        slot = self._idle_slot(id, "only a stopped or unavailable child can be restarted")
        slot.restarts = 0
        slot.start_over()
        try:
            await self._start(slot)
        except StartFailed:
            self._retire(slot)
            raise

    async def _op_delete_child(self, id: str) -> None:
        slot = self._idle_slot(id, "terminate it before deleting it")
        slot.close_addresses()
        self._slots.remove(slot)

    def _idle_slot(self, id: str, hint: str) -> _Slot:
        """Child ``id``, which must be stopped or unavailable (else ``hint`` says what to do)."""
        slot = self._slot(id)
        if slot.state not in (ChildState.STOPPED, ChildState.UNAVAILABLE):
            raise SupervisorError(
                f"child {id!r} of supervisor {self.name!r} is {slot.state.value}; {hint}"
            )
        return slot
