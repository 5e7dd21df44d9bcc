"""One server's requests other than tool calls — resource reads, prompts, completions,
task requests and tool listings — sent through its mailbox, which waits while the server
connects or restarts.

They are read-only: one in flight when the connection dies is sent once more on the next
connection. A failed or stopped server fails them at once; the mailbox's errors are said
in terms of the request (:meth:`~._failing.Failing.said`). Text JSON cannot carry is
refused before anything is sent (:meth:`Reads.sendable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import mcp_types as types

from .._util._jsontext import unencodable
from ..errors import RequestUnencodable
from ..transports._encoding import caller_capabilities
from ._messages import Complete, GetPrompt, InputRound, ListTools, ReadResource, TaskRequest

if TYPE_CHECKING:
    from ..actors import Address
    from ..config._model import ServerConfig
    from ._failing import Failing
    from ._state import ServerState


class Handle(Protocol):
    """What sending a request reads of the server's handle (not imported here: the
    handle imports this)."""

    name: str
    config: ServerConfig
    error: str | None
    state: ServerState
    failing: Failing

    @property
    def address(self) -> Address: ...


class Reads:
    """Sends one server's requests that are not tool calls through its mailbox."""

    __slots__ = ("_server",)

    def __init__(self, server: Handle) -> None:
        self._server = server

    async def list_tools(self, timeout: float | None) -> list[types.Tool]:
        """Its tools, listed through the mailbox within ``timeout`` (default: its
        connection's and one request's timeouts)."""
        config = self._server.config
        limit = config.init_timeout + config.timeout if timeout is None else timeout
        return cast("list[types.Tool]", await self._server.address.call(ListTools(), limit))

    async def read_resource(
        self, uri: str, timeout: float | None, rounds: InputRound | None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """See :meth:`~supervisor.server._managed.ServerHandle.read_resource`."""
        self.sendable("resources/read", {"uri": uri})
        message = ReadResource(uri, rounds, capabilities=caller_capabilities.get())
        answer = await self._send(message, f"resource {uri!r}", timeout)
        return cast("types.ReadResourceResult | types.InputRequiredResult", answer)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None,
        timeout: float | None,
        rounds: InputRound | None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """See :meth:`~supervisor.server._managed.ServerHandle.get_prompt`."""
        message = GetPrompt(
            name,
            None if arguments is None else dict(arguments),
            rounds,
            capabilities=caller_capabilities.get(),
        )
        answer = await self._send(message, f"prompt {name!r}", timeout)
        return cast("types.GetPromptResult | types.InputRequiredResult", answer)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None,
        timeout: float | None,
    ) -> types.CompleteResult:
        """See :meth:`~supervisor.server._managed.ServerHandle.complete`."""
        message = Complete(ref, dict(argument), None if context is None else dict(context))
        return cast(types.CompleteResult, await self._send(message, "completion", timeout))

    async def task_request(
        self, method: str, params: Mapping[str, object], timeout: float | None
    ) -> dict[str, object]:
        """See :meth:`~supervisor.server._managed.ServerHandle.task_request`."""
        message = TaskRequest(method, dict(params))
        what = f"{method} of task {params.get('taskId')!r}"
        return cast("dict[str, object]", await self._send(message, what, timeout))

    def sendable(self, method: str, params: Mapping[str, object]) -> None:
        """Refuse a request whose ``params`` hold text JSON cannot carry (a lone
        surrogate) before it is made: every transport refuses to send it
        (:mod:`supervisor.transports._encoding`), but the SDK's client writes some of it
        into headers first (a read's URI in ``Mcp-Name``), and a subscription would be
        asked again of every connection."""
        errors = unencodable(params)
        if errors:
            raise RequestUnencodable(method, errors, server=self._server.name)

    async def _send(
        self,
        message: ReadResource | GetPrompt | Complete | TaskRequest,
        what: str,
        timeout: float | None,
    ) -> object:
        """Send ``message`` through the mailbox, saying actor errors in terms of ``what``."""
        server = self._server
        failing = server.failing
        if server.error is not None:
            failing.check_available()
        if server.state.auth_problem is not None:
            raise failing.auth_exception()
        limit = server.config.timeout if timeout is None else timeout
        try:
            return await server.address.call(message, limit)
        except BaseException as exc:
            said = failing.said(exc, what, limit, request=True)
            if said is exc:
                raise
            raise said from said.__cause__
