"""A stdlib-only MCP server over stdio that writes chosen raw bytes to stdout, for fuzzing.

Usage: ``python byte_server.py SCRIPT``, where ``SCRIPT`` is a JSON file
``{"payload": HEX, "when": WHEN, "then": THEN}``, read when the process starts.

It speaks the handshake-era protocol by hand: ``server/discover`` gets "method not found"
(so a client falls back to ``initialize``), ``initialize`` is answered with the version
asked for and a ``tools`` capability, ``tools/list`` lists one tool ``noop``, ``tools/call``
answers the text ``ok``, ``ping`` an empty result; other requests get "method not found",
notifications and answers nothing.

The payload's bytes are written to stdout exactly as they are (no newline is added),
once, at ``WHEN``:

``start``
    before reading anything;
``instead``
    in place of the answer to ``initialize``;
``handshake``
    right after the answer to ``initialize``;
``connected``
    right after the answer to the first ``tools/list``.

Then, by ``THEN``: ``serve`` goes on serving until stdin closes; ``eof`` closes stdout
and reads stdin until it closes; ``exit`` exits at once with code 0.
"""

from __future__ import annotations

import json
import os
import sys

NOT_FOUND = -32601


def send(message: dict[str, object]) -> None:
    """Write one JSON-RPC message as a line on stdout."""
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def answer(request: dict[str, object]) -> dict[str, object]:
    """The response to a request."""
    method, params = request.get("method"), request.get("params") or {}
    reply: dict[str, object] = {"jsonrpc": "2.0", "id": request["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "byte-server", "version": "1"},
        }
    elif method == "tools/list":
        tool = {"name": "noop", "description": "Answers ok.", "inputSchema": {"type": "object"}}
        reply["result"] = {"tools": [tool]}
    elif method == "tools/call":
        reply["result"] = {"content": [{"type": "text", "text": "ok"}]}
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": NOT_FOUND, "message": f"method not found: {method}"}
    return reply


def main(script: str) -> int:
    """Serve until stdin closes, writing the payload once, when and as ``script`` says."""
    with open(script, encoding="utf-8") as f:
        instructions = json.load(f)
    payload = bytes.fromhex(instructions["payload"])
    when, then = instructions["when"], instructions["then"]
    pending = True  # the payload is still to be written

    def write_payload() -> bool:
        """Write the payload; whether to go on serving."""
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        print(f"byte-server wrote {len(payload)} bytes at {when}", file=sys.stderr, flush=True)
        if then == "exit":
            os._exit(0)
        if then == "eof":
            sys.stdout.close()
            os.close(1)
            for _ in sys.stdin.buffer:
                pass
            return False
        return True

    if when == "start":
        pending = False
        if not write_payload():
            return 0
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or an answer to a request of ours
        method = request["method"]
        if pending and when == "instead" and method == "initialize":
            pending = False
            if not write_payload():
                return 0
            continue
        send(answer(request))
        if pending and (
            (when == "handshake" and method == "initialize")
            or (when == "connected" and method == "tools/list")
        ):
            pending = False
            if not write_payload():
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
