"""What sees a tool call go through the gate: one interface for the call history, the audit
log, the trace span and the dashboard's call windows.

The gate (:mod:`supervisor.calls._gate`) makes one :class:`Call` for each tool call and asks each
of its observers to :meth:`~CallObserver.watch` it, in order, as soon as the call is
invoked. A watch (a :class:`CallWatch`) then hears, in this order:

1. :meth:`~CallWatch.admit` — any watch may refuse the call here by raising (an audit log
   that cannot be written does); the call then fails like any other;
2. :meth:`~CallWatch.resolved` once the merged name is resolved to a server and its own
   tool name (again if the server had to be connected first to learn its tools);
3. :meth:`~CallWatch.sending` when the call is handed to its server;
4. exactly one of :meth:`~CallWatch.answered` (a usable result) or
   :meth:`~CallWatch.failed` (anything raised, a tool's own error included).

An observer that names calls (the call history) sets :attr:`Call.call_id` in ``watch``,
if no earlier observer has: that id is what goes to the server in the request's
``_meta`` (:data:`~supervisor.tools._call_id.CALL_ID_META`) and what later observers (the audit
log) write. Observers are called synchronously, on the caller's task; they must not
block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

__all__ = ["Call", "CallObserver", "CallWatch", "History"]


@attrs.define(slots=True, eq=False)
class Call:
    """One tool call through the gate, as its observers see it: the gate fills it in as
    the call goes on (times on trio's clock, in seconds).

    This module sits below the tools and events it speaks of (it imports neither), so
    they are named in the docs, not in the annotations."""

    #: the merged name it was called by
    tool: str
    #: its arguments, as the caller gave them
    arguments: Mapping[str, object]
    #: when it was invoked
    started: float
    #: its id, if an observer named it (sent to the server in ``_meta``)
    call_id: str | None = None
    #: its server and the server's own name for the tool, once resolved
    server: str | None = None
    original: str | None = None
    #: the approval decision, once one was taken (a :class:`supervisor.tools.ApprovalDecision`)
    approval: Any = None
    #: handed to its server
    sent: bool = False
    #: how it ended, in the audit log's words (:data:`~supervisor.tools._audit.AuditOutcome`)
    outcome: str | None = None
    #: who it is made for: the subject of the team gateway's authenticated caller
    caller: str | None = None


class CallWatch:
    """One observer's view of one call (see the module docstring for the order of the
    calls). Every method does nothing here: a watch overrides what it needs."""

    __slots__ = ()

    def admit(self, call: Call) -> None:
        """Return if ``call`` may go ahead; raise to refuse it before it is resolved."""

    def resolved(self, call: Call) -> None:
        """``call.server`` and ``call.original`` are known (or changed)."""

    def sending(self, call: Call, timeout: float) -> None:
        """``call`` is handed to its server now, to be answered within ``timeout`` s."""

    def answered(self, call: Call, result: Any) -> None:  # noqa: ANN401 - a ToolResult
        """``call`` ended with ``result``, a :class:`supervisor.tools.ToolResult`
        (``call.outcome`` is ``"ok"``)."""

    def failed(self, call: Call, exc: BaseException) -> None:
        """``call`` ended by raising ``exc`` (``call.outcome`` says how)."""


class CallObserver(Protocol):
    """Anything that watches the gate's tool calls: the call history, the audit log."""

    def watch(self, call: Call) -> CallWatch:
        """A watch of ``call``, just invoked (it may set ``call.call_id``)."""
        ...


class History(CallObserver, Protocol):
    """What ``open_supervisor(history=...)`` takes: a call observer that also keeps the
    run's events (:class:`supervisor.faults.CallHistory` is one)."""

    def start(self) -> None:
        """Pin the run's start, now."""
        ...

    def tap(self, publish: Callable[[Any], None]) -> Callable[[Any], None]:
        """``publish`` (of :mod:`supervisor.events` events), showing the observer each
        event first."""
        ...
