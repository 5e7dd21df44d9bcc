"""The gateway's answers to resource requests: ``resources/list``,
``resources/templates/list``, ``resources/read``, ``resources/subscribe`` and
``resources/unsubscribe``.

Listings are the resources and templates of the servers listed now, as the request's
caller may see them (:class:`~._access.Access`). A read goes to the server that offers
the URI (a template's, or ``_meta`` naming one: :data:`~._context.SERVER_META`; an MCP
Apps UI resource, to the server its URI names: :mod:`._apps`), bounded by
:data:`~._context.TIMEOUT_META`; its not-found in the caller's own protocol era's code.
The backing server's questions during a read reach the caller through
:class:`~._asking.Asking`. Subscriptions are kept by
:class:`~._subscriptions.ResourceSubscriptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import (
    RequestUnencodable,
    ServerRequestError,
    SupervisorError,
    UnknownResource,
    UnknownServer,
)
from ..registry._resources import route_resource
from ..tools._outcome import error_data
from ._answers import unstamped
from ._apps import backing as apps_backing
from ._apps import contents_served, resource_served
from ._asking import held_of, request_gone, request_round, rounds_of
from ._context import NOT_FOUND, SERVER_META, TIMEOUT_META, not_found_code, timeout
from ._relay import connection_of

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._access import Access
    from ._asking import Asking
    from ._served import Served
    from ._subscriptions import ResourceSubscriptions

__all__ = ["ResourceRequests"]


class ResourceRequests:
    """Answers the resource requests of a gateway's clients: what ``served`` serves, to
    whom ``access`` lets use it, the servers' questions asked through ``asking``,
    subscriptions kept in ``subscriptions``."""

    __slots__ = ("access", "asking", "served", "subscriptions")

    def __init__(
        self,
        served: Served,
        access: Access,
        asking: Asking,
        subscriptions: ResourceSubscriptions,
    ) -> None:
        self.served = served
        self.access = access
        self.asking = asking
        self.subscriptions = subscriptions

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self.served.first_listing()
        up = self.access.up_for(ctx)
        return types.ListResourcesResult(
            **self.served.cache_hint("resources", up),
            resources=[
                r.resource.model_copy(
                    update={"name": r.name, **resource_served(r.resource, r.server)}
                )
                for r in self.served.sup.snapshot.resources
                if r.server in up
            ],
        )

    async def list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await self.served.first_listing()
        up = self.access.up_for(ctx)
        return types.ListResourceTemplatesResult(
            **self.served.cache_hint("templates", up),
            resource_templates=[
                t.template.model_copy(update={"name": t.name})
                for t in self.served.sup.snapshot.templates
                if t.server in up
            ],
        )

    def _read_from(self, uri: str, meta: Mapping[str, Any]) -> str | None:
        """The server a ``resources/read`` of ``uri`` goes to (its ``_meta`` naming one,
        :data:`~._context.SERVER_META`, or not), as far as the catalog tells now."""
        sup = self.served.sup
        found = apps_backing(uri, sup.servers)
        if found is not None:
            return found[0]
        named = meta.get(SERVER_META)
        if isinstance(named, str):
            return named
        snapshot = sup.snapshot
        return route_resource(uri, snapshot.resources, snapshot.templates)

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        meta: Mapping[str, Any] = params.meta or {}
        bound = timeout(meta.get(TIMEOUT_META))
        held = held_of(ctx, params)
        if held is not None:  # the caller's answers to its held request's questions
            return await self.asking.answered(ctx, held, params.input_responses, request_gone)
        rounds = rounds_of(ctx, params)
        # the server it goes to, named before the read: its requests may go to this caller
        backing = self._read_from(uri, meta)
        what = f"resource {uri!r}"
        sup, access, asking = self.served.sup, self.access, self.asking

        async def made() -> types.ReadResourceResult | types.InputRequiredResult:
            try:
                found = apps_backing(uri, sup.servers)
                if found is not None:  # a UI resource, under the URI naming its server
                    server, own = found
                    access.refuse_unserved(ctx, server)
                    with asking.asking(ctx, server):
                        read = await sup.read_resource(
                            own, server=server, timeout=bound, rounds=rounds
                        )
                    if isinstance(read, types.InputRequiredResult):
                        return request_round(ctx, read, server, what)
                    return unstamped(contents_served(read, server))
                named = meta.get(SERVER_META)
                if isinstance(named, str):  # `read --server NAME`: from that server, listed or not
                    if not self.served.serves(named):
                        refused = "not found: not served by this gateway"
                        raise MCPError(types.INVALID_PARAMS, refused, {"type": "UnknownServer"})
                    access.refuse_unserved(ctx, named)
                    owner: str | None = named
                else:
                    owner = access.resource_owner(ctx, uri)
                with asking.asking(ctx, backing):
                    read = await sup.read_resource(uri, server=owner, timeout=bound, rounds=rounds)
                if isinstance(read, types.InputRequiredResult):
                    return request_round(ctx, read, backing or self._read_from(uri, meta), what)
                return unstamped(read)
            except UnknownResource as exc:
                data = {"uri": uri, "type": type(exc).__name__}
                raise MCPError(not_found_code(ctx), str(exc), data) from None
            except (UnknownServer, RequestUnencodable) as exc:
                raise MCPError(
                    types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)
                ) from None
            except ServerRequestError as exc:
                # the backing server's own "not found" (either era's code): the caller's era's
                code = not_found_code(ctx) if exc.code in NOT_FOUND else types.INTERNAL_ERROR
                raise MCPError(code, str(exc), error_data(exc)) from None
            except (SupervisorError, TimeoutError) as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc), error_data(exc)) from None

        if rounds is not None and backing is not None and asking.asks_by_request(backing):
            return await asking.held_call(ctx, backing, made, request_gone)
        return await made()

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        try:
            self.access.resource_owner(ctx, uri)
            await self.subscriptions.subscribe(connection_of(ctx), uri)
        except UnknownResource as exc:
            raise MCPError(not_found_code(ctx), str(exc), {"uri": uri}) from None
        except RequestUnencodable as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), error_data(exc, sent=False)) from None
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.subscriptions.unsubscribe(connection_of(ctx), str(params.uri))
        return types.EmptyResult()
