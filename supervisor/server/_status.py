"""A server's status: the one list of the words for it.

:class:`ServerStatus` is a string enum: each member *is* its word (``ServerStatus.CONNECTED
== "connected"``), so the health record, ``status --json``, ``/metrics`` and the
dashboard's feed carry the words themselves, and a status read back from JSON compares
equal to its member. It is ``supervisor.server``'s (importable from there); it lives in a
module of its own, importing nothing, so that a command served by a running gateway can
name statuses without loading the runtime.
"""

from __future__ import annotations

import enum

__all__ = ["ServerStatus"]


class ServerStatus(enum.StrEnum):
    """Where a server is in its life: ``idle`` (not started) → ``connecting`` →
    ``connected`` → ``disconnected`` → ``connecting`` …, ending ``failed`` (gave up) or
    ``stopped``; and the states of an OAuth login, a slow connection, a disabled server."""

    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    #: connected, but a probe, or calls in a row, went unanswered: probed again at once,
    #: its connection ended if that goes unanswered too
    DEGRADED = "degraded"
    #: connected, but not heard from within its window (see docs/servers.md): not shown
    #: as up, though calls still go to it
    UNVERIFIED = "unverified"
    DISCONNECTED = "disconnected"
    FAILED = "failed"
    STOPPED = "stopped"
    #: a remote server waiting for an OAuth login (calls fail fast saying how)
    NEEDS_AUTH = "needs_auth"
    #: connecting while its OAuth token is being renewed
    REFRESHING = "refreshing"
    #: the authorization server refused; waits for a new login
    AUTH_FAILED = "auth_failed"
    #: configured with ``disabled: true`` (or ``enabled: false``): never started
    DISABLED = "disabled"
