"""Backing servers' requests to their client — sampling, elicitation, roots — relayed to
the gateway's own client.

A backing server asks while one of its tools runs: the request goes to the gateway
client whose call is waiting (the most recent one, when several are), if that client
declared the capability and its protocol lets a server ask (the session-based one: the
2026-07-28 protocol has no server-to-client requests). Its answer goes back to the
backing server as it is; an elicitation answer is also checked against the requested
schema and given its defaults on the way, as for any elicitation the supervisor answers.
Without such a client the backing server gets the error a client without the capability
gives (``-32600``, "… not supported"), saying why.

The supervisor hands the backing servers' requests to :meth:`Relay.client_options`'s
callbacks: open the supervisor with them (``open_supervisor(config,
**relay.client_options())``) and give the same relay to the :class:`~._core.Gateway`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..log import get_logger

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["Relay"]

log = get_logger("supervisor.gateway")

_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
_ROOTS = types.ClientCapabilities(roots=types.RootsCapability())


class Relay:
    """Which gateway clients are waiting on calls, and the callbacks that ask them."""

    def __init__(self) -> None:
        self._waiting: list[tuple[Any, types.RequestId | None]] = []

    def client_options(self) -> dict[str, object]:
        """The callbacks to open the supervisor with: ``sampling_callback``,
        ``elicitation_callback`` and ``list_roots_callback``."""
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
        }

    @contextmanager
    def waiting(self, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """While the block runs, the client of ``ctx`` (a tool call) may be asked."""
        entry = (ctx.session, ctx.request_id)
        self._waiting.append(entry)
        try:
            yield
        finally:
            self._waiting.remove(entry)

    def _client(self, capability: types.ClientCapabilities) -> tuple[Any, Any] | None:
        for session, request_id in reversed(self._waiting):
            if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                continue  # a 2026-07-28 client takes no requests from its server
            if session.check_client_capability(capability):
                return session, request_id
        return None

    async def _ask(
        self,
        request: types.ServerRequest,
        result_type: type[Any],
        capability: types.ClientCapabilities,
        what: str,
    ) -> Any:
        found = self._client(capability)
        if found is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{what} not supported: no client of the mcp-supervisor gateway that "
                f"declared {what.lower()} (with the session-based protocol) is waiting on a "
                "call",
            )
        session, request_id = found
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

    async def sampling(self, context: object, params: types.CreateMessageRequestParams) -> Any:
        """A backing server's ``sampling/createMessage``, asked of the waiting client."""
        request = types.CreateMessageRequest(params=params)
        return await self._ask(request, types.CreateMessageResult, _SAMPLING, "Sampling")

    async def elicitation(self, context: object, params: types.ElicitRequestParams) -> Any:
        """A backing server's ``elicitation/create``, asked of the waiting client."""
        request = types.ElicitRequest(params=params)
        return await self._ask(request, types.ElicitResult, _ELICITATION, "Elicitation")

    async def roots(self, context: object) -> Any:
        """A backing server's ``roots/list``, asked of the waiting client."""
        return await self._ask(types.ListRootsRequest(), types.ListRootsResult, _ROOTS, "Roots")
