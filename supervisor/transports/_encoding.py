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
"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.message import SessionMessage

from .._util._jsontext import unencodable
from .._util._printable import printable
from ..errors import RequestUnencodable
from ..log import get_logger

__all__ = ["encode"]

log = get_logger("supervisor.transports")

#: Longest description of a failure to write a message kept in an error.
_MAX_REASON = 200


def encode(item: SessionMessage, *, server: str | None = None) -> tuple[SessionMessage, str] | None:
    """``item`` and its JSON text (as the SDK's transports write it); for an answer that
    cannot be written, the error that replaces it and its text; ``None`` for a
    notification that cannot be (dropped). A request that cannot be raises
    :class:`~supervisor.errors.RequestUnencodable`. ``server`` names the server it is
    for, in errors and logs."""
    message = item.message
    try:
        return item, message.model_dump_json(by_alias=True, exclude_unset=True)
    except (ValueError, TypeError, RecursionError) as exc:  # pydantic's, UTF-8's, a cycle's
        failure = exc
    if isinstance(message, types.JSONRPCError):
        body: object = {"message": message.error.message, "data": message.error.data}
    else:  # a request's or a notification's params, a response's result
        body = getattr(message, "params", None) or getattr(message, "result", None)
    errors = unencodable(body) if body is not None else []
    if not errors:  # not a surrogate: a value of a type JSON has none for, say
        why = printable(str(failure))
        if len(why) > _MAX_REASON:
            why = why[: _MAX_REASON - 1] + "…"
        errors = [("(root)", f"cannot be written as JSON ({why})")]
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
