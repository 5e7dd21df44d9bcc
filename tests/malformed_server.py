"""A stdlib-only MCP server over stdio whose answers do not fit the protocol, for the tests of
whose fault the supervisor (and its gateway) says that is: the server's, never the caller's.

Usage: ``python malformed_server.py ERA``. It speaks the protocol by hand, in the era
``ERA`` names: ``modern`` answers ``server/discover`` (2026-07-28, stateless), ``legacy``
refuses it ("method not found", so a client falls back to ``initialize``: 2025-11-25).
It lists four tools, every one without arguments:

``fine``
    a valid result, ``ok`` (with ``resultType`` on 2026-07-28);
``no_result_type``
    ``ok`` without ``resultType`` — which a 2026-07-28 client must take as ``complete``
    (the protocol's default), and which the session-based protocol does not have;
``content_not_list``
    ``content`` an object rather than a list (in both eras, invalid);
``escape``
    ``content`` a list holding an object whose ``type`` is a terminal escape sequence
    (``ESC ] 0 ; owned BEL``), which must never reach a terminal as it is.

One resource, ``bad-ERA://contents``, whose read answers ``contents`` as a string; and one
template, ``gone-ERA://{name}``, whose reads are all answered "resource not found" in the
era's words: ``-32002`` on the session-based protocol, ``-32602`` on 2026-07-28
(SEP-2164). Every other request is answered "method not found"; ``tools/call`` writes
``called NAME`` on stderr first.
"""

from __future__ import annotations

import json
import sys

NOT_FOUND = -32601
INVALID_PARAMS = -32602
#: the session-based protocol's code for a resource not found (2026-07-28 retired it)
RESOURCE_NOT_FOUND = -32002
MODERN = "2026-07-28"
#: a ``type`` a server may send: plain words and a terminal escape sequence
HOSTILE_TYPE = "text\x1b]0;owned\x07"
TOOLS = ("fine", "no_result_type", "content_not_list", "escape")


def send(message: dict[str, object]) -> None:
    """Write one JSON-RPC message as a line on stdout."""
    sys.stdout.buffer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def error(request: dict[str, object], code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}}


def answer(request: dict[str, object], value: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": value}


def listing(modern: bool, **value: object) -> dict[str, object]:
    """A listing's result: with the fields 2026-07-28 requires of one when ``modern``."""
    if modern:
        return {**value, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    return value


CAPABILITIES = {"tools": {}, "resources": {}}
INFO = {"name": "malformed-server", "version": "1"}


def handshake(request: dict[str, object], modern: bool) -> dict[str, object]:
    method = request["method"]
    if method == "server/discover":
        if not modern:
            return error(request, NOT_FOUND, "method not found: server/discover")
        discovered = listing(
            True,
            supportedVersions=[MODERN],
            capabilities=CAPABILITIES,
            _meta={"io.modelcontextprotocol/serverInfo": INFO},
        )
        return answer(request, discovered)
    params = request.get("params") or {}
    assert isinstance(params, dict)
    return answer(
        request,
        {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": CAPABILITIES,
            "serverInfo": INFO,
        },
    )


def call(request: dict[str, object], modern: bool) -> dict[str, object]:
    params = request.get("params") or {}
    name = params.get("name") if isinstance(params, dict) else None
    print(f"called {name}", file=sys.stderr, flush=True)
    complete: dict[str, object] = {"resultType": "complete"} if modern else {}
    text = [{"type": "text", "text": "ok"}]
    if name == "fine":
        return answer(request, {"content": text, **complete})
    if name == "no_result_type":
        return answer(request, {"content": text})
    if name == "content_not_list":
        return answer(request, {"content": {"type": "text", "text": "ok"}, **complete})
    if name == "escape":
        return answer(request, {"content": [{"type": HOSTILE_TYPE, "x": 1}], **complete})
    return error(request, -32602, f"unknown tool: {name}")


def reply(request: dict[str, object], modern: bool) -> dict[str, object]:
    method = request["method"]
    era = "modern" if modern else "legacy"
    if method in ("server/discover", "initialize"):
        return handshake(request, modern)
    if method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        return answer(request, listing(modern, tools=tools))
    if method == "tools/call":
        return call(request, modern)
    if method == "resources/list":
        resource = {"uri": f"bad-{era}://contents", "name": "contents"}
        return answer(request, listing(modern, resources=[resource]))
    if method == "resources/templates/list":
        template = {"uriTemplate": f"gone-{era}://{{name}}", "name": "gone"}
        return answer(request, listing(modern, resourceTemplates=[template]))
    if method == "resources/read":
        params = request.get("params") or {}
        uri = params.get("uri") if isinstance(params, dict) else None
        if isinstance(uri, str) and uri.startswith("gone-"):
            code = INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
            return error(request, code, f"Resource not found: {uri}")
        return answer(request, listing(modern, contents="not a list"))
    if method == "ping":
        return answer(request, {})
    return error(request, NOT_FOUND, f"method not found: {method}")


def main(era: str) -> int:
    modern = era == "modern"
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or an answer to a request of ours
        send(reply(request, modern))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
