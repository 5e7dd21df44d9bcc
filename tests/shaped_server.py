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

Run as ``shaped_server.py http`` it serves the same over Streamable HTTP on a free port
of 127.0.0.1 (the session-based protocol, with a session id; its URL is its first line
of output): each answer is a JSON body (``line`` its whole body), or with ``sse=true`` in
a call's arguments an event stream in which a log message (``notifications/message``) and
a request of the server's own (``ping``, whose answer it takes and ignores) come first.
The HTTP server's threads are the test server's own: it is not the supervisor's code.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class _Shaped:
    """What the server remembers: the ids it was told were cancelled, and those of the
    ``wait`` calls it read."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.waiting: list[str] = []

    def answer(self, request: dict[str, object]) -> dict[str, object] | str | int | None:
        """The answer to ``request``: a message, a line to send as it is, a code to exit
        with unanswered, or ``None`` (nothing, now or ever)."""
        method, request_id = request.get("method"), request.get("id")
        params: dict[str, object] = request.get("params") or {}  # type: ignore[assignment]
        if method == "notifications/cancelled":
            self.cancelled.append(str(params.get("requestId")))
            return None
        if request_id is None or method is None:  # a notification, or an answer of the client's
            return None
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
            arguments: dict[str, object] = params.get("arguments") or {}  # type: ignore[assignment]
            if arguments.get("exit"):
                return 3
            if "exit_after" in arguments:  # reads nothing more meanwhile
                time.sleep(float(arguments["exit_after"]))  # type: ignore[arg-type]
                return 3
            if arguments.get("wait"):
                self.waiting.append(str(request_id))
                return None
            if arguments.get("cancelled") or arguments.get("waiting"):
                text = " ".join(self.cancelled if arguments.get("cancelled") else self.waiting)
                arguments = {"result": {"content": [{"type": "text", "text": text}]}}
            if "line" in arguments:
                return str(arguments["line"]).replace("<id>", str(request_id))
            if "error" in arguments:
                answer["error"] = arguments["error"]
            else:
                answer["result"] = arguments.get("result")
        else:
            answer["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        return answer


def _write(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    shaped = _Shaped()
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = shaped.answer(json.loads(line))
        if isinstance(answer, int):
            return answer
        if isinstance(answer, str):
            sys.stdout.write(answer + "\n")
            sys.stdout.flush()
        elif answer is not None:
            _write(answer)
    return 0


_SESSION = "shaped-session"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    shaped = _Shaped()
    lock = threading.Lock()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass

    def _send(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        if body:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", _SESSION)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._send(405)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's name
        self._send(200)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.lock:
            answer = self.shaped.answer(request)
        if isinstance(answer, int):
            os._exit(answer)
        if answer is None:
            if request.get("id") is None or request.get("method") is None:
                self._send(202)
                return
            threading.Event().wait()  # (a call never answered: held until the process ends)
        if isinstance(answer, str):
            self._send(200, answer.encode())
            return
        assert isinstance(answer, dict)
        arguments = ((request.get("params") or {}).get("arguments")) or {}
        if not arguments.get("sse"):
            self._send(200, json.dumps(answer).encode())
            return
        log = {"level": "info", "data": "shaping"}
        first = [
            {"jsonrpc": "2.0", "method": "notifications/message", "params": log},
            {"jsonrpc": "2.0", "id": "asked", "method": "ping"},
        ]
        events = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in [*first, answer])
        self._send(200, events.encode(), "text/event-stream")


def serve_http() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(serve_http() if sys.argv[1:2] == ["http"] else main())
