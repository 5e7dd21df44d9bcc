"""The gateway's MCP server: the supervisor's merged catalog behind the SDK's server.

One :class:`Gateway` wraps a running :class:`~supervisor.runtime.SupervisorHandle` in an
``mcp.server.lowlevel.Server`` whose tools, resources, resource templates and prompts
are the registry's merged ones, and whose calls go through the supervisor's one gate.
The same server object is served over stdio (:mod:`._stdio`) and Streamable HTTP
(:mod:`._http`), to clients of either protocol era.

What a client sees follows the tree:

* a backing server that is restarting keeps its tools listed, and a call waits for it
  (within the call's deadline);
* one that is ``failed`` (or stopped, or needs a login nobody can give here) has its tools,
  resources and prompts withdrawn; a call to one of its tools is answered at once with a
  tool error naming the server and its last error;
* every change of what is listed is announced: ``notifications/tools/list_changed`` (and
  the resource and prompt ones) on each handshake-era session, and the same events on
  the ``subscriptions/listen`` streams of 2026-07-28 clients.

With ``tool_search`` (``serve --tool-search``) the catalog is not listed: four meta-tools
are (:mod:`._search`), to list, search, load and call the tools; a client may still call
a tool by name. Their list never changes, so catalog changes are not announced as
``tools/list_changed`` then (resource and prompt changes still are).

A failure is a tool result with ``isError`` set, its text saying what happened, and
``_meta["mcp-supervisor/error"]`` saying it as data: the error's ``type``, its
``server``, and its ``effect`` — ``"not executed"`` (definitely not run: safe to retry)
or ``"may have taken effect"`` (the connection died mid-call, or it timed out). A call
refused over a rate limit says, beside those, when it would fit: ``retryAfter`` (seconds),
the ``limit`` and ``by`` whose (``"server"``, ``"caller"``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import warnings
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import mcp_types as types
import trio
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._util._previews import PREVIEW_LIMITS
from .._version import __version__
from ..calls._outcome import ERROR_META, describe_error, error_data, error_meta
from ..calls._request import Failed, Round, Task, ToolCall
from ..errors import (
    ApprovalAsked,
    ApprovalRequired,
    AuthRequired,
    PromptArgumentsInvalid,
    RequestUnencodable,
    ServerRequestError,
    SupervisorError,
    ToolError,
    UnknownPrompt,
    UnknownResource,
    UnknownServer,
    UnknownTool,
)
from ..log import get_logger
from ..monitor._document import prompts_document, resources_document, tools_document
from ..monitor._probes import DOWN
from ..registry._resources import route_resource
from ..server._messages import InputRound
from ..server._status import ServerStatus
from ..server._tasks import EXTENSION_ID as TASKS
from ..server._tasks import declared
from ..tools import ApprovalRequest, Approver, Decider
from ..transports._encoding import caller_capabilities
from ._approval import (
    APPROVAL_KEY,
    LOGIN_KEY,
    client_approver,
    input_required,
    login_required,
    round_state,
    round_trip_approver,
)
from ._apps import EXTENSION_ID as APPS
from ._apps import backing as apps_backing
from ._apps import contents_served, resource_served
from ._held import HOLD_FOR, Held, HeldCalls, Question
from ._policy import Narrowed, Policy
from ._relay import LEVELS, Relay, connection_of
from ._resource import Caller
from ._search import INSTRUCTIONS, SearchHost, ToolSearch, listed
from ._subscriptions import ResourceSubscriptions
from ._tasks import GatewayTasks

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from ..registry import Catalog, Entry
    from ..runtime import SupervisorHandle
    from ..server import HealthRecord

__all__ = [
    "APPROVE_META",
    "ERROR_META",
    "LIMITS_META",
    "CALLER_SCOPE",
    "LOCAL_SCOPE",
    "SERVER_META",
    "TIMEOUT_META",
    "WITHDRAWN",
    "Gateway",
]

log = get_logger("supervisor.gateway")

#: The statuses whose server's tools, resources and prompts are withdrawn from listings.
WITHDRAWN = DOWN
#: The ``_meta`` key of a result that names the backing server which answered, and of a
#: ``resources/read`` request naming the server to read from (``read --server``).
SERVER_META = "mcp-supervisor/server"
#: The ``_meta`` key of a ``tools/call``, ``resources/read`` or ``prompts/get`` request
#: bounding the whole request, in seconds (``call --timeout``, ``read --timeout``): the
#: gateway waits no longer for the server, restarts included.
TIMEOUT_META = "mcp-supervisor/timeout"
#: The ``_meta`` key of a ``tools/call`` request approving it (``call --yes``); honoured
#: only on the gateway's local socket (:data:`LOCAL_SCOPE`), ignored over HTTP.
APPROVE_META = "mcp-supervisor/approve"
#: The ``_meta`` key of a ``tools/call`` request asking for the server's preview limits,
#: and of the result carrying them (``{"maxPreviewBytes": …}``): the command line
#: previews a large result as it would had it made the call itself.
LIMITS_META = "mcp-supervisor/limits"
#: The ASGI scope key the local socket's front sets on each of its requests.
LOCAL_SCOPE = "mcp-supervisor.local"
#: The ASGI scope key where a team gateway's front puts the request's :class:`Caller`.
CALLER_SCOPE = "mcp-supervisor.caller"
#: JSON-RPC error code for a resource not found on the session-based protocol (its
#: specification's); 2026-07-28 retired it for ``-32602`` (see :func:`_not_found_code`).
RESOURCE_NOT_FOUND = -32002
#: Seconds a listing made at start waits for the servers' first connections.
FIRST_LISTING_WAIT = 15.0
#: Seconds one client gets to take a change notification before it is skipped.
NOTIFY_TIMEOUT = 5.0

_ALL_CHANGES = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
#: What changes with tool search on: the meta-tools never do.
_SEARCH_CHANGES = NotificationOptions(prompts_changed=True, resources_changed=True)
_INSTRUCTIONS = (
    "Tools, resources and prompts of several MCP servers, supervised and merged by "
    "mcp-supervisor. A tool whose server is down answers with an error saying so; the list "
    "changes as servers fail and recover."
)


class _Server(Server[Any]):
    """The SDK's low-level server, saying which of its lists change (``listChanged``:
    :attr:`changes`) to handshake-era clients as well — over HTTP the session manager
    asks for the initialization options without arguments."""

    changes = _ALL_CHANGES
    #: which of the optional capabilities to declare (``logging``, ``completions``,
    #: ``subscribe``, ``apps``): those some backing server declares (see
    #: :meth:`Gateway.offered`)
    offered: Callable[[], Collection[str]] | None = None

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if self.offered is None:
            return capabilities
        offered = self.offered()
        resources = capabilities.resources
        if resources is not None:
            resources = resources.model_copy(update={"subscribe": "subscribe" in offered})
        extensions = capabilities.extensions
        if "apps" in offered:
            extensions = {**(extensions or {}), APPS: {}}
        if "tasks" in offered:
            extensions = {**(extensions or {}), TASKS: {}}
        return capabilities.model_copy(
            update={
                "logging": capabilities.logging if "logging" in offered else None,
                "completions": capabilities.completions if "completions" in offered else None,
                "resources": resources,
                "extensions": extensions,
            }
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self.changes, experimental_capabilities, extensions
        )


class Gateway:
    """The merged catalog of ``sup`` served as one MCP server (:attr:`server`).

    ``tools`` (globs over merged tool names) and ``servers`` (backing server names)
    narrow what this gateway serves; empty means everything. With ``tool_search`` the
    tools are found and called through four meta-tools (:attr:`search`) rather than
    listed. ``relay`` (:class:`~._relay.Relay`), when the supervisor was opened with its
    callbacks, passes backing servers' sampling, elicitation and roots requests to the
    client whose call is waiting. ``policy`` (:class:`~._policy.Policy`) narrows it
    further for each caller of a team gateway (a request whose front named its caller,
    :data:`CALLER_SCOPE`). Run :meth:`run` in a nursery (``await
    nursery.start(gateway.run)``) for the change notifications.
    """

    def __init__(
        self,
        sup: SupervisorHandle,
        *,
        tools: Sequence[str] = (),
        servers: Collection[str] = (),
        tool_search: bool = False,
        relay: Relay | None = None,
        name: str = "mcp-supervisor",
        policy: Policy | None = None,
        key: bytes | None = None,
    ) -> None:
        self.sup = sup
        #: who may use what, per caller of a team gateway
        self.policy = policy if policy is not None else Policy(None)
        self._narrowed: dict[Any, Any] = {}  # the catalog of each grant (:class:`Narrowed`)
        #: who answers backing servers' requests (the client whose call waits)
        self.relay = relay
        #: 2026-07-28 callers' calls held while their session-based server asks them
        self.held = HeldCalls()
        self._globs = tuple(tools)
        self._only = frozenset(servers)
        self._served: tuple[Catalog, frozenset[str], Catalog] | None = None
        #: the meta-tools, when tools are found by search rather than listed
        self.search = ToolSearch(self) if tool_search else None
        #: where 2026-07-28 clients' ``subscriptions/listen`` streams get their events
        self.subscriptions = InMemorySubscriptionBus()
        #: who is subscribed to which resource (both eras), and the backing servers asked
        self.resource_subscriptions = ResourceSubscriptions(sup, self.subscriptions, self._may_read)
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._announced: tuple[object, object, object] | None = None
        self._connected = trio.Event()
        with warnings.catch_warnings():  # logging, deprecated by 2026-07-28, is passed on
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server = _Server(
                name,
                version=__version__,
                instructions=INSTRUCTIONS if tool_search else _INSTRUCTIONS,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_templates,
                on_read_resource=self._read_resource,
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_subscriptions_listen=self.resource_subscriptions.listen,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_completion=self._complete,
                on_set_logging_level=self._set_logging_level,
            )
        self.server.offered = self.offered
        self.server.get_tool_input_schema = self._input_schema
        if tool_search:
            self.server.changes = _SEARCH_CHANGES
        #: ``tasks/get``, ``tasks/update`` and ``tasks/cancel``, to the server of the task
        self.tasks = GatewayTasks(sup, self.serves, self._seen_by, key)
        self.tasks.install(self.server)
        self.server.middleware.append(self._remember_connection)
        # an approval asked in another round trip carries a requestState: sealed here,
        # bound to its tool, arguments and caller, under ``key`` (replicas share it) or a
        # key of this process's own
        #: the replicas' key (else one of this process's own): sealed states, task ids,
        #: and the per-user login links
        self.key = key or os.urandom(32)
        security = RequestStateSecurity(keys=[self.key], bind_principal=_principal)
        boundary = RequestStateBoundary(security, default_audience=name)
        self.server.middleware.append(boundary)

    # -- what is served ------------------------------------------------------------------

    def set_policy(self, policy: Policy) -> None:
        """Narrow each caller by ``policy`` from its next request on (a reloaded config's
        ``gateway.policy``); what callers spent of the rate limits both policies have is
        kept."""
        policy.keep_limits(self.policy)
        self.policy = policy
        self._narrowed.clear()

    def _listed_server(self, name: str) -> str | None:
        """The server of the tool ``name`` in the catalog now (``None``: not listed)."""
        entry = self.sup.snapshot.named.get(name)
        return None if entry is None else entry.server

    def serves(self, server: str, name: str | None = None) -> bool:
        """Whether this gateway serves ``server`` (and its tool ``name``) at all."""
        if self._only and server not in self._only:
            return False
        if name is None or not self._globs:
            return True
        return any(fnmatch.fnmatchcase(name, glob) for glob in self._globs)

    def _seen_by(self, ctx: ServerRequestContext[Any, Any]) -> Gateway | Narrowed:
        """This gateway as the request's caller sees it: itself for a request with no
        caller (the static token, stdio, the local socket), else narrowed to the
        caller's grant (:class:`~._policy.Narrowed`), its calls made for the caller."""
        caller = _caller(ctx)
        if caller is None:
            return self
        grant = self.policy.grant(caller)
        admission = self.policy.admission(caller, grant)
        return Narrowed(self, caller, grant, self._narrowed, admission)

    def offered(self) -> set[str]:
        """The optional capabilities this gateway declares: ``logging`` (with a relay to
        pass log messages on), ``completions``, resource ``subscribe``, MCP ``apps`` (the
        ``io.modelcontextprotocol/ui`` extension) and ``tasks``
        (``io.modelcontextprotocol/tasks``), each when a served backing server declared
        it on its last connection — or has not connected yet, so nobody knows."""
        offered: set[str] = set()
        for name, server in self.sup.servers.items():
            if not self.serves(name):
                continue
            capabilities = server.capabilities
            if capabilities is None:
                unknown = {"completions", "subscribe", "apps", "tasks"}
                return unknown | {"logging"} if self.relay is not None else unknown
            if capabilities.logging is not None and self.relay is not None:
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

    def _up(self) -> set[str]:
        """The served servers whose tools are listed now (a disabled one never started:
        it is not among the supervisor's servers)."""
        return {
            name
            for name, server in self.sup.servers.items()
            if server.status() not in WITHDRAWN and self.serves(name)
        }

    def _up_for(self, ctx: ServerRequestContext[Any, Any]) -> set[str]:
        """:meth:`_up`, less the servers the request's caller may not use."""
        up = self._up()
        host = self._seen_by(ctx)
        return {name for name in up if host.whole(name)} if isinstance(host, Narrowed) else up

    def _refuse_unserved(self, ctx: ServerRequestContext[Any, Any], server: str | None) -> None:
        """Raise a not-found error when the request's caller may not use ``server``
        (``None``: the thing asked for belongs to no known server)."""
        host = self._seen_by(ctx)
        if isinstance(host, Narrowed) and (server is None or not host.whole(server)):
            raise MCPError(types.INVALID_PARAMS, "not found: not served by this gateway")

    def _may_read(self, ctx: ServerRequestContext[Any, Any], uri: str) -> bool:
        """Whether the request's caller may read (and hear of) the resource ``uri``."""
        host = self._seen_by(ctx)
        if not isinstance(host, Narrowed):
            return True
        snapshot = self.sup.snapshot
        owner = route_resource(uri, snapshot.resources, snapshot.templates)
        return owner is not None and host.whole(owner)

    def _resource_owner(self, ctx: ServerRequestContext[Any, Any], uri: str) -> str | None:
        """For a request with a caller under a policy: the server of resource ``uri``,
        refused when the caller may not use it; else ``None`` (the supervisor finds it)."""
        host = self._seen_by(ctx)
        if host is self:
            return None
        snapshot = self.sup.snapshot
        owner = route_resource(uri, snapshot.resources, snapshot.templates)
        self._refuse_unserved(ctx, owner)
        return owner

    def _prompt_owner(self, name: str) -> str | None:
        return next((p.server for p in self.sup.snapshot.prompts if p.name == name), None)

    def _read_from(self, uri: str, meta: Mapping[str, Any]) -> str | None:
        """The server a ``resources/read`` of ``uri`` goes to (its ``_meta`` naming one,
        :data:`SERVER_META`, or not), as far as the catalog tells now."""
        found = apps_backing(uri, self.sup.servers)
        if found is not None:
            return found[0]
        named = meta.get(SERVER_META)
        if isinstance(named, str):
            return named
        snapshot = self.sup.snapshot
        return route_resource(uri, snapshot.resources, snapshot.templates)

    @contextmanager
    def _asking(self, ctx: ServerRequestContext[Any, Any], server: str | None) -> Iterator[None]:
        """While the block runs (a prompt got, a resource read), the backing ``server``'s
        requests — elicitation, sampling, roots — may be relayed to the client of ``ctx``
        (:attr:`relay`), as during a tool call (``None``: a server not known yet), and
        its requests declare the client's capabilities, as a call's do."""
        passing = caller_capabilities.set(_declared(ctx))  # (for a 2026-07-28 server)
        try:
            if self.relay is None:
                yield
                return
            caller = _caller(ctx)
            with self.relay.waiting(ctx, server, None if caller is None else caller.subject):
                yield
        finally:
            caller_capabilities.reset(passing)

    def _cache_hint(self, kind: str, servers: Collection[str]) -> dict[str, Any]:
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

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of the served tool ``name``, for the SDK's check of a
        2026-07-28 call's ``Mcp-Param-*`` headers (without it the SDK would list every
        tool on every call to find it); ``None`` for a tool not served."""
        entry = self.sup.snapshot.named.get(name)
        if entry is None or not self.serves(entry.server, name):
            return None
        return entry.tool.input_schema

    def served_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of the tool ``name`` as this gateway serves it (a meta-tool's
        with tool search), or ``None`` for a tool it does not serve."""
        if self.search is not None and name in self.search:
            return self.search.schema(name)
        return self._input_schema(name)

    def catalog(self) -> Catalog:
        """The tools served now: every known tool of a server that is not withdrawn
        (restarting ones included), as narrowed by ``tools`` and ``servers`` — a
        :class:`~supervisor.registry.Catalog`, kept until the registry's catalog or the
        servers up change (its search index with it)."""
        named = self.sup.snapshot.named
        up = frozenset(self._up())
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

    async def tools_document(
        self, query: str | None = None, limit: int = 20, *, caller: Caller | None = None
    ) -> dict[str, object]:
        """What ``mcp-supervisor tools`` prints of this gateway (``/tools``): the served
        catalog (:meth:`catalog`) — or the ``limit`` best matches of ``query`` in it —
        its servers and each tool's approval, as
        :func:`~supervisor.monitor._document.tools_document` makes it for a command that runs
        the servers itself; for a team gateway's ``caller``, what their grant covers."""
        await self.first_listing()
        host: SearchHost = self
        if caller is not None:
            host = Narrowed(self, caller, self.policy.grant(caller), self._narrowed)
        catalog = host.catalog()
        if query is None:
            entries = list(catalog.values())
        else:
            entries = catalog.load(summary.name for summary in catalog.search(query, limit))
        records = {
            name: record
            for name, record in self.sup.status().items()
            if record.status != ServerStatus.DISABLED and host.serves(name)
        }
        approvals = {e.name: self.sup.approval_reason(e.name) for e in entries}
        return tools_document(entries, catalog, records, approvals, query=query)

    async def resources_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor resources`` prints of this gateway (``/resources``): the
        resources and templates it serves, and its servers' statuses, as
        :func:`~supervisor.monitor._document.resources_document` makes them for a command
        that runs the servers itself; for a team gateway's ``caller``, what their grant
        covers."""
        up, records = await self._listed_for(caller)
        snapshot = self.sup.snapshot
        resources = [r for r in snapshot.resources if r.server in up]
        templates = [t for t in snapshot.templates if t.server in up]
        return resources_document(resources, templates, records)

    async def prompts_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor prompts`` prints of this gateway (``/prompts``), as
        :meth:`resources_document` does for resources."""
        up, records = await self._listed_for(caller)
        prompts = [p for p in self.sup.snapshot.prompts if p.server in up]
        return prompts_document(prompts, records)

    async def _listed_for(self, caller: Caller | None) -> tuple[set[str], dict[str, HealthRecord]]:
        """For a listing once the first connections are made: the servers whose
        resources and prompts ``caller`` (``None``: anyone let in) is served now, and the
        records of the servers served to them (a disabled one never started: left out)."""
        await self.first_listing()
        host: SearchHost = self
        if caller is not None:
            host = Narrowed(self, caller, self.policy.grant(caller), self._narrowed)

        def whole(name: str) -> bool:
            return host.whole(name) if isinstance(host, Narrowed) else self.serves(name)

        records = {
            name: record
            for name, record in self.sup.status().items()
            if record.status != ServerStatus.DISABLED and whole(name)
        }
        return {name for name in self._up() if whole(name)}, records

    def _state(self) -> tuple[object, object, object]:
        """What the lists say now, to tell whether they changed (with tool search, the
        tool list is the meta-tools': it never changes)."""
        up = self._up()
        snapshot = self.sup.snapshot
        tools = (
            () if self.search is not None else tuple((e.name, e.fingerprint) for e in self.tools())
        )
        resources = tuple(
            [(r.name, r.uri) for r in snapshot.resources if r.server in up]
            + [(t.name, t.uri_template) for t in snapshot.templates if t.server in up]
        )
        prompts = tuple((p.name, p.server) for p in snapshot.prompts if p.server in up)
        return tools, resources, prompts

    # -- change notifications ------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Announce every change of the lists to connected clients, until cancelled."""
        async with (
            self.sup.subscribe("tools.*", "mcp.*", "supervisor.*") as events,
            trio.open_nursery() as nursery,
        ):
            self._announced = self._state()
            nursery.start_soon(self._connect_all)
            await nursery.start(self.resource_subscriptions.run)
            await nursery.start(self.held.run)
            nursery.start_soon(self._follow_lists)
            task_status.started()
            async for _ in events:
                events.drain()
                await self.announce()

    async def _follow_lists(self) -> None:
        """Announce each merge of the registry that changed a list: a change of resources
        or prompts alone comes with no event."""
        snapshot = self.sup.snapshot
        while True:
            snapshot = await self.sup.snapshot_after(snapshot)
            await self.announce()

    async def _connect_all(self) -> None:
        try:
            await self.sup.connect_all()
        finally:
            self._connected.set()

    async def first_listing(self) -> None:
        """A listing made while the servers make their first connection waits for them
        (at most :data:`FIRST_LISTING_WAIT` seconds): a client that lists once at start,
        as many do, then sees every server that can be reached."""
        with trio.move_on_after(FIRST_LISTING_WAIT):
            await self._connected.wait()

    async def announce(self) -> None:
        """Tell every client which lists changed since the last announcement, if any."""
        state = self._state()
        before = self._announced
        self._announced = state
        if before is None or state == before:
            return
        pairs = zip(_KINDS, state, before, strict=True)
        changed = [kind for kind, now, then in pairs if now != then]
        log.info("gateway lists changed", lists=changed, tools=len(self.tools()))
        async with trio.open_nursery() as nursery:
            for connection in list(self._connections):
                nursery.start_soon(self._notify, connection, changed)
        for kind in changed:
            await self.subscriptions.publish(_EVENTS[kind]())

    async def _notify(self, connection: Connection, changed: Sequence[str]) -> None:
        with trio.move_on_after(NOTIFY_TIMEOUT), suppress(Exception):
            for kind in changed:
                await getattr(connection, _SENDERS[kind])()

    async def _remember_connection(
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

    # -- tools ---------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if self.search is not None:
            return types.ListToolsResult(tools=list(self.search.tools))
        await self.first_listing()
        host = self._seen_by(ctx)
        entries = self.tools() if host is self else list(host.catalog().values())
        hint = self._cache_hint("tools", {entry.server for entry in entries})
        return types.ListToolsResult(tools=[listed(entry) for entry in entries], **hint)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # The call declares to a 2026-07-28 server what it can of the caller's capabilities
        passing = caller_capabilities.set(_declared(ctx))
        try:
            if self.relay is None:
                return await self._answer_call(ctx, params)
            entry = self.sup.snapshot.named.get(params.name)
            caller = _caller(ctx)
            server = None if entry is None else entry.server
            with self.relay.waiting(ctx, server, None if caller is None else caller.subject):
                return await self._answer_call(ctx, params)
        finally:
            caller_capabilities.reset(passing)

    async def _answer_call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, arguments, progress = params.name, params.arguments or {}, _progress(ctx, params)
        meta: Mapping[str, Any] = params.meta or {}
        # --yes of the command line, honoured only over the local socket: its file mode
        # lets only this user in, who could run the call with --no-gateway --yes anyway.
        local = _is_local(ctx)
        approve = _CLI_YES if meta.get(APPROVE_META) is True and local else None
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        state = round_state(params) if modern else {}
        if "held" in state:  # the caller's answers to its held call's questions
            return await self._answered(ctx, state["held"], params.input_responses, _held_gone)
        if approve is None and self.sup.approver is None:  # asked through elicitation
            approve = round_trip_approver(ctx, params, state) if modern else client_approver(ctx)
        # A 2026-07-28 client answers a server's input requests itself, round by round.
        rounds = None
        if modern:  # and one that declared tasks follows a task the server makes itself
            # the caller's answers to the server's round (with its state, or none: the
            # server gave none, or they come ahead), passed on; the gateway's own, not
            responses = _theirs(params.input_responses)
            takes_tasks = declared(ctx.session.client_capabilities)
            rounds = InputRound(responses, state.get("backing"), takes_tasks)
        host = self._seen_by(ctx)
        # Named before the call: a reconfiguration may rename the tool or remove its
        # server meanwhile, and a round it asks for still comes from that server.
        called = arguments.get("name") if self.search is not None and name in self.search else name
        served_by = self._listed_server(called) if isinstance(called, str) else None
        if self.search is not None and name in self.search:
            search = self.search if host is self else self.search.seen_by(host)
            meta_call = ToolCall(
                name, arguments, progress=progress, approve=approve, spill=False, rounds=rounds
            )
            try:
                answer = await search.call(meta_call)
            except ApprovalAsked as exc:
                return input_required(cast(ApprovalRequest, exc.request))
            except SupervisorError as exc:  # nothing was run: a meta-tool's own refusal
                return _error_result(exc, str(exc), sent=False)
            if isinstance(answer, types.InputRequiredResult):  # the tool ``call`` called
                owner = served_by or self.sup.resolve(arguments["name"])[0]
                return _relayed_round(ctx, answer, owner)
            return answer
        call = ToolCall(
            name,
            arguments,
            _timeout(meta.get(TIMEOUT_META)),
            progress,
            approve,
            False,  # nothing is written to disk: the result is passed on whole
            _log_level(meta.get(types.LOG_LEVEL_META_KEY)),
            rounds,
            for_cli=local,
        )

        async def made() -> types.CallToolResult | types.InputRequiredResult:
            try:
                result = await host.call(call)
            except UnknownTool as exc:
                raise MCPError(types.INVALID_PARAMS, str(exc)) from None
            except ApprovalAsked as exc:  # nothing was sent: the client answers, then again
                return input_required(cast(ApprovalRequest, exc.request))
            except AuthRequired as exc:  # the caller's own login to a perUser server, first
                return login_required(exc, modern=modern)
            if isinstance(result, types.InputRequiredResult):
                return _relayed_round(ctx, result, served_by or self.sup.resolve(name)[0])
            if meta.get(LIMITS_META) is True:
                result = _with_limits(result, self._limits())
            return result

        if modern and served_by is not None and self._asks_by_request(served_by):
            return await self._held_call(ctx, served_by, made, _held_gone)
        return await made()

    # -- calls held across round trips (:mod:`._held`) -----------------------------------

    def _asks_by_request(self, server: str) -> bool:
        """Whether ``server`` would ask its client by sending it requests (it speaks the
        session-based protocol to the gateway), which a 2026-07-28 caller can answer only
        through a held call, if one can be held now."""
        view = self.sup.servers.get(server)
        if view is None or self.relay is None or not self.held.ready():
            return False
        version = view.protocol_version
        return version is not None and version not in MODERN_PROTOCOL_VERSIONS

    async def _held_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        server: str,
        made: Callable[[], Awaitable[_Answer]],
        gone: Callable[[str | None], _Answer],
    ) -> _Answer | types.InputRequiredResult:
        """``made`` — a request of the 2026-07-28 caller of ``ctx`` to ``server``: a call,
        a prompt got, a resource read — made in a task of the gateway's: its answer, or
        the server's first question to the caller, as a round. ``gone`` answers a round
        whose request is no longer held (or raises)."""
        assert self.relay is not None
        caller = _caller(ctx)
        held: Held[_Answer] = Held(server, _principal(ctx))
        relay = self.relay

        async def asked() -> _Answer:
            subject = None if caller is None else caller.subject
            with relay.waiting(ctx, server, subject, held=held):
                return await made()

        self.held.start(held, asked)
        return await self._next_of(held, gone)

    async def _next_of(
        self, held: Held[_Answer], gone: Callable[[str | None], _Answer]
    ) -> _Answer | types.InputRequiredResult:
        """What comes next of ``held``: its answer, or its server's question, a round."""
        try:
            outcome = await held.next()
        except trio.EndOfChannel:
            return gone(held.server)
        if isinstance(outcome, Question):
            return _held_round(held)
        return outcome

    async def _answered(
        self,
        ctx: ServerRequestContext[Any, Any],
        held_id: object,
        responses: Any,
        gone: Callable[[str | None], _Answer],
    ) -> _Answer | types.InputRequiredResult:
        """The caller's answers to its held request's questions: handed to the server,
        and what comes next of the request (or the questions still unanswered, asked
        again)."""
        held: Held[_Answer] | None = self.held.get(held_id, _principal(ctx))
        if held is None:
            return gone(None)
        if held.answer(responses):
            return _held_round(held)
        return await self._next_of(held, gone)

    async def call(self, call: ToolCall) -> types.CallToolResult | types.InputRequiredResult:
        """Make ``call`` through the supervisor's gate, for a client: its result as the
        backing server sent it, and every failure a tool error (``isError``, the text
        saying what happened, ``_meta["mcp-supervisor/error"]`` saying it as data; a call
        that needs approval refused, saying how to allow it). A tool this gateway does
        not know, or does not serve, raises :class:`~supervisor.errors.UnknownTool`
        (naming close matches).

        ``call.timeout`` bounds the whole call (waiting for a restarting server included)
        in place of the server's own timeout; ``call.approve`` decides its approval in
        place of the supervisor's callback. Nothing is written to disk: the result is
        passed on whole, however large. ``call.for_cli``: the caller is the command line
        on the local socket, whose ``--yes`` approves — a refusal says so, in its terms.
        ``call.log_level``: the client's opt-in to this call's log messages (2026-07-28),
        passed on to the backing server. ``call.rounds`` relays a multi-round-trip call:
        the server's ``input_required`` answer is returned as it is — and with
        ``rounds.tasks`` a task the server makes of the call, its id under the server's
        name (:mod:`._tasks`). ``call.caller``: the subject of a team gateway's caller,
        whom the call is made for (its audit line says so)."""
        name = call.name
        entry = self.sup.snapshot.named.get(name)
        if entry is not None and not self.serves(entry.server, name):
            raise UnknownTool(f"tool {name!r} is not served by this gateway")
        # Named before the call: a reconfiguration may rename the tool or remove its
        # server while the call runs, and its answer still comes from that server.
        served_by = self._listed_server(name)
        if call.spill:  # (never written to disk: passed on whole)
            call = attrs.evolve(call, spill=False)
        outcome = await self.sup._call_outcome(call)
        if isinstance(outcome, Failed):
            return _failed(outcome, call.for_cli)
        if isinstance(outcome, Round):
            return outcome.answer
        server = served_by or self.sup.resolve(name)[0]  # one not listed before: now it is
        if isinstance(outcome, Task):  # for the client to follow, through us
            # a task handle, as a dict (the SDK sends it as it is): the declared return
            # type leaves it out, as do SearchHost's and the meta-tools' it must match
            return self.tasks.served(outcome.task, server, call.caller)  # pyright: ignore[reportReturnType]
        if outcome.raw is not None:  # the tool's result, as the server sent it
            return _passed_on(cast(types.CallToolResult, outcome.raw), server)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)],
            _meta={SERVER_META: server},
        )

    def _limits(self) -> Mapping[str, int]:
        """The preview limits of the supervisor's config, under their config names."""
        limits = self.sup.config.settings.limits
        return {key: getattr(limits, field) for key, field in PREVIEW_LIMITS.items()}

    # -- resources and prompts -----------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self.first_listing()
        up = self._up_for(ctx)
        return types.ListResourcesResult(
            **self._cache_hint("resources", up),
            resources=[
                r.resource.model_copy(
                    update={"name": r.name, **resource_served(r.resource, r.server)}
                )
                for r in self.sup.snapshot.resources
                if r.server in up
            ],
        )

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await self.first_listing()
        up = self._up_for(ctx)
        return types.ListResourceTemplatesResult(
            **self._cache_hint("templates", up),
            resource_templates=[
                t.template.model_copy(update={"name": t.name})
                for t in self.sup.snapshot.templates
                if t.server in up
            ],
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        meta: Mapping[str, Any] = params.meta or {}
        timeout = _timeout(meta.get(TIMEOUT_META))
        held = _held_of(ctx, params)
        if held is not None:  # the caller's answers to its held request's questions
            return await self._answered(ctx, held, params.input_responses, _request_gone)
        rounds = _rounds(ctx, params)
        # the server it goes to, named before the read: its requests may go to this caller
        backing = self._read_from(uri, meta)
        what = f"resource {uri!r}"

        async def made() -> types.ReadResourceResult | types.InputRequiredResult:
            try:
                found = apps_backing(uri, self.sup.servers)
                if found is not None:  # a UI resource, under the URI naming its server
                    server, own = found
                    self._refuse_unserved(ctx, server)
                    with self._asking(ctx, server):
                        read = await self.sup.read_resource(
                            own, server=server, timeout=timeout, rounds=rounds
                        )
                    if isinstance(read, types.InputRequiredResult):
                        return _request_round(ctx, read, server, what)
                    return _unstamped(contents_served(read, server))
                named = meta.get(SERVER_META)
                if isinstance(named, str):  # `read --server NAME`: from that server, listed or not
                    if not self.serves(named):
                        refused = "not found: not served by this gateway"
                        raise MCPError(types.INVALID_PARAMS, refused, {"type": "UnknownServer"})
                    self._refuse_unserved(ctx, named)
                    owner: str | None = named
                else:
                    owner = self._resource_owner(ctx, uri)
                with self._asking(ctx, backing):
                    read = await self.sup.read_resource(
                        uri, server=owner, timeout=timeout, rounds=rounds
                    )
                if isinstance(read, types.InputRequiredResult):
                    return _request_round(ctx, read, backing or self._read_from(uri, meta), what)
                return _unstamped(read)
            except UnknownResource as exc:
                data = {"uri": uri, "type": type(exc).__name__}
                raise MCPError(_not_found_code(ctx), str(exc), data) from None
            except (UnknownServer, RequestUnencodable) as exc:
                raise MCPError(
                    types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)
                ) from None
            except ServerRequestError as exc:
                # the backing server's own "not found" (either era's code): the caller's era's
                code = _not_found_code(ctx) if exc.code in _NOT_FOUND else types.INTERNAL_ERROR
                raise MCPError(code, str(exc), error_data(exc)) from None
            except (SupervisorError, TimeoutError) as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None

        if rounds is not None and backing is not None and self._asks_by_request(backing):
            return await self._held_call(ctx, backing, made, _request_gone)
        return await made()

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        try:
            self._resource_owner(ctx, uri)
            await self.resource_subscriptions.subscribe(connection_of(ctx), uri)
        except UnknownResource as exc:
            raise MCPError(_not_found_code(ctx), str(exc), {"uri": uri}) from None
        except RequestUnencodable as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)) from None
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.resource_subscriptions.unsubscribe(connection_of(ctx), str(params.uri))
        return types.EmptyResult()

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self.first_listing()
        up = self._up_for(ctx)
        return types.ListPromptsResult(
            **self._cache_hint("prompts", up),
            prompts=[
                p.prompt.model_copy(update={"name": p.name})
                for p in self.sup.snapshot.prompts
                if p.server in up
            ],
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = params.name
        backing = self._prompt_owner(name)  # (``None``: not listed yet)
        if self._seen_by(ctx) is not self:
            self._refuse_unserved(ctx, backing)
        timeout = _timeout((params.meta or {}).get(TIMEOUT_META))
        held = _held_of(ctx, params)
        if held is not None:  # the caller's answers to its held request's questions
            return await self._answered(ctx, held, params.input_responses, _request_gone)
        rounds = _rounds(ctx, params)

        async def made() -> types.GetPromptResult | types.InputRequiredResult:
            try:
                with self._asking(ctx, backing):
                    prompt = await self.sup.get_prompt(
                        name, params.arguments or {}, timeout=timeout, rounds=rounds
                    )
                if isinstance(prompt, types.InputRequiredResult):
                    server = backing or self._prompt_owner(name)
                    return _request_round(ctx, prompt, server, f"prompt {name!r}")
                return _unstamped(prompt)
            except (UnknownPrompt, PromptArgumentsInvalid, RequestUnencodable) as exc:
                data = error_data(exc, sent=False)
                raise MCPError(types.INVALID_PARAMS, str(exc), data) from None
            except (SupervisorError, TimeoutError) as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None

        if rounds is not None and backing is not None and self._asks_by_request(backing):
            return await self._held_call(ctx, backing, made, _request_gone)
        return await made()

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        context = None if params.context is None else params.context.arguments
        argument = {"name": params.argument.name, "value": params.argument.value}
        if self._seen_by(ctx) is not self:
            ref = params.ref
            if isinstance(ref, types.PromptReference):
                self._refuse_unserved(ctx, self._prompt_owner(ref.name))
            else:
                self._resource_owner(ctx, str(ref.uri))
        try:
            return await self.sup.complete(params.ref, argument, context)
        except (UnknownPrompt, UnknownResource) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except RequestUnencodable as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)) from None
        except ServerRequestError as exc:
            if exc.code == types.METHOD_NOT_FOUND:  # that server completes nothing
                return types.CompleteResult(completion=types.Completion(values=[]))
            raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None
        except (SupervisorError, TimeoutError) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None

    # -- logging ------------------------------------------------------------------------

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """A client's ``logging/setLevel``: it hears log messages from that level up, and
        the backing servers are asked for the most verbose level any client wants."""
        connection = connection_of(ctx)
        level = (
            params.level if self.relay is None else self.relay.set_level(connection, params.level)
        )
        await self.sup.set_log_level(level)
        return types.EmptyResult()


#: What a held request answers: a call's, a prompt's or a read's result.
_Answer = TypeVar("_Answer")

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


def _timeout(value: object) -> float | None:
    """A request's :data:`TIMEOUT_META`, if it is a number of seconds above 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < float("inf") else None


#: The codes a backing server says "resource not found" with: the session-based
#: protocol's, and 2026-07-28's (SEP-2164: invalid params).
_NOT_FOUND = frozenset({RESOURCE_NOT_FOUND, types.INVALID_PARAMS})


def _not_found_code(ctx: ServerRequestContext[Any, Any]) -> int:
    """The code of a resource not found for the request's caller, in its own protocol's
    terms: ``-32602`` on 2026-07-28 (which retired ``-32002``), else ``-32002``."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return types.INVALID_PARAMS
    return RESOURCE_NOT_FOUND


def _log_level(value: object) -> types.LoggingLevel | None:
    """A request's log-level opt-in (``_meta``), if it names a level."""
    return value if value in LEVELS else None


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller | None:
    """The team gateway's caller of the request (:data:`CALLER_SCOPE`), if it has one."""
    scope = getattr(ctx.request, "scope", None)
    return scope.get(CALLER_SCOPE) if isinstance(scope, dict) else None


def _declared(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The client capabilities the caller of ``ctx`` declared (for a 2026-07-28 request,
    in it), as JSON — and the tasks extension, which the gateway follows for a caller
    that does not."""
    capabilities = ctx.session.client_capabilities
    declared = (
        {}
        if capabilities is None
        else capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    extensions = declared.get("extensions") or {}
    declared["extensions"] = {TASKS: {}, **extensions}
    return declared


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Whom a ``requestState`` is bound to: the team gateway's caller (``None``: no one in
    particular — whoever holds the gateway's token)."""
    caller = _caller(ctx)
    return None if caller is None else caller.subject


def _is_local(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request came over the gateway's local socket (:data:`LOCAL_SCOPE`)."""
    scope = getattr(ctx.request, "scope", None)
    return isinstance(scope, dict) and scope.get(LOCAL_SCOPE) is True


async def _approved_by_cli(request: ApprovalRequest) -> bool:
    log.info(
        "approved by the command line's --yes, over the local socket",
        server=request.server,
        tool=request.tool,
        reason=request.reason,
    )
    return True


_CLI_YES = Approver(_approved_by_cli, Decider.CLI_YES)


def _with_limits(result: types.CallToolResult, limits: Mapping[str, int]) -> types.CallToolResult:
    """``result`` with the preview ``limits`` in its ``_meta`` (:data:`LIMITS_META`)."""
    meta = {**(result.meta or {}), LIMITS_META: dict(limits)}
    return result.model_copy(update={"meta": meta})


#: The ``inputResponses`` keys of the gateway's own rounds, never a backing server's.
_OWN_KEYS = frozenset({APPROVAL_KEY, LOGIN_KEY})


def _theirs(responses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A 2026-07-28 caller's answers for the backing server: all it brings but its
    answers to the gateway's own questions (``None`` if that leaves none)."""
    if not responses:
        return None
    theirs = {key: value for key, value in responses.items() if key not in _OWN_KEYS}
    return theirs or None


#: The client capability each kind of input request needs.
_NEEDS: Mapping[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


#: The capability of each name in :data:`_NEEDS`.
_CAPABILITIES: Mapping[str, Callable[[], Any]] = {
    "elicitation": types.ElicitationCapability,
    "sampling": types.SamplingCapability,
    "roots": types.RootsCapability,
}


def _undeclared(
    ctx: ServerRequestContext[Any, Any], result: types.InputRequiredResult
) -> list[str]:
    """The capabilities ``result``'s input requests need that the client of ``ctx`` did
    not declare, by name."""
    capabilities = ctx.session.client_capabilities
    return sorted(
        {
            _NEEDS.get(request.method, request.method)
            for request in (result.input_requests or {}).values()
            if capabilities is None
            or getattr(capabilities, _NEEDS.get(request.method, ""), None) is None
        }
    )


def _relayed_round(
    ctx: ServerRequestContext[Any, Any], result: types.InputRequiredResult, server: str
) -> types.CallToolResult | types.InputRequiredResult:
    """A backing server's ``input_required`` round, for the 2026-07-28 client of ``ctx``:
    its input requests as they are, its ``requestState`` untouched inside the gateway's
    own (which the SDK seals, bound to this call) — or, if it asks for what the client
    did not declare, a tool error saying so."""
    requests = result.input_requests or {}
    missing = _undeclared(ctx, result)
    if missing:
        exc = SupervisorError(
            f"MCP server {server!r} needs input this client did not declare "
            f"({', '.join(missing)}) to complete the call; it was not completed"
        )
        return _error_result(exc, str(exc))
    state = json.dumps({"approved": True, "backing": result.request_state})
    return types.InputRequiredResult(input_requests=requests or None, request_state=state)


def _held_of(
    ctx: ServerRequestContext[Any, Any],
    params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
) -> object | None:
    """The held request a 2026-07-28 caller's ``prompts/get`` or ``resources/read``
    answers the questions of (its ``requestState`` names it), if it does."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    return round_state(params).get("held")


def _rounds(
    ctx: ServerRequestContext[Any, Any],
    params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
) -> InputRound | None:
    """A 2026-07-28 caller's ``prompts/get`` or ``resources/read`` as a relayed
    multi-round-trip request: the answers it brings and the backing server's
    ``requestState``, when it makes again one the gateway relayed a round of (its own
    state says so: :func:`_request_round`); ``None`` for a session-based caller, whom
    the relay asks instead."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    state = round_state(params)
    # the caller's answers to the server's round (with its state, or none), passed on
    return InputRound(_theirs(params.input_responses), state.get("backing"))


def _request_round(
    ctx: ServerRequestContext[Any, Any],
    result: types.InputRequiredResult,
    server: str | None,
    what: str,
) -> types.InputRequiredResult:
    """A backing server's ``input_required`` round of a ``prompts/get`` or
    ``resources/read`` (``what``), for the 2026-07-28 client of ``ctx``, as
    :func:`_relayed_round` passes on a call's — or, if it asks for what the client did
    not declare, the protocol's missing-capability error (``-32021``) naming it."""
    missing = _undeclared(ctx, result)
    if missing:
        required = types.ClientCapabilities(
            **{name: _CAPABILITIES[name]() for name in missing if name in _CAPABILITIES}
        )
        data = {
            "requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True),
            "server": server,
        }
        said = (
            f"MCP server {server!r} needs input this client did not declare "
            f"({', '.join(missing)}) to answer {what}; it was not answered"
        )
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, said, data)
    state = json.dumps({"backing": result.request_state})
    return types.InputRequiredResult(
        input_requests=result.input_requests or None, request_state=state
    )


def _held_round(held: Held[Any]) -> types.InputRequiredResult:
    """The questions ``held``'s server asked its 2026-07-28 caller, as a round: each
    request as the server sent it, and a ``requestState`` naming the held call (which
    the SDK seals, bound to this call and caller)."""
    requests = {question.key: question.request for question in held.pending()}
    return types.InputRequiredResult(
        input_requests=requests,
        request_state=json.dumps({"held": held.id}),
    )


def _no_longer_held(server: str | None, what: str) -> str:
    where = "its MCP server" if server is None else f"MCP server {server!r}"
    return (
        f"the {what} these answers are for is no longer held: it was cancelled at {where} "
        f"after waiting {HOLD_FOR:g} s for an answer (it may have taken effect in part), "
        f"or it has already ended; make the {what} again if it should run"
    )


def _held_gone(server: str | None) -> types.CallToolResult:
    """The answer to a call's round whose held call is no longer held: a tool error."""
    exc = SupervisorError(_no_longer_held(server, "call"))
    return _error_result(exc, str(exc))


def _request_gone(server: str | None) -> Any:
    """The answer to a prompt's or read's round no longer held: ``-32602``."""
    raise MCPError(types.INVALID_PARAMS, _no_longer_held(server, "request"))


def _passed_on(result: types.CallToolResult, server: str | None) -> types.CallToolResult:
    """The backing server's result, its ``_meta`` as :func:`_unstamped` leaves it, with
    the name of the server that answered (:data:`SERVER_META`)."""
    meta = _own_meta(result.meta)
    if server is not None:
        meta[SERVER_META] = server
    return result.model_copy(update={"meta": meta or None})


_PROTOCOL_META = "io.modelcontextprotocol/"
_Result = TypeVar("_Result", bound=types.Result)


def _unstamped(result: _Result) -> _Result:
    """A backing server's answer as the gateway passes it on (a tool's result, a
    resource read, a prompt): without the protocol's own ``_meta`` stamps (its
    ``io.modelcontextprotocol/serverInfo``: those describe a hop, and this one is ours —
    the SDK stamps the gateway's in their place, as on every other answer)."""
    meta = result.meta
    if not meta or not any(key.startswith(_PROTOCOL_META) for key in meta):
        return result
    return result.model_copy(update={"meta": _own_meta(meta) or None})


def _own_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``meta`` without the protocol's own stamps (``io.modelcontextprotocol/…``)."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(_PROTOCOL_META)}


def _failed(outcome: Failed, for_cli: bool) -> types.CallToolResult:
    """A failed call's answer to a gateway's client: a tool's own failure as the server
    sent it; any other failure a tool error saying what happened (a refusal for want of
    approval in the command line's terms ``for_cli``) with its data in ``_meta``. A tool
    not served, an approval asked in a round of its own, the caller's own login and the
    caller's missing capabilities are raised, for the request's handler to answer."""
    exc = outcome.error
    if isinstance(exc, UnknownTool | ApprovalAsked):
        raise exc
    if isinstance(exc, AuthRequired) and exc.login_url is not None:
        raise exc  # the caller's own login first: nothing was sent
    if isinstance(exc, ToolError):
        answer = outcome.answer
        if answer is not None and answer.raw is not None:  # its isError result, as it is
            return _passed_on(cast(types.CallToolResult, answer.raw), exc.server)
        return _error_result(exc, exc.text or str(exc))
    if isinstance(exc, ApprovalRequired):
        return _error_result(exc, exc.cli_message if for_cli else _approval_text(exc))
    if isinstance(exc, ServerRequestError) and exc.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        raise MCPError(exc.code, str(exc), exc.data) from None  # the caller's declaration
    return _error_result(exc, str(exc))


def _approval_text(exc: ApprovalRequired) -> str:
    """The refusal of a call that needs approval, in the gateway's terms: its client
    cannot be asked, and how to allow it (the server's ``autoApprove``, or ``serve
    --yes``)."""
    if exc.allow is not None:
        how = f"{exc.allow}, or start the gateway with --yes"
    elif exc.reason == "listed in approve":
        how = "start the gateway with --yes (it is listed in the server's approve)"
    else:
        how = "start the gateway with --yes"
    return (
        f"tool {exc.tool!r} (server {exc.server!r}) needs approval ({exc.reason}) and the "
        f"gateway's client cannot be asked ({_NOT_ASKED}); the call was not made. To allow "
        f"it: {how}"
    )


#: Why a gateway's client was not asked about a call that needs approval.
_NOT_ASKED = "it declared no elicitation on the session-based protocol"


def _error_result(exc: BaseException, text: str, *, sent: bool = True) -> types.CallToolResult:
    log.info("gateway call failed", error=describe_error(exc))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta=error_meta(exc, sent=sent),
    )


def _progress(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
    """A progress callback relaying the backing server's progress to the client, when
    the client asked for progress (``_meta.progressToken``)."""
    meta: Mapping[str, Any] = params.meta or {}  # a TypedDict: keys by field name or alias
    token = meta.get("progress_token", meta.get("progressToken"))
    if token is None:
        return None
    session = ctx.session
    request_id = None if ctx.request_id is None else str(ctx.request_id)

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        with suppress(Exception):
            await session.send_progress_notification(
                token, progress, total, message, related_request_id=request_id
            )

    return relay
