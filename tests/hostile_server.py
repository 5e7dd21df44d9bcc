"""A stdlib-only MCP server over stdio that misuses the protocol the way a hostile (or
careless) server can, for the tests of what the supervisor makes of it.

Usage: ``python hostile_server.py MODE [N]``. It speaks the handshake-era protocol by
hand (``server/discover`` gets "method not found", so a client falls back to
``initialize``) and advertises tools, resources and prompts.

``refuse``
    Answers with its own JSON-RPC error ``-32000`` — the code the SDK uses internally for
    "Connection closed" — wherever it can: ``tools/call`` of ``boom``, ``resources/list``,
    ``resources/templates/list``, ``prompts/list``, ``resources/read``, ``prompts/get``,
    ``ping``, and every ``tools/list`` after the first. ``tools/list`` first lists
    ``boom``, ``hang`` (never answered: for killing the server mid-call) and ``change``
    (answers ``ok`` after sending ``notifications/tools/list_changed``). A call of the
    unlisted ``big`` is answered with ``-32099`` — the code the supervisor's transports
    give a request whose answer they dropped as too large — and ``data`` not of their shape.
``catalog``
    Lists ``N`` tiny tools in one ``tools/list`` page (one line on stdout); prints the
    page's size in bytes to stderr as ``page N`` first. With a third argument ``nan``
    the page also holds ``"x": NaN`` (not JSON, but the SDK's parser takes it).

The server's message of each -32000 is ``the database is down`` followed by an escape
sequence (``ESC ] 0 ; owned BEL``), which must never reach a terminal as it is.
"""

from __future__ import annotations

import json
import sys

NOT_FOUND = -32601
SERVER_ERROR = -32000
#: the code the supervisor's transports answer a request with whose answer was too large
TOO_LARGE = -32099
#: what the server says with each -32000: plain words and a terminal escape sequence
MESSAGE = "the database is down\x1b]0;owned\x07"


def send(message: dict[str, object]) -> None:
    """Write one JSON-RPC message as a line on stdout."""
    sys.stdout.buffer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def error(request: dict[str, object], code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}}


def result(request: dict[str, object], value: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": value}


def initialized(request: dict[str, object]) -> dict[str, object]:
    params = request.get("params") or {}
    assert isinstance(params, dict)
    return result(
        request,
        {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}, "resources": {}, "prompts": {}},
            "serverInfo": {"name": "hostile-server", "version": "1"},
        },
    )


def tool(name: str) -> dict[str, object]:
    return {"name": name, "inputSchema": {"type": "object"}}


def refuse(request: dict[str, object], listed: list[int]) -> dict[str, object] | None:
    method = request["method"]
    if method == "tools/list":
        listed[0] += 1
        if listed[0] > 1:
            print("tools/list refused", file=sys.stderr, flush=True)
            return error(request, SERVER_ERROR, MESSAGE)
        return result(request, {"tools": [tool("boom"), tool("hang"), tool("change")]})
    if method == "tools/call":
        params = request.get("params") or {}
        name = params.get("name") if isinstance(params, dict) else None
        if name == "hang":
            print("hang called", file=sys.stderr, flush=True)
            return None
        if name == "change":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return result(request, {"content": [{"type": "text", "text": "ok"}]})
        if name == "big":  # the code the supervisor uses for an answer it dropped
            answer = error(request, TOO_LARGE, MESSAGE)
            answer["error"]["data"] = {"size": "a lot", "limit": [1]}  # type: ignore[index]
            return answer
        return error(request, SERVER_ERROR, MESSAGE)
    if method in (
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
        "prompts/get",
        "ping",
    ):
        print(f"{method} refused", file=sys.stderr, flush=True)
        return error(request, SERVER_ERROR, MESSAGE)
    return error(request, NOT_FOUND, f"method not found: {method}")


def catalog(request: dict[str, object], count: int, nan: bool) -> dict[str, object] | None:
    if request["method"] == "tools/list":
        listing: dict[str, object] = {"tools": [tool(f"t{i}") for i in range(count)]}
        if nan:
            listing["x"] = float("nan")
        page = json.dumps(result(request, listing), separators=(",", ":")).encode()
        print(f"page {len(page)}", file=sys.stderr, flush=True)
        sys.stdout.buffer.write(page + b"\n")
        sys.stdout.buffer.flush()
        return None
    if request["method"] == "ping":
        return result(request, {})
    return error(request, NOT_FOUND, f"method not found: {request['method']}")


def main(mode: str, count: str = "0", nan: str = "") -> int:
    listed = [0]
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or an answer to a request of ours
        if request["method"] == "initialize":
            send(initialized(request))
            continue
        if request["method"] == "server/discover":
            send(error(request, NOT_FOUND, "method not found: server/discover"))
            continue
        if mode == "refuse":
            reply = refuse(request, listed)
        else:
            reply = catalog(request, int(count), nan == "nan")
        if reply is not None:
            send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
