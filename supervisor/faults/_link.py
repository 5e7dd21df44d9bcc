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
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ._engine import FaultEngine, Injected, Message
from ._plan import TO_CLIENT, TO_SERVER, Action

__all__ = ["REORDER_HOLD_S", "CallRecorder", "Link", "Send", "Target", "garbage", "json_error"]

Send = Callable[[bytes], Awaitable[None]]
#: How long ``reorder`` holds a message back waiting for the next one to overtake it.
REORDER_HOLD_S = 1.0
#: The notification ``list_changed`` sends the client.
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


class Target(Protocol):
    """What a link can do to the server it stands in front of."""

    def kill(self) -> None:
        """End the server as a crash would (SIGKILL to its process group)."""

    def stop(self) -> None:
        """Make the server stop answering (SIGSTOP to its process group)."""

    def resume(self) -> None:
        """Undo :meth:`stop` (SIGCONT)."""

    async def close(self, direction: str) -> None:
        """Close the stream messages travel ``direction`` on."""


class CallRecorder:
    """The tool calls a proxy carries, in a :class:`~supervisor.faults.CallHistory`, as
    the client lives them: ``invoke`` when a ``tools/call`` request arrives; ``ok`` when an
    answer reaches the client (``is_error`` for a tool's own failure); ``fail`` when an
    error answer does (the server's, or one injected in its place), or when the session
    ends before the request reached the server; ``info`` when it ends after it did, but
    before any answer reached the client (:meth:`finish`). ``server`` names the server in
    the records.

    A call is known by its JSON-RPC id within a ``scope``: one stream for a stdio proxy
    (``None``), one exchange over HTTP, whose answer comes in that exchange's response,
    so that clients numbering their requests alike do not mix up their calls."""

    def __init__(self, history: Any, server: str | None = None) -> None:  # noqa: ANN401
        self.history = history
        self.server = server
        # (scope, JSON-RPC id) -> its CallRecord
        self._pending: dict[tuple[object, int | str], Any] = {}

    def invoked(self, message: Message, scope: object = None) -> None:
        """The client sent the ``tools/call`` request ``message`` (in ``scope``)."""
        assert message.id is not None
        tool = message.tool or "?"
        record = self.history.invoke(tool, server=self.server, original=tool)
        self._pending[(scope, message.id)] = record

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
        key = (scope, msg_id)
        record = self._pending.get(key)
        if record is None:
            return
        if towards == TO_SERVER:
            if body.get("method") == "tools/call" and record.sent_at is None:
                self.history.sent(record)
            return
        if "method" in body:
            return  # a request of the server's own that reuses the number
        del self._pending[key]
        error = body.get("error")
        if isinstance(error, dict):
            self.history.fail(record, f"MCP error {error.get('code')}: {error.get('message')}")
            return
        result = body.get("result")
        is_error = isinstance(result, dict) and result.get("isError") is True
        self.history.ok(record, is_error=is_error)

    def finish(self) -> None:
        """The session is over: the calls still unanswered get their outcome."""
        for record in self._pending.values():
            if record.sent_at is None:
                self.history.fail(record, "the session ended before the call reached the server")
            else:
                self.history.info(
                    record, "the session ended before an answer to the call reached the client"
                )
        self._pending.clear()


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
