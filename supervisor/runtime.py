"""The façade's engine: ``open_supervisor`` runs every configured server in one tree.

::

    async with open_supervisor("mcp.json") as sup:
        result = await sup.call("github_create_issue", {"title": "..."})
        async with sup.subscribe("mcp.*") as events:
            ...

Each enabled server becomes a supervised :class:`~supervisor.server.ManagedServer`
child of one root supervisor (``supervisor`` section: strategy, intensity). A server
whose config could not be completed (a missing ``${VAR}``) is kept out of the tree and
reported as failed with that error; the others run. Leaving the block stops every server
— in reverse order, gracefully, then by force — however the block is left.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import mcp_types as types
import trio

from .actors import AddressState, Supervisor, SupervisorError, open_tree
from .bus import Bus, Subscription
from .catalog import LiveCatalog
from .config import Config, load_config
from .errors import ToolArgumentsInvalid, UnknownServer, UnknownTool
from .log import get_logger
from .registry import Catalog, Entry
from .server import HealthRecord, Limits, ManagedServer
from .tools import validate_arguments

log = get_logger("supervisor.runtime")


class SupervisorHandle:
    """What ``open_supervisor`` yields: call tools, watch health, restart and stop servers.

    Tool names are ``<prefix>_<tool>`` (the prefix defaults to the server's name; an
    empty prefix means the bare tool name).
    """

    def __init__(
        self,
        config: Config,
        bus: Bus,
        tree: Supervisor,
        servers: Mapping[str, ManagedServer],
        catalog: LiveCatalog,
    ) -> None:
        self.config = config
        self.bus = bus
        self._tree = tree
        self._servers = dict(servers)
        self._catalog = catalog

    # -- servers -----------------------------------------------------------------------

    @property
    def servers(self) -> Mapping[str, ManagedServer]:
        return self._servers

    def server(self, name: str) -> ManagedServer:
        try:
            return self._servers[name]
        except KeyError:
            known = ", ".join(sorted(self._servers)) or "none"
            raise UnknownServer(f"no MCP server named {name!r} (configured: {known})") from None

    def status(self) -> dict[str, HealthRecord]:
        """Every server's health record, by name, in config order."""
        children = {c.id: c for c in self._tree.statistics().children}
        records = {}
        for name, server in self._servers.items():
            child = children.get(name)
            records[name] = server.record(
                stats_attempt=child.attempt if child else 0,
                next_restart_at=child.next_restart_at if child else None,
            )
        return records

    async def connect_all(self, timeout: float | None = None) -> None:
        """Connect every server that is not connected yet, concurrently; return once each
        is connected or has failed (or ``timeout`` passed). Errors are in ``status()``."""

        async def one(server: ManagedServer) -> None:
            limit = timeout
            if limit is None:
                limit = server.config.init_timeout + server.config.timeout
            try:
                await server.list_tools(timeout=limit)
            except SupervisorError as exc:
                log.debug("connect failed", server=server.name, error=str(exc))

        async with trio.open_nursery() as nursery:
            for server in self._servers.values():
                if server.error is None and server.address.state is AddressState.OPEN:
                    nursery.start_soon(one, server)

    async def restart(self, name: str) -> None:
        """Restart a server now, with a fresh attempt count: a failed or stopped one comes
        back; a running one is stopped gracefully first."""
        server = self.server(name)
        if server.error is not None:
            raise SupervisorError(f"MCP server {name!r} cannot start: {server.error}")
        if server.address.state is AddressState.OPEN:
            await self._tree.terminate_child(name)
        server.attempt = 0
        server.health.consecutive_failures = 0
        await self._tree.restart_child(name)

    async def stop(self, name: str) -> None:
        """Stop a server (gracefully, then by force); its calls fail fast until restarted."""
        self.server(name)
        await self._tree.terminate_child(name)

    # -- tools -------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The merged catalog of the connected servers' tools (see :mod:`supervisor.registry`)."""
        return self._catalog.current

    def search(self, query: str, limit: int = 10) -> list[Entry]:
        """The catalog's best matches for ``query`` (names and descriptions)."""
        return self._catalog.current.search(query, limit)

    def resolve(self, name: str) -> tuple[ManagedServer, str]:
        """The server and its own tool name for a merged tool name.

        The catalog answers for every server whose tools are known (clash suffixes
        included; one that is restarting keeps its names and the call waits for it); a
        server never connected yet (lazy) is found by its prefix.
        """
        entry = self._catalog.named.get(name)
        if entry is not None:
            return self._servers[entry.server], entry.original_name
        for server in self._servers.values():
            prefix = server.config.prefix
            full = f"{prefix}_" if prefix else ""
            if name.startswith(full) and server.tool(name[len(full) :]) is not None:
                return server, name[len(full) :]
        candidates = [
            s
            for s in self._servers.values()
            if s.config.prefix and name.startswith(s.config.prefix + "_")
        ]
        if candidates:
            server = max(candidates, key=lambda s: len(s.config.prefix))
            return server, name[len(server.config.prefix) + 1 :]
        unprefixed = [s for s in self._servers.values() if not s.config.prefix]
        if len(unprefixed) == 1:
            return unprefixed[0], name
        raise UnknownTool(
            f"no tool named {name!r}: tool names are <prefix>_<tool>, with prefixes "
            + ", ".join(repr(s.config.prefix) for s in self._servers.values() if s.config.prefix)
        )

    async def call(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CallToolResult:
        """Call a tool by its merged name; the server's request timeout applies by default.

        Raises :class:`~supervisor.server.ServerUnavailable` at once for a failed or
        stopped server, :class:`~supervisor.server.CallMayHaveTakenEffect` when the
        connection died during the call, :class:`~supervisor.server.ToolCallTimeout`,
        :class:`~supervisor.server.ServerRequestError` for an MCP error answer, and
        :class:`UnknownTool`, and :class:`~supervisor.errors.ToolArgumentsInvalid` (naming
        each wrong field) without sending when the arguments do not fit the tool's schema.
        A tool's own failure is a result with ``is_error`` set.
        """
        server, tool = self.resolve(name)
        listed = server.tool(tool)
        if listed is not None:  # arguments that cannot be right never reach the server
            try:
                validate_arguments(listed, arguments or {})
            except ToolArgumentsInvalid as exc:
                raise ToolArgumentsInvalid(name, exc.errors) from None  # the name called
        return await server.call_tool(tool, arguments, timeout)

    async def tools(self) -> dict[str, list[types.Tool]]:
        """Each server's tools by server name (connecting lazy servers to find out)."""
        await self.connect_all()
        return {name: list(server.tools) for name, server in self._servers.items()}

    # -- events ------------------------------------------------------------------------

    def subscribe(self, *patterns: str, buffer: int = 1024) -> Subscription:
        """Events whose kind matches a glob (``"mcp.*"``), as an async context manager
        yielding an async iterator; see :meth:`supervisor.bus.Bus.subscribe`."""
        return self.bus.subscribe(*patterns, buffer=buffer)


def _limits(config: Config) -> Limits:
    limits = config.settings.limits
    return Limits(
        max_tools=limits.max_tools_per_server,
        max_catalog_bytes=limits.max_catalog_bytes,
        max_message_bytes=limits.max_message_bytes,
    )


@asynccontextmanager
async def open_supervisor(
    config: Config | Mapping[str, object] | str | os.PathLike[str],
    *,
    bus: Bus | None = None,
    retry_idempotent: bool = False,
    **client_options: object,
) -> AsyncIterator[SupervisorHandle]:
    """Supervise every enabled server of ``config`` for the duration of the block.

    ``config`` is a :class:`~supervisor.config.Config`, a path, or a parsed mapping.
    ``client_options`` go to each server's SDK ``mcp.Client``: ``sampling_callback``,
    ``elicitation_callback``, ``list_roots_callback``, ``logging_callback``,
    ``message_handler``, ``client_info``; without a handler a server's request gets the
    proper MCP error. Servers connect lazily unless ``lazy: false``.

    A call in flight when its connection dies is never re-sent — it may have taken effect
    — unless ``retry_idempotent`` is set and the server annotates the tool read-only or
    idempotent: then the call is sent again once the server is back.
    """
    cfg = config if isinstance(config, Config) else load_config(config)
    bus = bus if bus is not None else Bus()
    limits = _limits(cfg)
    servers: dict[str, ManagedServer] = {}
    for name, server_config in cfg.servers.items():
        if server_config.disabled:
            continue
        servers[name] = ManagedServer(
            server_config,
            publish=bus.publish,
            client_options=client_options,
            limits=limits,
            error=server_config.error,
            ping_timeout=cfg.settings.ping_timeout,
            retry_idempotent=retry_idempotent,
        )
    catalog = LiveCatalog(list(servers.values()), publish=bus.publish)
    specs = [s.spec for s in servers.values() if s.error is None]
    settings = cfg.settings
    async with open_tree(
        specs,
        name="servers",
        strategy=settings.strategy,
        intensity=settings.intensity,
        notify=bus.notify,
    ) as tree:
        yield SupervisorHandle(cfg, bus, tree, servers, catalog)


__all__ = ["SupervisorHandle", "UnknownServer", "UnknownTool", "open_supervisor"]
