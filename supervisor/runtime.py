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
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager

import mcp_types as types
import trio

from .actors import AddressState, Supervisor, SupervisorError, collapsing, open_tree
from .bus import Bus, Subscription
from .catalog import LiveCatalog
from .config import Config, load_config
from .errors import (
    ServerUnavailable,
    ToolArgumentsInvalid,
    ToolOutputInvalid,
    UnknownServer,
    UnknownTool,
)
from .log import configure_default_logging, get_logger, redacting
from .monitor import SessionSummary, summarize
from .registry import Catalog, Entry, NamingPolicy
from .resources import ResourcesMixin
from .server import HealthRecord, Limits, ManagedServer, ServerMetrics
from .tools import (
    ApprovalCallback,
    ApprovalReason,
    ApprovalRequest,
    SpillDirectory,
    ToolResult,
    approval_reason,
    check_approval,
    normalize_result,
    validate_arguments,
)

log = get_logger("supervisor.runtime")


class SupervisorHandle(ResourcesMixin):
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
        *,
        policy: NamingPolicy,
        approve: ApprovalCallback | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config
        self.bus = bus
        self._tree = tree
        self._servers = dict(servers)
        self._catalog = catalog
        self._policy = policy
        self._approve = approve
        self._spill_dir = spill_dir
        self._reasons: dict[tuple[str, str], tuple[types.Tool, ApprovalReason | None]] = {}
        self._opened_at = trio.current_time()
        self._summary: SessionSummary | None = None

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

    def metrics(self) -> dict[str, ServerMetrics]:
        """Every server's metrics, by name, in config order: uptime, downtime, reconnects,
        calls and latency since the supervisor opened (see docs/monitoring.md)."""
        return {name: server.metrics() for name, server in self._servers.items()}

    def summary(self) -> SessionSummary:
        """The session's summary: as of now while the block runs; once it has ended, as
        it was when it ended (before the servers were shut down)."""
        if self._summary is not None:
            return self._summary
        return summarize(self.metrics(), trio.current_time() - self._opened_at)

    def _end_session(self) -> None:
        """Freeze the summary and log it (the ``session summary`` line)."""
        if self._summary is not None:
            return
        try:
            summary = self._summary = self.summary()
        except Exception:  # never hide how the block ended
            log.exception("session summary failed")
            return
        log.info(
            "session summary",
            duration_s=round(summary.duration_s, 3),
            servers=len(summary.servers),
            connected=summary.connected,
            calls_ok=summary.calls_ok,
            calls_failed=summary.calls_failed,
            reconnects=summary.reconnects,
            restarts=summary.restarts,
            per_server={
                name: {
                    "status": m.status,
                    "uptime_s": round(m.uptime_s, 3),
                    "downtime_s": round(m.downtime_s, 3),
                    "reconnects": m.reconnects,
                    "calls_ok": m.calls_ok,
                    "calls_failed": m.calls_failed,
                    "p50_ms": None if m.latency_p50_ms is None else round(m.latency_p50_ms, 3),
                    "p99_ms": None if m.latency_p99_ms is None else round(m.latency_p99_ms, 3),
                }
                for name, m in summary.servers.items()
            },
        )

    async def connect_all(self, timeout: float | None = None) -> None:
        """Connect every server that is not connected yet, concurrently; return once each
        is connected or has failed (or ``timeout`` passed). Errors are in ``status()``."""

        async with trio.open_nursery() as nursery:
            for server in self._servers.values():
                nursery.start_soon(self._connect, server, timeout)

    async def _connect(self, server: ManagedServer, timeout: float | None) -> None:
        if server.error is not None or server.address.state is not AddressState.OPEN:
            return
        limit = timeout
        if limit is None:
            limit = server.config.init_timeout + server.config.timeout
        try:
            await server.list_tools(timeout=limit)
        except SupervisorError as exc:
            log.debug("connect failed", server=server.name, error=str(exc))

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
        server = self.server(name)
        await self._tree.terminate_child(name)
        server.health.mark_stopped(trio.current_time())  # also when it was down: not downtime

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
    ) -> ToolResult:
        """Call a tool by its merged name and return its normalised result.

        In order: the name is resolved (:class:`~supervisor.errors.UnknownTool`, naming
        close matches); a server not connected yet is connected first, to learn the tool's
        schema and annotations; the arguments are checked against the tool's
        ``inputSchema`` (:class:`~supervisor.errors.ToolArgumentsInvalid`, naming each
        wrong field); the server's approval policy is applied — the ``approve`` callback
        decides, and without one a call that needs approval fails closed
        (:class:`~supervisor.errors.ApprovalRequired`; a refusal is
        :class:`~supervisor.errors.ApprovalDenied`). Only then is the call sent, with the
        server's request timeout unless ``timeout`` is given.

        The result is a :class:`~supervisor.tools.ToolResult` (text joined, media and
        resources kept, large text spilled to a private file, ``structuredContent``
        checked against the ``outputSchema``: :class:`~supervisor.errors.ToolOutputInvalid`).
        A tool that reports failure raises :class:`~supervisor.errors.ToolError`, whose
        ``text`` is what it said. Failures of the server raise
        :class:`~supervisor.errors.ServerUnavailable` (failed or stopped: at once),
        :class:`~supervisor.errors.ToolCallTimeout`, or
        :class:`~supervisor.errors.CallMayHaveTakenEffect` (the connection died during the
        call, which is not re-sent), :class:`~supervisor.errors.ServerRequestError` (an MCP
        error answer).
        """
        arguments = {} if arguments is None else arguments
        server, original = self.resolve(name)
        listed = server.tool(original)
        if listed is None:
            server, original, listed = await self._learn(name, server, original, timeout)
        try:
            validate_arguments(listed, arguments)
        except ToolArgumentsInvalid as exc:
            raise ToolArgumentsInvalid(name, exc.errors) from None  # the name called
        reason = self._approval_reason(server, original, listed)
        if reason is not None:
            request = ApprovalRequest(
                server=server.name,
                tool=name,
                original_name=original,
                arguments=arguments,
                reason=reason,
            )
            await check_approval(True, self._approve, request)
        try:
            raw = await server.call_tool(original, arguments, timeout)
        except ToolOutputInvalid as exc:
            raise ToolOutputInvalid(name, exc.errors) from exc.__cause__
        # The SDK client has checked structuredContent against the outputSchema already.
        result = normalize_result(raw, tool=name, spill_dir=self._spill_dir)
        result.raise_for_error(server=server.name)
        return result

    async def _learn(
        self, name: str, server: ManagedServer, original: str, timeout: float | None
    ) -> tuple[ManagedServer, str, types.Tool]:
        """Connect ``server`` (never connected yet) and look ``name`` up in what it lists."""
        limit = timeout
        if limit is None:
            limit = server.config.init_timeout + server.config.timeout
        await self._connect(server, limit)
        server, original = self.resolve(name)
        listed = server.tool(original)
        if listed is not None:
            return server, original, listed
        if server.tools:  # it listed its tools, and this is not one of them
            raise self._catalog.named._unknown([name])
        server.check_available()  # failed, stopped or misconfigured: say so
        why = (
            f"did not list its tools within {limit} s; "
            f"last error: {server.health.last_error or 'none'}"
        )
        raise ServerUnavailable(
            f"MCP server {server.name!r} {why} (calling {name!r})", server=server.name
        )

    def _approval_reason(
        self, server: ManagedServer, original: str, tool: types.Tool
    ) -> ApprovalReason | None:
        # The policy is fixed per server and tool definition: decided once per tool
        # object the server listed (a new listing brings new objects).
        key = (server.name, original)
        cached = self._reasons.get(key)
        if cached is not None and cached[0] is tool:
            return cached[1]
        reason = approval_reason(server.config, tool, original)
        self._reasons[key] = (tool, reason)
        return reason

    async def tools(self) -> Catalog:
        """The merged catalog, once every server has connected or failed (lazy servers are
        connected to find out what they offer); see :attr:`catalog`."""
        await self.connect_all()
        return self._catalog.current

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
    approve: ApprovalCallback | None = None,
    builtins: Iterable[str] = (),
    spill_dir: str | os.PathLike[str] | None = None,
    retry_idempotent: bool = False,
    **client_options: object,
) -> AsyncIterator[SupervisorHandle]:
    """Supervise every enabled server of ``config`` for the duration of the block.

    ``config`` is a :class:`~supervisor.config.Config`, a path, or a parsed mapping.
    ``approve`` is the approval callback (:data:`supervisor.tools.ApprovalCallback`):
    it decides every call that the server's ``approve``/``autoApprove`` policy says needs
    approval; without it such calls fail closed. ``builtins`` are the names of the
    embedder's own tools: an MCP tool never takes one (it keeps a prefixed name, and a
    ``tools.conflict`` warning is published). Text results larger than the preview go to
    files in ``spill_dir`` (kept), by default in a private temporary directory made on the
    first spill and removed, files and all, when the block ends.
    ``client_options`` go to each server's SDK ``mcp.Client``: ``sampling_callback``,
    ``elicitation_callback``, ``list_roots_callback``, ``logging_callback``,
    ``message_handler``, ``client_info``; without a handler a server's request gets the
    proper MCP error. Servers connect lazily unless ``lazy: false``.

    A call in flight when its connection dies is never re-sent — it may have taken effect
    — unless ``retry_idempotent`` is set and the server annotates the tool read-only or
    idempotent: then the call is sent again once the server is back.

    When the block ends, the session's metrics are frozen — ``handle.summary()`` returns
    them from then on — and logged as one ``session summary`` info line, before the
    servers are shut down.
    """
    configure_default_logging()  # only if the application has not configured structlog
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
    policy = NamingPolicy(cfg.settings.tool_name_template, cfg.settings.tool_clash)
    catalog = LiveCatalog(
        list(servers.values()), publish=bus.publish, policy=policy, builtins=frozenset(builtins)
    )
    specs = [s.spec for s in servers.values() if s.error is None]
    settings = cfg.settings
    # The catalog's refresher outlives the tree, to publish what the tree's closing
    # changed. The nursery is ours: the block's own error comes out bare.
    # The config's secrets and the default spill directory belong to this session.
    with collapsing(), redacting(cfg.secrets()), SpillDirectory(spill_dir) as spill:
        async with trio.open_nursery() as background:
            await background.start(catalog.run)
            try:
                async with open_tree(
                    specs,
                    name="servers",
                    strategy=settings.strategy,
                    intensity=settings.intensity,
                    notify=bus.notify,
                ) as tree:
                    handle = SupervisorHandle(
                        cfg,
                        bus,
                        tree,
                        servers,
                        catalog,
                        policy=policy,
                        approve=approve,
                        spill_dir=spill,
                    )
                    try:
                        yield handle
                    finally:
                        handle._end_session()  # metrics as the block left them
            finally:
                background.cancel_scope.cancel()


__all__ = ["SupervisorHandle", "UnknownServer", "UnknownTool", "open_supervisor"]
