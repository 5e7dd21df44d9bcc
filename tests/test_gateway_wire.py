"""The HTTP gateway's own HTTP server (``serve_http(front="httptools")`` and
``front="h11"``, supervisor/gateway/_wire_front.py): the front's checks in their order, head
limits, keep-alive and pipelining, chunked bodies and ``Expect: 100-continue``, requests
that do not parse, unread bodies and slow clients — a real gateway on 127.0.0.1 and raw
sockets, each test with each parser.

httptools is an optional dependency: its tests need it (``pip install -e '.[httptools]'``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.gateway._wire_front import MAX_HEADERS
from supervisor.testing.servers import make_server
from tests.extras import require
from tests.test_gateway_sessions import TOKEN, head, raw

CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "e_echo",
            "arguments": {"text": "through the wire"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
).encode()


@pytest.fixture(params=["httptools", "h11"])
def front(request: pytest.FixtureRequest) -> str:
    """Each parser of the gateway's own HTTP server."""
    if request.param == "httptools":
        require("httptools", "httptools")
    return request.param


@asynccontextmanager
async def gateway(front: str, **options: object) -> AsyncIterator[HttpGatewayInfo]:
    """An echo server behind an in-process HTTP gateway with the ``front`` given."""
    apps = {"e": make_server("echo")}
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup, trio.open_nursery() as n:
        gw = Gateway(sup)
        await n.start(gw.run)
        await sup.tools()
        serve = partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, front=front)
        yield await n.start(partial(serve, **options))
        n.cancel_scope.cancel()


def call_head(port: int, *extra: str) -> bytes:
    """A fast-lane tool call's head (its body is :data:`CALL`), with ``extra`` lines."""
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: e_echo",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Reader:
    """Answers read one at a time off a raw connection (each with a ``Content-Length``)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def _more(self) -> None:
        chunk = await self.stream.receive_some(65536)
        assert chunk, f"closed; read so far: {self.buffer[:300]!r}"
        self.buffer += chunk

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        with trio.fail_after(30):
            while b"\r\n\r\n" not in self.buffer:
                await self._more()
            top, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            status_line, *fields = top.decode("latin-1").split("\r\n")
            headers = {}
            for field in fields:
                name, _, value = field.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(self.buffer) < length:
                await self._more()
            body, self.buffer = self.buffer[:length], self.buffer[length:]
            return int(status_line.split()[1]), headers, body

    async def closed(self) -> bool:
        """Whether the server closes the connection (within 30 s), having sent nothing more."""
        with trio.fail_after(30):
            rest = await self.stream.receive_some(65536)
        return rest == b"" and self.buffer == b""


def echoed(body: bytes) -> str:
    return json.loads(body)["result"]["content"][0]["text"]


async def test_each_request_passes_host_route_method_origin_then_token_in_that_order(
    front: str,
) -> None:
    """Behind its own HTTP server the gateway's checks are the same, in the same order:
    another Host 421, an unknown path 404, a wrong method 405 with ``Allow``, another
    origin 403, no token 401 with a challenge; then the route answers."""
    async with gateway(front) as info:
        port = info.port
        host = f"Host: 127.0.0.1:{port}\r\n"
        token = f"Authorization: Bearer {TOKEN}\r\n"
        asked = [
            b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            f"GET /nowhere HTTP/1.1\r\n{host}\r\n".encode(),
            f"POST /status HTTP/1.1\r\n{host}Content-Length: 0\r\n\r\n".encode(),
            f"GET /status HTTP/1.1\r\n{host}{token}Origin: https://evil.example\r\n\r\n".encode(),
            f"GET /status HTTP/1.1\r\n{host}\r\n".encode(),
            f"GET /status HTTP/1.1\r\n{host}{token}\r\n".encode(),
        ]
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            answers = []
            for request in asked:
                await stream.send_all(request)
                answers.append(await reader.answer())
        assert [status for status, _, _ in answers] == [421, 404, 405, 403, 401, 200]
        assert answers[2][1]["allow"] == "GET"
        assert answers[4][1]["www-authenticate"].startswith("Bearer ")
        assert "servers" in json.loads(answers[5][2])


async def test_a_head_over_the_limit_is_431_whole_in_pieces_or_by_its_fields(front: str) -> None:
    """A head over 16 KiB is 431 whether it comes in one write or a piece at a time, and so
    is one with more than :data:`MAX_HEADERS` fields; a head just under either bound is
    served."""
    async with gateway(front) as info:
        port = info.port
        assert (await raw(port, head(port, 16_000))).startswith(b"HTTP/1.1 200 ")
        for size in (17_000, 65_000, 200_000):
            assert (await raw(port, head(port, size))).startswith(b"HTTP/1.1 431 ")
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            start = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: ".encode()
            await stream.send_all(start)
            for _ in range(5):  # never ended: 20 KB of one header
                await stream.send_all(b"a" * 4000)
                await trio.sleep(0.01)
            status, headers, _ = await reader.answer()
            assert (status, headers["connection"]) == (431, "close")
            assert await reader.closed()

        def fields(count: int) -> bytes:
            extra = "".join(f"X-F{i}: {i}\r\n" for i in range(count - 1))
            return f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n".encode()

        assert (await raw(port, fields(MAX_HEADERS))).startswith(b"HTTP/1.1 200 ")
        assert (await raw(port, fields(MAX_HEADERS + 1))).startswith(b"HTTP/1.1 431 ")


async def test_pipelined_requests_are_answered_in_order_on_one_kept_connection(front: str) -> None:
    """Three requests in one write — a probe, an unknown path and a tool call — are answered
    in order on the same connection, which stays open for a fourth; an HTTP/1.0 client's
    connection is kept only when it asks."""
    async with gateway(front) as info:
        port = info.port
        host = f"Host: 127.0.0.1:{port}\r\n"
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            await stream.send_all(
                f"GET /healthz HTTP/1.1\r\n{host}\r\n".encode()
                + f"GET /nowhere HTTP/1.1\r\n{host}\r\n".encode()
                + call_head(port, f"Content-Length: {len(CALL)}")
                + CALL
            )
            first, second, third = [await reader.answer() for _ in range(3)]
            assert (first[0], second[0], third[0]) == (200, 404, 200)
            assert echoed(third[2]) == "through the wire"
            await stream.send_all(call_head(port, f"Content-Length: {len(CALL)}") + CALL)
            status, _, body = await reader.answer()
            assert status == 200 and echoed(body) == "through the wire"
        # HTTP/1.0 keeps a connection only when asked, and then says so (h11: never)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            for _ in range(2 if front == "httptools" else 0):
                await stream.send_all(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                status, headers, _ = await reader.answer()
                assert (status, headers["connection"]) == (200, "keep-alive")
            await stream.send_all(b"GET /healthz HTTP/1.0\r\n\r\n")
            status, headers, _ = await reader.answer()
            assert (status, headers["connection"]) == (200, "close")
            assert await reader.closed()


async def test_a_chunked_body_and_one_sent_after_100_continue_are_served(front: str) -> None:
    """A tool call whose body comes chunked, in several writes, is served; so is one that
    asks ``Expect: 100-continue`` and sends its body only once told to. One refused before
    its body is asked for (no token) is answered without a ``100`` and its connection
    closed."""
    async with gateway(front) as info:
        port = info.port
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            await stream.send_all(call_head(port, "Transfer-Encoding: chunked"))
            for piece in (CALL[:40], CALL[40:100], CALL[100:]):
                await stream.send_all(b"%x\r\n" % len(piece) + piece + b"\r\n")
                await trio.sleep(0.01)
            await stream.send_all(b"0\r\n\r\n")
            status, _, body = await reader.answer()
            assert status == 200 and echoed(body) == "through the wire"

            await stream.send_all(
                call_head(port, f"Content-Length: {len(CALL)}", "Expect: 100-continue")
            )
            with trio.fail_after(30):
                while b"\r\n\r\n" not in reader.buffer:
                    await reader._more()
            assert reader.buffer == b"HTTP/1.1 100 Continue\r\n\r\n"
            reader.buffer = b""
            await stream.send_all(CALL)
            status, _, body = await reader.answer()
            assert status == 200 and echoed(body) == "through the wire"
        # refused before its body is asked for: no 100, and the body is not waited for
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            tokenless = call_head(port, f"Content-Length: {len(CALL)}", "Expect: 100-continue")
            await stream.send_all(tokenless.replace(b"Authorization", b"X-Not-Authorization"))
            status, _, _ = await reader.answer()
            assert status == 401
            assert await reader.closed()


async def test_what_does_not_parse_is_400_and_a_smuggled_length_is_refused(front: str) -> None:
    """A request line that is not HTTP, and a request with both ``Content-Length`` and
    ``Transfer-Encoding`` (whose body two servers could read two ways), are answered 400
    and their connections closed; what came before them on the connection is served."""
    async with gateway(front) as info:
        port = info.port
        host = f"Host: 127.0.0.1:{port}\r\n"
        garbage = await raw(port, b"HELLO THERE\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400 "), garbage
        smuggled = (
            f"POST /mcp HTTP/1.1\r\n{host}Content-Length: 5\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ).encode()
        both = await raw(port, f"GET /healthz HTTP/1.1\r\n{host}\r\n".encode() + smuggled)
        assert both.startswith(b"HTTP/1.1 200 ") and both.count(b"HTTP/1.1 ") == 2
        assert b"\r\n\r\nHTTP/1.1 400 " in both or b"}HTTP/1.1 400 " in both, both


async def test_a_body_left_unread_closes_the_connection_after_the_answer(front: str) -> None:
    """A request answered before its body was all there (404 for an unknown path) closes
    its connection after the answer, which says so (a client that sent its body after
    its head is not left to send its next request on a connection closing): the rest of
    the body is not read as a request."""
    async with gateway(front) as info:
        port = info.port
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            await stream.send_all(
                f"POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Length: 1000\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n".encode()
            )
            status, headers, _ = await reader.answer()
            assert (status, headers["connection"]) == (404, "close")
            assert await reader.closed()


async def test_a_request_whose_head_or_body_never_finishes_is_closed_in_time(
    front: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half a body, then nothing: ``408`` and closed once the body's time (here 1 s) is up;
    half a head: closed without an answer at the head's (here 1 s)."""
    from supervisor.gateway import _http

    monkeypatch.setattr(_http, "BODY_TIMEOUT", 1.0)
    monkeypatch.setattr(_http, "IDLE_TIMEOUT", 1.0)
    async with gateway(front) as info:
        port = info.port
        began = trio.current_time()
        slow_body = await trio.open_tcp_stream("127.0.0.1", port)
        slow_head = await trio.open_tcp_stream("127.0.0.1", port)
        async with slow_body, slow_head:
            whole = call_head(port, f"Content-Length: {len(CALL)}")
            await slow_body.send_all(whole + CALL[:20])
            await slow_head.send_all(whole[:40])
            body_reader, head_reader = Reader(slow_body), Reader(slow_head)
            status, headers, said = await body_reader.answer()
            assert (status, headers["connection"]) == (408, "close")
            assert b"did not arrive within 1 s" in said
            assert await body_reader.closed()
            assert await head_reader.closed()
        assert trio.current_time() - began >= 1.0


async def test_a_streamed_answer_has_its_head_at_once(front: str) -> None:
    """``/events`` (JSON lines, as events come) with a filter nothing matches: its head
    arrives at once, chunked — the client is not left waiting for an event to learn it
    was answered."""
    async with gateway(front) as info:
        stream = await trio.open_tcp_stream("127.0.0.1", info.port)
        async with stream:
            await stream.send_all(
                f"GET /events?filter=nothing.matches HTTP/1.1\r\nHost: 127.0.0.1:{info.port}"
                f"\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
            )
            said = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in said:
                    said += await stream.receive_some(65536)
        assert said.startswith(b"HTTP/1.1 200 ")
        assert b"content-type: application/jsonl\r\n" in said
        assert b"transfer-encoding: chunked\r\n" in said


async def test_stopping_closes_idle_connections_and_ends_open_streams(front: str) -> None:
    """When the gateway stops, a kept-alive connection waiting for its next request is
    closed, and an open ``/events`` stream ends (its last chunk, then the connection
    closes) — at once, not at the end of the time open requests are given."""
    from supervisor.gateway._http import GRACEFUL_TIMEOUT

    apps = {"e": make_server("echo")}
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup, trio.open_nursery() as n:
        gw = Gateway(sup)
        await n.start(gw.run)
        async with trio.open_nursery() as serving:
            serve = partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, front=front)
            port = (await serving.start(serve)).port
            host = f"Host: 127.0.0.1:{port}\r\n"
            idle = await trio.open_tcp_stream("127.0.0.1", port)
            await idle.send_all(f"GET /healthz HTTP/1.1\r\n{host}\r\n".encode())
            assert (await Reader(idle).answer())[0] == 200
            events = await trio.open_tcp_stream("127.0.0.1", port)
            await events.send_all(
                f"GET /events HTTP/1.1\r\n{host}Authorization: Bearer {TOKEN}\r\n\r\n".encode()
            )
            said = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in said:
                    said += await events.receive_some(65536)
            began = trio.current_time()
            serving.cancel_scope.cancel()
        stopped = trio.current_time() - began
        async with idle, events:
            assert await Reader(idle).closed()
            with trio.fail_after(10):
                while chunk := await events.receive_some(65536):
                    said += chunk
        assert said.startswith(b"HTTP/1.1 200 ") and said.endswith(b"0\r\n\r\n")
        assert stopped < GRACEFUL_TIMEOUT
        n.cancel_scope.cancel()


async def test_connections_reset_before_they_are_served_leave_the_server_serving(
    front: str,
) -> None:
    """Connections reset by their clients at once (before the server takes them up) are
    dropped; the server goes on serving the next."""
    import socket
    import struct

    async with gateway(front) as info:
        for _ in range(50):
            sock = trio.socket.socket()
            await sock.connect(("127.0.0.1", info.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset, not a close
        answer = await raw(
            info.port, f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{info.port}\r\n\r\n".encode()
        )
        assert answer.startswith(b"HTTP/1.1 200 "), answer


async def test_an_unknown_front_is_refused() -> None:
    """``front`` names hypercorn, httptools or h11; anything else is :class:`ValueError`."""
    async with open_supervisor({"mcpServers": {}}) as sup:
        with pytest.raises(ValueError, match="front is 'hypercorn', 'httptools' or 'h11'"):
            await serve_http(Gateway(sup), "127.0.0.1", 0, token=TOKEN, front="h2o")


@pytest.mark.parametrize("server", ["httptools", "h11", "hypercorn"])
async def test_a_client_gone_mid_call_cancels_it_with_no_task_of_the_call_s_own(
    server: str,
) -> None:
    """A fast-lane call whose client closes its connection while the call is pending is
    cancelled at the backing server. Behind the gateway's own HTTP server, the
    connection's reader is what learns of it (the ``supervisor.gone`` extension): the
    call starts no task to watch for it; behind hypercorn, which has no such extension,
    a task of the call's own does."""
    if server == "httptools":
        require("httptools", "httptools")
    from mcp.server.mcpserver import MCPServer

    started, ended = trio.Event(), trio.Event()
    held = MCPServer("held")

    @held.tool()
    async def hold() -> str:
        """Held until cancelled."""
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.set()

    spawned: list[str] = []

    class Spawns(trio.abc.Instrument):
        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            spawned.append(task.name)

    call = CALL.replace(b'"e_echo"', b'"h_hold"').replace(
        b'"arguments": {"text": "through the wire"}', b'"arguments": {}'
    )
    async with (
        open_supervisor({"mcpServers": {}}, apps={"h": held}) as sup,
        trio.open_nursery() as n,
    ):
        gw = Gateway(sup)
        await n.start(gw.run)
        await sup.tools()
        serve = partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, front=server)
        port = (await n.start(serve)).port
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        head = call_head(port, f"Content-Length: {len(call)}").replace(b"e_echo", b"h_hold")
        instrument = Spawns()
        trio.lowlevel.add_instrument(instrument)
        try:
            with trio.fail_after(30):
                await stream.send_all(head + call)
                await started.wait()
                await stream.aclose()
                await ended.wait()
        finally:
            trio.lowlevel.remove_instrument(instrument)
        n.cancel_scope.cancel()
    watchers = [name for name in spawned if "until_gone" in name]
    if server == "hypercorn":
        assert watchers == ["supervisor.gateway._fast.FastLane._serve.<locals>.until_gone"]
    else:
        assert watchers == [], spawned


async def test_the_fast_lane_takes_what_the_sdk_checks_pass_its_first_header_of_each(
    front: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast lane's transport-security verdict, kept for each (Content-Type, Host,
    Origin), is the SDK's for the first of each header, which is all it reads; a routing
    header sent twice is left to the SDK's entry. Each request answers the same with
    the fast lane as without, which serves only the ones the SDK's checks pass."""
    from supervisor.gateway._fast import FastLane

    served: list[bytes] = []
    serve = FastLane._serve

    async def counted(self: FastLane, scope: Any, *args: Any) -> None:
        served.append(dict(scope["headers"]).get(b"x-request", b""))
        await serve(self, scope, *args)

    monkeypatch.setattr(FastLane, "_serve", counted)

    def call(port: int, name: str, *extra: str) -> bytes:
        lines = call_head(port, f"X-Request: {name}", f"Content-Length: {len(CALL)}", *extra)
        if any(line.startswith("Content-Type") for line in extra):
            lines = lines.replace(b"Content-Type: application/json\r\n", b"", 1)
        return lines + CALL

    async def answers(fast: bool) -> list[tuple[int, bytes]]:
        async with gateway(front, fast=fast) as info:
            port, said = info.port, []
            asked = [
                call(port, "plain"),
                call(port, "twice", "Mcp-Method: tools/call"),
                call(
                    port, "text-first", "Content-Type: text/plain", "Content-Type: application/json"
                ),
                call(
                    port, "json-first", "Content-Type: application/json", "Content-Type: text/plain"
                ),
                call(port, "text", "Content-Type: text/plain"),
                call(port, "plain-again"),
            ]
            for request in asked:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    await stream.send_all(request)
                    status, _, body = await Reader(stream).answer()
                said.append((status, body))
            return said

    assert await answers(True) == await answers(False)
    assert served == [b"plain", b"json-first", b"plain-again"]


async def test_an_answer_larger_than_the_socket_takes_at_once_arrives_whole(front: str) -> None:
    """An answer of 4 MiB to a client whose socket takes little at a time is written as
    it drains, whole and in order; the connection then serves the next request."""
    import socket

    apps = {"r": make_server("rich")}
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup, trio.open_nursery() as n:
        gw = Gateway(sup)
        await n.start(gw.run)
        await sup.tools()
        serve = partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, front=front)
        port = (await n.start(serve)).port
        call = CALL.replace(b'"e_echo"', b'"r_big_text"').replace(
            b'"arguments": {"text": "through the wire"}', b'"arguments": {"kib": 4096}'
        )
        head = call_head(port, f"Content-Length: {len(call)}").replace(b"e_echo", b"r_big_text")
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.connect(("127.0.0.1", port))
        stream = trio.SocketStream(sock)
        async with stream:
            reader = Reader(stream)
            await stream.send_all(head + call)
            status, _, body = await reader.answer()
            text = json.loads(body)["result"]["content"][0]["text"]
            assert status == 200 and len(text) == 4096 * 1024
            assert text.startswith("line 1\n") and text.split("\n")[-2].startswith("line ")
            echo = CALL.replace(b'"e_echo"', b'"r_echo"')
            head = call_head(port, f"Content-Length: {len(echo)}").replace(b"e_echo", b"r_echo")
            await stream.send_all(head + echo)
            status, _, body = await reader.answer()
            assert status == 200 and echoed(body) == "through the wire"
        n.cancel_scope.cancel()


@asynccontextmanager
async def wire_app(front: str, app: Any) -> AsyncIterator[int]:
    """The ASGI ``app`` (its lifespan: nothing) served by the gateway's own HTTP server
    with the parser ``front``, on a free port of 127.0.0.1: its port."""
    from supervisor._serving import listen
    from supervisor.gateway._wire_front import serve_wire

    async def served(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await app(scope, receive, send)
            return
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})

    sockets = await listen("127.0.0.1", 0)
    try:
        async with trio.open_nursery() as nursery:
            serve = partial(
                serve_wire,
                served,
                sockets,
                logger_name="tests.wire",
                max_head=16 * 1024,
                idle_timeout=30.0,
                graceful_timeout=1.0,
                body_timeout=30.0,
                parser=front,
            )
            await nursery.start(serve)
            yield sockets[0].getsockname()[1]
            nursery.cancel_scope.cancel()
    finally:
        for sock in sockets:
            sock.close()


async def test_an_app_that_asks_is_cancelled_when_its_client_goes(front: str) -> None:
    """An app that calls the ``supervisor.gone`` extension's ``cancel`` is cancelled when
    its client closes the connection before the answer is written — with no cancel
    scope of its own — and the server goes on serving other connections."""
    from supervisor.gateway._wire_exchange import GONE

    started, ended = trio.Event(), trio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/hold":
            scope["extensions"][GONE].cancel()
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                ended.set()
        body = b'{"ok": true}'
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async with wire_app(front, app) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        with trio.fail_after(30):
            await stream.send_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
            await started.wait()
            await stream.aclose()
            await ended.wait()
        answer = await raw(port, b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"ok": true}')


async def test_a_kept_connection_is_not_read_while_its_client_waits_for_an_answer(
    front: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a request is read whole, its connection is waited on (for the client's
    going, or its next request) rather than read again at once, which would find
    nothing: twenty requests one after another on one connection cost no read that
    finds nothing but, at most, the connection's first."""
    import os

    from supervisor.gateway import _wire_conn

    empty: list[int] = []

    class Reads:
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def read(self, fd: int, size: int) -> bytes:
            try:
                return os.read(fd, size)
            except BlockingIOError:
                empty.append(fd)
                raise

    monkeypatch.setattr(_wire_conn, "os", Reads())

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    async with wire_app(front, app) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            for _ in range(20):
                await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert (await reader.answer())[::2] == (200, b"ok")
    assert len(empty) <= 1, empty


async def test_answers_heads_are_their_own_headers_and_a_line_break_is_refused(
    front: str,
) -> None:
    """Answers with different headers on one connection each have their own head (the
    head lines kept per distinct headers are not another's), framed as their headers
    say; a header carrying a line break gets no answer, and the connection closes."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        path = scope["path"]
        headers = {
            "/json": [(b"content-type", b"application/json"), (b"x-a", b"1")],
            "/text": [(b"Content-Type", b"text/plain"), (b"Content-Length", b"2")],
            "/bad": [(b"content-type", b"text/plain"), (b"x-b", b"a\r\nset-cookie: x")],
        }[path]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}" if path == "/json" else b"ok"})

    async with wire_app(front, app) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            for _ in range(2):
                for path in ("/json", "/text"):
                    await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                    with trio.fail_after(30):
                        while b"\r\n\r\n" not in reader.buffer:
                            await reader._more()
                    top = reader.buffer.partition(b"\r\n\r\n")[0]
                    status, headers, body = await reader.answer()
                    assert status == 200
                    if path == "/json":
                        assert headers["x-a"] == "1" and body == b"{}"
                        assert b"\r\ncontent-length: 2\r\n" in top
                    else:
                        assert headers["content-type"] == "text/plain" and body == b"ok"
                        assert top.count(b"ontent-") == 2 and b"x-a" not in top
        said = await raw(port, b"GET /bad HTTP/1.1\r\nHost: x\r\n\r\n")
        assert said == b""


def test_a_request_s_headers_by_name_are_text_the_last_of_each_name() -> None:
    """The front's headers by name: names lowered, values decoded as Latin-1, a name
    given twice its last value."""
    from supervisor.gateway._http import _headers

    raw_headers = [(b"Host", b"a"), (b"x-caf\xe9", b"\xe9t\xe9"), (b"host", b"b"), (b"X-Y", b"")]
    assert _headers({"headers": raw_headers}) == {"host": "b", "x-caf\xe9": "\xe9t\xe9", "x-y": ""}


async def test_an_answer_given_whole_through_the_extension_is_the_one_send_writes(
    front: str,
) -> None:
    """An app's JSON answer given whole through the ``supervisor.gone`` extension's
    ``answer`` has the head and body that ``send``'s two messages write for it — framed,
    dated, and the connection kept (or, for HTTP/1.0, said kept or closed) — and a
    second answer to the same request is refused."""
    from supervisor.gateway._wire_exchange import GONE

    refused: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b'{"path": "%s"}' % scope["path"].encode()
        if scope["path"] == "/whole":
            await scope["extensions"][GONE].answer(404, body)
            try:
                await scope["extensions"][GONE].answer(200, body)
            except RuntimeError as exc:
                refused.append(str(exc))
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def without_date(answer: bytes) -> bytes:
        return b"".join(line for line in answer.splitlines(True) if not line.startswith(b"date: "))

    async def answer_to(stream: trio.SocketStream, request: bytes) -> bytes:
        """What comes back to ``request``, read to the end of its JSON body."""
        await stream.send_all(request)
        buffer = b""
        with trio.fail_after(30):
            while not buffer.endswith(b'"}'):
                chunk = await stream.receive_some(65536)
                assert chunk, buffer
                buffer += chunk
        return buffer

    async with wire_app(front, app) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            said = []
            for path in ("/whole", "/asgi1", "/whole"):
                request = f"POST {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                buffer = await answer_to(stream, request)
                assert b"\r\ndate: " in buffer
                said.append(without_date(buffer))
            assert said[0] == said[1].replace(b"/asgi1", b"/whole") == said[2]
            assert said[0].startswith(b"HTTP/1.1 404 Not Found\r\n")
            assert b"\r\ncontent-type: application/json\r\ncontent-length: 18\r\n" in said[0]
            assert b"connection:" not in said[0]
        assert refused == ["the answer has started already"] * 2
        for keep, told in ((True, b"connection: keep-alive"), (False, b"connection: close")):
            for path in ("/whole", "/asgi1"):
                asked = "\r\nConnection: keep-alive" if keep else ""
                request = f"POST {path} HTTP/1.0\r\nHost: x{asked}\r\n\r\n".encode()
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    buffer = await answer_to(stream, request)
                if front == "h11" and keep:  # (h11 keeps no HTTP/1.0 connection)
                    told = b"connection: close"
                assert told in buffer, buffer


async def test_a_body_taken_whole_through_the_extension_is_given_once_within_its_limit(
    front: str,
) -> None:
    """The ``supervisor.gone`` extension's ``whole_body`` gives a request's body once it
    is all there and within the limit asked — and ``receive`` then has no body to give,
    only ``http.disconnect`` once answered; a body over the limit, or not all there yet,
    is not taken: ``receive`` gives it, whole or as it comes."""
    from supervisor.gateway._wire_exchange import GONE

    seen: list[object] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        gone = scope["extensions"][GONE]
        limit = int(scope["path"].strip("/"))
        taken = gone.whole_body(limit)
        seen.append(taken)
        body = b""
        if taken is None:
            while True:
                message = await receive()
                body += message["body"]
                if not message["more_body"]:
                    break
        else:
            seen.append(gone.whole_body(limit))  # (given once)
        await gone.answer(200, b'{"n": %d}' % len(taken or body))
        seen.append((await receive())["type"])

    async with wire_app(front, app) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            reader = Reader(stream)
            for limit in (20, 19):
                request = b"POST /%d HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n" % limit
                await stream.send_all(request + b"a" * 20)
                assert (await reader.answer())[::2] == (200, b'{"n": 20}')
            await stream.send_all(b"POST /100 HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n")
            with trio.fail_after(30):
                while not seen or seen[-1] is not None:
                    await trio.testing.wait_all_tasks_blocked()
            await stream.send_all(b"b" * 20)
            assert (await reader.answer())[::2] == (200, b'{"n": 20}')
    assert seen == [
        b"a" * 20,
        None,
        "http.disconnect",
        None,
        "http.disconnect",
        None,
        "http.disconnect",
    ]


async def test_a_fast_lane_body_over_the_limit_is_the_sdk_s_413_whole_or_in_pieces(
    front: str,
) -> None:
    """A tool call for the fast lane whose body is over the SDK's limit is answered by
    the SDK (``413``), whether its body is all there before it is served or comes in
    pieces after its head; one at the limit's edge is served."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE as LIMIT

    async with gateway(front) as info:
        port = info.port
        for size, whole in ((LIMIT + 1, True), (LIMIT + 1, False), (LIMIT, True)):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                request = call_head(port, f"Content-Length: {size}")
                body = CALL + b" " * (size - len(CALL))
                if whole:
                    await stream.send_all(request + body)
                else:
                    await stream.send_all(request)
                    await trio.testing.wait_all_tasks_blocked()
                    for at in range(0, size, 65536):
                        await stream.send_all(body[at : at + 65536])
                with trio.fail_after(30):
                    status, _, _ = await Reader(stream).answer()
            assert status == (413 if size > LIMIT else 200), (size, whole, status)
