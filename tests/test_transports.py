"""The transports' one translation of their errors: each kind of failure a transport meets
(HTTP, a WebSocket being opened, a local server being started or read) becomes the same
error of ours, with the same words, wherever it is met; what is not a failure of the
transport (a closed resource, cancellation) passes as it is."""

from __future__ import annotations

import errno

import anyio
import httpx2
import pytest
import trio
import trio_websocket

from supervisor.errors import (
    HTTPConnectError,
    HTTPStatusError,
    ServerExited,
    TransportError,
    WebSocketConnectError,
)
from supervisor.transports._errors import http_errors, safe_url, translate
from supervisor.transports._stdio import StdioTransport

URL = "https://u:pw@example.test/mcp?token=s"
SAFE = "https://example.test/mcp"


def test_safe_url_leaves_user_info_and_query_out() -> None:
    assert safe_url(URL) == SAFE
    assert safe_url("ws://u:pw@example.test:8000/mcp?k=v") == "ws://example.test:8000/mcp"


def test_an_httpx2_connect_error_is_an_http_connect_error() -> None:
    refused = httpx2.ConnectError("All connection attempts failed")
    refused.__context__ = ConnectionRefusedError(111, "Connection refused")
    error = translate(refused, url=SAFE)
    assert type(error) is HTTPConnectError
    assert str(error) == f"cannot connect to {SAFE}: connection refused"
    assert error.url == SAFE and error.__cause__ is refused
    with pytest.raises(HTTPConnectError) as raised, http_errors(URL):  # where HTTP enters
        raise refused
    assert str(raised.value) == str(error) and raised.value.__cause__ is refused


def test_an_http_status_inside_a_group_is_replaced_in_place() -> None:
    request = httpx2.Request("POST", SAFE)
    status = httpx2.HTTPStatusError("404", request=request, response=httpx2.Response(404))
    group = translate(ExceptionGroup("g", [status]), url=SAFE)
    assert isinstance(group, ExceptionGroup)
    (error,) = group.exceptions
    assert type(error) is HTTPStatusError and error.status_code == 404
    assert str(error) == f"MCP endpoint {SAFE} answered HTTP 404 Not Found"


def test_a_websocket_that_cannot_be_opened_is_a_websocket_connect_error() -> None:
    url = "ws://example.test:8000/mcp"
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    error = translate(refused, url=url)
    assert type(error) is WebSocketConnectError and error.__cause__ is refused
    assert str(error) == f"cannot open WebSocket {url}: connection refused"
    rejected = translate(trio_websocket.ConnectionRejected(403, (), None), url=url)
    assert isinstance(rejected, WebSocketConnectError) and rejected.status_code == 403
    assert str(rejected) == (
        f"cannot open WebSocket {url}: the server rejected the upgrade with HTTP 403 Forbidden"
    )
    broken = translate(trio.BrokenResourceError(), url=url)
    assert str(broken) == f"cannot open WebSocket {url}: BrokenResourceError"


def test_a_process_that_cannot_be_started_is_server_exited() -> None:
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory")
    error = translate(missing, server="local", starting="no-such-mcp")
    assert type(error) is ServerExited and error.__cause__ is missing
    assert str(error) == (
        "MCP server 'local' could not be started: No such file or directory "
        "(command 'no-such-mcp'); check the command and its PATH"
    )
    assert error.exit_code is None and error.retryable is False
    busy = translate(
        OSError(errno.EAGAIN, "Resource temporarily unavailable"), server="local", starting="x"
    )
    assert isinstance(busy, ServerExited) and busy.retryable is not False
    nul = translate(ValueError("embedded null byte"), server="local", starting="x")
    assert isinstance(nul, ServerExited) and nul.retryable is False
    assert str(nul) == (
        "MCP server 'local' could not be started: its command, arguments, env or cwd "
        "cannot be given to a process (embedded null byte)"
    )


async def test_stdio_raises_the_translated_start_failure() -> None:
    transport = StdioTransport("/nonexistent/mcp-server", name="local")
    with pytest.raises(ServerExited) as raised:
        async with transport:
            pytest.fail("started a program that does not exist")
    assert str(raised.value) == (
        "MCP server 'local' could not be started: No such file or directory "
        "(command '/nonexistent/mcp-server'); check the command and its PATH"
    )
    assert raised.value.retryable is False
    assert isinstance(raised.value.__cause__, FileNotFoundError)


def test_a_broken_stdio_pipe_is_a_transport_error() -> None:
    broken = BrokenPipeError(errno.EPIPE, "Broken pipe")
    error = translate(broken, server="local")
    assert type(error) is TransportError and error.__cause__ is broken
    assert str(error) == "reading from MCP server 'local' failed: [Errno 32] Broken pipe"


@pytest.mark.parametrize(
    "where",
    [{"url": SAFE}, {"url": "ws://example.test/mcp"}, {"server": "local"}, {}],
    ids=["http", "ws", "stdio", "nowhere"],
)
def test_what_is_no_transport_failure_passes_as_it_is(where: dict[str, str]) -> None:
    for error in (
        anyio.ClosedResourceError(),
        trio.ClosedResourceError(),
        KeyboardInterrupt(),
        RuntimeError("ours"),
    ):
        assert translate(error, **where) is error
