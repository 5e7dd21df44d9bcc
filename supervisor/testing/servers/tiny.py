"""A tiny stdio MCP server, standard library only: for tests and benchmarks that start many.

It speaks just enough MCP for a client to connect, list and call: ``server/discover`` is
answered "method not found" (so a client falls back to the initialize handshake),
``initialize`` with the client's own protocol version and a ``tools`` capability,
``tools/list`` with ``echo(text)`` and ``add(a, b)``, ``tools/call`` for both, and
``ping``; anything else gets "method not found". JSON lines on stdin and stdout; it ends at
the end of stdin. It imports neither the SDK nor this package, so it starts in a few
tens of milliseconds, where an SDK fixture server spends about half a second on imports.

Launch it by path, not with ``-m`` (that would import ``supervisor``)::

    python -S -I path/to/tiny.py [--name NAME] [--log PATH] [--ping HOW]

``--ping HOW`` is how it treats health probes: ``answer`` (the default); ``unsupported``
answers ``ping`` "method not found"; ``ignore`` never answers ``ping`` (but answers the
rest); ``mute`` never answers ``ping``, nor any ``tools/list`` after its first (a server
that answers calls but no probe).

``--log PATH`` records how many
start at once: ``start <pid>`` is appended to PATH (one ``O_APPEND`` write) when the
process starts, ``end <pid>`` just before it answers its first ``tools/list`` — so a client
that waits for that answer sees the line written — and :func:`max_overlap` reads the
most that were between the two at any moment.

:func:`tiny_server` gives a config entry that runs it.
"""

from __future__ import annotations

import json
import os
import sys

#: This file: what a config entry runs (with ``sys.executable -S -I``).
PATH = os.path.abspath(__file__)

_TOOLS = [
    {
        "name": "echo",
        "description": "Return the text given.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
]
_METHOD_NOT_FOUND = -32601


def tiny_server(
    *, name: str = "tiny", log: str | os.PathLike[str] | None = None, ping: str = "answer"
) -> dict[str, object]:
    """A config entry (``mcpServers`` style, ``lazy: false``) that runs this server
    (``ping``: its ``--ping``)."""
    args = ["-S", "-I", PATH, "--name", name]
    if log is not None:
        args += ["--log", os.fspath(log)]
    if ping != "answer":
        args += ["--ping", ping]
    return {"command": sys.executable, "args": args, "lazy": False}


def max_overlap(log: str | os.PathLike[str]) -> int:
    """The most servers that were between ``start`` and ``end`` at once, by ``log``'s
    lines in the order they were written."""
    now = most = 0
    with open(log) as lines:
        for line in lines:
            word = line.split(" ", 1)[0]
            now += 1 if word == "start" else -1 if word == "end" else 0
            most = max(most, now)
    return most


def _record(log: str | None, word: str) -> None:
    if log is None:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{word} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def _answer(request: dict[str, object], name: str, ping: str) -> dict[str, object]:
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "ping" and ping == "unsupported":
        return {"error": {"code": _METHOD_NOT_FOUND, "message": "Method not found: ping"}}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": name, "version": "1"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": _TOOLS}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/call":
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        tool = params.get("name")
        if tool == "echo":
            text = str(arguments.get("text", ""))
        elif tool == "add":
            text = str(int(arguments.get("a", 0)) + int(arguments.get("b", 0)))
        else:
            return {"error": {"code": -32602, "message": f"Unknown tool: {tool}"}}
        return {"result": {"content": [{"type": "text", "text": text}], "isError": False}}
    return {"error": {"code": _METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}


def main(argv: list[str]) -> int:
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    name = options.get("--name", "tiny")
    log = options.get("--log")
    ping = options.get("--ping", "answer")
    _record(log, "start")
    listed = False
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue  # a notification (or a response): nothing to answer
        method = request.get("method")
        if method == "ping" and ping in ("ignore", "mute"):
            continue  # left unanswered
        if method == "tools/list" and listed and ping == "mute":
            continue
        answer = _answer(request, name, ping)
        if method == "tools/list" and not listed:
            listed = True
            _record(log, "end")
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
