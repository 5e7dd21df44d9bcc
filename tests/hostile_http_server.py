"""A stdlib-only MCP server over HTTP — Streamable HTTP and legacy SSE — that sends what a
hostile server can: answers far larger than ``maxMessageBytes`` and listing pages over the
catalog limits, for the tests of what the supervisor makes of them.

Usage: ``python hostile_http_server.py``. Listens on 127.0.0.1 (a free port) and prints
its base URL on stdout; prints ``page BYTES`` to stderr for each listing page it sends.
It speaks the handshake-era protocol by hand, as ``hostile_server.py`` does (whose
messages it uses), with no session id. Two endpoints:

``/mcp``
    Streamable HTTP: each request POSTed is answered on its own response; a GET (the
    client's stream for the server's messages) is refused with 405, unless it resumes a
    stream (``Last-Event-ID``, see ``resume``).
``/sse``
    legacy SSE: the GET's event stream names ``/messages`` as the endpoint to POST to
    (each POST is answered 202), and carries every answer.

The URL's query says how to answer (the legacy endpoint passes it on):

``answer=sse``
    a request's answer is a ``message`` event on an event stream, not a JSON body;
``length=1``
    a JSON body has a ``Content-Length`` (by default it is sent chunked, its length
    unknown until it ends);
``gzip=1``
    a JSON answer longer than 64 KiB (``big``'s) is compressed (``Content-Encoding:
    gzip``), whatever the request's ``Accept-Encoding`` says;
``tools=N`` / ``resources=N``
    ``tools/list`` lists ``N`` tiny tools (else ``big`` and ``small``) / ``resources/list``
    ``N`` tiny resources (else none), in one page;
``nan=1``
    a listing's page also holds ``"x": NaN`` (not JSON, but the SDK's parser takes it);
``resume=1``
    over ``answer=sse``, a ``resources/list``'s stream carries only an event id, then
    ends: the client resumes it with a GET (``Last-Event-ID``), which carries the page,
    under an id of its own (``999``).

Tools: ``big`` answers a text of ``bytes`` characters (its argument), generated as it is
sent (the server never holds it); ``small`` answers ``ok``.
"""

from __future__ import annotations

import json
import queue
import sys
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from urllib.parse import parse_qs, urlsplit

from hostile_server import NOT_FOUND, error, initialized, result, tool

#: Bytes written at a time.
PIECE = 65536

Answer = tuple[Iterator[bytes], int]
"""An answer's JSON as pieces, and its length."""

_streams: dict[str, queue.Queue[Answer]] = {}  # legacy SSE streams, by their id
_resumable: dict[str, dict[str, object]] = {}  # event id -> the request its stream answers
_numbers = count(1)


def whole(message: dict[str, object]) -> Answer:
    data = json.dumps(message, separators=(",", ":")).encode()
    return iter([data]), len(data)


def text_of(request: dict[str, object], size: int) -> Answer:
    """A tools/call result whose text is ``size`` x's, in pieces."""
    template = json.dumps(
        result(request, {"content": [{"type": "text", "text": "@"}]}), separators=(",", ":")
    ).encode()
    head, tail = template.split(b"@")

    def pieces() -> Iterator[bytes]:
        yield head
        left = size
        while left > 0:
            yield b"x" * min(PIECE, left)
            left -= PIECE
        yield tail

    return pieces(), len(head) + size + len(tail)


def page(
    request: dict[str, object], field: str, items: list[dict[str, object]], nan: bool
) -> Answer:
    listing: dict[str, object] = {field: items}
    if nan:
        listing["x"] = float("nan")  # written NaN: not JSON, but the SDK's parser takes it
    answer = json.dumps(result(request, listing), separators=(",", ":")).encode()
    print(f"page {len(answer)}", file=sys.stderr, flush=True)
    return iter([answer]), len(answer)


def answer(request: dict[str, object], options: dict[str, str]) -> Answer:
    method = request["method"]
    params = request.get("params") or {}
    assert isinstance(params, dict)
    if method == "initialize":
        return whole(initialized(request))
    nan = bool(options.get("nan"))
    if method == "tools/list":
        if "tools" in options:
            many = range(int(options["tools"]))
            return page(request, "tools", [tool(f"t{i}") for i in many], nan)
        return whole(result(request, {"tools": [tool("big"), tool("small")]}))
    if method == "resources/list":
        many = range(int(options.get("resources", "0")))
        return page(
            request, "resources", [{"uri": f"x:///{i}", "name": f"r{i}"} for i in many], nan
        )
    if method in ("resources/templates/list", "prompts/list"):
        field = "resourceTemplates" if method == "resources/templates/list" else "prompts"
        return whole(result(request, {field: []}))
    if method == "ping":
        return whole(result(request, {}))
    if method == "tools/call" and params.get("name") == "big":
        arguments = params.get("arguments") or {}
        return text_of(request, int(arguments.get("bytes", 0)))
    if method == "tools/call" and params.get("name") == "small":
        return whole(result(request, {"content": [{"type": "text", "text": "ok"}]}))
    return whole(error(request, NOT_FOUND, f"method not found: {method}"))


def event(pieces: Iterator[bytes]) -> Iterator[bytes]:
    yield b"event: message\r\ndata: "
    yield from pieces
    yield b"\r\n\r\n"


def gzipped(pieces: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(wbits=31)  # gzip
    for piece in pieces:
        if packed := packer.compress(piece):
            yield packed
    yield packer.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # quiet

    def options(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def head(self, status: int, content_type: str | None, **headers: str) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()

    def empty(self, status: int) -> None:
        self.head(status, None, Content_Length="0")

    def chunked(self, pieces: Iterator[bytes]) -> None:
        for piece in pieces:
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        if path == "/sse":
            self.legacy_stream()
        elif path == "/mcp" and (last := self.headers.get("Last-Event-ID")) in _resumable:
            request = _resumable.pop(last)
            self.head(200, "text/event-stream", Transfer_Encoding="chunked")
            pieces, _ = answer({**request, "id": 999}, self.options())
            self.chunked(event(pieces))
        else:
            self.empty(405)

    def do_DELETE(self) -> None:  # noqa: N802
        self.empty(405)

    def do_POST(self) -> None:  # noqa: N802
        split = urlsplit(self.path)
        options = self.options()
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        is_request = "id" in request and "method" in request
        if split.path == "/messages":
            self.empty(202)
            if is_request:
                _streams[options["stream"]].put(self.reply(request, options))
            return
        if not is_request:
            self.empty(202)
            return
        pieces, length = self.reply(request, options)
        wanted = options.get("answer", "json")
        if wanted == "sse" and options.get("resume") and request["method"] == "resources/list":
            number = str(next(_numbers))
            _resumable[number] = request
            self.head(200, "text/event-stream", Transfer_Encoding="chunked")
            self.chunked(iter([f"id: {number}\r\nretry: 10\r\ndata: \r\n\r\n".encode()]))
        elif wanted == "sse":
            self.head(200, "text/event-stream", Transfer_Encoding="chunked")
            self.chunked(event(pieces))
        elif options.get("gzip") and length > PIECE:
            self.head(200, "application/json", Transfer_Encoding="chunked", Content_Encoding="gzip")
            self.chunked(gzipped(pieces))
        elif options.get("length"):
            self.head(200, "application/json", Content_Length=str(length))
            for piece in pieces:
                self.wfile.write(piece)
            self.wfile.flush()
        else:
            self.head(200, "application/json", Transfer_Encoding="chunked")
            self.chunked(pieces)

    def reply(self, request: dict[str, object], options: dict[str, str]) -> Answer:
        if request["method"] == "server/discover":
            return whole(error(request, NOT_FOUND, "method not found: server/discover"))
        return answer(request, options)

    def legacy_stream(self) -> None:
        name = str(next(_numbers))
        answers: queue.Queue[Answer] = queue.Queue()
        _streams[name] = answers
        query = urlsplit(self.path).query
        endpoint = f"/messages?stream={name}" + (f"&{query}" if query else "")
        self.head(200, "text/event-stream", Transfer_Encoding="chunked", Cache_Control="no-store")
        try:
            first = f"event: endpoint\r\ndata: {endpoint}\r\n\r\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
            self.wfile.flush()
            while True:
                pieces, _ = answers.get()
                for piece in event(pieces):
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
        except OSError:
            pass  # the client went away
        finally:
            del _streams[name]


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
