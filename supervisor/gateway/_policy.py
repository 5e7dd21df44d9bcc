"""Who may use what through a team gateway: the config's ``gateway.policy``.

A :class:`Policy` is a list of rules; each is for some callers (by ``subjects``, or by
``groups`` from their token; a rule naming neither is for every caller) and lets them
list and call the tools matching its ``tools`` globs (none: every tool) of the servers
matching its ``servers`` globs (none: every server). A caller's :class:`Grant` is the
union of the rules for them: a tool no rule grants is not listed, not found by search,
and not callable — it answers as a tool this gateway does not serve, so its existence is
not told either. A server's resources, prompts and completions are granted with the
whole server — by a rule for it that names no ``tools``; a rule naming tools grants
those tools alone. A server no rule names is not shown at all (status, events). Without
a policy every caller may use everything served.

A rule's ``rateLimit`` bounds how often each of its callers calls the tools it grants: a
token bucket per caller and rule (:mod:`supervisor.tools._limits`), which the gate spends
from just before it sends a call (:meth:`Policy.admission`, passed down as
:data:`~supervisor.tools._limits.caller_admission`) — a call over one is refused unsent.

Events (``/events``) are narrowed alike, each kind by what it tells
(:meth:`Narrowed.event`): a caller is told of the tools, resources and servers they may
see, and of no other user's logins.

:class:`Narrowed` is the gateway as one caller sees it — what the handlers of a request
with a caller, and the tool-search meta-tools, are given in place of the gateway.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
import msgspec
import trio

from ..errors import UnknownTool
from ..events import _catalog as events
from ..tools._limits import Rate, TokenBucket, caller_admission, parse_rate, refuse
from ._resource import Caller
from ._search import SearchHost

if TYPE_CHECKING:
    from mcp import types

    from ..config._model import PolicyRule
    from ..registry import Catalog
    from ..runtime import SupervisorHandle
    from ..tools._request import ToolCall

__all__ = ["Grant", "Narrowed", "Policy"]

#: Grants a policy keeps, by subject and groups (past that, it forgets them all).
MAX_GRANTS = 1024
#: Rate-limit buckets a policy keeps, by rule and caller (past that, it forgets those
#: full again, then the oldest).
MAX_BUCKETS = 65536
#: The supervisor of the servers in the supervision tree (its ``supervisor.*`` events'
#: ``child`` is a server), and the name a ``tools.conflict`` gives an embedder's tool.
SERVERS_TREE = "servers"
BUILT_IN = "<built-in>"
_TOOLS_EVENTS = (events.ToolsRegistered, events.ToolsDeregistered, events.ToolsUpdated)


@attrs.frozen
class _Rule:
    servers: tuple[str, ...]
    tools: tuple[str, ...]
    #: the rule's ``rateLimit``, per caller (``None``: none); the rule it came from keys
    #: its callers' buckets
    rate: Rate | None = attrs.field(default=None, eq=False)
    source: PolicyRule | None = attrs.field(default=None, eq=False)

    def sees(self, server: str) -> bool:
        return not self.servers or any(fnmatch.fnmatchcase(server, g) for g in self.servers)

    def server(self, server: str) -> bool:
        return not self.tools and self.sees(server)

    def tool(self, server: str, name: str) -> bool:
        if not self.sees(server):
            return False
        return not self.tools or any(fnmatch.fnmatchcase(name, g) for g in self.tools)


@attrs.frozen
class Grant:
    """What one caller may use: the rules for them (``everything`` without a policy)."""

    rules: tuple[_Rule, ...]
    everything: bool = False

    def sees(self, server: str) -> bool:
        """Whether ``server`` is shown at all: a rule names it (its status, events)."""
        return self.everything or any(rule.sees(server) for rule in self.rules)

    def server(self, server: str) -> bool:
        """Whether the whole of ``server`` is granted — its resources, prompts and
        completions with its tools: a rule for it that names no ``tools``."""
        return self.everything or any(rule.server(server) for rule in self.rules)

    def tool(self, server: str, name: str) -> bool:
        """Whether the tool ``name`` (merged) of ``server`` may be listed and called."""
        return self.everything or any(rule.tool(server, name) for rule in self.rules)


#: The grant of every caller when there is no policy.
EVERYTHING = Grant((), everything=True)


class Policy:
    """The rules of ``gateway.policy`` (``None``: none, everything for everyone)."""

    def __init__(self, rules: Sequence[PolicyRule] | None) -> None:
        self._rules = None if rules is None else tuple(rules)
        self._grants: dict[tuple[str, tuple[str, ...]], Grant] = {}
        #: each caller's bucket of each rule with a ``rateLimit``, by (rule, subject)
        self._buckets: dict[tuple[PolicyRule, str], TokenBucket] = {}

    def keep_limits(self, before: Policy) -> None:
        """Take over what ``before`` (the policy this one replaces: a reload) spent of
        the rate limits of the rules both have, so a reload refills nobody's."""
        kept = set(self._rules or ())
        self._buckets = {
            key: bucket
            for key, bucket in before._buckets.items()
            if key[0] in kept and key[0].rate_limit == bucket.rate.text
        }

    def admission(self, caller: Caller, grant: Grant) -> Callable[[str, str], None] | None:
        """The check of ``caller``'s rate limits (the rules of ``grant`` that have one) a
        call must pass — see :data:`~supervisor.tools._limits.caller_admission` — or
        ``None`` when no rule of theirs has one. A call is held to every limiting rule
        that grants its tool: over any, it is refused (the longest wait said); else it
        takes a token of each."""
        limited = [rule for rule in grant.rules if rule.rate is not None]
        if not limited:
            return None
        subject = caller.subject

        def admit(server: str, tool: str) -> None:
            now = trio.current_time()
            buckets = list(  # (two rules alike are one limit)
                dict.fromkeys(
                    self._bucket(rule, subject, now) for rule in limited if rule.tool(server, tool)
                )
            )
            waits = [(bucket.wait(now), bucket) for bucket in buckets]
            wait, over = max(waits, key=lambda pair: pair[0], default=(0.0, None))
            if over is not None and wait > 0:
                raise refuse(wait, over.rate, server=server, tool=tool, by="caller", caller=subject)
            for bucket in buckets:
                bucket.take(now)

        return admit

    def _bucket(self, rule: _Rule, subject: str, now: float) -> TokenBucket:
        assert rule.source is not None and rule.rate is not None
        key = (rule.source, subject)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full(now)
            bucket = self._buckets[key] = TokenBucket(rule.rate, now)
        return bucket

    def _forget_full(self, now: float) -> None:
        """Make room: forget the buckets that are full again (nothing spent to remember),
        and, if that is not half of them, the oldest."""
        buckets = self._buckets
        for key in [key for key, bucket in buckets.items() if bucket.full(now)]:
            del buckets[key]
        while len(buckets) > MAX_BUCKETS // 2:
            del buckets[next(iter(buckets))]

    def grant(self, caller: Caller) -> Grant:
        """The union of the rules for ``caller``."""
        if self._rules is None:
            return EVERYTHING
        key = (caller.subject, caller.groups)
        grant = self._grants.get(key)
        if grant is None:
            groups = set(caller.groups)
            grant = Grant(
                tuple(
                    _Rule(
                        rule.servers,
                        rule.tools,
                        None if rule.rate_limit is None else parse_rate(rule.rate_limit),
                        rule,
                    )
                    for rule in self._rules
                    if (not rule.subjects and not rule.groups)
                    or caller.subject in rule.subjects
                    or not groups.isdisjoint(rule.groups)
                )
            )
            if len(self._grants) >= MAX_GRANTS:
                self._grants.clear()
            self._grants[key] = grant
        return grant


class Narrowed:
    """``host`` (the gateway) as ``caller`` sees it under ``grant``: a
    :class:`~._search.SearchHost` whose catalog, ``serves`` and calls are narrowed to
    the grant, each call made for the caller."""

    def __init__(
        self,
        host: SearchHost,
        caller: Caller,
        grant: Grant,
        catalogs: dict[Grant, tuple[Catalog, Catalog]] | None = None,
        admission: Callable[[str, str], None] | None = None,
    ) -> None:
        self.host = host
        self.caller = caller
        self.grant = grant
        #: the check of the caller's rate limits its calls pass (:meth:`Policy.admission`)
        self.admission = admission
        #: the narrowed catalog of each grant, by the served catalog it was made from
        #: (shared by the views of one gateway: callers of one grant share it)
        self._catalogs = {} if catalogs is None else catalogs

    @property
    def sup(self) -> SupervisorHandle:
        return self.host.sup

    def serves(self, server: str, name: str | None = None) -> bool:
        """Whether ``server`` is shown to the caller (and its tool ``name`` granted)."""
        if not self.host.serves(server, name):
            return False
        return self.grant.sees(server) if name is None else self.grant.tool(server, name)

    def whole(self, server: str) -> bool:
        """Whether the caller may use ``server``'s resources, prompts and completions."""
        return self.host.serves(server) and self.grant.server(server)

    def event(self, event: events.Event) -> events.Event | None:
        """``event`` as the caller may be told of it on ``/events``, or ``None`` when it
        tells what they may not see:

        * an ``mcp.auth.*`` event of a caller's own login to a ``perUser`` server
          (``user`` set): to that caller alone (another user's login, its failure text
          included, is theirs);
        * ``tools.registered``, ``deregistered``, ``updated``: ``names`` narrowed to the
          tools granted, dropped when none is;
        * ``mcp.resource.updated``: with the server's resources (the whole server);
        * any other event of a server (its connection, health, process, its own login):
          when the server is shown, as ``/status`` shows it;
        * ``supervisor.*`` of the servers' supervisor: when the server ``child`` is shown;
          of the rest of the tree (the bus, the registry), to every caller, as
          ``/status``'s actors;
        * ``tools.conflict`` (a tool's own name, the servers that offer it): to a caller
          granted each of those servers whole;
        * ``bus.dropped``: always — it is about the caller's own stream.
        """
        if isinstance(event, events.ServerEvent):
            server = event.server
            user = getattr(event, "user", None)
            if user is not None and user != self.caller.subject:
                return None
            if isinstance(event, _TOOLS_EVENTS):
                return self._names(event)
            if isinstance(event, events.ResourceUpdated):
                return event if self.whole(server) else None
            return event if self.serves(server) else None
        if isinstance(event, events.ChildRestarted | events.ChildGaveUp | events.Escalated):
            if event.supervisor == SERVERS_TREE:
                return event if self.serves(event.child) else None
            return event
        if isinstance(event, events.ToolsConflict):
            named = [server for server in event.servers if server != BUILT_IN]
            return event if all(map(self.whole, named)) else None
        return event if isinstance(event, events.BusDropped) else None

    def _names(
        self, event: events.ToolsRegistered | events.ToolsDeregistered | events.ToolsUpdated
    ) -> events.Event | None:
        """A ``tools.*`` event with only the granted tools' names (``None``: none is)."""
        kept = [name for name in event.names if self.serves(event.server, name)]
        if not kept:
            return None
        if len(kept) == len(event.names):
            return event
        return msgspec.structs.replace(event, names=kept)

    def catalog(self) -> Catalog:
        served = self.host.catalog()
        grant = self.grant
        if grant.everything:
            return served
        kept = self._catalogs.get(grant)
        if kept is not None and kept[0] is served:
            return kept[1]
        servers = [server for server in served.by_server if grant.sees(server)]
        catalog = served.only(servers, lambda e: grant.tool(e.server, e.name), private=True)
        if len(self._catalogs) >= MAX_GRANTS:
            self._catalogs.clear()
        self._catalogs[grant] = (served, catalog)
        return catalog

    async def first_listing(self) -> None:
        await self.host.first_listing()

    async def call(self, call: ToolCall) -> types.CallToolResult | types.InputRequiredResult:
        """The gateway's call, made for the caller whoever else it names — refused as a
        tool not served when the grant does not cover it (before anything is sent, with
        no close matches named)."""
        name = call.name
        if not self.grant.everything:
            server = await self._server_of(name)
            if server is None or not self.grant.tool(server, name):
                raise UnknownTool(f"tool {name!r} is not served by this gateway")
        subject = self.caller.subject
        if call.caller != subject:
            call = attrs.evolve(call, caller=subject)
        passing = caller_admission.set(self.admission)
        try:
            return await self.host.call(call)
        finally:
            caller_admission.reset(passing)

    async def _server_of(self, name: str) -> str | None:
        """The server of the merged tool ``name`` (one not listed yet: by its prefix) —
        waiting, as the supervisor's gate does, for the registry's merge of a listing a
        server made a moment ago: until then its tools are neither in the catalog nor
        taken by their prefix (the server has listed them), and a call of one, on a
        replica that just connected its server, was refused as not served."""
        sup = self.sup
        while True:
            entry = sup.snapshot.named.get(name)
            if entry is not None:
                return entry.server
            try:
                return sup.resolve(name)[0]
            except UnknownTool:
                if not sup.registry_statistics().pending:
                    return None
            await sup.snapshot_after(sup.snapshot)
