"""A supervised server's fault engine with its injection points: what the core's
transports are given (:class:`~supervisor.transports._faults.Faults`).

:class:`ServerFaults` is a :class:`~._engine.FaultEngine` that also opens a
:class:`~._link.Link` for a stdio connection, wraps the HTTP client's transport in a
:class:`~._http.FaultyHTTPTransport` and a message-level transport (in-memory,
WebSocket) in a :class:`~._session.FaultyTransport`. The
:class:`~supervisor.faults.Injector` a supervisor is opened with makes one per server
with a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from ._engine import FaultEngine
from ._http import FaultyHTTPTransport
from ._link import Link
from ._session import FaultyTransport

if TYPE_CHECKING:
    import httpx2
    import trio
    from mcp.shared.message import SessionMessage

    from ..._sdk import TransportStreams
    from ...errors import TransportError
    from ...transports._faults import FaultTarget, Send

__all__ = ["ServerFaults"]


class ServerFaults(FaultEngine):
    """A fault engine for one supervised server, across its restarts, with the
    injection points its transports ask for."""

    def open_link(
        self, target: FaultTarget, nursery: trio.Nursery, *, to_client: Send | None = None
    ) -> Link:
        """A link through this engine for a new connection to ``target`` (a stdio
        server's): the engine's ``link`` from now on."""
        return Link(self, target, nursery, to_client=to_client)

    def wrap_http(self, transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        """``transport`` with this engine's faults injected into its exchanges."""
        return FaultyHTTPTransport(transport, self)

    def wrap_streams(
        self,
        transport: AbstractAsyncContextManager[TransportStreams],
        *,
        name: str,
        lost: Callable[[TransportError], None],
        parse: Callable[[bytes], SessionMessage | Exception] | None = None,
    ) -> AbstractAsyncContextManager[TransportStreams]:
        """``transport`` with this engine's faults between it and the session."""
        return FaultyTransport(transport, self, name=name, parse=parse, lost=lost)
