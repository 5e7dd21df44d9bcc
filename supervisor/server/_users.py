"""A ``perUser`` server's sessions, one per team-gateway caller, with their own tokens.

The server's own connection (its actor's: the catalog, health, every call made for no
particular caller) uses the server's own login. A call made for a caller
(``sup.call(..., caller=SUBJECT)``, what a team gateway does) goes on that caller's
session instead: a Streamable HTTP session whose requests carry the caller's own tokens
(:mod:`supervisor.auth._users`). A session is opened at the caller's first call, in the
incarnation's nursery (it ends with it), and closed after :data:`IDLE_SECONDS` without a
call, or to make room past :data:`MAX_SESSIONS`.

What the server asks while a call of the caller's runs (sampling, elicitation, roots) and
the log messages it sends go to the handlers the supervisor was opened with that are made
for that caller (:func:`~._options.per_server`'s ``for_caller``: a team gateway's relay
asks that caller's waiting call, never another's); a handler that cannot tell callers
apart is not given the session, and the server is told what a client without it says.

A call is sent once, as on the server's own connection: a request refused unseen (a
session the server forgot, a token it refused and the broker renewed) is sent again; a
caller who must log in first is told so before anything is sent
(:class:`~supervisor.errors.AuthRequired` with the login page's URL); a connection lost
with the call out is :class:`~supervisor.errors.CallMayHaveTakenEffect`.

A caller here is a subject alone, the string a call is made for: the subject of the
access token the team gateway took (its ``Caller``, in ``supervisor.gateway._resource``,
is where a caller is told from a token; nothing below the gateway derives one). The
same subject names the caller's own login to the server (:mod:`supervisor.auth._users`),
whose tokens the session's requests carry.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from ..actors._errors import collapse
from ..errors import (
    AuthorizationFailed,
    AuthProblem,
    AuthRequired,
    CallMayHaveTakenEffect,
    ConnectTimeout,
    ServerUnavailable,
    ToolCallTimeout,
)
from ..log import get_logger
from ..tools._request import Round
from ..tools._validate import invalid_output
from ..transports._open import open_transport
from ..transports._receipts import Receipt, connection_closed, delivery
from ..transports._remote import TransportLike
from ._elicitation import checked_elicitation
from ._link import first as _first
from ._messages import CallTool
from ._options import pinned, resolved
from ._refusals import refused
from ._refusals import session_expired as _session_expired
from ._wire import call as _call

__all__ = ["IDLE_SECONDS", "MAX_SESSIONS", "UserSessions"]

log = get_logger("supervisor.server")

#: A caller's session with no call for this long is closed (seconds).
IDLE_SECONDS = 300.0
#: Sessions one server keeps open at once; a new one past that closes the idle longest.
MAX_SESSIONS = 256


@attrs.define(eq=False)
class _Session:
    subject: str
    ready: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    client: Client | None = None
    transport: TransportLike | None = None
    error: BaseException | None = None
    last_used: float = 0.0
    in_flight: int = 0
    used: trio.Event = attrs.Factory(trio.Event)


class UserSessions:
    """The per-caller sessions of one ``perUser`` server (see the module doc)."""

    def __init__(self, server: Any, logins: Any) -> None:  # ServerHandle, UserLogins
        self.server = server
        self.logins = logins
        self._nursery: trio.Nursery | None = None
        self._sessions: dict[str, _Session] = {}

    def attach(self, nursery: trio.Nursery) -> None:
        """The server's incarnation started: sessions run in its nursery."""
        self._nursery = nursery

    def detach(self, nursery: trio.Nursery) -> None:
        """The incarnation of ``nursery`` ended: so do its sessions."""
        if self._nursery is not nursery:
            return
        self._nursery = None
        for session in self._sessions.values():
            session.scope.cancel()
        self._sessions.clear()

    def __len__(self) -> int:
        return len(self._sessions)

    async def call(
        self, subject: str, message: CallTool, limit: float
    ) -> types.CallToolResult | Round:
        """Send ``message`` on ``subject``'s session, within ``limit`` seconds."""
        name, tool = self.server.name, message.tool
        receipt: Receipt | None = None  # the last request's, once one is made
        with trio.move_on_after(limit):
            for attempt in range(2):
                session = await self._session(subject)
                client = session.client
                assert client is not None
                receipt = Receipt()
                if getattr(session.transport, "tracks_delivery", False):
                    receipt.delivered = False
                session.in_flight += 1
                token = delivery.set(receipt)
                try:
                    return await _call(client, message)
                except MCPError as exc:
                    if _session_expired(exc) and attempt == 0:
                        self._drop(session)  # refused unseen: a new session, once
                        receipt = None
                        continue
                    if not connection_closed(exc, receipt):
                        raise refused(name, tool, exc) from exc
                    self._drop(session)
                    if not receipt.withdraw():
                        raise CallMayHaveTakenEffect.during(name, tool) from exc
                    failure = getattr(session.transport, "failure", None)
                    if isinstance(failure, AuthRequired | AuthorizationFailed):
                        raise failure from None  # a login is needed first: nothing was sent
                    raise ServerUnavailable(
                        f"the connection to MCP server {name!r} for {subject!r} closed "
                        "before the call went out (nothing ran); try again",
                        server=name,
                    ) from exc
                except RuntimeError as exc:  # the SDK's check of the tool's output
                    invalid = invalid_output(message.called, exc, server=name)
                    if invalid is None:
                        raise
                    raise invalid from exc
                finally:
                    delivery.reset(token)
                    session.in_flight -= 1
                    session.last_used = trio.current_time()
                    session.used.set()
        if receipt is not None and not receipt.withdraw():  # out (or cannot be told)
            raise ToolCallTimeout(
                f"MCP server {name!r} did not answer tool {tool!r} within {limit} s: it may "
                "have taken effect (it may still be running there) and was not retried",
                server=name,
                tool=tool,
                timeout=limit,
            )
        raise ServerUnavailable(
            f"MCP server {name!r} could not be reached for {subject!r} within {limit} s "
            "(nothing was sent)",
            server=name,
        )

    # -- sessions ------------------------------------------------------------------------

    async def _session(self, subject: str) -> _Session:
        session = self._sessions.get(subject)
        if session is None or session.closed.is_set():
            session = self._open(subject)
        await session.ready.wait()
        if session.client is None:
            self._drop(session)
            error = session.error
            if isinstance(error, AuthRequired | AuthorizationFailed | ServerUnavailable):
                raise error
            raise ServerUnavailable(
                f"MCP server {self.server.name!r} could not be reached for {subject!r}: {error}",
                server=self.server.name,
            ) from error
        return session

    def _open(self, subject: str) -> _Session:
        nursery = self._nursery
        if nursery is None:
            raise ServerUnavailable(
                f"MCP server {self.server.name!r} is not running", server=self.server.name
            )
        if len(self._sessions) >= MAX_SESSIONS:
            idle = [s for s in self._sessions.values() if s.in_flight == 0]
            if not idle:
                raise ServerUnavailable(
                    f"MCP server {self.server.name!r} has {MAX_SESSIONS} users' calls in "
                    "flight; try again shortly",
                    server=self.server.name,
                )
            self._drop(min(idle, key=lambda s: s.last_used))
        session = self._sessions[subject] = _Session(subject, last_used=trio.current_time())
        nursery.start_soon(self._run, session)
        return session

    def _drop(self, session: _Session) -> None:
        session.scope.cancel()
        if self._sessions.get(session.subject) is session:
            del self._sessions[session.subject]

    def _auth_error(self, subject: str, problem: AuthProblem) -> AuthRequired | AuthorizationFailed:
        name = self.server.name
        if not problem.needs_login:
            return AuthorizationFailed(
                f"MCP server {name!r}: {subject!r}'s OAuth authorization failed: {problem}",
                server=name,
                oauth_error=problem.oauth_error,
            )
        if self.server.config.auth.per_user == "token_exchange":
            return AuthRequired(f"{problem} (nothing was sent)", server=name, user=subject)
        url = self.logins.login_url(name, subject)
        how = (
            f"open {url} in a browser to log in, then call again"
            if url is not None
            else "such logins are made through a team gateway's login page (serve --http "
            "with supervisor.gateway.auth)"
        )
        return AuthRequired(
            f"MCP server {name!r} is served per user and needs {subject!r}'s own OAuth "
            f"login (nothing was sent): {how}",
            server=name,
            user=subject,
            login_url=url,
        )

    def _options(self, subject: str) -> dict[str, Any]:
        """The client options of ``subject``'s session: the supervisor's, its handlers
        only those made for that caller (:func:`~._options.resolved`), an elicitation
        answer checked as on the server's own connection."""
        server = self.server
        options = pinned(
            resolved(server.client_options, server.name, caller=subject),
            getattr(server.config, "protocol", "auto"),
        )
        elicit: Any = options.get("elicitation_callback")
        if elicit is not None:
            options["elicitation_callback"] = checked_elicitation(elicit, self.server.name)
        return options

    async def _run(self, session: _Session) -> None:
        """Open ``session`` and keep it until it idles out, its connection closes, or it
        is dropped."""
        server, subject = self.server, session.subject
        config = server.config
        transport: Any = None
        try:
            with session.scope:
                broker = self.logins.broker(server.name, subject)
                transport = session.transport = open_transport(
                    config,
                    server.limits,
                    broker,
                    server.fault_engine,  # the server's fault plan, on its users' sessions too
                    sse=server.use_sse,
                    auth_error=lambda problem: self._auth_error(subject, problem),
                )
                deadline = trio.current_time() + config.init_timeout
                with trio.CancelScope(deadline=deadline) as handshake:
                    options = self._options(subject)
                    async with Client(transport, **options) as client:
                        handshake.deadline = math.inf
                        session.client = client
                        session.ready.set()
                        try:
                            await _serve_until_idle(session, transport)
                        finally:
                            session.client = None
                if handshake.cancelled_caught:
                    raise ConnectTimeout(
                        f"MCP server {server.name!r} did not complete the MCP handshake for "
                        f"{subject!r} within {config.init_timeout} s (initTimeout)",
                        server=server.name,
                    )
        except BaseException as exc:
            failure = getattr(transport, "failure", None)
            session.error = failure if failure is not None else collapse(exc)
            if not isinstance(exc, trio.Cancelled):
                log.info(
                    "a user's session ended",
                    server=server.name,
                    user=subject,
                    error=str(session.error),
                )
            if isinstance(exc, trio.Cancelled) and not session.scope.cancel_called:
                raise
        finally:
            session.closed.set()
            session.ready.set()
            if self._sessions.get(subject) is session:
                del self._sessions[subject]


async def _serve_until_idle(session: _Session, transport: Any) -> None:
    """Until the connection closes, or ``session`` idles :data:`IDLE_SECONDS` (no call in
    flight, none for that long)."""
    while not transport.closed.is_set():
        session.used = trio.Event()
        idle_at = session.last_used + IDLE_SECONDS
        with trio.move_on_at(idle_at if session.in_flight == 0 else math.inf):
            await _first(transport.closed.wait, session.used.wait)
        if session.in_flight == 0 and trio.current_time() >= session.last_used + IDLE_SECONDS:
            return
