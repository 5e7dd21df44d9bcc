"""A stdio MCP server, standard library only, that answers a tool call with whatever the
call asks it to: the gateway's forwarding tests (tests/test_gateway_forward.py) have it
send each shape of answer a server may send, plain or not, valid or not.

It speaks the session-based protocol (``server/discover`` is "method not found", so a
client falls back to the initialize handshake), lists two tools and answers:

* ``shape(result=…)`` with ``result`` as the answer's result, exactly; ``shape(error=…)``
  with ``error`` as its JSON-RPC error; ``shape(exit=true)`` by exiting unanswered,
  ``shape(exit_after=S)`` by doing so after ``S`` seconds of reading nothing more;
  ``shape(wait=true)`` never; ``shape(line=…)`` with that text as its whole answer line
  (``<id>`` in it replaced by the request's id);
* ``typed(result=…)``, whose tool declares an ``outputSchema`` (``{"n": integer}``), the
  same way.
* ``shape(cancelled=true)`` with a text block naming the ids of the requests it was
  told were cancelled (``notifications/cancelled``), space-separated;
  ``shape(waiting=true)`` the same way with the ids of the ``wait`` requests it read.
"""

from __future__ import annotations

import json
import sys
import time

_OPEN = {"type": "object"}
_TOOLS = [
    {"name": "shape", "description": "Answer as asked.", "inputSchema": _OPEN},
    {
        "name": "typed",
        "description": "Answer as asked; declares its output.",
        "inputSchema": _OPEN,
        "outputSchema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    },
]


def _write(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    cancelled: list[str] = []
    waiting: list[str] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        params = request.get("params") or {}
        if method == "notifications/cancelled":
            cancelled.append(str(params.get("requestId")))
            continue
        if request_id is None:
            continue
        answer: dict[str, object] = {"jsonrpc": "2.0", "id": request_id}
        if method == "initialize":
            answer["result"] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "shaped", "version": "1"},
            }
        elif method == "tools/list":
            answer["result"] = {"tools": _TOOLS}
        elif method == "ping":
            answer["result"] = {}
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            if arguments.get("exit"):
                return 3
            if "exit_after" in arguments:  # reads nothing more meanwhile
                time.sleep(float(arguments["exit_after"]))
                return 3
            if arguments.get("wait"):
                waiting.append(str(request_id))
                continue
            if arguments.get("cancelled") or arguments.get("waiting"):
                text = " ".join(cancelled if arguments.get("cancelled") else waiting)
                arguments = {"result": {"content": [{"type": "text", "text": text}]}}
            if "line" in arguments:
                sys.stdout.write(str(arguments["line"]).replace("<id>", str(request_id)) + "\n")
                sys.stdout.flush()
                continue
            if "error" in arguments:
                answer["error"] = arguments["error"]
            else:
                answer["result"] = arguments.get("result")
        else:
            answer["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        _write(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
