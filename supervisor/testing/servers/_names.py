"""The fixture vocabulary: kinds, garbage modes, HTTP transports (cheap to import)."""

from __future__ import annotations

from typing import Literal, get_args

ServerKind = Literal[
    "echo", "crash", "exit-on-start", "hang-init", "garbage", "changing", "slow", "rich", "big"
]
"""Every fixture kind; ``python -m supervisor.testing.servers KIND`` runs any of them."""

MCPServerKind = Literal["echo", "crash", "changing", "slow", "rich"]
"""The kinds that are ``MCPServer`` instances (``make_server`` builds these)."""

GarbageMode = Literal["only", "before", "after-first"]
"""How the ``garbage`` fixture garbles stdout (see the package docstring)."""

HttpTransport = Literal["http", "sse"]
"""``http`` is Streamable HTTP (endpoint ``/mcp``); ``sse`` the legacy SSE transport (``/sse``)."""

KINDS: tuple[ServerKind, ...] = get_args(ServerKind)
MCP_SERVER_KINDS: tuple[MCPServerKind, ...] = get_args(MCPServerKind)
GARBAGE_MODES: tuple[GarbageMode, ...] = get_args(GarbageMode)
