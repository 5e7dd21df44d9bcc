"""What the caller of a request may use: a team gateway narrowed to the caller's grant.

A request whose front named its caller (:data:`~._context.CALLER_SCOPE`: a team
gateway's, from the caller's access token) sees the gateway through the caller's grant
under the gateway's :class:`~._policy.Policy` — a :class:`~._policy.Narrowed` view whose
catalog, calls, resources and prompts are the grant's. A request without one (the static
token, stdio, the local socket) sees the whole gateway. Whatever a caller may not use is
answered as not found, as if the gateway did not serve it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..registry._resources import route_resource
from ._context import caller_of
from ._policy import Narrowed, Policy

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._resource import Caller
    from ._search import SearchHost
    from ._served import Served

__all__ = ["Access"]


class Access:
    """``host`` (the gateway, serving what ``served`` says) as each caller may use it
    under ``policy`` (``None``: a policy that grants every caller everything)."""

    __slots__ = ("_narrowed", "host", "policy", "served")

    def __init__(self, host: SearchHost, served: Served, policy: Policy | None = None) -> None:
        self.host = host
        self.served = served
        #: who may use what, per caller of a team gateway
        self.policy = policy if policy is not None else Policy(None)
        self._narrowed: dict[Any, Any] = {}  # the catalog of each grant (:class:`Narrowed`)

    def set_policy(self, policy: Policy) -> None:
        """Narrow each caller by ``policy`` from its next request on (a reloaded config's
        ``gateway.policy``); what callers spent of the rate limits both policies have is
        kept."""
        policy.keep_limits(self.policy)
        self.policy = policy
        self._narrowed.clear()

    def seen_by(self, ctx: ServerRequestContext[Any, Any]) -> SearchHost:
        """The gateway as the request's caller sees it: :attr:`host` itself for a request
        with no caller (the static token, stdio, the local socket), else narrowed to the
        caller's grant (:class:`~._policy.Narrowed`), its calls made for the caller."""
        caller = caller_of(ctx)
        if caller is None:
            return self.host
        grant = self.policy.grant(caller)
        admission = self.policy.admission(caller, grant)
        return Narrowed(self.host, caller, grant, self._narrowed, admission)

    def narrowed(self, caller: Caller | None) -> SearchHost:
        """The gateway as ``caller`` sees it (``None``: anyone let in), for a listing."""
        if caller is None:
            return self.host
        return Narrowed(self.host, caller, self.policy.grant(caller), self._narrowed)

    def whole(self, host: SearchHost, server: str) -> bool:
        """Whether ``host`` (:meth:`seen_by`'s) may use ``server`` whole: its resources,
        prompts and completions."""
        return host.whole(server) if isinstance(host, Narrowed) else self.served.serves(server)

    def up_for(self, ctx: ServerRequestContext[Any, Any]) -> set[str]:
        """The servers listed now (:meth:`~._served.Served.up`), less those the
        request's caller may not use."""
        up = self.served.up()
        host = self.seen_by(ctx)
        return {name for name in up if host.whole(name)} if isinstance(host, Narrowed) else up

    def refuse_unserved(self, ctx: ServerRequestContext[Any, Any], server: str | None) -> None:
        """Raise a not-found error when the request's caller may not use ``server``
        (``None``: the thing asked for belongs to no known server)."""
        host = self.seen_by(ctx)
        if isinstance(host, Narrowed) and (server is None or not host.whole(server)):
            raise MCPError(types.INVALID_PARAMS, "not found: not served by this gateway")

    def may_read(self, ctx: ServerRequestContext[Any, Any], uri: str) -> bool:
        """Whether the request's caller may read (and hear of) the resource ``uri``."""
        host = self.seen_by(ctx)
        if not isinstance(host, Narrowed):
            return True
        snapshot = self.served.sup.snapshot
        owner = route_resource(uri, snapshot.resources, snapshot.templates)
        return owner is not None and host.whole(owner)

    def resource_owner(self, ctx: ServerRequestContext[Any, Any], uri: str) -> str | None:
        """For a request with a caller under a policy: the server of resource ``uri``,
        refused when the caller may not use it; else ``None`` (the supervisor finds it)."""
        host = self.seen_by(ctx)
        if host is self.host:
            return None
        snapshot = self.served.sup.snapshot
        owner = route_resource(uri, snapshot.resources, snapshot.templates)
        self.refuse_unserved(ctx, owner)
        return owner
