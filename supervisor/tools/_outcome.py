"""How a tool call ends, in three words — the labels the supervisor's own parts (the gate,
the audit log, the gateway, the CLI) and the call history share.

A call is *invoked*, then ends once, with one outcome:

``ok``
    the server answered: a result — a tool's own failure (``isError``, raised as
    :class:`~supervisor.errors.ToolError`) included, since the tool ran — or an answer
    the supervisor could not use (:class:`~supervisor.errors.ToolOutputInvalid`,
    :class:`~supervisor.errors.ResultTooLarge`, :class:`~supervisor.errors.ResultInvalid`):
    executed.
``fail``
    definitely not executed: an unknown tool, invalid arguments, an approval refused,
    required or still being asked, a server failed or stopped (fail-fast, never sent), an
    MCP error answer (:class:`~supervisor.errors.ServerRequestError`), a request that
    could not be written as JSON (:class:`~supervisor.errors.RequestUnencodable`), a
    call over a rate limit (:class:`~supervisor.errors.RateLimited`) or past its deadline
    while it waited for the server's ``maxConcurrentCalls``
    (:class:`~supervisor.errors.CallQueueTimeout`), or the caller cancelled before the
    call was handed to its server.
``info``
    indefinite — it may have executed: :class:`~supervisor.errors.CallMayHaveTakenEffect`,
    :class:`~supervisor.errors.ToolCallTimeout`, or the caller cancelled (or anything
    unexpected happened) after the call was handed to its server.

:func:`classify` gives the outcome of a call that raised; a call's id, when it has one,
travels to its server in the request's ``_meta`` under :data:`CALL_ID_META`. A failure
travels to a gateway's client as data in its tool error's ``_meta``
(:func:`error_meta`), which the command line reads back (:func:`error_in`).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from ..errors import (
    ApprovalAsked,
    ApprovalDenied,
    CallMayHaveTakenEffect,
    CallQueueTimeout,
    RateLimited,
    RequestUnencodable,
    ResultInvalid,
    ResultTooLarge,
    ServerRequestError,
    ServerUnavailable,
    ToolArgumentsInvalid,
    ToolCallTimeout,
    ToolError,
    ToolOutputInvalid,
    UnknownTool,
)
from ._call_id import CALL_ID_META
from ._error_meta import ERROR_META, error_in

__all__ = [
    "CALL_ID_META",
    "ERROR_META",
    "FAIL",
    "INFO",
    "OK",
    "Outcome",
    "classify",
    "describe_error",
    "error_data",
    "error_in",
    "error_meta",
]

Outcome: TypeAlias = Literal["ok", "fail", "info"]
"""How a call ended: answered, definitely not executed, or indefinite."""

OK: Outcome = "ok"
FAIL: Outcome = "fail"
INFO: Outcome = "info"

#: Errors that mean the server answered (the tool ran), though not with a usable result.
_ANSWERED = (ToolError, ToolOutputInvalid, ResultTooLarge, ResultInvalid)
#: Errors that mean the call was never executed.
_NOT_EXECUTED = (
    UnknownTool,
    ToolArgumentsInvalid,
    ApprovalDenied,  # ApprovalRequired too
    ApprovalAsked,
    ServerUnavailable,
    ServerRequestError,
    RequestUnencodable,
    RateLimited,
    CallQueueTimeout,
)
#: Errors that leave it open whether the call ran.
_INDEFINITE = (CallMayHaveTakenEffect, ToolCallTimeout)


def classify(exc: BaseException, *, sent: bool) -> tuple[Outcome, bool]:
    """The outcome of a call that raised ``exc`` — ``sent``: after it was handed to its
    server — and whether it is a tool's own failure (``isError``).

    A group holding one exception is judged by it. What the module docstring does not
    name (a cancellation, a bug) is ``info`` once sent — it may have run — else ``fail``.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, ToolError):
        return OK, True
    if isinstance(exc, _ANSWERED):
        return OK, False
    if isinstance(exc, _INDEFINITE):
        return INFO, False
    if isinstance(exc, _NOT_EXECUTED):
        return FAIL, False
    return (INFO if sent else FAIL), False


def error_data(exc: BaseException, *, sent: bool = True) -> dict[str, object]:
    """What failed, as data — one shape for every door (the gateway's error ``data``,
    ``call --json``'s ``error``): the error's type, its server, whether the call may have
    taken effect (never when it was not ``sent``), each wrong field of invalid arguments,
    and for a rate limit when the call would fit (``retryAfter`` seconds)."""
    outcome, _ = classify(exc, sent=sent)
    data: dict[str, object] = {
        "type": type(exc).__name__,
        "server": getattr(exc, "server", None),
        "effect": "not executed" if outcome == FAIL else "may have taken effect",
    }
    if isinstance(exc, ToolArgumentsInvalid):
        data["errors"] = [{"path": path, "message": message} for path, message in exc.errors]
    elif isinstance(exc, RateLimited):  # when to call again (a tool result has no header)
        data.update(retryAfter=exc.retry_after, limit=exc.limit, by=exc.by)
    return data


def error_meta(exc: BaseException, *, sent: bool = True) -> dict[str, object]:
    """The ``_meta`` of a tool error saying that the call failed with ``exc``: its
    :func:`error_data` under :data:`ERROR_META` (read back by :func:`error_in`)."""
    return {ERROR_META: error_data(exc, sent=sent)}


def describe_error(exc: BaseException) -> str:
    """``"ErrorType: message"`` (the type alone when the message is empty)."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
