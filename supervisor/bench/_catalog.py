"""A stdio MCP server listing a catalog of many tools, standard library only: what
``gateway_tool_kb`` puts behind a gateway, one with a single tool beside one with many.

It lists ``echo(text)`` and ``--tools N`` more (default none) of the shape
``registry_merge_ms_32k`` merges: ``get_issue_0``, ``list_issue_1`` … (eight verbs by
eight nouns), each with a one-line description and an input schema of an ``id`` string
(described) and a ``limit`` integer (``minimum: 1``), ``id`` required — a typical small
tool. It answers ``initialize``, ``tools/list`` (one page), ``tools/call`` of ``echo``,
and ``ping``; anything else gets "method not found". JSON lines on stdin and stdout; it
ends at the end of stdin. It imports neither the SDK nor this package, so it starts in a
few tens of milliseconds. Launch it by path (:data:`PATH`) with ``python -S -I``.
"""

from __future__ import annotations

import json
import os
import sys

#: This file: what a config entry runs (with ``sys.executable -S -I``).
PATH = os.path.abspath(__file__)

_VERBS = ("get", "list", "create", "update", "delete", "search", "read", "write")
_NOUNS = ("issue", "file", "page", "user", "repo", "commit", "ticket", "record")
_ECHO = {
    "name": "echo",
    "description": "Return the text given.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
_METHOD_NOT_FOUND = -32601


def catalog_server(tools: int) -> dict[str, object]:
    """A config entry (``mcpServers`` style: eager, trusted) that runs this server with
    ``echo`` and ``tools`` more."""
    return {
        "command": sys.executable,
        "args": ["-S", "-I", PATH, "--tools", str(tools)],
        "lazy": False,
        "approve": False,
        "initTimeout": 60,
    }


def _tools(n: int) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = [_ECHO]
    for t in range(n):
        verb, noun = _VERBS[t % 8], _NOUNS[(t // 8) % 8]
        listed.append(
            {
                "name": f"{verb}_{noun}_{t}",
                "description": f"{verb.title()} a {noun} by id in workspace {t}; returns "
                f"the {noun} as JSON.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": f"the {noun} id"},
                        "limit": {"type": "integer", "minimum": 1},
                    },
                    "required": ["id"],
                },
            }
        )
    return listed


def _answer(request: dict[str, object], tools: list[dict[str, object]]) -> dict[str, object]:
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "catalog", "version": "1"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": tools}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/call" and params.get("name") == "echo":
        arguments = params.get("arguments")
        text = str(arguments.get("text", "")) if isinstance(arguments, dict) else ""
        return {"result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if method == "tools/call":
        return {"error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"}}
    return {"error": {"code": _METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}


def main(argv: list[str]) -> int:
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    tools = _tools(int(options.get("--tools", "0")))
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue  # a notification (or a response): nothing to answer
        answer = _answer(request, tools)
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
