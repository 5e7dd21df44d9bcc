"""Each message written as JSON in the task that sends it: one that cannot be fails alone.

A message can hold what JSON text cannot carry: a lone surrogate (``"\\ud800"``: valid
JSON, but no UTF-8 holds it — :mod:`supervisor._util._jsontext`) in a resource URI, a
prompt's arguments, a completion's value or an answer relayed back to the server, or a
value of a type JSON has none for. Written out by the transport's writer task, it would
end that task and with it the connection — every other caller's request in flight on it.
So each transport's write stream writes (or, where the SDK's own writer writes it again,
tries writing) every message in its sender's task, before handing it on, with
:func:`encode`; what cannot be written fails there, alone:

* a request raises :class:`~supervisor.errors.RequestUnencodable` to its sender, naming
  where it holds what cannot be written — it was not sent;
* an answer to one of the peer's requests is replaced by a JSON-RPC error for it
  (``-32603``, saying so), so the peer is not left waiting for one;
* a notification is dropped, and logged.

A surrogate in a tool's arguments never gets this far: the gate refuses it first, as
:class:`~supervisor.errors.ToolArgumentsInvalid` naming the path.

It is also where a request declares, under 2026-07-28 (whose requests each carry the
client's capabilities in ``_meta``), the capabilities of the client it is made for —
a gateway's caller — in place of the supervisor's own: :data:`caller_capabilities`,
as far as the supervisor can relay them (:func:`passed_capabilities`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.message import SessionMessage

from .._util._jsontext import unencodable
from .._util._printable import printable
from ..errors import RequestUnencodable
from ..log import get_logger

__all__ = ["caller_capabilities", "declaring", "encode", "encode_params", "passed_capabilities"]

log = get_logger("supervisor.transports")

#: Longest description of a failure to write a message kept in an error.
_MAX_REASON = 200
_ENCODER = msgspec.json.Encoder()


#: The capabilities (as JSON) of the client the requests sent from this context are made
#: for — a gateway's caller, whose call this is — or ``None``: the supervisor's own. A
#: 2026-07-28 request declares those of them the supervisor itself declares (and so can
#: relay): a server asks only what the caller can give.
caller_capabilities: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "caller_capabilities", default=None
)

#: The capabilities that hold a map of named ones, each passed on alone.
_NAMED = ("experimental", "extensions")


def passed_capabilities(own: Mapping[str, Any], caller: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities to declare for ``caller``'s request: each of ``own`` (what
    the supervisor declares, so can relay) that ``caller`` declared too, as the caller
    declared it (its sub-capabilities, say sampling's ``tools``, are passed on as they
    are asked); of ``experimental`` and ``extensions``, the entries both name, with the
    supervisor's settings (its client is the one that speaks them to the server)."""
    passed: dict[str, Any] = {}
    for key, value in own.items():
        theirs = caller.get(key)
        if theirs is None:
            continue
        if key in _NAMED:
            # (a dict told without the ABC's check)
            mappings = type(value) is dict or isinstance(value, Mapping)
            if mappings and (type(theirs) is dict or isinstance(theirs, Mapping)):
                both = {name: value[name] for name in value if name in theirs}
                if both:
                    passed[key] = both
            continue
        passed[key] = theirs
    return passed


def declaring(params: dict[str, Any], caller: Mapping[str, Any]) -> dict[str, Any]:
    """A request's ``params`` declaring ``caller``'s capabilities
    (:func:`passed_capabilities`) where they declare the client's own: a 2026-07-28
    request's ``_meta`` (``params`` itself, when they declare none)."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return params
    own = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    if type(own) is not dict and not isinstance(own, Mapping):
        return params
    global _last_passed
    last_own, last_caller, passed = _last_passed
    if own is not last_own or caller is not last_caller:
        passed = passed_capabilities(own, caller)
        _last_passed = (own, caller, passed)
    meta = {**meta, types.CLIENT_CAPABILITIES_META_KEY: passed}
    return {**params, "_meta": meta}


#: The last capabilities :func:`declaring` passed on, with the client's own and the
#: caller's they were made of: the same two (a session's envelope, a caller's
#: declaration — neither is changed once made) pass on the same, for call after call.
_last_passed: tuple[object, object, dict[str, Any]] = (None, None, {})


def _declaring(item: SessionMessage, caller: Mapping[str, Any]) -> SessionMessage:
    """``item`` declaring ``caller``'s capabilities where it declares the client's own
    (:func:`declaring`)."""
    message = item.message
    if not isinstance(message, types.JSONRPCRequest) or not isinstance(message.params, dict):
        return item
    params = declaring(message.params, caller)
    if params is message.params:
        return item
    return SessionMessage(message.model_copy(update={"params": params}), metadata=item.metadata)


def encode_params(method: str, params: Mapping[str, Any], *, server: str | None = None) -> bytes:
    """The JSON text of the params of a request of ``method`` that is sent as JSON, not
    as the SDK's model (:mod:`._forward`); one that cannot be written raises
    :class:`~supervisor.errors.RequestUnencodable`, as :func:`encode` does."""
    try:
        return _ENCODER.encode(params)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise RequestUnencodable(method, _unwritable(params, exc), server=server) from None


def _unwritable(body: object, failure: BaseException) -> list[tuple[str, str]]:
    """Where ``body`` holds what JSON text cannot carry, and why (``failure``: what
    writing it raised)."""
    errors = unencodable(body) if body is not None else []
    if not errors:  # not a surrogate: a value of a type JSON has none for, say
        why = printable(str(failure))
        if len(why) > _MAX_REASON:
            why = why[: _MAX_REASON - 1] + "…"
        errors = [("(root)", f"cannot be written as JSON ({why})")]
    return errors


def encode(item: SessionMessage, *, server: str | None = None) -> tuple[SessionMessage, str] | None:
    """``item`` and its JSON text (as the SDK's transports write it); for an answer that
    cannot be written, the error that replaces it and its text; ``None`` for a
    notification that cannot be (dropped). A request that cannot be raises
    :class:`~supervisor.errors.RequestUnencodable`. ``server`` names the server it is
    for, in errors and logs. A request made for a caller (:data:`caller_capabilities`)
    declares what it can of the caller's capabilities."""
    caller = caller_capabilities.get()
    if caller is not None:
        item = _declaring(item, caller)
    message = item.message
    try:
        return item, message.model_dump_json(by_alias=True, exclude_unset=True)
    except (ValueError, TypeError, RecursionError) as exc:  # pydantic's, UTF-8's, a cycle's
        failure = exc
    if isinstance(message, types.JSONRPCError):
        body: object = {"message": message.error.message, "data": message.error.data}
    else:  # a request's or a notification's params, a response's result
        body = getattr(message, "params", None) or getattr(message, "result", None)
    errors = _unwritable(body, failure)
    if isinstance(message, types.JSONRPCRequest):
        raise RequestUnencodable(message.method, errors, server=server) from None
    path, why = errors[0]
    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        log.warning(
            "an answer that cannot be written as JSON replaced by an error",
            server=server,
            path=path,
        )
        error = types.ErrorData(
            code=types.INTERNAL_ERROR,
            message=f"the answer could not be sent: {path}: {why}",
        )
        replaced = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        text = replaced.model_dump_json(by_alias=True, exclude_unset=True)
        return SessionMessage(replaced, metadata=item.metadata), text
    method = getattr(message, "method", "?")
    log.warning(
        "a notification that cannot be written as JSON dropped",
        server=server,
        method=printable(method),
        path=path,
    )
    return None
