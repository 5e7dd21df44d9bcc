"""How the gateway passes a backing server's answer on to its client, as an MCP result.

A result goes on as the server sent it, less the protocol's own per-hop ``_meta`` stamps,
with the name of the server that answered (:data:`~._context.SERVER_META`). A failure is
a tool result with ``isError`` set, its text saying what happened and
``_meta["mcp-supervisor/error"]`` saying it as data (:func:`error_result`); a failure
the request's handler answers in another form (a tool not served, an approval or a
login asked for, a capability the caller did not declare) is raised (:func:`failed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import (
    ApprovalAsked,
    ApprovalRequired,
    AuthRequired,
    ServerRequestError,
    ToolError,
    UnknownTool,
)
from ..log import get_logger
from ..tools import ApprovalRequest, Approver, Decider
from ..tools._forwarded import Forwarded
from ..tools._outcome import describe_error, error_meta
from ._context import LIMITS_META, SERVER_META

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..tools._request import Failed

__all__ = [
    "CLI_YES",
    "error_result",
    "failed",
    "passed_on",
    "progress_relay",
    "unstamped",
    "with_limits",
]

log = get_logger("supervisor.gateway")

_PROTOCOL_META = "io.modelcontextprotocol/"
_Result = TypeVar("_Result", bound=types.Result)
#: Why a gateway's client was not asked about a call that needs approval.
_NOT_ASKED = "it declared no elicitation on the session-based protocol"


async def _approved_by_cli(request: ApprovalRequest) -> bool:
    log.info(
        "approved by the command line's --yes, over the local socket",
        server=request.server,
        tool=request.tool,
        reason=request.reason,
    )
    return True


#: The approval of a call the command line made with ``--yes`` over the local socket.
CLI_YES = Approver(_approved_by_cli, Decider.CLI_YES)


def unstamped(result: _Result) -> _Result:
    """A backing server's answer as the gateway passes it on (a tool's result, a
    resource read, a prompt): without the protocol's own ``_meta`` stamps (its
    ``io.modelcontextprotocol/serverInfo``: those describe a hop, and this one is ours —
    the SDK stamps the gateway's in their place, as on every other answer)."""
    meta = result.meta
    if not meta or not any(key.startswith(_PROTOCOL_META) for key in meta):
        return result
    return result.model_copy(update={"meta": _own_meta(meta) or None})


def _own_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``meta`` without the protocol's own stamps (``io.modelcontextprotocol/…``)."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(_PROTOCOL_META)}


def passed_on(result: types.CallToolResult, server: str | None) -> types.CallToolResult:
    """The backing server's result, its ``_meta`` as :func:`unstamped` leaves it, with
    the name of the server that answered (:data:`~._context.SERVER_META`)."""
    meta = _own_meta(result.meta)
    if server is not None:
        meta[SERVER_META] = server
    if isinstance(result, Forwarded):  # passed on as its JSON: keep it
        return result.with_meta(meta or None)
    return result.model_copy(update={"meta": meta or None})


def with_limits(result: types.CallToolResult, limits: Mapping[str, int]) -> types.CallToolResult:
    """``result`` with the preview ``limits`` in its ``_meta``
    (:data:`~._context.LIMITS_META`)."""
    meta = {**(result.meta or {}), LIMITS_META: dict(limits)}
    return result.model_copy(update={"meta": meta})


def failed(outcome: Failed, for_cli: bool) -> types.CallToolResult:
    """A failed call's answer to a gateway's client: a tool's own failure as the server
    sent it; any other failure a tool error saying what happened (a refusal for want of
    approval in the command line's terms ``for_cli``) with its data in ``_meta``. A tool
    not served, an approval asked in a round of its own, the caller's own login and the
    caller's missing capabilities are raised, for the request's handler to answer."""
    exc = outcome.error
    if isinstance(exc, UnknownTool | ApprovalAsked):
        raise exc
    if isinstance(exc, AuthRequired) and exc.login_url is not None:
        raise exc  # the caller's own login first: nothing was sent
    if isinstance(exc, ToolError):
        answer = outcome.answer
        if answer is not None and answer.raw is not None:  # its isError result, as it is
            return passed_on(cast(types.CallToolResult, answer.raw), exc.server)
        return error_result(exc, exc.text or str(exc))
    if isinstance(exc, ApprovalRequired):
        return error_result(exc, exc.cli_message if for_cli else _approval_text(exc))
    if isinstance(exc, ServerRequestError) and exc.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        raise MCPError(exc.code, str(exc), exc.data) from None  # the caller's declaration
    return error_result(exc, str(exc))


def _approval_text(exc: ApprovalRequired) -> str:
    """The refusal of a call that needs approval, in the gateway's terms: its client
    cannot be asked, and how to allow it (the server's ``autoApprove``, or ``serve
    --yes``)."""
    if exc.allow is not None:
        how = f"{exc.allow}, or start the gateway with --yes"
    elif exc.reason == "listed in approve":
        how = "start the gateway with --yes (it is listed in the server's approve)"
    else:
        how = "start the gateway with --yes"
    return (
        f"tool {exc.tool!r} (server {exc.server!r}) needs approval ({exc.reason}) and the "
        f"gateway's client cannot be asked ({_NOT_ASKED}); the call was not made. To allow "
        f"it: {how}"
    )


def error_result(exc: BaseException, text: str, *, sent: bool = True) -> types.CallToolResult:
    """A failure as a tool error: ``text``, and ``exc`` as data in its ``_meta``."""
    log.info("gateway call failed", error=describe_error(exc))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta=error_meta(exc, sent=sent),
    )


def progress_relay(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
    """A progress callback relaying the backing server's progress to the client, when
    the client asked for progress (``_meta.progressToken``)."""
    meta: Mapping[str, Any] = params.meta or {}  # a TypedDict: keys by field name or alias
    token = meta.get("progress_token", meta.get("progressToken"))
    if token is None:
        return None
    session = ctx.session
    request_id = None if ctx.request_id is None else str(ctx.request_id)

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        with suppress(Exception):
            await session.send_progress_notification(
                token, progress, total, message, related_request_id=request_id
            )

    return relay
