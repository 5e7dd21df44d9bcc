"""Transports: how a server's actor talks to one MCP server — a local stdio subprocess
(spawned so that it cannot outlive the supervisor), Streamable HTTP, legacy SSE,
WebSocket, or an in-process server — each reporting how its connection ended.

It has no public names: the server actor opens them, and the rest of the package
imports each from its module.
"""
