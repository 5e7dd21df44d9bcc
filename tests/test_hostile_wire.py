"""What a hostile server can do on the wire: its own error -32000 (the code the SDK uses for
"Connection closed") and a catalog page built to cost a gigabyte; real subprocess servers
(``tests/hostile_server.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from structlog.testing import capture_logs

from supervisor.faults import Injector, load_plan
from supervisor.server import (
    CallMayHaveTakenEffect,
    ServerRequestError,
    ServerStatus,
    ServerUnavailable,
)
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import start_http
from supervisor.transports._pages import CATALOG_TOO_LARGE, LISTINGS, PageGuard

from .hostile_server import MESSAGE
from .probes import until
from .test_server import Recorder, Settings, managed

HOSTILE = str(Path(__file__).with_name("hostile_server.py"))
WS_HOSTILE = str(Path(__file__).with_name("hostile_ws_server.py"))
#: what the hostile server says with each -32000 (its escape sequence included)
SAID = "the database is down"


def hostile(name: str, *args: str, **fields: object) -> Settings:
    fields.setdefault("lazy", False)
    fields.setdefault("max_attempts", 1)
    return Settings(name=name, command=sys.executable, args=[HOSTILE, *args], **fields)  # type: ignore[arg-type]


def stderr_of(server: object) -> list[str]:
    actor = server.current  # type: ignore[attr-defined]
    return [] if actor is None or actor.transport is None else list(actor.transport.stderr_tail)


# -- item: a server's own -32000 is its answer, not a lost connection ------------------------


async def test_a_tool_answered_with_32000_is_the_servers_error_and_nothing_restarts() -> None:
    """tools/call answered with the server's own {"code": -32000}: ServerRequestError
    naming the server and carrying its message; the connection, the process and the tools
    stay, call after call (more calls than its restarts would allow)."""
    rec = Recorder()
    server = managed(hostile("h", "refuse"), rec)
    async with open_servers([server]):
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        pid = server.health.pid
        for _ in range(3):
            with pytest.raises(ServerRequestError) as info:
                await server.call_tool("boom", {}, None)
            assert info.value.code == types.CONNECTION_CLOSED and info.value.server == "h"
            assert "MCP server 'h'" in str(info.value) and SAID in str(info.value)
        assert server.status() is ServerStatus.CONNECTED
        assert server.health.pid == pid and server.health.restarts == 0
        assert {t.name for t in server.tools} == {"boom", "hang", "change"}
        assert server.health.calls_failed == 3
    assert "mcp.local.crashed" not in rec.kinds("h")
    assert "supervisor.child.restarted" not in rec.kinds()


async def test_a_servers_own_error_of_the_too_large_code_is_its_error() -> None:
    """A server that answers with -32099 itself (the code our transports give an answer
    they dropped as too large), its data not theirs: the server's error, not a crash of
    the call path on data it made up."""
    server = managed(hostile("h", "refuse"), Recorder())
    async with open_servers([server]):
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        with pytest.raises(ServerRequestError) as info:
            await server.call_tool("big", {}, None)
        assert info.value.code == -32099 and SAID in str(info.value)
        assert server.status() is ServerStatus.CONNECTED


async def test_the_real_lost_connection_is_still_may_have_taken_effect() -> None:
    """kill -9 of the server with a call in flight: CallMayHaveTakenEffect, and the
    server is restarted."""
    rec = Recorder()
    server = managed(hostile("h", "refuse", max_attempts=3), rec)
    async with open_servers([server]):
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        pid = server.health.pid
        assert pid is not None
        async with trio.open_nursery() as nursery:

            async def kill_when_called() -> None:
                await until(lambda: "hang called" in stderr_of(server), 20.0)
                os.kill(pid, signal.SIGKILL)

            nursery.start_soon(kill_when_called)
            with pytest.raises(CallMayHaveTakenEffect, match="may have taken effect"):
                await server.call_tool("hang", {}, None)
        await until(lambda: server.health.restarts == 1, 20.0)
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        assert server.health.pid != pid


@pytest.mark.parametrize("what", ["resource", "prompt"])
async def test_a_read_answered_with_32000_is_refused_once_not_resent(what: str) -> None:
    """resources/read and prompts/get answered with -32000: the server refused them
    (ServerRequestError with its message), sent once, the connection kept."""
    rec = Recorder()
    server = managed(hostile("h", "refuse"), rec)
    async with open_servers([server]):
        await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
        with pytest.raises(ServerRequestError) as info:
            if what == "resource":
                await server.read_resource("file:///x")
            else:
                await server.get_prompt("p")
        assert "refused" in str(info.value) and SAID in str(info.value)
        assert info.value.code == types.CONNECTION_CLOSED
        method = "resources/read" if what == "resource" else "prompts/get"
        assert stderr_of(server).count(f"{method} refused") == 1
        assert server.status() is ServerStatus.CONNECTED and server.health.restarts == 0


async def test_listings_and_pings_answered_with_32000_keep_the_connection() -> None:
    """resources, templates and prompts listed with -32000 are empty, the tools served; a
    ping answered with -32000 is an answer (the server is there); a tools/list after a
    change notice answered with -32000 keeps the tools listed before. No restart."""
    rec = Recorder()
    server = managed(hostile("h", "refuse", ping_interval=0.05), rec)
    async with open_servers([server]):
        await until(lambda: stderr_of(server).count("ping refused") >= 3, 20.0)
        assert server.status() is ServerStatus.CONNECTED
        assert server.resources == [] and server.prompts == []
        await server.call_tool("change", {}, None)  # list_changed: listed again, refused
        await until(lambda: "tools/list refused" in stderr_of(server), 20.0)
        await until(lambda: stderr_of(server).count("ping refused") >= 6, 20.0)
        assert {t.name for t in server.tools} == {"boom", "hang", "change"}
        assert server.status() is ServerStatus.CONNECTED and server.health.restarts == 0
    assert "mcp.health.stale" not in rec.kinds("h")


# -- item: a catalog page under the message cap is checked before it is parsed ---------------

#: Run in a subprocess of its own: connect to a server listing ``N`` tools in one page and
#: report the memory it cost (RSS before, at its peak and after; tracemalloc's peak). The
#: server is ``hostile_server.py`` over stdio, the WebSocket server at a ``ws://`` URL, or
#: the HTTP one at an ``http://`` URL (legacy SSE if its path is ``/sse``).
MEASURE = """
import json, sys, tracemalloc, trio
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from tests.test_server import Settings

def vm(key):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(key))

async def refused(hostile, count, seen):
    if hostile.startswith(("ws://", "http://")):
        kind = "ws" if hostile.startswith("ws:") else "sse" if "/sse" in hostile else "http"
        config = Settings(name="big", command="", args=[], type=kind, url=hostile,
                          lazy=False, max_attempts=0, init_timeout=600)
    else:
        config = Settings(name="big", command=sys.executable, args=[hostile, "catalog", count],
                          lazy=False, max_attempts=0, init_timeout=600)
    server = ServerHandle(config, publish=seen.append)
    async with open_servers([server]):
        while server.health.last_error is None:
            await trio.sleep(0.01)
    return server.health.last_error

async def main(hostile, count):
    seen = []
    before = vm("VmRSS")
    error = await refused(hostile, count, seen)  # RSS: its peak, and what stays after
    after, peak_rss = vm("VmRSS"), vm("VmHWM")
    tracemalloc.start()
    await refused(hostile, count, seen)  # what Python allocated at the peak
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tail = [line for e in seen if e.kind == "mcp.local.crashed" for line in e.stderr_tail]
    page = next((int(line.split()[1]) for line in tail if line.startswith("page ")), None)
    print(json.dumps({"before": before, "after": after, "peak_rss": peak_rss,
                      "traced_peak": traced_peak, "page": page, "error": error}))

trio.run(main, *sys.argv[1:])
"""


def _with_tests_importable() -> dict[str, str]:
    """The environment for MEASURE: ours, with the project's root on ``PYTHONPATH`` (a
    script's own directory, not the working directory, is what Python puts on its path)."""
    root = str(Path(__file__).parent.parent)
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def measure(tmp_path: Path, hostile: str) -> dict[str, Any]:
    """What connecting to *hostile* (listing 200,000 tools) cost, measured by MEASURE."""
    script = tmp_path / "measure.py"
    script.write_text(MEASURE)
    done = subprocess.run(
        [sys.executable, str(script), hostile, "200000"],
        capture_output=True,
        text=True,
        timeout=600,
        env=_with_tests_importable(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def assert_refused_unparsed(got: dict[str, Any]) -> None:
    """The limit error, and memory bounded by the page's bytes, not its models'."""
    assert got["error"].startswith("MCP server 'big' lists 200000 tools (")
    assert "more than the limits (1000 tools, 2097152 bytes)" in got["error"]
    assert "maxToolsPerServer, maxCatalogBytes" in got["error"]
    page = got["page"]
    assert page > 8_000_000  # the attack's shape: a page of megabytes, under 16 MiB
    assert got["traced_peak"] < 3 * page, got
    assert got["peak_rss"] - got["before"] < 5 * page, got
    assert got["after"] - got["before"] < 2 * page, got


def test_a_200000_tool_page_under_the_message_cap_is_refused_unparsed(tmp_path: Path) -> None:
    """200,000 tiny tools in one tools/list page (about 10 MB, under maxMessageBytes):
    refused with the limit error naming the server, the count and the settings to
    change, without building the tools: the supervisor's memory peaks at a few times the
    page's bytes (parsing them cost some eighty times) and comes back after."""
    assert_refused_unparsed(measure(tmp_path, HOSTILE))


def test_a_200000_tool_page_over_websocket_is_refused_unparsed(tmp_path: Path) -> None:
    """The same page as one WebSocket text frame (a real server on 127.0.0.1, the frame
    under maxMessageBytes): refused as it arrives, before it is parsed, with the same
    error; memory peaks at a few times the page's bytes and comes back after."""
    server = subprocess.Popen(
        [sys.executable, WS_HOSTILE, "200000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("ws://127.0.0.1:"), url
        got = measure(tmp_path, url)
    finally:
        server.kill()
        _, said = server.communicate(timeout=30)
    got["page"] = next(int(line.split()[1]) for line in said.splitlines() if "page " in line)
    assert_refused_unparsed(got)


def test_a_page_over_the_limits_is_answered_with_an_error_for_its_request() -> None:
    """Each listing's page is measured as written: the items counted and their bytes
    summed; a page over either limit becomes an error for that request (its counts in
    ``data``), a page within them, another message, or a request from the server with a
    listing's id is left to the parser."""
    guard = PageGuard(max_items=2, max_bytes=40)

    def page(request_id: object, field: str, names: list[str]) -> bytes:
        items = [{"name": n} for n in names]
        message = {"jsonrpc": "2.0", "id": request_id, "result": {field: items}}
        return json.dumps(message, separators=(",", ":")).encode()

    for method, field in LISTINGS.items():
        guard.sent(method, 7)
        refused = guard.check(page(7, field, ["a", "b", "c"]))
        assert refused is not None and refused[0] == 7
        assert refused[1]["code"] == CATALOG_TOO_LARGE
        assert refused[1]["data"] == {"count": 3, "size": 3 * len('{"name":"a"}')}
        guard.sent(method, "8")
        assert guard.check(page(8, field, ["a" * 20, "b" * 20]))[1]["data"]["size"] == 62  # type: ignore[index]
        guard.sent(method, 9)
        assert guard.check(page(9, field, ["a", "b"])) is None
    guard.sent("tools/list", 10)
    assert guard.check(page(10, "content", ["a", "b", "c"])) is None  # not a listing's page
    guard.sent("tools/list", 11)
    request = {"jsonrpc": "2.0", "id": 11, "method": "roots/list", "params": {}}
    assert guard.check(json.dumps(request).encode()) is None
    assert guard.check(page(11, "tools", ["a", "b", "c"])) is not None  # still waited for
    assert guard.check(page(12, "tools", ["a", "b", "c"])) is None  # no such listing


def refusing_http_app() -> MCPServer:
    """A Streamable HTTP server whose tool ``boom`` answers with the JSON-RPC error
    -32000 of its own."""
    app = MCPServer("refusing")

    @app.tool()
    def boom() -> str:
        """Fails with the server's own -32000."""
        raise MCPError(code=-32000, message=MESSAGE)

    return app


async def test_a_32000_over_streamable_http_is_the_servers_error() -> None:
    """The same over Streamable HTTP (a real socket): the server's -32000, sent on its
    response stream, is ServerRequestError; the connection is kept."""
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, refusing_http_app())
        config = Settings(name="web", command="", args=[], type="http", url=served.url, lazy=False)
        server = managed(config, rec)
        async with open_servers([server]):
            await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
            for _ in range(2):
                with pytest.raises(ServerRequestError) as info:
                    await server.call_tool("boom", {}, None)
                assert info.value.code == types.CONNECTION_CLOSED and SAID in str(info.value)
            assert server.status() is ServerStatus.CONNECTED and server.health.restarts == 0
        nursery.cancel_scope.cancel()


@attrs.define
class FaultySettings(Settings):
    """A server's settings with a fault plan."""

    faults: object = None


async def test_the_sdks_own_lost_answer_over_streamable_http_is_still_a_lost_call() -> None:
    """The answer's stream closed without the answer: the SDK's Streamable HTTP client
    says so with -32000 itself, and that stays CallMayHaveTakenEffect."""
    rules = [{"when": {"method": "tools/call", "nth": 1, "direction": "to_client"},
              "do": "close_stream"}]  # fmt: skip
    app = MCPServer("plain")

    @app.tool()
    def echo(text: str) -> str:
        """Answers its text."""
        return text

    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, app)
        config = FaultySettings(
            name="web", command="", args=[], type="http", url=served.url, lazy=False,
            faults=load_plan(rules), max_attempts=3,
        )  # fmt: skip
        server = ServerHandle(config, publish=Recorder(), injector=Injector())
        async with open_servers([server]):
            await until(lambda: server.status() is ServerStatus.CONNECTED, 20.0)
            with pytest.raises(CallMayHaveTakenEffect):
                await server.call_tool("echo", {"text": "1"}, None)
            assert (await server.call_tool("echo", {"text": "2"}, None)).content[0].text == "2"
        nursery.cancel_scope.cancel()


async def test_a_catalog_over_the_limits_fails_its_server_at_once_and_no_other() -> None:
    """A server listing more tools than maxToolsPerServer is failed on its first attempt,
    not restarted until its attempts run out (it would list the same again): spawned
    once, its record says retrying cannot help, its calls name the settings to raise;
    the other server stays connected."""
    rec = Recorder()
    big = managed(hostile("big", "catalog", "1500", max_attempts=3), rec)
    other = managed(hostile("h", "refuse"), rec)
    async with open_servers([big, other]):
        await until(lambda: big.status() is ServerStatus.FAILED, 30.0)
        await until(lambda: other.status() is ServerStatus.CONNECTED, 30.0)
        assert rec.kinds("big").count("mcp.local.spawned") == 1
        assert big.health.retryable is False and big.health.restarts == 0
        with pytest.raises(ServerUnavailable) as info:
            await big.call_tool("t1", {}, None)
        said = str(info.value)
        assert "retrying cannot help" in said and "lists 1500 tools" in said
        assert "maxToolsPerServer, maxCatalogBytes" in said
        assert other.status() is ServerStatus.CONNECTED and other.health.restarts == 0


async def test_a_page_that_is_not_json_is_refused_unparsed() -> None:
    """A tools/list page of 1500 tools that also holds a NaN (not JSON, so the page
    guard cannot measure it, but the SDK's parser takes it): refused before it is
    parsed, with an error saying why; the tools are never built."""
    rec = Recorder()
    big = managed(hostile("big", "catalog", "1500", "nan"), rec)
    with capture_logs() as logs:
        async with open_servers([big]):
            await until(lambda: big.health.last_error is not None, 30.0)
    assert "listing page that could not be measured dropped" in [e["event"] for e in logs]
    assert "could not be read as JSON to be measured" in str(big.health.last_error)
    assert big.tools == []
