"""What a token broker says of itself: its state, its last error, and the events and the
warning that tell of them.

A broker's state is read by its servers (``needs_auth``, ``refreshing``…) and by
``auth status``; each change sets :attr:`Status.changed` (replaced by a fresh event), for
whoever waits on it. Its events (``mcp.auth.*``) name each server that shares the broker;
a per-user broker's name its user too, and a team gateway sends them to that caller
alone. A refusal by the authorization server is said once, as an ``auth_failed`` state,
an ``mcp.auth.failed`` event and a warning; a login it needs is a state, not a failure.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Sequence

import attrs
import msgspec
import trio

from ..errors import AuthProblem
from ..events import _catalog as events
from ..log import get_logger

__all__ = ["BrokerInfo", "BrokerState", "Status"]

log = get_logger("supervisor.auth")


#: What a broker is doing: ``unknown`` before the first token is needed, ``ok`` holding
#: one, ``refreshing`` / ``authorizing`` while it gets one, ``needs_auth`` waiting for a
#: login, ``auth_failed`` after the authorization server refused.
class BrokerState(enum.StrEnum):
    UNKNOWN = "unknown"
    OK = "ok"
    REFRESHING = "refreshing"
    AUTHORIZING = "authorizing"
    NEEDS_AUTH = "needs_auth"
    AUTH_FAILED = "auth_failed"


@attrs.frozen
class BrokerInfo:
    """What ``auth status`` shows of one broker: never a token."""

    resource: str
    account: str
    grant: str
    state: str
    issuer: str | None
    scopes: tuple[str, ...]
    expires_at: float | None
    has_refresh_token: bool
    error: str | None
    servers: tuple[str, ...]
    token_file: str


class Status:
    """The state of the broker that ``servers`` share, said through ``publish``.

    ``hint`` is what to tell someone whose server needs a login (default: to run
    ``mcp-supervisor auth login``). ``user``: a per-user broker's subject — its events
    name that user, and a login it needs is said afresh each time (with a new link), not
    kept as its :attr:`error`."""

    __slots__ = ("_publish", "changed", "error", "hint", "servers", "state", "user")

    def __init__(
        self,
        servers: Sequence[str],
        publish: Callable[[events.Event], None] = lambda event: None,
        *,
        hint: str | None = None,
        user: str | None = None,
    ) -> None:
        self.servers = tuple(servers)
        self._publish = publish
        name = self.servers[0]
        self.hint = hint or (
            f"MCP server {name!r} needs an OAuth login: run `mcp-supervisor auth login {name}`"
        )
        self.user = user
        self.state = BrokerState.UNKNOWN
        #: why it is ``auth_failed`` (or ``needs_auth``): said to a person, never a secret
        self.error: str | None = None
        #: set (and replaced by a fresh one) at each change of :attr:`state`
        self.changed = trio.Event()

    def set(self, state: BrokerState) -> None:
        """Be in ``state`` now, and wake whoever waits for a change."""
        self.state = state
        self.changed.set()
        self.changed = trio.Event()

    def problem(self, exc: AuthProblem) -> None:
        """A token could not be had: ``needs_auth`` for a login, else ``auth_failed``
        (an event and a warning saying why)."""
        if exc.needs_login:
            self.error = None if self.user is not None else str(exc)
            self.set(BrokerState.NEEDS_AUTH)
            return
        self.error = str(exc)
        self.set(BrokerState.AUTH_FAILED)
        self.emit(lambda s: events.AuthFailed(server=s, error=str(exc)))
        log.warning("OAuth authorization failed", servers=list(self.servers), error=str(exc))

    def emit(self, make: Callable[[str], events.Event]) -> None:
        """Publish the event ``make`` makes for each server (naming the user, if any)."""
        user = self.user
        for server in self.servers:
            with contextlib.suppress(Exception):
                event = make(server)
                self._publish(event if user is None else msgspec.structs.replace(event, user=user))
