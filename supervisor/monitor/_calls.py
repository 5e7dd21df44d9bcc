"""The recent tool calls of each server, in a window of time: what the dashboard's strips
draw as latency points.

The gate (:mod:`supervisor.calls._gate`) adds every call that named a server, once it has its
outcome, to each :class:`CallWindow` attached to it (``SupervisorHandle.recent_calls``);
with none attached it records nothing. A window is bounded whatever the load: per
server, per second (of the calls' ends) and per outcome class, it keeps one call, the
slowest, and it forgets calls that ended more than ``seconds`` ago. So a server
answering thousands of calls a second costs a window the same few entries a second as
one answering two (at most one per outcome class), a strip of five minutes has at most
300 points of each class, and adding a call is a few operations on a deque.
"""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

__all__ = ["KINDS", "CallWindow", "RecentCall"]

#: The outcome class (a key of :data:`supervisor.timeline.OUTCOMES`) of each outcome of the audit
#: log's words (:data:`supervisor.audit.AuditOutcome`): ``ok`` answered (a tool's own
#: error apart), ``fail`` not executed, ``info`` may have been executed — the classes of
#: the fault report's calls.
KINDS: dict[str, str] = {
    "ok": "ok",
    "tool_error": "tool-error",
    "invalid_output": "ok",
    "indefinite": "info",
    "failed": "fail",
    "refused": "fail",
    "rate_limited": "fail",
    "invalid_arguments": "fail",
    "unknown_tool": "fail",
    "cancelled": "fail",
}


class RecentCall(NamedTuple):
    """One call: invoked at unix time ``at``, ``latency`` seconds until its outcome of
    class ``kind``; ``tool`` is the name it was called by, ``error`` the type of the
    error it ended with (``None`` for a result)."""

    at: float
    latency: float
    kind: str
    tool: str
    error: str | None
    #: the unix second it ended in
    second: int


class CallWindow:
    """Each server's calls that ended in the last ``seconds`` (see the module docstring)."""

    def __init__(self, seconds: float = 300.0) -> None:
        self.seconds = seconds
        self._calls: dict[str, deque[RecentCall]] = {}
        #: calls added, and calls left out by the per-second bound (kept or replaced)
        self.added = 0
        self.thinned = 0

    def add(
        self,
        server: str,
        tool: str,
        latency: float,
        outcome: str,
        error: str | None = None,
        now: float | None = None,
    ) -> None:
        """A call of *server*'s ended now (unix time *now*), *latency* seconds after it
        was invoked, with *outcome* (a key of :data:`KINDS`; another is ``info``)."""
        ended = time.time() if now is None else now
        calls = self._calls.get(server)
        if calls is None:
            calls = self._calls[server] = deque()
        second = int(ended)
        call = RecentCall(ended - latency, latency, KINDS.get(outcome, "info"), tool, error, second)
        self.added += 1
        oldest = second - self.seconds
        while calls and calls[0].second < oldest:
            calls.popleft()
        # The call kept for this second and class, if any: the slower one stays.
        for index in range(len(calls) - 1, -1, -1):
            kept = calls[index]
            if kept.second != second:
                break
            if kept.kind == call.kind:
                self.thinned += 1
                if latency > kept.latency:
                    calls[index] = call
                return
        calls.append(call)

    def calls(self, server: str, since: float) -> list[RecentCall]:
        """*server*'s kept calls invoked at unix time *since* or later, in order of
        their ends."""
        return [c for c in self._calls.get(server, ()) if c.at >= since]
