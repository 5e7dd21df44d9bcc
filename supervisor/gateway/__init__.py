"""The gateway: the supervised, merged catalog served as one MCP server (docs/gateway.md).

* :class:`Gateway` — the SDK's low-level server over a running supervisor: the merged
  tools, resources, templates and prompts; calls through the one gate; lists that follow
  the tree (a failed server's tools withdrawn, restored when it is back), announced to
  clients of both protocol eras. Run :meth:`Gateway.run` for the announcements.
* :class:`ToolSearch` — with ``Gateway(sup, tool_search=True)``, four meta-tools
  (``list``, ``search``, ``load``, ``call``: :data:`META_TOOLS`) listed in place of a
  catalog too large for a model;
* :func:`serve_stdio` — to one client over standard input and output;
* :func:`serve_http` — over Streamable HTTP, behind a bearer token, with ``/healthz``,
  ``/readyz`` (:func:`supervisor.monitor.readiness`) and ``/metrics``;
* :func:`serve_local` — on the Unix socket where the CLI's commands find a running
  gateway (:func:`local_socket`), and :class:`GatewayClient`, what they ask it with.

``mcp-supervisor serve`` is these, with the supervisor around them. A lazy façade:
:class:`GatewayClient` and :func:`local_socket` load neither the MCP SDK nor trio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._core import ERROR_META as ERROR_META
    from ._core import WITHDRAWN as WITHDRAWN
    from ._core import Gateway as Gateway
    from ._http import HttpGatewayInfo as HttpGatewayInfo
    from ._http import new_token as new_token
    from ._http import serve_http as serve_http
    from ._http import serve_local as serve_local
    from ._local import GatewayClient as GatewayClient
    from ._local import GatewayError as GatewayError
    from ._local import GatewayRequestError as GatewayRequestError
    from ._local import local_socket as local_socket
    from ._relay import Relay as Relay
    from ._search import META_TOOLS as META_TOOLS
    from ._search import ToolSearch as ToolSearch
    from ._stdio import serve_stdio as serve_stdio
    from ._stdio import stdio_streams as stdio_streams


__getattr__, __dir__ = attach(__name__)
