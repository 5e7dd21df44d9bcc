"""A stdio MCP server that tries what a sandbox refuses, standard library only: for the
sandbox's tests and benchmarks (docs/servers.md, "Containing a server").

Its tools, each answering what happened (an ``OSError`` as ``error: [Errno N] text``, in
a result with ``isError``):

``read_file(path)``
    The file's text (its first 4096 characters).
``write_file(path, text)``
    Writes ``text`` to ``path``; answers ``wrote N bytes``.
``connect(host, port)``
    Opens a TCP connection (5 s timeout); answers ``connected``.
``fetch(url)``
    ``urllib.request.urlopen(url)`` — which takes ``HTTP_PROXY`` and ``HTTPS_PROXY``
    from the environment; answers ``HTTP <status>: <body>`` (the body's first 4096
    characters), for an error status too.
``echo(text)``
    The text given (what the benchmarks call).

Like :mod:`supervisor.testing.servers.tiny` it answers ``server/discover`` "method not
found" (a client falls back to ``initialize``) and ends at the end of stdin. Launch it by
path: ``python -S -I path/to/contained.py``; :func:`contained_server` gives a config entry.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from _typeshed import ConvertibleToInt

#: This file: what a config entry runs (with ``sys.executable -S -I``).
PATH = os.path.abspath(__file__)
_LIMIT = 4096
_METHOD_NOT_FOUND = -32601


def _tool(name: str, description: str, **properties: str) -> dict[str, object]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in properties.items()},
            "required": list(properties),
        },
    }


_TOOLS = [
    _tool("read_file", "Read a file's text.", path="string"),
    _tool("write_file", "Write text to a file.", path="string", text="string"),
    _tool("connect", "Open a TCP connection.", host="string", port="integer"),
    _tool("fetch", "GET a URL (through the proxy the environment names).", url="string"),
    _tool("echo", "Return the text given.", text="string"),
]


def contained_server(**entry: object) -> dict[str, object]:
    """A config entry (``mcpServers`` style) that runs this server, with ``entry``'s
    fields over it (``sandboxEnabled``, ``sandbox``, ``lazy`` …)."""
    return {"command": sys.executable, "args": ["-S", "-I", PATH], **entry}


class _UnknownTool(Exception):
    pass


def _run(tool: str, arguments: dict[str, object]) -> str:
    if tool == "read_file":
        with open(str(arguments["path"]), encoding="utf-8", errors="replace") as file:
            return file.read(_LIMIT)
    if tool == "write_file":
        data = str(arguments.get("text", "")).encode()
        with open(str(arguments["path"]), "wb") as file:
            file.write(data)
        return f"wrote {len(data)} bytes"
    if tool == "connect":
        port = int(cast("ConvertibleToInt", arguments["port"]))  # int() refuses the rest
        with socket.create_connection((str(arguments["host"]), port), timeout=5):
            return "connected"
    if tool == "fetch":
        try:
            with urllib.request.urlopen(str(arguments["url"]), timeout=10) as answer:
                status, body = answer.status, answer.read(_LIMIT)
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read(_LIMIT)
        return f"HTTP {status}: {body.decode('utf-8', 'replace')}"
    if tool == "echo":
        return str(arguments.get("text", ""))
    raise _UnknownTool(tool)


def _answer(request: dict[str, object]) -> dict[str, object]:
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "contained", "version": "1"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": _TOOLS}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/call":
        arguments = params.get("arguments")
        tool = str(params.get("name"))
        try:
            text, failed = _run(tool, arguments if isinstance(arguments, dict) else {}), False
        except _UnknownTool:
            return {"error": {"code": -32602, "message": f"Unknown tool: {tool}"}}
        except (OSError, ValueError) as exc:
            text, failed = f"error: {exc}", True
        return {"result": {"content": [{"type": "text", "text": text}], "isError": failed}}
    return {"error": {"code": _METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}


def main() -> int:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue
        answer = _answer(request)
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
