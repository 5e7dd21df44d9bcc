"""Readiness: whether the servers a deployment cannot do without are up (``/readyz`` of the
gateway and of the dashboard)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..server import HealthRecord
from ..server._status import ServerStatus

__all__ = ["DOWN", "NOT_READY", "readiness"]

#: The statuses of a server that serves nothing: failed, stopped, waiting for a login that
#: nobody gives, or disabled. A gateway withdraws such a server's tools.
DOWN = frozenset(
    {
        ServerStatus.FAILED,
        ServerStatus.AUTH_FAILED,
        ServerStatus.NEEDS_AUTH,
        ServerStatus.STOPPED,
        ServerStatus.DISABLED,
    }
)

#: The statuses that make a ``required`` server not ready: down, lost (``disconnected``,
#: and connecting again after that), or connected but not heard from within its window
#: (``unverified``) — calls to it wait or may not be answered, and a balancer had better
#: send its callers to a replica whose connection is known to live.
NOT_READY = DOWN | {ServerStatus.DISCONNECTED, ServerStatus.UNVERIFIED}


def _not_ready(record: HealthRecord) -> bool:
    if record.status in NOT_READY:
        return True
    # Connecting again after a failure (not a first connection): still lost.
    return record.status == ServerStatus.CONNECTING and record.consecutive_failures > 0


class Supervised(Protocol):
    """What readiness reads of a supervisor (a ``SupervisorHandle``)."""

    @property
    def servers(self) -> Mapping[str, Any]: ...

    def status(self) -> Mapping[str, HealthRecord]: ...


def readiness(sup: Supervised) -> tuple[int, dict[str, object]]:
    """``/readyz``'s status code and document: ``503`` naming each server marked
    ``required: true`` that is down, lost or unverified (:data:`NOT_READY`), with its
    status and last error; else ``200``."""
    down = {
        name: {"status": record.status, "last_error": record.last_error}
        for name, record in sup.status().items()
        if getattr(sup.servers[name].config, "required", False) and _not_ready(record)
    }
    if down:
        return 503, {"status": "not ready", "required_servers_down": down}
    return 200, {"status": "ready"}
