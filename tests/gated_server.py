"""A stdio MCP server (standard library only) that says what it was asked and can stop
answering at one step: for tests that need a command caught at a known moment of its life.

    python -S -I tests/gated_server.py --log PATH [--hang-at METHOD] [--tools N]

It appends ``start PID`` to PATH when it starts, then ``METHOD PID`` for every request it
receives, before answering it — so a test that reads ``tools/call`` there knows the call
reached the server. A request of ``--hang-at``'s method is never answered (the server
keeps reading, and ends at the end of its input as always). It answers the initialize
handshake (``server/discover`` is "method not found"), ``ping``, ``tools/list`` (``echo``,
and ``--tools N`` more with long descriptions, for output that fills a pipe),
``tools/call``, ``resources/list`` (``gated://note``), ``resources/templates/list``,
``resources/read``, ``prompts/list`` (``hello``) and ``prompts/get``.
"""

from __future__ import annotations

import json
import os
import sys

PATH = os.path.abspath(__file__)


def _record(log: str, word: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{word} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def _tools(extra: int) -> list[dict[str, object]]:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [{"name": "echo", "description": "Return the text given.", "inputSchema": schema}]
    for i in range(extra):
        description = f"Tool number {i}, which does nothing; " + "its description is long. " * 4
        tools.append({"name": f"tool_{i}", "description": description, "inputSchema": schema})
    return tools


def _answer(request: dict[str, object], extra_tools: int) -> dict[str, object]:
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": "gated", "version": "1"},
            }
        }
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return {"result": {"tools": _tools(extra_tools)}}
    if method == "tools/call":
        arguments = params.get("arguments")
        text = str(arguments.get("text", "")) if isinstance(arguments, dict) else ""
        return {"result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if method == "resources/list":
        note = {"uri": "gated://note", "name": "note", "mimeType": "text/plain"}
        return {"result": {"resources": [note]}}
    if method == "resources/templates/list":
        return {"result": {"resourceTemplates": []}}
    if method == "resources/read":
        contents = [{"uri": params.get("uri"), "mimeType": "text/plain", "text": "a note"}]
        return {"result": {"contents": contents}}
    if method == "prompts/list":
        return {"result": {"prompts": [{"name": "hello", "description": "Say hello."}]}}
    if method == "prompts/get":
        message = {"role": "user", "content": {"type": "text", "text": "hello"}}
        return {"result": {"messages": [message]}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main(argv: list[str]) -> int:
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    log = options["--log"]
    hang_at = options.get("--hang-at")
    extra_tools = int(options.get("--tools", "0"))
    _record(log, "start")
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue  # a notification (or a response): nothing to answer
        method = request.get("method")
        _record(log, str(method))
        if method == hang_at:
            continue
        answer = _answer(request, extra_tools)
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
