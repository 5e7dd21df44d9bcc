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

The gateway is the owner of its parts, each in a module of its own:

* :class:`~._served.Served` — what it serves now (its ``tools`` and ``servers``
  narrowing, withdrawn servers left out), and the catalog of that;
* :class:`~._access.Access` — what each team gateway's caller may use of it;
* :class:`~._tool_requests.ToolRequests`, :class:`~._resource_requests.ResourceRequests`
  and :class:`~._prompt_requests.PromptRequests` — the answers to the SDK's requests
  (calls made by :class:`~._call_answers.CallAnswers`; plain: :class:`~._plain_calls.PlainCalls`);
* :class:`~._asking.Asking` — backing servers' questions to the client whose request
  waits (the :class:`~._relay.Relay`, or 2026-07-28 rounds, :mod:`._held`);
* :class:`~._announce.Announcer` — the change notifications;
* :class:`~._documents.Documents` — the ``/tools``, ``/resources`` and ``/prompts``
  documents of the HTTP front;
* :class:`~._tasks.GatewayTasks`, :class:`~._subscriptions.ResourceSubscriptions` and
  :class:`~._search.ToolSearch` — tasks, resource subscriptions and tool search;
* :class:`~._server.GatewayServer` — the SDK's server it answers through, declaring
  what its backing servers offer;
* :mod:`._answers` — how a backing server's answer, or a failure, is passed on;
  :mod:`._context` — what the gateway reads of a request.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs
import mcp_types as types
import trio
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPDeprecationWarning

from .._version import __version__
from ..errors import UnknownTool
from ..tools._outcome import ERROR_META
from ..tools._request import Failed, Round, Task, ToolCall
from ._access import Access
from ._announce import Announcer
from ._answers import failed, passed_on
from ._asking import Asking
from ._context import (
    APPROVE_META,
    CALLER_SCOPE,
    LIMITS_META,
    LOCAL_SCOPE,
    SERVER_META,
    TIMEOUT_META,
    subject_of,
)
from ._documents import Documents
from ._held import HeldCalls
from ._plain_calls import PlainCalls
from ._policy import Policy
from ._prompt_requests import PromptRequests
from ._relay import connection_of
from ._resource_requests import ResourceRequests
from ._search import INSTRUCTIONS, ToolSearch
from ._served import WITHDRAWN, Served
from ._server import SEARCH_CHANGES, GatewayServer
from ._subscriptions import ResourceSubscriptions
from ._tasks import GatewayTasks
from ._tool_requests import ToolRequests

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..registry import Catalog, Entry
    from ..runtime import SupervisorHandle
    from ._relay import Relay
    from ._resource import Caller

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

_INSTRUCTIONS = (
    "Tools, resources and prompts of several MCP servers, supervised and merged by "
    "mcp-supervisor. A tool whose server is down answers with an error saying so; the list "
    "changes as servers fail and recover."
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

    It owns its parts (the module's docstring lists them) and makes a client's call
    through the supervisor's gate (:meth:`call`); the rest of its methods are theirs.
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
        #: who answers backing servers' requests (the client whose call waits)
        self.relay = relay
        #: what this gateway serves now (its ``tools`` and ``servers`` narrowing)
        self.served = served = Served(sup, tools, servers, relays=relay is not None)
        #: what each caller of a team gateway may use (its :class:`~._policy.Policy`)
        self.access = access = Access(self, served, policy)
        #: 2026-07-28 callers' calls held while their session-based server asks them
        self.held = HeldCalls()
        #: how backing servers' questions reach the client whose request waits
        self.asking = asking = Asking(sup, relay, self.held)
        #: the meta-tools, when tools are found by search rather than listed
        self.search = ToolSearch(self) if tool_search else None
        #: the change notifications, to clients of both eras
        self.announcer = Announcer(served, tools_listed=not tool_search)
        #: where 2026-07-28 clients' ``subscriptions/listen`` streams get their events
        self.subscriptions = self.announcer.subscriptions
        #: who is subscribed to which resource (both eras), and the backing servers asked
        self.resource_subscriptions = ResourceSubscriptions(
            sup, self.subscriptions, access.may_read
        )
        #: the ``tools/*``, ``resources/*`` and ``prompts/*`` answers
        self.tool_requests = tool_requests = ToolRequests(self, served, access, asking, self.search)
        resources = ResourceRequests(served, access, asking, self.resource_subscriptions)
        self.resource_requests = resources
        self.prompt_requests = prompts = PromptRequests(served, access, asking)
        #: the ``/tools``, ``/resources`` and ``/prompts`` documents
        self.documents = Documents(served, access)
        with warnings.catch_warnings():  # logging, deprecated by 2026-07-28, is passed on
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server = GatewayServer(
                name,
                version=__version__,
                instructions=INSTRUCTIONS if tool_search else _INSTRUCTIONS,
                on_list_tools=tool_requests.list_tools,
                on_call_tool=tool_requests.call_tool,
                on_list_resources=resources.list_resources,
                on_list_resource_templates=resources.list_templates,
                on_read_resource=resources.read_resource,
                on_list_prompts=prompts.list_prompts,
                on_get_prompt=prompts.get_prompt,
                on_subscriptions_listen=self.resource_subscriptions.listen,
                on_subscribe_resource=resources.subscribe,
                on_unsubscribe_resource=resources.unsubscribe,
                on_completion=prompts.complete,
                on_set_logging_level=self._set_logging_level,
            )
        self.server.offered = served.offered
        self.server.get_tool_input_schema = served.input_schema
        if tool_search:
            self.server.changes = SEARCH_CHANGES
        #: ``tasks/get``, ``tasks/update`` and ``tasks/cancel``, to the server of the task
        self.tasks = GatewayTasks(sup, served.serves, access.seen_by, key)
        self.tasks.install(self.server)
        self.server.middleware.append(self.announcer.remember_connection)
        # an approval asked in another round trip carries a requestState: sealed here, bound
        # to its tool, arguments and caller, under ``key`` (replicas share it) or our own
        #: the replicas' key (else one of this process's own): sealed states, task ids,
        #: and the per-user login links
        self.key = key or os.urandom(32)
        security = RequestStateSecurity(keys=[self.key], bind_principal=subject_of)
        boundary = RequestStateBoundary(security, default_audience=name)
        self.server.middleware.append(boundary)
        PlainCalls(tool_requests, self.server).install(boundary, self.announcer.remember_connection)

    # -- what is served (:class:`~._served.Served`, :class:`~._access.Access`) -----------

    @property
    def policy(self) -> Policy:
        """Who may use what, per caller of a team gateway (:meth:`set_policy`)."""
        return self.access.policy

    def set_policy(self, policy: Policy) -> None:
        """Narrow each caller by ``policy`` from its next request on (a reloaded config's
        ``gateway.policy``); what callers spent of the rate limits both policies have is
        kept."""
        self.access.set_policy(policy)

    def serves(self, server: str, name: str | None = None) -> bool:
        """Whether this gateway serves ``server`` (and its tool ``name``) at all."""
        return self.served.serves(server, name)

    def offered(self) -> set[str]:
        """The optional capabilities this gateway declares
        (:meth:`~._served.Served.offered`)."""
        return self.served.offered()

    def catalog(self) -> Catalog:
        """The tools served now (:meth:`~._served.Served.catalog`)."""
        return self.served.catalog()

    def tools(self) -> list[Entry]:
        """The tools served now (:meth:`catalog`), in catalog order."""
        return self.served.tools()

    def served_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of the tool ``name`` as this gateway serves it (a meta-tool's
        with tool search), or ``None`` for a tool it does not serve."""
        if self.search is not None and name in self.search:
            return self.search.schema(name)
        return self.served.input_schema(name)

    async def first_listing(self) -> None:
        """Return once the servers made their first connection, or a while passed
        (:meth:`~._served.Served.first_listing`)."""
        await self.served.first_listing()

    async def tools_document(
        self, query: str | None = None, limit: int = 20, *, caller: Caller | None = None
    ) -> dict[str, object]:
        """What ``mcp-supervisor tools`` prints of this gateway
        (:meth:`~._documents.Documents.tools_document`)."""
        return await self.documents.tools_document(query, limit, caller=caller)

    async def resources_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor resources`` prints of this gateway
        (:meth:`~._documents.Documents.resources_document`)."""
        return await self.documents.resources_document(caller=caller)

    async def prompts_document(self, *, caller: Caller | None = None) -> dict[str, object]:
        """What ``mcp-supervisor prompts`` prints of this gateway
        (:meth:`~._documents.Documents.prompts_document`)."""
        return await self.documents.prompts_document(caller=caller)

    # -- change notifications (:class:`~._announce.Announcer`) ---------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Announce every change of the lists to connected clients, until cancelled."""
        announcer = self.announcer
        async with (
            self.sup.subscribe("tools.*", "mcp.*", "supervisor.*") as events,
            trio.open_nursery() as nursery,
        ):
            announcer.start()
            nursery.start_soon(self.served.connect_all)
            await nursery.start(self.resource_subscriptions.run)
            await nursery.start(self.held.run)
            nursery.start_soon(announcer.follow_lists)
            task_status.started()
            async for _ in events:
                events.drain()
                await announcer.announce()

    async def announce(self) -> None:
        """Tell every client which lists changed since the last announcement, if any."""
        await self.announcer.announce()

    # -- the call ------------------------------------------------------------------------

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
        served = self.served
        entry = self.sup.snapshot.named.get(name)
        if entry is not None and not served.serves(entry.server, name):
            raise UnknownTool(f"tool {name!r} is not served by this gateway")
        # Named before the call: a reconfiguration may rename the tool or remove its
        # server while the call runs, and its answer still comes from that server.
        served_by = served.listed_server(name)
        if call.spill:  # (never written to disk: passed on whole)
            call = attrs.evolve(call, spill=False)
        outcome = await self.sup._call_outcome(call)
        if isinstance(outcome, Failed):
            return failed(outcome, call.for_cli)
        if isinstance(outcome, Round):
            return outcome.answer
        server = served_by or self.sup.resolve(name)[0]  # one not listed before: now it is
        if isinstance(outcome, Task):  # for the client to follow, through us
            # a task handle, as a dict (the SDK sends it as it is): the declared return
            # type leaves it out, as do SearchHost's and the meta-tools' it must match
            return self.tasks.served(outcome.task, server, call.caller)  # pyright: ignore[reportReturnType]
        if outcome.raw is not None:  # the tool's result, as the server sent it
            return passed_on(cast(types.CallToolResult, outcome.raw), server)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)],
            _meta={SERVER_META: server},
        )

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
