"""Backing servers' requests to their client — sampling, elicitation, roots — relayed to
the gateway's own client.

A backing server asks while one of its tools runs (or a prompt is got, a resource read):
the request goes to the gateway client whose request to that server is waiting (the most
recent one, when several are), if that client declared the capability — as a request,
to a session-based client; to a 2026-07-28 client (which takes no requests) in a round
of its tool call, held meanwhile (:mod:`._held`). On a team gateway the calls waiting
on a server may be different callers': the request is then relayed to none of them (it
could be another's question), and a backing server's log message to none of them either;
unsolicited log messages go to no team caller. A ``perUser`` server's session of one caller
(:mod:`supervisor.server._users`) asks that caller only: its requests go to that
caller's call waiting on the server (the most recent, when several are), and its log
messages to that call alone — never to another caller's, whatever else waits there. The
answer goes back to the backing server as it is; an elicitation answer is also checked
against the requested schema and given its defaults on the way, as for any elicitation
the supervisor answers. Without such a client the backing server gets the error a client
without the capability gives (``-32600``, "… not supported"), saying why.

The supervisor hands the backing servers' requests to :meth:`Relay.client_options`'s
callbacks: open the supervisor with them (``open_supervisor(config,
**relay.client_options())``) and give the same relay to the :class:`~._core.Gateway`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._sdk import request_connection
from .._util._deprecated import on_purpose
from ..log import get_logger
from ..server._options import per_server
from ._held import Held

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["LEVELS", "Relay", "connection_of"]

log = get_logger("supervisor.gateway")

_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
_ROOTS = types.ClientCapabilities(roots=types.RootsCapability())

#: The MCP log levels, least severe first (RFC 5424's, as the specification has them).
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_RANK = {level: rank for rank, level in enumerate(LEVELS)}


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The client's connection a request came on: the SDK makes a ``ServerSession`` per
    request around the one connection it keeps per client (not public: ``None`` if the
    SDK stops keeping it there)."""
    return request_connection(ctx.session)


class Relay:
    """Which gateway clients are waiting on calls, and the callbacks that ask them."""

    def __init__(self) -> None:
        #: (session, request id, server, connection, caller, held call) of each call
        #: waiting
        self._waiting: list[
            tuple[Any, types.RequestId | None, str | None, Any, str | None, Held[Any] | None]
        ] = []
        #: the connections of a team gateway's callers: no unsolicited log goes there
        self._callers: weakref.WeakSet[Any] = weakref.WeakSet()
        #: the log level each session-based client asked for (``logging/setLevel``), by
        #: its connection: the standalone channel its unsolicited log messages go on
        self._levels: weakref.WeakKeyDictionary[Any, types.LoggingLevel] = (
            weakref.WeakKeyDictionary()
        )

    def client_options(self) -> dict[str, object]:
        """The callbacks to open the supervisor with: ``sampling_callback``,
        ``elicitation_callback``, ``list_roots_callback`` and ``logging_callback`` (one
        per server, to say which server logged; and one per caller of a ``perUser``
        server, to ask that caller only)."""
        return {
            "sampling_callback": per_server(self._sampling_of, for_caller=self._sampling_of),
            "elicitation_callback": per_server(
                self._elicitation_of, for_caller=self._elicitation_of
            ),
            "list_roots_callback": per_server(self._roots_of, for_caller=self._roots_of),
            "logging_callback": per_server(self._logging_of, for_caller=self._logging_of),
        }

    def waiting(
        self,
        ctx: ServerRequestContext[Any, Any],
        server: str | None = None,
        caller: str | None = None,
        held: Held[Any] | None = None,
    ) -> AbstractContextManager[None]:
        """While the block runs, the client of ``ctx`` (a tool call, running on the
        backing server ``server`` if known; for a team gateway's ``caller``) may be asked,
        and hears that server's log. A 2026-07-28 client is asked through its ``held``
        call (:mod:`._held`), in rounds, if it has one."""
        connection = connection_of(ctx)
        if caller is not None and connection is not None:
            self._callers.add(connection)
        return _Waiting(
            self._waiting, (ctx.session, ctx.request_id, server, connection, caller, held)
        )

    def _on(
        self, server: str, caller: str | None = None
    ) -> list[tuple[Any, Any, Any, Any, Any, Any]] | None:
        """The calls waiting on ``server`` (or on a server not known), most recent last:
        ``caller``'s only, for their own session with it; else ``None`` when they are
        different team callers' (none may be told another's)."""
        found = [entry for entry in self._waiting if entry[2] in (server, None)]
        if caller is not None:
            return [entry for entry in found if entry[4] == caller]
        if len({entry[4] for entry in found}) > 1:
            return None
        return found

    # -- logging -----------------------------------------------------------------------

    def set_level(self, connection: Any, level: types.LoggingLevel) -> types.LoggingLevel:
        """The client of ``connection`` asked for log messages from ``level`` up; returns
        the level to ask of the backing servers: the most verbose any client wants."""
        self._levels[connection] = level
        return min(self._levels.values(), key=_RANK.__getitem__)

    def _logging_of(
        self, server: str, caller: str | None = None
    ) -> Callable[[types.LoggingMessageNotificationParams], Coroutine[Any, Any, None]]:
        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            await self.log(server, params, caller)

        return logged

    async def log(
        self,
        server: str,
        params: types.LoggingMessageNotificationParams,
        caller: str | None = None,
    ) -> None:
        """A backing server's log message, passed on with its logger named after it
        (``server`` or ``server/logger``): to the client whose call runs on that server
        (the most recent, when several do), else to every session-based client that
        asked for that level or a lower one — or, from ``caller``'s own session with
        it, to that caller's call alone. A client that asked for a higher level does
        not get it; one that cannot take it is skipped."""
        logger = server if not params.logger else f"{server}/{params.logger}"
        level, rank = params.level, _RANK.get(params.level, 0)
        waiting = self._on(server, caller)
        if waiting is None:
            return  # different callers' calls: it may be any one's
        for session, request_id, on, connection, _, _ in reversed(waiting):
            if on != server:
                continue
            asked = self._levels.get(connection)
            if asked is not None and rank < _RANK[asked]:
                return
            with suppress(Exception):  # best effort: a client gone is not our failure
                await on_purpose(  # the capability's deprecation (2026-07-28)
                    session.send_log_message,
                    level,
                    params.data,
                    logger,
                    related_request_id=request_id,
                )
            return
        if caller is not None:
            return  # from a caller's own session: theirs, and nobody else's
        for connection, asked in list(self._levels.items()):
            if rank < _RANK[asked] or connection in self._callers:
                continue
            with suppress(Exception):
                await on_purpose(connection.log, level, params.data, logger)

    def _client(
        self, capability: types.ClientCapabilities, waiting: list[Any]
    ) -> tuple[Any, Any, Held[Any] | None] | None:
        for session, request_id, _, _, _, held in reversed(waiting):
            if session.protocol_version in MODERN_PROTOCOL_VERSIONS and held is None:
                continue  # a 2026-07-28 client takes no requests; it answers rounds
            if session.check_client_capability(capability):
                return session, request_id, held
        return None

    async def _ask(
        self,
        server: str,
        request: types.InputRequest,
        result_type: type[Any],
        capability: types.ClientCapabilities,
        what: str,
        caller: str | None = None,
    ) -> Any:
        waiting = self._on(server, caller)
        if waiting is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{what} not supported now: calls of several of the mcp-supervisor "
                "gateway's callers are waiting on this server, and the question may not go "
                "to another caller than the one it is for",
            )
        found = self._client(capability, waiting)
        if found is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{what} not supported: no client of the mcp-supervisor gateway that "
                f"declared {what.lower()} is waiting on a call",
            )
        session, request_id, held = found
        if held is not None:  # asked of a 2026-07-28 caller in a round
            return await held.ask(request, result_type)
        try:
            return await session.send_request(
                request, result_type, metadata=ServerMessageMetadata(related_request_id=request_id)
            )
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # the client went away, or answered nonsense
            log.warning("the gateway's client did not answer", request=what, error=str(exc))
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the mcp-supervisor gateway's client did not answer: {exc}",
            )

    def _sampling_of(
        self, server: str, caller: str | None = None
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        async def sampling(context: object, params: types.CreateMessageRequestParams) -> Any:
            """``server``'s ``sampling/createMessage``, asked of the waiting client."""
            request = types.CreateMessageRequest(params=params)
            return await self._ask(
                server, request, types.CreateMessageResult, _SAMPLING, "Sampling", caller
            )

        return sampling

    def _elicitation_of(
        self, server: str, caller: str | None = None
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        async def elicitation(context: object, params: types.ElicitRequestParams) -> Any:
            """``server``'s ``elicitation/create``, asked of the waiting client."""
            request = types.ElicitRequest(params=params)
            return await self._ask(
                server, request, types.ElicitResult, _ELICITATION, "Elicitation", caller
            )

        return elicitation

    def _roots_of(
        self, server: str, caller: str | None = None
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        async def roots(context: object) -> Any:
            """``server``'s ``roots/list``, asked of the waiting client."""
            return await self._ask(
                server, types.ListRootsRequest(), types.ListRootsResult, _ROOTS, "Roots", caller
            )

        return roots


class _Waiting(AbstractContextManager[None]):
    """A call's ``entry`` in the relay's calls ``waiting`` while its block runs (a small
    class: entered for every call, where ``@contextmanager`` costs a generator)."""

    __slots__ = ("_entry", "_waiting")

    def __init__(self, waiting: list[Any], entry: tuple[Any, ...]) -> None:
        self._waiting = waiting
        self._entry = entry

    def __enter__(self) -> None:
        self._waiting.append(self._entry)

    def __exit__(self, *exc: object) -> None:
        self._waiting.remove(self._entry)
