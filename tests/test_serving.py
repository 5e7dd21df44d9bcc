"""``supervisor._serving``: binding ports and serving an ASGI app with hypercorn, on real
sockets on 127.0.0.1."""

from __future__ import annotations

import errno
import io
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import httpx2
import pytest
import trio

from supervisor import log
from supervisor._serving import bind_first, listen, make_config, serve_sockets


@contextmanager
def busy_port() -> Iterator[int]:
    """A port of 127.0.0.1 that another socket listens on, for the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: ANN401
    """A tiny ASGI app: ``hello`` for any request; ``/boom`` fails."""
    if scope["type"] == "lifespan":
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.complete"})
        assert (await receive())["type"] == "lifespan.shutdown"
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/boom":
        raise RuntimeError("boom with s3cret-s3cret-s3cret inside")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def test_bind_first_skips_a_busy_port_and_returns_the_next() -> None:
    with busy_port() as busy:
        sock, port = await bind_first("127.0.0.1", [busy, 0])
        with sock:
            assert port != busy
            assert sock.getsockname() == ("127.0.0.1", port)
            assert not sock.getblocking()
            with socket.create_connection(("127.0.0.1", port)):
                pass  # it listens already


async def test_bind_first_raises_the_last_error_when_every_port_is_busy() -> None:
    with busy_port() as first, busy_port() as last:
        with pytest.raises(OSError, match=f"127.0.0.1:{last}") as raised:
            await bind_first("127.0.0.1", [first, last])
    assert raised.value.errno == errno.EADDRINUSE
    with pytest.raises(ValueError):
        await bind_first("127.0.0.1", [])


async def test_listen_sets_the_stall_timeout_unless_told_not_to() -> None:
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None:
        pytest.skip("no TCP_USER_TIMEOUT here")
    for stall_timeout, expected in ((1.5, 1500), (None, 0)):
        [sock] = await listen("127.0.0.1", 0, stall_timeout=stall_timeout)
        with sock:
            assert sock.getsockopt(socket.IPPROTO_TCP, option) == expected


def test_make_config_leaves_unset_limits_at_hypercorns_defaults() -> None:
    default = make_config([], logger_name="t")
    assert (default.include_server_header, default.accesslog, default.errorlog) == (
        False,
        None,
        None,
    )
    limited = make_config(
        [],
        logger_name="t",
        max_head=1024,
        idle_timeout=7.0,
        graceful_timeout=1.0,
        websocket_max_message_size=99,
    )
    assert limited.h11_max_incomplete_size == 1024
    assert limited.keep_alive_timeout == 7.0
    assert limited.graceful_timeout == 1.0
    assert limited.websocket_max_message_size == 99
    assert default.keep_alive_timeout != 7.0


async def test_serves_an_app_until_cancelled_then_frees_the_port() -> None:
    out = io.StringIO()
    log.configure_logging(level="warning", stream=out, json=True, force=True)
    try:
        sockets = await listen("127.0.0.1", 0)
        port = sockets[0].getsockname()[1]
        stopping = trio.Event()
        try:
            with log.redacting(["s3cret-s3cret-s3cret"]):
                async with trio.open_nursery() as nursery:
                    await nursery.start(
                        partial(
                            serve_sockets,
                            hello,
                            sockets,
                            logger_name="tests.serving",
                            stopping=stopping,
                            graceful_timeout=1.0,
                        )
                    )
                    async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                        answer = await client.get("/")
                        failed = await client.get("/boom")
                    assert (answer.status_code, answer.text) == (200, "hello")
                    assert "server" not in answer.headers
                    assert failed.status_code == 500
                    assert not stopping.is_set()
                    nursery.cancel_scope.cancel()
            assert stopping.is_set()
        finally:
            for sock in sockets:
                sock.close()
    finally:
        log.reset_logging()
    sock, again = await bind_first("127.0.0.1", [port])
    sock.close()
    assert again == port
    [line] = [json.loads(text) for text in out.getvalue().splitlines()]
    assert line["logger"] == "tests.serving"
    assert line["level"] == "error"
    assert "s3cret" not in out.getvalue()
    assert "boom with ***" in line["exception"]


async def test_a_body_that_never_finishes_is_answered_408_and_closed_in_time() -> None:
    """Every server run through serve_sockets (the gateway, the dashboard, the login
    listener, the chaos proxy): a body that stops half-way, announced by its length or
    chunked, is answered ``408`` and its connection closed once *body_timeout* is up; a
    body that arrives is read whole, and a long answer to a request without a body is not
    cut by the body's clock."""
    streaming = trio.Event()
    finish = trio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: ANN401
        if scope["type"] == "lifespan":
            await hello(scope, receive, send)
            return
        if scope["path"] == "/stream":  # answers for as long as the test wants
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"one ", "more_body": True})
            streaming.set()
            await finish.wait()
            await send({"type": "http.response.body", "body": b"two"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    async def until_closed(stream: trio.SocketStream) -> bytes:
        received = b""
        with trio.fail_after(30):
            while chunk := await stream.receive_some(65536):
                received += chunk
        return received

    sockets = await listen("127.0.0.1", 0)
    port = sockets[0].getsockname()[1]
    head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    try:
        async with trio.open_nursery() as nursery:
            serve = partial(
                serve_sockets, app, sockets, logger_name="t", graceful_timeout=1.0, body_timeout=1
            )
            await nursery.start(serve)
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                answer = await client.post("/", content=b"all of it")
                assert (answer.status_code, answer.content) == (200, b"all of it")
                async with client.stream("GET", "/stream") as stream:
                    await streaming.wait()
                    began = trio.current_time()
                    for half in (
                        head + b"Content-Length: 10\r\n\r\nabc",
                        head + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
                    ):
                        conn = await trio.open_tcp_stream("127.0.0.1", port)
                        async with conn:
                            await conn.send_all(half)
                            said = await until_closed(conn)
                        assert said.startswith(b"HTTP/1.1 408 "), said
                    assert trio.current_time() - began >= 1.0
                    finish.set()
                    assert await stream.aread() == b"one two"  # open past the clock
            nursery.cancel_scope.cancel()
    finally:
        for sock in sockets:
            sock.close()


#: Serving started, and cancelled while it starts (a signal that ends a command at that
#: moment): in a process of its own, so that a start that never ends fails the test by a
#: deadline rather than hanging the suite.
_CANCELLED_WHILE_STARTING = """
import socket, trio
from supervisor._serving import serve_sockets

async def app(scope, receive, send):  # lifespan only: no request comes
    while scope["type"] == "lifespan":
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return

async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.cancel()  # before its start is done
        await nursery.start(
            lambda task_status: serve_sockets(
                app, [sock], logger_name="t", graceful_timeout=5, task_status=task_status
            )
        )
    print("ended")

trio.run(main)
"""


async def test_serving_cancelled_while_it_starts_ends_at_once() -> None:
    """A cancellation that comes while the server is starting ends the start: the server
    is shielded from its caller's cancellation only once it serves (before, the shield
    held the start until it served, forever — a command stopped by a signal at that
    moment never exited)."""
    import sys

    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", _CANCELLED_WHILE_STARTING],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert (done.returncode, done.stdout) == (0, b"ended\n"), done.stderr.decode()
