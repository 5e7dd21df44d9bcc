"""An in-process server: the SDK's in-memory transport, one fresh session per connection."""

from __future__ import annotations

from mcp.client._memory import InMemoryTransport


def memory_transport(app: object) -> InMemoryTransport:
    """A transport to the in-process MCP server object ``app`` (an ``MCPServer`` or a
    low-level ``Server``, ``open_supervisor(apps=...)``): each one opens a fresh session
    with the same object, so a restart keeps the server's own state."""
    return InMemoryTransport(app)  # type: ignore[arg-type]
