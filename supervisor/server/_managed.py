"""One configured server's handle: config, mailbox, calls, reads of its state, and the
translation of its errors."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast, overload

import mcp_types as types
import msgspec
import trio

from .._util._jsontext import unencodable
from .._util._plural import plural
from ..actors import (
    ActorStopped,
    ActorUnavailable,
    CallTimeout,
    ChildSpec,
    Intensity,
    RequestAborted,
    Restart,
    actor_spec,
)
from ..actors._mailbox import AddressState
from ..auth._broker import AuthProblem, BrokerState, TokenBroker
from ..calls import _tracing as tracing
from ..calls._audit import audit_outcome
from ..calls._limits import CallSlots, TokenBucket, caller_admission, parse_rate, refuse
from ..calls._request import Progress, ToolCall
from ..config._apps import app_name
from ..config._faults import NO_INJECTOR
from ..config._limits import Limits
from ..config._secrets import command_line
from ..errors import (
    AuthorizationFailed,
    AuthRequired,
    CallMayHaveTakenEffect,
    CallQueueTimeout,
    ConfigError,
    FieldError,
    RateLimited,
    RequestTimeout,
    RequestUnencodable,
    ServerRequestError,
    ServerUnavailable,
    ToolCallTimeout,
)
from ..events import _catalog as events
from ..log import get_logger, redact
from ..registry._live import Offer
from ..registry._merge import Listing
from ..transports import _bounds
from ..transports._encoding import caller_capabilities
from ..transports._errors import safe_url
from ..transports._faults import Faults, Injected, Injector
from ..transports._open import open_transport
from ..transports._remote import TransportLike
from ..transports._stdio import GRACE_SECONDS, KILL_AFTER_SECONDS, StdioTransport
from ..transports._watch import RETURN_EVERY, port_reopened, watched_address
from ._actor import PING_TIMEOUT, CallAnswer, ServerActor
from ._health import Health, HealthRecord, ServerMetrics, ServerStatus
from ._messages import (
    CallTool,
    Complete,
    GetPrompt,
    InputRound,
    ListTools,
    ReadResource,
    TaskRequest,
    _NotSent,
)
from ._probes import probe_method
from ._startup import StartSlots
from ._state import ServerState
from ._subscriptions import Subscribed
from ._users import UserSessions

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..config._model import ServerConfig
    from ..registry._merge import Listing

log = get_logger("supervisor.server")

#: Calls that may wait in one server's mailbox.
MAILBOX = 4096
#: Tasks passed on to their callers that a server remembers having made (the latest).
TASKS_KEPT = 4096


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


def _shown(target: str | None) -> str | None:
    return None if target is None else redact(target)


def disabled_record(config: ServerConfig) -> HealthRecord:
    """The health record of a server configured but disabled: never started, so nothing
    is known of it but its transport and :func:`target`."""
    return HealthRecord(
        server=config.name,
        type=str(config.type),
        status=ServerStatus.DISABLED,
        connected_since=None,
        last_ok=None,
        last_error=None,
        error_count=0,
        consecutive_failures=0,
        restarts=0,
        tool_count=None,
        unsupported_tools=None,
        connect_time=None,
        next_retry_at=None,
        retry_attempt=0,
        calls_ok=0,
        calls_failed=0,
        latency_p50_ms=None,
        latency_p99_ms=None,
        pid=None,
        target=_shown(target(config)),
    )


# -- the server (outlives incarnations) ----------------------------------------------------


class ServerHandle:
    """One configured MCP server as its callers see it: config, mailbox, calls (directly
    on the live connection, or through the mailbox), reads of its :class:`ServerState`
    (:meth:`record`, :meth:`metrics`), and event reporting. It never writes that state:
    its actor and the tree's decisions do.

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
        #: the tasks passed on to their callers, by id: the incarnation that made each
        self._tasks_made: dict[str, int] = {}
        self.limits = limits or Limits()
        self.error = error
        #: the bound on its tool calls in flight (``maxConcurrentCalls``; ``None``: none)
        self.slots: CallSlots | None = None
        self._bucket: TokenBucket | None = None  # its ``rateLimit``'s
        #: calls refused over a rate limit: the server's own (``server``), a caller's
        self.rate_limited = {"server": 0, "caller": 0}
        self._bound_calls(config)
        #: what it runs or reaches, for people (see :func:`target`)
        self.target = target(config)
        #: what the server is now: written by its actor and the tree's decisions only
        self.state = ServerState(config.name, self.limits, error=error)
        # Where what it offers is reported (the registry's mailbox), if anywhere.
        self._report = report
        self.spec: ChildSpec = self._spec(None)
        #: the server's fault engine, if its config has a ``faults`` plan
        self.fault_engine = self._fault_engine()

    def _spec(self, address: Any) -> ChildSpec:
        """The server's child spec under its config (serving ``address``, else a new one)."""
        config = self.config
        # The attempt budget: max_attempts restarts in a row (the count starts over once
        # the server stayed up backoff.stable_after), then give_up.
        return actor_spec(
            self.name,
            lambda: ServerActor(self),
            mailbox=MAILBOX,
            restart=config.restart if self.retries else Restart.TEMPORARY,
            give_up=config.give_up,
            intensity=Intensity(max_restarts=config.max_attempts, within_seconds=math.inf),
            backoff=config.backoff,
            shutdown_timeout=config.shutdown_timeout,
            hurry=self._returned if self._returns_to() is not None else None,
            address=address,
        )

    def _fault_engine(self) -> Faults | None:
        plan = getattr(self.config, "faults", None)
        if plan is None:
            return None
        kind = str(self.config.type)
        plan.check_supported(f"a {kind} server", http=kind in ("http", "sse"))
        if self.injector is None:
            path = getattr(self.config, "path", self.name)  # (duck-typed configs: none)
            raise ConfigError([FieldError(f"{path}.faults", NO_INJECTOR)])
        engine = self.injector.faults(plan, server=self.name, on_inject=self._injected)
        with contextlib.suppress(RuntimeError):  # outside trio: its clock starts later
            engine.start()  # the servers of one supervisor share a start
        if kind == "sse":
            log.warning(
                "fault plan not applied: legacy SSE servers do not inject faults",
                server=self.name,
            )
        return engine

    # -- a reconfiguration (see SupervisorHandle.reconfigure) ----------------------------

    def reconfigured(self, config: ServerConfig) -> ChildSpec:
        """Take ``config``, whose changes are policy only (see ``config._diff``): read
        from now on, by the next call, probe or decision. Returns the server's new child
        spec (same mailbox), for the tree to take in place of the old one."""
        self.config = config
        self.target = target(config)
        self._bound_calls(config)
        self.spec = self._spec(self.address)
        return self.spec

    def replaced(self, config: ServerConfig, broker: TokenBroker | None) -> ChildSpec:
        """Take ``config``, which changes what runs or how it is reached: the next
        incarnation runs it (the tree replaces the running one with the spec returned,
        same mailbox), with ``broker`` and a fault engine of its own."""
        self.broker = broker
        spec = self.reconfigured(config)
        self.fault_engine = self._fault_engine()
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
    def address(self):  # noqa: ANN201 - the spec's Address
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
        self._sendable("resources/subscribe", {"uri": uri})
        if self.subscribed.add(uri):
            await self.subscribed.settled(self.config.timeout)

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop the subscription to ``uri`` (nothing happens if there was none)."""
        self.subscribed.discard(uri)

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

    def status(self) -> ServerStatus:
        """The server's status as shown: a connected server not heard from within its
        window (:meth:`window`) is ``unverified``."""
        status = self.live_status()
        if status is ServerStatus.CONNECTED and self._unheard() is not None:
            return ServerStatus.UNVERIFIED
        return status

    def window(self) -> float | None:
        """Seconds a connected server may go unheard from and still be shown up: its
        probe interval and two probes' timeouts (a probe, and the one after a miss),
        plus a second; ``None`` when it is not probed (``pingInterval`` 0)."""
        interval = self.config.ping_interval
        return None if interval <= 0 else interval + 2 * self.ping_timeout + 1.0

    def _heard(self) -> float | None:
        """When (trio's clock) the live connection last heard from the server."""
        actor = self.current
        return None if actor is None else actor.heard()

    def _unheard(self) -> float | None:
        """Seconds since the live connection heard from the server, when that is longer
        than its window; ``None`` otherwise (or outside trio)."""
        window, heard = self.window(), self._heard()
        if window is None or heard is None:
            return None
        try:
            silent = trio.current_time() - heard
        except RuntimeError:  # not in trio's thread: nothing to say
            return None
        return silent if silent > window else None

    def live_status(self) -> ServerStatus:
        """The server's status as its actor and the tree left it (never ``unverified``):
        what decides whether its tools are offered."""
        state = self.address.state
        if self.error is not None or state is AddressState.UNAVAILABLE:
            return ServerStatus.FAILED
        if state is AddressState.STOPPED:
            # A crash that its restart type does not restart leaves it failed.
            failed = self.health.status is ServerStatus.FAILED
            return ServerStatus.FAILED if failed else ServerStatus.STOPPED
        status = self.health.status
        if (
            status is ServerStatus.CONNECTING
            and self.broker is not None
            and self.broker.state is BrokerState.REFRESHING
        ):
            return ServerStatus.REFRESHING
        return status

    # -- OAuth -------------------------------------------------------------------------

    def auth_exception(
        self, problem: AuthProblem | None = None
    ) -> AuthRequired | AuthorizationFailed:
        """The error calls fail with while the server waits for a login (or was refused)."""
        problem = problem or self.auth_problem
        assert problem is not None
        name = self.name
        if problem.needs_login:
            error: AuthRequired | AuthorizationFailed = AuthRequired(
                f"MCP server {name!r} needs an OAuth login: call handle.login({name!r}), or "
                f"run `mcp-supervisor auth login {name}`",
                server=name,
                cli_message=f"MCP server {name!r} needs an OAuth login: run "
                f"`mcp-supervisor auth login {name}`",
            )
        else:
            error = AuthorizationFailed(
                f"MCP server {name!r}: {problem}; after fixing it, log in again "
                f"(handle.login({name!r}) or `mcp-supervisor auth login {name}`)",
                server=name,
                cli_message=f"MCP server {name!r}: {problem}; after fixing it, run "
                f"`mcp-supervisor auth login {name}`",
                oauth_error=problem.oauth_error,
            )
        error.problem = problem
        return error

    # -- what the supervision tree decided -----------------------------------------------

    def announce(self, attempt: int, retry_in: float | None) -> None:
        """Publish the ``mcp.error`` a decision of the tree calls for (see
        :func:`~supervisor.server._hook.tree_hook`): its last error, and what comes next."""
        error = self.health.last_error or "unknown error"
        self.emit(
            events.ServerErrored(server=self.name, error=error, retry_in=retry_in, attempt=attempt)
        )
        # The supervision tree logs its decisions (with the same reason): not logged here.

    def record(self) -> HealthRecord:
        """The health record as of now."""
        h = self.health
        status = self.status()
        next_retry = h.next_retry_at if status is not ServerStatus.FAILED else None
        family = self._family()
        used = _bounds.usage(family) if family else None
        return HealthRecord(
            server=self.name,
            # the transport in use: a `type: remote` server may have fallen back to SSE
            type="sse" if self.use_sse else str(self.config.type),
            status=status,
            connected_since=h.connected_since,
            last_ok=h.last_ok,
            last_error=h.last_error,
            stderr_tail=h.stderr_tail,
            error_count=h.error_count,
            consecutive_failures=h.consecutive_failures,
            restarts=h.restarts,
            tool_count=h.tool_count,
            unsupported_tools=h.unsupported_tools,
            connect_time=h.connect_time,
            next_retry_at=next_retry,
            retry_attempt=self.attempt,
            calls_ok=h.calls_ok,
            calls_failed=h.calls_failed,
            calls_tool_error=h.calls_tool_error,
            latency_p50_ms=h.percentile(0.50),
            latency_p99_ms=h.percentile(0.99),
            pid=h.pid,
            family=family,
            rss_bytes=None if used is None else used.rss,
            cpu_seconds=None if used is None else used.cpu,
            max_attempts=self.config.max_attempts if self.retries else 0,
            retryable=h.retryable,
            target=_shown(self.target),
            server_name=h.server_name,
            server_version=h.server_version,
            protocol_version=h.protocol_version,
            resource_count=len(self.resources) if self.listed else None,
            prompt_count=len(self.prompts) if self.listed else None,
            last_heard=self._last_heard(),
            probe_method=self._probing(),
            probes=h.probes,
            probes_missed=h.probes_missed,
            last_probe_ms=h.last_probe_ms,
            watched=self._watched(),
        )

    def _probing(self) -> str | None:
        """How the live connection is probed when idle, if it is."""
        actor = self.current
        client = None if actor is None else actor.client
        if client is None or self.config.ping_interval <= 0:
            return None
        return probe_method(client, self.state.probe_fallback)

    def _watched(self) -> bool:
        actor = self.current
        return actor is not None and actor.client is not None and actor.watched

    def _last_heard(self) -> float | None:
        """:meth:`_heard` in unix seconds."""
        heard = self._heard()
        if heard is None:
            return None
        try:
            return time.time() - (trio.current_time() - heard)
        except RuntimeError:
            return None

    def _family(self) -> tuple[int, ...]:
        """The pids of the running local server's processes (see ``HealthRecord.family``)."""
        actor = self.current
        transport = None if actor is None else actor.transport
        return tuple(transport.family()) if isinstance(transport, StdioTransport) else ()

    def metrics(self) -> ServerMetrics:
        """Uptime, downtime, reconnects, calls and latency (docs/monitoring.md) as of now."""
        found = self.health.metrics(
            self.name, self.status(), trio.current_time(), last_heard=self._last_heard()
        )
        found = self._with_call_bounds(found)
        family = self._family()
        if not family:
            return found
        used = _bounds.usage(family)
        return msgspec.structs.replace(found, rss_bytes=used.rss, cpu_seconds=used.cpu)

    def _with_call_bounds(self, found: ServerMetrics) -> ServerMetrics:
        """``found`` with the counts of its callers' bounds: calls refused over a rate
        limit, and calls waiting for a ``maxConcurrentCalls`` slot."""
        slots, limited = self.slots, self.rate_limited
        if slots is None and not any(limited.values()):
            return found
        return msgspec.structs.replace(
            found,
            calls_rate_limited=limited["server"],
            calls_caller_limited=limited["caller"],
            calls_waiting=0 if slots is None else slots.waiting,
        )

    # -- callers' bounds (docs/servers.md, "Containing a server") -----------------------

    def _bound_calls(self, config: ServerConfig) -> None:
        """Take ``config``'s ``maxConcurrentCalls`` and ``rateLimit`` (a changed rate
        starts a full bucket; a changed bound applies to the next call, and lets waiting
        calls in at once if it was raised)."""
        bound = getattr(config, "max_concurrent_calls", None)  # (an embedder's own config)
        if bound is None:
            self.slots = None  # calls holding the old slots give them back to those
        elif self.slots is None:
            self.slots = CallSlots(bound)
        else:
            self.slots.set_limit(bound)
        rate = getattr(config, "rate_limit", None)
        if rate is None:
            self._bucket = None
        elif self._bucket is None or self._bucket.rate.text != rate:
            self._bucket = TokenBucket(parse_rate(rate))

    def admit(self, tool: str) -> None:
        """Let a call of ``tool`` (its merged name) be sent now, or refuse it before
        anything is sent (:class:`~supervisor.errors.RateLimited`, counted): over the
        server's ``rateLimit``, or over its caller's own limits (a team gateway's policy:
        :data:`~supervisor.calls._limits.caller_admission`). A call let through takes a
        token of each."""
        bucket, caller = self._bucket, caller_admission.get()
        if bucket is None and caller is None:
            return
        now = trio.current_time()
        if bucket is not None:
            wait = bucket.wait(now)
            if wait > 0:
                self.rate_limited["server"] += 1
                raise refuse(wait, bucket.rate, server=self.name, tool=tool, by="server")
        if caller is not None:
            try:
                caller(self.name, tool)
            except RateLimited:
                self.rate_limited["caller"] += 1
                raise
        if bucket is not None:
            bucket.take(now)

    async def _slot(self, slots: CallSlots, tool: str, limit: float) -> float:
        """Wait for one of ``slots`` (``maxConcurrentCalls``) within ``limit`` seconds;
        the seconds left of it once taken. Past it: :class:`CallQueueTimeout`, never sent."""
        began = trio.current_time()
        with trio.move_on_after(limit):
            await slots.acquire()
            return max(limit - (trio.current_time() - began), 0.0)
        raise CallQueueTimeout(
            f"tool {tool!r} waited {limit} s (its timeout) for its turn at MCP server "
            f"{self.name!r}, which takes {plural(slots.limit, 'call')} at a time "
            "(maxConcurrentCalls): it was not sent (nothing ran); try again",
            server=self.name,
            tool=tool,
            timeout=limit,
            limit=slots.limit,
        )

    # -- fault injection ---------------------------------------------------------------

    def faults(self) -> list[Injected]:
        """The faults injected into this server so far, in order (empty without a plan)."""
        return [] if self.fault_engine is None else list(self.fault_engine.log)

    async def inject(self, action: str) -> Injected:
        """Inject ``action`` (``kill``, ``hang``, ``resume``, ``list_changed``) into the
        current connection now, recorded in :meth:`faults` with rule ``-1``.

        Raises :class:`ValueError` for a server without a ``faults`` plan (give it one;
        ``[]`` will do) or for another action, and
        :class:`~supervisor.errors.ServerUnavailable` when it has no connection now."""
        engine = self.fault_engine
        if engine is None:
            raise ValueError(
                f"MCP server {self.name!r} has no fault plan to inject through: give it "
                '"faults" in its config ([] will do) or open_supervisor(faults=...)'
            )
        if engine.link is None:
            raise ServerUnavailable(
                f"MCP server {self.name!r} has no connection to inject {action!r} into "
                f"now (it is {self.status().value})",
                server=self.name,
            )
        return await engine.link.inject(action)

    def _injected(self, fault: Injected) -> None:
        log.info(
            "fault injected",
            server=self.name,
            rule=fault.rule,
            action=fault.action,
            method=fault.method,
            id=fault.id,
            tool=fault.tool,
            direction=fault.direction,
            detail=fault.detail,
        )

    def _returns_to(self) -> tuple[str, int] | None:
        """The host and port a down remote server's return is looked for at (while it is
        probed: ``pingInterval`` is not 0), if any."""
        config = self.config
        if config.type in ("stdio", "memory") or config.url is None or config.ping_interval <= 0:
            return None
        return watched_address(config.url)

    async def _returned(self) -> None:
        """Return once the down server's port, found closed, opens again: its restart is
        then not left to wait out the rest of its backoff (see ChildSpec.hurry)."""
        address = self._returns_to()
        assert address is not None
        host, port = address
        await port_reopened(host, port, every=RETURN_EVERY, connect_timeout=self.ping_timeout)

    def transport(self) -> TransportLike:
        """A fresh transport for one connection attempt (with the fault plan, if any)."""
        return open_transport(
            self.config,
            self.limits,
            self.broker,
            self.fault_engine,
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

    # -- façade-side calls ---------------------------------------------------------------

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
        try:
            result = await self._call_tool(call, tool, arguments, call_id)
        except ToolCallTimeout as exc:
            if (actor := self.current) is not None:  # its connection's count of them
                actor.call_timed_out(exc)
            raise
        if (actor := self.current) is not None:
            actor.call_answered()
        return result

    async def _call_tool(
        self, call: ToolCall, tool: str, arguments: Mapping[str, object], call_id: str | None
    ) -> CallAnswer:
        if self.error is not None:
            self.check_available()
        caller = call.caller
        per_user = self.users is not None and caller is not None
        if self.auth_problem is not None and not per_user:  # (the caller's own login)
            raise self.auth_exception()
        limit = self.config.timeout if call.timeout is None else call.timeout
        with tracing.backing_span(self.name, tool) as span:
            try:
                message = CallTool(
                    call,
                    tool,
                    arguments,
                    call_id,
                    tracing.current(),
                    call.log_level or self.log_level,
                    caller_capabilities.get(),
                    call.progress,
                )
                slots = self.slots
                if slots is not None:  # maxConcurrentCalls: its turn first, in its time
                    limit = await self._slot(slots, tool, limit)
                try:
                    if per_user:
                        assert self.users is not None and caller is not None
                        span.set_attribute(tracing.PATH, "user")
                        result = await self.users.call(caller, message, limit)
                    else:
                        result = await self._send_call(message, limit, span)
                finally:
                    if slots is not None:
                        slots.release()
            except BaseException as exc:
                if span.is_recording():
                    attempt = self.health.restarts + 1
                    tracing.ended(span, audit_outcome(exc, sent=True), exc, attempt)
                raise
            if span.is_recording():
                outcome = "tool_error" if getattr(result, "is_error", False) else "ok"
                tracing.ended(span, outcome, attempt=self.health.restarts + 1)
            return result

    async def _send_call(self, message: CallTool, limit: float, span: Span) -> CallAnswer:
        tool = message.tool
        left = limit
        actor = self.current
        client = actor.direct() if actor is not None else None
        if actor is not None and client is not None:  # the fast path: onto the live connection
            deadline = trio.current_time() + limit
            span.set_attribute(tracing.PATH, "direct")
            try:
                return await actor.call_directly(client, message, deadline)
            except _NotSent:
                left = max(deadline - trio.current_time(), 0.0)  # the mailbox gets it there
            except BaseException as exc:
                self._raise_translated(exc, tool, limit)
                raise
        span.set_attribute(tracing.PATH, "mailbox")
        try:
            return cast(CallAnswer, await self.address.call(message, left))  # the actor's answer
        except BaseException as exc:
            self._raise_translated(exc, tool, limit)
            raise

    def check_available(self) -> None:
        """Raise the :class:`~supervisor.errors.ServerUnavailable` a call would fail with
        at once (misconfigured, failed, stopped); return if calls may be sent or wait."""
        if self.error is not None:
            raise ServerUnavailable(
                f"MCP server {self.name!r} is not configured correctly: {self.error}",
                server=self.name,
            )
        if self.auth_problem is not None:
            raise self.auth_exception()
        try:
            self.address.check_open()
        except BaseException as exc:
            self._raise_translated(exc, "", 0.0)
            raise

    def _raise_translated(
        self, exc: BaseException, tool: str, limit: float, *, request: bool = False
    ) -> None:
        """Raise the server error that the actor error ``exc`` means; return if it is
        not one (the caller re-raises it): the one place actor errors are said in terms
        of this server. ``tool`` names the tool called — or, with
        ``request``, describes a read-only request (a resource read, a prompt), which
        times out with :class:`RequestTimeout` and was sent once more if its connection
        died (a second loss is a :class:`ServerRequestError`)."""
        if request and isinstance(exc, trio.TooSlowError | CallTimeout):
            raise RequestTimeout(
                f"MCP server {self.name!r} did not answer {tool} within {limit} s",
                server=self.name,
                request=tool,
                timeout=limit,
            ) from None
        if request and isinstance(exc, RequestAborted):
            raise ServerRequestError(
                f"the connection to MCP server {self.name!r} died twice with {tool} in "
                "flight (it was sent again once); try again once it is back",
                server=self.name,
                code=types.CONNECTION_CLOSED,
            ) from exc.__cause__
        if isinstance(exc, trio.TooSlowError | CallTimeout):
            raise ToolCallTimeout(
                f"MCP server {self.name!r} did not answer tool {tool!r} within {limit} s: "
                "it may have taken effect (it may still be running there) and was not retried",
                server=self.name,
                tool=tool,
                timeout=limit,
            ) from None
        if isinstance(exc, ActorUnavailable):
            error = self.health.last_error or exc.last_error
            if self.health.retryable is False:
                said = (
                    f"MCP server {self.name!r} failed, and retrying cannot help: {error}. "
                    "Fix the cause, then "
                )
            elif exc.attempts == 0:  # its config allows no restart: none was tried
                said = (
                    f"MCP server {self.name!r} failed and is not {self._no_restarts()}; "
                    f"last error: {error}. Fix the cause, then "
                )
            else:  # its tries, as mcp.connecting counts them: the first and each restart
                said = (
                    f"MCP server {self.name!r} is unavailable after "
                    f"{plural(exc.attempts + 1, 'attempt')}; last error: {error}. Fix the cause, "
                    "then "
                )
            raise ServerUnavailable(
                f"{said}restart it (handle.restart({self.name!r}))",
                server=self.name,
                cli_message=f"{said}run the command again: each run starts its servers afresh",
            ) from None
        if isinstance(exc, ActorStopped) and self.state.withdrawn_why is not None:
            raise ServerUnavailable(self.state.withdrawn_why, server=self.name) from None
        if isinstance(exc, ActorStopped) and self.health.status is ServerStatus.FAILED:
            said = self.health.last_error or "unknown error"
            if not said.startswith(f"MCP server {self.name!r}"):
                said = f"MCP server {self.name!r} failed: {said}"
            if self.health.retryable is False:
                said += ". Retrying cannot help: fix the cause first"
                cli = said
            elif self.retries:  # a temporary server: it is not restarted after a crash
                said += f". Fix the cause, then restart it (handle.restart({self.name!r}))"
                cli = said
            else:
                said += ". It was tried once and is not retried"
                cli = (
                    f"{said} by a one-shot command; a long-running supervisor "
                    "(`mcp-supervisor serve`, `status --watch`) would retry it"
                )
                said += " (open_supervisor(retries=False))"
            raise ServerUnavailable(said, server=self.name, cli_message=cli) from None
        if isinstance(exc, ActorStopped):
            raise ServerUnavailable(
                f"MCP server {self.name!r} is stopped; restart it to use it again",
                server=self.name,
            ) from None
        if isinstance(exc, RequestAborted) and not isinstance(exc, CallMayHaveTakenEffect):
            raise CallMayHaveTakenEffect.during(self.name, tool) from exc.__cause__

    def _no_restarts(self) -> str:
        """Why a failed server is not tried again: the config's words for it."""
        if self.config.type == "stdio":
            return "restarted: its config says restartOnCrash: false (or maxRestarts: 0)"
        return "reconnected: its config says reconnect: false (or maxAttempts: 0)"

    async def list_tools(self, timeout: float | None = None) -> list[types.Tool]:
        limit = self.config.init_timeout + self.config.timeout if timeout is None else timeout
        return cast("list[types.Tool]", await self.address.call(ListTools(), timeout=limit))

    # -- resources and prompts -----------------------------------------------------------

    def prompt(self, name: str) -> types.Prompt | None:
        """The listed prompt of that (original) name, if any."""
        return next((p for p in self.prompts if p.name == name), None)

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
        on the next connection. Raises :class:`ServerUnavailable` at once for a failed or
        stopped server, :class:`RequestTimeout`, and :class:`ServerRequestError` for an
        MCP error answer (an unknown URI, say) or a second lost connection; a URI JSON
        cannot carry is :class:`~supervisor.errors.RequestUnencodable`, sent nothing.
        ``rounds`` relays a multi-round-trip read (2026-07-28), as :meth:`call_tool`'s
        does a call: the server's ``input_required`` answer is returned as it is.
        """
        self._sendable("resources/read", {"uri": uri})
        message = ReadResource(uri, rounds, capabilities=caller_capabilities.get())
        answer = await self._request(message, f"resource {uri!r}", timeout)
        return cast("types.ReadResourceResult | types.InputRequiredResult", answer)

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
        message = GetPrompt(
            name,
            None if arguments is None else dict(arguments),
            rounds,
            capabilities=caller_capabilities.get(),
        )
        answer = await self._request(message, f"prompt {name!r}", timeout)
        return cast("types.GetPromptResult | types.InputRequiredResult", answer)

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
        message = Complete(ref, dict(argument), None if context is None else dict(context))
        return cast(types.CompleteResult, await self._request(message, "completion", timeout))

    # -- tasks -------------------------------------------------------------------------

    def task_made(self, task_id: str, incarnation: int) -> None:
        """Remember that the connection ``incarnation`` passed on the task ``task_id``
        (for its caller to follow), to tell later whether the server restarted since —
        the latest :data:`TASKS_KEPT` tasks are remembered."""
        made = self._tasks_made
        made.pop(task_id, None)
        made[task_id] = incarnation
        while len(made) > TASKS_KEPT:
            del made[next(iter(made))]

    def task_outlived(self, task_id: str) -> bool:
        """Whether the server was connected again (restarted, reconnected) since it made
        the task ``task_id`` (as far as this process remembers)."""
        made = self._tasks_made.get(task_id)
        actor = self.current
        return made is not None and (actor is None or actor.number != made)

    async def task_request(
        self, method: str, params: Mapping[str, object], timeout: float | None = None
    ) -> dict[str, object]:
        """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (``method``) with
        ``params`` (``taskId`` as this server named it); its result, as JSON. Waits,
        retries and raises as :meth:`read_resource` does."""
        message = TaskRequest(method, dict(params))
        what = f"{method} of task {params.get('taskId')!r}"
        return cast("dict[str, object]", await self._request(message, what, timeout))

    def _sendable(self, method: str, params: Mapping[str, object]) -> None:
        """Refuse a request whose ``params`` hold text JSON cannot carry (a lone
        surrogate) before it is made: every transport refuses to send it
        (:mod:`supervisor.transports._encoding`), but the SDK's client writes some of it
        into headers first (a read's URI in ``Mcp-Name``), and a subscription would be
        asked again of every connection."""
        errors = unencodable(params)
        if errors:
            raise RequestUnencodable(method, errors, server=self.name)

    async def _request(
        self,
        message: ReadResource | GetPrompt | Complete | TaskRequest,
        what: str,
        timeout: float | None,
    ) -> object:
        """Send ``message`` through the mailbox, saying actor errors in terms of ``what``."""
        if self.error is not None:
            self.check_available()
        if self.auth_problem is not None:
            raise self.auth_exception()
        limit = self.config.timeout if timeout is None else timeout
        try:
            return await self.address.call(message, limit)
        except BaseException as exc:
            self._raise_translated(exc, what, limit, request=True)
            raise
