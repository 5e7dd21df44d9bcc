"""Actors: an incarnation serving its address's mailbox, concurrently if it likes."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, Generic, TypeVar

import trio

from ._errors import collapse
from ._mailbox import _QUEUED, _RUNNING, Address, CastAddress, Envelope, aborted
from ._spec import Backoff, ChildSpec, ExitReason, GiveUp, Intensity, Restart, Shutdown

#: An incarnation serving a :class:`CastAddress` yields to the scheduler after handling
#: this many messages in a row.
CAST_BATCH: Final = 256

_current: contextvars.ContextVar[Envelope | None] = contextvars.ContextVar(
    "supervisor_actors_current_request", default=None
)


@contextlib.contextmanager
def before_effect(until: Callable[[], bool] | None = None) -> Iterator[None]:
    """Mark the current request as not having taken effect while inside this block.

    Use it in a handler around work that cannot have affected anything yet — waiting
    for a connection, say. If the incarnation dies inside the block, the request is not
    failed with :class:`~._errors.RequestAborted`: it goes back to the front of the mailbox and
    the next incarnation serves it, within the caller's deadline. With ``until``, the
    block may take effect part-way: the request is given back only if ``until()`` is
    still false when the incarnation dies (say, "the request was written out").
    Outside any request (a background task) it does nothing.
    """
    env = _current.get()
    if env is None:
        yield
        return
    env.requeue = True if until is None else until
    try:
        yield
    except trio.Cancelled:
        raise  # the incarnation is dying (or the caller left): the request stays unacted
    except BaseException:
        env.requeue = False
        raise
    env.requeue = False


class Actor:
    """Base class of an actor incarnation: override :meth:`handle`, maybe :meth:`init`.

    An incarnation serves the mailbox of its :class:`Address`. Requests are handled one
    at a time unless ``max_concurrency`` is above 1, in which case up to that many run
    concurrently, each in its own task; further messages wait in the mailbox, which
    keeps them safe for the next incarnation should this one crash.

    What a handler's outcome does:

    - its return value is the caller's reply;
    - an exception it raises for a ``call`` is raised in the caller, and the incarnation
      carries on — unless ``crash_on_error`` is set (OTP's gen_server), then it also
      crashes the incarnation;
    - an exception it raises for a ``cast`` (nobody to tell) crashes the incarnation.

    Each request's handler runs under the caller's deadline and is cancelled if the
    caller gives up. When the incarnation ends, requests it had taken but not answered
    fail with :class:`~._errors.RequestAborted` (they may have taken effect; nothing
    re-sends them).

    ``self.nursery`` (available from :meth:`init` on) runs background tasks for the
    incarnation's lifetime: a task that raises crashes the incarnation, and all are
    cancelled when it stops.
    """

    max_concurrency: int = 1
    crash_on_error: bool = False

    nursery: trio.Nursery

    async def init(self) -> None:
        """Prepare before the incarnation counts as started; errors here fail the start."""

    async def drain(self) -> None:
        """Graceful stop: called once the mailbox's requests in flight are done, before
        the background tasks are cancelled — finish any other work in flight here."""

    async def handle(self, message: object) -> object:
        """Answer one message."""
        raise NotImplementedError(f"{type(self).__name__} does not handle {message!r}")

    async def idle(self) -> None:
        """An actor of a :class:`CastAddress`: called each time the incarnation has caught
        up — its mailbox empty, or a long batch of messages handled in a row — and once
        when it starts; it waits for more after this returns. Do here, once, the work
        that a burst of messages asks for (OTP's timeout 0). An error crashes the
        incarnation."""

    @property
    def stopping(self) -> bool:
        """Whether this incarnation was asked to stop (or has ended)."""
        runner = self._runner
        return runner is None or runner._stopping

    def exit(self, reason: ExitReason | None = None) -> None:
        """Stop taking messages, finish those in flight, then exit with ``reason``.

        The default reason is :class:`Shutdown`. Messages still queued stay in the
        mailbox for the next incarnation, if the supervisor starts one.
        """
        runner = self._runner
        if runner is not None:
            runner.stop(Shutdown() if reason is None else reason)

    _runner: _Runner | None = None


A = TypeVar("A", bound=Actor)


class _Runner(Generic[A]):
    """Runs one :class:`Actor` incarnation against an address (a supervision child)."""

    def __init__(self, address: Address, actor: A) -> None:
        self.address = address
        self.actor = actor
        actor._runner = self
        self._reason: ExitReason = Shutdown()
        self._stopping = False
        self._serve_scope: trio.CancelScope | None = None
        self._parked = False
        self._in_flight: dict[Envelope, None] = {}  # ordered: given back in order

    def request_stop(self) -> None:
        self.stop(Shutdown())

    def stop(self, reason: ExitReason) -> None:
        if not self._stopping:
            self._stopping = True
            self._reason = reason
            if self._parked and self._serve_scope is not None:
                self._serve_scope.cancel()

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        actor = self.actor
        try:
            self.address.begin_serving()
        except BaseException:
            actor._runner = None
            raise
        try:
            async with trio.open_nursery() as background:
                actor.nursery = background
                await actor.init()
                task_status.started()
                if isinstance(self.address, CastAddress):
                    await self._serve_casts(self.address)
                elif actor.max_concurrency <= 1:
                    await self._serve_sequentially()
                else:
                    async with trio.open_nursery() as handlers:
                        await self._serve_concurrently(handlers, actor.max_concurrency)
                await actor.drain()
                background.cancel_scope.cancel()
        except BaseException as exc:
            cause = collapse(exc)
            if isinstance(cause, trio.Cancelled):
                cause = None
            for env in self._in_flight:
                requeue = env.requeue
                if requeue is True or (callable(requeue) and not requeue()):
                    self.address.requeue(env)
                else:
                    env.fail(aborted(self.address.name, cause))
            raise
        finally:
            actor._runner = None
            self.address.end_serving()
        return self._reason

    # Waiting for work happens inside one long-lived cancel scope per incarnation (a
    # scope per message would cost more than the rest of a call). A stop request cancels
    # it only while the loop is parked waiting; a message that arrived in that same
    # instant is handled after leaving the scope, so none is lost.

    async def _serve_sequentially(self) -> None:
        # `receive()` yields to the scheduler even when a message is waiting, so a busy
        # mailbox cannot starve the rest of the program.
        receiver = self.address.receiver
        late: Envelope | None = None
        address = self.address
        with trio.CancelScope() as scope:
            self._serve_scope = scope
            while not self._stopping:
                env = address.take_requeued()
                if env is None:
                    self._parked = True
                    env = await receiver.receive()
                    self._parked = False
                    if scope.cancel_called:
                        late = env
                        break
                await self._handle(env)
        self._parked = False
        if late is not None:
            await self._handle(late)

    async def _serve_concurrently(self, handlers: trio.Nursery, limit: int) -> None:
        address = self.address
        receiver = address.receiver
        slots = trio.Semaphore(limit)
        with trio.CancelScope() as scope:
            self._serve_scope = scope
            while not self._stopping:
                self._parked = True
                await slots.acquire()
                env = address.take_requeued() or await receiver.receive()
                self._parked = False
                handlers.start_soon(self._handle_then_release, env, slots)
                if scope.cancel_called:
                    break
        self._parked = False

    async def _serve_casts(self, address: CastAddress) -> None:
        # Casts carry no envelope: nobody waits for them, and nothing gives them back. A
        # message is handled straight from the mailbox, a batch in a row (no checkpoint
        # of the runner's own between them); then the actor's idle(), then a yield or a
        # wait for more.
        actor = self.actor
        handle = actor.handle
        pending, take = address._pending, address._take_oldest  # the hot loop: no calls
        with trio.CancelScope() as scope:
            self._serve_scope = scope
            while not self._stopping:
                for _ in range(CAST_BATCH):
                    if not pending:
                        break
                    await handle(take())
                    if self._stopping:
                        break
                await actor.idle()
                if self._stopping:
                    break
                if address.waiting:
                    await trio.lowlevel.cancel_shielded_checkpoint()  # a flood: let others run
                    continue
                self._parked = True
                await address.wait()
                self._parked = False
        self._parked = False

    async def _handle_then_release(self, env: Envelope, slots: trio.Semaphore) -> None:
        try:
            await self._handle(env)
        finally:
            slots.release()

    async def _handle(self, env: Envelope) -> None:
        if env.deadline == math.inf:
            # No deadline: skip the cancel scope, which costs more than the rest of a
            # call; an abandoned handler of this kind runs to completion.
            if env._state == _QUEUED:  # env.begin(None), inlined: the hot path
                env._state = _RUNNING
                await self._invoke(env)
            return
        with trio.CancelScope(deadline=env.deadline) as scope:
            if not env.begin(scope):
                return  # the caller gave up while it was queued
            await self._invoke(env)
        if scope.cancelled_caught:
            # Deadline passed or caller abandoned: the caller already has its answer.
            self._in_flight.pop(env, None)

    async def _invoke(self, env: Envelope) -> None:
        self._in_flight[env] = None
        token = _current.set(env)
        try:
            result = await self.actor.handle(env.message)
        except Exception as exc:
            self._in_flight.pop(env, None)
            if not env.wants_reply:
                raise  # a failed cast has nobody to tell: crash, as OTP does
            env.fail(exc)
            if self.actor.crash_on_error:
                raise
        else:
            self._in_flight.pop(env, None)
            env.reply(result)
        finally:
            _current.reset(token)


def actor_spec(
    id: str,
    factory: Callable[[], Actor],
    *,
    mailbox: int | float = 256,
    restart: Restart = Restart.PERMANENT,
    shutdown_timeout: float = 5.0,
    give_up: GiveUp = GiveUp.ESCALATE,
    intensity: Intensity | None = None,
    backoff: Backoff | None = None,
    address: Address | None = None,
    hurry: Callable[[], Awaitable[None]] | None = None,
) -> ChildSpec:
    """A child spec for an actor: ``factory()`` makes each incarnation.

    The spec's :class:`Address` (made here unless given) is the actor's mailbox for
    every incarnation; send to it with ``spec.address.call(...)``. ``hurry``: see
    :class:`ChildSpec`.
    """
    addr = address if address is not None else Address(id, mailbox)
    return ChildSpec(
        id=id,
        start=lambda: _Runner(addr, factory()),
        restart=restart,
        shutdown_timeout=shutdown_timeout,
        give_up=give_up,
        intensity=intensity,
        backoff=backoff,
        addresses=(addr,),
        hurry=hurry,
    )


__all__ = ["Actor", "actor_spec", "before_effect"]
