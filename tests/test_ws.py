"""MCP over WebSocket: the client transport and the server, on loopback."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import anyio
import mcp_types
import pytest
import trio
import trio_websocket
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from supervisor.actors import SupervisorError
from supervisor.transports._ws import (
    WebSocketClosed,
    WebSocketConnectError,
    WebSocketFrameError,
    WebSocketSubprotocolError,
    serve_connection,
    serve_websocket,
    websocket_client,
)

Handler = Callable[[trio_websocket.WebSocketRequest], Awaitable[None]]

# A hang guard only: a hang fails the test instead of the suite. (How fast is for
# `mcp-supervisor bench`; "promptly" below means before any request timeout, which the
# error codes asserted tell apart.)
DEADLINE = 30


def make_app() -> MCPServer:
    app = MCPServer("ws-fixture")

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return app


@asynccontextmanager
async def mcp_server(app: MCPServer) -> AsyncIterator[str]:
    """Serve *app* with serve_websocket; yield its URL; stop it on exit."""
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_websocket, app))
        yield url
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    """Serve a bare trio-websocket handler; yield its URL; stop it on exit."""
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(trio_websocket.serve_websocket, handler, "127.0.0.1", 0, None)
        )
        yield f"ws://127.0.0.1:{server.port}/"
        nursery.cancel_scope.cancel()


async def close_code(ws: trio_websocket.WebSocketConnection) -> int | None:
    """Read until the peer closes; return its close code."""
    try:
        while True:
            await ws.get_message()
    except trio_websocket.ConnectionClosed as closed:
        return closed.reason.code if closed.reason else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize(
    ("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")], ids=["auto", "legacy"]
)
async def test_client_lists_and_calls_tools(mode: str, version: str) -> None:
    """An mcp.Client over websocket_client lists and calls the tools of a served MCPServer."""
    with trio.fail_after(DEADLINE):
        async with mcp_server(make_app()) as url, Client(websocket_client(url), mode=mode) as c:
            assert c.protocol_version == version
            tools = await c.list_tools()
            assert sorted(t.name for t in tools.tools) == ["add", "echo"]
            result = await c.call_tool("add", {"a": 2, "b": 40})
            assert not result.is_error
            assert result.structured_content == {"result": 42}


async def test_fifty_concurrent_calls_on_one_connection_all_answer() -> None:
    """Fifty calls in flight at once on one connection each get their own answer."""
    app = make_app()
    in_flight = 0
    all_in = trio.Event()

    @app.tool()
    async def gather(i: int) -> int:
        """Wait until all fifty calls have arrived, then return i."""
        nonlocal in_flight
        in_flight += 1
        if in_flight == 50:
            all_in.set()
        await all_in.wait()
        return i

    results: dict[int, object] = {}
    with trio.fail_after(DEADLINE):
        async with mcp_server(app) as url, Client(websocket_client(url)) as client:

            async def call(i: int) -> None:
                results[i] = (await client.call_tool("gather", {"i": i})).structured_content

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(call, i)
    assert results == {i: {"result": i} for i in range(50)}


async def test_an_error_in_the_body_leaves_the_transport_unwrapped() -> None:
    """An exception from the body leaves websocket_client unchanged, not wrapped in a group."""

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await close_code(await request.accept(subprotocol="mcp"))

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            with pytest.raises(KeyError, match="from the body"):
                async with websocket_client(url):
                    raise KeyError("from the body")


# ------------------------------------------------------------------ connection loss


async def test_server_closing_mid_session_fails_in_flight_and_next_requests_promptly() -> None:
    """A mid-session close fails in-flight and next calls at once and reaches message_handler."""
    app = make_app()
    entered = trio.Event()

    @app.tool()
    async def hang() -> str:
        """Never answer."""
        entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, app, ws)
            await entered.wait()
            await ws.aclose(1011, "server going away")

    seen: list[Exception] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            seen.append(message)

    errors: list[MCPError] = []
    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            async with Client(websocket_client(url), message_handler=on_message) as client:

                async def call_hang() -> None:
                    with pytest.raises(MCPError) as info:
                        await client.call_tool("hang", {})
                    errors.append(info.value)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call_hang)
                    await entered.wait()
                with pytest.raises(MCPError) as next_call:
                    await client.call_tool("add", {"a": 1, "b": 1})
    assert [e.error.code for e in errors] == [mcp_types.CONNECTION_CLOSED]
    assert next_call.value.error.code == mcp_types.CONNECTION_CLOSED
    assert [(type(e), getattr(e, "code", None)) for e in seen] == [(WebSocketClosed, 1011)]
    assert "server going away" in str(seen[0])


async def test_cancelling_serve_websocket_closes_its_connections() -> None:
    """Stopping the server fails a call in flight on a connected client instead of hanging it."""
    app = make_app()
    entered = trio.Event()

    @app.tool()
    async def hang() -> str:
        """Never answer."""
        entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    errors: list[MCPError] = []
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as outer:
            server_scope = trio.CancelScope()

            async def run_server(task_status: trio.TaskStatus[str]) -> None:
                with server_scope:
                    await serve_websocket(app, task_status=task_status)

            url = await outer.start(run_server)
            async with Client(websocket_client(url)) as client:

                async def call_hang() -> None:
                    with pytest.raises(MCPError) as info:
                        await client.call_tool("hang", {})
                    errors.append(info.value)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call_hang)
                    await entered.wait()
                    server_scope.cancel()
    assert [e.error.code for e in errors] == [mcp_types.CONNECTION_CLOSED]


# ------------------------------------------------------------------ connect errors


async def test_connect_refused_names_the_url_and_no_secrets() -> None:
    """A refused connection raises WebSocketConnectError naming the URL, without credentials."""
    port = free_port()
    url = f"ws://alice:hunter22@127.0.0.1:{port}/mcp?token=qu3ry-secret"
    headers = {"Authorization": "Bearer h3ader-secret"}
    with trio.fail_after(DEADLINE):
        with pytest.raises(WebSocketConnectError) as info:
            async with websocket_client(url, headers=headers):
                pass
        with pytest.raises(WebSocketConnectError):
            async with Client(websocket_client(url, headers=headers)):
                pass
    message = str(info.value)
    assert f"ws://127.0.0.1:{port}/mcp" in message
    assert "connection refused" in message
    for secret in ("hunter22", "qu3ry-secret", "h3ader-secret", "alice"):
        assert secret not in message
    assert isinstance(info.value, SupervisorError)
    assert info.value.status_code is None


async def test_handshake_rejected_names_the_http_status() -> None:
    """An HTTP rejection of the upgrade raises WebSocketConnectError carrying the status."""

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await request.reject(403, body=b"go away")

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            with pytest.raises(WebSocketConnectError) as info:
                async with websocket_client(url):
                    pass
    assert info.value.status_code == 403
    assert "HTTP 403 Forbidden" in str(info.value)
    assert url in str(info.value)


async def test_server_not_speaking_subprotocol_mcp_is_a_clear_error() -> None:
    """A server that accepts without subprotocol mcp raises WebSocketSubprotocolError."""
    codes: list[int | None] = []
    closed = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        codes.append(await close_code(await request.accept()))
        closed.set()

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            with pytest.raises(WebSocketSubprotocolError) as info:
                async with websocket_client(url):
                    pass
            await closed.wait()
    assert "'mcp'" in str(info.value) and url in str(info.value)
    assert info.value.subprotocol is None
    assert codes == [1002]  # closed as a protocol error, not left dangling


async def test_handshake_that_never_completes_times_out() -> None:
    """A TCP server that never answers the upgrade fails within connect_timeout."""

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            with pytest.raises(WebSocketConnectError, match=r"timed out after 0\.2 s"):
                async with websocket_client(f"ws://127.0.0.1:{port}/", connect_timeout=0.2):
                    pass
            nursery.cancel_scope.cancel()


async def test_serve_websocket_rejects_an_upgrade_without_subprotocol_mcp() -> None:
    """serve_websocket answers an upgrade that does not offer subprotocol mcp with HTTP 400."""
    status: int | None = None
    with trio.fail_after(DEADLINE):
        async with mcp_server(make_app()) as url:
            try:
                async with trio_websocket.open_websocket_url(url):
                    pass
            except trio_websocket.ConnectionRejected as rejected:
                # Keep only the status: trio-websocket's client leaves the socket open for
                # as long as the exception lives, and the server waits for that close.
                status = rejected.status_code
    assert status == 400


# ------------------------------------------------------------------ frames


async def test_garbage_frames_become_error_items_and_the_transport_keeps_going() -> None:
    """Invalid JSON and binary frames arrive as WebSocketFrameError items; later ones still flow."""
    received: list[str | bytes] = []
    got = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        await ws.send_message("this is { not json")
        await ws.send_message(b"\x00\x01binary")
        await ws.send_message('{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}')
        received.append(await ws.get_message())
        got.set()
        await close_code(ws)

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url, websocket_client(url) as (read, write):
            garbage, binary, good = [await read.receive() for _ in range(3)]
            ping = mcp_types.JSONRPCRequest(jsonrpc="2.0", id=7, method="ping")
            await write.send(SessionMessage(ping))
            await got.wait()
    assert isinstance(garbage, WebSocketFrameError)
    assert "not a JSON-RPC message" in str(garbage) and url in str(garbage)
    assert isinstance(garbage.__cause__, ValueError)
    assert isinstance(binary, WebSocketFrameError) and "binary frame" in str(binary)
    assert isinstance(good, SessionMessage)
    assert isinstance(good.message, mcp_types.JSONRPCNotification)
    assert good.message.method == "notifications/tools/list_changed"
    # One JSON-RPC message per text frame.
    assert len(received) == 1 and isinstance(received[0], str)
    assert json.loads(received[0]) == {"jsonrpc": "2.0", "id": 7, "method": "ping"}


async def test_garbage_frame_reaches_message_handler_and_session_survives() -> None:
    """A garbage frame goes to the Client's message_handler; the session then works normally."""
    app = make_app()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        await ws.send_message("garbage")
        await serve_connection(app, ws)

    seen: list[Exception] = []
    got_error = trio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            seen.append(message)
            got_error.set()

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            async with Client(websocket_client(url), message_handler=on_message) as client:
                result = await client.call_tool("echo", {"text": "still here"})
                await got_error.wait()
    assert result.structured_content == {"result": "still here"}
    assert [type(e) for e in seen] == [WebSocketFrameError]


async def test_oversized_message_closes_the_connection_with_1009() -> None:
    """A message over max_message_size closes the connection (1009) and ends the read stream."""
    codes: list[int | None] = []
    closed = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        await ws.send_message("x" * 2000)
        codes.append(await close_code(ws))
        closed.set()

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            async with websocket_client(url, max_message_size=1000) as (read, _write):
                item = await read.receive()
                with pytest.raises(anyio.EndOfStream):
                    await read.receive()
            await closed.wait()
    assert isinstance(item, WebSocketClosed) and item.code == 1009
    assert codes == [1009]


async def test_dropped_connection_is_reported_then_the_read_stream_ends() -> None:
    """A TCP drop without a close frame arrives as WebSocketClosed(1006), then the stream ends."""
    accepted = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await request.accept(subprotocol="mcp")
        accepted.set()
        await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            server_scope = trio.CancelScope()

            async def run_server(
                task_status: trio.TaskStatus[trio_websocket.WebSocketServer],
            ) -> None:
                with server_scope:
                    await trio_websocket.serve_websocket(
                        handler, "127.0.0.1", 0, None, task_status=task_status
                    )

            port = (await nursery.start(run_server)).port
            async with websocket_client(f"ws://127.0.0.1:{port}/") as (read, _write):
                await accepted.wait()
                # Cancelled, trio-websocket drops its connections without a close frame.
                server_scope.cancel()
                item = await read.receive()
                with pytest.raises(anyio.EndOfStream):
                    await read.receive()
    assert isinstance(item, WebSocketClosed) and item.code == 1006


async def test_serve_websocket_survives_a_misbehaving_client() -> None:
    """Garbage, a binary frame and an abrupt disconnect from one client leave the server serving."""
    with trio.fail_after(DEADLINE):
        async with mcp_server(make_app()) as url:
            async with trio_websocket.open_websocket_url(url, subprotocols=["mcp"]) as raw:
                await raw.send_message("not json")
                await raw.send_message(b"\xff")
                await raw.send_message('{"jsonrpc": "2.0", "id": 1, "method": "no/such"}')
                reply = json.loads(await raw.get_message())
                with trio.CancelScope() as drop:
                    # Cancelled, trio-websocket drops the TCP connection without a close frame.
                    drop.cancel()
                    await raw.aclose()
            assert reply["id"] == 1 and "error" in reply
            async with Client(websocket_client(url)) as client:
                result = await client.call_tool("add", {"a": 1, "b": 2})
    assert result.structured_content == {"result": 3}


# ------------------------------------------------------------------ handshake and close


async def test_headers_are_sent_with_the_upgrade() -> None:
    """Headers passed to websocket_client reach the server in the upgrade request."""
    seen: dict[str, str] = {}
    offered: list[str] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        seen.update((k.decode().lower(), v.decode()) for k, v in request.headers)
        offered.extend(request.proposed_subprotocols)
        await close_code(await request.accept(subprotocol="mcp"))

    headers = {"Authorization": "Bearer t0ken", "X-Client-Trace": "abc-123"}
    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url, websocket_client(url, headers=headers):
            pass
    assert seen["authorization"] == "Bearer t0ken"
    assert seen["x-client-trace"] == "abc-123"
    assert offered == ["mcp"]


@pytest.mark.parametrize("how", ["normally", "by-cancellation"])
async def test_leaving_the_context_closes_the_socket(how: str) -> None:
    """Leaving websocket_client, normally or by cancellation, sends the server a normal close."""
    codes: list[int | None] = []
    closed = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        codes.append(await close_code(await request.accept(subprotocol="mcp")))
        closed.set()

    with trio.fail_after(DEADLINE):
        async with raw_server(handler) as url:
            with trio.CancelScope() as scope:
                async with websocket_client(url):
                    if how == "by-cancellation":
                        scope.cancel()
                        await trio.sleep_forever()
            await closed.wait()
    assert codes == [1000]


async def test_bad_urls_and_headers_are_refused_before_connecting() -> None:
    """A non-WebSocket URL or an unsendable header is a ValueError that never shows the value."""
    with pytest.raises(ValueError, match="ws:// or wss://"):
        async with websocket_client("http://127.0.0.1:1/"):
            pass
    with pytest.raises(ValueError, match="'X-Bad'") as info:
        async with websocket_client(
            "ws://127.0.0.1:1/", headers={"X-Bad": "s3cret\r\nInjected: 1"}
        ):
            pass
    assert "s3cret" not in str(info.value)
