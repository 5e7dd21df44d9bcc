"""The HTTP gateway's MCP sessions: how long an idle one lives, how many may be open, and
what became of those that ended without a ``DELETE``.

The SDK's session manager keeps each session a client opens until the client deletes it,
or until it has had no request in flight (no request being served, no open ``GET``
stream) for its idle timeout: then the session's server task ends and its id answers
``404``, so the client opens a new one (the MCP spec's rule). It also refuses a new
session with ``503`` while ``max_sessions`` are open. :class:`Sessions` sets both and adds
what the SDK lacks: at the bound, the session idle the longest is closed to make room
(a session in use is never closed for another), and the counts of sessions open,
expired and closed for room are served in ``/metrics``.

It wraps two of the manager's private methods, through the SDK boundary
(:func:`supervisor._sdk.wrap_session_admission`): the one where the SDK admits a session
(called under the manager's creation lock with no await) and the one every ending goes
through.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from .._sdk import forget_session_owner, session_transports, wrap_session_admission
from ..config._limits import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE
from ..log import get_logger

if TYPE_CHECKING:
    from ._resume import StreamHistory

__all__ = ["DEFAULT_MAX_SESSIONS", "DEFAULT_SESSION_IDLE", "Sessions"]

log = get_logger("supervisor.gateway.http")


class Sessions:
    """The session policy of one HTTP gateway, applied to the SDK's session ``manager``
    (built with ``session_idle_timeout`` and ``max_sessions`` from the same numbers):
    closes the longest-idle session when a new one would pass the bound, counts what
    ended how, and renders that for ``/metrics``; tells ``history`` (the sessions' SSE
    events, :mod:`._resume`) which session a request opens, and which ones ended."""

    def __init__(
        self, manager: Any, *, idle: float, bound: int, history: StreamHistory | None = None
    ) -> None:
        self.idle = idle
        self.bound = bound
        self.expired = 0  # closed by the SDK after `idle` seconds without a request
        self.evicted = 0  # closed here, the longest idle, to make room for a new one
        self.refused = 0  # a new session refused (503): every open one was in use
        self._manager = manager
        self._instances: dict[str, Any] = session_transports(manager)

        def admitting(admit: Callable[[Any], Any]) -> Callable[[Any], Any]:
            return partial(admit_or_make_room, admit)

        def discarding(discard: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
            return partial(discard_counting, discard)

        def admit_or_make_room(admit: Callable[[Any], Any], requestor: Any) -> Any:
            if len(self._instances) >= self.bound and not self._close_longest_idle():
                self.refused += 1
                log.warning("gateway session refused: every open one is in use", open=self.bound)
            transport = admit(requestor)
            if transport is not None and history is not None:
                # the opening request's events, and its session task's, are the new session's
                history.bind(transport.mcp_session_id)
            return transport

        async def discard_counting(
            discard: Callable[[str, Any], Any], session_id: str, transport: Any
        ) -> None:
            scope = transport.idle_scope
            # Still listed and its idle scope cancelled: the SDK's idle timeout ended it
            # (a DELETE terminates the transport and leaves the scope alone; one closed
            # for room is no longer listed; at shutdown the manager's own scope is).
            if session_id in self._instances and scope is not None and scope.cancel_called:
                self.expired += 1
            await discard(session_id, transport)
            if history is not None:
                history.ended(session_id)

        wrap_session_admission(manager, admitting, discarding)

    @property
    def open(self) -> int:
        """Sessions open now."""
        return len(self._instances)

    def _close_longest_idle(self) -> bool:
        """Close the session idle the longest, if one is idle (its idle deadline is set
        only while no request is in flight; the earliest is the oldest); whether one was."""
        idle = [
            (transport.idle_scope.deadline, session_id)
            for session_id, transport in self._instances.items()
            if transport.idle_scope is not None
            and transport.idle_scope.deadline < math.inf
            and not transport.idle_scope.cancel_called
        ]
        if not idle:
            return False
        _, session_id = min(idle)
        transport = self._instances.pop(session_id)  # its id answers 404 from now on
        forget_session_owner(self._manager, session_id)
        transport.idle_scope.cancel()  # its server task ends, and frees what it held
        self.evicted += 1
        log.info("gateway session closed to make room", open=self.bound)
        return True

    def prometheus(self) -> str:
        """These numbers in the Prometheus text format, ending with a newline."""
        p = "mcp_supervisor_gateway_sessions"
        families = [
            (p, "gauge", "MCP sessions open on the gateway's HTTP endpoint.", self.open),
            (f"{p}_max", "gauge", "Sessions the gateway keeps open at most.", self.bound),
            (
                f"{p}_idle_timeout_seconds",
                "gauge",
                "Seconds without a request after which a session is closed.",
                self.idle,
            ),
            (
                f"{p}_expired_total",
                "counter",
                "Sessions closed after the idle timeout.",
                self.expired,
            ),
            (
                f"{p}_evicted_total",
                "counter",
                "Sessions idle the longest, closed to make room for a new one at the bound.",
                self.evicted,
            ),
            (
                f"{p}_refused_total",
                "counter",
                "New sessions refused (503) at the bound, every open one in use.",
                self.refused,
            ),
        ]
        lines: list[str] = []
        for name, kind, help, value in families:
            number = int(value) if float(value).is_integer() else value
            lines += [f"# HELP {name} {help}", f"# TYPE {name} {kind}", f"{name} {number}"]
        return "\n".join(lines) + "\n"
