"""The gateway (``mcp-supervisor serve``): the merged catalog served as one MCP server,
used by a plain ``mcp`` SDK client over stdio and over Streamable HTTP, in both protocol
eras; its lists follow the tree; its HTTP front wants a token and refuses other origins."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path

import httpx2
import mcp_types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from supervisor import open_supervisor
from supervisor.faults import Injector
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._core import ERROR_META
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.testing.servers import make_server, stdio_params

from .probes import own_state

TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
REFERENCE = Path(__file__).with_name("reference_server.py")
TOKEN = "test-gateway-token-0123456789"


def fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "initTimeout": 60, **extra}


def text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


@asynccontextmanager
async def gateway_over_http(
    config: dict[str, object], *, apps: dict[str, object] | None = None, **options: object
) -> AsyncIterator[tuple[object, Gateway, HttpGatewayInfo]]:
    """A supervisor of ``config`` served by an in-process HTTP gateway on a free port,
    every server connected and listed before a client comes (so that no announcement of
    the start can reach a test's client)."""
    async with open_supervisor(config, apps=apps) as sup, trio.open_nursery() as nursery:
        gateway = Gateway(sup, **options)  # type: ignore[arg-type]
        await nursery.start(gateway.run)
        await sup.tools()
        await gateway.announce()
        info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
        yield sup, gateway, info
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def http_client(
    url: str, *, mode: str = "auto", token: str = TOKEN, **options: object
) -> AsyncIterator[Client]:
    # the MCP transports' timeouts (the SDK's default client's): a call may take minutes
    timeout = httpx2.Timeout(30, read=300)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):  # type: ignore[arg-type]
        yield client


# -- a plain client, three backing servers ------------------------------------------------


async def test_a_stdio_client_uses_tools_resources_and_prompts_of_three_servers(
    tmp_path: Path,
) -> None:
    """``serve`` over stdio (the default): one SDK client sees the tools of our echo and
    rich fixtures and of ``mcp-server-time`` (which we did not write), reads a resource,
    gets a prompt and calls a tool of each, under their merged names (``--yes`` approving
    the time server's, which is not auto-approved)."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "echo": fixture("echo", autoApprove=True),
                    "notes": fixture("rich", autoApprove=True),
                    "time": {**TIME_SERVER, "initTimeout": 60},  # not auto-approved
                }
            }
        )
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "serve", "--config", str(config), "--yes"],
        env=own_state(),  # (the SDK gives a stdio server its default variables only)
    )
    with trio.fail_after(90):
        async with Client(stdio_client(params), mode="legacy") as client:
            assert client.server_capabilities.tools.list_changed  # type: ignore[union-attr]
            # Answered once the servers had connected: none of them completes, and so
            # neither does the gateway (it would declare it for a server not known yet).
            assert client.server_capabilities.completions is None
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo_echo", "notes_add_note", "time_get_current_time"} <= names
            assert text(await client.call_tool("echo_echo", {"text": "hi"})) == "hi"
            now = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            assert not now.is_error and json.loads(text(now))["timezone"] == "UTC"
            assert not (await client.call_tool("notes_add_note", {"title": "x"})).is_error
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "notes://index" in uris
            read = await client.read_resource("notes://index")
            assert read.contents
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert "notes_greet" in prompts
            summary = await client.get_prompt("notes_summarize", {"title": "Ada"})
            assert "Summarize note Ada" in json.dumps(summary.model_dump(mode="json"))


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # ours
async def test_a_client_s_log_level_and_log_messages_print_no_python_warning(
    tmp_path: Path,
) -> None:
    """Logging is deprecated by 2026-07-28 and the gateway passes it on on purpose: a
    session-based client's ``logging/setLevel`` reaches a session-based backing server
    that declared logging (an mcp 1.x-like one), and the log messages of the call it makes
    reach it — and ``serve`` prints no Python warning on its stderr for either."""
    levels = tmp_path / "levels"
    old = [str(Path(__file__).with_name("mcp1_server.py")), "--levels", str(levels)]
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "old": {"command": sys.executable, "args": old, "lazy": False},
                    "ref": {"command": sys.executable, "args": [str(REFERENCE)], "lazy": False},
                }
            }
        )
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "serve", "--config", str(config), "--yes"],
        env=own_state(),  # (the SDK gives a stdio server its default variables only)
    )
    logged: list[tuple[str, object]] = []

    async def logging_callback(params: mcp_types.LoggingMessageNotificationParams) -> None:
        logged.append((params.level, params.data))

    stderr = tmp_path / "stderr"
    with trio.fail_after(90), stderr.open("w", encoding="utf-8") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", logging_callback=logging_callback
        ) as client:
            assert {"old_add", "ref_chatter"} <= {t.name for t in (await client.list_tools()).tools}
            await client.set_logging_level("info")
            assert levels.read_text().split() == ["info"]  # asked before the answer came
            assert text(await client.call_tool("ref_chatter", {})) == "chattered"
    assert ("warning", "message 3 at warning") in logged
    said = stderr.read_text(encoding="utf-8")
    assert "Warning" not in said, said


async def test_a_deprecated_request_is_silenced_only_while_it_is_made() -> None:
    """``on_purpose`` makes a request the SDK deprecates (its warning is raised when the
    coroutine is made) without the warning, and leaves the process's warning filters as
    they were before the request is awaited: under trio another task runs at any
    checkpoint, so a filter held across one would be that task's too (and two such
    requests interleaved would leave one behind)."""
    from mcp.shared.exceptions import MCPDeprecationWarning
    from typing_extensions import deprecated

    from supervisor._util._deprecated import on_purpose

    seen: list[object] = []

    @deprecated("old", category=MCPDeprecationWarning)
    async def old_request(value: int) -> int:
        seen.append(list(warnings.filters))
        await trio.lowlevel.checkpoint()
        return value

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        assert await on_purpose(old_request, 7) == 7
        assert seen == [filters] and warnings.filters == filters
    assert caught == []


async def test_an_http_client_of_either_era_uses_three_servers() -> None:
    """Over HTTP, a 2026-07-28 client and a handshake-era one use the tools of our echo
    and rich fixtures and of ``mcp-server-time`` (a subprocess we did not write), the rich
    one's resources and prompts; a tool's result comes back as the backing server sent it
    (structured content too), stamped with the gateway's server info, not the backing
    server's, and naming the server that answered — a read and a prompt are stamped with
    the gateway's too, as every answer is (on 2026-07-28; no answer is on the other)."""
    apps = {"echo": make_server("echo"), "notes": make_server("rich")}
    time_server = {**TIME_SERVER, "autoApprove": True, "initTimeout": 60}
    config = {"mcpServers": {"time": time_server}}
    async with gateway_over_http(config, apps=apps) as (_, _, info):
        for mode in ("auto", "legacy"):
            async with http_client(info.url, mode=mode) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"echo_echo", "notes_structured_ok", "time_get_current_time"} <= names
                result = await client.call_tool("echo_echo", {"text": "hello"})
                assert text(result) == "hello" and result.structured_content == {"result": "hello"}
                meta = result.meta or {}
                stamp = meta.get("io.modelcontextprotocol/serverInfo")
                assert stamp is None or stamp["name"] == "mcp-supervisor"
                assert meta["mcp-supervisor/server"] == "echo"
                assert client.server_info.name == "mcp-supervisor"  # type: ignore[union-attr]
                now = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                assert json.loads(text(now))["timezone"] == "UTC"
                read = await client.read_resource("notes://index")
                assert read.contents
                prompt = await client.get_prompt("notes_summarize", {"title": "Ada"})
                assert "Summarize note Ada" in json.dumps(prompt.model_dump(mode="json"))
                ours = "mcp-supervisor" if mode == "auto" else None
                for answer in (result, now, read, prompt, await client.list_prompts()):
                    assert _stamp(answer) == ours, answer


def _stamp(answer: mcp_types.Result) -> object:
    """The name in an answer's ``io.modelcontextprotocol/serverInfo`` stamp, if it has one."""
    stamp = (answer.meta or {}).get(mcp_types.SERVER_INFO_META_KEY)
    return None if stamp is None else stamp["name"]


async def test_a_call_that_needs_approval_is_refused_saying_how_to_allow_it() -> None:
    """A headless gateway has nobody to ask: a tool of a server without ``autoApprove``
    answers with a tool error (the call not sent) naming autoApprove and --yes; an
    unknown tool is the protocol's invalid-params error, naming close matches."""
    config = {"mcpServers": {"asks": fixture("echo")}}
    async with gateway_over_http(config) as (_, _, info), http_client(info.url) as client:
        result = await client.call_tool("asks_echo", {"text": "x"})
        assert result.is_error
        said = text(result)
        assert "needs approval" in said and "autoApprove" in said
        assert "start the gateway with --yes" in said
        assert (result.meta or {})[ERROR_META] == {
            "type": "ApprovalRequired",
            "server": "asks",
            "effect": "not executed",
        }
        unknown = await _raises(client.call_tool("asks_ech", {}))
        assert "asks_ech" in unknown and "asks_echo" in unknown  # close matches named


async def test_invalid_arguments_are_a_tool_error_naming_the_tool_s_server() -> None:
    """Arguments that do not fit the tool's schema: a tool error (the call not sent) whose
    ``_meta`` names the server the tool belongs to, as every other failure's does."""
    config = {"mcpServers": {"echo": fixture("echo", autoApprove=True)}}
    async with gateway_over_http(config) as (_, _, info), http_client(info.url) as client:
        result = await client.call_tool("echo_echo", {"text": 42})
        assert result.is_error and "echo_echo" in text(result)
        assert (result.meta or {})[ERROR_META] == {
            "type": "ToolArgumentsInvalid",
            "server": "echo",
            "effect": "not executed",
            "errors": [{"path": "text", "message": "42 is not of type 'string'"}],
        }


async def _raises(awaitable: object) -> str:
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as caught:
        await awaitable  # type: ignore[misc]
    assert caught.value.error.code == mcp_types.INVALID_PARAMS
    return caught.value.error.message


async def test_progress_of_the_backing_server_reaches_the_client() -> None:
    """A client that asks for progress gets the backing server's, relayed."""
    async with gateway_over_http({"mcpServers": {}}, apps={"s": make_server("slow")}) as (
        _,
        _,
        info,
    ):
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append((done, total, message))

        async with http_client(info.url) as client:
            result = await client.call_tool(
                "s_sleep", {"seconds": 0.03, "steps": 3}, progress_callback=progress
            )
        assert text(result) == "slept 0.03"
        # Relayed in order; the SDK's client may hand the last one over after the result
        # (its notifications are dispatched apart from responses), and then it is dropped.
        steps = [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        assert seen and seen == [step for step in steps if step in seen]


# -- the lists follow the tree -------------------------------------------------------------


async def test_list_changed_of_a_backing_server_reaches_clients_of_both_eras() -> None:
    """A backing server announcing a new tool: the gateway re-lists it and tells its own
    clients — a notification on a handshake-era session, an event on a 2026-07-28
    client's listen stream — and the new tool can be called through it."""
    apps = {"live": make_server("changing")}
    async with gateway_over_http({"mcpServers": {}}, apps=apps) as (_, _, info):
        notified = trio.Event()

        async def handler(message: object) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                notified.set()

        async with (
            http_client(info.url, mode="legacy", message_handler=handler) as legacy,
            http_client(info.url) as modern,
        ):
            await legacy.list_tools()
            async with modern.listen(tools_list_changed=True) as events:
                await legacy.call_tool("live_add_tool", {"name": "late"})
                with trio.fail_after(10):
                    event = await events.__anext__()
                    await notified.wait()
            assert type(event).__name__ == "ToolsListChanged"
            names = {t.name for t in (await modern.list_tools(cache_mode="refresh")).tools}
            assert "live_late" in names
            assert text(await legacy.call_tool("live_late", {})) == "late"


async def test_kill_9_of_a_backing_server_is_only_latency() -> None:
    """kill -9 of a stdio server mid-session: the next call through the gateway waits for
    the restart and succeeds; its tools were never withdrawn (no list_changed)."""
    config = {
        "mcpServers": {"echo": fixture("echo", lazy=False, autoApprove=True)},
        "supervisor": {"backoff": {"local": {"initial": 0.05}}},
    }
    notified: list[object] = []

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            notified.append(message)

    async with (
        gateway_over_http(config) as (sup, _, info),
        sup.subscribe("mcp.local.crashed") as crashes,  # type: ignore[attr-defined]
        http_client(info.url, mode="legacy", message_handler=handler) as client,
    ):
        assert text(await client.call_tool("echo_echo", {"text": "a"})) == "a"
        os.kill(sup.status()["echo"].pid, signal.SIGKILL)  # type: ignore[attr-defined,arg-type]
        await crashes.receive()  # the next call comes after the crash, as a client's would
        with trio.fail_after(60):
            assert text(await client.call_tool("echo_echo", {"text": "b"})) == "b"
        names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
        assert "echo_echo" in names and notified == []


async def test_a_failed_server_is_withdrawn_at_once_and_restored_when_back() -> None:
    """A backing server that ends ``failed``: clients get list_changed and its tools are
    gone; a call to one is at once a tool error naming the server and its last error,
    marked not executed; /readyz says 503 as it is required. Restarted, its tools come
    back with another list_changed, and /readyz is 200 again."""
    config = {
        "mcpServers": {
            "echo": fixture("echo", lazy=False, autoApprove=True, maxRestarts=0, required=True),
            "other": fixture("echo", lazy=False, autoApprove=True),
        }
    }
    changes: list[object] = []
    changed = trio.Event()

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changes.append(message)
            changed.set()

    async with gateway_over_http(config) as (sup, _, info):
        probe = httpx2.AsyncClient()
        base = info.url.removesuffix("/mcp")
        async with probe, http_client(info.url, mode="legacy", message_handler=handler) as client:
            assert "echo_echo" in {t.name for t in (await client.list_tools()).tools}
            assert (await probe.get(f"{base}/readyz")).status_code == 200
            os.kill(sup.status()["echo"].pid, signal.SIGKILL)  # type: ignore[attr-defined,arg-type]
            with trio.fail_after(30):
                await changed.wait()
            assert sup.status()["echo"].status == "failed"  # type: ignore[attr-defined]
            names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
            assert "echo_echo" not in names and "other_echo" in names
            with trio.fail_after(5):  # at once: no wait for a restart that will not come
                result = await client.call_tool("echo_echo", {"text": "x"})
            assert result.is_error and "'echo'" in text(result)
            assert "exit" in text(result) or "killed" in text(result) or "signal" in text(result)
            assert (result.meta or {})[ERROR_META]["effect"] == "not executed"
            ready = await probe.get(f"{base}/readyz")
            assert ready.status_code == 503 and "echo" in ready.json()["required_servers_down"]
            changed = trio.Event()
            await sup.restart("echo")  # type: ignore[attr-defined]
            with trio.fail_after(60):
                await changed.wait()
            names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
            assert "echo_echo" in names and len(changes) == 2
            assert text(await client.call_tool("echo_echo", {"text": "y"})) == "y"
            assert (await probe.get(f"{base}/readyz")).status_code == 200


async def test_listings_wait_for_the_first_connections_only_once_from_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What docs/gateway.md says: a listing made while the servers make their first
    connection waits for them, up to 15 s from the start. A server that keeps failing
    before its first connection (retried, never given up on) keeps the connections
    unfinished: a listing made once that while has passed does not wait again (each
    ``tools``, ``/tools`` and tools/list through a gateway beside a server crashing at
    start took 15 s)."""
    from supervisor.gateway import _served

    assert _served.FIRST_LISTING_WAIT == 15  # as docs/gateway.md says; shorter here
    wait = 2.0
    monkeypatch.setattr(_served, "FIRST_LISTING_WAIT", wait)
    crashing = {
        "command": sys.executable,
        "args": ["-c", "raise SystemExit(1)"],
        "maxRestarts": 100000,
    }
    config = {
        "mcpServers": {"echo": fixture("echo", autoApprove=True), "dead": crashing},
        "supervisor": {"backoff": {"local": {"initial": 0.1, "max": 0.2, "maxAttempts": 100000}}},
    }
    async with open_supervisor(config) as sup, trio.open_nursery() as nursery:
        gateway = Gateway(sup)  # type: ignore[arg-type]
        start = trio.current_time()
        await nursery.start(gateway.run)
        first = await gateway.tools_document()
        waited = trio.current_time() - start
        # The first listing waited out the while, and saw the server that came up.
        assert waited >= wait and "echo_echo" in {t["name"] for t in first["tools"]}
        assert sup.status()["dead"].status != "connected"  # type: ignore[attr-defined]
        for _ in range(3):
            begun = trio.current_time()
            await gateway.tools_document()
            assert trio.current_time() - begun < wait / 2
        nursery.cancel_scope.cancel()


async def test_filters_narrow_what_one_gateway_serves() -> None:
    """``tools`` globs and ``servers`` names: only those are listed, and a call to another
    known tool is refused as not served here."""
    apps = {"e": make_server("echo"), "n": make_server("rich")}
    async with gateway_over_http({"mcpServers": {}}, apps=apps, tools=["*_echo", "n_add*"]) as (
        _,
        _,
        info,
    ):
        async with http_client(info.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"e_echo", "n_echo", "n_add", "n_add_note"}
            message = await _raises(client.call_tool("e_count", {}))
            assert "not served by this gateway" in message
    async with gateway_over_http({"mcpServers": {}}, apps=apps, servers=["n"]) as (_, _, info):
        async with http_client(info.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names and all(name.startswith("n_") for name in names)


# -- the HTTP front --------------------------------------------------------------------------


async def test_http_needs_the_token_and_refuses_other_origins() -> None:
    """No token or a wrong one: 401 with WWW-Authenticate; another Origin: 403; the
    probes and metrics answer without a token; an unknown path is 404."""
    async with gateway_over_http({"mcpServers": {}}, apps={"e": make_server("echo")}) as (
        _,
        _,
        info,
    ):
        base = info.url.removesuffix("/mcp")
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx2.AsyncClient() as http:
            bare = await http.post(info.url, json=body)
            assert bare.status_code == 401
            assert bare.headers["www-authenticate"] == 'Bearer realm="mcp-supervisor"'
            wrong = await http.post(info.url, json=body, headers={"Authorization": "Bearer no"})
            assert wrong.status_code == 401 and "invalid_token" in wrong.headers["www-authenticate"]
            evil = await http.post(
                info.url,
                json=body,
                headers={"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"},
            )
            assert evil.status_code == 403
            health = await http.get(f"{base}/healthz")
            assert health.status_code == 200 and health.json()["status"] == "alive"
            assert (await http.get(f"{base}/readyz")).json() == {"status": "ready"}
            metrics = await http.get(f"{base}/metrics")
            assert metrics.status_code == 200 and "mcp_" in metrics.text
            assert (await http.get(f"{base}/nope")).status_code == 404


async def test_serve_http_prints_a_generated_token_once_and_takes_it(tmp_path: Path) -> None:
    """``serve --http`` without a token configured makes one and prints it once on
    stderr, with the endpoint; the token works, and is in no log line."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": fixture("echo", autoApprove=True)}}))
    env = {k: v for k, v in os.environ.items() if k != "MCP_SUPERVISOR_GATEWAY_TOKEN"}
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    process = await trio.lowlevel.open_process(
        [*command, "--http", "127.0.0.1:0", "-v"], stderr=subprocess.PIPE, env=env
    )
    assert process.stderr is not None
    err = b""
    try:
        pattern = re.compile(rb"gateway at (\S+)\n.*gateway token \(send .*\): (\S+)\n", re.S)
        with trio.fail_after(60):
            while (found := pattern.search(err)) is None:
                chunk = await process.stderr.receive_some()
                assert chunk, err.decode()
                err += chunk
        url, token = found[1].decode(), found[2].decode()
        async with http_client(url, token=token) as client:
            assert text(await client.call_tool("echo_echo", {"text": "hi"})) == "hi"
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            while chunk := await process.stderr.receive_some():
                err += chunk
            assert await process.wait() == 143
    finally:
        with suppress(ProcessLookupError):
            process.kill()
        await process.stderr.aclose()
    assert err.decode().count(token) == 1  # printed once; the logs redact it


def test_the_token_comes_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--token-file wins over $MCP_SUPERVISOR_GATEWAY_TOKEN; neither: "" (generate one);
    a file with several words or nothing is refused, naming it."""
    from argparse import Namespace

    from supervisor.cli._serve import _token

    monkeypatch.setenv("MCP_SUPERVISOR_GATEWAY_TOKEN", "from-env")
    assert _token(Namespace(token_file=None)) == "from-env"
    file = tmp_path / "token"
    file.write_text("from-file\n")
    assert _token(Namespace(token_file=str(file))) == "from-file"
    monkeypatch.delenv("MCP_SUPERVISOR_GATEWAY_TOKEN")
    assert _token(Namespace(token_file=None)) == ""
    for bad in ("", "two words"):
        file.write_text(bad)
        assert _token(Namespace(token_file=str(file))) is None


def test_the_client_snippets_in_the_docs_start_the_gateway() -> None:
    """docs/gateway.md's Claude Desktop, VS Code and Claude Code snippets are valid in
    their clients' formats, and what they run is ``serve`` over stdio as our parser
    reads it."""
    from supervisor.cli import build_parser
    from supervisor.config import load_config

    page = (Path(__file__).parent.parent / "docs" / "gateway.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, re.S)
    snippets = [json.loads(b) for b in blocks if '"command": "mcp-supervisor"' in b]
    assert len(snippets) == 2  # Claude Desktop (mcpServers) and VS Code (servers)
    commands = []
    for snippet in snippets:
        (server,) = load_config(snippet).servers.values()
        commands.append([server.command, *server.args])
    claude_code = re.search(r"claude mcp add supervisor -- (.*)\n", page)
    assert claude_code is not None
    commands.append(claude_code[1].split())
    for command in commands:
        assert command[0] == "mcp-supervisor"
        args = build_parser().parse_args(command[1:])
        assert args.command == "serve" and args.http is None and args.dashboard is None
        assert Path(args.config).is_absolute()


async def test_an_expired_backing_session_is_renewed_behind_the_clients_session(
    tmp_path: Path,
) -> None:
    """The backing HTTP server forgets its session (404 "Session not found", as after its
    restart): the supervisor opens a new one and sends the call again, unseen; the
    gateway's client keeps its own session and every call is executed once."""
    from supervisor.testing.servers import count_executions
    from supervisor.testing.servers import serve_http as serve_fixture

    count = tmp_path / "count"
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_fixture, make_server("echo", count_file=count)))
        expire = {"when": {"method": "tools/call", "nth": 2}, "do": "expire_session"}
        backing = {"type": "http", "url": url, "autoApprove": True, "faults": [expire]}
        async with (
            open_supervisor(
                {"mcpServers": {"web": backing}}, mode="legacy", injector=Injector()
            ) as sup,
            trio.open_nursery() as inner,
        ):
            gateway = Gateway(sup)
            await inner.start(gateway.run)
            info = await inner.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
            async with http_client(info.url, mode="legacy") as client:
                said = [text(await client.call_tool("web_echo", {"text": t})) for t in "abc"]
            assert said == ["a", "b", "c"]
            assert [f.action for f in sup.faults()] == ["expire_session"]  # it did happen
            inner.cancel_scope.cancel()
        nursery.cancel_scope.cancel()
    assert count_executions(count) == {"echo": 3}


async def test_a_change_of_prompts_alone_reaches_clients_of_both_eras() -> None:
    """A backing server announcing a new prompt, its tools unchanged: the gateway fetches
    its prompts again and tells its own clients that the prompt list changed — a
    notification on a handshake-era session, an event on a 2026-07-28 listen stream —
    without waiting for some other change to carry it."""
    apps = {"live": make_server("changing")}
    async with gateway_over_http({"mcpServers": {}}, apps=apps) as (_, _, info):
        notified = trio.Event()

        async def handler(message: object) -> None:
            if isinstance(message, mcp_types.PromptListChangedNotification):
                notified.set()

        async with (
            http_client(info.url, mode="legacy", message_handler=handler) as legacy,
            http_client(info.url) as modern,
        ):
            await legacy.list_prompts()
            async with modern.listen(prompts_list_changed=True) as events:
                await legacy.call_tool("live_add_prompt", {"name": "late"})
                with trio.fail_after(10):
                    event = await events.__anext__()
                    await notified.wait()
            assert type(event).__name__ == "PromptsListChanged"
            names = {p.name for p in (await modern.list_prompts(cache_mode="refresh")).prompts}
            assert "live_late" in names
