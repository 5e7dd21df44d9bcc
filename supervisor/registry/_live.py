"""The registry actor: the merged catalog of tools, resources and prompts, kept current.

Servers report what they offer as messages (:class:`Offer`: the tools they listed, checked
once by the server when they arrived, whether they are connected, their resources,
templates and prompts) with :meth:`Registry.report`, which never blocks. The registry's
actor merges them — one merge per burst of reports — into an immutable :class:`Snapshot`
and publishes the difference:

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
snapshot from the offers the registry holds; servers and calls are untouched meanwhile and
keep the last snapshot. Without a running actor (a registry used on its own) each report is
merged at once, and a failing merge is logged and keeps the previous snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs
import mcp_types as types
import trio

from .. import events
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


class Registry:
    """The merged catalog of the servers named in ``order`` (config order).

    ``policy`` names tools, resources and prompts; ``builtins`` are names an MCP tool
    never gets; ``publish`` receives the ``tools.*`` events.
    """

    def __init__(
        self,
        order: Sequence[str],
        *,
        publish: Callable[[events.Event], None],
        policy: NamingPolicy | None = None,
        builtins: Iterable[str] = frozenset(),
    ) -> None:
        self._order = list(order)
        self._publish = publish
        self.policy = policy or NamingPolicy()
        self._builtins = frozenset(builtins)
        self._offers: dict[str, Offer] = {}
        empty = merge([], self.policy, self._builtins)
        self._snapshot = Snapshot(named=empty, current=empty)
        self._reported = 0  # reports received
        self._merged = 0  # reports the snapshot reflects
        self._progress = trio.Event() if _in_trio() else None
        self._actor: _RegistryActor | None = None
        self._refreshes = 0
        self._failures = 0
        self._last_error: str | None = None

    # -- the servers' side ---------------------------------------------------------------

    def report(self, offer: Offer) -> None:
        """Take in what one server offers now. Never blocks; merged soon (by the actor,
        one merge per burst) or at once when no actor runs."""
        self._offers[offer.server] = offer
        self._reported += 1
        actor = self._actor
        if actor is None:
            try:
                self._refresh()
            except Exception as exc:
                self._failed(exc)
                log.exception("merging the catalog failed; keeping the previous one")
        else:
            actor.wake()

    # -- the readers' side ---------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Whether a report is not merged yet (:meth:`settled` would wait)."""
        return self._merged < self._reported

    @property
    def snapshot(self) -> Snapshot:
        """The last merged snapshot."""
        return self._snapshot

    async def settled(self) -> Snapshot:
        """The snapshot, once it reflects every report made before this call (waiting for
        the actor's merge if one is pending)."""
        target = self._reported
        while self._merged < target:
            if self._progress is None:
                self._progress = trio.Event()
            await self._progress.wait()
        await trio.lowlevel.checkpoint()
        return self._snapshot

    def statistics(self) -> RegistryStatistics:
        return RegistryStatistics(
            refreshes=self._refreshes,
            pending=self._reported - self._merged,
            running=self._actor is not None,
            failures=self._failures,
            last_error=self._last_error,
            tools=len(self._snapshot.current),
        )

    # -- the actor -------------------------------------------------------------------------

    def incarnation(self) -> _RegistryActor:
        """A fresh incarnation of the registry's actor: a supervision-tree child."""
        return _RegistryActor(self)

    def _refresh(self) -> None:
        """Merge every offer and publish what changed; raises what merging raises."""
        target = self._reported
        policy = self.policy
        offers = [self._offers[name] for name in self._order if name in self._offers]
        named = merge(
            [(o.server, o.prefix, o.listing) for o in offers], policy, self._builtins, refuse=True
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
        old, self._snapshot = self._snapshot, snapshot
        self._refreshes += 1
        self._merged = target
        progress, self._progress = self._progress, None
        if progress is not None:
            progress.set()
        for event in diff(old.current, current).events():
            self._publish(event)
        self._publish_conflicts(old.current, current)

    def _failed(self, exc: BaseException) -> None:
        self._failures += 1
        self._last_error = f"{type(exc).__name__}: {exc}"

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
            self._publish(conflict.event())


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


class _RegistryActor:
    """One incarnation of the registry's actor (a supervision-tree child): merges once per
    burst of reports, one scheduling round after its first report. A merge that raises
    crashes it; the next incarnation starts by merging everything again."""

    __slots__ = ("registry", "_wakeup", "_stopping", "_due")

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._wakeup = trio.Event()  # not on a hot path: a fresh Event per wait is fine
        self._stopping = False
        # A new incarnation first merges what is not merged yet (after a crash: all of it).
        self._due = registry._merged < registry._reported

    def wake(self) -> None:
        self._due = True
        self._wakeup.set()

    def request_stop(self) -> None:
        self._stopping = True
        self.wake()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        registry = self.registry
        if registry._actor is not None:
            raise RuntimeError("the registry's actor is already running")
        registry._actor = self
        try:
            task_status.started()
            while True:
                if self._due:
                    # Let every task already runnable (the rest of the burst) report first.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    self._due = False
                    try:
                        registry._refresh()
                    except Exception as exc:
                        registry._failed(exc)
                        log.error(
                            "merging the catalog failed; the registry restarts",
                            error=registry._last_error,
                        )
                        raise
                    continue
                if self._stopping:
                    return
                await self._wakeup.wait()
                self._wakeup = trio.Event()
        finally:
            if registry._actor is self:
                registry._actor = None
