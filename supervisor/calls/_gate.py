"""The one gate every tool call passes: resolve, validate, approve, send, normalise.

The façade (``handle.call``), a server's view (``handle.server(name).call_tool``), the CLI
and any later front end call tools only through a :class:`Gate`; nothing handed to users
reaches a server's connection around it. In order:

1. the merged name is resolved — by the catalog for servers whose tools are known (waiting
   for the registry's merge when a server has just listed them), by the naming template
   for servers never connected yet (:class:`~supervisor.errors.UnknownTool` naming close
   matches otherwise);
2. a server not connected yet is connected first, to learn the tool's schema and
   annotations;
3. the arguments are checked against the tool's ``inputSchema``
   (:class:`~supervisor.errors.ToolArgumentsInvalid`, naming each wrong field), and for
   text JSON cannot carry — a string or key holding a lone surrogate, ``"\\ud800"``,
   which a schema may allow but no connection can send (anything else the transport
   finds it cannot write, an object JSON has no type for, is refused there, unsent:
   :class:`~supervisor.errors.RequestUnencodable`). A ``null`` given for an optional
   parameter whose schema does not take ``null`` is left out of what is sent, as the
   MCP specification has a client do (a null and an absent parameter mean the same);
   a ``null`` for a required one is refused like any other wrong field;
4. the server's approval policy is applied: the ``approve`` callback decides, and without
   one a call that needs approval fails closed (:class:`~supervisor.errors.ApprovalRequired`;
   a refusal is :class:`~supervisor.errors.ApprovalDenied`). The policy's verdict is
   taken once per tool definition the server listed: a re-listed tool is decided again.
   The callback is asked about one call at a time, in the order the calls asked (a
   second call needing approval waits until the first is answered, so a person never
   sees two questions at once); calls that need no approval do not wait for it;
5. a call over a rate limit — the server's ``rateLimit``, or its caller's own limits on
   a team gateway (:data:`~supervisor.tools._limits.caller_admission`) — is refused
   (:class:`~supervisor.errors.RateLimited`, saying when it would fit); one let through
   takes its token of each;
6. the call is sent (the server's request timeout unless one is given) and its result
   normalised (:class:`~supervisor.tools.ToolResult`); a tool that reports failure is a
   :class:`~supervisor.errors.ToolError`.

A call is one value (:class:`~supervisor.tools._request.ToolCall`), and how it ended one
typed outcome (:meth:`Gate.outcome`): a result, a relayed round or task, or the failure —
any of the errors above, none raised. :meth:`Gate.call` raises the failure instead.

Every call is shown, from the moment it is invoked — also when it fails before it is sent
— to the gate's call observers (:mod:`supervisor.tools._observer`), each once: a call history
(``open_supervisor(history=...)``), which names the call (its id goes to the server in
the request's ``_meta``); an audit log (:class:`~supervisor.tools._audit.AuditLog`), one line
with the approval decision and the outcome, under the history's call id if there is one
(a log that cannot be written refuses calls before they are sent); the call's trace span
(:mod:`supervisor.tools._tracing`); and, for a call that named a server, each
:class:`~supervisor.monitor.CallWindow` in ``windows`` (the dashboard's strips), with its
latency and outcome. Without them, nothing is timed or kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import mcp_types as types
import trio

from ..actors import SupervisorError
from ..actors._mailbox import AddressState
from ..auth._broker import BrokerState
from ..errors import AuthRequired, ServerUnavailable, UnknownTool
from ..log import get_logger
from ..registry._live import Registry
from ..server import HealthRecord, ServerMetrics, ServerStatus
from ..server._managed import ServerHandle
from ..server._messages import Progress
from ..tools import ApprovalCallback, ApprovalRequest, Decider, ToolResult
from ..tools import _tracing as tracing
from ..tools._approval import ApprovalDecision, ApprovalReason, decide_approval, policy_verdict
from ..tools._audit import audit_outcome
from ..tools._observer import Call, CallObserver, CallWatch
from ..tools._request import CallOutcome, Failed, Round, ToolCall
from ..tools._results import normalize_result
from ..tools._validate import prepare_arguments
from ..transports._faults import Injected

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..monitor import CallWindow

log = get_logger("supervisor.gate")

#: Tool names of servers a reconfiguration took out that a call of is answered with why.
WITHDRAWN_KEPT = 4096


class Gate:
    """Tool calls to ``servers`` (by name, in config order), named by ``registry``,
    approved by ``approve``; large text results spill into ``spill_dir``; each call is
    watched by ``history`` (the observer that names calls) and ``audit``, if given."""

    def __init__(
        self,
        servers: Mapping[str, ServerHandle],
        registry: Registry,
        *,
        approve: ApprovalCallback | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        history: CallObserver | None = None,
        audit: CallObserver | None = None,
    ) -> None:
        self._servers = servers
        self._registry = registry
        self._approve = approve
        self._spill_dir = spill_dir
        #: who sees every call, in this order: the call history (it names the calls),
        #: then the audit log
        self.observers: tuple[CallObserver, ...] = tuple(
            o for o in (history, audit) if o is not None
        )
        #: the windows every call is added to once it ended (``SupervisorHandle.recent_calls``)
        self.windows: tuple[CallWindow, ...] = ()
        # (server, original name, merged name) -> (the tool object decided on, the verdict,
        # and the decision a call it lets go ahead is made with)
        self._verdicts: dict[
            tuple[str, str, str],
            tuple[types.Tool, ApprovalReason | Decider, ApprovalReason | ApprovalDecision],
        ] = {}
        # one question to the approval callback at a time (trio's lock is fair: FIFO)
        self._asking = trio.Lock()
        #: merged tool names of servers a reconfiguration took out: (server, why), oldest
        #: first
        self.withdrawn: dict[str, tuple[str, str]] = {}

    def forget(self, server: str) -> None:
        """Forget what was decided about ``server``'s tools: its config changed."""
        self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != server}

    def withdraw(self, server: str, why: str) -> None:
        """``server`` left (a reconfiguration): a call of one of the tools it offered
        says ``why`` rather than only that no such tool exists (the latest
        :data:`WITHDRAWN_KEPT` names are remembered)."""
        withdrawn = self.withdrawn
        for entry in self._registry.snapshot.named.values():
            if entry.server == server:
                withdrawn.pop(entry.name, None)
                withdrawn[entry.name] = (server, why)
        while len(withdrawn) > WITHDRAWN_KEPT:
            del withdrawn[next(iter(withdrawn))]

    def returned(self, server: str) -> None:
        """``server`` is back (a reconfiguration added it again)."""
        self.withdrawn = {k: v for k, v in self.withdrawn.items() if v[0] != server}

    def resolve(self, name: str) -> tuple[ServerHandle, str]:
        """The server and its own tool name for a merged tool name (step 1 above)."""
        named = self._registry.snapshot.named
        entry = named.get(name)
        if entry is not None and entry.server in self._servers:  # (not one just removed)
            return self._servers[entry.server], entry.original_name
        unknown = [s for s in self._servers.values() if not s.tools]
        found = self._registry.policy.parse(name, ((s.name, s.config.prefix) for s in unknown))
        if found is not None:
            return self._servers[found[0]], found[1]
        gone = self.withdrawn.get(name)
        if gone is not None:
            raise UnknownTool(f"no tool named {name!r}: {gone[1]}")
        raise named.unknown([name])

    def merged_name(self, server: ServerHandle, original: str) -> str:
        """The name ``server``'s tool ``original`` has in the catalog (or will have)."""
        for entry in self._registry.snapshot.named.values():
            if entry.server == server.name and entry.original_name == original:
                return entry.name
        head, tail = self._registry.policy.affixes(server.name, server.config.prefix)
        return f"{head}{original}{tail}"

    async def call(self, call: ToolCall) -> ToolResult:
        """Make ``call`` (every step of the module docstring) and return its result;
        a failure is raised (a tool's own too: :class:`~supervisor.errors.ToolError`), and
        a relayed round or task is the result's ``raw``: see :func:`returned`."""
        return returned(call, await self.outcome(call))

    async def outcome(self, call: ToolCall) -> CallOutcome:
        """Make ``call``: every step of the module docstring, in a trace span
        (:mod:`supervisor.tools._tracing`); how it ended, a failure included
        (:mod:`supervisor.tools._request`). ``call.approve``, if given, decides its
        approval in place of the gate's callback; ``call.spill=False`` keeps the whole
        result in memory (:func:`~supervisor.tools._results.normalize_result`);
        ``call.rounds`` relays a multi-round-trip call (its round, or the task the
        server made of it, is the outcome); ``call.caller``: who it is made for, as its
        observers see it (:class:`Call`). Only a cancellation, or a bug, is raised."""
        with tracing.call_span(call.name) as span:
            if call.caller is not None and span.is_recording():
                span.set_attribute("enduser.id", call.caller)
            return await self._outcome(span, call)

    async def _outcome(self, span: Span, request: ToolCall) -> CallOutcome:
        name, timeout = request.name, request.timeout
        call = Call(name, request.arguments, trio.current_time(), caller=request.caller)
        observers = self.observers
        watches = [observer.watch(call) for observer in observers] if observers else []
        if span.is_recording():
            watches.append(tracing.SpanWatch(span))
        if self.windows:
            watches.append(_WindowsWatch(self.windows))
        outcome: CallOutcome
        try:
            for watch in watches:
                watch.admit(call)  # an audit log that cannot be written refuses the call
            server, original, listed = await self._resolve(call, watches, timeout)
            arguments = prepare_arguments(listed, request.arguments, name, server.name)
            verdict = self._decided(server, original, listed, name)
            if isinstance(verdict, ApprovalDecision):  # the policy lets it go ahead
                call.approval = verdict
            else:
                asked = ApprovalRequest(
                    server=server.name,
                    tool=name,
                    original_name=original,
                    arguments=arguments,
                    reason=verdict,
                )
                call.approval = await self._ask(asked, request.approve)
                call.approval.check(asked)
            server.admit(name)  # its rate limits, and its caller's: refused unsent if over
            call.sent = True
            limit = server.config.timeout if timeout is None else timeout
            for watch in watches:
                watch.sending(call, limit)
            # (named by an observer: the id goes to the server in ``_meta``)
            raw = await server.call(request, original, arguments, call.call_id)
            if isinstance(raw, types.CallToolResult):
                # The SDK client has checked structuredContent against the outputSchema.
                outcome = normalize_result(
                    raw,
                    tool=name,
                    spill_dir=self._spill_dir,
                    limits=server.limits,
                    spill=request.spill,
                )
                outcome.raise_for_error(server=server.name)
            else:  # a relayed round, or a task
                outcome = raw
        except SupervisorError as exc:
            call.outcome = audit_outcome(exc, sent=call.sent)
            for watch in watches:
                watch.failed(call, exc)
            return Failed(exc, call.sent)
        except BaseException as exc:
            call.outcome = audit_outcome(exc, sent=call.sent)
            for watch in watches:
                watch.failed(call, exc)
            raise
        call.outcome = "ok"
        if watches:
            answered = outcome if isinstance(outcome, ToolResult) else returned(request, outcome)
            for watch in watches:
                watch.answered(call, answered)
        return outcome

    async def _resolve(
        self, call: Call, watches: list[CallWatch], timeout: float | None
    ) -> tuple[ServerHandle, str, types.Tool]:
        """The server, its own tool name and the tool ``call`` is for (steps 1 and 2 of
        the module docstring), told to ``watches`` as soon as each is known."""
        name = call.tool
        try:
            server, original = self.resolve(name)
        except UnknownTool:
            if not self._registry.pending:
                raise
            # A server listed its tools a moment ago: wait for the registry's merge.
            await self._registry.settled()
            server, original = self.resolve(name)
        call.server, call.original = server.name, original
        for watch in watches:
            watch.resolved(call)
        listed = server.tool(original)
        if listed is None:
            server, original, listed = await self._learn(name, server, timeout)
            call.server, call.original = server.name, original
            for watch in watches:
                watch.resolved(call)
        return server, original, listed

    async def _ask(
        self, request: ApprovalRequest, approve: ApprovalCallback | None = None
    ) -> ApprovalDecision:
        """The approval decision on ``request``: the call's own ``approve``, else the
        gate's callback, asked one call at a time whichever it is (a call cancelled while
        it waits its turn just leaves the queue)."""
        approve = approve or self._approve
        if approve is None:
            return await decide_approval(None, request)  # refused at once: nobody to ask
        async with self._asking:
            return await decide_approval(approve, request)

    async def _learn(
        self, name: str, server: ServerHandle, timeout: float | None
    ) -> tuple[ServerHandle, str, types.Tool]:
        """Connect ``server`` (never connected yet) and look ``name`` up in what it lists."""
        limit = timeout
        if limit is None:
            limit = server.config.init_timeout + server.config.timeout
        await connect(server, limit)
        await self._registry.settled()  # what it listed is merged
        server, original = self.resolve(name)
        listed = server.tool(original)
        if listed is not None:
            return server, original, listed
        if server.tools:  # it listed its tools, and this is not one of them
            raise self._registry.snapshot.named.unknown([name])
        server.check_available()  # failed, stopped or misconfigured: say so
        why = (
            f"did not list its tools within {limit} s; "
            f"last error: {server.health.last_error or 'none'}"
        )
        raise ServerUnavailable(
            f"MCP server {server.name!r} {why} (calling {name!r})", server=server.name
        )

    def reason_for(self, name: str) -> ApprovalReason | None:
        """Why a call of the listed tool of merged name ``name`` would need approval
        (``None``: it would go ahead): the decision :meth:`call` makes, before it asks the
        ``approve`` callback. :class:`~supervisor.errors.UnknownTool` for a name the
        catalog does not have, or whose server has not listed it."""
        server, original = self.resolve(name)
        listed = server.tool(original)
        if listed is None:
            raise self._registry.snapshot.named.unknown([name])
        return self.approval_reason(server, original, listed, name)

    def approval_reason(
        self, server: ServerHandle, original: str, tool: types.Tool, merged: str
    ) -> ApprovalReason | None:
        """Why calling ``tool`` (``merged`` in the catalog) needs approval (``None``: it
        does not); see :meth:`verdict`."""
        verdict = self.verdict(server, original, tool, merged)
        return None if isinstance(verdict, Decider) else verdict

    def verdict(
        self, server: ServerHandle, original: str, tool: types.Tool, merged: str
    ) -> ApprovalReason | Decider:
        """What ``server``'s policy says of calling ``tool`` (``merged`` in the catalog):
        why it needs approval, or the rule that lets it go ahead
        (:func:`~supervisor.tools._approval.policy_verdict`), decided once per tool object the
        server listed: a new listing brings new objects, decided anew."""
        key = (server.name, original, merged)
        cached = self._verdicts.get(key)
        if cached is not None and cached[0] is tool:
            return cached[1]
        verdict = policy_verdict(server.config, tool, original, merged)
        decided = ApprovalDecision(True, verdict) if isinstance(verdict, Decider) else verdict
        self._verdicts[key] = (tool, verdict, decided)
        return verdict

    def _decided(
        self, server: ServerHandle, original: str, tool: types.Tool, merged: str
    ) -> ApprovalReason | ApprovalDecision:
        """:meth:`verdict`, a go-ahead as the decision a call is made with (one per
        verdict: the call's approval)."""
        key = (server.name, original, merged)
        cached = self._verdicts.get(key)
        if cached is None or cached[0] is not tool:
            self.verdict(server, original, tool, merged)
            cached = self._verdicts[key]
        return cached[2]


async def connect(server: ServerHandle, timeout: float | None) -> None:
    """Connect ``server`` if it can be; return once connected, failed, or at ``timeout``
    (default: its handshake plus request timeout). A server in ``needs_auth`` while a
    login for it runs (the one it started itself through the redirect handler, or
    ``handle.login``'s) is waited for within that time, and connected once the login
    is done; one waiting for a login nobody started returns at once. Errors are in its
    health record."""
    if server.error is not None or server.address.state is not AddressState.OPEN:
        return
    limit = timeout
    if limit is None:
        limit = server.config.init_timeout + server.config.timeout
    with trio.move_on_after(limit) as scope:
        while True:
            try:
                await server.list_tools(timeout=max(scope.deadline - trio.current_time(), 0.0))
                return
            except SupervisorError as exc:
                # Taken before the state is looked at: no change in between is missed.
                changes = _auth_changes(server)
                if server.auth_problem is None and isinstance(exc, AuthRequired):
                    continue  # the login ended just now: it connects again
                if not _logging_in(server):
                    log.debug("connect failed", server=server.name, error=str(exc))
                    return
            await _first(changes)


def _logging_in(server: ServerHandle) -> bool:
    """Whether ``server`` waits in ``needs_auth`` for a login that is running: its own
    (a redirect handler shows it), or one ``handle.login`` started."""
    broker, problem = server.broker, server.auth_problem
    if broker is None or problem is None or not problem.needs_login:
        return False
    if server.health.status is not ServerStatus.NEEDS_AUTH:
        return False  # its own login failed (auth_failed)
    return broker.redirect is not None or broker.state is BrokerState.AUTHORIZING


def _auth_changes(server: ServerHandle) -> tuple[trio.Event, ...]:
    """The events set at the next change of ``server``'s login state, or its broker's."""
    broker = server.broker
    if broker is None:
        return (server.state.auth_changed,)
    return (server.state.auth_changed, broker.state_changed)


async def _first(events: tuple[trio.Event, ...]) -> None:
    """Return once one of ``events`` is set."""
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in events:
            nursery.start_soon(wait, event)


class ServerView:
    """One server as users see it: its config, health and listings, and tool calls that
    go through the gate like any other (by the server's own tool names)."""

    __slots__ = ("_gate", "_server")

    def __init__(self, server: ServerHandle, gate: Gate) -> None:
        self._server = server
        self._gate = gate

    def __repr__(self) -> str:
        return f"<ServerView {self._server.name!r} {self._server.status().value}>"

    @property
    def name(self) -> str:
        return self._server.name

    @property
    def config(self) -> object:
        """The server's configuration (:class:`supervisor.config.ServerConfig`)."""
        return self._server.config

    @property
    def error(self) -> str | None:
        """Why the server cannot start (its configuration is incomplete), if so."""
        return self._server.error

    @property
    def tools(self) -> list[types.Tool]:
        """The tools it listed last (kept while it restarts)."""
        return list(self._server.tools)

    @property
    def capabilities(self) -> types.ServerCapabilities | None:
        """What the server declared it can do when it last connected (``None``: it has
        not connected yet)."""
        return self._server.capabilities

    def cache_hint(self, kind: str) -> tuple[int, str]:
        """How long its last ``kind`` listing (``tools``, ``resources``, ``templates``,
        ``prompts``) may be cached, in ms, and by whom: ``(ttlMs, cacheScope)`` as the
        server said (2026-07-28), else ``(0, "private")``."""
        return self._server.cache_hint(kind)

    @property
    def resources(self) -> list[types.Resource]:
        return list(self._server.resources)

    @property
    def resource_templates(self) -> list[types.ResourceTemplate]:
        return list(self._server.resource_templates)

    @property
    def prompts(self) -> list[types.Prompt]:
        return list(self._server.prompts)

    def status(self) -> str:
        """``idle``, ``connecting``, ``connected``, ``disconnected``, ``failed`` or
        ``stopped``."""
        return self._server.status().value

    @property
    def protocol_version(self) -> str | None:
        """The MCP protocol version its connection speaks (the last one's; ``None``
        before the first)."""
        return self._server.health.protocol_version

    def record(self) -> HealthRecord:
        """Its health record as of now."""
        return self._server.record()

    def metrics(self) -> ServerMetrics:
        return self._server.metrics()

    def faults(self) -> list[Injected]:
        """The faults its ``faults`` plan injected so far, in order (docs/faults.md);
        empty for a server without one."""
        return self._server.faults()

    async def inject(self, action: str) -> Injected:
        """Inject a fault into its current connection now, outside its plan: ``kill``
        (a crash), ``hang`` (it stops answering until ``resume``), ``resume``, or
        ``list_changed`` (a spurious tools notification). Needs a ``faults`` plan in its
        config, an empty one will do; see :meth:`ServerHandle.inject
        <supervisor.server._managed.ServerHandle.inject>`."""
        return await self._server.inject(action)

    async def task_request(
        self, method: str, params: Mapping[str, object], *, timeout: float | None = None
    ) -> dict[str, object]:
        """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (``method``) about a
        task the server made of a call whose caller follows it (``taskId`` in ``params``,
        as the server named it); its result, as JSON. A server's refusal is a
        :class:`~supervisor.errors.ServerRequestError` carrying its ``code``."""
        return await self._server.task_request(method, params, timeout)

    def task_outlived(self, task_id: str) -> bool:
        """Whether the server was connected again (restarted) since it made the task
        ``task_id`` — which a restarted local server has likely lost."""
        return self._server.task_outlived(task_id)

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> ToolResult:
        """Call the server's tool ``tool`` (its own name) through the gate: validated,
        approved and normalised exactly like ``handle.call`` with its merged name."""
        name = self._gate.merged_name(self._server, tool)
        return await self._gate.call(ToolCall(name, arguments, timeout, progress))


def returned(call: ToolCall, outcome: CallOutcome) -> ToolResult:
    """What ``SupervisorHandle.call`` returns of ``call``'s ``outcome``: its result; a
    relayed round or task as a result with no text whose ``raw`` is the server's answer
    (``InputRequiredResult``, ``CreatedTask``); a failure is raised."""
    if isinstance(outcome, ToolResult):
        return outcome
    if isinstance(outcome, Failed):
        raise outcome.error
    raw = outcome.answer if isinstance(outcome, Round) else outcome.task
    return ToolResult(tool=call.name, text="", raw=raw)


class _WindowsWatch(CallWatch):
    """Adds each call that named a server, with its latency and outcome, to ``windows``."""

    __slots__ = ("windows",)

    def __init__(self, windows: tuple[CallWindow, ...]) -> None:
        self.windows = windows

    def answered(self, call: Call, result: ToolResult) -> None:
        self._add(call, None)

    def failed(self, call: Call, exc: BaseException) -> None:
        self._add(call, type(exc).__name__)

    def _add(self, call: Call, error: str | None) -> None:
        if call.server is None:
            return
        latency = trio.current_time() - call.started
        for window in self.windows:
            window.add(call.server, call.tool, latency, call.outcome or "ok", error)


__all__ = ["Gate", "ServerView", "connect", "returned"]
