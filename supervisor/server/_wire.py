"""Each request a server's connection serves, as it goes onto the SDK client.

A tool call carries, in its ``_meta``, its recorded id and the log level asked of a
2026-07-28 server; a relayed multi-round-trip call, read or prompt carries its last
round's answers and state, and its ``input_required`` answer comes back as it is; a
request made for a gateway's caller declares, to a 2026-07-28 server, what it can of that
caller's capabilities; a server on the session-based protocol is asked for the log level
it sends from (``logging/setLevel``). A call refused unseen because its ``Mcp-Param-*``
headers follow a schema the server no longer lists is sent once more after listing the
tools again. What the answers mean, and what is done when the connection fails under
them, is the sender's (:mod:`._requests`).

A call the gateway forwards (:attr:`~supervisor.tools._request.ToolCall.forward`) goes
past the SDK's models — a local server's on its pipes (:mod:`supervisor.transports._forward`),
a remote one's on its transport with the headers the session's stamp gives it
(:mod:`supervisor.transports._forward_remote`) — when it asks nothing the session must
follow: no progress, no round answered, no trace to continue, and from a 2026-07-28 server only for
a caller that relays rounds itself: written as JSON with what the session adds to each
request, its answer read as JSON. A plain answer (:mod:`supervisor.tools._forwarded`)
comes back as it is, its ``structuredContent`` checked against the schema the session
checks every result against (by a quick check where the schema is a flat object of typed
properties and the content passes it; by the session's own check otherwise, whose error
it raises); any other is read by the session as it reads its own answers, and is what it
would have been.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import mcp_types as types
import trio
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import _sdk
from .._util._deprecated import on_purpose
from ..log import get_logger
from ..tools import _tracing as tracing
from ..tools._forwarded import Forwarded, plain
from ..tools._request import Round
from ..tools._validate import output_accepted
from ..transports._encoding import caller_capabilities, declaring, encode_params
from ..transports._forward import Forwarding
from ..transports._forward_remote import RemoteForwarding
from ..transports._receipts import Receipt
from . import _tasks as tasks
from ._messages import CALL_ID_META, CallTool, InputRound, Progress

log = get_logger("supervisor.server")

#: Pages of a tool listing fetched at most to find one tool's schema again.
RELIST_PAGES = 100


async def call(
    client: Client, message: CallTool, forwarding: Forwarding | RemoteForwarding | None = None
) -> types.CallToolResult | Round:
    """The SDK call for ``message``, in the caller's trace context; a recorded call
    carries its id in ``_meta``; a relayed multi-round-trip one (``rounds``) its last
    round's answers and state, and its ``input_required`` answer comes back as it is (a
    :class:`~supervisor.tools._request.Round`). A
    call made for a gateway's caller (``message.capabilities``) declares, to a 2026-07-28
    server, what it can of that caller's capabilities. A forwarded call goes through
    ``forwarding``, the connection's, if it may (see the module docstring)."""
    arguments = dict(message.arguments or {})
    if forwarding is not None and not _forwards(client, message, forwarding):
        forwarding = None
    capabilities = message.capabilities
    if capabilities is caller_capabilities.get():  # (a direct call: its caller's own task)
        with tracing.attached(message.context):
            return await _sent(client, message, arguments, forwarding)
    with made_for(capabilities), tracing.attached(message.context):
        return await _sent(client, message, arguments, forwarding)


def _forwards(client: Client, message: CallTool, forwarding: Forwarding | RemoteForwarding) -> bool:
    """Whether ``message`` goes through ``forwarding`` (see the module docstring)."""
    if not message.call.forward or message.progress is not None or not forwarding.available:
        return False
    rounds = message.rounds
    if rounds is None:  # the client answers a 2026-07-28 server's rounds itself
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return False
    elif rounds.responses is not None or rounds.state is not None:
        return False
    return not tracing.carried(message.context)


class made_for:  # noqa: N801 - used as the function it was: a block's context
    """While the block runs, the requests sent declare what they can of
    ``capabilities``, their caller's (``None``: the supervisor's own)."""

    __slots__ = ("_capabilities", "_passing")

    def __init__(self, capabilities: Mapping[str, Any] | None) -> None:
        self._capabilities = capabilities

    def __enter__(self) -> None:
        self._passing = caller_capabilities.set(self._capabilities)

    def __exit__(self, *exc: object) -> None:
        caller_capabilities.reset(self._passing)


async def _sent(
    client: Client,
    message: CallTool,
    arguments: dict[str, object],
    forwarding: Forwarding | RemoteForwarding | None,
) -> types.CallToolResult | Round:
    """:func:`call`'s request, sent (in the caller's trace context)."""
    # the SDK's ProgressFnT names its parameters; it calls them positionally, as Progress is
    progress: ProgressFnT | None = message.progress  # pyright: ignore[reportAssignmentType]
    plainly = message.call_id is None and message.log_level is None and message.rounds is None
    if plainly and forwarding is None:
        return await client.call_tool(message.tool, arguments, progress_callback=progress)
    meta: types.RequestParamsMeta = {}
    if message.call_id is not None:
        meta[CALL_ID_META] = message.call_id
    if message.log_level is not None:  # 2026-07-28 servers log only when asked to
        meta[types.LOG_LEVEL_META_KEY] = message.log_level
    rounds = message.rounds
    if forwarding is not None:
        forwarded = await _forwarded(client, forwarding, message, arguments, meta)
        if isinstance(forwarded, types.CallToolResult):
            return forwarded
        return _relayed(forwarded)
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
        return _relayed(result)
    return await client.call_tool(
        message.tool,
        arguments,
        progress_callback=progress,
        meta=meta,
    )


def _relayed(
    result: types.CallToolResult | types.InputRequiredResult | types.Result,
) -> types.CallToolResult | Round:
    """A relayed call's answer from a 2026-07-28 server: its result, its round (a
    :class:`~supervisor.tools._request.Round`), or the task it made of the call (raised
    for the sender to follow or hand back)."""
    if isinstance(result, tasks.CreatedTask):
        raise tasks._TaskCreated(result)
    if isinstance(result, types.InputRequiredResult):
        return Round(result)
    # a claimed task is parsed as a CreatedTask (tasks.parse_cheaply): not one, this is
    return cast("types.CallToolResult", result)


async def _forwarded(
    client: Client,
    forwarding: Forwarding | RemoteForwarding,
    message: CallTool,
    arguments: dict[str, object],
    meta: types.RequestParamsMeta,
) -> types.CallToolResult | types.InputRequiredResult | types.Result:
    """``message`` forwarded as JSON (see the module docstring): its plain answer as it
    came, any other as the session reads it."""
    session = client.session
    if isinstance(forwarding, RemoteForwarding):
        answer = await _remote(client, forwarding, message, arguments, meta)
    else:
        request = {"method": "tools/call", "params": _params(message, arguments, meta)}
        _sdk.stamp(session, request)  # a 2026-07-28 server's envelope
        params = _declared(request["params"])
        text = encode_params("tools/call", params, server=forwarding.name)
        answer = await forwarding.request("tools/call", text)
    version = client.protocol_version
    read = (
        Forwarded.of(answer)
        if plain(answer, version in MODERN_PROTOCOL_VERSIONS)
        else _sdk.read_tool_result(session, version, answer)
    )
    if isinstance(read, types.CallToolResult) and not read.is_error:
        schema = _sdk.output_schema(session, message.tool)
        if schema is _sdk.UNLISTED or (
            schema is not None and not output_accepted(schema, read.structured_content)
        ):
            await session.validate_tool_result(message.tool, read)  # its own error, if any
    return read


def _params(
    message: CallTool, arguments: dict[str, object], meta: types.RequestParamsMeta
) -> dict[str, Any]:
    """A forwarded call's params, before the session's stamp."""
    params: dict[str, Any] = {"name": message.tool, "arguments": arguments}
    if meta:
        params["_meta"] = dict(meta)
    return params


def _declared(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` declaring what they can of their caller's capabilities, if the call is
    made for a caller (:func:`~supervisor.transports._encoding.declaring`)."""
    caller = caller_capabilities.get()
    return params if caller is None else declaring(params, caller)


async def _remote(
    client: Client,
    forwarding: RemoteForwarding,
    message: CallTool,
    arguments: dict[str, object],
    meta: types.RequestParamsMeta,
) -> dict[str, Any]:
    """``message`` forwarded on a remote connection with the session's stamp, headers
    and all; refused unseen because its ``Mcp-Param-*`` headers follow a schema the
    server no longer lists, it is sent once more after listing the tools again, as the
    session's path sends it."""

    async def send() -> dict[str, Any]:
        request = {"method": "tools/call", "params": _params(message, arguments, meta)}
        headers = _sdk.stamped(client.session, request)
        return await forwarding.request("tools/call", _declared(request["params"]), headers)

    try:
        return await send()
    except MCPError as exc:
        if exc.code != types.HEADER_MISMATCH:
            raise
    await _relist(client, message.tool)
    return await send()


async def read(
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


async def prompt(
    client: Client, name: str, arguments: dict[str, str] | None, rounds: InputRound | None
) -> types.GetPromptResult | types.InputRequiredResult:
    """Get the prompt ``name``; ``rounds`` relays its rounds as :func:`read` does a read's."""
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


def counted(progress: Progress, receipt: Receipt) -> Progress:
    """``progress``, telling ``receipt`` when it is done with each notification."""

    async def counting(done: float, total: float | None, message: str | None) -> None:
        try:
            await progress(done, total, message)
        finally:
            receipt.progress_handled()

    return counting


async def _relist(client: Client, tool: str) -> None:
    """List the server's tools again, page by page until one lists ``tool``, so that the
    client's next call of it carries the headers its schema now asks for."""
    cursor: str | None = None
    for _ in range(RELIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        cursor = page.next_cursor
        if cursor is None or any(listed.name == tool for listed in page.tools):
            return


async def ask_log_level(server: Any, client: Client, level: types.LoggingLevel) -> None:
    """Ask ``client``'s server (of ``server``, its ServerHandle) to send its log messages
    from ``level`` up (``logging/setLevel``), if it declared logging and speaks the
    session-based protocol; a 2026-07-28 server is asked per call instead (in its
    ``_meta``). A refusal, or no answer within the request timeout, is logged."""
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return
    if client.server_capabilities.logging is None:
        return
    with trio.move_on_after(server.config.timeout) as scope:
        try:  # the session's own: the client's wrapper of it warns again while awaited
            await on_purpose(client.session.set_logging_level, level)
            return
        except MCPError as exc:
            log.warning("log level refused", server=server.name, level=level, error=exc.message)
            return
    if scope.cancelled_caught:
        log.warning("log level not answered", server=server.name, level=level)
