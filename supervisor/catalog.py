"""The live catalog: the registry's merged view, kept current as servers come and go.

Names are given from every server's last known tool list, in config order — so a server
that restarts keeps its names, and a call to one of its tools waits for it rather than
failing to resolve. What is *offered* is the part of that catalog whose servers are
connected: a server that goes down withdraws its tools until it is back. Every time that
may have changed — a server connected, listed new tools, went down or was stopped — the
difference is published: ``tools.deregistered``, ``tools.registered``, ``tools.updated``
(merged names, by server), then a ``tools.conflict`` for each new name clash. Config
order settles clashes, so an earlier server connecting for the first time after a later
one takes the clashing names from it (the later one's are then re-registered with a
suffix); distinct prefixes avoid clashes altogether.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import events
from .log import get_logger
from .registry import Catalog, NamingPolicy, diff, merge
from .server import ManagedServer, ServerStatus

log = get_logger("supervisor.catalog")


class LiveCatalog:
    """The merged catalog of ``servers`` (in config order), republished on change."""

    def __init__(
        self,
        servers: Sequence[ManagedServer],
        *,
        publish: Callable[[events.Event], None],
        policy: NamingPolicy | None = None,
        builtins: frozenset[str] = frozenset(),
    ) -> None:
        self._servers = list(servers)
        self._publish = publish
        self._policy = policy or NamingPolicy()
        self._builtins = builtins
        self._named = self._catalog = merge([], self._policy, builtins)
        for server in self._servers:
            server.on_change = self.refresh

    @property
    def current(self) -> Catalog:
        """What is on offer now: the tools of the connected servers."""
        return self._catalog

    @property
    def named(self) -> Catalog:
        """Every known tool, connected or not, under the name it has (or will have)."""
        return self._named

    def refresh(self) -> None:
        """Merge again and publish what changed."""
        known = [(s.name, s.config.prefix, s.tools) for s in self._servers]
        self._named = merge(known, self._policy, self._builtins)
        up = {s.name for s in self._servers if s.status() is ServerStatus.CONNECTED}
        new = self._named.only(up)
        old, self._catalog = self._catalog, new
        for event in diff(old, new).events():
            self._publish(event)
        known = {(c.name, c.servers) for c in old.conflicts}
        for conflict in new.conflicts:
            if (conflict.name, conflict.servers) not in known:
                log.warning("tool name conflict", name=conflict.name, servers=conflict.servers)
                self._publish(conflict.event())


__all__ = ["LiveCatalog"]
