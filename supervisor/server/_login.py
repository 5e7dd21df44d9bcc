"""A connection that needs an OAuth login waits for one: a state of its own, not a crash.

When the authorization server wants a login (or refused one), the connection ends with
:data:`AuthError`; the incarnation does not crash — nothing is counted, no restart is
spent — but waits in ``needs_auth`` (or ``auth_failed``) until the server's token broker
has a new token: from a login started here when the embedder gave a redirect handler,
otherwise one made elsewhere (``handle.login``, ``mcp-supervisor auth login``). Meanwhile
the calls made fail fast with the server's auth error; then the next session starts.
"""

from __future__ import annotations

from typing import Any

import trio

from ..auth._broker import AuthProblem
from ..errors import AuthorizationFailed, AuthRequired
from ..events import _catalog as events
from ..log import get_logger
from ._link import Link

log = get_logger("supervisor.server")

#: The errors an OAuth problem ends a connection with.
AuthError = AuthRequired | AuthorizationFailed


class Login:
    """Holds one incarnation's connection, while it needs an OAuth login, until it has one."""

    __slots__ = ("link", "server", "state")

    def __init__(self, server: Any, state: Any, link: Link) -> None:
        # ``server`` is its ServerHandle and ``state`` its ServerState (not imported here:
        # they import the actor, which imports this)
        self.server = server
        self.state = state
        self.link = link

    def needed(self) -> bool:
        """Whether the connection ended for want of a login (or one was refused)."""
        return isinstance(getattr(self.link.transport, "failure", None), AuthError)

    def blocked(self, error: AuthError, connected: bool) -> None:
        """The connection needs a login, or the authorization server refused: a state of
        its own, not a crash (nothing is counted, no restart is spent)."""
        server = self.server
        link = self.link
        link.client = None
        problem = error.problem
        assert problem is not None  # made by auth_exception, which names it
        needs = problem.needs_login
        self.state.auth_blocked(problem, str(error))
        link.auth_blocked.set()
        link.ready.set()  # wakes whoever waits to connect: they fail fast now
        link.ready = trio.Event()  # set again by the next connection
        if connected:
            server.emit(events.Disconnected(server=server.name, reason=str(error), was_clean=False))
        if needs and server.broker is not None and server.broker.redirect is not None:
            log.info("needs an OAuth login: starting one", server=server.name)
        else:
            log.warning(
                "needs an OAuth login" if needs else "OAuth authorization failed",
                server=server.name,
                reason=str(error),
            )
        server.changed()

    async def wait(self) -> None:
        """Wait in ``needs_auth`` (or ``auth_failed``) until the broker has a new token:
        a login started here when the embedder gave a redirect handler, otherwise one
        made elsewhere (``handle.login``, ``mcp-supervisor auth login``)."""
        server = self.server
        broker = server.broker
        assert broker is not None
        rejected = broker.held.token
        problem = server.auth_problem
        if problem is not None and problem.needs_login and broker.redirect is not None:
            try:
                await broker.login()
            except AuthProblem as exc:
                self.state.auth_failed(exc)
                server.changed()
                await broker.wait_changed(rejected)
        else:
            await broker.wait_changed(rejected)
        self.state.logged_in()
        self.link.logged_in()  # that connection is gone; the next one is fresh
        server.changed()
