"""The gateway: the supervised, merged catalog served as one MCP server (docs/gateway.md).

* :class:`Gateway` — the SDK's low-level server over a running supervisor: the merged
  tools, resources, templates and prompts; calls through the one gate; lists that follow
  the tree (a failed server's tools withdrawn, restored when it is back), announced to
  clients of both protocol eras. Run :meth:`Gateway.run` for the announcements.
* ``ToolSearch`` — with ``Gateway(sup, tool_search=True)``, four meta-tools
  (``list``, ``search``, ``load``, ``call``: ``META_TOOLS``) listed in place of a
  catalog too large for a model;
* :func:`serve_stdio` — to one client over standard input and output;
* :func:`serve_http` — over Streamable HTTP, behind a bearer token, with ``/healthz``,
  ``/readyz`` (:func:`~supervisor.monitor._probes.readiness`) and ``/metrics``;
* ``serve_local`` — on the Unix socket where the CLI's commands find a running
  gateway (``local_socket``), and ``GatewayClient``, what they ask it with.

``mcp-supervisor serve`` is these, with the supervisor around them. A lazy façade:
``GatewayClient`` and ``local_socket`` load neither the MCP SDK nor trio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._core import Gateway as Gateway
    from ._http import new_token as new_token
    from ._http import serve_http as serve_http
    from ._stdio import serve_stdio as serve_stdio


__getattr__, __dir__ = attach(__name__)
