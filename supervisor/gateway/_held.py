"""Calls held across round trips: a session-based server's questions, asked of a
2026-07-28 caller.

A server on the session-based protocol asks its client while a tool runs — a
``sampling/createMessage``, ``elicitation/create`` or ``roots/list`` request — and waits
for the answer. A 2026-07-28 client takes no requests: it answers a server's questions
in rounds (an ``input_required`` result; the call made again with ``inputResponses``).
The gateway bridges the two. Such a caller's call of a tool on a server the gateway
speaks the session-based protocol to runs in a task of the gateway's own
(:class:`HeldCalls`); a question the server asks meanwhile ends the caller's request
with an ``input_required`` round — the server's request as it is, under a key of its
own, and a ``requestState`` naming the held call (sealed by the SDK, bound to the
caller) — while the server waits for its answer. The call made again with the answer
hands it to the server and waits for what comes next: the call's result, or the
server's next question (another round).

A held call waits for its caller's answer at most :data:`HOLD_FOR` seconds (and the
call as a whole at most its timeout, as any call): then it is cancelled at the server,
and may have taken effect in part; a late answer is told so. A caller that goes away
while its call runs (and no question is out to it) cancels the call, as it would
without the bridge. At most :data:`MAX_HELD` calls are held at once: past that, a
server's question gets the error a client without the capability gives.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

import attrs
import mcp_types as types
import trio
from pydantic import BaseModel, ValidationError

from ..log import get_logger

__all__ = ["HOLD_FOR", "MAX_HELD", "Held", "HeldCalls", "Question"]

log = get_logger("supervisor.gateway")

#: Seconds a held call waits for its caller's answer to the server's question.
HOLD_FOR = 600.0
#: Calls held at once, at most.
MAX_HELD = 256

_R = TypeVar("_R")


@attrs.frozen
class Question:
    """The server's request ``request``, for the caller to answer under ``key``."""

    key: str
    request: types.InputRequest


@attrs.define(eq=False)
class _Asked:
    """A question out to the caller: its answer (a result of ``result_type``, or the
    error the server gets) once it comes."""

    question: Question
    result_type: type[BaseModel]
    came: trio.Event = attrs.field(factory=trio.Event)
    answer: Any = None


@attrs.frozen
class _Done(Generic[_R]):
    value: _R | None = None
    error: BaseException | None = None


class Held(Generic[_R]):
    """One call of a 2026-07-28 caller, running in the gateway's task, whose server may
    ask that caller questions (:meth:`ask`); its caller waits for what comes next
    (:meth:`next`) and answers (:meth:`answer`)."""

    def __init__(self, server: str, owner: str | None) -> None:
        #: the id its ``requestState`` names: unguessable
        self.id = secrets.token_urlsafe(18)
        self.server = server
        #: the team gateway's caller it is for (``None``: whoever holds the token)
        self.owner = owner
        self.scope = trio.CancelScope()
        self._events, self._next = trio.open_memory_channel[Question | _Done[_R]](math.inf)
        #: the questions out to the caller, by key
        self._out: dict[str, _Asked] = {}
        self._asked = 0

    # -- the call's side (the backing server asks) ---------------------------------------

    async def ask(self, request: types.InputRequest, result_type: type[BaseModel]) -> Any:
        """Ask the caller ``request``; its answer, as ``result_type`` (or the error the
        server gets: :class:`mcp_types.ErrorData`). Unanswered within :data:`HOLD_FOR`
        seconds, the call is cancelled."""
        self._asked += 1
        key = f"{self.server}/{self._asked}"
        asked = _Asked(Question(key, request), result_type)
        self._out[key] = asked
        self._events.send_nowait(asked.question)
        try:
            with trio.move_on_after(HOLD_FOR):
                await asked.came.wait()
        finally:
            self._out.pop(key, None)
        if not asked.came.is_set():
            log.warning(
                "a held call's question went unanswered: the call is cancelled",
                server=self.server,
                waited=HOLD_FOR,
            )
            self.scope.cancel()
            await trio.lowlevel.checkpoint()  # raises the cancellation
        return asked.answer

    async def run(self, call: Callable[[], Awaitable[_R]]) -> None:
        """Make the call, and tell its caller how it ended."""
        try:
            with self.scope:
                value = await call()
                self._events.send_nowait(_Done(value))
                return
        except Exception as exc:  # the caller gets it raised, as if it ran in its task
            self._events.send_nowait(_Done(error=exc))
            return
        # cancelled: by the hold's end, or the gateway's; a late answer is told so
        self._events.close()

    # -- the caller's side ---------------------------------------------------------------

    async def next(self) -> Question | _R:
        """What comes next of the call: the server's question, or the call's result (its
        error raised). Raises :class:`trio.EndOfChannel` for a call that was cancelled.
        A caller that goes away waiting cancels the call."""
        while True:
            try:
                event = await self._next.receive()
            except trio.Cancelled:
                self.scope.cancel()  # its caller went away: nobody to answer to
                raise
            if not isinstance(event, Question):
                break
            if event in self.pending():  # (not one answered already, in an earlier round)
                return event
        if event.error is not None:
            raise event.error
        return cast("_R", event.value)  # it ended without an error: the call's value

    def pending(self) -> list[Question]:
        """The questions out to the caller, unanswered."""
        return [asked.question for asked in self._out.values() if not asked.came.is_set()]

    def answer(self, responses: Mapping[str, object] | None) -> list[Question]:
        """Hand the caller's ``responses`` to the questions they answer; the questions
        still unanswered (asked again)."""
        for key, response in (responses or {}).items():
            asked = self._out.get(key)
            if asked is None or asked.came.is_set():
                continue
            asked.answer = _as(response, asked.result_type)
            asked.came.set()
        return self.pending()


def _as(response: object, result_type: type[BaseModel]) -> Any:
    """The caller's ``response`` as the result the server asked for, or the error it
    gets when it is not one."""
    data = (
        response.model_dump(by_alias=True, exclude_none=True)
        if isinstance(response, BaseModel)
        else response
    )
    try:
        return result_type.model_validate(data, by_name=False)
    except ValidationError:
        return types.ErrorData(
            code=types.INVALID_PARAMS,
            message=f"the caller of the mcp-supervisor gateway answered with what is not a "
            f"{result_type.__name__}",
        )


class HeldCalls:
    """The calls held for their callers, run in :meth:`run`'s nursery."""

    def __init__(self) -> None:
        self._held: dict[str, Held[Any]] = {}
        self._nursery: trio.Nursery | None = None
        self._ended = trio.lowlevel.ParkingLot()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold calls until cancelled (every call held is cancelled then)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._held.clear()

    def ready(self) -> bool:
        """Whether another call can be held now."""
        return self._nursery is not None and len(self._held) < MAX_HELD

    def start(self, held: Held[_R], call: Callable[[], Awaitable[_R]]) -> None:
        """Run ``call`` as ``held``, until it ends (or is cancelled)."""
        assert self._nursery is not None, "HeldCalls.run is not running"
        self._held[held.id] = held

        async def run() -> None:
            try:
                await held.run(call)
            finally:
                self._held.pop(held.id, None)
                self._ended.unpark_all()

        self._nursery.start_soon(run)

    def get(self, held_id: object, owner: str | None) -> Held[Any] | None:
        """The call held under ``held_id`` for ``owner``, if it still is."""
        held = self._held.get(held_id) if isinstance(held_id, str) else None
        if held is None or held.owner != owner:
            return None
        return held

    async def none_held(self) -> None:
        """Return once no call is held."""
        while self._held:
            await self._ended.park()

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[str]:
        """The ids of the calls held now."""
        return iter(list(self._held))
