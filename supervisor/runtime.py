"""The façade's engine: ``open_supervisor`` runs every configured server in one tree.

::

    async with open_supervisor("mcp.json") as sup:
        result = await sup.call("github_create_issue", {"title": "..."})
        async with sup.subscribe("mcp.*") as events:
            ...

The tree it runs::

    root (one_for_one; stops its children in reverse order)
    ├── bus         the event bus's actor: fans events out to subscribers
    ├── registry    the registry's actor: merges what servers offer into the catalog
    └── servers     a supervisor with the config's strategy and intensity
        ├── <server>   one supervised actor per enabled server, in config order
        └── …

Each enabled server becomes a :class:`~supervisor.server._managed.ServerHandle` child of
``servers``. A server whose config could not be completed (a missing ``${VAR}``) is kept
out of the tree and reported as failed with that error; the others run. If ``servers``
gives up (its intensity, or a server with ``giveUp: escalate``), the whole supervisor does:
every server is stopped and :class:`~supervisor.actors.SupervisorGaveUp` is raised out of
the block. A crash of the bus or the registry restarts only that actor. Leaving the block
stops every server — concurrently, each gracefully then by force — then the registry and
the bus, however the block is left; then every subscription's iteration ends.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, overload

import mcp_types as types
import trio

from ._reload import Audits, Maker, reconfigure, with_faults, with_overrides
from .actors import (
    ChildSpec,
    GiveUp,
    Intensity,
    SupervisorError,
    SupervisorGaveUp,
    Tree,
    open_tree,
    supervisor_spec,
)
from .actors._mailbox import AddressState
from .actors._stats import SupervisorStatistics
from .auth._backends import TokenStore
from .auth._broker import AuthProblem, BrokerInfo, TokenBroker
from .auth._login import CallbackHandler, RedirectHandler
from .auth._service import AuthService
from .auth._store import AuthStore, LocalStore
from .calls._gate import Gate, ServerView, connect, returned
from .calls._resources import MergedPrompt, MergedResource, MergedResourceTemplate, Resources
from .config import Config, load_config
from .config._apps import with_apps
from .config._diff import ConfigChange
from .config._faults import require_injector
from .config._plan import Plan
from .errors import (
    ConfigError,
    FieldError,
    UnknownServer,
    UnknownTool,
)
from .events._bus import Bus, Subscription
from .log import RedactionScope, configure_default_logging, get_logger, redacting, redactor
from .monitor import CallWindow, SessionSummary
from .monitor._metrics import summarize
from .registry import Catalog, NamingPolicy, Summary
from .registry._live import Registry, RegistryStatistics, Snapshot
from .server import HealthRecord, ServerMetrics
from .server._hook import tree_hook
from .server._managed import ServerHandle, disabled_record
from .server._messages import InputRound, Progress
from .server._startup import StartSlots
from .tools import ApprovalCallback, ToolResult
from .tools._approval import ApprovalReason
from .tools._audit import AuditLog
from .tools._request import CallOutcome, ToolCall
from .tools._results import SpillDirectory
from .transports._children import subreaper
from .transports._faults import Injected, Injector

if TYPE_CHECKING:
    from .tools._observer import History as CallHistory

log = get_logger("supervisor.runtime")

#: A fault plan as ``open_supervisor(faults=...)`` takes it: a plan, a path to a JSON
#: plan, or the plan as a mapping or a list of rules.
PlanSource = Plan | str | os.PathLike[str] | Mapping[str, object] | list[object]


class SupervisorHandle:
    """What ``open_supervisor`` yields: call tools, watch health, restart and stop servers.

    Tool names are ``<prefix>_<tool>`` (the prefix defaults to the server's name; an
    empty prefix means the bare tool name).
    """

    def __init__(
        self,
        config: Config,
        bus: Bus,
        root: Tree,
        servers: dict[str, ServerHandle],
        registry: Registry,
        *,
        maker: Maker,
        approve: ApprovalCallback | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        history: CallHistory | None = None,
        auth: AuthService | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        #: the running config (a reconfiguration replaces it)
        self.config = config
        self._auth = auth
        self.bus = bus
        self._root = root
        # The servers by name, in config order: the one dict the gate, the resources
        # and the tree's decisions read, which a reconfiguration changes in place.
        self._servers = servers
        self._maker = maker
        self._reconfiguring = trio.Lock()
        # Servers a reconfiguration took out, and why (see departed()).
        self._departed: dict[str, str] = {}
        self._registry = registry
        #: the call history every tool call is recorded in, if any
        self.history = history
        #: the audit log every tool call is written to, if the config asks for one
        self.audit = audit
        #: the approval callback it was opened with (``approve``), if any
        self.approver = approve
        self._gate = Gate(
            self._servers,
            registry,
            approve=approve,
            spill_dir=spill_dir,
            history=history,
            audit=audit,
        )
        self._resources = Resources(self._servers, registry, self.connect_all)
        self._views: dict[str, ServerView] = {}
        self._rebuild_views()
        self._opened_at = trio.current_time()
        self._summary: SessionSummary | None = None

    def _rebuild_views(self) -> None:
        old, gate = self._views, self._gate
        self._views = {
            name: old[name]
            if name in old and old[name]._server is server
            else ServerView(server, gate)
            for name, server in self._servers.items()
        }

    def departed(self, name: str) -> str | None:
        """Why server ``name`` is no longer served, if a reconfiguration took it out
        (removed from the config, or disabled); ``None`` otherwise."""
        return self._departed.get(name) if name not in self._servers else None

    # -- the config --------------------------------------------------------------------

    async def reconfigure(
        self, config: Config | Mapping[str, object] | str | os.PathLike[str] | None = None
    ) -> ConfigChange:
        """Take ``config`` (a path, a mapping or a :class:`~supervisor.config.Config`;
        by default the running config's own file, read again) in place of the running
        config, live, and return what changed
        (:class:`~supervisor.config._diff.ConfigChange`).

        Servers are compared by name: unchanged ones are not touched (connections,
        sessions, calls queued or in flight, restart counts); added ones start as at
        start-up; removed ones take no new call, finish those in flight within their
        ``shutdownTimeout`` and stop, their tools withdrawn; a change of what runs or
        how it is reached (command, args, env, cwd, url, headers, auth, transport)
        replaces the server — calls queued meanwhile are served by the new one — and a
        change of policy only (``prefix``, ``timeout``, ``approve``...) is applied in
        place. ``supervisor`` settings apply to what comes next; ``authDir`` and
        ``tokenStore`` are listed in ``needs_restart``. The in-process ``apps`` and
        ``faults`` plans given to :func:`open_supervisor` are kept.

        All or nothing: a config that does not load, or names a missing variable a
        server did not already lack, or adds or changes a ``perUser`` server, raises
        :class:`~supervisor.errors.ConfigError` and changes nothing
        (``supervisor.config.rejected``). Applied, it publishes
        ``supervisor.config.reloaded``. Reconfigurations run one at a time; none counts
        as a crash. See docs/config.md, "Changing the config while it runs".
        """
        async with self._reconfiguring:
            return await reconfigure(self, config)

    # -- OAuth -------------------------------------------------------------------------

    def _broker(self, name: str) -> TokenBroker:
        if name not in self._servers:
            known = ", ".join(self._servers) or "none"
            raise UnknownServer(f"no MCP server named {name!r} (configured: {known})")
        broker = self._auth.broker(name) if self._auth is not None else None
        if broker is None:
            raise ValueError(
                f"MCP server {name!r} does not use OAuth (only remote servers do, unless "
                '"auth" is false or they send their own Authorization header)'
            )
        return broker

    async def login(
        self, name: str, redirect_handler: RedirectHandler | Literal["browser"] | None = None
    ) -> BrokerInfo:
        """Log remote server ``name`` in with OAuth now, from the start (a browser login
        for the authorization-code grant, the machine grant otherwise), and return what
        was granted. ``redirect_handler`` shows the authorization URL (``"browser"``:
        print it and open the browser); the default is ``open_supervisor``'s, else
        ``"browser"``. A server waiting in ``needs_auth`` connects once it is done.

        Raises :class:`~supervisor.errors.AuthorizationFailed` when the login fails.
        """
        broker = self._broker(name)
        assert self._auth is not None
        handler = self._auth.resolve(redirect_handler)
        if handler is None and broker.redirect is None:
            handler = self._auth.browser_handler()
        try:
            await broker.login(handler)
        except AuthProblem as exc:
            raise self._servers[name].auth_exception(exc) from None
        return broker.info()

    async def logout(self, name: str) -> bool:
        """Forget remote server ``name``'s OAuth tokens (on disk too); whether it had
        any. Its connection carries on until the server refuses the old token."""
        return await self._broker(name).logout()

    def auth_status(self, name: str) -> BrokerInfo:
        """Remote server ``name``'s OAuth state: issuer, scopes, expiry, account; never
        a token."""
        return self._broker(name).info()

    # -- servers -----------------------------------------------------------------------

    @property
    def servers(self) -> Mapping[str, ServerView]:
        """Every enabled server's view, by name, in config order."""
        return MappingProxyType(self._views)

    def server(self, name: str) -> ServerView:
        """Server ``name``'s view: its config, health and listings; its tools are called
        through the same gate as :meth:`call` (validation, approval)."""
        try:
            return self._views[name]
        except KeyError:
            known = ", ".join(sorted(self._servers)) or "none"
            raise UnknownServer(f"no MCP server named {name!r} (configured: {known})") from None

    @property
    def _tree(self) -> Tree:
        """The ``servers`` supervisor (it is never restarted: its failure is the whole's)."""
        for id, _, incarnation in self._root.which_children():
            if id == "servers" and isinstance(incarnation, Tree):
                return incarnation
        raise SupervisorError("the servers' supervisor is not running")

    def statistics(self) -> SupervisorStatistics:
        """The root of the tree: the bus's, the registry's and the servers' supervisor's
        restarts and last exits (a crash of the bus or the registry shows here)."""
        return self._root.statistics()

    def registry_statistics(self) -> RegistryStatistics:
        """The registry's merges, pending reports and failures."""
        return self._registry.statistics()

    def status(self) -> dict[str, HealthRecord]:
        """Every configured server's health record, by name, in config order; a disabled
        server (never started) is there too, with status ``disabled``."""
        servers = self._servers
        return {
            name: servers[name].record() if name in servers else disabled_record(config)
            for name, config in self.config.servers.items()
        }

    @contextmanager
    def recent_calls(self, seconds: float = 300.0) -> Iterator[CallWindow]:
        """While the block runs, every tool call that names a server is kept, with its
        latency and outcome, in the :class:`~supervisor.monitor.CallWindow` it yields:
        the calls of the last *seconds*, a few per second at most (what the dashboard's
        strips draw). Several blocks may run at once, each with its own window."""
        window = CallWindow(seconds)
        gate = self._gate
        gate.windows = (*gate.windows, window)
        try:
            yield window
        finally:
            gate.windows = tuple(w for w in gate.windows if w is not window)

    def faults(self) -> list[Injected]:
        """Every fault the servers' ``faults`` plans injected so far (docs/faults.md), in
        order of time (each record names its server); empty when no server has a plan."""
        found = [fault for server in self._servers.values() for fault in server.faults()]
        return sorted(found, key=lambda fault: fault.t)  # stable: servers in config order

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
            calls_tool_error=summary.calls_tool_error,
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
                    "calls_tool_error": m.calls_tool_error,
                    "p50_ms": None if m.latency_p50_ms is None else round(m.latency_p50_ms, 3),
                    "p99_ms": None if m.latency_p99_ms is None else round(m.latency_p99_ms, 3),
                }
                for name, m in summary.servers.items()
            },
        )

    async def connect_all(self, timeout: float | None = None) -> None:
        """Connect every server that is not connected yet, concurrently; return once each
        is connected or has failed (or ``timeout`` passed: by default each server's
        ``initTimeout + timeout``). A server in ``needs_auth`` while a login for it is
        shown (through the redirect handler, or by :meth:`login`) is waited for until the
        login ends; one waiting for a login nobody started is not. Errors are in
        ``status()``."""

        async with trio.open_nursery() as nursery:
            for server in self._servers.values():
                nursery.start_soon(connect, server, timeout)

    async def restart(self, name: str) -> None:
        """Restart a server now, with a fresh attempt count: a failed or stopped one comes
        back; a running one is stopped gracefully first."""
        self.server(name)  # UnknownServer
        server = self._servers[name]
        if server.error is not None:
            raise SupervisorError(f"MCP server {name!r} cannot start: {server.error}")
        if server.address.state is AddressState.OPEN:
            await self._tree.terminate_child(name)
        # The tree starts its counts over and says so (StartedOver): the server's state
        # takes its attempt and restarts from that decision.
        await self._tree.restart_child(name)

    async def stop(self, name: str) -> None:
        """Stop a server (gracefully, then by force); its calls fail fast until restarted."""
        self.server(name)  # UnknownServer
        # The tree's Terminated decision marks it stopped (also when it was down).
        await self._tree.terminate_child(name)

    # -- tools -------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The registry's latest merge (:class:`~supervisor.registry._live.Snapshot`): ``named``
        (every known tool, its server up or not), ``current`` (the tools on offer now),
        ``resources``, ``templates`` and ``prompts``. Never waits."""
        return self._registry.snapshot

    async def snapshot_after(self, since: Snapshot) -> Snapshot:
        """The registry's snapshot once it is a later merge than ``since`` (one
        :attr:`snapshot` gave): what the servers offer — tools, resources, templates,
        prompts — or which are up may have changed. A follower of the lists waits here."""
        return await self._registry.after(since)

    @property
    def catalog(self) -> Catalog:
        """The merged catalog of the connected servers' tools (see :mod:`supervisor.registry`)."""
        return self._registry.snapshot.current

    def search(self, query: str, limit: int = 10) -> list[Summary]:
        """The catalog's best matches for ``query`` (names and descriptions), best first:
        a :class:`~supervisor.registry.Summary` each."""
        return self._registry.snapshot.current.search(query, limit)

    def resolve(self, name: str) -> tuple[str, str]:
        """``(server, its own tool name)`` for a merged tool name: by the catalog for
        servers whose tools are known, by the naming template for the others."""
        server, original = self._gate.resolve(name)
        return server.name, original

    def approval_reason(self, name: str) -> ApprovalReason | None:
        """Why a call of the tool ``name`` (its merged name) would need approval, or
        ``None`` if it would go ahead without asking: the very decision :meth:`call`
        makes, under the server's ``approve`` / ``autoApprove`` policy and the tool's
        annotations (the ``approve`` callback is not asked). Raises
        :class:`~supervisor.errors.UnknownTool` for a tool not in the catalog (its server
        not connected yet, say: :meth:`tools` connects them)."""
        return self._gate.reason_for(name)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
        approve: ApprovalCallback | None = None,
        spill: bool = True,
        log_level: types.LoggingLevel | None = None,
        rounds: InputRound | None = None,
        caller: str | None = None,
    ) -> ToolResult:
        """Call a tool by its merged name and return its normalised result.

        ``progress``, if given, is awaited as ``progress(progress, total, message)`` for
        each MCP progress notification the server sends about this call (``total`` and
        ``message`` may be ``None``); the call's timeout is not extended by them.

        The call passes the one gate (:mod:`supervisor.calls._gate`): the name is resolved
        (:class:`~supervisor.errors.UnknownTool`, naming close matches); a server not
        connected yet is connected first, to learn the tool's schema and annotations; the
        arguments are checked against the tool's ``inputSchema``
        (:class:`~supervisor.errors.ToolArgumentsInvalid`, naming each wrong field); the
        server's approval policy is applied — the ``approve`` callback decides, and
        without one a call that needs approval fails closed
        (:class:`~supervisor.errors.ApprovalRequired`; a refusal is
        :class:`~supervisor.errors.ApprovalDenied`). Only then is the call sent — unless it is
        over the server's ``rateLimit`` (:class:`~supervisor.errors.RateLimited`, nothing
        sent) — with the server's request timeout unless ``timeout`` is given, waiting
        its turn under the server's ``maxConcurrentCalls`` within it
        (:class:`~supervisor.errors.CallQueueTimeout`, nothing sent).

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

        ``approve``, if given, decides this call's approval instead of the supervisor's
        callback (a front end that knows who is calling: the gateway, for the command
        line's ``call --yes``). ``spill=False`` keeps the whole result in memory and
        writes no file (text whole, every image inline): for a caller that passes the
        result on (``result.raw``) or renders it itself. ``log_level`` opts this call in
        to the log messages of a 2026-07-28 server from that level up (in the request's
        ``_meta``, as that protocol asks; see :meth:`set_log_level`). ``rounds`` is for a
        front end that relays 2026-07-28's multi-round-trip calls to its own client (the
        gateway): a server's ``input_required`` answer is then the result's ``raw``, as
        it is, instead of being answered by this supervisor's callbacks, and the next
        round carries the client's answers and the server's ``requestState`` untouched;
        with ``rounds.tasks`` a task the server makes of the call is the result's ``raw``
        too (a ``CreatedTask``), for that client to follow through
        ``sup.servers[name].task_request`` —
        otherwise the supervisor follows it and returns its result (docs/servers.md).
        ``caller`` names who the call is made for (the team gateway's authenticated
        caller): it is written in the call's audit line.
        """
        call = ToolCall(
            name, arguments, timeout, progress, approve, spill, log_level, rounds, caller
        )
        return returned(call, await self._gate.outcome(call))

    async def _call_outcome(self, call: ToolCall) -> CallOutcome:
        """Make ``call`` as :meth:`call` does, and say how it ended instead of raising
        (:mod:`supervisor.tools._request`): the path of a front end that renders each
        outcome itself (the gateway)."""
        return await self._gate.outcome(call)

    async def tools(self) -> Catalog:
        """The merged catalog, once every server has connected or failed (lazy servers are
        connected to find out what they offer, and a login in progress is waited for, as
        :meth:`connect_all` does); see :attr:`catalog`."""
        await self.connect_all()
        return (await self._registry.settled()).current

    # -- resources and prompts -------------------------------------------------------------

    async def resources(self) -> list[MergedResource]:
        """Every server's resources, merged (see :mod:`supervisor.calls._resources`)."""
        return await self._resources.resources()

    async def resource_templates(self) -> list[MergedResourceTemplate]:
        """Every server's resource templates, merged like :meth:`resources`."""
        return await self._resources.resource_templates()

    async def prompts(self) -> list[MergedPrompt]:
        """Every server's prompts under their merged names, like :meth:`resources`."""
        return await self._resources.prompts()

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.ReadResourceResult: ...

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def read_resource(
        self,
        uri: str,
        *,
        server: str | None = None,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` from the server that offers it, or from ``server``; see
        :meth:`supervisor.calls._resources.Resources.read_resource`. ``rounds`` is for a front
        end that relays 2026-07-28's multi-round-trip requests to its own client, as
        :meth:`call`'s is: a server's ``input_required`` answer is then returned as it
        is, and the next round carries the client's answers and the server's
        ``requestState`` untouched."""
        return await self._resources.read_resource(
            uri, server=server, timeout=timeout, rounds=rounds
        )

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: None = None,
    ) -> types.GetPromptResult: ...

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        rounds: InputRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get a prompt by its merged name; see
        :meth:`supervisor.calls._resources.Resources.get_prompt` (``rounds``: as
        :meth:`read_resource`'s)."""
        return await self._resources.get_prompt(name, arguments, timeout=timeout, rounds=rounds)

    async def subscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Subscribe to changes of the resource ``uri``, at the server that offers it (or
        ``server``): each change is published as ``mcp.resource.updated`` (subscribe to
        it with :meth:`subscribe`), also after the server restarts; returns the server's
        name. See :meth:`supervisor.calls._resources.Resources.subscribe_resource`."""
        return await self._resources.subscribe_resource(uri, server=server)

    async def unsubscribe_resource(self, uri: str, *, server: str | None = None) -> str:
        """Stop the subscription to ``uri``; returns the server's name."""
        return await self._resources.unsubscribe_resource(uri, server=server)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Completions for an argument of a prompt (by its merged name) or a resource
        template (by its URI template), from the server offering it; see
        :meth:`supervisor.calls._resources.Resources.complete`."""
        return await self._resources.complete(ref, argument, context, timeout=timeout)

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Have every server send its log messages from ``level`` up, now and on each
        reconnection (see :meth:`ServerHandle.set_log_level
        <supervisor.server._managed.ServerHandle.set_log_level>`); they reach the
        ``logging_callback`` this supervisor was opened with. Servers are asked
        concurrently; one that refuses or does not answer is logged, not raised."""
        async with trio.open_nursery() as nursery:
            for server in self._servers.values():
                nursery.start_soon(server.set_log_level, level)

    # -- events ------------------------------------------------------------------------

    def subscribe(self, *patterns: str, buffer: int = 1024) -> Subscription:
        """Events whose kind matches a glob (``"mcp.*"``), as an async context manager
        yielding an async iterator; see :meth:`supervisor.events._bus.Bus.subscribe`."""
        return self.bus.subscribe(*patterns, buffer=buffer)


def run_call(
    config: Config | Mapping[str, object] | str | os.PathLike[str],
    tool: str,
    arguments: Mapping[str, object] | None = None,
    *,
    timeout: float | None = None,
    **options: Any,
) -> ToolResult:
    """Call ``tool`` (its merged name) with ``arguments`` once, from plain synchronous
    code — a script: start ``config``'s servers (each tried once, as a one-shot command
    does), make the call through the gate, stop them, return its
    :class:`~supervisor.tools.ToolResult`; errors as ``SupervisorHandle.call`` raises
    them. ``options`` go to :func:`open_supervisor` (``approve`` for a tool that needs
    approval). It blocks its thread in a ``trio.run`` of its own: in a running asyncio
    loop (an asyncio program, a notebook) use :mod:`supervisor.asyncio` instead, which
    this says rather than blocking that loop."""
    asyncio = sys.modules.get("asyncio")  # (not imported: no loop of it runs)
    if asyncio is not None and asyncio._get_running_loop() is not None:
        raise RuntimeError(
            "run_call blocks, and an asyncio loop is running in this thread (an asyncio "
            "program or a notebook): use `async with supervisor.asyncio.open_supervisor("
            "config) as sup: await sup.call(tool, arguments)` there"
        )

    async def once() -> ToolResult:
        options.setdefault("retries", False)
        async with open_supervisor(config, **options) as sup:
            return await sup.call(tool, arguments, timeout=timeout)

    return trio.run(once)


def _spill_directory(
    spill_dir: str | os.PathLike[str] | None, config: Config
) -> AbstractContextManager[SpillDirectory]:
    """The session's spill directory: the caller's own :class:`SpillDirectory` as it is
    (theirs to close), else one of ``spill_dir`` (or private) within the config's
    ``maxSpillFiles`` and ``maxSpillBytes``, closed with the session."""
    if isinstance(spill_dir, SpillDirectory):
        return nullcontext(spill_dir)
    limits = config.settings.limits
    return SpillDirectory(
        spill_dir, max_files=limits.max_spill_files, max_bytes=limits.max_spill_bytes
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
    retries: bool = True,
    faults: Mapping[str, PlanSource] | None = None,
    injector: Injector | None = None,
    history: CallHistory | None = None,
    apps: Mapping[str, object] | None = None,
    oauth_redirect_handler: RedirectHandler | Literal["browser"] | None = None,
    oauth_callback_handler: CallbackHandler | None = None,
    auth_dir: str | os.PathLike[str] | None = None,
    **client_options: object,
) -> AsyncIterator[SupervisorHandle]:
    """Supervise every enabled server of ``config`` (and the in-process ``apps``) for the
    duration of the block; yields the :class:`SupervisorHandle`.

    ``config`` is a :class:`~supervisor.config.Config`, a path, or a parsed mapping. Each
    server's behaviour — connecting lazily or not, start slots, restarts and attempts,
    what is retried, shutdown, the child subreaper — is in docs/servers.md; the
    parameters, by where they are described:

    - ``approve`` (the approval callback; without it, calls that need approval fail
      closed), ``builtins`` (the embedder's own tool names) and ``spill_dir`` (where
      large text results go): docs/tools.md;
    - ``retries=False`` (one attempt per server, never restarted: what a one-shot command
      wants), ``retry_idempotent`` (a read-only or idempotent tool's call in flight when
      its connection dies is sent again), ``bus`` (the event bus to publish on; closed
      with the block) and ``client_options`` (to each server's SDK ``mcp.Client``:
      ``sampling_callback``, ``elicitation_callback``, ``list_roots_callback``,
      ``logging_callback``, ``message_handler``, ``client_info``): docs/servers.md;
    - ``apps`` (in-process MCP servers, supervised after the configured ones under those
      names), ``faults`` (fault plans by server, replacing the config's), ``injector``
      (what carries the plans out, :class:`supervisor.faults.Injector`: needed by any
      plan) and ``history`` (a :class:`supervisor.faults.CallHistory` recording every
      call and event): docs/faults.md;
    - ``oauth_redirect_handler``, ``oauth_callback_handler`` and ``auth_dir`` (OAuth
      logins of remote servers, and where their tokens are kept): docs/auth.md.

    The config's ``supervisor.audit`` log (docs/tools.md) is opened before the servers
    start: one that cannot be opened raises :class:`~supervisor.errors.AuditLogError`.
    A wrong config, ``apps`` name or fault plan raises
    :class:`~supervisor.errors.ConfigError` naming the field; so does a fault plan
    without an ``injector``, saying what to pass. If the servers' tree gives
    up, every server is stopped and :class:`~supervisor.actors.SupervisorGaveUp` (naming
    the server) is raised out of the block. When the block ends, the session's metrics
    are frozen (``handle.summary()``) and logged as one ``session summary`` line, then
    the servers, the registry and the bus are stopped.
    """
    configure_default_logging()  # only if the application has not configured structlog
    cfg = _session_config(config, apps, faults)
    require_injector(cfg, injector)
    bus = bus if bus is not None else Bus()
    publish = bus.publish
    if history is not None:
        history.start()
        publish = history.tap(publish)  # the history keeps every event, on its clock
    settings = cfg.settings
    enabled = [name for name, c in cfg.servers.items() if not c.disabled]
    registry = Registry(
        enabled,
        publish=publish,
        policy=NamingPolicy(settings.tool_name_template, settings.tool_clash),
        builtins=frozenset(builtins),
    )
    secrets = RedactionScope(redactor)
    auth = AuthService(
        [cfg.servers[name] for name in enabled],
        store=token_store(auth_dir, cfg),
        publish=publish,
        remember=secrets.add,
        forget=secrets.release,
        redirect=oauth_redirect_handler,
        callback=oauth_callback_handler,
        base_dir=cfg.path.parent if cfg.path is not None else None,
    )
    audits = Audits()
    maker = Maker(
        publish=publish,
        report=registry.report,
        auth=auth,
        client_options=client_options,
        retry_idempotent=retry_idempotent,
        retries=retries,
        start_slots=StartSlots(settings.startup_concurrency),
        secrets=secrets,
        audits=audits,
        complete=with_overrides(apps, faults, injector),
        injector=injector,
    )
    # One handle per enabled server, by name, in config order.
    servers = {name: maker.handle(cfg, name) for name in enabled}
    try:
        # The config's secrets and the default spill directory belong to this session.
        with (
            secrets,
            redacting(cfg.secrets()),
            _spill_directory(spill_dir, cfg) as spill,
            contextlib.closing(audits),
            # Orphans below a server are re-parented here, not to init (on Linux).
            subreaper(),
        ):
            audit = audits.open(cfg)
            async with open_tree(
                _tree(cfg, bus, registry, auth, servers),
                name="root",
                intensity=_ROOT_INTENSITY,
                notify=tree_hook(servers, publish, supervisor="servers"),
                ordered_shutdown=True,
            ) as root:
                handle = SupervisorHandle(
                    cfg,
                    bus,
                    root,
                    servers,
                    registry,
                    maker=maker,
                    approve=approve,
                    spill_dir=spill,
                    history=history,
                    auth=auth,
                    audit=audit,
                )
                try:
                    yield handle
                finally:
                    handle._end_session()  # metrics as the block left them
    except SupervisorGaveUp as exc:
        inner = exc.__cause__
        if exc.child == "servers" and isinstance(inner, SupervisorGaveUp):
            raise inner from inner.__cause__  # the servers' own reason, naming the server
        raise
    finally:
        bus.close()


def _session_config(
    config: Config | Mapping[str, object] | str | os.PathLike[str],
    apps: Mapping[str, object] | None,
    faults: Mapping[str, PlanSource] | None,
) -> Config:
    """The session's config: ``config`` loaded, with the in-process ``apps`` and the
    ``faults`` plans given to ``open_supervisor``."""
    cfg = config if isinstance(config, Config) else load_config(config)
    if apps:
        cfg = with_apps(cfg, apps)
    if faults:
        cfg = with_faults(cfg, faults)
    return cfg


def _tree(
    cfg: Config,
    bus: Bus,
    registry: Registry,
    auth: AuthService,
    servers: Mapping[str, ServerHandle],
) -> list[ChildSpec]:
    """The root's children: the bus, the registry, the auth service's actors, and the
    ``servers`` supervisor over every server that could be configured."""
    settings = cfg.settings
    return [
        bus.spec,
        registry.spec,
        *auth.children(),
        supervisor_spec(
            "servers",
            [s.spec for s in servers.values() if s.error is None],
            strategy=settings.strategy,
            intensity=settings.intensity,
            # Its giving up is the whole supervisor's: never restarted by the root.
            give_up=GiveUp.ESCALATE,
            child_intensity=Intensity(max_restarts=0, within_seconds=math.inf),
        ),
    ]


def token_store(given: str | os.PathLike[str] | None, config: Config) -> AuthStore | TokenStore:
    """Where ``config``'s OAuth credentials are kept: the auth directory
    (:func:`_auth_dir`), or the database of ``supervisor.tokenStore`` (its key read now:
    :class:`~supervisor.errors.ConfigError` naming the field when it cannot be)."""
    settings = config.settings.token_store
    if settings is None:
        return LocalStore(_auth_dir(given, config))
    from mcp.client.auth import OAuthTokenError

    from .auth._backends import PostgresStore, Sealer, SQLiteStore
    from .auth._idjag import read_secret
    from .config._gateway import sqlite_path

    base = config.path.parent if config.path is not None else None
    what = "the token store's key"
    try:
        sealer = None
        if settings.key_file is not None or settings.key_env is not None:
            key = read_secret(settings.key_file, settings.key_env, base, what).encode()
            if any(chr(byte).isspace() for byte in key):
                raise ValueError(f"{what} must be one word, with no spaces")
            sealer = Sealer(key)
        if settings.url.startswith("sqlite:"):
            path = Path(sqlite_path(settings.url)).expanduser()
            return SQLiteStore(path if path.is_absolute() or base is None else base / path, sealer)
        assert sealer is not None  # required for PostgreSQL by the config's check
        return PostgresStore(settings.url, sealer)
    except (OAuthTokenError, ValueError) as exc:
        raise ConfigError([FieldError("supervisor.tokenStore", str(exc))]) from None


def _auth_dir(given: str | os.PathLike[str] | None, config: Config) -> Path | None:
    """Where OAuth credentials are kept: ``given``, else the config's
    ``supervisor.authDir`` (relative to the config's directory), else ``None`` (the
    environment variable, or the default)."""
    if given is not None:
        return Path(given).expanduser()
    setting = config.settings.auth_dir
    if setting is None:
        return None
    path = Path(setting).expanduser()
    if not path.is_absolute() and config.path is not None:
        path = config.path.parent / path
    return path


#: The root restarts a crashed bus or registry actor; more than this and it gives up.
_ROOT_INTENSITY = Intensity(max_restarts=10, within_seconds=60)


__all__ = ["SupervisorHandle", "UnknownServer", "UnknownTool", "open_supervisor", "run_call"]
