"""Listing what a server offers: its tools, resources (with templates) and prompts, all
pages within the server's limits, and again — coalesced — when it says they changed."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypedDict, TypeVar

import anyio
import mcp_types as types
import trio
from mcp import Client
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from ..actors._errors import collapse, leaves
from ..errors import CatalogTooLarge, PaginationError
from ..log import get_logger
from ..transports._pages import CATALOG_TOO_LARGE
from ..transports._receipts import Receipt, connection_closed, delivery

log = get_logger("supervisor.server")

_T = TypeVar("_T", bound=BaseModel)

Listing = Literal["resources", "prompts"]
"""What a ``list_changed`` notice asks to fetch again (resources include templates)."""


class _Extras(TypedDict, total=False):
    """What one listing of the extras got, by kind (a kind not listed: absent)."""

    resources: list[types.Resource]
    templates: list[types.ResourceTemplate]
    prompts: list[types.Prompt]


#: Seconds a 2026-07-28 connection waits for its change notice stream (``subscriptions/
#: listen``) to be acknowledged before it goes on without it: at most a third of the
#: server's ``initTimeout`` (see :func:`listen_ack_wait`).
LISTEN_ACK_WAIT = 3.0
#: Seconds before a change notice stream that failed is opened again, doubled after each
#: failure in a row up to :data:`RELISTEN_MOST`.
RELISTEN_FIRST = 1.0
RELISTEN_MOST = 60.0
#: What the log says of a connection without change notices (the reason with it).
NO_CHANGE_NOTICES = (
    "no change notices: its lists are fetched when it connects, and again once the "
    "stream opens (tried again in the background)"
)


def listen_ack_wait(init_timeout: float) -> float:
    """How long a connection waits for its change notice stream's acknowledgement: well
    under its ``initTimeout``, so that a stream that is never acknowledged cannot keep
    the server from being connected."""
    return min(LISTEN_ACK_WAIT, init_timeout / 3)


def describe(error: BaseException) -> str:
    """One line for an error, the one that matters inside exception groups."""
    error = collapse(error)
    extra = ""
    if isinstance(error, BaseExceptionGroup):
        real = [e for e in leaves(error) if not isinstance(e, trio.Cancelled)] or [error]
        error, extra = real[0], (f" (and {len(real) - 1} more)" if len(real) > 1 else "")
    return (str(error) or type(error).__name__) + extra


class Listings:
    """What one incarnation lists of its server — tools, resources (with templates) and
    prompts — and lists again, coalesced, when the server says they changed.

    Owned by a :class:`~supervisor.server._actor.ServerActor` incarnation: ``nursery`` is the
    incarnation's (re-fetches run there) and ``client()`` its current SDK client
    (``None`` between sessions). What is listed goes onto ``server``.
    """

    def __init__(
        self, server: Any, nursery: trio.Nursery, client: Callable[[], Client | None]
    ) -> None:
        self.server = server
        self._nursery = nursery
        self._client = client
        self._relisting = False
        self._relist_again = False
        self._refetching: set[Listing] = set()
        self._refetch_again: set[Listing] = set()

    async def all_tools(
        self, client: Client, cache_mode: Literal["use", "refresh"] = "use"
    ) -> list[types.Tool]:
        """Every page of the tool list; ``"refresh"``: none from the client's cache."""
        hint = _Hint()

        async def page(cursor: str | None) -> tuple[list[types.Tool], str | None]:
            got = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            hint.page(got)
            return got.tools, got.next_cursor

        tools = await self._list_pages("tools", page)
        self.server.state.cache_hinted("tools", *hint.value)
        return tools

    async def relist(self) -> None:
        """Fetch the tool list again after a change notice, or after a gap in them (none
        from the client's cache). A burst of notices costs at most two fetches: one
        running, and one more for everything that came meanwhile."""
        if self._relisting:
            self._relist_again = True
            return
        self._relisting = True
        try:
            while (client := self._client()) is not None:
                self._relist_again = False
                receipt = Receipt()
                token = delivery.set(receipt)
                try:
                    tools = await self.all_tools(client, "refresh")
                except MCPError as exc:
                    if connection_closed(exc, receipt):
                        # The connection died under the fetch: the session reports why
                        # (the transport's reason); raising here would end the
                        # incarnation first, with only "Connection closed" to say.
                        return
                    # The server refused to list them again: it keeps the tools it had.
                    log.warning(
                        "listing tools again failed; the tools listed before are kept",
                        server=self.server.name,
                        error=f"{exc.message} (MCP error {exc.code})",
                    )
                    return
                finally:
                    delivery.reset(token)
                server = self.server
                before = {t.name: t for t in server.tools}
                server.state.tools_relisted(tools)
                if {t.name: t for t in tools} != before:
                    server.changed()  # the live catalog publishes what changed
                if not self._relist_again:
                    return
        finally:
            self._relisting = False

    async def _list_pages(
        self, what: str, fetch: Callable[[str | None], Awaitable[tuple[Sequence[_T], str | None]]]
    ) -> list[_T]:
        """Every page of one listing (``fetch(cursor)`` → items, next cursor), within the
        server's limits (:class:`~supervisor.config._limits.Limits`, as for tools): a listing that
        grows too large raises :class:`~supervisor.errors.CatalogTooLarge`; one that needs
        more than ``max_list_pages`` requests, or is handed a cursor it was handed before
        (a server that would page forever), raises
        :class:`~supervisor.errors.PaginationError` and is stopped there."""
        limits = self.server.limits
        name = self.server.name
        items: list[_T] = []
        cursor: str | None = None
        seen: set[str] = set()
        size = 0
        pages = 0
        while True:
            try:
                page, cursor = await fetch(cursor)
            except MCPError as exc:
                if exc.code != CATALOG_TOO_LARGE or not isinstance(exc.data, dict):
                    raise
                # The transport dropped the page unparsed (see supervisor._pages).
                dropped = exc.data
                raise self._too_large(
                    what, len(items) + int(dropped["count"]), size + int(dropped["size"])
                ) from None
            pages += 1
            items.extend(page)
            size += sum(len(item.model_dump_json()) for item in page)
            if len(items) > limits.max_tools_per_server or size > limits.max_catalog_bytes:
                raise self._too_large(what, len(items), size)
            if not cursor:
                return items
            if cursor in seen:
                shown = cursor if len(cursor) <= 80 else cursor[:77] + "..."
                raise PaginationError(
                    f"MCP server {name!r} sent the {what} cursor {shown!r} a second time "
                    f"(after {pages} pages): its pagination would never end, so the listing "
                    "was stopped. The server is at fault: fix or update it",
                    server=name,
                    what=what,
                    pages=pages,
                    cursor=cursor,
                )
            if pages >= limits.max_list_pages:
                raise PaginationError(
                    f"MCP server {name!r} was still paginating its {what} after "
                    f"{pages} requests, the limit (supervisor.limits.maxListPages); the "
                    "listing was stopped. Raise that limit if the server really has that "
                    "many pages",
                    server=name,
                    what=what,
                    pages=pages,
                )
            seen.add(cursor)

    def _too_large(self, what: str, count: int, size: int) -> CatalogTooLarge:
        """The error of a listing of ``count`` items, ``size`` bytes, over the limits."""
        limits = self.server.limits
        name = self.server.name
        return CatalogTooLarge(
            f"MCP server {name!r} lists {count} {what} ({size} bytes), more than the "
            f"limits ({limits.max_tools_per_server} {what}, {limits.max_catalog_bytes} bytes); "
            "raise supervisor.limits (maxToolsPerServer, maxCatalogBytes) if that is expected",
            server=name,
        )

    async def extras(self, client: Client, which: Sequence[Listing]) -> bool:
        """List the server's resources (with templates) and/or prompts, as its capabilities
        advertise them, onto the :class:`~._managed.ServerHandle`; what it does not advertise is
        empty. A listing that fails or takes longer than the server's ``timeout`` is
        logged and keeps the previous list: the tools are served regardless. The new lists
        are set together, once all are in (so a caller that reports them right after
        reports what a reader of the server sees). Returns whether anything changed."""
        server = self.server
        capabilities = client.server_capabilities
        before = (server.resources, server.resource_templates, server.prompts)
        got: _Extras = {}
        hints = {kind: _Hint() for kind in ("resources", "templates", "prompts")}

        async def resources() -> None:
            if capabilities.resources is None:
                got["resources"] = []
                return

            async def page(cursor: str | None) -> tuple[list[types.Resource], str | None]:
                listed = await client.list_resources(cursor=cursor, cache_mode="refresh")
                hints["resources"].page(listed)
                return listed.resources, listed.next_cursor

            got["resources"] = await self._list_pages("resources", page)

        async def templates() -> None:
            if capabilities.resources is None:
                got["templates"] = []
                return

            async def page(cursor: str | None) -> tuple[list[types.ResourceTemplate], str | None]:
                listed = await client.list_resource_templates(cursor=cursor, cache_mode="refresh")
                hints["templates"].page(listed)
                return listed.resource_templates, listed.next_cursor

            try:
                got["templates"] = await self._list_pages("resource templates", page)
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
                got["templates"] = []  # resources without templates: common

        async def prompts() -> None:
            if capabilities.prompts is None:
                got["prompts"] = []
                return

            async def page(cursor: str | None) -> tuple[list[types.Prompt], str | None]:
                listed = await client.list_prompts(cursor=cursor, cache_mode="refresh")
                hints["prompts"].page(listed)
                return listed.prompts, listed.next_cursor

            got["prompts"] = await self._list_pages("prompts", page)

        async def guarded(what: str, listing: Callable[[], Awaitable[None]]) -> None:
            with trio.move_on_after(server.config.timeout) as scope:
                try:
                    await listing()
                except Exception as exc:  # the tools are served all the same
                    log.warning(f"listing {what} failed", server=server.name, error=describe(exc))
            if scope.cancelled_caught:
                log.warning(
                    f"listing {what} timed out", server=server.name, timeout=server.config.timeout
                )

        async with trio.open_nursery() as nursery:
            if "resources" in which:
                nursery.start_soon(guarded, "resources", resources)
                nursery.start_soon(guarded, "resource templates", templates)
            if "prompts" in which:
                nursery.start_soon(guarded, "prompts", prompts)
        # No checkpoint from here to the caller's report.
        for kind, key in (
            ("resources", "resources"),
            ("templates", "templates"),
            ("prompts", "prompts"),
        ):
            if key in got:
                server.state.cache_hinted(kind, *hints[kind].value)
        server.state.extras_listed(
            got.get("resources"),
            got.get("templates"),
            got.get("prompts"),
        )
        return (server.resources, server.resource_templates, server.prompts) != before

    async def extras_after_connect(self, client: Client) -> None:
        """List resources (with templates) and prompts on a connection that already counts
        as connected (its tools are in: a restart is up as soon as it can take calls).
        What was listed before is kept, and served, until the new lists are in; a change
        is published (``server.changed()``); a failure is logged and keeps them, as in
        :meth:`extras`. A change notice that comes meanwhile has its kind fetched again
        once this is done, coalesced as :meth:`refetch` coalesces them."""
        kinds: tuple[Listing, ...] = ("resources", "prompts")
        which: list[Listing] = [what for what in kinds if what not in self._refetching]
        self._refetch_again.update(what for what in kinds if what not in which)
        if not which:
            return
        self._refetching.update(which)
        try:
            if await self.extras(client, which):
                self.server.changed()
        finally:
            self._refetching.difference_update(which)
        for what in which:
            if what in self._refetch_again:
                self._nursery.start_soon(self.refetch, what)

    async def refetch(self, what: Listing) -> None:
        """Fetch resources (and templates) or prompts again after a change notice;
        coalesced like :meth:`relist`: at most one fetch running and one more queued."""
        if what in self._refetching:
            self._refetch_again.add(what)
            return
        self._refetching.add(what)
        try:
            while (client := self._client()) is not None:
                self._refetch_again.discard(what)
                if await self.extras(client, (what,)):
                    self.server.changed()
                if what not in self._refetch_again:
                    return
        finally:
            self._refetching.discard(what)

    async def listen_for_changes(
        self,
        client: Client,
        ack_wait: float = LISTEN_ACK_WAIT,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """On 2026-07-28 connections change notices come on a `subscriptions/listen`
        stream; open it (and again, if it drops while the connection lives). Reports
        started once the first is acknowledged — or refused, or not acknowledged within
        ``ack_wait`` seconds: the stream is optional, so the connection goes on without
        it (logged once, as a warning) and it is opened again in the background, after
        :data:`RELISTEN_FIRST` seconds, doubled after each failure in a row up to
        :data:`RELISTEN_MOST`. A stream that opens after a gap has the lists fetched
        again: a change made meanwhile was announced to no one. A server that does not
        know the method (``-32601``) is not asked again on this connection."""
        name = self.server.name
        capabilities = client.server_capabilities
        delay = RELISTEN_FIRST
        missing = False  # without change notices now: said once, until they are back
        gap = False  # a stream was open before, or failed to: changes may have gone unheard
        while True:
            acknowledged = False
            try:
                with trio.move_on_after(ack_wait) as waiting:
                    async with client.listen(
                        tools_list_changed=True,
                        resources_list_changed=capabilities.resources is not None,
                        prompts_list_changed=capabilities.prompts is not None,
                    ) as subscription:
                        waiting.deadline = math.inf
                        acknowledged = True
                        task_status.started()
                        task_status = trio.TASK_STATUS_IGNORED
                        if missing:
                            log.info("change notices back", server=name)
                            missing = False
                        if gap:
                            self._fetch_all_again(client)
                        gap = True
                        delay = RELISTEN_FIRST
                        async for event in subscription:
                            if isinstance(event, ToolsListChanged):
                                self._nursery.start_soon(self.relist)
                            elif isinstance(event, ResourcesListChanged):
                                self._nursery.start_soon(self.refetch, "resources")
                            elif isinstance(event, PromptsListChanged):
                                self._nursery.start_soon(self.refetch, "prompts")
                if not waiting.cancelled_caught:
                    return  # closed gracefully: the server will send no more
            except ListenNotSupportedError as exc:  # (only 2026-07-28 connections listen)
                log.info(NO_CHANGE_NOTICES, server=name, reason=str(exc))
                task_status.started()
                return
            except MCPError as exc:
                why = f"it refused subscriptions/listen: {exc.message} (MCP error {exc.code})"
                if exc.code == types.METHOD_NOT_FOUND:
                    log.info(NO_CHANGE_NOTICES, server=name, reason=why)
                    task_status.started()
                    return
            except TimeoutError:  # the client's own read timeout (a client option)
                why = "it did not acknowledge subscriptions/listen within the read timeout"
            except (SubscriptionLost, anyio.BrokenResourceError):
                why = "its subscriptions/listen stream ended before it was acknowledged"
            else:
                why = f"it did not acknowledge subscriptions/listen within {ack_wait:g} s"
            task_status.started()
            task_status = trio.TASK_STATUS_IGNORED
            gap = True
            if acknowledged:  # it was open, and dropped: opened again soon
                log.debug("change notice stream dropped", server=name, again_in=delay)
            elif not missing:
                missing = True
                log.warning(NO_CHANGE_NOTICES, server=name, reason=why, again_in=delay)
            else:
                log.debug(NO_CHANGE_NOTICES, server=name, reason=why, again_in=delay)
            await trio.sleep(delay)
            if not acknowledged:
                delay = min(delay * 2, RELISTEN_MOST)

    def _fetch_all_again(self, client: Client) -> None:
        """Fetch every list again, coalesced with any fetch already under way."""
        self._nursery.start_soon(self.relist)
        if client.server_capabilities.resources is not None:
            self._nursery.start_soon(self.refetch, "resources")
        if client.server_capabilities.prompts is not None:
            self._nursery.start_soon(self.refetch, "prompts")


class _Hint:
    """How long a listing may be cached, and by whom: the least of its pages' ``ttlMs``,
    ``private`` if any page is (a session-based server's pages say nothing: 0, private)."""

    __slots__ = ("scope", "ttl_ms")

    def __init__(self) -> None:
        self.ttl_ms: int | None = None
        self.scope = "public"

    def page(self, result: types.CacheableResult) -> None:
        ttl = result.ttl_ms if "ttl_ms" in result.model_fields_set else 0
        self.ttl_ms = ttl if self.ttl_ms is None else min(self.ttl_ms, ttl)
        if result.cache_scope != "public" or "cache_scope" not in result.model_fields_set:
            self.scope = "private"

    @property
    def value(self) -> tuple[int, str]:
        return (self.ttl_ms or 0, self.scope if self.ttl_ms is not None else "private")
