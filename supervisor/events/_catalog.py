"""The event catalog: every event the supervisor publishes, in one place.

Events are frozen, keyword-only :class:`msgspec.Struct` values. Each carries its ``kind``
(the struct's tag, a dotted name subscribers filter on with globs such as ``mcp.*``) and
``ts`` (unix seconds at creation); events about one MCP server also carry ``server``.
Their JSON form is a flat object with ``kind`` and ``ts`` always present::

    {"kind": "mcp.connected", "ts": 1767225600.0, "server": "github",
     "tool_count": 12, "connect_time": 0.41}

The kinds, their classes and their fields (besides ``kind`` and ``ts``)::

    mcp.connecting               Connecting         server, attempt, max_attempts
    mcp.connected                Connected          server, tool_count, connect_time
    mcp.disconnected             Disconnected       server, reason, was_clean
    mcp.error                    ServerErrored      server, error, retry_in, attempt
    mcp.health.stale             HealthStale        server, last_ok, reason
    mcp.health.recovered         HealthRecovered    server, downtime
    mcp.health.down              HealthDown         server, reason, found_by, last_ok
    mcp.health.probe_changed     HealthProbeChanged server, method, reason
    mcp.local.spawned            LocalSpawned       server, pid
    mcp.local.crashed            LocalCrashed       server, exit_code, stderr_tail
    mcp.local.shutdown           LocalShutdown      server
    mcp.local.memory_exceeded    LocalMemoryExceeded server, rss, limit
    mcp.auth.started             AuthStarted        server, grant, user
    mcp.auth.completed           AuthCompleted      server, issuer, scopes, expires_at, user
    mcp.auth.failed              AuthFailed         server, error, user
    mcp.auth.refreshed           AuthRefreshed      server, expires_at, user
    mcp.resource.updated         ResourceUpdated    server, uri
    tools.registered             ToolsRegistered    server, names
    tools.deregistered           ToolsDeregistered  server, names
    tools.updated                ToolsUpdated       server, names
    tools.conflict               ToolsConflict      name, servers, builtin
    supervisor.child.restarted   ChildRestarted     supervisor, child, strategy, restarts, reason
    supervisor.child.gave_up     ChildGaveUp        supervisor, child, restarts, reason
    supervisor.escalated         Escalated          supervisor, child, restarts, reason
    bus.dropped                  BusDropped         count

Build events with their class (``Connected(server="github", tool_count=12,
connect_time=0.41)``) or by kind with :func:`make_event`; move them across a process
boundary with :func:`encode` / :func:`decode`. :data:`AnyEvent` is the union of every
concrete event type, for decoding events inside larger msgspec structures.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias, cast, get_args

import msgspec

from ..actors import GaveUp, Restarted
from ..actors._decisions import Decision

__all__ = [
    "EVENT_TYPES",
    "AnyEvent",
    "AuthCompleted",
    "AuthFailed",
    "AuthRefreshed",
    "AuthStarted",
    "BusDropped",
    "ChildGaveUp",
    "ChildRestarted",
    "ConfigRejected",
    "ConfigReloaded",
    "Connected",
    "Connecting",
    "Disconnected",
    "Escalated",
    "Event",
    "HealthDown",
    "HealthProbeChanged",
    "HealthRecovered",
    "HealthStale",
    "LocalCrashed",
    "LocalMemoryExceeded",
    "LocalShutdown",
    "LocalSpawned",
    "ResourceUpdated",
    "ServerErrored",
    "ServerEvent",
    "ToolsConflict",
    "ToolsDeregistered",
    "ToolsRegistered",
    "ToolsUpdated",
    "decode",
    "encode",
    "kind_of",
    "make_event",
    "to_builtins",
    "tree_event",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every event.

    Attributes:
      ts: When the event was created, in unix seconds (:func:`time.time`).
    """

    ts: float = msgspec.field(default_factory=time.time)

    @property
    def kind(self) -> str:
        """The event's dotted kind, e.g. ``"mcp.connected"`` (the struct tag)."""
        return kind_of(type(self))


def kind_of(cls: type[Event]) -> str:
    """The kind of ``cls``'s events (its struct tag): ``kind_of(Connected)`` is
    ``"mcp.connected"``. Code reading events as plain mappings compares with it."""
    return cast(str, cls.__struct_config__.tag)  # each event class is tagged with a str


class ServerEvent(Event, frozen=True, kw_only=True):
    """Base of the events about one MCP server.

    Attributes:
      server: The server's configured name.
    """

    server: str


# --- connection lifecycle ---------------------------------------------------------------


class Connecting(ServerEvent, frozen=True, tag="mcp.connecting", kw_only=True):
    """A connection attempt to ``server`` has begun. ``attempt`` counts the tries in a row
    from 1: the first connection (and the first after a restart on request) is 1, the try
    after *n* failures in a row *n* + 1 (the loss of a connection that stayed up
    ``stableAfter`` is failure 1 of a new row). ``max_attempts`` is the last try's number:
    the first plus the retries the server's config allows (1 when it is not restarted)."""

    attempt: int
    max_attempts: int


class Connected(ServerEvent, frozen=True, tag="mcp.connected", kw_only=True):
    """``server`` finished its MCP handshake; ``connect_time`` is in seconds."""

    tool_count: int
    connect_time: float


class Disconnected(ServerEvent, frozen=True, tag="mcp.disconnected", kw_only=True):
    """``server``'s connection ended; ``was_clean`` is true when we closed it on purpose."""

    reason: str
    was_clean: bool


class ServerErrored(ServerEvent, frozen=True, tag="mcp.error", kw_only=True):
    """A connection attempt or session of ``server`` failed.

    ``attempt`` is the number of failures in a row, this one included — the number of
    the try that failed, as :class:`Connecting` counts them; ``retry_in`` is the backoff
    in seconds before the next attempt, or ``None`` when no retry is scheduled (the
    server gave up or is not restarted).
    """

    error: str
    retry_in: float | None
    attempt: int


# --- health ---------------------------------------------------------------------------


class HealthStale(ServerEvent, frozen=True, tag="mcp.health.stale", kw_only=True):
    """``server`` is ``degraded``: a health probe went unanswered — or calls in a row
    timed out on its connection. It is probed again at once; ``reason`` says what
    happened (its health record too).

    ``last_ok`` is the unix time of its last successful communication, ``None`` if never.
    """

    last_ok: float | None
    reason: str | None = None


class HealthDown(ServerEvent, frozen=True, tag="mcp.health.down", kw_only=True):
    """Health watching found ``server``'s connection dead while nothing was being asked
    of it: ``found_by`` is ``watch`` (the connection held to its port closed, and the
    port refused a new one) or ``probe`` (two probes in a row went unanswered).
    ``reason`` says which; the connection is ended and reconnection starts (an
    ``mcp.disconnected`` follows). ``last_ok``: the unix time it was last heard from."""

    reason: str
    found_by: str
    last_ok: float | None


class HealthProbeChanged(ServerEvent, frozen=True, tag="mcp.health.probe_changed", kw_only=True):
    """``server`` does not answer ``ping`` (it said so, or let one go unanswered while
    answering another request): it is probed with ``method`` instead from now on, for
    as long as the supervisor runs. ``reason`` says what it did."""

    method: str
    reason: str


class HealthRecovered(ServerEvent, frozen=True, tag="mcp.health.recovered", kw_only=True):
    """``server`` answered again after being stale or degraded (then ``downtime`` is the
    time it was degraded), or connected again after an outage; in seconds, measured on
    trio's clock (exact under a mock clock)."""

    downtime: float


# --- local (stdio) servers ------------------------------------------------------------


class LocalSpawned(ServerEvent, frozen=True, tag="mcp.local.spawned", kw_only=True):
    """The subprocess of local ``server`` was started with process id ``pid``."""

    pid: int


class LocalCrashed(ServerEvent, frozen=True, tag="mcp.local.crashed", kw_only=True):
    """The subprocess of local ``server`` exited unexpectedly.

    ``exit_code`` is ``None`` when it is unknown; ``stderr_tail`` holds its last stderr
    lines, oldest first.
    """

    exit_code: int | None
    stderr_tail: list[str] = msgspec.field(default_factory=list)


class LocalShutdown(ServerEvent, frozen=True, tag="mcp.local.shutdown", kw_only=True):
    """The subprocess of local ``server`` was stopped on purpose."""


class LocalMemoryExceeded(ServerEvent, frozen=True, tag="mcp.local.memory_exceeded", kw_only=True):
    """The process family of local ``server`` used ``rss`` bytes of resident memory, over
    its ``resources.memory`` bound of ``limit`` bytes: it was killed (``mcp.local.crashed``
    follows), and is restarted under its restart policy."""

    rss: int
    limit: int


# --- OAuth ----------------------------------------------------------------------------


class AuthStarted(ServerEvent, frozen=True, tag="mcp.auth.started", kw_only=True):
    """A browser login for ``server`` has begun: the authorization URL was shown.
    ``grant`` is the OAuth grant (``authorization_code``). ``user``, on each ``mcp.auth.*``
    event: the team gateway's caller whose own login to a ``perUser`` server it is
    about (their subject); ``None`` for the server's own login."""

    grant: str = "authorization_code"
    user: str | None = None


class AuthCompleted(ServerEvent, frozen=True, tag="mcp.auth.completed", kw_only=True):
    """``server``'s OAuth authorization succeeded and its tokens were stored: granted by
    ``issuer`` (the authorization server) for ``scopes``, the access token expiring at
    ``expires_at`` (unix seconds; ``None``: not said). Never the tokens themselves."""

    issuer: str | None = None
    scopes: list[str] = msgspec.field(default_factory=list)
    expires_at: float | None = None
    user: str | None = None


class AuthRefreshed(ServerEvent, frozen=True, tag="mcp.auth.refreshed", kw_only=True):
    """``server``'s access token was renewed with its refresh token, without a login;
    the new one expires at ``expires_at`` (unix seconds; ``None``: not said)."""

    expires_at: float | None = None
    user: str | None = None


class AuthFailed(ServerEvent, frozen=True, tag="mcp.auth.failed", kw_only=True):
    """``server``'s OAuth flow failed; ``error`` says why."""

    error: str
    user: str | None = None


class ResourceUpdated(ServerEvent, frozen=True, tag="mcp.resource.updated", kw_only=True):
    """The resource ``uri`` of ``server``, subscribed to, changed: read it again."""

    uri: str


# --- tool catalog ---------------------------------------------------------------------


class ToolsRegistered(ServerEvent, frozen=True, tag="tools.registered", kw_only=True):
    """Tools of ``server`` entered the merged catalog under ``names``."""

    names: list[str]


class ToolsDeregistered(ServerEvent, frozen=True, tag="tools.deregistered", kw_only=True):
    """Tools of ``server`` left the merged catalog; ``names`` are their catalog names."""

    names: list[str]


class ToolsUpdated(ServerEvent, frozen=True, tag="tools.updated", kw_only=True):
    """Tools of ``server`` changed definition (e.g. after ``tools/list_changed``)."""

    names: list[str]


class ToolsConflict(Event, frozen=True, tag="tools.conflict", kw_only=True):
    """More than one server offers a tool called ``name``; ``servers`` lists them.

    ``builtin`` is true when ``name`` is an embedder's built-in tool (a warning: the MCP
    tool kept a prefixed name); ``servers`` then starts with ``"<built-in>"``. ``refused``
    is true under the ``error`` clash policy: the tools of every server after the first
    were left out of the catalog.
    """

    name: str
    servers: list[str]
    builtin: bool = False
    refused: bool = False


# --- supervision ----------------------------------------------------------------------


class ChildRestarted(Event, frozen=True, tag="supervisor.child.restarted", kw_only=True):
    """Supervisor ``supervisor`` restarted ``child`` under ``strategy``.

    One event per child started again, siblings restarted alongside included.
    ``restarts`` counts this child's restarts since it was added (or explicitly
    restarted); ``reason`` is how its previous incarnation exited (``shutdown`` for a
    sibling the strategy stopped).
    """

    supervisor: str
    child: str
    strategy: str
    restarts: int
    reason: str


class ChildGaveUp(Event, frozen=True, tag="supervisor.child.gave_up", kw_only=True):
    """``child`` exceeded its restart intensity and was marked unavailable.

    ``restarts`` is how many consecutive restarts were tried before giving up;
    ``reason`` is the exit that exceeded the intensity.
    """

    supervisor: str
    child: str
    restarts: int
    reason: str


class Escalated(Event, frozen=True, tag="supervisor.escalated", kw_only=True):
    """``child`` exceeded the restart intensity and ``supervisor`` failed to its parent.

    ``restarts`` is how many restarts the supervisor's intensity window held.
    """

    supervisor: str
    child: str
    restarts: int
    reason: str


class ConfigReloaded(Event, frozen=True, tag="supervisor.config.reloaded", kw_only=True):
    """A new config was applied to the running supervisor (``reconfigure``, a changed
    file under ``serve``, ``mcp-supervisor reload``): servers by name ``added``,
    ``removed``, ``replaced`` (a new incarnation took over) and ``changed`` in place, and
    the ``supervisor`` settings that take a restart to apply (``needs_restart``)."""

    added: list[str]
    removed: list[str]
    replaced: list[str]
    changed: list[str]
    needs_restart: list[str]


class ConfigRejected(Event, frozen=True, tag="supervisor.config.rejected", kw_only=True):
    """A new config was refused whole (it does not load, or cannot be applied live):
    nothing changed. ``errors`` are its field-path errors, as ``check`` prints them."""

    errors: list[str]


# --- the bus itself -------------------------------------------------------------------


class BusDropped(Event, frozen=True, tag="bus.dropped", kw_only=True):
    """This subscriber's buffer overflowed: ``count`` of its oldest events were dropped.

    Only the subscriber that lost events receives it, as its next event; ``count`` covers
    the losses since its previous notice.
    """

    count: int


AnyEvent: TypeAlias = (
    Connecting
    | Connected
    | Disconnected
    | ServerErrored
    | HealthStale
    | HealthRecovered
    | HealthDown
    | HealthProbeChanged
    | LocalSpawned
    | LocalCrashed
    | LocalShutdown
    | LocalMemoryExceeded
    | AuthStarted
    | AuthCompleted
    | AuthFailed
    | AuthRefreshed
    | ResourceUpdated
    | ToolsRegistered
    | ToolsDeregistered
    | ToolsUpdated
    | ToolsConflict
    | ChildRestarted
    | ChildGaveUp
    | Escalated
    | ConfigReloaded
    | ConfigRejected
    | BusDropped
)
"""Union of every concrete event type; a msgspec decoder picks the class by ``kind``."""

EVENT_TYPES: Mapping[str, type[Event]] = MappingProxyType(
    {kind_of(cls): cls for cls in get_args(AnyEvent)}
)
"""Every event class by its kind, in catalog order (read-only)."""


def tree_event(decision: Decision) -> Event | None:
    """The ``supervisor.*`` event a supervision tree's decision publishes, if any.

    A restart is announced when it happens (``supervisor.child.restarted``), a give-up
    when it is decided (``supervisor.child.gave_up``, or ``supervisor.escalated`` when the
    supervisor itself gave up). A scheduled restart or an exit that is not restarted
    publishes nothing here: the child's own events (``mcp.error``) say it.
    """
    if isinstance(decision, Restarted):
        return ChildRestarted(
            supervisor=decision.supervisor,
            child=decision.child,
            strategy=decision.strategy.value,
            restarts=decision.restarts,
            reason=decision.reason,
        )
    if isinstance(decision, GaveUp):
        cls = Escalated if decision.escalated else ChildGaveUp
        return cls(
            supervisor=decision.supervisor,
            child=decision.child,
            restarts=decision.restarts,
            reason=decision.reason,
        )
    return None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


def make_event(kind: str, /, **fields: object) -> Event:
    """Build the event of ``kind`` from its fields; ``ts`` defaults to now.

    Field values are not type-checked (construction is on the publishing hot path);
    :func:`decode` validates.

    Raises:
      ValueError: ``kind`` is not in the catalog.
      TypeError: a required field is missing or an unknown field was given.
    """
    try:
        cls = EVENT_TYPES[kind]
    except KeyError:
        raise ValueError(
            f"unknown event kind {kind!r}; known kinds: {', '.join(EVENT_TYPES)}"
        ) from None
    given: dict[str, Any] = fields  # not type-checked here (see above): decode() does
    try:
        return cls(**given)
    except TypeError as exc:
        raise TypeError(f"bad fields for event {kind!r}: {exc}") from None


def encode(event: Event) -> bytes:
    """Return ``event`` as one JSON object with ``kind`` and ``ts`` among its keys."""
    return _encoder.encode(event)


def decode(data: bytes | str) -> Event:
    """Parse one JSON event, choosing its class by ``kind`` and validating its fields.

    Raises:
      msgspec.ValidationError: unknown ``kind``, missing field or wrong type.
      msgspec.DecodeError: ``data`` is not JSON.
    """
    return _decoder.decode(data)


def to_builtins(event: Event) -> dict[str, object]:
    """Return ``event`` as a plain JSON-ready dict, ``kind`` and ``ts`` included."""
    result: dict[str, object] = msgspec.to_builtins(event)
    return result
