"""The ``_meta`` key a tool call's id travels under, in a module of its own: the fixture
servers read it without loading the supervisor's error tree (trio, msgspec)."""

from __future__ import annotations

#: The ``_meta`` key a tool call's id travels under to the server, when it has one.
CALL_ID_META = "mcp-supervisor/call-id"

__all__ = ["CALL_ID_META"]
