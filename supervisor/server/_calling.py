"""How a tool call reaches one server once the gate let it through.

A call waits for its turn under the server's ``maxConcurrentCalls``
(:class:`~._admission.Admission`), then goes onto the live connection directly when
there is one with room (the fast path, in the caller's own task), else through the
server's mailbox, which waits while it connects or restarts; a ``perUser`` server's call
for a caller goes on that caller's own session (:class:`~._users.UserSessions`). Each
call is traced (:mod:`supervisor.tools._tracing`), its mailbox's errors said in the
server's terms (:class:`~._failing.Failing`), and its timeouts counted towards the
server's ``degradedAfter``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import trio

from ..errors import ToolCallTimeout
from ..tools import _tracing as tracing
from ..tools._audit import audit_outcome
from ..tools._request import ToolCall
from ..transports._encoding import caller_capabilities
from ._actor import CallAnswer
from ._messages import CallTool, _NotSent

if TYPE_CHECKING:
    import mcp_types as types
    from opentelemetry.trace import Span

    from ..actors import Address
    from ..config._model import ServerConfig
    from ._admission import Admission
    from ._failing import Failing
    from ._state import ServerState
    from ._users import UserSessions


class Handle(Protocol):
    """What sending a tool call reads of the server's handle (not imported here: the
    handle imports this)."""

    name: str
    config: ServerConfig
    error: str | None
    users: UserSessions | None
    log_level: types.LoggingLevel | None
    state: ServerState
    admission: Admission
    failing: Failing

    @property
    def address(self) -> Address: ...


class ToolCalls:
    """Sends one server's tool calls on the way that reaches it now."""

    __slots__ = ("_server",)

    def __init__(self, server: Handle) -> None:
        self._server = server

    async def call(
        self, call: ToolCall, tool: str, arguments: Mapping[str, object], call_id: str | None
    ) -> CallAnswer:
        """See :meth:`~supervisor.server._managed.ServerHandle.call`."""
        server = self._server
        state = server.state
        try:
            if server.error is not None:
                server.failing.check_available()
            caller = call.caller
            per_user = server.users is not None and caller is not None
            if state.auth_problem is not None and not per_user:  # (the caller's own login)
                raise server.failing.auth_exception()
            limit = server.config.timeout if call.timeout is None else call.timeout
            with tracing.backing_span(server.name, tool) as span:
                try:
                    message = CallTool(
                        call,
                        tool,
                        arguments,
                        call_id,
                        tracing.current(),
                        call.log_level or server.log_level,
                        caller_capabilities.get(),
                        call.progress,
                    )
                    admission = server.admission
                    slots = admission.slots
                    if slots is not None:  # maxConcurrentCalls: its turn first, in its time
                        limit = await admission.turn(slots, tool, limit)
                    try:
                        if per_user:
                            assert server.users is not None and caller is not None
                            span.set_attribute(tracing.PATH, "user")
                            result = await server.users.call(caller, message, limit)
                        else:
                            result = await self._send(message, limit, span)
                    finally:
                        if slots is not None:
                            slots.release()
                except BaseException as exc:
                    if span.is_recording():
                        attempt = state.health.restarts + 1
                        tracing.ended(span, audit_outcome(exc, sent=True), exc, attempt)
                    raise
                if span.is_recording():
                    outcome = "tool_error" if getattr(result, "is_error", False) else "ok"
                    tracing.ended(span, outcome, attempt=state.health.restarts + 1)
        except ToolCallTimeout as exc:
            if (actor := state.current) is not None:  # its connection's count of them
                actor.call_timed_out(exc)
            raise
        if (actor := state.current) is not None:
            actor.call_answered()
        return result

    async def _send(self, message: CallTool, limit: float, span: Span) -> CallAnswer:
        """Send ``message`` on the live connection if it has room, else (or if it died
        before the request went out) through the mailbox, within ``limit`` seconds."""
        server = self._server
        tool = message.tool
        left = limit
        actor = server.state.current
        client = actor.direct() if actor is not None else None
        if actor is not None and client is not None:  # the fast path: onto the live connection
            deadline = trio.current_time() + limit
            span.set_attribute(tracing.PATH, "direct")
            try:
                return await actor.call_directly(client, message, deadline)
            except _NotSent:
                left = max(deadline - trio.current_time(), 0.0)  # the mailbox gets it there
            except BaseException as exc:
                said = server.failing.said(exc, tool, limit)
                if said is exc:
                    raise
                raise said from said.__cause__
        span.set_attribute(tracing.PATH, "mailbox")
        try:
            return cast(CallAnswer, await server.address.call(message, left))  # the actor's answer
        except BaseException as exc:
            said = server.failing.said(exc, tool, limit)
            if said is exc:
                raise
            raise said from said.__cause__
