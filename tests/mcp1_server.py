"""A stdlib-only stdio MCP server that meets the ``server/discover`` probe as mcp 1.x does.

Usage: ``python mcp1_server.py [--warn TEXT] [--say-at-list TEXT] [--levels PATH]``.

An mcp 1.x (Python) server does not know ``server/discover``: it logs a pydantic
validation error for it on stderr and answers ``-32602 Invalid request parameters``; the
client then falls back to ``initialize``. This server writes, for the probe, exactly what
an mcp 1.30 low-level server wrote there for mcp 2.3's client (``mcp1_discover_stderr.txt``,
copied from a real run: 94 lines), then that answer. ``initialize`` is answered with the
version asked for and a ``tools`` capability, ``tools/list`` with one tool ``add``,
``ping`` with an empty result; other requests get "method not found".

``--warn TEXT`` writes TEXT on stderr once the probe has been read, before its echo — as
a server that warns of a missing setting while it starts, by when the probe is already in
its stdin. ``--say-at-list TEXT`` writes TEXT on stderr just before answering
``tools/list`` (so a client that has its tools has the line in the pipe).
``--levels PATH`` declares the ``logging`` capability, as mcp 1.x servers commonly do, and
answers each ``logging/setLevel`` once it has appended the level asked for (a line) to PATH.
It serves until stdin closes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: What an mcp 1.30 low-level server wrote on stderr for mcp 2.3's ``server/discover``.
ECHO = Path(__file__).with_name("mcp1_discover_stderr.txt").read_bytes()
INVALID_PARAMS = -32602
NOT_FOUND = -32601


def send(message: dict[str, object]) -> None:
    """Write one JSON-RPC message as a line on stdout."""
    sys.stdout.buffer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warn")
    parser.add_argument("--say-at-list")
    parser.add_argument("--levels")
    args = parser.parse_args(argv)
    warned = args.warn is None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if not warned:
            warned = True
            say(args.warn)
        if "id" not in request or "method" not in request:
            continue  # a notification
        method, params = request["method"], request.get("params") or {}
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": request["id"]}
        if method == "server/discover":
            sys.stderr.buffer.write(ECHO)
            sys.stderr.buffer.flush()
            error = {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""}
            reply["error"] = error
        elif method == "initialize":
            capabilities: dict[str, object] = {"experimental": {}, "tools": {"listChanged": False}}
            if args.levels is not None:
                capabilities["logging"] = {}
            reply["result"] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": capabilities,
                "serverInfo": {"name": "mcp1-like", "version": "1.30.0"},
            }
        elif method == "logging/setLevel" and args.levels is not None:
            with open(args.levels, "a", encoding="utf-8") as levels:
                levels.write(f"{params.get('level')}\n")
            reply["result"] = {}
        elif method == "tools/list":
            if args.say_at_list is not None:
                say(args.say_at_list)
            tool = {"name": "add", "description": "Add.", "inputSchema": {"type": "object"}}
            reply["result"] = {"tools": [tool]}
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": NOT_FOUND, "message": "Method not found"}
        send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
