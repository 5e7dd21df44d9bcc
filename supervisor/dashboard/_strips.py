"""The servers' live strips: the last :data:`WINDOW` seconds of each server — its states,
its restarts and its calls — drawn as the fault report draws its timelines
(:mod:`supervisor.timeline`), on one scale for all. A dashboard younger than that spans
the time since it started, so that its first minutes are not squeezed against "now".

- **States** are the servers' own statuses, what the table shows (``unverified``
  included: connected, not heard from within its window; ``disconnected`` is
  drawn as ``down``, ``refreshing`` as ``connecting``, ``auth_failed`` as ``failed``,
  ``disabled`` as ``idle``; :data:`STATUS_STATES`), looked at when an event names the
  server, every :data:`SAMPLE_INTERVAL` seconds, and whenever the strips are drawn. A
  band starts when the dashboard saw its status first; before the dashboard started
  there is none.
- **Restarts** are the ``supervisor.child.restarted`` events.
- **Health marks** are what health watching found (:data:`HEALTH_EVENTS`): a probe, or
  calls in a row, went unanswered (``mcp.health.stale``), the connection was found dead,
  by its port's watch or by probes (``mcp.health.down``), the server answered again
  (``mcp.health.recovered``).
- **Reload marks** are the config's reloads that added, replaced or changed the server
  (``supervisor.config.reloaded``); a server a reload removed has no strip from then on.
- **Calls** are those of the :class:`~supervisor.monitor.CallWindow` the dashboard
  keeps (``SupervisorHandle.recent_calls``): each a point at its invocation, as high as
  its latency, coloured by its outcome.

Memory is bounded: what is older than the window is dropped, and at most
:data:`MAX_CHANGES` state changes, :data:`MAX_RESTARTS` restarts and :data:`MAX_MARKS`
health marks are kept per server.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from .._util._printable import printable
from ..events._catalog import (
    ChildRestarted,
    ConfigReloaded,
    Event,
    HealthDown,
    HealthRecovered,
    HealthStale,
)
from ..monitor import CallWindow
from ..monitor._table import ago
from ..server._status import ServerStatus
from ..timeline._draw import (
    HEALTH_MARKS,
    OUTCOMES,
    STATES,
    Band,
    Layout,
    Mark,
    Point,
    Scale,
    Tick,
    draw_timeline,
    legend,
    seconds,
)
from ..timeline._element import Element

if TYPE_CHECKING:
    from ..runtime import SupervisorHandle

__all__ = ["HEALTH_EVENTS", "LAYOUT", "SAMPLE_INTERVAL", "STATUS_STATES", "WINDOW", "Strips"]

#: How far back a strip goes, in seconds.
WINDOW = 300.0
#: How often every server's status is looked at, besides when an event names it.
SAMPLE_INTERVAL = 1.0
#: Drawings this recent are reused (every open page's feed asks for them).
REUSE = 0.5
#: State changes and restarts kept per server, at most.
MAX_CHANGES = 1000
MAX_RESTARTS = 200
MAX_MARKS = 200

#: A strip's lanes: the states and a low latency plot.
LAYOUT = Layout(plot_height=52.0)

#: The state (a key of :data:`supervisor.timeline.STATES`) each status is drawn as.
STATUS_STATES: dict[str, str] = {  # by ServerStatus (a str: the plain string finds it too)
    ServerStatus.IDLE: "idle",
    ServerStatus.CONNECTING: "connecting",
    ServerStatus.REFRESHING: "connecting",
    ServerStatus.CONNECTED: "connected",
    ServerStatus.DEGRADED: "degraded",
    ServerStatus.UNVERIFIED: "unverified",
    ServerStatus.DISCONNECTED: "disconnected",
    ServerStatus.NEEDS_AUTH: "needs_auth",
    ServerStatus.FAILED: "failed",
    ServerStatus.AUTH_FAILED: "failed",
    ServerStatus.STOPPED: "stopped",
    ServerStatus.DISABLED: "idle",
}

#: What the legend shows: every state a strip can have, and the calls' outcome classes
#: (a call in flight is no point yet, so none is ``lost``).
LEGEND_STATES = tuple(state for state in STATES if state in STATUS_STATES.values())
LEGEND_KINDS = tuple(kind for kind in OUTCOMES if kind != "lost")

#: The health events marked on a strip, and the mark (a key of
#: :data:`supervisor.timeline.HEALTH_MARKS`) each is.
HEALTH_EVENTS: dict[type[Event], str] = {
    HealthStale: "stale",
    HealthDown: "down",
    HealthRecovered: "recovered",
}


def _mark_title(event: Event) -> str:
    """What a health mark's title says of its event (before when it was)."""
    if isinstance(event, HealthStale):
        return f"stale, degraded: {printable(event.reason or 'no answer')}"
    if isinstance(event, HealthDown):
        return f"found down by its {event.found_by}: {printable(event.reason)}"
    assert isinstance(event, HealthRecovered)
    return f"recovered after {event.downtime:.1f} s"


class Strips:
    """The strips of *sup*'s servers, from what the dashboard has seen (module docstring);
    *calls* is the dashboard's call window, *clock* gives unix time."""

    def __init__(
        self,
        sup: SupervisorHandle,
        calls: CallWindow,
        *,
        window: float = WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sup = sup
        self._calls = calls
        self.window = window
        self._clock = clock
        self._began = clock()
        self._changes: dict[str, deque[tuple[float, str]]] = {}
        self._restarts: dict[str, deque[tuple[float, str]]] = {}
        self._marks: dict[str, deque[Mark]] = {}
        # the last drawings: when, after how many state changes, and them
        self._drawn: tuple[float, int, dict[str, Element]] | None = None
        self._changed = 0  # state changes seen so far
        self.sample()

    # -- what is seen --------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """An event from the bus: a restart is a tick, a health event a mark; the status
        of the server an event names is looked at."""
        if isinstance(event, ChildRestarted):
            ticks = self._restarts.setdefault(event.child, deque(maxlen=MAX_RESTARTS))
            ticks.append((event.ts, f"restart {event.restarts} ({event.strategy}): {event.reason}"))
        kind = HEALTH_EVENTS.get(type(event))
        # the isinstance holds whenever kind is found: it tells the type checker the event type
        if kind is not None and isinstance(event, (HealthStale, HealthDown, HealthRecovered)):
            server: str = event.server
            marks = self._marks.setdefault(server, deque(maxlen=MAX_MARKS))
            marks.append(Mark(event.ts, kind, _mark_title(event)))
        if isinstance(event, ConfigReloaded):
            for how, names in (
                ("added", event.added),
                ("replaced", event.replaced),
                ("changed in place", event.changed),
            ):
                for name in names:
                    marks = self._marks.setdefault(name, deque(maxlen=MAX_MARKS))
                    marks.append(Mark(event.ts, "reloaded", f"config reloaded: {how}"))
                    if (view := self._sup.servers.get(name)) is not None:
                        self._note(name, view.status(), event.ts)
        name = getattr(event, "server", None) or getattr(event, "child", None)
        view = self._sup.servers.get(name) if isinstance(name, str) else None
        if view is not None:
            self._note(view.name, view.status(), event.ts)

    def sample(self) -> None:
        """Every configured server's status, as of now."""
        now = self._clock()
        views = self._sup.servers
        for name in self._sup.config.servers:
            view = views.get(name)
            self._note(name, ServerStatus.DISABLED if view is None else view.status(), now)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample every :data:`SAMPLE_INTERVAL` seconds, until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(SAMPLE_INTERVAL)
            self.sample()

    def _note(self, name: str, status: str, at: float) -> None:
        state = STATUS_STATES.get(status, "idle")
        changes = self._changes.get(name)
        if changes is None:
            changes = self._changes[name] = deque(maxlen=MAX_CHANGES)
        if changes:
            last_at, last = changes[-1]
            if last == state:
                return
            at = max(at, last_at)
        changes.append((at, state))
        self._changed += 1
        # The change that began the window's first band stays; those before it go.
        horizon = at - self.window
        while len(changes) > 1 and changes[1][0] <= horizon:
            changes.popleft()

    # -- drawing -------------------------------------------------------------------------

    def draw(self) -> dict[str, Element]:
        """Every configured server's strip as of now (each status looked at first), by
        name, in config order; the same drawings for :data:`REUSE` seconds, unless a
        status changed meanwhile (a dashboard's pages share the work)."""
        self.sample()
        now = self._clock()
        drawn = self._drawn
        if drawn is not None and now - drawn[0] < REUSE and drawn[1] == self._changed:
            return drawn[2]
        start = min(max(now - self.window, self._began), now - 1.0)
        names = list(self._sup.config.servers)
        calls = {name: self._calls.calls(name, start) for name in names}
        latencies = [c.latency for found in calls.values() for c in found]
        scale = Scale(start, now, latencies, LAYOUT)
        ticks = _ticks(now - start, now)

        def when(t: float) -> str:
            return ago(t, now)

        strips = {}
        for name in names:
            points = []
            for c in calls[name]:
                said = f"{OUTCOMES[c.kind][1]}: {c.error}" if c.error else OUTCOMES[c.kind][1]
                title = f"{c.tool} — {said}, {seconds(c.latency)}, {ago(c.at, now)}"
                points.append(Point(c.at, c.latency, c.kind, title))
            restarts = [
                Tick(t, f"{title}, {ago(t, now)}")
                for t, title in self._restarts.get(name, ())
                if t >= start
            ]
            marks = [
                Mark(t, kind, f"{title}, {ago(t, now)}")
                for t, kind, title in self._marks.get(name, ())
                if t >= start
            ]
            strips[name] = draw_timeline(
                name,
                scale,
                ticks=ticks,
                bands=self._bands(name, start, now),
                when=when,
                restarts=restarts,
                calls=points,
                marks=marks,
            )
        self._drawn = (now, self._changed, strips)
        return strips

    def _bands(self, name: str, start: float, end: float) -> list[Band]:
        changes = list(self._changes.get(name, ()))
        bands = []
        for index, (at, state) in enumerate(changes):
            until = changes[index + 1][0] if index + 1 < len(changes) else end
            if until > start:
                bands.append(Band(max(at, start), until, state))
        return bands

    @staticmethod
    def legend() -> Element:
        """The key to the strips' colours."""
        return legend(LEGEND_STATES, LEGEND_KINDS, marks=HEALTH_MARKS)


#: The steps of a strip's time grid, in seconds: the first that makes at most 8 of them.
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)


def _ticks(span: float, now: float) -> list[tuple[float, str]]:
    """The time grid of a strip spanning *span* seconds up to *now*: ``(time, label)``,
    labelled back from ``now`` (``-30 s``, ``-2 min``)."""
    step = next((s for s in _STEPS if span / s <= 8), _STEPS[-1])
    ticks = []
    for k in range(int(span / step + 1e-9), -1, -1):
        back = k * step
        label = "now" if not back else f"-{back} s" if back < 60 else f"-{back / 60:g} min"
        ticks.append((now - back, label))
    return ticks
