"""The registry actor: the merged catalog of tools, resources and prompts, kept current.

Servers report what they offer as messages (:class:`Offer`: the tools they listed, checked
once by the server when they arrived, whether they are connected, their resources,
templates and prompts) with :meth:`Registry.report`, which never blocks: it casts the offer
to :attr:`Registry.address`, a :class:`~supervisor.actors.CastAddress` that coalesces by
server (a newer report replaces one still waiting). The registry's actor
(:attr:`Registry.spec`) merges them — one merge per burst of reports — into an immutable
:class:`Snapshot` and publishes the difference:

* names are given from every server's last known tool list, in config order, so a server
  that restarts keeps its names and a call to one of its tools waits for it rather than
  failing to resolve (:attr:`Snapshot.named`);
* what is *offered* is the part whose servers are connected (:attr:`Snapshot.current`): a
  server that goes down withdraws its tools until it is back;
* config order settles clashes, so an earlier server connecting for the first time after a
  later one takes the clashing names from it; a name an embedder registered as a built-in
  is never given to an MCP tool (it keeps a prefixed name; ``tools.conflict`` with
  ``builtin`` set).

Each merge publishes ``tools.deregistered``, ``tools.registered``, ``tools.updated``
(merged names, by server), then a ``tools.conflict`` for each new clash. Changes that cancel
out within one burst publish nothing.

Readers take :attr:`Registry.snapshot` — never merging in their own task — or await
:meth:`Registry.settled` for a snapshot that includes everything reported so far. A merge
that raises (a bug) crashes the actor: the tree starts a new incarnation, which rebuilds the
snapshot from the offers already taken in (the actor's state outlives an incarnation, as
its address does); servers and calls are untouched meanwhile and keep the last snapshot.
Without a running actor (a registry used on its own) each report is merged at once, and a
failing merge is logged and keeps the previous snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias, cast

import attrs
import mcp_types as types
import trio

from ..actors import Actor, CastAddress, Child, ChildSpec, actor_spec
from ..events import _catalog as events
from ..log import get_logger
from ._catalog import Catalog
from ._merge import Listing, diff, merge
from ._naming import NamingPolicy
from ._resources import (
    MergedPrompt,
    MergedResource,
    MergedResourceTemplate,
    merge_prompts,
    merge_resource_templates,
    merge_resources,
)

log = get_logger("supervisor.registry")


@attrs.frozen
class Offer:
    """What one server offers, as it reports it: a message to the registry."""

    server: str
    prefix: str
    #: its tools as last listed, checked once when they arrived
    listing: Listing
    #: whether it is connected: only then are its tools on offer
    connected: bool
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()


@attrs.frozen
class Snapshot:
    """The merged catalog at one moment; never changes (a new merge makes a new one)."""

    #: every known tool, connected or not, under the name it has (or will have)
    named: Catalog
    #: the tools on offer now: those of connected servers
    current: Catalog
    resources: tuple[MergedResource, ...] = ()
    templates: tuple[MergedResourceTemplate, ...] = ()
    prompts: tuple[MergedPrompt, ...] = ()


@attrs.frozen
class RegistryStatistics:
    """What :meth:`Registry.statistics` reports."""

    #: merges done so far (each published one difference)
    refreshes: int
    #: reports not merged yet
    pending: int
    #: whether the registry's actor is running
    running: bool
    #: merges that raised (each crashed the actor, when it ran)
    failures: int
    #: what the last failed merge raised
    last_error: str | None
    #: tools on offer, as of the last merge
    tools: int


@attrs.frozen
class _Report:
    """An offer as cast to the registry's address, numbered in report order."""

    seq: int
    offer: Offer


@attrs.frozen
class _Arranged:
    """A new config's servers (``order``: config order) and naming ``policy``, as cast to
    the registry's address: the offers of servers not named are dropped."""

    seq: int
    order: tuple[str, ...]
    policy: NamingPolicy


#: what is cast to the registry's address (whose mailbox is untyped: it gives objects)
_Message: TypeAlias = _Report | _Arranged


def _server_of(report: object) -> str:
    """The coalescing key of the registry's mailbox: a server's newer report replaces its
    older one still waiting (and a newer arrangement an older one)."""
    if isinstance(report, _Arranged):
        return "\0arranged"  # no server's name: config names are never empty
    return cast(_Report, report).offer.server  # the mailbox holds only these two


class _Merged:
    """The registry actor's state, which outlives its incarnations (as its address does):
    the offers taken from the mailbox and the snapshot merged from them.

    Written by the actor only — or, while none runs, by :meth:`Registry.report` in the
    reporting task; everyone else reads it.
    """

    def __init__(
        self,
        order: Sequence[str],
        publish: Callable[[events.Event], None],
        policy: NamingPolicy,
        builtins: frozenset[str],
    ) -> None:
        self.order = list(order)
        self.publish = publish
        self.policy = policy
        self.builtins = builtins
        self.offers: dict[str, Offer] = {}
        empty = merge([], policy, builtins)
        self.snapshot = Snapshot(named=empty, current=empty)
        self.taken = 0  # the last report taken in
        self.merged = 0  # the last report the snapshot reflects
        self.progress = trio.Event() if _in_trio() else None  # set by each merge
        self.refreshes = 0
        self.failures = 0
        self.last_error: str | None = None

    @property
    def due(self) -> bool:
        """Whether a report taken in is not merged yet."""
        return self.merged < self.taken

    def take(self, report: _Report | _Arranged) -> None:
        if isinstance(report, _Arranged):
            self.order = list(report.order)
            self.policy = report.policy
            named = set(report.order)
            self.offers = {n: o for n, o in self.offers.items() if n in named}
        else:
            self.offers[report.offer.server] = report.offer
        self.taken = report.seq

    def refresh(self) -> None:
        """Merge every offer and publish what changed; raises what merging raises."""
        target = self.taken
        policy = self.policy
        offers = [self.offers[name] for name in self.order if name in self.offers]
        named = merge(
            [(o.server, o.prefix, o.listing) for o in offers], policy, self.builtins, refuse=True
        )
        current = named.only({o.server for o in offers if o.connected})
        snapshot = Snapshot(
            named=named,
            current=current,
            resources=tuple(
                merge_resources([(o.server, o.prefix, o.resources) for o in offers], policy)
            ),
            templates=tuple(
                merge_resource_templates(
                    [(o.server, o.prefix, o.templates) for o in offers], policy
                )
            ),
            prompts=tuple(merge_prompts([(o.server, o.prefix, o.prompts) for o in offers], policy)),
        )
        old, self.snapshot = self.snapshot, snapshot
        self.refreshes += 1
        self.merged = target
        progress, self.progress = self.progress, None
        if progress is not None:
            progress.set()
        for event in diff(old.current, current).events():
            self.publish(event)
        self._publish_conflicts(old.current, current)

    def failed(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"

    def _publish_conflicts(self, old: Catalog, new: Catalog) -> None:
        seen = {(c.name, c.servers, c.builtin, c.refused) for c in old.conflicts}
        for conflict in new.conflicts:
            if (conflict.name, conflict.servers, conflict.builtin, conflict.refused) in seen:
                continue
            if conflict.refused:
                log.error(
                    "tool name clash refused (clash policy 'error'): only the first "
                    "server's tool is offered; give the servers distinct prefixes",
                    name=conflict.name,
                    servers=conflict.servers,
                    builtin=conflict.builtin,
                )
            elif conflict.builtin:
                log.warning(
                    "tool name is a built-in's: the MCP tool keeps a prefixed name",
                    name=conflict.name,
                    servers=conflict.servers,
                )
            else:
                log.warning("tool name conflict", name=conflict.name, servers=conflict.servers)
            self.publish(conflict.event())


class Registry:
    """The merged catalog of the servers named in ``order`` (config order).

    ``policy`` names tools, resources and prompts; ``builtins`` are names an MCP tool
    never gets; ``publish`` receives the ``tools.*`` events.
    """

    #: The registry actor's mailbox: casts only, a server's newer report replacing its
    #: older one still waiting.
    address: CastAddress
    #: The registry actor as a supervision-tree child, its address included.
    spec: ChildSpec

    def __init__(
        self,
        order: Sequence[str],
        *,
        publish: Callable[[events.Event], None],
        policy: NamingPolicy | None = None,
        builtins: Iterable[str] = frozenset(),
    ) -> None:
        self.policy = policy or NamingPolicy()
        self._merged = _Merged(order, publish, self.policy, frozenset(builtins))
        self.address = CastAddress("registry", math.inf, key=_server_of)
        self.spec = actor_spec(
            "registry",
            lambda: _RegistryActor(self._merged, self.address),
            address=self.address,
            shutdown_timeout=5.0,
        )
        self._reported = 0  # reports received

    # -- the servers' side ---------------------------------------------------------------

    def report(self, offer: Offer) -> None:
        """Take in what one server offers now. Never blocks; merged soon (by the actor,
        one merge per burst) or at once when no actor runs."""
        self._reported += 1
        self._cast(_Report(self._reported, offer))

    def arrange(self, order: Sequence[str], policy: NamingPolicy | None = None) -> None:
        """Take a new config's servers (``order``: config order; what other servers
        offered is forgotten) and naming ``policy`` (default: the current one). Never
        blocks; merged like a report, after the reports made before it."""
        if policy is not None:
            self.policy = policy
        self._reported += 1
        self._cast(_Arranged(self._reported, tuple(order), self.policy))

    def _cast(self, report: _Report | _Arranged) -> None:
        address = self.address
        if address.serving:
            address.cast(report)
            return
        merged = self._merged
        while address.waiting:  # left by an incarnation that ended: older than this one
            merged.take(cast(_Message, address.take()))
        merged.take(report)
        try:
            merged.refresh()
        except Exception as exc:
            merged.failed(exc)
            log.exception("merging the catalog failed; keeping the previous one")

    # -- the readers' side ---------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Whether a report is not merged yet (:meth:`settled` would wait)."""
        return self._merged.merged < self._reported

    @property
    def snapshot(self) -> Snapshot:
        """The last merged snapshot."""
        return self._merged.snapshot

    async def settled(self) -> Snapshot:
        """The snapshot, once it reflects every report made before this call (waiting for
        the actor's merge if one is pending)."""
        target = self._reported
        merged = self._merged
        while merged.merged < target:
            if merged.progress is None:
                merged.progress = trio.Event()
            await merged.progress.wait()
        await trio.lowlevel.checkpoint()
        return merged.snapshot

    async def after(self, since: Snapshot) -> Snapshot:
        """The snapshot, once a merge has made another than ``since``: what the servers
        offer (tools, resources, templates, prompts) or who is up may have changed."""
        merged = self._merged
        while merged.snapshot is since:
            if merged.progress is None:
                merged.progress = trio.Event()
            await merged.progress.wait()
        return merged.snapshot

    def statistics(self) -> RegistryStatistics:
        merged = self._merged
        return RegistryStatistics(
            refreshes=merged.refreshes,
            pending=self._reported - merged.merged,
            running=self.address.serving,
            failures=merged.failures,
            last_error=merged.last_error,
            tools=len(merged.snapshot.current),
        )

    # -- the actor -------------------------------------------------------------------------

    def incarnation(self) -> Child:
        """A fresh incarnation of the registry's actor, serving :attr:`address`: a
        supervision-tree child (``spec.start``)."""
        return self.spec.start()


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


class _RegistryActor(Actor):
    """One incarnation of the registry's actor: takes in each report, and merges once per
    burst of them, one scheduling round after the burst's first report.

    A merge that raises crashes it; the next incarnation starts by merging again what
    was not merged (the offers outlive the incarnation).
    """

    def __init__(self, merged: _Merged, address: CastAddress) -> None:
        self.merged = merged
        self.address = address
        self._waited = False  # the current burst has had its scheduling round

    async def handle(self, message: object) -> None:
        self.merged.take(cast(_Message, message))  # only reports are cast here
        if not self._waited:
            self._waited = True
            # Let every task already runnable (the rest of the burst) report first.
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def idle(self) -> None:
        merged = self.merged
        if not merged.due:
            return
        self._waited = False
        try:
            merged.refresh()
        except Exception as exc:
            merged.failed(exc)
            log.error("merging the catalog failed; the registry restarts", error=merged.last_error)
            raise

    async def drain(self) -> None:
        """A graceful stop merges what was reported before it."""
        address = self.address
        while address.waiting:
            self.merged.take(cast(_Message, address.take()))
        await self.idle()
