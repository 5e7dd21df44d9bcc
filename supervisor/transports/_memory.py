"""An in-process server: the SDK's in-memory transport, one fresh session per connection."""

from __future__ import annotations

from typing import Any

from .._sdk import in_memory_transport


def memory_transport(app: object) -> Any:
    """A transport to the in-process MCP server object ``app`` (an ``MCPServer`` or a
    low-level ``Server``, ``open_supervisor(apps=...)``): each one opens a fresh session
    with the same object, so a restart keeps the server's own state."""
    return in_memory_transport(app)
