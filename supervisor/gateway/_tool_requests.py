"""The gateway's answers to ``tools/list`` and ``tools/call`` requests.

A listing is the served catalog (:class:`~._served.Served`) as the request's caller may
see it (:class:`~._access.Access`) — or, with tool search, the four meta-tools
(:mod:`._search`). A call is made through the gateway's call (:meth:`Gateway.call
<supervisor.gateway._core.Gateway.call>`, narrowed for a team gateway's caller), with
what the request carries: its progress token, its deadline
(:data:`~._context.TIMEOUT_META`), the command line's ``--yes`` over the local socket
(:data:`~._context.APPROVE_META`), its log level, and for a 2026-07-28 caller the
answers to a round it was asked. An approval the gateway asks for goes to the caller
through elicitation (:mod:`._approval`); the backing server's own questions, through
:class:`~._asking.Asking`. The call is made, and its outcome answered, by its part
:class:`~._call_answers.CallAnswers` — which also makes a plain 2026-07-28 call from its
JSON, for :class:`~._plain_calls.PlainCalls`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import ApprovalAsked, SupervisorError
from ..server._messages import InputRound
from ..server._tasks import declared
from ..tools import ApprovalRequest
from ..tools._request import ToolCall
from ..transports._encoding import caller_capabilities
from ._answers import CLI_YES, error_result, progress_relay
from ._approval import (
    client_approver,
    input_required,
    round_state,
    round_trip_approver,
)
from ._asking import held_gone, relayed_round, theirs
from ._call_answers import CallAnswers
from ._context import (
    APPROVE_META,
    TIMEOUT_META,
    declared_capabilities,
    is_local,
    log_level,
    subject_of,
    timeout,
)
from ._search import listed

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._access import Access
    from ._asking import Asking
    from ._search import SearchHost, ToolSearch
    from ._served import Served

__all__ = ["ToolRequests"]


class ToolRequests:
    """Answers the ``tools/list`` and ``tools/call`` requests of ``host``'s clients
    (``host``: the gateway, whose call a request makes), serving what ``served`` serves
    to whom ``access`` lets use it — through the meta-tools of ``search``, if set."""

    __slots__ = ("access", "answers", "asking", "host", "search", "served")

    def __init__(
        self,
        host: SearchHost,
        served: Served,
        access: Access,
        asking: Asking,
        search: ToolSearch | None,
    ) -> None:
        self.host = host
        self.served = served
        self.access = access
        self.asking = asking
        self.search = search
        #: a call made, and its outcome answered (a plain one's past the params' model)
        self.answers = CallAnswers(served, access, asking, search)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if self.search is not None:
            return types.ListToolsResult(tools=list(self.search.tools))
        served = self.served
        await served.first_listing()
        host = self.access.seen_by(ctx)
        entries = served.tools() if host is self.host else list(host.catalog().values())
        hint = served.cache_hint("tools", {entry.server for entry in entries})
        return types.ListToolsResult(tools=[listed(entry) for entry in entries], **hint)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # The call declares to a 2026-07-28 server what it can of the caller's capabilities
        passing = caller_capabilities.set(declared_capabilities(ctx))
        try:
            relay = self.asking.relay
            if relay is None:
                return await self._answer_call(ctx, params)
            entry = self.served.sup.snapshot.named.get(params.name)
            server = None if entry is None else entry.server
            with relay.waiting(ctx, server, subject_of(ctx)):
                return await self._answer_call(ctx, params)
        finally:
            caller_capabilities.reset(passing)

    async def _answer_call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, arguments, progress = params.name, params.arguments or {}, progress_relay(ctx, params)
        meta: Mapping[str, Any] = params.meta or {}
        sup = self.served.sup
        # --yes of the command line, honoured only over the local socket: its file mode
        # lets only this user in, who could run the call with --no-gateway --yes anyway.
        local = is_local(ctx)
        approve = CLI_YES if meta.get(APPROVE_META) is True and local else None
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        state = round_state(params) if modern else {}
        if "held" in state:  # the caller's answers to its held call's questions
            return await self.asking.answered(ctx, state["held"], params.input_responses, held_gone)
        if approve is None and sup.approver is None:  # asked through elicitation
            approve = (
                round_trip_approver(ctx, params.input_responses, state)
                if modern
                else client_approver(ctx)
            )
        # A 2026-07-28 client answers a server's input requests itself, round by round.
        rounds = None
        if modern:  # and one that declared tasks follows a task the server makes itself
            # the caller's answers to the server's round (with its state, or none: the
            # server gave none, or they come ahead), passed on; the gateway's own, not
            responses = theirs(params.input_responses)
            takes_tasks = declared(ctx.session.client_capabilities)
            rounds = InputRound(responses, state.get("backing"), takes_tasks)
        host = self.access.seen_by(ctx)
        search = self.search
        # Named before the call: a reconfiguration may rename the tool or remove its
        # server meanwhile, and a round it asks for still comes from that server.
        called = arguments.get("name") if search is not None and name in search else name
        served_by = self.served.listed_server(called) if isinstance(called, str) else None
        if search is not None and name in search:
            if host is not self.host:
                search = search.seen_by(host)
            meta_call = ToolCall(
                name, arguments, progress=progress, approve=approve, spill=False, rounds=rounds
            )
            try:
                answer = await search.call(meta_call)
            except ApprovalAsked as exc:
                return input_required(cast(ApprovalRequest, exc.request))
            except SupervisorError as exc:  # nothing was run: a meta-tool's own refusal
                return error_result(exc, str(exc), sent=False)
            if isinstance(answer, types.InputRequiredResult):  # the tool ``call`` called
                owner = served_by or sup.resolve(arguments["name"])[0]
                return relayed_round(ctx, answer, owner)
            return answer
        call = ToolCall(
            name,
            arguments,
            timeout(meta.get(TIMEOUT_META)),
            progress,
            approve,
            False,  # nothing is written to disk: the result is passed on whole
            log_level(meta.get(types.LOG_LEVEL_META_KEY)),
            rounds,
            for_cli=local,
            forward=True,  # passed on as the backing server's JSON, where it can be
        )

        async def made() -> types.CallToolResult | types.InputRequiredResult:
            return await self.answers.made(ctx, host, call, served_by, meta, modern=modern)

        if modern and served_by is not None and self.asking.asks_by_request(served_by):
            return await self.asking.held_call(ctx, served_by, made, held_gone)
        return await made()
