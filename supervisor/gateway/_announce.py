"""The gateway's change notifications: every change of what it lists, announced.

Whenever the tree or the registry moves (a server fails, recovers, lists other tools;
a merge changes the resources or prompts), :meth:`Announcer.announce` compares what the
lists say now with what was last announced and tells every client which of them changed:
``notifications/tools/list_changed`` (and the resource and prompt ones) on each
handshake-era client's connection (kept by :meth:`Announcer.remember_connection`, a
middleware), and the same events on the ``subscriptions/listen`` streams of 2026-07-28
clients (:attr:`Announcer.subscriptions`). With tool search the tool list is the
meta-tools', which never changes: it is never announced.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import trio
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..log import get_logger
from ._relay import connection_of

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from ._served import Served

__all__ = ["NOTIFY_TIMEOUT", "Announcer"]

log = get_logger("supervisor.gateway")

#: Seconds one client gets to take a change notification before it is skipped.
NOTIFY_TIMEOUT = 5.0

_KINDS = ("tools", "resources", "prompts")
_SENDERS: Mapping[str, str] = {
    "tools": "send_tool_list_changed",
    "resources": "send_resource_list_changed",
    "prompts": "send_prompt_list_changed",
}
_EVENTS: Mapping[str, type[ToolsListChanged | ResourcesListChanged | PromptsListChanged]] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}


class Announcer:
    """Announces each change of what ``served`` lists to the gateway's clients (with
    ``tools_listed`` false, the tool list — the meta-tools' — never changes)."""

    __slots__ = ("_announced", "_connections", "served", "subscriptions", "tools_listed")

    def __init__(self, served: Served, *, tools_listed: bool = True) -> None:
        self.served = served
        self.tools_listed = tools_listed
        #: where 2026-07-28 clients' ``subscriptions/listen`` streams get their events
        self.subscriptions = InMemorySubscriptionBus()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._announced: tuple[object, object, object] | None = None

    def state(self) -> tuple[object, object, object]:
        """What the lists say now, to tell whether they changed (with tool search, the
        tool list is the meta-tools': it never changes)."""
        up = self.served.up()
        snapshot = self.served.sup.snapshot
        tools = (
            tuple((e.name, e.fingerprint) for e in self.served.tools()) if self.tools_listed else ()
        )
        resources = tuple(
            [(r.name, r.uri) for r in snapshot.resources if r.server in up]
            + [(t.name, t.uri_template) for t in snapshot.templates if t.server in up]
        )
        prompts = tuple((p.name, p.server) for p in snapshot.prompts if p.server in up)
        return tools, resources, prompts

    def start(self) -> None:
        """Take what the lists say now as announced: later changes are told."""
        self._announced = self.state()

    async def follow_lists(self) -> None:
        """Announce each merge of the registry that changed a list: a change of resources
        or prompts alone comes with no event."""
        sup = self.served.sup
        snapshot = sup.snapshot
        while True:
            snapshot = await sup.snapshot_after(snapshot)
            await self.announce()

    async def announce(self) -> None:
        """Tell every client which lists changed since the last announcement, if any."""
        state = self.state()
        before = self._announced
        self._announced = state
        if before is None or state == before:
            return
        pairs = zip(_KINDS, state, before, strict=True)
        changed = [kind for kind, now, then in pairs if now != then]
        log.info("gateway lists changed", lists=changed, tools=len(self.served.tools()))
        async with trio.open_nursery() as nursery:
            for connection in list(self._connections):
                nursery.start_soon(_notify, connection, changed)
        for kind in changed:
            await self.subscriptions.publish(_EVENTS[kind]())

    async def remember_connection(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Keep each handshake-era client's connection (its standalone channel: the GET
        stream over HTTP), to send it change notifications. The SDK makes a new
        ``ServerSession`` per request, around the one connection it keeps per client."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = connection_of(ctx)
            if connection is not None:
                self._connections.add(connection)
        return await call_next(ctx)


async def _notify(connection: Connection, changed: Sequence[str]) -> None:
    with trio.move_on_after(NOTIFY_TIMEOUT), suppress(Exception):
        for kind in changed:
            await getattr(connection, _SENDERS[kind])()
