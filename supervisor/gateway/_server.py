"""The SDK's low-level MCP server as the gateway runs it: declaring the optional
capabilities its backing servers offer, and which of its lists change.

Over HTTP the SDK's session manager asks for the initialization options without
arguments; :class:`GatewayServer` answers with the lists that change
(:attr:`GatewayServer.changes`) all the same, so handshake-era clients are told
``listChanged``. Of the optional capabilities (``logging``, ``completions``, resource
``subscribe``, the MCP Apps and tasks extensions) it declares only those
:attr:`GatewayServer.offered` names. The SDK's OpenTelemetry span around each request is
made only for a request with a span to record or a caller's trace to continue
(:func:`~supervisor.tools._tracing.continues`): any other would be a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from .. import _sdk
from ..server._tasks import EXTENSION_ID as TASKS
from ..tools import _tracing as tracing
from ._apps import EXTENSION_ID as APPS

if TYPE_CHECKING:
    from ._kernel import DirectRoute

__all__ = ["ALL_CHANGES", "SEARCH_CHANGES", "GatewayServer"]

#: What changes of a gateway's lists: all of them.
ALL_CHANGES = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
#: What changes with tool search on: the meta-tools never do.
SEARCH_CHANGES = NotificationOptions(prompts_changed=True, resources_changed=True)


class GatewayServer(Server[Any]):
    """The SDK's low-level server, saying which of its lists change (``listChanged``:
    :attr:`changes`) to handshake-era clients as well — over HTTP the session manager
    asks for the initialization options without arguments."""

    changes = ALL_CHANGES
    #: which of the optional capabilities to declare (``logging``, ``completions``,
    #: ``subscribe``, ``apps``, ``tasks``): those some backing server declares (see
    #: :meth:`Gateway.offered <supervisor.gateway._core.Gateway.offered>`)
    offered: Callable[[], Collection[str]] | None = None
    #: the gateway's middleware for plain calls, whose direct route the fast lanes take
    #: (:meth:`PlainCalls.served <._plain_calls.PlainCalls.served>`)
    plain_calls: DirectRoute | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _sdk.trace_when(self, _traced)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if self.offered is None:
            return capabilities
        offered = self.offered()
        resources = capabilities.resources
        if resources is not None:
            resources = resources.model_copy(update={"subscribe": "subscribe" in offered})
        extensions = capabilities.extensions
        if "apps" in offered:
            extensions = {**(extensions or {}), APPS: {}}
        if "tasks" in offered:
            extensions = {**(extensions or {}), TASKS: {}}
        return capabilities.model_copy(
            update={
                "logging": capabilities.logging if "logging" in offered else None,
                "completions": capabilities.completions if "completions" in offered else None,
                "resources": resources,
                "extensions": extensions,
            }
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self.changes, experimental_capabilities, extensions
        )


def _traced(ctx: Any) -> bool:
    """Whether the request of ``ctx`` (a ``ServerRequestContext``) gets its span."""
    return tracing.continues(ctx.meta)
