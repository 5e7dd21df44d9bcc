"""Carrying messages through a fault plan: the part every message-stream injection point
shares (the chaos stdio proxy, a supervised stdio server, an in-memory server).

A :class:`Link` sits between a client and a server. Each message (one JSON-RPC message,
without its newline) is handed to :meth:`Link.carry` with its direction and two ways to
send: ``forward`` (on its way) and ``back`` (to where it came from: an injected error
answers a request there). What the link cannot do by itself it asks of its
:class:`Target`: kill the server, stop and resume it, close a stream.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from ...config._plan import TO_CLIENT, TO_SERVER, Action
from ...transports._faults import FaultTarget, Injected, Send
from ._engine import FaultEngine, Message

__all__ = [
    "REORDER_HOLD_S",
    "CallRecorder",
    "Exchange",
    "Link",
    "Send",
    "Target",
    "garbage",
    "json_error",
    "mcp_error",
]

#: How long ``reorder`` holds a message back waiting for the next one to overtake it.
REORDER_HOLD_S = 1.0
#: The notification ``list_changed`` sends the client.
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


#: What a link can do to the server it stands in front of (the core's interface).
Target = FaultTarget


class Exchange:
    """One HTTP exchange through a proxy, the scope of the tool call its request carries
    (its answer comes in that exchange). ``session`` is the request's ``Mcp-Session-Id``,
    if any: JSON-RPC ids are the client's own within a session, so a cancellation POSTed
    in another of its exchanges, or an answer on its resumed stream, names the call."""

    __slots__ = ("session",)

    def __init__(self, session: str | None = None) -> None:
        self.session = session or None


class _Call:
    """A call a :class:`CallRecorder` waits on: its record, the scope that carried its
    request, and when and why the client gave up on it, if it did before it was sent."""

    __slots__ = ("gave_up", "gave_up_at", "record", "scope")

    def __init__(self, record: Any, scope: object) -> None:  # noqa: ANN401 - a CallRecord
        self.record = record
        self.scope = scope
        self.gave_up: str | None = None
        self.gave_up_at: float | None = None


#: Why a call the client cancelled ended (the ``notifications/cancelled`` it sent).
GAVE_UP = "the client gave up on it (notifications/cancelled)"


class CallRecorder:
    """The tool calls a proxy carries, in a :class:`~supervisor.faults.CallHistory`, as
    the client lives them, each ended when the client learnt its outcome:

    - ``invoke`` when a ``tools/call`` request arrives;
    - ``ok`` when an answer reaches the client (``is_error`` for a tool's own failure);
    - ``fail`` when an error answer does (the server's, or one injected in its place), or
      an answer that refuses the request before it runs (an HTTP 4xx, a JSON-RPC error
      naming no id: :meth:`refused`);
    - when the client gives up (it sends ``notifications/cancelled``), or the exchange
      or session carrying the call ends without its answer (:meth:`unanswered`,
      :meth:`finish`): ``fail`` if the request had not reached the server — a request
      still on its way when the client gave up ends ``info`` instead, at that moment,
      should it reach the server after all — else ``info``: it may have run.

    ``server`` names the server in the records.

    A call is known by its JSON-RPC id within a ``scope``: one stream for a stdio proxy
    (``None``), one :class:`Exchange` over HTTP — or its session, when it has one — so
    that clients numbering their requests alike do not mix up their calls."""

    def __init__(self, history: Any, server: str | None = None) -> None:  # noqa: ANN401
        self.history = history
        self.server = server
        # (client, JSON-RPC id) -> the call; the client is the scope or its session
        self._pending: dict[tuple[object, int | str], _Call] = {}

    @staticmethod
    def _client(scope: object) -> object:
        session = scope.session if isinstance(scope, Exchange) else None
        return scope if session is None else ("session", session)

    def invoked(self, message: Message, scope: object = None) -> None:
        """The client sent the ``tools/call`` request ``message`` (in ``scope``)."""
        assert message.id is not None
        tool = message.tool or "?"
        record = self.history.invoke(tool, server=self.server, original=tool)
        self._pending[(self._client(scope), message.id)] = _Call(record, scope)

    def cancelled(self, message: Message, scope: object = None) -> None:
        """The client sent the ``notifications/cancelled`` ``message`` (in ``scope``): it
        gave up on the call it names. A call already sent ends ``info`` now; one not sent
        yet waits to see whether it reaches the server (see the class docstring)."""
        params = message.body.get("params") if message.body is not None else None
        msg_id = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(msg_id, int | str) or isinstance(msg_id, bool):
            return
        key = (self._client(scope), msg_id)
        call = self._pending.get(key)
        if call is None or call.gave_up is not None:
            return
        if call.record.sent_at is not None:
            del self._pending[key]
            self._settle(call, GAVE_UP)
            return
        call.gave_up, call.gave_up_at = GAVE_UP, self.history.now()

    def watch(self, towards: str, send: Send) -> Send:
        """``send``, noting what it delivers ``towards`` the server or the client."""

        async def sending(line: bytes) -> None:
            await send(line)
            self.delivered(towards, line)

        return sending

    def delivered(self, towards: str, line: bytes, scope: object = None) -> None:
        """The message ``line`` (in ``scope``) was delivered ``towards`` the server or the
        client: a call's request reached the server, or an answer the client. What is not
        a JSON-RPC message about a pending call is ignored."""
        if not self._pending:
            return
        try:
            body = json.loads(line)
        except ValueError:
            return  # garbage or a cut message: nobody can read it
        if not isinstance(body, dict):
            return
        msg_id = body.get("id")
        if not isinstance(msg_id, int | str) or isinstance(msg_id, bool):
            return
        key = (self._client(scope), msg_id)
        call = self._pending.get(key)
        if call is None:
            return
        record = call.record
        if towards == TO_SERVER:
            if body.get("method") == "tools/call" and record.sent_at is None:
                self.history.sent(record)
                if call.gave_up is not None:  # it may run, though the client gave up
                    del self._pending[key]
                    self._settle(call, call.gave_up)
            return
        if "method" in body:
            return  # a request of the server's own that reuses the number
        del self._pending[key]
        error = body.get("error")
        if isinstance(error, dict):
            self.history.fail(record, mcp_error(error), at=call.gave_up_at)
            return
        result = body.get("result")
        is_error = isinstance(result, dict) and result.get("isError") is True
        self.history.ok(record, is_error=is_error, at=call.gave_up_at)

    def refused(self, scope: object, why: str) -> None:
        """An answer in ``scope`` refused its request before it ran (``why``: an HTTP 4xx,
        a JSON-RPC error naming no id): its calls were not executed."""
        for call in self._take(scope):
            self.history.fail(call.record, f"{why}; refused, not run", at=call.gave_up_at)

    def unanswered(self, scope: object, why: str) -> None:
        """The exchange ``scope`` is over (``why``) without an answer to its calls."""
        for call in self._take(scope):
            self._settle(call, why)

    def finish(self) -> None:
        """The session is over: the calls still unanswered get their outcome."""
        calls = list(self._pending.values())
        self._pending.clear()
        for call in calls:
            self._settle(call, "the session ended")

    def _take(self, scope: object) -> list[_Call]:
        """The calls whose requests ``scope`` carried, no longer pending."""
        keys = [key for key, call in self._pending.items() if call.scope is scope]
        return [self._pending.pop(key) for key in keys]

    def _settle(self, call: _Call, why: str) -> None:
        """``call`` ended without an answer: ``fail`` if its request never reached the
        server, else ``info``; when and why the client gave up, if it did."""
        why = call.gave_up or why
        if call.record.sent_at is None:
            self.history.fail(
                call.record, f"{why}; the call never reached the server", at=call.gave_up_at
            )
        else:
            self.history.info(
                call.record,
                f"{why}; the call reached the server, which may have run it",
                at=call.gave_up_at,
            )


def mcp_error(error: dict[str, object]) -> str:
    """A JSON-RPC error object as a call's error: ``MCP error -32600: Session not found``."""
    return f"MCP error {error.get('code')}: {error.get('message')}"


def json_error(msg_id: int | str, code: int, message: str) -> bytes:
    """A JSON-RPC error response, encoded."""
    body = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
    return json.dumps(body, separators=(",", ":")).encode()


def garbage(n: int) -> bytes:
    """The ``n``-th injected garbage line: text that is not JSON-RPC."""
    return f"chaos: garbage line {n}, not a JSON-RPC message".encode()


class Link:
    """Applies ``engine``'s decisions to the messages passing between client and server.

    Messages in one direction are carried one at a time, in order (a ``delay`` holds back
    the ones behind it, as latency on a pipe does). Timed work (a ``hang_ms`` resume, the
    release of a message held by ``reorder``) runs in ``nursery``.
    """

    def __init__(
        self,
        engine: FaultEngine,
        target: Target,
        nursery: trio.Nursery,
        *,
        to_client: Send | None = None,
        calls: CallRecorder | None = None,
    ) -> None:
        self.engine = engine
        self.target = target
        self._nursery = nursery
        self._to_client = to_client
        #: records the tool calls that pass, if a proxy keeps a history
        self.calls = calls
        engine.link = self  # the engine's current connection, for inject()
        self._locks = {TO_SERVER: trio.Lock(), TO_CLIENT: trio.Lock()}
        # a message held back by ``reorder``, per direction, with its way on
        self._held: dict[str, tuple[bytes, Send] | None] = {TO_SERVER: None, TO_CLIENT: None}
        self._garbage = 0
        self.killed = False

    async def carry(self, direction: str, line: bytes, forward: Send, back: Send) -> None:
        """Carry one message ``direction``; ``forward`` sends it on, ``back`` answers."""
        message = self.engine.classify(direction, line)
        actions = self.engine.decide(direction, message)
        if self.calls is not None:
            if direction == TO_SERVER and message.method == "tools/call" and message.is_request:
                self.calls.invoked(message)
            elif direction == TO_SERVER and message.method == "notifications/cancelled":
                self.calls.cancelled(message)
            other = TO_CLIENT if direction == TO_SERVER else TO_SERVER
            forward = self.calls.watch(direction, forward)
            back = self.calls.watch(other, back)
        async with self._locks[direction]:
            if not actions:
                await forward(line)
                await self._release(direction)
                return
            await self._apply(direction, line, message, actions, forward, back)

    async def _apply(
        self,
        direction: str,
        line: bytes,
        message: Message,
        actions: list[Action],
        forward: Send,
        back: Send,
    ) -> None:
        to_client = forward if direction == TO_CLIENT else back
        copies = 1
        hold = False
        for action in actions:
            kind = action.kind
            if kind == "delay":
                await trio.sleep(action.delay_ms / 1000)
            elif kind == "hang":
                self.target.stop()
                if action.ms is not None:
                    self._nursery.start_soon(self._resume_after, action.ms / 1000)
            elif kind == "garbage_line":
                self._garbage += 1
                await forward(garbage(self._garbage))
            elif kind == "duplicate":
                copies += 1
            elif kind == "reorder":
                hold = True
            elif kind == "list_changed":
                await to_client(LIST_CHANGED)
            elif kind in ("kill", "exit_on_initialize"):
                self.killed = True
                self.target.kill()
                return
            elif kind == "drop":
                await self._release(direction)
                return
            elif kind == "truncate":
                await forward(line[: max(1, len(line) // 2)])
                await self._release(direction)
                return
            elif kind == "close_stream":
                await self.target.close(direction)
                return
            elif kind == "error":
                if message.id is not None and message.is_request:
                    await back(json_error(message.id, action.code, action.message))
                elif message.id is not None and message.is_response:
                    await forward(json_error(message.id, action.code, action.message))
                await self._release(direction)
                return
            else:  # http_status, expire_session: refused when the plan was checked
                raise AssertionError(f"{kind} cannot be injected into a message stream")
        if hold and self._held[direction] is None:
            self._held[direction] = (line, forward)
            self._nursery.start_soon(self._release_later, direction)
            copies -= 1
        for _ in range(copies):
            await forward(line)
        if not hold:
            await self._release(direction)

    async def _release(self, direction: str) -> None:
        """Send the message ``reorder`` held back, now that another has overtaken it."""
        held = self._held[direction]
        if held is not None:
            self._held[direction] = None
            line, forward = held
            await forward(line)

    async def _release_later(self, direction: str) -> None:
        await trio.sleep(REORDER_HOLD_S)
        async with self._locks[direction]:
            await self._release(direction)

    async def _resume_after(self, seconds: float) -> None:
        await trio.sleep(seconds)
        if not self.killed:
            self.target.resume()

    #: What :meth:`inject` can do.
    INJECTABLE = ("kill", "hang", "resume", "list_changed")

    async def inject(self, action: str) -> Injected:
        """Inject ``action`` now, outside the plan (a test's own fault): ``kill``,
        ``hang`` (until ``resume``), ``resume`` or ``list_changed``; recorded in the
        engine's log with rule ``-1``."""
        if action not in self.INJECTABLE:
            raise ValueError(
                f"cannot inject {action!r} by hand; one of " + ", ".join(self.INJECTABLE)
            )
        if action == "list_changed" and self._to_client is None:
            raise ValueError("this link cannot send the client a notification")
        record = self.engine.note(action, f"{action} (injected by hand)")
        if action == "kill":
            self.killed = True
            self.target.kill()
        elif action == "hang":
            self.target.stop()
        elif action == "resume":
            self.target.resume()
        else:
            assert self._to_client is not None
            async with self._locks[TO_CLIENT]:
                await self._to_client(LIST_CHANGED)
        return record

    def retire(self) -> None:
        """The connection is over: :meth:`inject` no longer reaches it."""
        if self.engine.link is self:
            self.engine.link = None

    async def flush(self) -> None:
        """Send whatever ``reorder`` still holds (the stream is ending)."""
        for direction in (TO_SERVER, TO_CLIENT):
            async with self._locks[direction]:
                await self._release(direction)
