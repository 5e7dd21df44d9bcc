"""What a gateway serves now: the backing servers and tools its options let through,
less the servers withdrawn from listings.

A gateway's ``tools`` (globs over merged tool names) and ``servers`` (backing server
names) narrow what it serves, for every caller (empty: everything). Of what is left, a
server whose status is in :data:`WITHDRAWN` (failed, stopped, waiting for a login) has
its tools, resources and prompts withdrawn; a restarting one keeps them. The catalog
made of that (:meth:`Served.catalog`) is kept until the registry's catalog or the
servers up change, its search index with it. A listing made while the servers make their
first connection waits for them (:meth:`Served.first_listing`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ..monitor._probes import DOWN
from ..server._tasks import EXTENSION_ID as TASKS
from ._apps import EXTENSION_ID as APPS

if TYPE_CHECKING:
    from ..registry import Catalog, Entry
    from ..runtime import SupervisorHandle

__all__ = ["FIRST_LISTING_WAIT", "WITHDRAWN", "Served"]

#: The statuses whose server's tools, resources and prompts are withdrawn from listings.
WITHDRAWN = DOWN
#: Seconds a listing made at start waits for the servers' first connections.
FIRST_LISTING_WAIT = 15.0


class Served:
    """What ``sup`` serves through one gateway now, narrowed by its ``tools`` globs and
    ``servers`` (empty: everything); ``relays`` says whether backing servers' requests
    (log messages among them) are passed on to clients."""

    __slots__ = ("_connected", "_globs", "_listing_deadline", "_only", "_served", "relays", "sup")

    def __init__(
        self,
        sup: SupervisorHandle,
        tools: Sequence[str] = (),
        servers: Collection[str] = (),
        *,
        relays: bool = False,
    ) -> None:
        self.sup = sup
        self.relays = relays
        self._globs = tuple(tools)
        self._only = frozenset(servers)
        self._served: tuple[Catalog, frozenset[str], Catalog] | None = None
        self._connected = trio.Event()
        #: When listings stop waiting for the first connections (trio's clock): set as
        #: they begin.
        self._listing_deadline: float | None = None

    def serves(self, server: str, name: str | None = None) -> bool:
        """Whether this gateway serves ``server`` (and its tool ``name``) at all."""
        if self._only and server not in self._only:
            return False
        if name is None or not self._globs:
            return True
        return any(fnmatch.fnmatchcase(name, glob) for glob in self._globs)

    def listed_server(self, name: str) -> str | None:
        """The server of the tool ``name`` in the catalog now (``None``: not listed)."""
        entry = self.sup.snapshot.named.get(name)
        return None if entry is None else entry.server

    def up(self) -> set[str]:
        """The served servers whose tools are listed now (a disabled one never started:
        it is not among the supervisor's servers)."""
        return {
            name
            for name, server in self.sup.servers.items()
            if server.status() not in WITHDRAWN and self.serves(name)
        }

    def catalog(self) -> Catalog:
        """The tools served now: every known tool of a server that is not withdrawn
        (restarting ones included), as narrowed by ``tools`` and ``servers`` — a
        :class:`~supervisor.registry.Catalog`, kept until the registry's catalog or the
        servers up change (its search index with it)."""
        named = self.sup.snapshot.named
        up = frozenset(self.up())
        served = self._served
        if served is not None and served[0] is named and served[1] == up:
            return served[2]
        where = (lambda e: self.serves(e.server, e.name)) if self._globs else None
        catalog = named.only(up, where)
        self._served = (named, up, catalog)
        return catalog

    def tools(self) -> list[Entry]:
        """The tools served now (:meth:`catalog`), in catalog order."""
        return list(self.catalog().values())

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of the served tool ``name``, for the SDK's check of a
        2026-07-28 call's ``Mcp-Param-*`` headers (without it the SDK would list every
        tool on every call to find it); ``None`` for a tool not served."""
        entry = self.sup.snapshot.named.get(name)
        if entry is None or not self.serves(entry.server, name):
            return None
        return entry.tool.input_schema

    def offered(self) -> set[str]:
        """The optional capabilities this gateway declares: ``logging`` (when it relays,
        to pass log messages on), ``completions``, resource ``subscribe``, MCP ``apps``
        (the ``io.modelcontextprotocol/ui`` extension) and ``tasks``
        (``io.modelcontextprotocol/tasks``), each when a served backing server declared
        it on its last connection — or has not connected yet, so nobody knows."""
        offered: set[str] = set()
        for name, server in self.sup.servers.items():
            if not self.serves(name):
                continue
            capabilities = server.capabilities
            if capabilities is None:
                unknown = {"completions", "subscribe", "apps", "tasks"}
                return unknown | {"logging"} if self.relays else unknown
            if capabilities.logging is not None and self.relays:
                offered.add("logging")
            if capabilities.completions is not None:
                offered.add("completions")
            if capabilities.resources is not None and capabilities.resources.subscribe:
                offered.add("subscribe")
            if APPS in (capabilities.extensions or {}):
                offered.add("apps")
            if TASKS in (capabilities.extensions or {}):
                offered.add("tasks")
        return offered

    def cache_hint(self, kind: str, servers: Collection[str]) -> dict[str, Any]:
        """``ttl_ms`` and ``cache_scope`` of a merged ``kind`` listing of ``servers``: the
        shortest of their lists' TTLs, ``public`` only when every one is (a list none
        contributes to: 0, private — it may fill at any moment)."""
        views = self.sup.servers
        hints = [views[name].cache_hint(kind) for name in servers if name in views]
        if not hints:
            return {"ttl_ms": 0, "cache_scope": "private"}
        public = all(scope == "public" for _, scope in hints)
        return {
            "ttl_ms": min(ttl for ttl, _ in hints),
            "cache_scope": "public" if public else "private",
        }

    async def connect_all(self) -> None:
        """Make the servers' first connections; listings stop waiting for them then, or
        :data:`FIRST_LISTING_WAIT` seconds from now, whichever comes first."""
        self._listing_deadline = trio.current_time() + FIRST_LISTING_WAIT
        try:
            await self.sup.connect_all()
        finally:
            self._connected.set()

    async def first_listing(self) -> None:
        """A listing made while the servers make their first connection waits for them,
        until :data:`FIRST_LISTING_WAIT` seconds after they began: a client that lists
        once at start, as many do, then sees every server that can be reached. Past that,
        a listing does not wait, though a server that keeps failing before its first
        connection (retried, not given up on) keeps the connections unfinished."""
        if self._connected.is_set():
            return
        until = self._listing_deadline
        if until is None:  # asked before the connections began
            until = trio.current_time() + FIRST_LISTING_WAIT
        with trio.move_on_at(until):
            await self._connected.wait()
