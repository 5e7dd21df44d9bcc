"""Sending one request on an incarnation's live connection, and what became of it.

A tool call is sent once: refused unseen (a session the server forgot) it is sent again on
a new session; lost with the connection before it went out — or, with the embedder's
``retry_idempotent``, a read-only or idempotent tool's even after — it goes back to the
mailbox (:class:`~._messages._NotSent`) for the next connection; lost after, it
may have taken effect and says so. A call the server makes a task of is followed to its
end (:func:`._tasks.follow`), or handed back to a caller that follows tasks itself. A
read-only request (a resource read, a prompt, a completion, a tasks request) is sent
again once on the next connection if its connection dies under it. Answered, the
server's health hears of it; what a failure means is said once (:mod:`._refusals`), and
an answer waits for the log messages and progress that came before it to be handled.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import mcp_types as types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..actors import before_effect
from ..errors import CallMayHaveTakenEffect, ServerRequestError
from ..tools._request import Round, Task
from ..tools._validate import invalid_output
from ..transports._forward import Forwarding
from ..transports._forward_remote import RemoteForwarding
from ..transports._receipts import Receipt, connection_closed, delivery
from . import _tasks as tasks
from ._health import Health
from ._link import Link
from ._messages import CallTool, Complete, GetPrompt, ReadResource, TaskRequest, _NotSent
from ._refusals import invalid_result, refused, session_expired, too_large
from ._wire import call, counted

#: Seconds an answered call waits for the log messages that came before its answer to
#: be handled by the logging callback.
LOGS_WAIT = 1.0

_T = TypeVar("_T")
#: What a tool call answers with: its result, a relayed ``input_required`` round, or (for
#: a caller that follows it itself) the task the server made of it
CallAnswer = types.CallToolResult | Round | Task


class Requests:
    """Carries each request on one incarnation's connection (``link``) to its outcome."""

    __slots__ = ("health", "link", "number", "server")

    def __init__(self, server: Any, health: Health, link: Link, number: int) -> None:
        # ``server`` is its ServerHandle, which makes the actors: not imported here.
        self.server = server
        #: the server's health record (its state's), which hears of each answer
        self.health = health
        self.link = link
        #: the incarnation's number (a task handed back remembers it)
        self.number = number

    async def call_tool(
        self, client: Client, message: CallTool, receipt: Receipt, *, direct: bool
    ) -> CallAnswer:
        """Send one tool call on ``client``; raises :class:`_NotSent` when it is known not
        to have reached the server (or may be sent again, by the embedder's opt-in)."""
        server = self.server
        health = self.health
        start = trio.current_time()
        link = self.link
        transport = link.transport
        if link.lost.is_set() or (transport is not None and transport.closed.is_set()):
            raise _NotSent  # the connection is known dead: don't send on it
        # Until the request is out, a dying connection gives it back to the mailbox; with
        # the embedder's opt-in, so does a read-only or idempotent tool's, even after.
        safe = server.retry_idempotent and self.idempotent(message.tool)
        if message.progress is not None:  # each notification counted done, for the answer
            message = attrs.evolve(message, progress=counted(message.progress, receipt))
        token = delivery.set(receipt)
        try:
            try:
                forwarding = getattr(transport, "forwarding", None)
                if direct:  # the caller's task: its end is handled by DirectCalls.call
                    result = await call(client, message, forwarding)
                else:
                    with before_effect(until=None if safe else lambda: not receipt.withdraw()):
                        result = await self._send(client, message, forwarding)
            except tasks._TaskCreated as created:  # answered with a task
                if message.rounds is not None and message.rounds.tasks:
                    result = Task(created.task)  # its caller follows it
                    server.task_made(created.task.task_id, self.number)
                else:
                    result = await tasks.follow(
                        link, client, server.name, message.tool, created.task
                    )
        except MCPError as exc:
            if direct and session_expired(exc):
                raise _NotSent from None  # the mailbox path renews the session
            # The SDK's "Connection closed", not a server's own -32000: see connection_closed.
            lost = connection_closed(exc, receipt)
            if lost:
                link.lost.set()  # the connection is dead: this incarnation ends
                if receipt.withdraw() or safe:
                    raise _NotSent from None  # it never reached the server, or may run twice
            health.call_failed()
            if lost:
                raise CallMayHaveTakenEffect.during(server.name, message.tool) from exc
            oversize = too_large(server.name, message.tool, exc)
            if oversize is not None:
                health.alive(time.time())  # it answered; the answer was too big
                raise oversize from exc
            raise refused(server.name, message.tool, exc) from exc
        except ValidationError as exc:  # the SDK's check of the answer: the server's fault
            health.call_failed()
            health.alive(time.time())  # the server answered; the answer was wrong
            raise invalid_result(server.name, f"tool {message.tool!r}", client, exc) from exc
        except RuntimeError as exc:
            health.call_failed()
            invalid = invalid_output(message.called, exc, server=server.name)
            if invalid is None:
                raise
            health.alive(time.time())  # the server answered; the answer was wrong
            raise invalid from exc
        except BaseException:
            health.call_failed()
            raise
        finally:
            delivery.reset(token)
        answers = getattr(transport, "answers", None)
        if answers is not None and answers.logs_done < receipt.logs_before:
            # What it logged during the call reaches the logging callback first.
            await answers.logs_handled(receipt, LOGS_WAIT)
        if receipt.progress_done < receipt.progress_seen:  # and its progress, the callback
            await receipt.progress_settled(LOGS_WAIT)
        # An error result is the tool's own failure: the server answered.
        tool_error = getattr(result, "is_error", False)  # an input_required answer: none
        health.call_answered(trio.current_time() - start, time.time(), tool_error=tool_error)
        return result

    async def _send(
        self, client: Client, message: CallTool, forwarding: Forwarding | RemoteForwarding | None
    ) -> types.CallToolResult | Round:
        try:
            return await call(client, message, forwarding)
        except MCPError as exc:
            if not session_expired(exc):
                raise
        # The server rejected it unseen: renew the session, send it once more.
        with before_effect():
            client = await self.link.new_session(client)
        return await call(client, message)

    async def fetch(
        self,
        client: Client,
        message: ReadResource | GetPrompt | Complete | TaskRequest,
        what: str,
        send: Callable[[Client], Awaitable[_T]],
    ) -> _T:
        """Send a read-only request (a resource read, a prompt). If the connection dies
        with it in flight, it goes back to the mailbox and out again on the next
        connection — once; a second loss is a :class:`ServerRequestError`."""
        server = self.server
        link = self.link
        if link.dead():
            await link.requeue()  # the connection is known dead: not sent, not counted
        message.sends += 1
        again = message.sends == 1
        receipt = link.receipt()
        token = delivery.set(receipt)
        try:
            with before_effect(until=None if again else lambda: not receipt.withdraw()):
                try:
                    result = await send(client)
                except MCPError as exc:
                    if not session_expired(exc):
                        raise
                    # Rejected unseen: renew the session, send it once more.
                    result = await send(await link.new_session(client))
        except ValidationError as exc:  # the SDK's check of the answer: the server's fault
            self.health.alive(time.time())  # it answered; the answer was wrong
            raise invalid_result(server.name, what, client, exc) from exc
        except MCPError as exc:
            if connection_closed(exc, receipt):
                link.lost.set()  # the connection is dead: this incarnation ends
                if receipt.withdraw() or again:
                    await link.requeue()
                raise ServerRequestError(
                    f"the connection to MCP server {server.name!r} closed twice with {what} "
                    "in flight (it was sent again once); try again once it is back",
                    server=server.name,
                    code=exc.code,
                ) from exc
            raise ServerRequestError(
                f"MCP server {server.name!r} refused {what}: {exc.message} (MCP error {exc.code})",
                server=server.name,
                code=exc.code,
                data=exc.error.data,
            ) from exc
        finally:
            delivery.reset(token)
        self.health.alive(time.time())
        return result

    def idempotent(self, tool: str) -> bool:
        """Whether the server annotates ``tool`` read-only or idempotent."""
        listed = self.server.tool(tool)
        if listed is None or listed.annotations is None:
            return False
        hints = listed.annotations
        return bool(hints.read_only_hint or hints.idempotent_hint)
