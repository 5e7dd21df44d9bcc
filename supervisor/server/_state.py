"""What one server is now: its health, listings, auth problem, transport choice and live
incarnation, with one writer.

A :class:`ServerState` is written by the server's actor (:mod:`supervisor.server._actor`,
its listings included), by the supervision tree's decisions (the tree hook calls
:meth:`ServerState.decided`) and by a reconfiguration of the running supervisor
(:mod:`supervisor._reload`: new limits, a replaced or withdrawn server); every write is
one of its named methods. Everything else —
the server's handle and its call paths, ``open_supervisor``'s handle, the gate — reads it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import mcp_types as types
import trio

from ..actors import GaveUp, NotRestarted, Restarted, RestartScheduled, StartedOver, Terminated
from ..actors._decisions import Decision
from ..config._limits import Limits
from ..log import get_logger
from ..registry._merge import Listing
from ._health import Health, ServerStatus

if TYPE_CHECKING:
    from ..auth._broker import AuthProblem
    from ._actor import ServerActor

log = get_logger("supervisor.server")

#: Reasons logged per server when its list has invalid tools (the count is in its health).
_LOGGED_PROBLEMS = 5


class ServerState:
    """One server's state across its incarnations: its actor and the tree's decisions
    write it, through the methods below; its handle and the callers read it."""

    def __init__(self, name: str, limits: Limits, *, error: str | None = None) -> None:
        self.name = name
        self._limits = limits
        self.health = Health()
        if error is not None:  # misconfigured: it never starts
            self.health.status = ServerStatus.FAILED
            self.health.last_error = error
        self._tools: list[types.Tool] = []
        self._by_name: dict[str, types.Tool] = {}
        #: its tools as last listed, checked once when they arrived
        self.listing = Listing(())
        # Resources, templates and prompts as last listed (kept while it restarts); empty
        # when the server does not advertise them. `listed`: some connection listed them.
        self.resources: list[types.Resource] = []
        self.resource_templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.listed = False
        #: why the server waits for an OAuth login (or was refused), while it does
        self.auth_problem: AuthProblem | None = None
        #: set (and replaced by a fresh one) at each change of :attr:`auth_problem`:
        #: who waits for a login to end takes it before looking at the state
        self.auth_changed = trio.Event()
        #: a ``type: remote`` server that turned out to speak only legacy SSE
        self.use_sse = False
        #: incarnations started so far
        self.incarnations = 0
        #: the live incarnation, whose connection calls may use directly
        self.current: ServerActor | None = None
        #: a copy of the consecutive restart the supervision tree last decided on (0: none
        #: yet, or the tree started the count over); the tree counts it, never this
        self.attempt = 0
        #: the tree's restart counts of the server's earlier lives: ``restart_child``
        #: starts the tree's count over, while ``health.restarts`` (a Prometheus counter)
        #: is the tree's restarts over the server's whole life
        self.earlier_restarts = 0
        #: what the server said it can do when it last connected (kept while it restarts)
        self.capabilities: types.ServerCapabilities | None = None
        #: how long each of its listings may be cached, and by whom (2026-07-28's
        #: ``ttlMs``, ``cacheScope``; the session-based protocol says nothing: 0, private)
        self.cache_hints: dict[str, tuple[int, str]] = {}
        #: how it is probed instead of ``ping``, which it does not answer (for its life)
        self.probe_fallback: str | None = None
        #: why calls fail once a reconfiguration took the server out (``None``: it is in)
        self.withdrawn_why: str | None = None

    # -- reading -----------------------------------------------------------------------

    @property
    def tools(self) -> list[types.Tool]:
        """The tools the server listed last (kept while it restarts)."""
        return self._tools

    def tool(self, name: str) -> types.Tool | None:
        """The listed tool of that (original) name, if any."""
        return self._by_name.get(name)

    # -- the actor's writes ------------------------------------------------------------

    def began(self, actor: ServerActor) -> int:
        """A new incarnation was made; returns its number (1 for the first)."""
        self.incarnations += 1
        return self.incarnations

    def live(self, actor: ServerActor) -> None:
        """``actor`` is the live incarnation (it was started by the tree)."""
        self.current = actor

    def ended(self, actor: ServerActor) -> None:
        """``actor``'s connection task ended: it is no longer the live incarnation."""
        if self.current is actor:
            self.current = None

    def cache_hinted(self, kind: str, ttl_ms: int, scope: str) -> None:
        """The server's last ``kind`` listing (``tools``, ``resources``, ``templates``,
        ``prompts``) may be cached ``ttl_ms`` ms, in ``scope`` (``public``/``private``;
        its least over the listing's pages)."""
        self.cache_hints[kind] = (ttl_ms, scope)

    def capabilities_declared(self, capabilities: types.ServerCapabilities | None) -> None:
        """A connection was made to a server that declared ``capabilities``."""
        self.capabilities = capabilities

    def tools_listed(self, tools: list[types.Tool]) -> None:
        """The server listed ``tools``: each checked here, once per list (names,
        descriptions, input schemas)."""
        self._tools = tools
        # A name listed twice is the first tool's (as in the catalog: the rest are invalid).
        self._by_name = {t.name: t for t in reversed(tools)}
        self.listing = listing = Listing(tools, self._limits)
        self.health.unsupported_tools = len(listing.problems)
        if listing.problems:
            log.warning(
                "invalid tools skipped",
                server=self.name,
                count=len(listing.problems),
                problems=list(listing.problems[:_LOGGED_PROBLEMS]),
            )
        if listing.notes:
            log.warning(
                "tool descriptions cut to the limit",
                server=self.name,
                count=len(listing.notes),
                notes=list(listing.notes[:_LOGGED_PROBLEMS]),
            )

    def tools_relisted(self, tools: list[types.Tool]) -> None:
        """The live connection listed its tools again (after a change notice)."""
        self.tools_listed(tools)
        self.health.tool_count = len(tools)

    def extras_listed(
        self,
        resources: Sequence[types.Resource] | None,
        templates: Sequence[types.ResourceTemplate] | None,
        prompts: Sequence[types.Prompt] | None,
    ) -> None:
        """Resources, templates and prompts as a connection listed them (``None``: not
        listed this time, the previous list is kept)."""
        if resources is not None:
            self.resources = list(resources)
        if templates is not None:
            self.resource_templates = list(templates)
        if prompts is not None:
            self.prompts = list(prompts)
        self.listed = True

    def probe_latched(self, method: str) -> None:
        """The server does not answer ``ping``: it is probed with ``method`` from now on."""
        self.probe_fallback = method

    def connecting(self) -> None:
        """A connection attempt begins."""
        self.health.status = ServerStatus.CONNECTING

    def fell_back_to_sse(self) -> None:
        """A ``type: remote`` server refused Streamable HTTP: legacy SSE from now on."""
        self.use_sse = True

    def spawned(self, pid: int) -> None:
        """A local server's process started as ``pid``."""
        self.health.pid = pid

    def auth_blocked(self, problem: AuthProblem, error: str) -> None:
        """The connection needs an OAuth login (or was refused one): ``error`` says so."""
        self.auth_problem = problem
        needs = problem.needs_login
        self.health.status = ServerStatus.NEEDS_AUTH if needs else ServerStatus.AUTH_FAILED
        self.health.last_error = error
        self._auth_moved()

    def auth_failed(self, problem: AuthProblem) -> None:
        """A login started for the server failed with ``problem``."""
        self.auth_problem = problem
        self.health.status = ServerStatus.AUTH_FAILED
        self.health.last_error = str(problem)
        self._auth_moved()

    def logged_in(self) -> None:
        """A new token came: the server connects again."""
        self.auth_problem = None
        self.health.status = ServerStatus.CONNECTING
        self._auth_moved()

    def _auth_moved(self) -> None:
        self.auth_changed.set()
        self.auth_changed = trio.Event()

    # -- a reconfiguration's writes ------------------------------------------------------

    def limited(self, limits: Limits) -> None:
        """The config's limits changed: the next listing is checked against ``limits``."""
        self._limits = limits

    def replaced(self) -> None:
        """What runs, or how it is reached, changed: what was learnt of the old one's
        transport (legacy SSE, the probe it answers) is forgotten."""
        self.use_sse = False
        self.probe_fallback = None

    def withdrawn(self, why: str) -> None:
        """A reconfiguration took the server out: its calls fail saying ``why``."""
        self.withdrawn_why = why

    # -- the tree's decisions ----------------------------------------------------------

    def decided(self, decision: Decision) -> tuple[int, float | None] | None:
        """Take in the tree's decision about this server: attempt, restart count, next
        retry and, when it gave up or started over, the status follow from it. Returns
        ``(attempt, retry_in)`` when the decision is to be announced (an ``mcp.error``),
        ``None`` otherwise."""
        h = self.health
        if isinstance(decision, RestartScheduled):
            self.attempt = decision.attempt
            h.next_retry_at = time.time() + decision.delay
            # A sibling's exit: this server's own events said it stopped.
            return (decision.attempt, decision.delay) if decision.own else None
        if isinstance(decision, Restarted):
            h.restarts = self.earlier_restarts + decision.restarts
            h.next_retry_at = None
        elif isinstance(decision, GaveUp):
            self.attempt = decision.attempt
            h.next_retry_at = None
            return (decision.attempt, None)
        elif isinstance(decision, NotRestarted):
            h.next_retry_at = None
            if decision.crashed:
                h.status = ServerStatus.FAILED
                return (self.attempt + 1, None)
        elif isinstance(decision, Terminated):
            # Stopped on purpose, also when it was down: not downtime.
            h.mark_stopped(trio.current_time())
        elif isinstance(decision, StartedOver):
            self.attempt = decision.attempt
            self.earlier_restarts = h.restarts
            h.consecutive_failures = 0
            if h.status is ServerStatus.FAILED:
                h.status = ServerStatus.IDLE
        return None
