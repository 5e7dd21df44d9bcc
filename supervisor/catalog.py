"""The live catalog: the registry's merged view, kept current as servers come and go.

Names are given from every server's last known tool list, in config order — so a server
that restarts keeps its names, and a call to one of its tools waits for it rather than
failing to resolve. What is *offered* is the part of that catalog whose servers are
connected: a server that goes down withdraws its tools until it is back. Config order
settles clashes, so an earlier server connecting for the first time after a later one takes
the clashing names from it (the later one's are then re-registered with a suffix); distinct
prefixes avoid clashes altogether. A name an embedder registered as a built-in is never
given to an MCP tool: that tool keeps a prefixed name and a ``tools.conflict`` warning
(``builtin`` set, ``servers`` starting with ``"<built-in>"``) is published and logged.

Refreshes are coalesced. A server whose tools on offer may have changed — it connected,
listed new tools, went down or was stopped — only marks the catalog out of date (its new
tool list is checked then and there, once: see :class:`~supervisor.registry.Listing`, and
its invalid tools are counted in its health record at once). The merge itself happens

* in :meth:`LiveCatalog.run`, the refresher task, one scheduling round after the first
  change of a burst: however many servers changed meanwhile, there is one merge; and
* on reading :attr:`~LiveCatalog.current` or :attr:`~LiveCatalog.named` while changes are
  pending, so a call made right after a server connected resolves its names at once.

Each refresh publishes the difference from the previous one: ``tools.deregistered``,
``tools.registered``, ``tools.updated`` (merged names, by server), then a
``tools.conflict`` for each new clash. Changes that cancel out within one refresh (a server
that dropped and came back with the same tools) publish nothing. Without a running
refresher (before :meth:`~LiveCatalog.run` starts and after it ends) every change is merged
and published at once, as it happens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

import attrs
import mcp_types as types
import trio

from . import events
from .log import get_logger
from .registry import Catalog, Listing, NamingPolicy, diff, merge
from .server import ManagedServer, ServerStatus

log = get_logger("supervisor.catalog")

#: Reasons logged per server when its list has invalid tools (the count is in its health).
_LOGGED_PROBLEMS = 5


@attrs.frozen
class CatalogStatistics:
    """What :meth:`LiveCatalog.statistics` reports."""

    #: merges done so far (each published one difference)
    refreshes: int
    #: changes reported and not merged yet
    pending: bool
    #: whether the refresher task is running
    running: bool
    #: tools on offer (of connected servers), as of the last refresh
    tools: int


class LiveCatalog:
    """The merged catalog of ``servers`` (in config order), republished on change.

    ``policy`` names the tools; ``builtins`` are names an MCP tool never gets.
    """

    def __init__(
        self,
        servers: Sequence[ManagedServer],
        *,
        publish: Callable[[events.Event], None],
        policy: NamingPolicy | None = None,
        builtins: Iterable[str] = frozenset(),
    ) -> None:
        self._servers = list(servers)
        self._publish = publish
        self._policy = policy or NamingPolicy()
        self._builtins = frozenset(builtins)
        # Per server: the tool list last seen and its checked Listing.
        self._listings: dict[str, tuple[Sequence[types.Tool], Listing]] = {}
        self._named = self._catalog = merge([], self._policy, self._builtins)
        self._pending = False
        self._wake: trio.Event | None = None  # while the refresher runs
        self._refreshes = 0
        for server in self._servers:
            server.on_change = functools.partial(self._changed, server)

    @property
    def current(self) -> Catalog:
        """What is on offer now: the tools of the connected servers."""
        self.sync()
        return self._catalog

    @property
    def named(self) -> Catalog:
        """Every known tool, connected or not, under the name it has (or will have)."""
        self.sync()
        return self._named

    def statistics(self) -> CatalogStatistics:
        """Refreshes so far, whether a change is pending, and the tools on offer."""
        return CatalogStatistics(
            refreshes=self._refreshes,
            pending=self._pending,
            running=self._wake is not None,
            tools=len(self._catalog),
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Merge and publish changes as they come, one merge per burst, until cancelled.

        Start it in the supervisor's nursery (``await nursery.start(catalog.run)``); it
        reports started at once. Changes still pending when it is cancelled are published
        on the way out; later ones are merged as they happen.
        """
        if self._wake is not None:
            raise RuntimeError("this live catalog's refresher is already running")
        self._wake = trio.Event()
        try:
            task_status.started()
            while True:
                if not self._pending:
                    await self._wake.wait()
                self._wake = trio.Event()
                # Let every task already runnable (the rest of the burst) report first.
                await trio.lowlevel.checkpoint()
                self.sync()
        finally:
            self._wake = None
            self.sync()

    def sync(self) -> None:
        """Merge and publish now if a change is pending; otherwise do nothing.

        A merge that fails (a bug: under the ``error`` clash policy the clashing tools
        are left out, not the merge) is logged and leaves the previous catalogs in place.
        """
        if self._pending:
            try:
                self.refresh()
            except Exception:
                log.exception("merging the tool catalog failed; keeping the previous one")

    def refresh(self) -> None:
        """Merge again and publish what changed; raises what :func:`merge` raises."""
        self._pending = False
        self._refreshes += 1
        known = [(s.name, s.config.prefix, self._listing(s)) for s in self._servers]
        self._named = merge(known, self._policy, self._builtins, refuse=True)
        up = {s.name for s in self._servers if s.status() is ServerStatus.CONNECTED}
        new = self._named.only(up)
        old, self._catalog = self._catalog, new
        for event in diff(old, new).events():
            self._publish(event)
        seen = {(c.name, c.servers, c.builtin, c.refused) for c in old.conflicts}
        for conflict in new.conflicts:
            if (conflict.name, conflict.servers, conflict.builtin, conflict.refused) in seen:
                continue
            if conflict.refused:
                log.error(
                    "tool name clash refused (clash policy 'error'): only the first "
                    "server's tool is offered; give the servers distinct prefixes",
                    name=conflict.name,
                    servers=conflict.servers,
                    builtin=conflict.builtin,
                )
            elif conflict.builtin:
                log.warning(
                    "tool name is a built-in's: the MCP tool keeps a prefixed name",
                    name=conflict.name,
                    servers=conflict.servers,
                )
            else:
                log.warning("tool name conflict", name=conflict.name, servers=conflict.servers)
            self._publish(conflict.event())

    def _changed(self, server: ManagedServer) -> None:
        """``server``'s tools on offer may differ: check a new list now, merge soon."""
        self._listing(server)
        self._pending = True
        if self._wake is None:
            self.sync()
        else:
            self._wake.set()

    def _listing(self, server: ManagedServer) -> Listing:
        """``server``'s tools, checked: once per list it sends."""
        tools = server.tools
        cached = self._listings.get(server.name)
        if cached is not None and cached[0] is tools:
            return cached[1]
        listing = Listing(tools)
        self._listings[server.name] = (tools, listing)
        if server.health.tool_count is not None:  # it listed them (the count is theirs)
            server.health.unsupported_tools = len(listing.problems)
        if listing.problems:
            log.warning(
                "invalid tools skipped",
                server=server.name,
                count=len(listing.problems),
                problems=list(listing.problems[:_LOGGED_PROBLEMS]),
            )
        return listing


__all__ = ["CatalogStatistics", "LiveCatalog"]
