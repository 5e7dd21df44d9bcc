"""Approval asked of the gateway's own client, through elicitation.

A call that needs approval (the server's ``approve`` / ``autoApprove`` policy, a
destructive annotation or name) is asked of the client that made it, when the gateway
itself was given no way to decide (no ``serve --yes``) and the client can be asked: it
declared elicitation and speaks the session-based protocol (the 2026-07-28 one has no
server-to-client requests). The question is a form-mode ``elicitation/create`` with no
fields: its message names the tool, its server, why it asks and the arguments; accept
runs that one call, decline or cancel refuses it
(:class:`~supervisor.errors.ApprovalDenied`). The request's ``_meta`` carries the same
as data under :data:`APPROVAL_META`, so a client can tell an approval from a backing
server's own elicitation that the gateway relays.

A 2026-07-28 client, which takes no requests from its server, is asked in the
protocol's multi-round-trip way instead (``InputRequiredResult``): when it declared
elicitation, the call is answered with an ``input_required`` result whose one input
request (:data:`APPROVAL_KEY`, which says it is an approval: that protocol keeps no
``_meta`` on an embedded request) is the same form, and a ``requestState`` the SDK seals
and binds to that tool and those arguments; the client asks its user and calls again with
the answer and the state, and the call is made (accept) or refused (decline, cancel). The
first round sends nothing to the server (:class:`~supervisor.errors.ApprovalAsked`).

A client that cannot be asked gets what it got before: the call refused, saying how to
allow it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._util._printable import printable
from ..errors import ApprovalAsked, AuthRequired
from ..log import get_logger
from ..tools import ApprovalRequest, Approver, Decider
from ._local import APPROVAL_KEY

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "APPROVAL_KEY",
    "ASKED",
    "APPROVAL_META",
    "client_approver",
    "input_required",
    "LOGIN_KEY",
    "login_required",
    "question",
    "round_state",
    "round_trip_approver",
]

log = get_logger("supervisor.gateway")

#: The ``_meta`` key of an approval's ``elicitation/create``: ``{"server", "tool",
#: "reason"}``, what the message says, as data.
APPROVAL_META = "mcp-supervisor/approval"
#: The gateway's own ``requestState`` (sealed by the SDK): ``{"asked": true}`` after it
#: asked for an approval; ``{"approved": true, "backing": STATE}`` after it relayed a
#: backing server's ``input_required`` round (``STATE``: that server's, untouched) —
#: ``{"backing": STATE}`` for a prompt's or a resource read's.
ASKED = "asked"
#: Characters of the arguments' JSON shown in the question; longer is cut, marked ``…``.
ARGUMENTS_SHOWN = 400

_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
#: A form with no fields: the answer is the action alone.
_NO_FIELDS: dict[str, Any] = {"type": "object", "properties": {}}


def question(request: ApprovalRequest) -> str:
    """The approval's message: the tool, its server, why it asks and the arguments, each
    name escaped (a server chose it: it is shown, never obeyed)."""
    shown = json.dumps(dict(request.arguments), ensure_ascii=False, default=str)
    if len(shown) > ARGUMENTS_SHOWN:
        shown = shown[: ARGUMENTS_SHOWN - 1] + "…"
    return (
        f"Allow the tool {printable(request.original_name)!r} of the server "
        f"{printable(request.server)!r} to run? It needs approval ({request.reason}). "
        f"Arguments: {printable(shown)}"
    )


def _form(request: ApprovalRequest) -> types.ElicitRequestFormParams:
    """The approval question as an elicitation form with no fields."""
    return types.ElicitRequestFormParams(
        message=question(request),
        requested_schema=_NO_FIELDS,
        _meta={
            APPROVAL_META: {
                "server": request.server,
                "tool": request.tool,
                "reason": request.reason,
            }
        },
    )


def round_state(
    params: types.CallToolRequestParams
    | types.GetPromptRequestParams
    | types.ReadResourceRequestParams,
) -> dict[str, Any]:
    """The gateway's own state of a call (or prompt got, resource read) made again
    (verified by the SDK's boundary: minted here, for this very request), or ``{}``."""
    if params.request_state is None:
        return {}
    try:
        state = json.loads(params.request_state)
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def round_trip_approver(
    ctx: ServerRequestContext[Any, Any],
    responses: Mapping[str, Any] | None,
    state: dict[str, Any],
) -> Approver | None:
    """The approval of a 2026-07-28 client's ``tools/call``: the answer it brings (a call
    made again with it, or approved in an earlier round), or a callback asking for one
    in another round trip (raising :class:`~supervisor.errors.ApprovalAsked`); ``None``
    when it declared no elicitation. ``responses`` are the call's ``inputResponses``,
    ``state`` is :func:`round_state`'s."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return None
    if state.get(ASKED) is True or state.get("approved") is True:
        answer = (responses or {}).get(APPROVAL_KEY)
        accepted = state.get("approved") is True or getattr(answer, "action", None) == "accept"

        async def answered(request: ApprovalRequest) -> bool:
            return accepted

        return Approver(answered, Decider.CLIENT)

    return _ASK


async def _ask(request: ApprovalRequest) -> bool:
    """Ask a 2026-07-28 client to approve ``request`` in another round trip."""
    raise ApprovalAsked(
        f"tool {request.tool!r} (server {request.server!r}) needs approval "
        f"({request.reason}); asked of the client in another round trip",
        request=request,
    )


#: The approval of a 2026-07-28 client's call that brings no answer: asked for (one for
#: every call: it holds nothing of any)
_ASK = Approver(_ask, Decider.CLIENT)


def input_required(request: ApprovalRequest) -> types.InputRequiredResult:
    """The ``input_required`` result asking a 2026-07-28 client to approve ``request``."""
    ask = types.ElicitRequest(params=_form(request))
    state = json.dumps({ASKED: True})
    return types.InputRequiredResult(input_requests={APPROVAL_KEY: ask}, request_state=state)


#: The input request of a 2026-07-28 client's call that needs its user's own login to a
#: ``perUser`` server first (a URL-mode elicitation).
LOGIN_KEY = "mcp-supervisor/login"


def login_required(exc: AuthRequired, *, modern: bool) -> types.InputRequiredResult:
    """A call that needs the caller's own login to a ``perUser`` backing server first
    (nothing was sent): a URL-mode elicitation of the gateway's login page. A client of
    the session-based protocol gets it as the ``-32042`` error (URL elicitation required,
    raised here); a 2026-07-28 one, which calls again once its user is back, as an
    ``input_required`` result."""
    assert exc.login_url is not None
    message = (
        f"The server {printable(exc.server)!r} needs you to log in to it as yourself "
        "(your own account there); open the link, then the call is made"
    )
    url = types.ElicitRequestURLParams(
        message=message, url=exc.login_url, elicitation_id=exc.login_url.rsplit(".", 1)[-1]
    )
    if not modern:
        raise UrlElicitationRequiredError([url], str(exc))
    ask = types.ElicitRequest(params=url.model_copy(update={"elicitation_id": None}))
    return types.InputRequiredResult(input_requests={LOGIN_KEY: ask})


def client_approver(ctx: ServerRequestContext[Any, Any]) -> Approver | None:
    """An approval callback asking the client of ``ctx`` (a ``tools/call`` request), or
    ``None`` if that client cannot be asked."""
    session = ctx.session
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    if not session.check_client_capability(_ELICITATION):
        return None
    request_id = ctx.request_id

    async def ask(request: ApprovalRequest) -> bool:
        try:
            answer = await session.send_request(
                types.ElicitRequest(params=_form(request)),
                types.ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=request_id),
            )
        except Exception as exc:  # an error answer, or the client went away: not approved
            log.info(
                "the client did not answer an approval",
                server=request.server,
                tool=request.tool,
                error=str(exc),
            )
            return False
        return answer.action == "accept"

    return Approver(ask, Decider.CLIENT)
