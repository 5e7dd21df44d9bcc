"""Why a request to one server fails, said in that server's terms.

Errors are translated once, where they enter: what a transport's library or the
operating system raises becomes a :class:`~supervisor.errors.TransportError` in
:func:`supervisor.transports._errors.translate`; an MCP error the server answers, in the
actor that received it (:func:`~._refusals.refused`). What is left is said here: the
errors of the server's mailbox and incarnations (:mod:`supervisor.actors`: a deadline
passed, the server gave up, was stopped, or its incarnation died with the request)
become the :class:`~supervisor.errors.ServerError` they mean for this server, once
(:meth:`Failing.said`), as does its OAuth problem (:meth:`Failing.auth_exception`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import mcp_types as types
import trio

from .._util._plural import plural
from ..actors import ActorStopped, ActorUnavailable, CallTimeout, RequestAborted
from ..errors import (
    AuthorizationFailed,
    AuthRequired,
    CallMayHaveTakenEffect,
    RequestTimeout,
    ServerRequestError,
    ServerUnavailable,
    ToolCallTimeout,
)
from ._health import ServerStatus

if TYPE_CHECKING:
    from ..actors import Address
    from ..auth._broker import AuthProblem
    from ..config._model import ServerConfig
    from ._state import ServerState


class Handle(Protocol):
    """What saying a failure reads of the server's handle (not imported here: the handle
    imports this)."""

    name: str
    config: ServerConfig
    error: str | None
    retries: bool
    state: ServerState

    @property
    def address(self) -> Address: ...


class Failing:
    """Says what one server's mailbox and OAuth failures mean for its callers."""

    __slots__ = ("_server",)

    def __init__(self, server: Handle) -> None:
        self._server = server

    def check_available(self) -> None:
        """Raise the :class:`~supervisor.errors.ServerUnavailable` a call would fail with
        at once (misconfigured, failed, stopped); return if calls may be sent or wait."""
        server = self._server
        if server.error is not None:
            raise ServerUnavailable(
                f"MCP server {server.name!r} is not configured correctly: {server.error}",
                server=server.name,
            )
        if server.state.auth_problem is not None:
            raise self.auth_exception()
        try:
            server.address.check_open()
        except BaseException as exc:
            said = self.said(exc, "", 0.0)
            if said is exc:
                raise
            raise said from said.__cause__

    def said(
        self, exc: BaseException, what: str, limit: float, *, request: bool = False
    ) -> BaseException:
        """The server error that the actor error ``exc`` means, raised ``from`` its
        ``__cause__``; ``exc`` itself when it means none (it is said already, or is
        cancellation). ``what`` names the tool called — or, with ``request``, describes
        a read-only request (a resource read, a prompt), which times out with
        :class:`RequestTimeout` and was sent once more if its connection died (a second
        loss is a :class:`ServerRequestError`). ``limit`` is the request's timeout."""
        name = self._server.name
        said: BaseException
        if isinstance(exc, trio.TooSlowError | CallTimeout):
            if request:
                said = RequestTimeout(
                    f"MCP server {name!r} did not answer {what} within {limit} s",
                    server=name,
                    request=what,
                    timeout=limit,
                )
            else:
                said = ToolCallTimeout(
                    f"MCP server {name!r} did not answer tool {what!r} within {limit} s: it "
                    "may have taken effect (it may still be running there) and was not retried",
                    server=name,
                    tool=what,
                    timeout=limit,
                )
        elif isinstance(exc, RequestAborted):
            if request:
                said = ServerRequestError(
                    f"the connection to MCP server {name!r} died twice with {what} in "
                    "flight (it was sent again once); try again once it is back",
                    server=name,
                    code=types.CONNECTION_CLOSED,
                )
            else:
                said = CallMayHaveTakenEffect.during(name, what)
            said.__cause__ = exc.__cause__
        elif isinstance(exc, ActorUnavailable):
            said = self._gave_up(exc)
        elif isinstance(exc, ActorStopped):
            said = self._stopped()
        else:
            return exc
        return said

    def _gave_up(self, exc: ActorUnavailable) -> ServerUnavailable:
        """What calls fail with once the tree gave up on the server."""
        server = self._server
        name, health = server.name, server.state.health
        error = health.last_error or exc.last_error
        if health.retryable is False:
            said = (
                f"MCP server {name!r} failed, and retrying cannot help: {error}. "
                "Fix the cause, then "
            )
        elif exc.attempts == 0:  # its config allows no restart: none was tried
            said = (
                f"MCP server {name!r} failed and is not {self._no_restarts()}; "
                f"last error: {error}. Fix the cause, then "
            )
        else:  # its tries, as mcp.connecting counts them: the first and each restart
            said = (
                f"MCP server {name!r} is unavailable after "
                f"{plural(exc.attempts + 1, 'attempt')}; last error: {error}. Fix the cause, "
                "then "
            )
        return ServerUnavailable(
            f"{said}restart it (handle.restart({name!r}))",
            server=name,
            cli_message=f"{said}run the command again: each run starts its servers afresh",
        )

    def _stopped(self) -> ServerUnavailable:
        """What calls fail with while the server is stopped: withdrawn by a
        reconfiguration, failed (not restarted after it), or stopped."""
        server = self._server
        name, state = server.name, server.state
        health = state.health
        if state.withdrawn_why is not None:
            return ServerUnavailable(state.withdrawn_why, server=name)
        if health.status is not ServerStatus.FAILED:
            return ServerUnavailable(
                f"MCP server {name!r} is stopped; restart it to use it again", server=name
            )
        said = health.last_error or "unknown error"
        if not said.startswith(f"MCP server {name!r}"):
            said = f"MCP server {name!r} failed: {said}"
        if health.retryable is False:
            said += ". Retrying cannot help: fix the cause first"
            cli = said
        elif server.retries:  # a temporary server: it is not restarted after a crash
            said += f". Fix the cause, then restart it (handle.restart({name!r}))"
            cli = said
        else:
            said += ". It was tried once and is not retried"
            cli = (
                f"{said} by a one-shot command; a long-running supervisor "
                "(`mcp-supervisor serve`, `status --watch`) would retry it"
            )
            said += " (open_supervisor(retries=False))"
        return ServerUnavailable(said, server=name, cli_message=cli)

    def _no_restarts(self) -> str:
        """Why a failed server is not tried again: the config's words for it."""
        if self._server.config.type == "stdio":
            return "restarted: its config says restartOnCrash: false (or maxRestarts: 0)"
        return "reconnected: its config says reconnect: false (or maxAttempts: 0)"

    def auth_exception(
        self, problem: AuthProblem | None = None
    ) -> AuthRequired | AuthorizationFailed:
        """The error calls fail with while the server waits for a login (or was refused):
        for ``problem``, by default its own."""
        problem = problem or self._server.state.auth_problem
        assert problem is not None
        name = self._server.name
        if problem.needs_login:
            error: AuthRequired | AuthorizationFailed = AuthRequired(
                f"MCP server {name!r} needs an OAuth login: call handle.login({name!r}), or "
                f"run `mcp-supervisor auth login {name}`",
                server=name,
                cli_message=f"MCP server {name!r} needs an OAuth login: run "
                f"`mcp-supervisor auth login {name}`",
            )
        else:
            error = AuthorizationFailed(
                f"MCP server {name!r}: {problem}; after fixing it, log in again "
                f"(handle.login({name!r}) or `mcp-supervisor auth login {name}`)",
                server=name,
                cli_message=f"MCP server {name!r}: {problem}; after fixing it, run "
                f"`mcp-supervisor auth login {name}`",
                oauth_error=problem.oauth_error,
            )
        error.problem = problem
        return error
