"""What the gateway reads of a request: the ``_meta`` keys and ASGI scope keys it honours,
and, from a request's context, who made it and in which protocol era.

Every part of the gateway that answers a request (:mod:`._core` and the parts it holds)
reads the request through these, so a key means the same thing wherever it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..server._tasks import EXTENSION_ID as TASKS
from ._relay import LEVELS

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._resource import Caller

__all__ = [
    "APPROVE_META",
    "CALLER_SCOPE",
    "LIMITS_META",
    "LOCAL_SCOPE",
    "NOT_FOUND",
    "RESOURCE_NOT_FOUND",
    "SERVER_META",
    "TIMEOUT_META",
    "caller_of",
    "declared_capabilities",
    "is_local",
    "log_level",
    "not_found_code",
    "subject_of",
    "timeout",
]

#: The ``_meta`` key of a result that names the backing server which answered, and of a
#: ``resources/read`` request naming the server to read from (``read --server``).
SERVER_META = "mcp-supervisor/server"
#: The ``_meta`` key of a ``tools/call``, ``resources/read`` or ``prompts/get`` request
#: bounding the whole request, in seconds (``call --timeout``, ``read --timeout``): the
#: gateway waits no longer for the server, restarts included.
TIMEOUT_META = "mcp-supervisor/timeout"
#: The ``_meta`` key of a ``tools/call`` request approving it (``call --yes``); honoured
#: only on the gateway's local socket (:data:`LOCAL_SCOPE`), ignored over HTTP.
APPROVE_META = "mcp-supervisor/approve"
#: The ``_meta`` key of a ``tools/call`` request asking for the server's preview limits,
#: and of the result carrying them (``{"maxPreviewBytes": …}``): the command line
#: previews a large result as it would had it made the call itself.
LIMITS_META = "mcp-supervisor/limits"
#: The ASGI scope key the local socket's front sets on each of its requests.
LOCAL_SCOPE = "mcp-supervisor.local"
#: The ASGI scope key where a team gateway's front puts the request's :class:`Caller`.
CALLER_SCOPE = "mcp-supervisor.caller"
#: JSON-RPC error code for a resource not found on the session-based protocol (its
#: specification's); 2026-07-28 retired it for ``-32602`` (see :func:`not_found_code`).
RESOURCE_NOT_FOUND = -32002
#: The codes a backing server says "resource not found" with: the session-based
#: protocol's, and 2026-07-28's (SEP-2164: invalid params).
NOT_FOUND = frozenset({RESOURCE_NOT_FOUND, types.INVALID_PARAMS})


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller | None:
    """The team gateway's caller of the request (:data:`CALLER_SCOPE`), if it has one."""
    scope = getattr(ctx.request, "scope", None)
    return scope.get(CALLER_SCOPE) if isinstance(scope, dict) else None


def subject_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Who the request's caller is, as everything past the gateway's front knows them:
    the subject of a team gateway's caller (:func:`caller_of`), ``None`` for no one in
    particular (whoever holds the gateway's token). A ``requestState`` is bound to it, a
    held request belongs to it, and a backing server's questions go to it."""
    caller = caller_of(ctx)
    return None if caller is None else caller.subject


def is_local(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request came over the gateway's local socket (:data:`LOCAL_SCOPE`)."""
    scope = getattr(ctx.request, "scope", None)
    return isinstance(scope, dict) and scope.get(LOCAL_SCOPE) is True


#: What :func:`declared_capabilities` made of each capabilities model, by its id: the
#: model (kept, so its id is not reused) and its JSON.
_DECLARED: dict[int, tuple[object, dict[str, Any]]] = {}
#: How many models' JSON is kept (past that, it forgets them all).
_KEPT = 256


def declared_capabilities(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The client capabilities the caller of ``ctx`` declared (for a 2026-07-28 request,
    in it), as JSON — and the tasks extension, which the gateway follows for a caller
    that does not. Made once for each capabilities model (a connection's, kept for the
    requests of an envelope seen before: nothing changes one), the same each time after:
    it is not to be changed."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None:
        return {"extensions": {TASKS: {}}}
    held = _DECLARED.get(id(capabilities))
    if held is not None and held[0] is capabilities:
        return held[1]
    declared = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    extensions = declared.get("extensions") or {}
    declared["extensions"] = {TASKS: {}, **extensions}
    if len(_DECLARED) >= _KEPT:
        _DECLARED.clear()
    _DECLARED[id(capabilities)] = (capabilities, declared)
    return declared


def timeout(value: object) -> float | None:
    """A request's :data:`TIMEOUT_META`, if it is a number of seconds above 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < float("inf") else None


def log_level(value: object) -> types.LoggingLevel | None:
    """A request's log-level opt-in (``_meta``), if it names a level."""
    return value if value in LEVELS else None


def not_found_code(ctx: ServerRequestContext[Any, Any]) -> int:
    """The code of a resource not found for the request's caller, in its own protocol's
    terms: ``-32602`` on 2026-07-28 (which retired ``-32002``), else ``-32002``."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return types.INVALID_PARAMS
    return RESOURCE_NOT_FOUND
