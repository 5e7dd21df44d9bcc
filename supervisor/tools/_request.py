"""A tool call as one value, and how it ends as one typed outcome.

A :class:`ToolCall` says what is called (the merged name), with what (its arguments), for
whom (the caller's subject; the command line over a gateway's local socket), within what
deadline (its timeout), with which callbacks (progress, approval) and how (spilled or not,
its log level, its relayed rounds). Each door builds one — ``SupervisorHandle.call`` from
its keyword arguments, the gateway from the MCP request, the ``call`` meta-tool from its
arguments — and passes it down whole: the gate, the server handle and the per-user
sessions read what is theirs from it; nothing below a door lists the options one by one.

The gate's answer (:meth:`Gate.outcome <supervisor.calls._gate.Gate.outcome>`) is one of

- a :class:`~supervisor.tools.ToolResult`: the server answered, a tool's own failure
  (``is_error``) included;
- a :class:`Round`: a relayed call's ``input_required`` answer, for its caller to answer
  (only with ``rounds``);
- a :class:`Task`: the task a server made of a relayed call, for its caller to follow
  (only with ``rounds.tasks``), its handle as the server sent it (:class:`CreatedTask`;
  following a task is :mod:`supervisor.server._tasks`'s);
- a :class:`Failed`: the :class:`~supervisor.errors.SupervisorError` the call failed
  with, and whether it was handed to its server;

and each door renders it: ``SupervisorHandle.call`` returns a result and raises a failure
(a tool's own too, :class:`~supervisor.errors.ToolError`), the gateway answers its client
with each case's MCP answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs
import mcp_types as types
from pydantic import ConfigDict

from ..errors import ToolError
from ._results import ToolResult

if TYPE_CHECKING:
    from ..actors import SupervisorError
    from ._approval import ApprovalCallback

__all__ = [
    "CallOutcome",
    "CreatedTask",
    "Failed",
    "InputRound",
    "Progress",
    "Round",
    "Task",
    "ToolCall",
]

_NO_ARGUMENTS: Mapping[str, object] = {}

#: ``progress(progress, total, message)``: a tool call's MCP progress notifications
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@attrs.frozen
class InputRound:
    """A call (or a prompt got, a resource read) of 2026-07-28's multi-round-trip kind, as
    a front end that relays it to its own client passes it on (the gateway): an
    ``input_required`` answer comes back as it is, not answered by this supervisor's
    callbacks; ``responses`` and ``state`` — the answers to the last round's input
    requests and its ``requestState``, untouched — go with the request when it is made
    again. With ``tasks`` (that client declared the tasks extension) a task the server
    makes of a call comes back as it is too, for the client to follow, instead of being
    followed here (see :mod:`supervisor.server._tasks`)."""

    responses: Mapping[str, object] | None = None
    state: str | None = None
    tasks: bool = False


@attrs.frozen
class ToolCall:
    """One tool call, as a door built it (see the module docstring)."""

    #: the merged name of the tool called
    name: str
    #: its arguments, as the caller gave them
    arguments: Mapping[str, object] = attrs.field(
        default=_NO_ARGUMENTS, converter=lambda a: _NO_ARGUMENTS if a is None else a
    )
    #: seconds the whole call may take (``None``: the server's request timeout)
    timeout: float | None = None
    #: awaited as ``progress(progress, total, message)`` for each progress notification
    progress: Progress | None = None
    #: decides this call's approval in place of the supervisor's callback
    approve: ApprovalCallback | None = None
    #: ``False``: the whole result is kept in memory, no file is written
    spill: bool = True
    #: the log level this call opts in to (a 2026-07-28 server's per-request one)
    log_level: types.LoggingLevel | str | None = None
    #: a relayed multi-round-trip call (``None``: input requests are answered here)
    rounds: InputRound | None = None
    #: who it is made for: the subject of a team gateway's authenticated caller
    caller: str | None = None
    #: made for the command line over a gateway's local socket (its ``--yes`` approves,
    #: and a refusal says so in its terms)
    for_cli: bool = False
    #: a gateway passes the answer on as JSON: a plain one may come back as it came
    #: (:class:`~supervisor.tools._forwarded.Forwarded`), not as the SDK's models
    forward: bool = False

    @property
    def plain(self) -> bool:
        """Whether nothing but the name, arguments, timeout and progress is asked for
        below the gate (the call's fast path)."""
        return self.log_level is None and self.rounds is None and self.caller is None


@attrs.frozen
class Round:
    """A relayed call's ``input_required`` answer, as the server sent it."""

    answer: types.InputRequiredResult


class CreatedTask(types.Result):
    """A server's task handle, in place of a ``tools/call`` result (``resultType:
    "task"``); its other fields (``createdAt``, ``ttlMs`` …) are kept as they came."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None


@attrs.frozen
class Task:
    """The task a server made of a relayed call, for the call's caller to follow."""

    task: CreatedTask


@attrs.frozen
class Failed:
    """The call failed with ``error``; ``sent``: after it was handed to its server."""

    error: SupervisorError
    sent: bool

    @property
    def answer(self) -> ToolResult | None:
        """The server's own answer, when the tool ran and reported failure (``isError``,
        a :class:`~supervisor.errors.ToolError`): what a door passes on as it is."""
        error = self.error
        if isinstance(error, ToolError) and isinstance(error.result, ToolResult):
            return error.result
        return None


CallOutcome: TypeAlias = "ToolResult | Round | Task | Failed"
"""How a call through the gate ended (the module docstring)."""
