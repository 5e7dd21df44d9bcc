"""One configured server's handle: what its callers hold, made of parts of one job each.

:class:`ServerHandle` keeps the server's config, its place in the supervision tree (its
child spec and mailbox), what each connection is asked (its log level, its resource
subscriptions, its transport) and its reports (events, the registry's offer); it reads
its :class:`~._state.ServerState` and hands the rest to its parts:

- :func:`~._spec.child_spec`: its child spec, under its config;
- :class:`~._admission.Admission`: whether a tool call may be sent now (its rate limits
  and ``maxConcurrentCalls``);
- :class:`~._calling.ToolCalls`: how a tool call reaches the server;
- :class:`~._reads.Reads`: its other requests (reads, prompts, completions, tasks);
- :class:`~._failing.Failing`: why a request fails, in the server's terms;
- :class:`~._reading.Reading`: its status, health record and metrics, as of now;
- :class:`~._injection.FaultInjection`: the fault engine of its ``faults`` plan;
- :class:`~._tasks_made.TasksMade`: which connection made the tasks passed on to callers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

import mcp_types as types

from ..actors import Address, ChildSpec
from ..auth._broker import AuthProblem, TokenBroker
from ..config._apps import app_name
from ..config._limits import Limits
from ..config._secrets import command_line
from ..events import _catalog as events
from ..log import get_logger
from ..registry._live import Offer
from ..tools._request import Progress, ToolCall
from ..transports._errors import safe_url
from ..transports._faults import Faults, Injected, Injector
from ..transports._open import open_transport
from ..transports._remote import TransportLike
from ..transports._stdio import GRACE_SECONDS, KILL_AFTER_SECONDS
from ._actor import PING_TIMEOUT, CallAnswer, ServerActor
from ._admission import Admission
from ._calling import ToolCalls
from ._failing import Failing
from ._health import Health, HealthRecord, ServerMetrics, ServerStatus
from ._injection import FaultInjection
from ._messages import InputRound
from ._reading import Reading, health_record
from ._reads import Reads
from ._spec import child_spec
from ._startup import StartSlots
from ._state import ServerState
from ._subscriptions import Subscribed
from ._tasks_made import TasksMade
from ._users import UserSessions

if TYPE_CHECKING:
    from ..config._model import ServerConfig
    from ..errors import AuthorizationFailed, AuthRequired
    from ..registry._merge import Listing

log = get_logger("supervisor.server")


def target(config: ServerConfig) -> str | None:
    """What a server runs or reaches, for people: a local server's command line, secret-
    looking arguments masked (``--token=***``), or a remote server's URL without user-info
    and query string (either may hold a secret). A record shows it with the secrets known
    at that moment redacted (:func:`~supervisor.log.redact`). An in-process server's is
    the name its server object calls itself."""
    if config.type == "stdio" and config.command is not None:
        return command_line(config)
    if config.type == "memory":
        return app_name(getattr(config, "app", None))
    if config.url is not None:
        return safe_url(config.url)
    return None


def disabled_record(config: ServerConfig) -> HealthRecord:
    """The health record of a server configured but disabled: never started, so nothing
    is known of it but its transport and :func:`target` (a fresh health's record)."""
    return health_record(
        config.name, str(config.type), ServerStatus.DISABLED, Health(), target=target(config)
    )


# -- the server (outlives incarnations) ----------------------------------------------------


class ServerHandle:
    """One configured MCP server as its callers see it: its config, child spec and
    mailbox, read-only views of its :class:`ServerState`, and event reporting; its parts
    (listed in this module's docstring) do the rest, behind :meth:`call`,
    :meth:`read_resource` and the other requests, :meth:`record`, :meth:`metrics`,
    :meth:`admit` and :meth:`inject`. It never writes that state: its actor and the
    tree's decisions do.

    ``error`` is set for a server whose configuration could not be completed (a missing
    environment variable): it never starts and its calls fail fast with that error.

    A config with a ``faults`` plan (docs/faults.md) gets one
    :class:`~supervisor.transports._faults.Faults` for the server's whole life, made by
    ``injector`` (the supervisor's: a server with a plan and no injector is a
    :class:`~supervisor.errors.ConfigError`), :attr:`fault_engine`: every connection's
    transport injects through it, so a rule's ``nth`` counts across restarts;
    :meth:`faults` is its log, and each fault is logged (info) as it is injected.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        publish: Callable[[events.Event], None],
        client_options: Mapping[str, object] | None = None,
        limits: Limits | None = None,
        error: str | None = None,
        ping_timeout: float = PING_TIMEOUT,
        retry_idempotent: bool = False,
        report: Callable[[Offer], None] | None = None,
        grace: float = GRACE_SECONDS,
        kill_after: float = KILL_AFTER_SECONDS,
        retries: bool = True,
        broker: TokenBroker | None = None,
        start_slots: StartSlots | None = None,
        users: Any = None,
        injector: Injector | None = None,
    ) -> None:
        self.config = config
        #: what makes the server's fault injection from its ``faults`` plan, if given
        self.injector = injector
        #: a ``perUser`` server's sessions for each caller (``users``: the per-user
        #: logins, :class:`~supervisor.auth._users.UserLogins`); ``None``: not per user
        self.users = UserSessions(self, users) if users is not None else None
        #: the start slots each connection waits for (see :class:`StartSlots`); ``None``:
        #: it connects at once
        self.start_slots = start_slots
        #: the OAuth token broker of a remote server that uses OAuth (docs/auth.md)
        self.broker = broker
        #: false: one attempt, never restarted (what a one-shot command wants)
        self.retries = retries
        self.ping_timeout = ping_timeout
        # A local server's stop: stdin closed, `grace` s, SIGTERM, `kill_after` s, SIGKILL.
        self._grace, self._kill_after = grace, kill_after
        self.retry_idempotent = retry_idempotent
        self.name = config.name
        self.publish = publish
        self.client_options = dict(client_options or {})
        #: the level the server is asked to log from (:meth:`set_log_level`; ``None``:
        #: never asked, it logs as it likes on the session-based protocol)
        self.log_level: types.LoggingLevel | None = None
        #: the resources subscribed to (:meth:`subscribe_resource`), asked of each
        #: connection
        self.subscribed = Subscribed()
        #: the tasks passed on to their callers: the incarnation that made each
        self.tasks_made = TasksMade()
        self.limits = limits or Limits()
        self.error = error
        #: whether a tool call may be sent now (``maxConcurrentCalls``, ``rateLimit``)
        self.admission = Admission(config.name, config)
        #: what it runs or reaches, for people (see :func:`target`)
        self.target = target(config)
        #: what the server is now: written by its actor and the tree's decisions only
        self.state = ServerState(config.name, self.limits, error=error)
        # Where what it offers is reported (the registry's mailbox), if anywhere.
        self._report = report
        self.spec: ChildSpec = child_spec(self, None)
        #: its fault engine, if its config has a ``faults`` plan
        self.injection = FaultInjection(config.name, config, injector)
        #: why its requests fail, in its terms
        self.failing = Failing(self)
        #: its status, health record and metrics as of now
        self.reading = Reading(self)
        #: how its tool calls reach it, and its other requests
        self.calls = ToolCalls(self)
        self.reads = Reads(self)

    # -- a reconfiguration (see SupervisorHandle.reconfigure) ----------------------------

    def reconfigured(self, config: ServerConfig) -> ChildSpec:
        """Take ``config``, whose changes are policy only (see ``config._diff``): read
        from now on, by the next call, probe or decision. Returns the server's new child
        spec (same mailbox), for the tree to take in place of the old one."""
        self.config = config
        self.target = target(config)
        self.admission.bound(config)
        self.spec = child_spec(self, self.address)
        return self.spec

    def replaced(self, config: ServerConfig, broker: TokenBroker | None) -> ChildSpec:
        """Take ``config``, which changes what runs or how it is reached: the next
        incarnation runs it (the tree replaces the running one with the spec returned,
        same mailbox), with ``broker`` and a fault engine of its own."""
        self.broker = broker
        spec = self.reconfigured(config)
        self.injection.made(config, self.injector)
        return spec

    def settings_changed(self, limits: Limits, ping_timeout: float) -> None:
        """The ``supervisor`` settings changed: ``limits`` for the next connection,
        ``ping_timeout`` for the next probe."""
        self.limits = limits
        self.ping_timeout = ping_timeout

    def detach(self) -> None:
        """The server leaves the supervisor (a reconfiguration removed or disabled it):
        it reports nothing more to the registry."""
        self._report = None

    @property
    def address(self) -> Address:
        """Its mailbox (the spec's)."""
        return self.spec.address

    # -- its state, read-only (see :class:`ServerState`) -----------------------------

    @property
    def health(self) -> Health:
        """Its running health (its actor and the tree's decisions keep it)."""
        return self.state.health

    @property
    def capabilities(self) -> types.ServerCapabilities | None:
        """What the server declared it can do when it last connected (``None``: it never
        has yet)."""
        return self.state.capabilities

    def cache_hint(self, kind: str) -> tuple[int, str]:
        """How long its last ``kind`` listing (``tools``, ``resources``, ``templates``,
        ``prompts``) may be cached, in ms, and by whom (``public``/``private``): what the
        server said (2026-07-28), else ``(0, "private")``."""
        return self.state.cache_hints.get(kind, (0, "private"))

    @property
    def tools(self) -> list[types.Tool]:
        """The tools the server listed last (kept while it restarts)."""
        return self.state.tools

    @property
    def listing(self) -> Listing:
        """Its tools as last listed, checked once when they arrived."""
        return self.state.listing

    @property
    def resources(self) -> list[types.Resource]:
        """The resources it listed last (kept while it restarts)."""
        return self.state.resources

    @property
    def resource_templates(self) -> list[types.ResourceTemplate]:
        """The resource templates it listed last (kept while it restarts)."""
        return self.state.resource_templates

    @property
    def prompts(self) -> list[types.Prompt]:
        """The prompts it listed last (kept while it restarts)."""
        return self.state.prompts

    @property
    def listed(self) -> bool:
        """Whether some connection listed its resources and prompts."""
        return self.state.listed

    @property
    def auth_problem(self) -> AuthProblem | None:
        """Why the server waits for an OAuth login (or was refused), while it does."""
        return self.state.auth_problem

    @property
    def use_sse(self) -> bool:
        """Whether a ``type: remote`` server turned out to speak only legacy SSE."""
        return self.state.use_sse

    @property
    def current(self) -> ServerActor | None:
        """The live incarnation, whose connection calls may use directly."""
        return self.state.current

    @property
    def incarnations(self) -> int:
        """Incarnations started so far."""
        return self.state.incarnations

    @property
    def attempt(self) -> int:
        """The consecutive restart the supervision tree last decided on (its copy)."""
        return self.state.attempt

    def tool(self, name: str) -> types.Tool | None:
        """The listed tool of that (original) name, if any."""
        return self.state.tool(name)

    def prompt(self, name: str) -> types.Prompt | None:
        """The listed prompt of that (original) name, if any."""
        return next((p for p in self.prompts if p.name == name), None)

    # -- what it is now, for people (see :class:`~._reading.Reading`) ------------------

    def status(self) -> ServerStatus:
        """The server's status as shown: a connected server not heard from within its
        window (:meth:`window`) is ``unverified``."""
        return self.reading.status()

    def live_status(self) -> ServerStatus:
        """The server's status as its actor and the tree left it (never ``unverified``):
        what decides whether its tools are offered."""
        return self.reading.live_status()

    def window(self) -> float | None:
        """Seconds a connected server may go unheard from and still be shown up
        (``None``: it is not probed)."""
        return self.reading.window()

    def record(self) -> HealthRecord:
        """The health record as of now."""
        return self.reading.record()

    def metrics(self) -> ServerMetrics:
        """Uptime, downtime, reconnects, calls and latency (docs/monitoring.md) as of now."""
        return self.reading.metrics()

    # -- OAuth -------------------------------------------------------------------------

    def auth_exception(
        self, problem: AuthProblem | None = None
    ) -> AuthRequired | AuthorizationFailed:
        """The error calls fail with while the server waits for a login (or was refused)."""
        return self.failing.auth_exception(problem)

    # -- what the supervision tree decided -----------------------------------------------

    def announce(self, attempt: int, retry_in: float | None) -> None:
        """Publish the ``mcp.error`` a decision of the tree calls for (see
        :func:`~supervisor.server._hook.tree_hook`): its last error, and what comes next."""
        error = self.health.last_error or "unknown error"
        self.emit(
            events.ServerErrored(server=self.name, error=error, retry_in=retry_in, attempt=attempt)
        )
        # The supervision tree logs its decisions (with the same reason): not logged here.

    # -- callers' bounds (docs/servers.md, "Containing a server") -----------------------

    def admit(self, tool: str) -> None:
        """Let a call of ``tool`` (its merged name) be sent now, or refuse it before
        anything is sent (:class:`~supervisor.errors.RateLimited`, counted): over the
        server's ``rateLimit``, or over its caller's own limits (a team gateway's policy:
        :data:`~supervisor.tools._limits.caller_admission`). A call let through takes a
        token of each."""
        self.admission.admit(tool)

    # -- fault injection ---------------------------------------------------------------

    @property
    def fault_engine(self) -> Faults | None:
        """The server's fault engine, if its config has a ``faults`` plan."""
        return self.injection.engine

    def faults(self) -> list[Injected]:
        """The faults injected into this server so far, in order (empty without a plan)."""
        return self.injection.log()

    async def inject(self, action: str) -> Injected:
        """Inject ``action`` (``kill``, ``hang``, ``resume``, ``list_changed``) into the
        current connection now, recorded in :meth:`faults` with rule ``-1``.

        Raises :class:`ValueError` for a server without a ``faults`` plan (give it one;
        ``[]`` will do) or for another action, and
        :class:`~supervisor.errors.ServerUnavailable` when it has no connection now."""
        return await self.injection.inject(action, lambda: self.status().value)

    # -- what each connection is asked ------------------------------------------------

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Have the server send its log messages from ``level`` up: asked now
        (``logging/setLevel``) if it is connected, declared logging and speaks the
        session-based protocol, and again on each new connection; a 2026-07-28 server's
        tool calls carry the level in their ``_meta``, as that protocol asks. What the
        server sends goes to the ``logging_callback`` the supervisor was opened with."""
        self.log_level = level
        actor = self.current
        if actor is not None:
            await actor.set_log_level(level)

    async def subscribe_resource(self, uri: str) -> None:
        """Subscribe to changes of the resource ``uri`` (the server's own URI), now and on
        each new connection, if the server declared ``resources.subscribe``: each change
        it announces is published as ``mcp.resource.updated`` (see
        :mod:`supervisor.server._subscriptions`). Returns once a live connection has
        asked its server (at most the request timeout), or at once when none is live.
        Subscribing twice is subscribing once. A URI JSON cannot carry is refused
        (:class:`~supervisor.errors.RequestUnencodable`): no connection could ask for it."""
        self.reads.sendable("resources/subscribe", {"uri": uri})
        if self.subscribed.add(uri):
            await self.subscribed.settled(self.config.timeout)

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop the subscription to ``uri`` (nothing happens if there was none)."""
        self.subscribed.discard(uri)

    # -- each connection's transport ----------------------------------------------------

    def transport(self) -> TransportLike:
        """A fresh transport for one connection attempt (with the fault plan, if any)."""
        return open_transport(
            self.config,
            self.limits,
            self.broker,
            self.injection.engine,
            sse=self.use_sse,
            grace=self._grace,
            kill_after=self._kill_after,
            on_spawn=self._spawned,
            on_stderr=self._stderr_line,
            auth_error=self.auth_exception,
        )

    def _spawned(self, pid: int) -> None:
        if (actor := self.current) is not None:  # the incarnation whose connection spawned it
            actor.spawned(pid)

    def _stderr_line(self, line: str) -> None:
        log.debug("server stderr", server=self.name, line=line)

    # -- what it reports ---------------------------------------------------------------

    def changed(self) -> None:
        """Report what the server offers now (its listings, whether it is connected)."""
        if self._report is None:
            return
        offer = Offer(
            server=self.name,
            prefix=self.config.prefix,
            listing=self.listing,
            connected=self.live_status() in (ServerStatus.CONNECTED, ServerStatus.DEGRADED),
            resources=tuple(self.resources),
            templates=tuple(self.resource_templates),
            prompts=tuple(self.prompts),
        )
        try:
            self._report(offer)
        except Exception:
            log.exception("reporting to the registry failed", server=self.name)

    def emit(self, event: events.Event) -> None:
        try:
            self.publish(event)
        except Exception:
            log.exception("publishing an event failed", server=self.name, kind=event.kind)

    # -- tool calls --------------------------------------------------------------------

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, object] | None,
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> CallAnswer:
        """Call the server's tool ``tool`` (its own name) with ``arguments`` as they are,
        past the gate (nothing resolved, checked or approved), within ``timeout``
        (default: the server's request timeout): :meth:`call` of a plain call."""
        call = ToolCall(tool, arguments, timeout, progress)
        return await self.call(call, tool, call.arguments)

    async def call(
        self,
        call: ToolCall,
        tool: str,
        arguments: Mapping[str, object],
        call_id: str | None = None,
    ) -> CallAnswer:
        """Send ``call`` (of ``tool``, the server's own name, with ``arguments`` as
        checked) through the mailbox, translating actor errors into server errors;
        ``call_id`` (a recorded call's) goes to the server in the request's ``_meta``, and
        so does the call's ``log_level`` (for a 2026-07-28 server; default: the level of
        :meth:`set_log_level`); ``call.rounds`` relays a multi-round-trip call
        (:class:`~supervisor.server._messages.InputRound`). On a ``perUser`` server, a
        call for a ``call.caller`` (a team gateway's subject) goes on that caller's own
        session, with their own tokens (:class:`~._users.UserSessions`).

        Calls in a row that time out on a live connection (``degradedAfter``, default 3)
        make the server ``degraded``: it is probed at once, and restarted if the probe
        goes unanswered; the next answered call makes it ``connected`` again.
        """
        return await self.calls.call(call, tool, arguments, call_id)

    def check_available(self) -> None:
        """Raise the :class:`~supervisor.errors.ServerUnavailable` a call would fail with
        at once (misconfigured, failed, stopped); return if calls may be sent or wait."""
        self.failing.check_available()

    # -- requests other than tool calls --------------------------------------------------

    async def list_tools(self, timeout: float | None = None) -> list[types.Tool]:
        return await self.reads.list_tools(timeout)

    @overload
    async def read_resource(
        self, uri: str, timeout: float | None = None, *, rounds: None = None
    ) -> types.ReadResourceResult: ...

    @overload
    async def read_resource(
        self, uri: str, timeout: float | None = None, *, rounds: InputRound
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def read_resource(
        self, uri: str, timeout: float | None = None, *, rounds: InputRound | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read ``uri`` through the mailbox (waiting while the server connects or
        restarts), within ``timeout`` (default: the server's request timeout).

        Reading is read-only: a read in flight when the connection dies is sent once more
        on the next connection. Raises :class:`~supervisor.errors.ServerUnavailable` at
        once for a failed or stopped server, :class:`~supervisor.errors.RequestTimeout`,
        and :class:`~supervisor.errors.ServerRequestError` for an
        MCP error answer (an unknown URI, say) or a second lost connection; a URI JSON
        cannot carry is :class:`~supervisor.errors.RequestUnencodable`, sent nothing.
        ``rounds`` relays a multi-round-trip read (2026-07-28), as :meth:`call_tool`'s
        does a call: the server's ``input_required`` answer is returned as it is.
        """
        return await self.reads.read_resource(uri, timeout, rounds)

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
        *,
        rounds: None = None,
    ) -> types.GetPromptResult: ...

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
        *,
        rounds: InputRound,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        timeout: float | None = None,
        *,
        rounds: InputRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Get the prompt ``name`` (its original name) with ``arguments``; waits, retries
        and raises as :meth:`read_resource` does, and relays its ``rounds`` as it does."""
        return await self.reads.get_prompt(name, arguments, timeout, rounds)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Completions for ``argument`` (``{"name": …, "value": …}``) of the prompt or
        resource template ``ref`` (by the server's own names), ``context`` holding the
        arguments given so far; waits, retries and raises as :meth:`read_resource` does."""
        return await self.reads.complete(ref, argument, context, timeout)

    # -- tasks -------------------------------------------------------------------------

    def task_made(self, task_id: str, incarnation: int) -> None:
        """Remember that the connection ``incarnation`` passed on the task ``task_id``
        (for its caller to follow), to tell later whether the server restarted since —
        the latest :data:`~._tasks_made.TASKS_KEPT` tasks are remembered."""
        self.tasks_made.made(task_id, incarnation)

    def task_outlived(self, task_id: str) -> bool:
        """Whether the server was connected again (restarted, reconnected) since it made
        the task ``task_id`` (as far as this process remembers)."""
        actor = self.current
        return self.tasks_made.outlived(task_id, None if actor is None else actor.number)

    async def task_request(
        self, method: str, params: Mapping[str, object], timeout: float | None = None
    ) -> dict[str, object]:
        """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (``method``) with
        ``params`` (``taskId`` as this server named it); its result, as JSON. Waits,
        retries and raises as :meth:`read_resource` does."""
        return await self.reads.task_request(method, params, timeout)
