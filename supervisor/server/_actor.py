"""The server actor: one incarnation holds at most one SDK session with the server."""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar, cast

import attrs
import mcp_types as types
import trio
from mcp import Client
from mcp.client import ClientExtension
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .._util._deprecated import on_purpose
from .._util._jsontext import json_path
from ..actors import Actor, Normal, before_effect
from ..actors._errors import collapse
from ..auth._broker import AuthProblem
from ..calls import _tracing as tracing
from ..calls._request import Round, Task
from ..errors import (
    AuthorizationFailed,
    AuthRequired,
    BoundExceeded,
    CallMayHaveTakenEffect,
    ConnectTimeout,
    HTTPStatusError,
    ResultInvalid,
    ResultTooLarge,
    ServerExited,
    ServerRequestError,
    TaskFailed,
    ToolCallTimeout,
    TransportError,
    status_phrase,
)
from ..events import _catalog as events
from ..log import get_logger, redact
from ..tools._validate import invalid_output
from ..transports._encoding import caller_capabilities
from ..transports._errors import safe_url
from ..transports._oversize import RESULT_TOO_LARGE
from ..transports._receipts import Receipt, connection_closed, delivery
from ..transports._remote import TransportLike
from ..transports._stdio import StdioTransport
from . import _tasks as tasks
from ._elicitation import checked_elicitation
from ._listing import Listings, describe, listen_ack_wait
from ._messages import (
    CALL_ID_META,
    CallTool,
    Complete,
    GetPrompt,
    InputRound,
    ListTools,
    Progress,
    ReadResource,
    TaskRequest,
    _NotSent,
)
from ._options import pinned, resolved
from ._probes import keep_probing, watch_connection
from ._startup import Turn
from ._subscriptions import keep_subscriptions

log = get_logger("supervisor.server")

#: The errors an OAuth problem ends a connection with.
AuthError = AuthRequired | AuthorizationFailed

#: How long a probe may take before it counts as unanswered.
PING_TIMEOUT = 10.0
#: Seconds an answered call waits for the log messages that came before its answer to
#: be handled by the logging callback.
LOGS_WAIT = 1.0
#: Requests one connection serves at once; more wait in the mailbox.
MAX_IN_FLIGHT = 256
#: A local server's last stderr lines kept with its failure (``mcp.local.crashed``, the
#: health record's ``stderr_tail``).
CRASH_TAIL_LINES = 20


_T = TypeVar("_T")
#: What a tool call answers with: its result, a relayed ``input_required`` round, or (for
#: a caller that follows it itself) the task the server made of it
CallAnswer = types.CallToolResult | Round | Task


async def _call(client: Client, message: CallTool) -> types.CallToolResult | Round:
    """The SDK call for ``message``, in the caller's trace context; a recorded call
    carries its id in ``_meta``; a relayed multi-round-trip one (``rounds``) its last
    round's answers and state, and its ``input_required`` answer comes back as it is (a
    :class:`~supervisor.calls._request.Round`). A
    call made for a gateway's caller (``message.capabilities``) declares, to a 2026-07-28
    server, what it can of that caller's capabilities."""
    arguments = dict(message.arguments or {})
    with _made_for(message.capabilities), tracing.attached(message.context):
        return await _sent(client, message, arguments)


@contextmanager
def _made_for(capabilities: Mapping[str, Any] | None) -> Iterator[None]:
    """While the block runs, the requests sent declare what they can of
    ``capabilities``, their caller's (``None``: the supervisor's own)."""
    passing = caller_capabilities.set(capabilities)
    try:
        yield
    finally:
        caller_capabilities.reset(passing)


async def _sent(
    client: Client, message: CallTool, arguments: dict[str, object]
) -> types.CallToolResult | Round:
    """:func:`_call`'s request, sent (in the caller's trace context)."""
    # the SDK's ProgressFnT names its parameters; it calls them positionally, as Progress is
    progress: ProgressFnT | None = message.progress  # pyright: ignore[reportAssignmentType]
    if message.call_id is None and message.log_level is None and message.rounds is None:
        return await client.call_tool(message.tool, arguments, progress_callback=progress)
    meta: types.RequestParamsMeta = {}
    if message.call_id is not None:
        meta[CALL_ID_META] = message.call_id
    if message.log_level is not None:  # 2026-07-28 servers log only when asked to
        meta[types.LOG_LEVEL_META_KEY] = message.log_level
    rounds = message.rounds
    if rounds is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # (only that protocol has rounds; the others keep the client's own call path)
        async def send() -> types.CallToolResult | types.InputRequiredResult | types.Result:
            return await client.session.call_tool(
                message.tool,
                arguments,
                progress_callback=progress,
                input_responses=_responses(rounds),
                request_state=rounds.state,
                meta=meta or None,
                allow_input_required=True,
                allow_claimed=True,
            )

        try:
            result = await send()
        except MCPError as exc:
            if exc.code != types.HEADER_MISMATCH:
                raise
            # Refused unseen: its Mcp-Param-* headers follow a schema the server no
            # longer lists. The SDK client's own recovery: list again, send once more.
            await _relist(client, message.tool)
            result = await send()
        if isinstance(result, tasks.CreatedTask):
            raise tasks._TaskCreated(result)
        if isinstance(result, types.InputRequiredResult):
            return Round(result)
        # a claimed task is parsed as a CreatedTask (tasks.parse_cheaply): not one, this is
        return cast("types.CallToolResult", result)
    return await client.call_tool(
        message.tool,
        arguments,
        progress_callback=progress,
        meta=meta,
    )


def refused(server: str, tool: str, exc: MCPError) -> ServerRequestError:
    """A tool call's MCP error answer ``exc`` (``tool`` as the server names it), in the
    supervisor's terms: :class:`ServerRequestError` with its code and data."""
    return ServerRequestError(
        f"MCP server {server!r} refused tool {tool!r}: {exc.message} (MCP error {exc.code})",
        server=server,
        code=exc.code,
        data=exc.error.data,
    )


async def _read(
    client: Client, uri: str, rounds: InputRound | None
) -> types.ReadResourceResult | types.InputRequiredResult:
    """Read ``uri``; a relayed multi-round-trip read (``rounds``, 2026-07-28) carries its
    last round's answers and state, and its ``input_required`` answer comes back as it is
    (on the session-based protocol the client's own read path answers the server)."""
    if rounds is None or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await client.read_resource(uri)
    return await client.session.read_resource(
        uri,
        input_responses=_responses(rounds),
        request_state=rounds.state,
        allow_input_required=True,
    )


async def _prompt(
    client: Client, name: str, arguments: dict[str, str] | None, rounds: InputRound | None
) -> types.GetPromptResult | types.InputRequiredResult:
    """Get the prompt ``name``; ``rounds`` relays its rounds as :func:`_read` does a read's."""
    if rounds is None or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await client.get_prompt(name, arguments)
    return await client.session.get_prompt(
        name,
        arguments,
        input_responses=_responses(rounds),
        request_state=rounds.state,
        allow_input_required=True,
    )


def _responses(rounds: InputRound) -> types.InputResponses | None:
    """The answers to the last round, JSON as the caller sent them, for the SDK, which
    validates them into its models as it makes the request."""
    # (JSON, not the SDK's models: the SDK's annotation is narrower than what it takes)
    responses: types.InputResponses | None = rounds.responses  # pyright: ignore[reportAssignmentType]
    return responses


def _invalid_result(server: str, what: str, client: Client, exc: ValidationError) -> ResultInvalid:
    """The SDK client's refusal of an answer that does not fit the protocol (a pydantic
    ``ValidationError``, which would otherwise read as the caller's invalid request) as
    :class:`~supervisor.errors.ResultInvalid`: the server's fault, each problem's path in
    the result. Of a union's arms (a tool's result, or an ``input_required`` one; the
    kinds of content), only the first arm's problems are said: the one asked for first."""
    problems: list[tuple[str, str]] = []
    chosen: dict[tuple[object, ...], object] = {}  # the arm said, by where its union is
    for problem in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = problem["loc"]
        path: list[str | int] = []
        for i, part in enumerate(loc):
            if isinstance(part, str) and _ARM.match(part):
                if chosen.setdefault(tuple(loc[:i]), part) != part:
                    break  # another arm's
            else:
                path.append(part)
        else:
            problems.append((json_path(path), _short(problem["msg"])))
    errors = problems[:_MAX_PROBLEMS]
    if len(problems) > _MAX_PROBLEMS:
        errors.append(("…", f"{len(problems) - _MAX_PROBLEMS} more"))
    return ResultInvalid(
        server=server, request=what, protocol=client.protocol_version, errors=errors
    )


#: A union arm in a pydantic error's path: a model's name (``CallToolResult``), or a
#: tagged arm (``tagged-union[…]``, ``function-after[…]``)
_ARM = re.compile(r"[A-Z]\w*\Z|[a-z-]+\[")
#: The problems of an invalid result said, at most (the rest counted).
_MAX_PROBLEMS = 5
#: Characters of one problem said, at most.
_MAX_PROBLEM = 200


def _short(text: str) -> str:
    return text if len(text) <= _MAX_PROBLEM else text[: _MAX_PROBLEM - 1] + "…"


def _counted(progress: Progress, receipt: Receipt) -> Progress:
    """``progress``, telling ``receipt`` when it is done with each notification."""

    async def counted(done: float, total: float | None, message: str | None) -> None:
        try:
            await progress(done, total, message)
        finally:
            receipt.progress_handled()

    return counted


#: Pages of a tool listing fetched at most to find one tool's schema again.
RELIST_PAGES = 100


async def _relist(client: Client, tool: str) -> None:
    """List the server's tools again, page by page until one lists ``tool``, so that the
    client's next call of it carries the headers its schema now asks for."""
    cursor: str | None = None
    for _ in range(RELIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        cursor = page.next_cursor
        if cursor is None or any(listed.name == tool for listed in page.tools):
            return


def _session_expired(error: MCPError) -> bool:
    """The server does not know our (legacy Streamable HTTP) session: it restarted.

    The SDK reports the server's 404 as its JSON-RPC error body, or as "Session
    terminated" when the 404 has none; either way the request was not processed.
    """
    return error.code == types.INVALID_REQUEST and error.message in (
        "Session not found",
        "Session terminated",
    )


async def _first(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as any of ``waits`` returns."""
    async with trio.open_nursery() as nursery:

        async def one(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        for wait in waits:
            nursery.start_soon(one, wait)


# -- one incarnation -------------------------------------------------------------------------


class ServerActor(Actor):
    """One incarnation: at most one SDK ``Client`` session with the server."""

    max_concurrency = MAX_IN_FLIGHT

    def __init__(self, server: Any) -> None:
        # ``server`` is its ServerHandle, which makes the actors: not imported here.
        self.server = server
        #: the server's state: this actor writes it (see :class:`ServerState`)
        self.state = server.state
        self.number = self.state.began(self)
        self.client: Client | None = None
        self._wanted = trio.Event()
        self._ready = trio.Event()
        self._lost = trio.Event()  # a request found the connection closed
        self._renew = trio.Event()  # a request found its session forgotten by the server
        self._probe_now = trio.Event()  # the server looks hung: probe it without waiting
        self._auth_blocked = trio.Event()  # waiting for an OAuth login: calls fail fast
        self._direct_scopes: set[trio.CancelScope] = set()
        self._in_flight_direct = 0
        self._no_direct = trio.Event()
        self._closing = False
        self._ended = False
        self.transport: TransportLike | None = None
        self._turn: Turn | None = None  # a start slot queued for at init, not yet used
        #: an idle connection is held to the server's port (see :mod:`._probes`)
        self.watched = False

    async def init(self) -> None:
        server = self.server
        self.state.live(self)
        self.listings = Listings(server, self.nursery, lambda: self.client)
        if server.users is not None:  # a perUser server's callers' sessions run here
            server.users.attach(self.nursery)
        eager = not server.config.lazy or self.number > 1 or server.address.statistics().queued > 0
        if eager:
            self._wanted.set()
            # Queue for a start slot now: the tree starts its children one after the other,
            # so servers started (or restarted) together connect in that order.
            self._turn = self._take_turn()
        self.nursery.start_soon(self._connection)

    def _take_turn(self) -> Turn | None:
        slots = self.server.start_slots
        return None if slots is None else slots.turn()

    async def _connected(self, not_this: Client | None = None) -> Client:
        self._wanted.set()
        while True:
            if self.server.auth_problem is not None:
                raise self.server.auth_exception()
            await self._ready.wait()  # also woken when a login is needed
            client = self.client
            if client is not None and client is not not_this:
                return client
            await trio.lowlevel.checkpoint()  # a session is being renewed: wait for it

    # -- requests ----------------------------------------------------------------------

    async def handle(self, message: object) -> object:
        with before_effect():  # nothing is sent until connected: a failure re-queues it
            client = await self._connected()
        if isinstance(message, CallTool):
            try:
                return await self._call_tool(client, message, self._receipt(), direct=False)
            except _NotSent:
                await self._requeue()
        if isinstance(message, ListTools):
            return list(self.server.tools)
        if isinstance(message, ReadResource):
            uri, rounds = message.uri, message.rounds
            with _made_for(message.capabilities):
                return await self._fetch(
                    client, message, f"resource {uri!r}", lambda c: _read(c, uri, rounds)
                )
        if isinstance(message, GetPrompt):
            name, arguments, rounds = message.name, message.arguments, message.rounds
            with _made_for(message.capabilities):
                return await self._fetch(
                    client,
                    message,
                    f"prompt {name!r}",
                    lambda c: _prompt(
                        c, name, None if arguments is None else dict(arguments), rounds
                    ),
                )
        if isinstance(message, Complete):
            return await self._fetch(
                client,
                message,
                "completion",
                lambda c: c.complete(
                    message.ref,
                    dict(message.argument),
                    None if message.context is None else dict(message.context),
                ),
            )
        if isinstance(message, TaskRequest):
            method, params = message.method, message.params
            return await self._fetch(
                client,
                message,
                f"{method} of task {params.get('taskId')!r}",
                lambda c: tasks.request(c, method, params),
            )
        raise TypeError(f"server actor cannot handle {message!r}")

    async def _fetch(
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
        transport = self.transport
        if self._lost.is_set() or (transport is not None and transport.closed.is_set()):
            await self._requeue()  # the connection is known dead: not sent, not counted
        message.sends += 1
        again = message.sends == 1
        receipt = self._receipt()
        token = delivery.set(receipt)
        try:
            with before_effect(until=None if again else lambda: not receipt.withdraw()):
                try:
                    result = await send(client)
                except MCPError as exc:
                    if not _session_expired(exc):
                        raise
                    # Rejected unseen: renew the session, send it once more.
                    result = await send(await self._new_session(client))
        except ValidationError as exc:  # the SDK's check of the answer: the server's fault
            self.state.health.alive(time.time())  # it answered; the answer was wrong
            raise _invalid_result(server.name, what, client, exc) from exc
        except MCPError as exc:
            if connection_closed(exc, receipt):
                self._lost.set()  # the connection is dead: this incarnation ends
                if receipt.withdraw() or again:
                    await self._requeue()
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
        self.state.health.alive(time.time())
        return result

    async def _send(self, client: Client, message: CallTool) -> types.CallToolResult | Round:
        try:
            return await _call(client, message)
        except MCPError as exc:
            if not _session_expired(exc):
                raise
        # The server rejected it unseen: renew the session, send it once more.
        with before_effect():
            client = await self._new_session(client)
        return await _call(client, message)

    def _receipt(self) -> Receipt:
        receipt = Receipt()
        if getattr(self.transport, "tracks_delivery", False):
            receipt.delivered = False
        return receipt

    async def _call_tool(
        self, client: Client, message: CallTool, receipt: Receipt, *, direct: bool
    ) -> CallAnswer:
        """Send one tool call on ``client``; raises :class:`_NotSent` when it is known not
        to have reached the server (or may be sent again, by the embedder's opt-in)."""
        server = self.server
        health = self.state.health
        start = trio.current_time()
        transport = self.transport
        if self._lost.is_set() or (transport is not None and transport.closed.is_set()):
            raise _NotSent  # the connection is known dead: don't send on it
        # Until the request is out, a dying connection gives it back to the mailbox; with
        # the embedder's opt-in, so does a read-only or idempotent tool's, even after.
        safe = server.retry_idempotent and self._idempotent(message.tool)
        if message.progress is not None:  # each notification counted done, for the answer
            message = attrs.evolve(message, progress=_counted(message.progress, receipt))
        token = delivery.set(receipt)
        try:
            try:
                if direct:  # the caller's task: its end is handled by call_directly
                    result = await _call(client, message)
                else:
                    with before_effect(until=None if safe else lambda: not receipt.withdraw()):
                        result = await self._send(client, message)
            except tasks._TaskCreated as created:  # answered with a task
                if message.rounds is not None and message.rounds.tasks:
                    result = Task(created.task)  # its caller follows it
                    server.task_made(created.task.task_id, self.number)
                else:
                    result = await self._follow(client, message, created.task)
        except MCPError as exc:
            if direct and _session_expired(exc):
                raise _NotSent from None  # the mailbox path renews the session
            # The SDK's "Connection closed", not a server's own -32000: see connection_closed.
            lost = connection_closed(exc, receipt)
            if lost:
                self._lost.set()  # the connection is dead: this incarnation ends
                if receipt.withdraw() or safe:
                    raise _NotSent from None  # it never reached the server, or may run twice
            health.call_failed()
            if lost:
                raise CallMayHaveTakenEffect.during(server.name, message.tool) from exc
            too_large = _too_large(server.name, message.tool, exc)
            if too_large is not None:
                health.alive(time.time())  # it answered; the answer was too big
                raise too_large from exc
            raise refused(server.name, message.tool, exc) from exc
        except ValidationError as exc:  # the SDK's check of the answer: the server's fault
            health.call_failed()
            health.alive(time.time())  # the server answered; the answer was wrong
            raise _invalid_result(server.name, f"tool {message.tool!r}", client, exc) from exc
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

    async def _follow(
        self, client: Client, message: CallTool, task: tasks.CreatedTask
    ) -> types.CallToolResult:
        """Follow the task the server made of ``message`` to its end, on ``client``: its
        result, or :class:`~supervisor.errors.TaskFailed`. Its input requests are
        answered by this connection's callbacks; given up on (the call's deadline, a
        cancellation), the server is asked to cancel it. Nothing is sent again."""
        server, tool, task_id = self.server, message.tool, task.task_id
        log.info("following a task", server=server.name, tool=tool, task=task_id)

        def failed(why: str, code: int | None = None) -> TaskFailed:
            return TaskFailed(
                f"MCP server {server.name!r} made a task of tool {tool!r} ({task_id!r}) "
                f"and {why}: it may have taken effect and was not retried",
                server=server.name,
                tool=tool,
                task_id=task_id,
                code=code,
            )

        state: tasks.CreatedTask | tasks.TaskState = task
        answered: set[str] = set()
        receipt = self._receipt()  # the polls' own: the call's was answered (the task)
        token = delivery.set(receipt)
        try:
            while state.status not in tasks.TERMINAL:
                asked = {
                    key: request
                    for key, request in (getattr(state, "input_requests", None) or {}).items()
                    if key not in answered
                }
                if asked:
                    try:
                        answers = await tasks.answers(client, asked)
                    except tasks._InputRefused as exc:
                        await tasks.cancel(client, task_id)
                        raise failed(
                            f"asked for input that could not be given ({exc}); the task was "
                            "cancelled"
                        ) from None
                    update = {"taskId": task_id, "inputResponses": answers}
                    await tasks.request(client, "tasks/update", update)
                    answered.update(asked)
                else:
                    await trio.sleep(tasks.interval(state))
                state = await tasks.get(client, task_id)
        except MCPError as exc:
            if connection_closed(exc, receipt):
                self._lost.set()  # the connection is dead: this incarnation ends
                raise failed("the connection died while it ran") from exc
            if exc.code == types.INVALID_PARAMS:  # the spec's answer for a task it does not know
                raise failed(f"the server no longer knows the task: {exc.message}") from exc
            raise failed(f"following it failed: {exc.message} (MCP error {exc.code})") from exc
        except trio.Cancelled:
            transport = self.transport
            closed = transport is not None and transport.closed.is_set()
            if not self._lost.is_set() and not closed:
                try:
                    await tasks.cancel(client, task_id)  # given up on: a courtesy, bounded
                except Exception as exc:  # noqa: BLE001 — it is only asked
                    log.info("task cancel refused", server=server.name, error=str(exc))
            raise
        finally:
            delivery.reset(token)
        # (a task made already ended is still its CreatedTask, read with extra="allow":
        # its result or error is an extra field, if the server sent one)
        if state.status == tasks.COMPLETED and state.result is not None:  # pyright: ignore[reportAttributeAccessIssue]
            # (the same: a CreatedTask's extra field)
            result = types.CallToolResult.model_validate(state.result, by_name=False)  # pyright: ignore[reportAttributeAccessIssue]
            if not result.is_error:
                await client.session.validate_tool_result(tool, result)
            return result
        if state.status == tasks.FAILED:
            error = state.error or {}  # pyright: ignore[reportAttributeAccessIssue]  # (as above)
            code = error.get("code") if isinstance(error.get("code"), int) else None
            said = error.get("message", state.status_message)
            raise failed(f"the task failed: {said} (MCP error {code})", code)
        said = f": {state.status_message}" if state.status_message else ""
        raise failed(f"the task ended {state.status}{said}")

    def call_timed_out(self, exc: ToolCallTimeout) -> None:
        """A call to the server timed out: ``degradedAfter`` in a row on a live
        connection make it ``degraded``, and it is probed at once (see :meth:`probe`)."""
        server = self.server
        health = self.state.health
        limit = server.config.degraded_after
        reason = (
            f"{limit} calls in a row timed out (the last: tool {exc.tool!r} after "
            f"{exc.timeout:g} s) although connected; probing it"
        )
        if not health.timed_out(reason, limit, trio.current_time()):
            return
        log.warning("server degraded", server=server.name, reason=reason)
        server.emit(events.HealthStale(server=server.name, last_ok=health.last_ok, reason=reason))
        self.probe()
        server.changed()

    def call_answered(self) -> None:
        """A call to the server was answered: the timeouts in a row end, and so does
        being ``degraded``."""
        server = self.server
        degraded_for = self.state.health.answered(trio.current_time())
        if degraded_for is not None:
            server.emit(events.HealthRecovered(server=server.name, downtime=degraded_for))
            server.changed()

    # -- direct calls ------------------------------------------------------------------

    def direct(self) -> Client | None:
        """The client, if a call may skip the mailbox: connected, not stopping, not
        dying, with room for one more request in flight."""
        client = self.client
        if (
            client is None
            or self._closing
            or self._lost.is_set()
            or self._in_flight_direct >= MAX_IN_FLIGHT
        ):
            return None
        return client

    async def call_directly(self, client: Client, message: CallTool, deadline: float) -> CallAnswer:
        """Run a call in the caller's own task, on the connected client — the mailbox is
        for waiting (connecting, restarting); a connected server needs no queue.

        Raises :class:`_NotSent` when the call must go through the mailbox after all (the
        connection died before the request went out, or its session expired); the
        incarnation's end wakes it like it aborts the mailbox's requests. Raises
        :class:`trio.TooSlowError` at ``deadline``.
        """
        receipt = self._receipt()
        scope = trio.CancelScope(deadline=deadline)
        self._direct_scopes.add(scope)
        self._in_flight_direct += 1
        try:
            with scope:
                return await self._call_tool(client, message, receipt, direct=True)
            if not self._ended:
                raise trio.TooSlowError
            # Cancelled by the end of this incarnation.
            safe = self.server.retry_idempotent and self._idempotent(message.tool)
            if receipt.withdraw() or safe:
                raise _NotSent
            raise CallMayHaveTakenEffect.during(self.server.name, message.tool)
        finally:
            self._direct_scopes.discard(scope)
            self._in_flight_direct -= 1
            if self._in_flight_direct == 0:
                self._no_direct.set()

    async def drain(self) -> None:
        """Graceful stop: no new direct calls; wait for those in flight to finish."""
        self._closing = True
        if self._in_flight_direct:
            self._no_direct = trio.Event()
            await self._no_direct.wait()

    def _end_direct_calls(self) -> None:
        self._closing = self._ended = True
        for scope in list(self._direct_scopes):
            scope.cancel()

    def _idempotent(self, tool: str) -> bool:
        """Whether the server annotates ``tool`` read-only or idempotent."""
        listed = self.server.tool(tool)
        if listed is None or listed.annotations is None:
            return False
        hints = listed.annotations
        return bool(hints.read_only_hint or hints.idempotent_hint)

    async def _requeue(self) -> None:
        """Give the current request back: this incarnation's connection is dead, and the
        request never reached the server, so the next incarnation sends it."""
        self._lost.set()  # makes sure the connection task notices and the incarnation ends
        with before_effect():
            # The incarnation ends (and the next one sends it), or the connection died
            # for want of an OAuth login: then it fails like any call made meanwhile.
            await self._auth_blocked.wait()
        raise self.server.auth_exception()

    # -- the connection ----------------------------------------------------------------

    async def _session_or_login(self) -> str | None:
        """One session; or, when it needs an OAuth login, the wait for one (no crash, no
        restart spent), then ``"logged in"`` to start the next."""
        try:
            return await self._session()
        except BaseException:
            failure = getattr(self.transport, "failure", None)
            if self.stopping or not isinstance(failure, AuthError):
                raise
        await self._await_login()
        return "logged in"

    async def _await_login(self) -> None:
        """Wait in ``needs_auth`` (or ``auth_failed``) until the broker has a new token:
        a login started here when the embedder gave a redirect handler, otherwise one
        made elsewhere (``handle.login``, ``mcp-supervisor auth login``)."""
        server = self.server
        broker = server.broker
        assert broker is not None
        rejected = broker._token
        problem = server.auth_problem
        if problem is not None and problem.needs_login and broker.redirect is not None:
            try:
                await broker.login()
            except AuthProblem as exc:
                self._auth_failed(exc)
                await broker.wait_changed(rejected)
        else:
            await broker.wait_changed(rejected)
        self.state.logged_in()
        self._auth_blocked = trio.Event()
        self._lost = trio.Event()  # that connection is gone; the next one is fresh
        self._renew = trio.Event()
        server.changed()

    def _auth_failed(self, problem: AuthProblem) -> None:
        self.state.auth_failed(problem)
        self.server.changed()

    def _on_auth_blocked(self, error: AuthError, connected: bool) -> None:
        """The connection needs a login, or the authorization server refused: a state of
        its own, not a crash (nothing is counted, no restart is spent)."""
        server = self.server
        self.client = None
        problem = error.problem
        assert problem is not None  # made by auth_exception, which names it
        needs = problem.needs_login
        self.state.auth_blocked(problem, str(error))
        self._auth_blocked.set()
        self._ready.set()  # wakes whoever waits to connect: they fail fast now
        self._ready = trio.Event()  # set again by the next connection
        if connected:
            server.emit(events.Disconnected(server=server.name, reason=str(error), was_clean=False))
        if needs and server.broker is not None and server.broker.redirect is not None:
            log.info("needs an OAuth login: starting one", server=server.name)
        else:
            log.warning(
                "needs an OAuth login" if needs else "OAuth authorization failed",
                server=server.name,
                reason=str(error),
            )
        server.changed()

    async def _connection(self) -> None:
        # One session after another: a server that forgot our session (it restarted
        # behind the same URL) gets a new one within this incarnation, and a `remote`
        # server that refuses Streamable HTTP is tried again over legacy SSE.
        try:
            await self._wanted.wait()
            while (why := await self._session_or_login()) is not None:
                if why == "logged in":
                    continue
                if why == "session expired":
                    self.server.emit(
                        events.Disconnected(server=self.server.name, reason=why, was_clean=False)
                    )
                else:
                    log.info(why, server=self.server.name)
        except ServerExited as exc:
            if exc.exit_code != 0:
                raise
            # The server ended on its own, cleanly: a normal exit, which a transient
            # server is not restarted after (a permanent one is).
            self.exit(Normal())
        finally:
            if self._turn is not None:
                self._turn.close()  # ended before it connected: the next server's turn
            self.client = None
            self._end_direct_calls()
            if self.server.users is not None:
                self.server.users.detach(self.nursery)
            self.state.ended(self)

    async def _session(self) -> str | None:
        """Connect and serve one session; why it must be started over, else it raises.

        Connecting (spawn, handshake, tool listing) holds one of the server's start
        slots, if it has them: it waits its turn first, and ``initTimeout`` runs from then.
        """
        turn = self._turn if self._turn is not None else self._take_turn()
        self._turn = None
        try:
            return await self._connect_and_serve(turn)
        finally:
            if turn is not None:
                turn.close()

    async def _connect_and_serve(self, turn: Turn | None) -> str | None:
        server = self.server
        config = server.config
        self.state.connecting()
        if turn is not None and not turn.holding:
            try:
                await turn.wait()
            except trio.Cancelled:
                self._on_stopped(None, connected=False)
                raise
        # Tries in a row, counted from 1 as mcp.error and the status count them: the one
        # after n failures in a row is n + 1, and the last is the first plus the retries.
        retries = config.max_attempts if server.retries else 0
        server.emit(
            events.Connecting(
                server=server.name, attempt=self.state.attempt + 1, max_attempts=retries + 1
            )
        )
        transport = self.transport = server.transport()
        began = trio.current_time()
        connected = False
        try:
            # The handshake's deadline is lifted once it is done; the client context
            # (and the nurseries inside it) stays within this one scope throughout.
            with trio.CancelScope(deadline=began + config.init_timeout) as handshake:
                try:
                    async with self._client(transport) as client:
                        async with trio.open_nursery() as watchers:
                            # Listen for changes before listing: none can slip in between.
                            # The stream is optional: not acknowledged within a short
                            # wait of its own, the server is connected without it.
                            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                                await watchers.start(
                                    self.listings.listen_for_changes,
                                    client,
                                    listen_ack_wait(config.init_timeout),
                                )
                            tools = await self.listings.all_tools(client)
                            handshake.deadline = math.inf
                            connected = True
                            if turn is not None:
                                turn.close()  # listed: the next server may start
                            # The first connection lists resources and prompts before it
                            # counts as connected; a later one (a restart) is up as soon as
                            # it can take calls, and lists them right after (see below),
                            # the lists of the connection before served meanwhile.
                            relist = self.state.listed
                            if not relist:
                                await self.listings.extras(client, ("resources", "prompts"))
                            if server.log_level is not None:  # before any call is sent
                                await self._ask_log_level(client, server.log_level)
                            await watchers.start(  # before any call is sent, too
                                keep_subscriptions,
                                client,
                                server.subscribed,
                                server.name,
                                config.timeout,
                            )
                            self._on_connected(client, tools, trio.current_time() - began)
                            if relist:
                                watchers.start_soon(self.listings.extras_after_connect, client)
                            watchers.start_soon(keep_probing, self, client, transport)
                            address = getattr(transport, "watch_at", None)
                            if address is not None:
                                watchers.start_soon(watch_connection, self, transport, address)
                            await _first(transport.closed.wait, self._lost.wait, self._renew.wait)
                            watchers.cancel_scope.cancel()
                        if not (transport.closed.is_set() or self._lost.is_set()):
                            self._renew = trio.Event()
                            self._ready = trio.Event()
                            self.client = None
                            return "session expired"  # leaving the client ends the session
                        raise transport.failure or TransportError(
                            f"the connection to MCP server {server.name!r} closed"
                        )
                except Exception as exc:  # the SDK wraps its errors in exception groups
                    error = collapse(exc)
                    if not isinstance(error, MCPError):
                        raise
                    if self._falls_back(transport, connected):
                        return "Streamable HTTP refused (HTTP 4xx): falling back to legacy SSE"
                    if not connected and (refused := self._refused(transport)) is not None:
                        raise refused from error
                    raise transport.failure or ServerRequestError(
                        f"MCP server {server.name!r} failed the handshake: {error.message}",
                        server=server.name,
                        code=error.code,
                    ) from error
            if handshake.cancelled_caught:
                # (what it wrote meanwhile, and whether it was fetching its package)
                said = transport.stalled() if isinstance(transport, StdioTransport) else ""
                raise transport.failure or ConnectTimeout(
                    f"MCP server {server.name!r} did not complete the MCP handshake within "
                    f"{config.init_timeout} s (initTimeout){said}",
                    server=server.name,
                )
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException as exc:
            if self.stopping or isinstance(collapse(exc), trio.Cancelled):
                self._on_stopped(transport, connected)
            elif isinstance(transport.failure, AuthError):
                self._on_auth_blocked(transport.failure, connected)
            else:
                self._on_failed(transport, connected, exc)
            raise

    def _falls_back(self, transport: TransportLike, connected: bool) -> bool:
        """A ``type: remote`` server answered the first POST with a 4xx: per the MCP
        spec's backwards compatibility, try it as a legacy SSE server (and keep to it)."""
        status = getattr(transport, "first_status", None)
        config = self.server.config
        if connected or self.state.use_sse or not getattr(config, "remote_fallback", False):
            return False
        if status is None or not 400 <= status < 500:
            return False
        self.state.fell_back_to_sse()
        return True

    def _refused(self, transport: TransportLike) -> HTTPStatusError | None:
        """The handshake's first answer was an HTTP error status: that error, retryable
        unless retrying will not change it (401, 403, 404, …), then naming what to check."""
        status = getattr(transport, "first_status", None)
        if status is None or status < 400:
            return None
        url = safe_url(str(self.server.config.url))
        phrase = status_phrase(status)
        message = f"MCP endpoint {url} answered the handshake with HTTP {status}{phrase}"
        if status in (404, 405, 410):
            message += "; check the URL: no MCP endpoint is there"
        elif status in (401, 403):
            broker = self.server.broker
            oauth = broker is not None and broker.speaks_oauth is not False
            message += "; the server wants credentials it did not get or accept: " + (
                "it refused even a fresh OAuth token (check the account's rights)"
                if oauth
                else "check the server's headers (it offers no OAuth login)"
            )
        return HTTPStatusError(message, url=url, status_code=status)

    async def _new_session(self, expired: Client) -> Client:
        """The server forgot ``expired``'s session: get (or wait for) a new one."""
        if self.client is expired:
            self._renew.set()
        return await self._connected(not_this=expired)

    @asynccontextmanager
    async def _client(self, transport: TransportLike) -> AsyncIterator[Client]:
        server = self.server
        options = pinned(
            resolved(server.client_options, server.name),
            getattr(server.config, "protocol", "auto"),
        )
        user_handler = cast("MessageHandlerFnT | None", options.pop("message_handler", None))
        logging_callback: Any = options.get("logging_callback")
        answers = getattr(transport, "answers", None)
        if logging_callback is not None and answers is not None:

            async def counted(params: types.LoggingMessageNotificationParams) -> None:
                try:
                    await logging_callback(params)
                finally:
                    answers.log_handled()  # a call answered after it may return now

            options["logging_callback"] = counted
        elicit: Any = options.get("elicitation_callback")
        if elicit is not None:  # defaults filled in, answers checked (see _elicitation)
            options["elicitation_callback"] = checked_elicitation(elicit, self.server.name)

        async def message_handler(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                self.nursery.start_soon(self.listings.relist)
            elif isinstance(message, types.ResourceListChangedNotification):
                self.nursery.start_soon(self.listings.refetch, "resources")
            elif isinstance(message, types.PromptListChangedNotification):
                self.nursery.start_soon(self.listings.refetch, "prompts")
            elif isinstance(message, types.ResourceUpdatedNotification):
                self._resource_updated(str(message.params.uri))
            if user_handler is not None:
                await user_handler(message)

        given = cast("Sequence[ClientExtension] | None", options.pop("extensions", None))
        extensions = [tasks.CLIENT, *(given or ())]
        async with Client(
            transport,
            message_handler=message_handler,
            extensions=extensions,
            # the embedder's other Client keyword arguments, as it gave them
            **options,  # pyright: ignore[reportArgumentType]
        ) as client:
            tasks.parse_cheaply(client)
            if answers is not None:  # a 2026-07-28 result without resultType: complete
                answers.complete_by_default = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            yield client

    def _resource_updated(self, uri: str) -> None:
        """The server announced a change of ``uri``: published if it was subscribed to
        (a server may announce what nobody asked for; that is not passed on)."""
        if uri in self.server.subscribed.uris:
            self.server.emit(events.ResourceUpdated(server=self.server.name, uri=uri))

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Ask the connected server to send its log messages from ``level`` up
        (``logging/setLevel``), if it declared logging and speaks the session-based
        protocol; a 2026-07-28 server is asked per call instead (in its ``_meta``).
        A refusal, or no answer within the request timeout, is logged."""
        if self.client is not None:
            await self._ask_log_level(self.client, level)

    async def _ask_log_level(self, client: Client, level: types.LoggingLevel) -> None:
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        if client.server_capabilities.logging is None:
            return
        server = self.server
        with trio.move_on_after(server.config.timeout) as scope:
            try:  # the session's own: the client's wrapper of it warns again while awaited
                await on_purpose(client.session.set_logging_level, level)
                return
            except MCPError as exc:
                log.warning("log level refused", server=server.name, level=level, error=exc.message)
                return
        if scope.cancelled_caught:
            log.warning("log level not answered", server=server.name, level=level)

    def probe(self) -> None:
        """Probe the connection now (calls in a row timed out, or its watch is in doubt):
        see :mod:`._probes`."""
        self._probe_now.set()

    def lost(self) -> None:
        """The connection is found dead: no call is sent on it from now on."""
        self._lost.set()

    async def probe_asked(self) -> None:
        """Return when :meth:`probe` is next called."""
        await self._probe_now.wait()
        self._probe_now = trio.Event()

    def heard(self) -> float | None:
        """When (trio's clock) the live connection last heard from the server."""
        transport = self.transport
        return None if transport is None or self.client is None else transport.answers.heard

    def spawned(self, pid: int) -> None:
        """This incarnation's connection started the local server as process ``pid``."""
        self.state.spawned(pid)
        self.server.emit(events.LocalSpawned(server=self.server.name, pid=pid))

    def _on_connected(self, client: Client, tools: list[types.Tool], took: float) -> None:
        server = self.server
        self.client = client
        self.state.capabilities_declared(client.server_capabilities)
        self.state.tools_listed(tools)
        info = client.server_info
        downtime = self.state.health.connected(
            len(tools),
            took,
            time.time(),
            trio.current_time(),
            server_name=None if info is None else info.name,
            server_version=None if info is None else info.version,
            protocol_version=client.protocol_version,
        )
        self._ready.set()
        server.emit(events.Connected(server=server.name, tool_count=len(tools), connect_time=took))
        if downtime is not None:
            server.emit(events.HealthRecovered(server=server.name, downtime=downtime))
        log.info("connected", server=server.name, tools=len(tools), connect_time=round(took, 3))
        server.changed()

    def _on_failed(self, transport: TransportLike, connected: bool, exc: BaseException) -> None:
        server = self.server
        error = transport.failure or collapse(exc)
        text = redact(describe(error))
        retryable = getattr(error, "retryable", True) is not False
        local = transport if isinstance(transport, StdioTransport) else None
        if local is not None and local.pid is None:
            local = None  # it never started: no process to speak of
        tail = [] if local is None else list(local.stderr_tail)[-CRASH_TAIL_LINES:]
        self.state.health.failed(
            text, time.time(), trio.current_time(), retryable=retryable, stderr_tail=tail
        )
        self.client = None
        if local is not None and isinstance(error, BoundExceeded) and error.resource == "memory":
            server.emit(
                events.LocalMemoryExceeded(server=server.name, rss=error.used, limit=error.limit)
            )
        if local is not None:
            server.emit(
                events.LocalCrashed(
                    server=server.name,
                    exit_code=local.returncode,
                    stderr_tail=tail,
                )
            )
        if connected:
            server.emit(events.Disconnected(server=server.name, reason=text, was_clean=False))
        # What happens next (a restart after a delay, or giving up) is the supervision
        # tree's decision: the server reports it when the tree makes it (decided()).
        server.changed()

    def _on_stopped(self, transport: TransportLike | None, connected: bool) -> None:
        server = self.server
        self.client = None
        self.state.health.stopped(connected, trio.current_time())
        if connected:
            server.emit(events.Disconnected(server=server.name, reason="stopped", was_clean=True))
        if isinstance(transport, StdioTransport) and transport.pid is not None:
            server.emit(events.LocalShutdown(server=server.name))
        server.changed()


def _too_large(server: str, tool: str, exc: MCPError) -> ResultTooLarge | None:
    """The call's answer was dropped as too large by the transport (its error, with the
    sizes as ints) — ``None`` for anything else, a server's own error of that code too."""
    data = exc.data if isinstance(exc.data, dict) else {}
    size, limit = data.get("size"), data.get("limit")
    if exc.code != RESULT_TOO_LARGE or type(size) is not int or type(limit) is not int:
        return None
    over, remedy = "maxMessageBytes", ", or raise supervisor.limits.maxMessageBytes in the config"
    if data.get("bound") == "sse":  # the SDK's bound on one legacy SSE event, the smaller
        over, remedy = "a legacy SSE event may hold", ""
    return ResultTooLarge(
        f"MCP server {server!r} answered tool {tool!r} with {size} bytes, more than "
        f"{over} ({limit}): the answer was dropped and the connection kept. "
        f"Ask for less (a smaller range or page){remedy}",
        server=server,
        tool=tool,
        size=size,
        limit=limit,
    )
