"""What a fault injector offers the transports: the core's side of fault injection.

A server whose config has a ``faults`` plan (docs/faults.md) injects its faults through
a :class:`Faults`, made for it — once, for its whole life — by the :class:`Injector` the
supervisor was opened with (``open_supervisor(injector=...)``). The injector is the
toolkit's (:class:`supervisor.faults.Injector`): the core knows only this interface, as
an ``httpx`` client knows a transport and not the mock it may be given. What each
transport asks of it:

- a stdio transport, a :class:`FaultLink` for its connection (:meth:`Faults.open_link`):
  every line, in either direction, is carried through it; what the link cannot do to the
  server by itself it asks of the transport's :class:`FaultTarget` (kill, stop, resume,
  close a stream);
- the Streamable HTTP client, a wrapper around its ``httpx2.AsyncBaseTransport``
  (:meth:`Faults.wrap_http`);
- an in-memory or WebSocket transport, a wrapper around the transport that yields its
  message streams (:meth:`Faults.wrap_streams`);
- a server's start, its ``slow_start`` delays (:meth:`Faults.decide_start`).

``handle.server(name).inject("kill")`` reaches the connection's link
(:attr:`Faults.link`); each fault injected is an :class:`Injected`, kept in order in
:attr:`Faults.log` (``handle.faults()``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

import msgspec

if TYPE_CHECKING:
    import httpx2
    import trio
    from mcp.shared.message import SessionMessage

    from .._sdk import TransportStreams
    from ..config._plan import Action, Plan
    from ..errors import TransportError

__all__ = ["FaultLink", "FaultTarget", "Faults", "Injected", "Injector", "Send"]

#: A way to send one message (one JSON-RPC message, without its newline).
Send = Callable[[bytes], Awaitable[None]]


class Injected(msgspec.Struct, frozen=True):
    """One fault injected: when, by which rule, into which message, what.

    ``t`` is seconds since the server's fault injection started; ``rule`` the rule's place
    in the plan (``-1``: injected by hand); ``action`` one of
    :data:`~supervisor.config._plan.ACTIONS`; ``method`` the message's JSON-RPC method (for
    a response, its request's); ``id`` its JSON-RPC id; ``tool`` the tool a ``tools/call``
    names; ``server`` the supervised server, when known; ``detail`` the action's
    parameters as drawn (``delay 130 ms``).
    """

    seq: int
    t: float
    rule: int
    action: str
    direction: str | None = None
    method: str | None = None
    id: int | str | None = None
    tool: str | None = None
    server: str | None = None
    detail: str = ""


class FaultTarget(Protocol):
    """What a link can do to the server it stands in front of."""

    def kill(self) -> None:
        """End the server as a crash would (SIGKILL to its process group)."""

    def stop(self) -> None:
        """Make the server stop answering (SIGSTOP to its process group)."""

    def resume(self) -> None:
        """Undo :meth:`stop` (SIGCONT)."""

    async def close(self, direction: str) -> None:
        """Close the stream messages travel ``direction`` on."""


class FaultLink(Protocol):
    """One connection's messages carried through the fault plan."""

    async def carry(self, direction: str, line: bytes, forward: Send, back: Send) -> None:
        """Carry one message ``direction`` (``to_server`` or ``to_client``): ``forward``
        sends it on, ``back`` answers where it came from."""

    def retire(self) -> None:
        """The connection is over: :meth:`Faults.link` no longer names this link."""

    async def inject(self, action: str) -> Injected:
        """Inject ``action`` now, outside the plan (``kill``, ``hang``, ``resume``,
        ``list_changed``); :class:`ValueError` for another."""
        ...


class Faults(Protocol):
    """One server's fault injection, across its restarts (a rule's ``nth`` counts over
    them all)."""

    @property
    def log(self) -> Sequence[Injected]:
        """Every fault injected so far, in order."""
        ...

    @property
    def link(self) -> FaultLink | None:
        """The link of the connection faults are injected into now, if any."""
        ...

    def start(self) -> None:
        """Start the injection's clock now (else: at the first message)."""

    def decide_start(self) -> Sequence[Action]:
        """The start-up actions (``slow_start``) for a server starting now, recorded."""
        ...

    def open_link(
        self, target: FaultTarget, nursery: trio.Nursery, *, to_client: Send | None = None
    ) -> FaultLink:
        """A link for a new connection, acting on ``target``; its timed work runs in
        ``nursery``; ``to_client`` sends the client a message of the link's own."""
        ...

    def wrap_http(self, transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        """``transport`` with the plan's faults injected into its exchanges."""
        ...

    def wrap_streams(
        self,
        transport: AbstractAsyncContextManager[TransportStreams],
        *,
        name: str,
        lost: Callable[[TransportError], None],
        parse: Callable[[bytes], SessionMessage | Exception] | None = None,
    ) -> AbstractAsyncContextManager[TransportStreams]:
        """``transport`` (one that yields message streams) with the plan's faults between
        it and the session; ``lost`` is told when a fault loses the connection, ``parse``
        makes a line for the session into its item (default: a JSON-RPC message, or the
        error that says it is not one)."""
        ...


class Injector(Protocol):
    """What ``open_supervisor(injector=...)`` takes: a maker of each server's
    :class:`Faults` from its plan."""

    def faults(
        self,
        plan: Plan,
        *,
        server: str | None = None,
        on_inject: Callable[[Injected], None] | None = None,
    ) -> Faults:
        """The fault injection of ``server`` under ``plan``; ``on_inject`` hears of each
        fault as it is injected."""
        ...
