"""Fixture MCP servers (supervisor.testing.servers) against the real SDK client.

Each test also pins an SDK behaviour the supervisor relies on; the docstrings say which.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TextIO

import attrs
import httpx2
import mcp_types
import pytest
import trio
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from supervisor.testing.servers import (
    count_executions,
    executions_by_call,
    make_server,
    serve_http,
    start_http,
    stdio_params,
)
from supervisor.testing.servers._counting import COUNT_FILE_ENV
from supervisor.testing.servers._procs import (
    LISTENING_PREFIX,
    FixtureStartError,
    open_http_fixture,
    spawn_http,
    stdio_server_parameters,
)
from supervisor.testing.servers._raw import garbage_app, hang_app

MODERN = "2026-07-28"


@attrs.frozen
class Errlog:
    """A file a stdio server's stderr goes to, readable while the server runs."""

    path: Path
    file: TextIO

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[Errlog]:
    path = tmp_path / "stderr.log"
    with path.open("w", encoding="utf-8") as file:
        yield Errlog(path, file)


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside `exc` (the SDK nests trio nursery groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def text_of(result: mcp_types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, mcp_types.TextContent)
    return content.text


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


# --- helpers, no server ------------------------------------------------------------------


def test_stdio_params_run_this_interpreter_with_options_as_flags(tmp_path: Path) -> None:
    """stdio_params gives sys.executable and `-m supervisor.testing.servers KIND` + flags."""
    command, args = stdio_params("crash", crash_after=2, count_file=tmp_path / "n", stderr_line="s")
    assert command == sys.executable
    assert args[:3] == ["-m", "supervisor.testing.servers", "crash"]
    assert args[3:] == [
        "--crash-after",
        "2",
        "--count-file",
        str(tmp_path / "n"),
        "--stderr-line",
        "s",
    ]


def test_count_executions_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    """No count file means nothing was executed."""
    assert count_executions(tmp_path / "absent") == {}


async def test_executions_are_counted_per_call_id_from_the_request_meta(tmp_path: Path) -> None:
    """A request whose ``_meta`` carries ``mcp-supervisor/call-id`` is recorded as
    ``tool<TAB>id`` — by MCPServer kinds (a tool's ``Context``) and by ``big`` (the
    low-level request context) alike; ``count_executions`` still counts by tool, and
    ``executions_by_call`` counts per id. The SDK passes unknown ``_meta`` keys through."""
    from supervisor.server._messages import CALL_ID_META
    from supervisor.testing.servers._big import make_big

    count_file = tmp_path / "count"
    async with Client(make_server("rich", count_file=count_file)) as client:
        await client.call_tool("echo", {"text": "a"}, meta={CALL_ID_META: "c-1"})
        await client.call_tool("fail", {"message": "no"}, meta={CALL_ID_META: "c-2"})
        await client.call_tool("echo", {"text": "b"})  # no id: counted by tool only
        await client.call_tool("echo", {"text": "c"}, meta={CALL_ID_META: "c-1"})  # again
    async with Client(make_big(tools=2, count_file=count_file).server) as client:
        await client.call_tool("tool_0001", {"x": 1}, meta={CALL_ID_META: "c-3"})
    lines = [line for line in count_file.read_text().splitlines() if line != "tools/list"]
    assert lines == ["echo\tc-1", "fail\tc-2", "echo", "echo\tc-1", "tool_0001\tc-3"]
    assert count_executions(count_file) == {"echo": 3, "fail": 1, "tools/list": 1, "tool_0001": 1}
    assert executions_by_call(count_file) == {"c-1": 2, "c-2": 1, "c-3": 1}
    assert executions_by_call(tmp_path / "absent") == {}


def test_make_server_refuses_the_raw_kinds() -> None:
    """Only echo, crash, changing, slow and rich are MCPServers."""
    with pytest.raises(ValueError, match="hang-init"):
        make_server("hang-init")  # type: ignore[arg-type]


async def test_exit_on_start_exits_nonzero_with_a_stderr_line() -> None:
    """The CLI exits at once with --exit-code, after the secret line and its exit line."""
    command, args = stdio_params("exit-on-start", exit_code=7, stderr_line="token=hunter2")
    done = await trio.run_process([command, *args], capture_stderr=True, check=False)
    assert done.returncode == 7
    secret, exiting = done.stderr.decode().splitlines()
    assert secret == "token=hunter2"
    assert exiting.startswith("fixture exit-on-start exiting with code 7 pid=")


# --- stdio -----------------------------------------------------------------------------


async def test_echo_over_stdio(tmp_path: Path, errlog: Errlog) -> None:
    """A default Client negotiates 2026-07-28 by `server/discover`; tools answer and count."""
    count_file = tmp_path / "count"
    params = stdio_server_parameters("echo", count_file=count_file, stderr_line="API_KEY=s3cr3t")
    async with Client(stdio_client(params, errlog=errlog.file)) as client:
        assert client.protocol_version == MODERN
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"echo", "add", "count"}
        echo_hints = tools["echo"].annotations
        assert echo_hints is not None and echo_hints.idempotent_hint and echo_hints.read_only_hint
        assert tools["add"].annotations is None
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
        assert (await client.call_tool("count", {})).structured_content == {"result": 2}
        assert count_executions(count_file) == {"echo": 1, "add": 1}
        lines = errlog.text().splitlines()
    assert lines[0].startswith("fixture echo ready pid=") and lines[0].endswith("transport=stdio")
    assert lines[1] == "API_KEY=s3cr3t"


async def test_count_file_from_environment(tmp_path: Path, errlog: Errlog) -> None:
    """$MCP_FIXTURE_COUNT_FILE stands in for --count-file; the crashing call is counted.

    A dead stdio server is not announced: the call in flight, and every later one, fails
    with MCPError CONNECTION_CLOSED ("Connection closed").
    """
    count_file = tmp_path / "count"
    params = stdio_server_parameters("crash", crash_after=3, env={COUNT_FILE_ENV: str(count_file)})
    async with Client(stdio_client(params, errlog=errlog.file)) as client:
        assert text_of(await client.call_tool("echo", {"text": "1"})) == "1"
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        with pytest.raises(MCPError) as in_flight:
            await client.call_tool("echo", {"text": "3"})
        assert in_flight.value.error.code == mcp_types.CONNECTION_CLOSED
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("echo", {"text": "4"})
    assert count_executions(count_file) == {"echo": 2, "add": 1}
    assert "fixture crashing after 3 tool calls (last: echo) with exit code 1" in errlog.text()


async def test_exit_on_start_fails_the_client_fast(errlog: Errlog) -> None:
    """Client(...) raises (a nursery group around MCPError CONNECTION_CLOSED) within seconds."""
    params = stdio_server_parameters("exit-on-start", stderr_line="password=swordfish")
    with trio.fail_after(10), pytest.raises((MCPError, BaseExceptionGroup)) as raised:
        async with Client(stdio_client(params, errlog=errlog.file)):
            pytest.fail("connected to a server that exited")
    errors = leaves(raised.value)
    assert [type(e) for e in errors] == [MCPError]
    assert isinstance(errors[0], MCPError) and errors[0].error.code == mcp_types.CONNECTION_CLOSED
    assert "password=swordfish" in errlog.text()
    assert "fixture exit-on-start exiting with code 1" in errlog.text()


async def test_hang_init_never_answers_the_first_message(tmp_path: Path) -> None:
    """Neither `server/discover` (mode auto, sent first) nor `initialize` (legacy) is answered,
    over stdio or HTTP; the Client stays in __aenter__ until cancelled."""
    stderr: dict[str, bytes] = {}
    connected: list[str] = []
    hung: list[str] = []

    async def connect(
        name: str, server: object, mode: str = "auto", *, quiet: trio.CancelScope | None = None
    ) -> None:
        with quiet or trio.move_on_after(2) as scope:
            async with Client(server, mode=mode):  # type: ignore[arg-type]
                connected.append(name)
        if scope.cancelled_caught:
            hung.append(name)

    async def stdio(mode: str) -> None:
        # A subprocess may take seconds to start on a loaded machine: the quiet period
        # counts from the fixture's own report (on its stderr, a pipe read here) that the
        # first message arrived.
        read_end, write_end = os.pipe()
        quiet = trio.CancelScope()
        with os.fdopen(write_end, "w") as errlog:
            async with trio.lowlevel.FdStream(read_end) as lines, trio.open_nursery() as inner:
                server = stdio_client(stdio_server_parameters("hang-init"), errlog=errlog)
                inner.start_soon(partial(connect, f"stdio-{mode}", server, mode, quiet=quiet))
                seen = b""
                with trio.fail_after(30):
                    while b"never answering" not in seen:
                        seen += await lines.receive_some()
                stderr[mode] = seen
                quiet.deadline = trio.current_time() + 1  # an answer would be a connect

    async def subprocess_http() -> None:
        async with spawn_http("hang-init", "http") as url:
            await connect("http-subprocess", url)

    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_http, hang_app, transport="http"))
        async with trio.open_nursery() as clients:
            clients.start_soon(stdio, "auto")
            clients.start_soon(stdio, "legacy")
            clients.start_soon(connect, "http-in-process", url)
            clients.start_soon(subprocess_http)
        nursery.cancel_scope.cancel()
    assert connected == []
    assert sorted(hung) == ["http-in-process", "http-subprocess", "stdio-auto", "stdio-legacy"]
    received = "fixture hang-init received {}; never answering"
    assert received.format("server/discover").encode() in stderr["auto"]
    assert received.format("initialize").encode() in stderr["legacy"]


async def test_garbage_only_never_connects(errlog: Errlog) -> None:
    """Non-JSON stdout lines reach message_handler as exceptions (pydantic ValidationError,
    a ValueError); pending requests are not failed, so connecting hangs."""
    seen: list[object] = []
    got_garbage = trio.Event()

    async def handler(message: object) -> None:
        seen.append(message)
        if isinstance(message, Exception):
            got_garbage.set()

    params = stdio_server_parameters("garbage")
    async with trio.open_nursery() as nursery:

        async def connect() -> None:
            async with Client(stdio_client(params, errlog=errlog.file), message_handler=handler):
                pytest.fail("connected to a server that only writes garbage")

        nursery.start_soon(connect)
        with trio.fail_after(10):
            await got_garbage.wait()
        nursery.cancel_scope.cancel()
    assert seen and all(isinstance(m, ValueError) for m in seen)
    assert "garbage line 1" in str(seen[0])


async def test_garbage_before_valid_messages_is_tolerated(errlog: Errlog) -> None:
    """Three garbage lines, then a working server: each garbage line is one handler
    exception and the session carries on."""
    errors: list[Exception] = []
    all_seen = trio.Event()

    async def handler(message: object) -> None:
        if isinstance(message, Exception):
            errors.append(message)
            if len(errors) == 3:
                all_seen.set()

    params = stdio_server_parameters("garbage", garbage="before")
    async with Client(stdio_client(params, errlog=errlog.file), message_handler=handler) as client:
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"
        with trio.fail_after(10):
            await all_seen.wait()
    assert [str(n) in str(e) for n, e in enumerate(errors, 1)] == [True] * 3


async def test_garbage_after_the_first_response_starves_requests(errlog: Errlog) -> None:
    """The handshake answer arrives, then every reply is garbage: calls never complete."""
    got_garbage = trio.Event()
    answered: list[str] = []

    async def handler(message: object) -> None:
        if isinstance(message, Exception):
            got_garbage.set()

    params = stdio_server_parameters("garbage", garbage="after-first")
    async with Client(stdio_client(params, errlog=errlog.file), message_handler=handler) as client:
        assert client.protocol_version == MODERN
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                answered.append(text_of(await client.call_tool("echo", {"text": "lost"})))

            nursery.start_soon(call)
            with trio.fail_after(10):
                await got_garbage.wait()
            nursery.cancel_scope.cancel()
    assert answered == []


async def test_garbage_over_http_fails_connect_with_parse_error() -> None:
    """A non-JSON body on a JSON response is MCPError PARSE_ERROR for that request; the
    discover probe falls back to initialize, which fails the same way."""
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_http, garbage_app, transport="http"))
        with trio.fail_after(10), pytest.raises((MCPError, BaseExceptionGroup)) as raised:
            async with Client(url):
                pytest.fail("connected to a garbage endpoint")
        nursery.cancel_scope.cancel()
    codes = [e.error.code for e in leaves(raised.value) if isinstance(e, MCPError)]
    assert codes == [mcp_types.PARSE_ERROR]


@pytest.mark.parametrize(
    ("transport", "mode"),
    [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy")],
    ids=["stdio-legacy-notification", "stdio-modern-listen", "http-legacy-notification"],
)
async def test_changing_announces_list_changed(transport: str, mode: str, errlog: Errlog) -> None:
    """Handshake era: message_handler gets ToolListChangedNotification. 2026-07-28: nothing
    reaches message_handler; a `Client.listen(tools_list_changed=True)` stream gets
    ToolsListChanged. listChanged is advertised either way."""
    notified = trio.Event()

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            notified.set()

    async with trio.open_nursery() as nursery:
        if transport == "stdio":
            server: object = stdio_client(stdio_server_parameters("changing"), errlog=errlog.file)
        else:
            server = await nursery.start(partial(serve_http, make_server("changing")))
        async with Client(server, mode=mode, message_handler=handler) as client:  # type: ignore[arg-type]
            tools = client.server_capabilities.tools
            assert tools is not None and tools.list_changed
            if mode == "legacy":
                assert text_of(await client.call_tool("add_tool", {"name": "late"})) == "added late"
                with trio.fail_after(10):
                    await notified.wait()
            else:
                assert client.protocol_version == MODERN
                async with client.listen(tools_list_changed=True) as events:
                    await client.call_tool("add_tool", {"name": "late"})
                    with trio.fail_after(10):
                        event = await events.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add_tool", "remove_tool", "late"} <= names
            assert text_of(await client.call_tool("late", {})) == "late"
            await client.call_tool("remove_tool", {"name": "late"})
            names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            assert "late" not in names
        nursery.cancel_scope.cancel()


async def test_slow_sleeps_without_blocking_other_calls(tmp_path: Path, errlog: Errlog) -> None:
    """Requests run concurrently on one connection: echo and short sleeps answer while a
    long sleep is pending; cancelling the long one client-side leaves the rest intact."""
    count_file = tmp_path / "count"
    params = stdio_server_parameters("slow", count_file=count_file)
    async with Client(stdio_client(params, errlog=errlog.file)) as client:
        results: list[str] = []
        async with trio.open_nursery() as nursery:
            long_call = trio.CancelScope()

            async def long() -> None:
                with long_call:
                    await client.call_tool("sleep", {"seconds": 60})
                    results.append("long")

            async def short() -> None:
                results.append(text_of(await client.call_tool("sleep", {"seconds": 0.05})))

            nursery.start_soon(long)
            async with trio.open_nursery() as shorts:
                for _ in range(3):
                    shorts.start_soon(short)
                assert text_of(await client.call_tool("echo", {"text": "meanwhile"})) == "meanwhile"
            long_call.cancel()
        assert results == ["slept 0.05"] * 3
        assert (await client.call_tool("count", {})).structured_content == {"result": 4}
    assert count_executions(count_file) == {"sleep": 3, "echo": 1}


# --- HTTP and SSE ----------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_echo_over_http_in_a_subprocess(transport: str) -> None:
    """spawn/open_http_fixture: LISTENING url on stdout and stderr, then serving."""
    async with open_http_fixture("echo", transport, stderr_line="Bearer abc") as fixture:  # type: ignore[arg-type]
        path = "/mcp" if transport == "http" else "/sse"
        assert fixture.url.startswith("http://127.0.0.1:") and fixture.url.endswith(path)
        server = fixture.url if transport == "http" else sse_client(fixture.url)
        async with Client(server) as client:  # type: ignore[arg-type]
            assert text_of(await client.call_tool("echo", {"text": transport})) == transport
        stderr = fixture.stderr_text().splitlines()
        assert (
            stderr[0]
            == f"fixture echo ready pid={fixture.pid} transport={transport} url={fixture.url}"
        )
        assert stderr[1:3] == ["Bearer abc", LISTENING_PREFIX + fixture.url]
    assert fixture.process.returncode is not None


async def test_exit_on_start_over_http_is_a_start_error() -> None:
    """spawn_http raises FixtureStartError with the exit code and the stderr lines."""
    with pytest.raises(FixtureStartError, match="exited with code 3") as raised:
        async with spawn_http("exit-on-start", "http", exit_code=3, stderr_line="secret=1"):
            pytest.fail("an exit-on-start server listened")
    assert "secret=1" in str(raised.value)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_serve_http_in_process(transport: str) -> None:
    """serve_http reports the bound URL (port 0 resolved) and serves an MCPServer."""
    server = make_server("echo")
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_http, server, transport=transport))
        assert port_of(url) > 0
        target = url if transport == "http" else sse_client(url)
        async with Client(target) as client:  # type: ignore[arg-type]
            assert client.protocol_version == MODERN
            assert (await client.call_tool("add", {"a": 40, "b": 2})).structured_content == {
                "result": 42
            }
        nursery.cancel_scope.cancel()


async def test_serve_http_restarts_on_the_same_port() -> None:
    """Stopped and served again on its port: a 2026-07-28 client (no Mcp-Session-Id) carries
    on; a handshake-era client's session is gone: MCPError INVALID_REQUEST "Session not
    found" (the server's 404 body). The MCPServer's own state survives."""
    server = make_server("echo")
    async with trio.open_nursery() as nursery:
        first = await start_http(nursery, server)
        async with Client(first.url) as modern, Client(first.url, mode="legacy") as legacy:
            await modern.call_tool("echo", {"text": "before"})
            await legacy.call_tool("echo", {"text": "before"})
            await first.stop()
            second = await start_http(nursery, server, port=first.port)
            assert second.url == first.url
            assert text_of(await modern.call_tool("echo", {"text": "after"})) == "after"
            with pytest.raises(MCPError, match="Session not found") as stale:
                await legacy.call_tool("echo", {"text": "after"})
            assert stale.value.error.code == mcp_types.INVALID_REQUEST
        async with Client(second.url, mode="legacy") as fresh:
            assert (await fresh.call_tool("count", {})).structured_content == {"result": 3}
        await second.stop()


async def test_http_call_while_server_down_tears_the_client_down() -> None:
    """A request to a stopped Streamable HTTP server does not fail alone: the transport's
    httpx2.ConnectError cancels the whole Client, whose `async with` raises it (grouped)."""
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, make_server("echo"))
        with pytest.raises(BaseExceptionGroup) as raised:
            async with Client(served.url) as client:
                await client.call_tool("echo", {"text": "up"})
                await served.stop()
                await client.call_tool("echo", {"text": "down"})
                pytest.fail("a call to a stopped server returned")
    assert [type(e) for e in leaves(raised.value)] == [httpx2.ConnectError]


async def test_crash_over_http_tears_the_client_down(tmp_path: Path) -> None:
    """An HTTP server dying mid-request: httpx2.RemoteProtocolError cancels the whole Client
    (the call in flight sees Cancelled, not MCPError), though the call was executed."""
    count_file = tmp_path / "count"
    async with spawn_http("crash", "http", crash_after=2, count_file=count_file) as url:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with Client(url) as client:
                await client.call_tool("echo", {"text": "1"})
                await client.call_tool("echo", {"text": "2"})
                pytest.fail("the crashing call returned")
    assert [type(e) for e in leaves(raised.value)] == [httpx2.RemoteProtocolError]
    assert count_executions(count_file) == {"echo": 2}


# --- rich ------------------------------------------------------------------------------


async def test_rich_over_stdio(errlog: Errlog) -> None:
    """The rich kind: every content kind, output schemas served unvalidated, isError,
    destructive names and hints, embedded resources, resources, templates and prompts.

    The SDK client validates structured content against the listed outputSchema itself
    (RuntimeError "Invalid structured content"): structured_bad's value reached it as sent.
    """
    import base64

    async with Client(stdio_client(stdio_server_parameters("rich"), errlog=errlog.file)) as client:
        assert client.protocol_version == MODERN
        capabilities = client.server_capabilities
        assert capabilities.resources is not None and capabilities.prompts is not None
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"echo", "add", "count", "image", "audio", "big_text", "fail"} <= set(tools)
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"

        image = (await client.call_tool("image", {})).content
        assert isinstance(image[0], mcp_types.ImageContent) and image[0].mime_type == "image/png"
        assert base64.b64decode(image[0].data).startswith(b"\x89PNG\r\n\x1a\n")
        assert isinstance(image[1], mcp_types.TextContent) and image[1].text == "an image"
        (audio,) = (await client.call_tool("audio", {})).content
        assert isinstance(audio, mcp_types.AudioContent) and audio.mime_type == "audio/wav"
        assert base64.b64decode(audio.data).startswith(b"RIFF")
        big = text_of(await client.call_tool("big_text", {"kib": 3}))
        assert len(big.encode("ascii")) == 3 * 1024 and big.startswith("line 1\nline 2\n")

        schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
        for name in ("structured_ok", "structured_bad"):
            assert tools[name].output_schema == {**schema, "required": ["count"]}
        assert (await client.call_tool("structured_ok", {})).structured_content == {"count": 3}
        with pytest.raises(RuntimeError, match="'three' is not of type 'integer'"):
            await client.call_tool("structured_bad", {})

        failed = await client.call_tool("fail", {"message": "it broke"})
        assert failed.is_error and text_of(failed) == "it broke"
        assert tools["delete_note"].annotations is None
        wipe_hints = tools["wipe"].annotations
        assert wipe_hints is not None and wipe_hints.destructive_hint is True
        assert text_of(await client.call_tool("delete_note", {"title": "x"})) == "ok"
        assert text_of(await client.call_tool("wipe", {})) == "ok"
        note, link = (await client.call_tool("embedded", {})).content
        assert isinstance(note, mcp_types.EmbeddedResource)
        assert isinstance(note.resource, mcp_types.TextResourceContents)
        assert (note.resource.uri, note.resource.mime_type) == ("note://hello", "text/plain")
        assert isinstance(link, mcp_types.ResourceLink) and link.uri == "notes://index"

        resources = {r.uri: r for r in (await client.list_resources()).resources}
        assert set(resources) == {"notes://index", "notes://logo"}
        assert resources["notes://logo"].mime_type == "image/png"
        (index,) = (await client.read_resource("notes://index")).contents
        assert isinstance(index, mcp_types.TextResourceContents)
        assert index.text.splitlines() == ["hello", "todo"]
        (logo,) = (await client.read_resource("notes://logo")).contents
        assert isinstance(logo, mcp_types.BlobResourceContents) and logo.mime_type == "image/png"
        assert base64.b64decode(logo.blob).startswith(b"\x89PNG")
        (template,) = (await client.list_resource_templates()).resource_templates
        assert template.uri_template == "note://{title}"
        (read,) = (await client.read_resource("note://groceries")).contents
        assert isinstance(read, mcp_types.TextResourceContents) and read.text == "note groceries"

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"summarize", "greet"}
        assert [(a.name, a.required) for a in prompts["summarize"].arguments or []] == [
            ("title", True)
        ]
        assert not prompts["greet"].arguments
        (message,) = (await client.get_prompt("summarize", {"title": "todo"})).messages
        assert message.role == "user"
        assert isinstance(message.content, mcp_types.TextContent)
        assert message.content.text == "Summarize note todo"
        assert len((await client.get_prompt("greet")).messages) == 1

        async with client.listen(resources_list_changed=True) as events:
            assert text_of(await client.call_tool("add_note", {"title": "new"})) == "added new"
            with trio.fail_after(10):
                event = await events.__anext__()
        assert type(event).__name__ == "ResourcesListChanged"
        uris = {r.uri for r in (await client.list_resources(cache_mode="refresh")).resources}
        assert "notes://new" in uris


# -- big ---------------------------------------------------------------------------------


def big_client(errlog: Errlog, *options: str, count_file: Path | None = None) -> object:
    """A stdio transport to a ``big`` fixture with ``options`` on its command line."""
    from mcp.client.stdio import StdioServerParameters

    command, args = stdio_params("big", count_file=count_file)
    params = StdioServerParameters(command=command, args=[*args, *options])
    return stdio_client(params, errlog=errlog.file)


async def list_all(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools += page.tools
        if not (cursor := page.next_cursor):
            return tools


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_big_lists_its_tools_in_pages_with_the_invalid_ones(
    mode: str, tmp_path: Path, errlog: Errlog
) -> None:
    """big pages its list and lists what MCPServer would refuse (a property of type
    "nonsense", a negative minLength, a duplicate and an empty name): the SDK client
    accepts it in both eras. Fetches are counted (count file and list_count)."""
    count_file = tmp_path / "count"
    server = big_client(errlog, "--tools", "250", "--page-size", "100", "--invalid", "4",
                        "--extra-tool", "search", count_file=count_file)
    async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
        tools = client.server_capabilities.tools
        assert tools is not None and tools.list_changed
        listed = await list_all(client)
        names = [t.name for t in listed]
        assert len(names) == 250 + 1 + 3 + 1 + 4
        assert names[:2] == ["tool_0000", "tool_0001"] and names[249] == "tool_0249"
        assert names[250:] == ["search", "burst", "change_during", "list_count", "generation_0",
                               "bad_type_0", "bad_bound_1", "tool_0000", ""]
        assert listed[255].input_schema["properties"] == {"x": {"type": "nonsense"}}
        assert text_of(await client.call_tool("tool_0007", {"x": 3})) == "tool_0007 x=3"
        assert text_of(await client.call_tool("search", {"text": "q"})) == "search: q"
        counts = (await client.call_tool("list_count", {})).structured_content
        assert counts == {"fetches": 1, "pages": 3}
    assert count_executions(count_file) == {"tools/list": 1, "tool_0007": 1, "search": 1}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_big_burst_announces_every_change_before_answering(
    mode: str, errlog: Errlog
) -> None:
    """burst(n) changes the list n times and announces each change before it answers:
    n notifications (handshake era); on 2026-07-28 n listen events, which the SDK client
    merges while they wait unread (identical events are deduplicated against its backlog)."""
    seen = 0

    async def handler(message: object) -> None:
        nonlocal seen
        if isinstance(message, mcp_types.ToolListChangedNotification):
            seen += 1

    server = big_client(errlog, "--tools", "3")
    async with Client(server, mode=mode, message_handler=handler) as client:  # type: ignore[arg-type]
        if mode == "legacy":
            answer = text_of(await client.call_tool("burst", {"n": 20}))
            with trio.fail_after(10):
                while seen < 20:  # noqa: ASYNC110 - counted by the handler, in order
                    await trio.sleep(0.01)
        else:
            assert client.protocol_version == MODERN
            async with client.listen(tools_list_changed=True) as events:
                answer = text_of(await client.call_tool("burst", {"n": 20}))
                with trio.fail_after(10):
                    event = await events.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
        assert answer == "sent 20 list_changed; generation 20"
        names = {t.name for t in await list_all(client)}
        assert "generation_20" in names and "generation_0" not in names


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_big_change_during_answers_once_the_new_list_was_fetched(
    mode: str, errlog: Errlog
) -> None:
    """change_during announces its change while its call is in flight and answers only
    after a tools/list fetch served the new list."""
    notified = trio.Event()
    answered = trio.Event()
    answers: list[str] = []

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            notified.set()

    server = big_client(errlog, "--tools", "150", "--page-size", "50")
    async with Client(server, mode=mode, message_handler=handler) as client:  # type: ignore[arg-type]

        async def call() -> None:
            answers.append(text_of(await client.call_tool("change_during", {"name": "late"})))
            answered.set()

        async with trio.open_nursery() as nursery:
            if mode == "legacy":
                nursery.start_soon(call)
                with trio.fail_after(10):
                    await notified.wait()
            else:
                async with client.listen(tools_list_changed=True) as events:
                    nursery.start_soon(call)
                    with trio.fail_after(10):
                        await events.__anext__()
            assert not answered.is_set()  # the call is still in flight
            assert "late" in {t.name for t in await list_all(client)}
            with trio.fail_after(10):
                await answered.wait()
        assert answers == ["added late; the new list was fetched"]
        assert text_of(await client.call_tool("late", {})) == "late"


async def test_big_over_streamable_http_in_a_subprocess() -> None:
    """big serves Streamable HTTP too (its default 1000 tools, in both eras)."""
    async with open_http_fixture("big") as fixture:
        for mode in ("auto", "legacy"):
            async with Client(fixture.url, mode=mode) as client:  # type: ignore[arg-type]
                names = [t.name for t in await list_all(client)]
                assert len(names) == 1004 and names[999] == "tool_0999"
                assert text_of(await client.call_tool("tool_0999", {"x": 0})) == "tool_0999 x=0"
