"""A client's call of a served tool made through the gateway, and its outcome answered.

:class:`CallAnswers` makes the call through the gateway as the request's caller sees it
(:class:`~._access.Access`) and answers what came of it (:meth:`CallAnswers.made`): the
backing server's result (the preview limits in its ``_meta`` if the caller asked,
:data:`~._context.LIMITS_META`); a round for a 2026-07-28 caller to answer — an
approval (:func:`~._approval.input_required`), its own login to a ``perUser`` server
first (:func:`~._approval.login_required`), the backing server's own round
(:func:`~._asking.relayed_round`); a tool not served, the request's error (invalid
params). :class:`~._tool_requests.ToolRequests` makes every call it answers through
it.

A plain 2026-07-28 call — a ``name``, ``arguments`` and a ``_meta`` of the envelope and
the gateway's options, as :class:`~._plain_calls.PlainCalls` checks it — is made here
from its JSON (:meth:`CallAnswers.plain`), without reading its params into the SDK's
model first: the same call as :meth:`ToolRequests.call_tool
<._tool_requests.ToolRequests.call_tool>` makes of it (no progress, no log level, no
round answered, no state of the gateway's own), its client waiting on the relay for
the server's questions as there. A call that needs more — a meta-tool of tool search,
a call held for a session-based server's questions — is left to ``call_tool``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._util._previews import PREVIEW_LIMITS
from ..errors import ApprovalAsked, AuthRequired, UnknownTool
from ..server._messages import InputRound
from ..server._tasks import declared
from ..tools import ApprovalRequest
from ..tools._request import ToolCall
from ..transports._encoding import caller_capabilities
from ._answers import CLI_YES, with_limits
from ._approval import input_required, login_required, round_trip_approver
from ._asking import relayed_round
from ._context import (
    APPROVE_META,
    LIMITS_META,
    TIMEOUT_META,
    declared_capabilities,
    is_local,
    subject_of,
    timeout,
)

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._access import Access
    from ._asking import Asking
    from ._search import SearchHost, ToolSearch
    from ._served import Served

__all__ = ["CallAnswers"]

#: A plain call's rounds, relayed to its caller — and the task its server makes of it, if
#: the caller declared the tasks extension (frozen: one of each will do)
_ROUNDS, _FOLLOWS = InputRound(None, None, tasks=False), InputRound(None, None, tasks=True)


class CallAnswers:
    """Makes a client's call of a tool ``served`` serves, as ``access`` lets its caller
    see the gateway, and answers its outcome; backing servers' questions reach the
    client through ``asking``; a meta-tool of ``search`` is not one of these calls."""

    __slots__ = ("access", "asking", "search", "served")

    def __init__(
        self, served: Served, access: Access, asking: Asking, search: ToolSearch | None
    ) -> None:
        self.served = served
        self.access = access
        self.asking = asking
        self.search = search

    def plain(
        self, ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any]
    ) -> Coroutine[Any, Any, types.CallToolResult | types.InputRequiredResult] | None:
        """The answer to the plain 2026-07-28 ``tools/call`` of ``ctx`` with ``params``
        (its JSON, as :class:`~._plain_calls.PlainCalls` found it: a ``name``, maybe
        ``arguments``, a ``_meta`` of the envelope and the gateway's options, nothing
        else), to await: the call :meth:`ToolRequests.call_tool
        <._tool_requests.ToolRequests.call_tool>` makes of it, made without reading the
        params into the SDK's model first. ``None`` when the call needs what only
        ``call_tool`` does: a meta-tool of tool search, a call held for its server's
        questions."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        name = params["name"]
        search = self.search
        if search is not None and name in search:
            return None
        served_by = self.served.listed_server(name)
        if served_by is not None and self.asking.asks_by_request(served_by):
            return None
        return self._plain(
            ctx, name, params.get("arguments") or {}, params.get("_meta") or {}, served_by
        )

    async def _plain(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any],
        meta: Mapping[str, Any],
        served_by: str | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """:meth:`plain`'s call, as ``call_tool`` makes it (no progress, no log level, no
        round answered, no state of the gateway's own): the caller's capabilities
        declared, its client waiting on the relay for the server's questions."""
        passing = caller_capabilities.set(declared_capabilities(ctx))
        relay = self.asking.relay
        if relay is None:
            waiting: AbstractContextManager[None] = nullcontext()
        else:  # (as call_tool: the server that offers the tool now, if any — served_by,
            # read from the same catalog: nothing has waited since)
            waiting = relay.waiting(ctx, served_by, subject_of(ctx))
        try:
            with waiting:
                local = is_local(ctx)
                approve = CLI_YES if meta.get(APPROVE_META) is True and local else None
                if approve is None and self.served.sup.approver is None:
                    approve = round_trip_approver(ctx, None, {})
                rounds = _FOLLOWS if declared(ctx.session.client_capabilities) else _ROUNDS
                # (the call ToolRequests._answer_call builds of it: a door builds its call
                # whole, tests/test_call_value.py; tests/test_gateway_fast.py holds the two
                # to the same call)
                call = ToolCall(
                    name,
                    arguments,
                    timeout(meta.get(TIMEOUT_META)),
                    None,
                    approve,
                    False,  # nothing is written to disk: the result is passed on whole
                    None,
                    rounds,
                    for_cli=local,
                    forward=True,
                )
                host = self.access.seen_by(ctx)
                return await self.made(ctx, host, call, served_by, meta, modern=True)
        finally:
            caller_capabilities.reset(passing)

    async def made(
        self,
        ctx: ServerRequestContext[Any, Any],
        host: SearchHost,
        call: ToolCall,
        served_by: str | None,
        meta: Mapping[str, Any],
        *,
        modern: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The answer to a client's ``call`` (not of a meta-tool) made through ``host``:
        its result, or the round it is for the client to answer; a tool ``host`` does
        not serve is the request's error (invalid params)."""
        try:
            result = await host.call(call)
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except ApprovalAsked as exc:  # nothing was sent: the client answers, then again
            return input_required(cast(ApprovalRequest, exc.request))
        except AuthRequired as exc:  # the caller's own login to a perUser server, first
            return login_required(exc, modern=modern)
        if isinstance(result, types.InputRequiredResult):
            server = served_by or self.served.sup.resolve(call.name)[0]
            return relayed_round(ctx, result, server)
        if meta.get(LIMITS_META) is True:
            result = with_limits(result, self._limits())
        return result

    def _limits(self) -> Mapping[str, int]:
        """The preview limits of the supervisor's config, under their config names."""
        limits = self.served.sup.config.settings.limits
        return {key: getattr(limits, field) for key, field in PREVIEW_LIMITS.items()}
