"""MCP Apps (``io.modelcontextprotocol/ui``) through the gateway: each backing server's
``ui://`` resources under a URI that names the server, and its tools' references to
them rewritten to match, so a client's read of a tool's UI reaches the server whose
tool it is — also when two servers (two copies of one, say) use the same ``ui://`` URI.

A ``ui://`` URI of the server ``clock2``, ``ui://clock/app.html``, is served as
``ui://clock2/clock/app.html``: the authority is the server's name (percent-encoded), the
rest is the server's own URI after its scheme. The tools' ``_meta.ui.resourceUri`` (and
the older ``_meta["ui/resourceUri"]``) and the resources' listing carry that URI; a read
of it goes to that server under its own URI, and the contents come back under the
gateway's. Everything else of a tool or a resource — icons, ``_meta``, MIME type — is
kept. URIs of other schemes are routed as they are.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.server.apps import EXTENSION_ID

__all__ = ["EXTENSION_ID", "UI", "backing", "contents_served", "resource_served", "tool_served"]

#: The scheme of MCP Apps' UI resources.
UI = "ui://"
#: The tool ``_meta`` key of the extension's first drafts, still sent by some servers.
_FLAT_KEY = "ui/resourceUri"


def served(server: str, uri: str) -> str:
    """The gateway's URI for ``server``'s own ``uri`` (unchanged unless ``ui://``)."""
    if not uri.startswith(UI):
        return uri
    return f"{UI}{quote(server, safe='')}/{uri[len(UI) :]}"


def backing(uri: str, servers: Collection[str]) -> tuple[str, str] | None:
    """``(server, its own URI)`` for a gateway ``ui://`` URI that names one of
    ``servers``; ``None`` for any other URI."""
    if not uri.startswith(UI):
        return None
    head, slash, rest = uri[len(UI) :].partition("/")
    server = unquote(head)
    if not slash or server not in servers:
        return None
    return server, UI + rest


def tool_served(tool: types.Tool, server: str) -> types.Tool:
    """``tool`` with its references to ``ui://`` resources in the gateway's URIs."""
    meta: dict[str, Any] | None = tool.meta
    if not meta:
        return tool
    ui = meta.get("ui")
    flat = meta.get(_FLAT_KEY)
    rewritten = dict(meta)
    if isinstance(ui, dict) and isinstance(ui.get("resourceUri"), str):
        rewritten["ui"] = {**ui, "resourceUri": served(server, ui["resourceUri"])}
    if isinstance(flat, str):
        rewritten[_FLAT_KEY] = served(server, flat)
    if rewritten == meta:
        return tool
    return tool.model_copy(update={"meta": rewritten})


def resource_served(resource: types.Resource, server: str) -> dict[str, object]:
    """The fields of ``resource``'s listing that the gateway changes (its URI)."""
    uri = str(resource.uri)
    return {"uri": served(server, uri)} if uri.startswith(UI) else {}


def contents_served(result: types.ReadResourceResult, server: str) -> types.ReadResourceResult:
    """A read's result with each ``ui://`` content under the gateway's URI."""
    contents = [
        c.model_copy(update={"uri": served(server, str(c.uri))}) if str(c.uri).startswith(UI) else c
        for c in result.contents
    ]
    return result.model_copy(update={"contents": contents})
