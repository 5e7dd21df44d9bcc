"""What a supervisor tells the outside when asked: snapshots of it and its children."""

from __future__ import annotations

import enum

import attrs

from ._spec import Intensity, Restart, Strategy


class ChildState(enum.Enum):
    """Where a child is in its life."""

    STARTING = "starting"
    RUNNING = "running"
    #: waiting for its backoff delay before the next start
    RESTARTING = "restarting"
    #: given up on (``GiveUp.MARK_UNAVAILABLE``); restart it explicitly
    UNAVAILABLE = "unavailable"
    #: exited without restart, or terminated; restart it explicitly
    STOPPED = "stopped"


@attrs.frozen
class ChildStatistics:
    """A snapshot of one child."""

    id: str
    state: ChildState
    restart: Restart
    #: restarts performed since the child was added (or explicitly restarted)
    restarts: int
    #: consecutive restarts since it was last stable; drives the backoff
    attempt: int
    #: why its last incarnation exited, if one did
    last_exit: str | None
    #: when (trio clock) it is due to start again, while RESTARTING
    next_restart_at: float | None


@attrs.frozen
class SupervisorStatistics:
    """A snapshot of one supervisor and its children, in start order."""

    name: str
    strategy: Strategy
    intensity: Intensity
    children: tuple[ChildStatistics, ...]
    #: restarts this supervisor decided on, ever: one per exit that triggered one,
    #: however many siblings restarted with it
    restarts: int
