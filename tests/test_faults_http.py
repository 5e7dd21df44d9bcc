"""Fault injection over Streamable HTTP: every action, through both injection points — our
supervisor's ``http_transport(faults=...)`` and the chaos proxy (``run_http_proxy``) — with
real fixture servers on 127.0.0.1 and the SDK's ``mcp.Client`` in both protocol eras
(``auto``: the stateless 2026-07-28 one, JSON answers; ``legacy``: sessions, event
streams). The last tests run ``mcp-supervisor chaos --listen`` as a real process — one
with the TypeScript SDK's client, where ``$MCP_SUPERVISOR_TS_SDK`` names a folder in which
``npm install @modelcontextprotocol/sdk`` was run (skipped otherwise) — and check the
calls the proxy records."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import httpx2
import mcp_types
import pytest
import structlog
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from supervisor.cli import main
from supervisor.errors import HTTPConnectionLost
from supervisor.faults import CallHistory, Injector, load_plan
from supervisor.faults._history import CallRecord
from supervisor.faults._http_proxy import run_http_proxy
from supervisor.faults._inject import _http as faults_http
from supervisor.faults._inject._engine import FaultEngine, Injected
from supervisor.faults._inject._http import FaultyHTTPTransport
from supervisor.faults._inject._points import ServerFaults
from supervisor.runtime import open_supervisor
from supervisor.testing.servers import count_executions, make_server, start_http
from supervisor.transports._http import http_transport
from tests.test_chaos import server_row

VIAS = ["transport", "proxy"]
MODES = ["auto", "legacy"]
#: A bound on each test's waiting, so that a fault that hangs fails the test instead.
DEADLINE = 20


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``exc``."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def text_of(result: mcp_types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, mcp_types.TextContent)
    return content.text


class Watch:
    """The engine's faults as they are injected; a test waits for one on an event."""

    def __init__(self) -> None:
        self.seen: list[Injected] = []
        self._changed = trio.Event()

    def __call__(self, fault: Injected) -> None:
        self.seen.append(fault)
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, action: str) -> None:
        while not any(fault.action == action for fault in self.seen):
            await self._changed.wait()

    def actions(self) -> list[str]:
        return [fault.action for fault in self.seen]


class Chaos:
    """One fault plan between the tests' clients and a fixture server."""

    def __init__(
        self,
        via: str,
        url: str,
        engine: FaultEngine,
        watch: Watch,
        on_status: Callable[[int], None] | None,
    ) -> None:
        self.via = via
        self.url = url
        self.engine = engine
        self.watch = watch
        self.on_status = on_status

    def client(self, mode: str = "auto", **options: object) -> Client:
        """A new ``mcp.Client`` through the plan (a new connection each time)."""
        if self.via == "proxy":
            return Client(self.url, mode=mode, **options)  # type: ignore[arg-type]
        target = http_transport(self.url, faults=self.engine, on_status=self.on_status)
        return Client(target, mode=mode, **options)  # type: ignore[arg-type]

    @property
    def dropped_connection(self) -> type[BaseException]:
        """What a dropped connection raises from a client: ours translate it."""
        return HTTPConnectionLost if self.via == "transport" else httpx2.RemoteProtocolError


@asynccontextmanager
async def upstream(kind: str = "slow", count_file: Path | None = None) -> AsyncIterator[str]:
    """A fixture server of ``kind`` served in-process on 127.0.0.1: its URL."""
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, make_server(kind, count_file=count_file))  # type: ignore[arg-type]
        try:
            yield served.url
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def chaos(
    via: str,
    rules: list[dict[str, object]],
    url: str,
    *,
    on_status: Callable[[int], None] | None = None,
    history: CallHistory | None = None,
) -> AsyncIterator[Chaos]:
    """``rules`` between clients and ``url``: through our transport or the chaos proxy
    (which records the tool calls in ``history``, if given)."""
    watch = Watch()
    plan = load_plan(rules)
    engine = ServerFaults(plan, on_inject=watch)  # (what a supervisor's injector makes)
    if via == "transport":
        yield Chaos(via, url, engine, watch, on_status)
        return
    async with trio.open_nursery() as nursery:
        proxy = await nursery.start(
            partial(run_http_proxy, plan, "127.0.0.1", 0, url, engine=engine, history=history)
        )
        try:
            yield Chaos(via, proxy, engine, watch, on_status)
        finally:
            nursery.cancel_scope.cancel()


class Recorder(httpx2.AsyncBaseTransport):
    """A transport that notes each exchange it passes on: method, body, status."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[tuple[str, bytes, int]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self.inner.handle_async_request(request)
        self.seen.append((request.method, body, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def mcp_client(
    transport: httpx2.AsyncBaseTransport,
    url: str,
    mode: str,
    hooks: list[Callable[[httpx2.Response], Awaitable[None]]] = (),  # type: ignore[assignment]
) -> AsyncIterator[Client]:
    """An ``mcp.Client`` over an ``httpx2`` client with ``transport``."""
    http = httpx2.AsyncClient(transport=transport, event_hooks={"response": list(hooks)})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
        yield client


def calls(nth: int, do: object, direction: str | None = None) -> dict[str, object]:
    """A rule firing on the ``nth`` tools/call (going ``direction``, if given)."""
    when: dict[str, object] = {"method": "tools/call", "nth": nth}
    if direction is not None:
        when["direction"] = direction
    return {"when": when, "do": do}


# -- event streams, read as they come ---------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 7, 4096])
async def test_event_streams_are_split_at_empty_lines_only(size: int) -> None:
    """Events end at an empty line whatever the line ends (CRLF, LF, CR) and wherever the
    chunks break (a CRLF split in two included); every byte passes, in order."""
    stream = (
        b'event: message\r\nid: 7\r\ndata: {"a":1}\r\n\r\n'
        b": a comment\n\n"
        b"data: one\rdata: two\r\r"
        b"data: unterminated"
    )

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(stream), size):
            yield stream[i : i + size]

    events = [raw async for raw, examine in faults_http._raw_events(chunks()) if examine]
    assert b"".join(events) == stream
    assert [faults_http._event_data(raw) for raw in events] == [
        (b'{"a":1}', b"7"),
        (None, None),
        (b"one\ntwo", None),
        (b"unterminated", None),
    ]


# -- kill, exit_on_initialize ---------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_kill_on_the_third_call_answers_exactly_two(
    via: str, mode: str, tmp_path: Path
) -> None:
    """The connection drops as a crashed server's does: the client is torn down by the
    dropped connection's error; the third call never reached the server."""
    count = tmp_path / "count"
    answered: list[str] = []
    async with upstream(count_file=count) as url, chaos(via, [calls(3, "kill")], url) as c:
        with trio.fail_after(DEADLINE), pytest.raises(BaseExceptionGroup) as raised:
            async with c.client(mode) as client:
                for i in range(5):
                    answered.append(text_of(await client.call_tool("echo", {"text": str(i)})))
    assert answered == ["0", "1"]
    assert [type(e) for e in leaves(raised.value)] == [c.dropped_connection]
    assert count_executions(count) == {"echo": 2}
    assert c.watch.actions() == ["kill"]


async def test_kill_breaks_every_exchange_in_flight() -> None:
    """As a crash drops every connection: another client's long call, in flight through
    the proxy, breaks at once instead of waiting for its answer."""
    rules = [
        {"when": {"tool": "sleep"}, "do": {"delay_ms": 0}},  # says the call is on its way
        {"when": {"tool": "echo"}, "do": "kill"},
    ]
    async with upstream() as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):  # well before the long call's answer
            async with trio.open_nursery() as nursery:

                async def long_call() -> None:
                    with pytest.raises(BaseExceptionGroup) as broken:
                        async with c.client("auto") as client:
                            await client.call_tool("sleep", {"seconds": 60})
                    assert httpx2.RemoteProtocolError in {type(e) for e in leaves(broken.value)}

                nursery.start_soon(long_call)
                await c.watch.wait("delay")
                with pytest.raises(BaseExceptionGroup):
                    async with c.client("auto") as client:
                        await client.call_tool("echo", {"text": "crash"})
    assert c.watch.actions() == ["delay", "kill"]


@pytest.mark.parametrize("mode", MODES)
async def test_exit_on_initialize_fails_the_opening_only(mode: str) -> None:
    """The opening request (initialize, or server/discover) loses its connection; the
    next connection opens and works."""
    rules = [{"when": {"times": 1}, "do": "exit_on_initialize"}]
    async with upstream() as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):
            with pytest.raises(BaseExceptionGroup) as raised:
                async with c.client(mode):
                    pytest.fail("connected through exit_on_initialize")
            assert httpx2.RemoteProtocolError in {type(e) for e in leaves(raised.value)}
            async with c.client(mode) as client:
                assert text_of(await client.call_tool("echo", {"text": "up"})) == "up"
    [fault] = c.watch.seen
    assert fault.method == ("initialize" if mode == "legacy" else "server/discover")


# -- http_status, error, expire_session -------------------------------------------------


async def test_http_status_is_the_status_the_client_sees(tmp_path: Path) -> None:
    """Through the proxy a plain HTTP client gets the 503 itself; nothing is forwarded."""
    count = tmp_path / "count"
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}},
    }
    rules = [calls(1, {"http_status": 503})]
    async with upstream(count_file=count) as url, chaos("proxy", rules, url) as c:
        async with httpx2.AsyncClient() as http:
            with trio.fail_after(DEADLINE):
                answer = await http.post(
                    c.url, json=request, headers={"accept": "application/json, text/event-stream"}
                )
    assert answer.status_code == 503
    assert "injected HTTP 503" in answer.text
    assert count_executions(count) == {}


@pytest.mark.parametrize("mode", MODES)
async def test_http_status_reaches_our_transport(mode: str) -> None:
    """Our transport's status hook sees the injected 503; the SDK raises its error for
    the call, and the next call goes through."""
    statuses: list[int] = []
    rules = [calls(1, {"http_status": 503})]
    async with upstream() as url, chaos("transport", rules, url, on_status=statuses.append) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("echo", {"text": "x"})
                assert text_of(await client.call_tool("echo", {"text": "y"})) == "y"
    assert refused.value.error.code == mcp_types.INTERNAL_ERROR
    assert 503 in statuses


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_error_answers_in_the_servers_place(via: str, mode: str, tmp_path: Path) -> None:
    """The client gets the plan's JSON-RPC error; the server never ran the call."""
    count = tmp_path / "count"
    rules = [calls(2, {"error": {"code": -32042, "message": "injected by the plan"}})]
    async with upstream(count_file=count) as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                await client.call_tool("echo", {"text": "1"})
                with pytest.raises(MCPError, match="injected by the plan") as refused:
                    await client.call_tool("add", {"a": 1, "b": 2})
                assert text_of(await client.call_tool("echo", {"text": "3"})) == "3"
    assert refused.value.error.code == -32042
    assert count_executions(count) == {"echo": 2}


class Name(BaseModel):
    name: str


def asking_server() -> MCPServer:
    """A server whose tool ``ask`` asks the client for a name (elicitation)."""
    server = MCPServer("asking", log_level="WARNING")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Your name?", Name)
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return f"{answer.action}: {answer.data.name if answer.data else None}"

    return server


@pytest.mark.parametrize("direction", ["to_client", "to_server"])
@pytest.mark.parametrize("via", VIAS)
async def test_error_answers_a_servers_request_in_the_clients_place(
    via: str, direction: str
) -> None:
    """The server's own request (elicitation, on the call's event stream): going to the
    client, it is left out and the error answered upstream for it; going back, the
    client's answer is replaced by the error."""
    asked: list[str] = []

    async def on_elicit(context: object, params: mcp_types.ElicitRequestParams) -> object:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    rules = [
        {
            "when": {"method": "elicitation/create", "direction": direction},
            "do": {"error": {"code": -32042, "message": "no asking"}},
        }
    ]
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, asking_server())
        async with chaos(via, rules, served.url) as c:
            with trio.fail_after(DEADLINE):
                async with c.client("legacy", elicitation_callback=on_elicit) as client:
                    said = text_of(await client.call_tool("ask", {}))
        nursery.cancel_scope.cancel()
    assert said == "refused: no asking"
    assert asked == ([] if direction == "to_client" else ["Your name?"])
    assert c.watch.actions() == ["error"]


async def test_expire_session_makes_a_legacy_client_start_a_new_session(tmp_path: Path) -> None:
    """404 "Session not found", as from a restarted server: the session is gone for good
    (later calls on it fail too, unforwarded); a new session works. The call was never
    executed."""
    count = tmp_path / "count"
    rules = [calls(2, "expire_session")]
    async with upstream(count_file=count) as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("legacy") as client:
                await client.call_tool("echo", {"text": "1"})
                with pytest.raises(MCPError, match="Session not found") as expired:
                    await client.call_tool("echo", {"text": "2"})
                with pytest.raises(MCPError, match="Session not found"):
                    await client.call_tool("echo", {"text": "3"})
            async with c.client("legacy") as fresh:
                assert text_of(await fresh.call_tool("echo", {"text": "4"})) == "4"
    assert expired.value.error.code == mcp_types.INVALID_REQUEST
    assert count_executions(count) == {"echo": 2}


async def test_expire_session_passes_a_stateless_request() -> None:
    """A 2026-07-28 request carries no session to expire: it is answered as usual."""
    async with upstream() as url, chaos("proxy", [calls(1, "expire_session")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("auto") as client:
                assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"


@pytest.mark.parametrize(
    ("mode", "rule"),
    [("legacy", calls(2, "expire_session")), ("auto", calls(2, "kill"))],
    ids=["expire_session-legacy", "kill-auto"],
)
async def test_our_supervisor_recovers_through_faults(
    mode: str, rule: dict[str, object], tmp_path: Path
) -> None:
    """A supervised remote server behind a plan (its config's ``faults``): an expired
    session is replaced by a new one, a dropped connection by a reconnection, and the call
    caught by either (never executed) is sent again."""
    count = tmp_path / "count"
    async with upstream(count_file=count) as url:
        config = {
            "mcpServers": {
                "web": {
                    "url": url,
                    "type": "http",
                    "approve": False,
                    "reconnect": {"initial": 0.05, "max": 0.1},
                    "faults": [rule],
                }
            }
        }
        with trio.fail_after(DEADLINE):
            async with open_supervisor(config, mode=mode, injector=Injector()) as sup:
                answers = [(await sup.call("web_echo", {"text": str(i)})).text for i in range(3)]
                faults = sup.faults()
    assert answers == ["0", "1", "2"]
    assert count_executions(count) == {"echo": 3}
    assert [f.action for f in faults] == [rule["do"]]
    assert {f.server for f in faults} == {"web"}


# -- delay, drop, hang, slow_start ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_delay_then_drop_ends_in_a_timeout_not_a_hang(via: str, mode: str) -> None:
    """A delayed, then dropped, request is never answered: the client's own timeout ends
    the call with a clear error, and the connection carries on."""
    rules = [calls(2, {"delay_ms": 100}), calls(2, "drop")]
    async with upstream() as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                await client.call_tool("echo", {"text": "1"})
                with pytest.raises(MCPError, match="timed out") as lost:
                    await client.call_tool("echo", {"text": "2"}, read_timeout_seconds=0.5)
                assert text_of(await client.call_tool("echo", {"text": "3"})) == "3"
    assert lost.value.error.code == mcp_types.REQUEST_TIMEOUT
    assert c.watch.actions() == ["delay", "drop"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_dropped_answer_times_out(mode: str, tmp_path: Path) -> None:
    """The server ran the call; its answer (JSON, or the event in a stream) is left out
    and the client waits for it until its timeout."""
    count = tmp_path / "count"
    rules = [calls(1, "drop", "to_client")]
    async with upstream(count_file=count) as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="timed out"):
                    await client.call_tool("echo", {"text": "1"}, read_timeout_seconds=0.5)
    assert count_executions(count) == {"echo": 1}


@pytest.mark.parametrize("via", VIAS)
async def test_delay_holds_an_answer_back(via: str) -> None:
    rules = [calls(1, {"delay_ms": 300}, "to_client")]
    async with upstream() as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("legacy") as client:
                start = trio.current_time()
                assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
                assert trio.current_time() - start >= 0.3


@pytest.mark.parametrize("via", VIAS)
async def test_a_timed_hang_holds_this_and_later_requests(via: str) -> None:
    """``hang_ms``: the call and one made meanwhile are answered only once it is over."""
    rules = [calls(1, {"hang_ms": 400})]
    async with upstream() as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("auto") as client:
                start = trio.current_time()
                done: list[float] = []

                async def call(text: str) -> None:
                    assert text_of(await client.call_tool("echo", {"text": text})) == text
                    done.append(trio.current_time() - start)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call, "first")
                    await c.watch.wait("hang")
                    nursery.start_soon(call, "meanwhile")
    assert len(done) == 2 and min(done) >= 0.4


async def test_a_hang_answers_nothing_more() -> None:
    """``hang`` without a time: neither the call nor any later one is answered."""
    async with upstream() as url, chaos("proxy", [calls(2, "hang")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("auto") as client:
                await client.call_tool("echo", {"text": "1"})
                for text in ("2", "3"):
                    with pytest.raises(MCPError, match="timed out"):
                        await client.call_tool("echo", {"text": text}, read_timeout_seconds=0.3)


@pytest.mark.parametrize("via", VIAS)
async def test_slow_start_delays_the_first_requests(via: str) -> None:
    rules = [{"when": {"times": 1}, "do": {"slow_start_ms": 400}}]
    async with upstream() as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            start = trio.current_time()
            async with c.client("auto") as client:
                await client.call_tool("echo", {"text": "x"})
                assert trio.current_time() - start >= 0.4
    assert c.watch.actions() == ["slow_start"]


# -- duplicate, reorder -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_duplicate_request_runs_twice(via: str, mode: str, tmp_path: Path) -> None:
    count = tmp_path / "count"
    async with upstream(count_file=count) as url, chaos(via, [calls(1, "duplicate")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
                assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
    assert count_executions(count) == {"echo": 2, "add": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_duplicate_answer_is_delivered_twice(mode: str, tmp_path: Path) -> None:
    """The answer comes twice (a JSON answer becomes an event stream to carry both); the
    client takes the first, the call ran once."""
    count = tmp_path / "count"
    async with upstream(count_file=count) as url:
        async with chaos("transport", [calls(1, "duplicate", "to_client")], url) as c:
            seen = await _raw_answer(c, mode)
    assert seen.count('"text":"x"') == 2
    assert count_executions(count) == {"echo": 1}


async def _raw_answer(c: Chaos, mode: str) -> str:
    """The body our transport gives the SDK for one ``echo`` call."""
    bodies: list[str] = []

    async def keep(response: httpx2.Response) -> None:
        if response.request.method == "POST" and b"tools/call" in response.request.content:
            await response.aread()  # kept: the SDK reads the same body afterwards
            bodies.append(response.text)

    transport = FaultyHTTPTransport(httpx2.AsyncHTTPTransport(), c.engine)
    with trio.fail_after(DEADLINE):
        async with mcp_client(transport, c.url, mode, hooks=[keep]) as client:
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
    [body] = bodies
    return body


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_reorder_lets_the_next_request_overtake(via: str, mode: str, tmp_path: Path) -> None:
    """The first call is held until the second has gone: the server runs them the other
    way round."""
    count = tmp_path / "count"
    async with upstream(count_file=count) as url, chaos(via, [calls(1, "reorder")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client, trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "echo", {"text": "held"})
                await c.watch.wait("reorder")
                assert text_of(await client.call_tool("add", {"a": 2, "b": 2})) == "4"
    assert count.read_text().split() == ["add", "echo"]


@pytest.mark.parametrize("via", VIAS)
async def test_reorder_swaps_events_of_a_stream(via: str) -> None:
    """A progress event held back goes after the next one."""
    rules = [
        {
            "when": {"method": "notifications/progress", "direction": "to_client", "nth": 1},
            "do": "reorder",
        }
    ]
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with upstream() as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("legacy") as client:
                await client.call_tool(
                    "sleep", {"seconds": 0.03, "steps": 3}, progress_callback=on_progress
                )
    assert progress == [2, 1, 3]


async def test_reorder_lets_a_lone_answer_go_after_the_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With nothing to overtake it, a held answer goes after the hold."""
    monkeypatch.setattr(faults_http, "REORDER_HOLD_S", 0.2)
    async with upstream() as url:
        for mode in MODES:
            async with chaos("transport", [calls(1, "reorder", "to_client")], url) as c:
                with trio.fail_after(DEADLINE):
                    async with c.client(mode) as client:
                        start = trio.current_time()
                        assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
                        assert trio.current_time() - start >= 0.2


# -- garbage_line, truncate, close_stream, list_changed ---------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_garbage_answer_is_a_parse_error(via: str, mode: str, tmp_path: Path) -> None:
    count = tmp_path / "count"
    rules = [calls(1, "garbage_line", "to_client")]
    async with upstream(count_file=count) as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="Failed to parse") as garbled:
                    await client.call_tool("echo", {"text": "1"})
                assert text_of(await client.call_tool("echo", {"text": "2"})) == "2"
    assert garbled.value.error.code == mcp_types.PARSE_ERROR
    assert count_executions(count) == {"echo": 2}


async def test_garbage_request_goes_before_the_message(tmp_path: Path) -> None:
    """The server gets a body that is not JSON-RPC first (and refuses it), then the call,
    whose answer the client gets."""
    count = tmp_path / "count"
    async with upstream(count_file=count) as url:
        async with chaos("transport", [calls(1, "garbage_line")], url) as c:
            recorder = Recorder(httpx2.AsyncHTTPTransport())
            transport = FaultyHTTPTransport(recorder, c.engine)
            with trio.fail_after(DEADLINE):
                async with mcp_client(transport, url, "legacy") as client:
                    assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
    posts = [(status, body) for method, body, status in recorder.seen if method == "POST"]
    garbage_at = next(i for i, (_, body) in enumerate(posts) if body.startswith(b"chaos: garbage"))
    assert posts[garbage_at][0] == 400
    assert b'"tools/call"' in posts[garbage_at + 1][1]
    assert count_executions(count) == {"echo": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_truncated_request_is_the_servers_parse_error(mode: str, tmp_path: Path) -> None:
    count = tmp_path / "count"
    async with upstream(count_file=count) as url, chaos("proxy", [calls(1, "truncate")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="Parse error") as cut:
                    await client.call_tool("echo", {"text": "1"})
                assert text_of(await client.call_tool("echo", {"text": "2"})) == "2"
    assert cut.value.error.code == mcp_types.PARSE_ERROR
    assert count_executions(count) == {"echo": 1}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_truncated_answer_is_a_parse_error(via: str, mode: str, tmp_path: Path) -> None:
    count = tmp_path / "count"
    rules = [calls(1, "truncate", "to_client")]
    async with upstream(count_file=count) as url, chaos(via, rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="Failed to parse") as cut:
                    await client.call_tool("echo", {"text": "1"})
    assert cut.value.error.code == mcp_types.PARSE_ERROR
    assert count_executions(count) == {"echo": 1}


@pytest.mark.parametrize("direction", ["to_server", "to_client"])
@pytest.mark.parametrize("mode", MODES)
async def test_close_stream_ends_the_answer_stream(
    mode: str, direction: str, tmp_path: Path
) -> None:
    """The stream the answer travels on ends without it: the SDK says so at once. Going
    to the server, the call is not forwarded."""
    count = tmp_path / "count"
    rules = [calls(1, "close_stream", direction)]
    async with upstream(count_file=count) as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="SSE stream ended without a response") as ended:
                    await client.call_tool("echo", {"text": "1"})
                assert text_of(await client.call_tool("echo", {"text": "2"})) == "2"
    assert ended.value.error.code == mcp_types.CONNECTION_CLOSED
    assert count_executions(count) == {"echo": 2 if direction == "to_client" else 1}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("via", VIAS)
async def test_list_changed_reaches_the_client(via: str, mode: str) -> None:
    """A tools/list_changed notification comes with the call's answer, before it."""
    seen: list[str] = []

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            seen.append("list_changed")

    async with upstream() as url, chaos(via, [calls(1, "list_changed")], url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode, message_handler=handler) as client:
                assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
    assert seen == ["list_changed"]


async def test_the_get_stream_carries_faults_too() -> None:
    """A session's GET stream: a list_changed notification on it, duplicated."""
    seen: list[str] = []
    rules = [
        {
            "when": {"method": "notifications/tools/list_changed", "direction": "to_client"},
            "do": "duplicate",
        }
    ]

    both = trio.Event()

    async def handler(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            seen.append("list_changed")
            if len(seen) == 2:
                both.set()

    async with upstream("changing") as url, chaos("proxy", rules, url) as c:
        with trio.fail_after(DEADLINE):
            async with c.client("legacy", message_handler=handler) as client:
                await client.call_tool("add_tool", {"name": "extra"})
                await both.wait()
    assert seen == ["list_changed", "list_changed"]


# -- the proxy and the command ----------------------------------------------------------


async def test_the_proxy_refuses_an_upstream_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        await run_http_proxy(load_plan([]), "127.0.0.1", 0, "ftp://example.invalid/")


async def test_the_proxy_answers_502_for_an_upstream_that_is_down() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    async with chaos("proxy", [], gone) as c, httpx2.AsyncClient() as http:
        with trio.fail_after(DEADLINE):
            answer = await http.post(c.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 502
    assert "cannot reach the upstream" in answer.text


async def test_other_paths_pass_through_the_proxy_without_faults() -> None:
    """Only the MCP endpoint carries the plan: another path is the upstream's own answer
    (a 404 for this server), not the plan's 503."""
    rules = [{"when": {}, "do": {"http_status": 503}}]
    async with upstream() as url, chaos("proxy", rules, url) as c:
        elsewhere = c.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource"
        async with httpx2.AsyncClient() as http:
            with trio.fail_after(DEADLINE):
                assert (await http.get(elsewhere)).status_code == 404
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                assert (await http.post(c.url, json=ping)).status_code == 503
    assert c.watch.actions() == ["http_status"]


@asynccontextmanager
async def chaos_listen(
    rules: list[dict[str, object]], url: str, tmp_path: Path
) -> AsyncIterator[tuple[str, trio.Process]]:
    """``mcp-supervisor chaos --listen 127.0.0.1:0 --upstream URL`` as a process of its own,
    with ``rules``, ``--faults-log tmp_path/faults.json`` and ``--report tmp_path/report``:
    its MCP URL, once it said it on stderr, and the process (killed if still running at
    the end of the block)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(rules))
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "supervisor",
            "chaos",
            "--plan",
            str(plan),
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            url,
            "--faults-log",
            str(tmp_path / "faults.json"),
            "--report",
            str(tmp_path / "report"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    try:
        assert process.stderr is not None
        with trio.fail_after(60):
            said = b""
            while b"listening on" not in said or not said.endswith(b"\n"):
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"chaos ended before listening: {said!r}"
                said += chunk
        line = said.decode().splitlines()[0]
        assert line.endswith(f" -> {url}")
        proxy = line.split("listening on ", 1)[1].split(" ")[0]
        assert proxy.startswith("http://127.0.0.1:") and proxy.endswith("/mcp")
        yield proxy, process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_chaos_listen_proxies_until_sigterm(tmp_path: Path) -> None:
    """``mcp-supervisor chaos --listen 127.0.0.1:0 --upstream URL``: says its URL on
    stderr, injects the plan's faults (logged with --faults-log), exits 143 on SIGTERM,
    and then writes the report of the calls (--report)."""
    rules = [calls(1, {"error": {"code": -32042, "message": "from chaos"}})]
    async with upstream() as url, chaos_listen(rules, url, tmp_path) as (proxy, process):
        with trio.fail_after(60):
            async with Client(proxy) as client:
                with pytest.raises(MCPError, match="from chaos"):
                    await client.call_tool("echo", {"text": "1"})
                assert text_of(await client.call_tool("echo", {"text": "2"})) == "2"
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 143
    assert not await trio.Path(f"/proc/{process.pid}").exists()
    [fault] = json.loads((tmp_path / "faults.json").read_text())
    assert fault["action"] == "error" and fault["tool"] == "echo"
    report = json.loads((tmp_path / "report" / "chaos.json").read_text())
    assert [c["outcome"] for c in report["history"]["calls"]] == ["fail", "ok"]
    assert (tmp_path / "report" / "chaos.html").exists()


#: Where the TypeScript SDK is installed for the next test: a folder with
#: ``node_modules/@modelcontextprotocol/sdk`` (``npm install @modelcontextprotocol/sdk``).
TS_SDK = "MCP_SUPERVISOR_TS_SDK"

#: Calls echo COUNT times through URL with the TypeScript SDK's client, in one session;
#: a JSON line per call: ``{"ok": text}`` or ``{"error": message}``.
TS_CALLS = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const [url, count] = process.argv.slice(2);
const client = new Client({ name: "chaos-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
for (let i = 1; i <= Number(count); i++) {
  try {
    const result = await client.callTool({ name: "echo", arguments: { text: String(i) } });
    console.log(JSON.stringify({ ok: result.content[0].text }));
  } catch (error) {
    console.log(JSON.stringify({ error: String(error?.message ?? error) }));
  }
}
await client.close();
"""


def typescript_sdk() -> Path | None:
    """The folder ``$MCP_SUPERVISOR_TS_SDK`` names, if it holds the TypeScript SDK and
    ``node`` is on the path."""
    folder = os.environ.get(TS_SDK)
    if not folder or shutil.which("node") is None:
        return None
    root = Path(folder)
    return root if (root / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir() else None


@pytest.mark.skipif(
    typescript_sdk() is None,
    reason=f"needs node and ${TS_SDK}: a folder where @modelcontextprotocol/sdk is installed",
)
async def test_chaos_listen_reports_the_typescript_clients_calls(tmp_path: Path) -> None:
    """The issue's run as reported, with the TypeScript SDK's client: a 503 on the 3rd
    call, the session expired on the 6th, and the 12 calls after it answered 404 by the
    upstream. Every failure ends before the next call; the 404s are "fail", never run;
    both faults are the one server's."""
    sdk = typescript_sdk()
    assert sdk is not None
    script = tmp_path / "calls.mjs"
    script.write_text(TS_CALLS)
    (tmp_path / "node_modules").symlink_to(sdk / "node_modules")
    count = tmp_path / "count"
    rules = [calls(3, {"http_status": 503}), calls(6, "expire_session")]
    async with upstream("echo", count_file=count) as url:
        async with chaos_listen(rules, url, tmp_path) as (proxy, process):
            with trio.fail_after(120):
                done = await trio.run_process(
                    ["node", str(script), proxy, "18"], capture_stdout=True, capture_stderr=True
                )
                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 143
        server = url.split("/")[2]
    said = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [next(iter(s)) for s in said] == ["ok", "ok", "error", "ok", "ok"] + ["error"] * 13
    assert count_executions(count) == {"echo": 4}
    report = json.loads((tmp_path / "report" / "chaos.json").read_text())
    records = report["history"]["calls"]
    assert [r["outcome"] for r in records] == ["ok", "ok", "fail", "ok", "ok"] + ["fail"] * 13
    for record, following in zip(records, records[1:], strict=False):
        assert record["ended_at"] <= following["invoked_at"], record
    assert all("HTTP 404" in r["error"] for r in records[5:])
    tally = report["verdict"]["servers"][server]
    assert (tally["failed"], tally["indefinite"], tally["faults"]) == (14, 0, 2)
    assert not any("named no server" in note for note in report["verdict"]["notes"])


async def test_chaos_listen_reports_each_call_as_it_ended(tmp_path: Path) -> None:
    """The issue's run, with the SDK's client in a session: a 503 on the 3rd call, the
    session expired on the 6th, then the upstream's own 404 "Session not found" for the
    session's later calls. Each failure ends when the client got it (before its next
    call), not when the proxy stops; the 404s are "fail" (refused, never run: the count
    file says so), not "indefinite"; and the proxy's one server, named by the upstream's
    host:port, owns both faults, in the JSON and in the page."""
    count = tmp_path / "count"
    rules = [calls(3, {"http_status": 503}), calls(6, "expire_session")]
    outcomes: list[str] = []
    async with upstream("echo", count_file=count) as url:
        async with chaos_listen(rules, url, tmp_path) as (proxy, process):
            with trio.fail_after(60):
                async with Client(proxy, mode="legacy") as client:
                    for i in range(1, 9):
                        try:
                            outcomes.append(
                                text_of(await client.call_tool("echo", {"text": f"{i}"}))
                            )
                        except MCPError as exc:
                            outcomes.append(exc.error.message)
                async with Client(proxy, mode="legacy") as fresh:  # a new session works
                    outcomes.append(text_of(await fresh.call_tool("echo", {"text": "9"})))
                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 143
        server = url.split("/")[2]
    assert [o if o.isdigit() else "error" for o in outcomes] == [
        "1",
        "2",
        "error",
        "4",
        "5",
        "error",
        "error",
        "error",
        "9",
    ]
    assert all("Session not found" in o for o in outcomes[5:8])
    assert count_executions(count) == {"echo": 5}  # 1, 2, 4, 5 and 9 ran; no other
    report = json.loads((tmp_path / "report" / "chaos.json").read_text())
    records = report["history"]["calls"]
    assert [r["outcome"] for r in records] == [
        "ok",
        "ok",
        "fail",
        "ok",
        "ok",
        "fail",
        "fail",
        "fail",
        "ok",
    ]
    for record, following in zip(records, records[1:], strict=False):
        assert record["ended_at"] <= following["invoked_at"], record
    assert [r["sent_at"] is not None for r in records] == [
        True,
        True,
        False,
        True,
        True,
        False,
        True,
        True,
        True,
    ]
    assert "HTTP 503" in records[2]["error"]
    for record in records[5:8]:
        assert "HTTP 404" in record["error"] and "Session not found" in record["error"]
    verdict = report["verdict"]
    assert list(verdict["servers"]) == [server]
    tally = verdict["servers"][server]
    assert (tally["calls"], tally["ok"], tally["failed"], tally["indefinite"]) == (9, 5, 4, 0)
    assert tally["faults"] == 2
    assert not any("named no server" in note for note in verdict["notes"])
    assert {f["server"] for f in report["faults"]} == {server}
    page = (tmp_path / "report" / "chaos.html").read_text()
    row = server_row(page, server)
    assert (row["calls"], row["failed"], row["indefinite"], row["faults"]) == ("9", "4", "0", "2")
    assert "named no server" not in page and "Faults naming no server" not in page


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--listen", "127.0.0.1:0"], "give both --listen"),
        (["--upstream", "http://127.0.0.1:9/mcp"], "give both --listen"),
        (
            ["--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/mcp", "--", "true"],
            "runs no command",
        ),
        (["--listen", "127.0.0.1:0", "--upstream", "file:///tmp/x"], "http:// or https://"),
        (["--", "true"], "applies only to HTTP"),
    ],
)
def test_chaos_listen_usage_errors(
    args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 with a reason; an HTTP-only action is refused for a stdio server only."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([calls(1, {"http_status": 503})]))
    before = structlog.get_config()  # main() logs to this test's stderr, closed after it
    try:
        assert main(["chaos", "--plan", str(plan), *args]) == 2
    finally:
        structlog.configure(**before)
    assert said in capsys.readouterr().err


# -- the proxy's call history ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_proxy_records_the_calls_as_the_client_lived_them(
    mode: str, tmp_path: Path
) -> None:
    """ok for an answer that reached the client (``is_error`` for the tool's own failure),
    fail for an injected error (never sent), and info for a call the server ran whose
    answer was dropped on the way back, as soon as the client gave up on it (before its
    next call, not when the proxy stops)."""
    count = tmp_path / "count"
    rules = [
        calls(2, {"error": {"code": -32042, "message": "injected by the plan"}}),
        calls(2, "drop", "to_client"),  # the 2nd answer from the server: the 3rd call's
    ]
    history = CallHistory()
    async with upstream("rich", count_file=count) as url:
        async with chaos("proxy", rules, url, history=history) as c:
            with trio.fail_after(DEADLINE):
                async with c.client(mode) as client:
                    await client.call_tool("echo", {"text": "1"})
                    with pytest.raises(MCPError, match="injected by the plan"):
                        await client.call_tool("add", {"a": 1, "b": 2})
                    with pytest.raises(MCPError, match="timed out"):
                        await client.call_tool("echo", {"text": "3"}, read_timeout_seconds=0.3)
                    assert text_of(await client.call_tool("echo", {"text": "4"})) == "4"
                    failed = await client.call_tool("fail", {"message": "no luck"})
                    assert failed.is_error
            assert history.calls[2].outcome == "info"  # the client gave up on it
        host_port = url.split("/")[2]
    records = history.calls
    assert [r.tool for r in records] == ["echo", "add", "echo", "echo", "fail"]
    assert [r.outcome for r in records] == ["ok", "fail", "info", "ok", "ok"]
    assert [r.is_error for r in records] == [False, False, False, False, True]
    assert [r.sent_at is not None for r in records] == [True, False, True, True, True]
    assert records[1].error == "MCP error -32042: injected by the plan"
    assert records[2].error is not None and "may have run it" in records[2].error
    for record, following in zip(records, records[1:], strict=False):
        assert record.ended_at is not None and record.ended_at <= following.invoked_at
    assert {r.server for r in records} == {host_port}
    assert count_executions(count) == {"echo": 3, "fail": 1}


#: What the upstream of the next test answers a call of each tool: status, content type,
#: body ({id} becomes the call's JSON-RPC id); and the outcome that answer proves.
ANSWERS: dict[str, tuple[int, str, str, str]] = {
    "session_gone": (
        404,
        "application/json",
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}',
        "fail",
    ),
    "not_acceptable": (406, "application/json", "", "fail"),
    "bad_request_text": (400, "text/plain", "bad request", "fail"),
    "unreadable": (
        200,
        "application/json",
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
        "fail",
    ),
    "error_answer": (
        200,
        "application/json",
        '{"jsonrpc":"2.0","id":{id},"error":{"code":-32603,"message":"no"}}',
        "fail",
    ),
    "crashed_while_running": (
        500,
        "application/json",
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"terminated"}}',
        "info",
    ),
    "bad_gateway_text": (502, "text/plain", "upstream of upstream gone", "info"),
    "answered": (
        200,
        "application/json",
        '{"jsonrpc":"2.0","id":{id},"result":{"content":[]}}',
        "ok",
    ),
}


async def answering_app(scope: dict[str, object], receive: object, send: object) -> None:
    """An ASGI upstream answering each tools/call as :data:`ANSWERS` says for its tool."""
    from supervisor._serving import lifespan, respond

    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()  # type: ignore[operator]
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = json.loads(body)
    status, content_type, text, _ = ANSWERS[request["params"]["name"]]
    answer = text.replace("{id}", json.dumps(request["id"])).encode()
    await respond(send, status, answer, content_type.encode())


async def test_the_proxy_judges_an_answer_by_what_it_proves() -> None:
    """An answer that refuses the request before it runs — any 4xx (a 404 "Session not
    found" among them), a JSON-RPC error naming no id — and a JSON-RPC error answer are
    "fail", though the request reached the server; a 5xx without an answer to the call
    may come after it ran: "info", the conservative word, as for a lost connection."""
    history = CallHistory()
    async with trio.open_nursery() as nursery:
        served = await start_http(nursery, answering_app)  # type: ignore[arg-type]
        async with chaos("proxy", [], served.url, history=history) as c:
            headers = {"accept": "application/json, text/event-stream"}
            async with httpx2.AsyncClient(headers=headers) as http:
                with trio.fail_after(DEADLINE):
                    for n, tool in enumerate(ANSWERS, 1):
                        call = {"name": tool, "arguments": {}}
                        request = {
                            "jsonrpc": "2.0",
                            "id": n,
                            "method": "tools/call",
                            "params": call,
                        }
                        answer = await http.post(c.url, json=request)
                        assert answer.status_code == ANSWERS[tool][0]
                        # the outcome is known once the client has its answer
                        assert history.calls[-1].outcome == ANSWERS[tool][3], tool
        nursery.cancel_scope.cancel()
    records = {r.tool: r for r in history.calls}
    assert all(r.sent_at is not None for r in records.values())
    assert records["session_gone"].error == (
        "HTTP 404 Not Found (MCP error -32600: Session not found); refused, not run"
    )
    assert records["bad_request_text"].error == "HTTP 400 Bad Request; refused, not run"
    assert records["unreadable"].error == "MCP error -32700: Parse error; refused, not run"
    assert records["crashed_while_running"].error == (
        "HTTP 500 Internal Server Error (MCP error -32603: terminated); "
        "the call reached the server, which may have run it"
    )


class SentHistory(CallHistory):
    """A call history a test can wait on until a call reached its server."""

    def __init__(self) -> None:
        super().__init__()
        self._sent = trio.Event()

    def sent(self, record: CallRecord, *, deadline: float | None = None) -> None:
        super().sent(record, deadline=deadline)
        self._sent.set()
        self._sent = trio.Event()

    async def reached(self, n: int) -> CallRecord:
        """The ``n``-th call (0: the first), once it reached its server."""
        while len(self.calls) <= n or self.calls[n].sent_at is None:
            await self._sent.wait()
        return self.calls[n]


async def test_a_kill_leaves_the_call_in_flight_indefinite(tmp_path: Path) -> None:
    """A connection that dies with no answer is the truly indefinite case: the long call,
    which the server had, is "info" as soon as it broke; the call whose request the kill
    met never reached the server: "fail". Both before the proxy stops."""
    count = tmp_path / "count"
    rules = [
        {"when": {"tool": "echo"}, "do": "kill"},
    ]
    history = SentHistory()
    async with upstream(count_file=count) as url, chaos("proxy", rules, url, history=history) as c:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:

                async def long_call() -> None:
                    with pytest.raises(BaseExceptionGroup):
                        async with c.client("legacy") as client:
                            await client.call_tool("sleep", {"seconds": 60})

                nursery.start_soon(long_call)
                await history.reached(0)  # the upstream has the long call
                with pytest.raises(BaseExceptionGroup):
                    async with c.client("legacy") as client:
                        await client.call_tool("echo", {"text": "crash"})
            by_tool = {r.tool: r for r in history.calls}
            assert (by_tool["sleep"].outcome, by_tool["echo"].outcome) == ("info", "fail")
    assert "may have run it" in (by_tool["sleep"].error or "")
    assert "never reached the server" in (by_tool["echo"].error or "")
    assert "echo" not in count_executions(count)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_given_up_on_while_held_back(mode: str, tmp_path: Path) -> None:
    """The client gives up on a call the plan holds back (a delay). It ends then, before
    the client's next call, as what became of it says: in a session the cancellation is
    a request of its own, the held one reaches the server after all and runs: "info";
    without one (2026-07-28) the client closes the exchange, which is never forwarded:
    "fail"."""
    count = tmp_path / "count"
    rules = [calls(1, {"delay_ms": 1500})]
    history = SentHistory()
    async with upstream(count_file=count) as url, chaos("proxy", rules, url, history=history) as c:
        with trio.fail_after(DEADLINE):
            async with c.client(mode) as client:
                with pytest.raises(MCPError, match="timed out"):
                    await client.call_tool("echo", {"text": "1"}, read_timeout_seconds=0.3)
                assert text_of(await client.call_tool("echo", {"text": "2"})) == "2"
                if mode == "legacy":
                    await history.reached(0)  # the held request goes on
    first, second = history.calls
    assert first.ended_at is not None and first.ended_at <= second.invoked_at
    if mode == "legacy":
        assert (first.outcome, count_executions(count)) == ("info", {"echo": 2})
        assert first.sent_at is not None and first.sent_at > second.invoked_at
        assert first.error == (
            "the client gave up on it (notifications/cancelled); "
            "the call reached the server, which may have run it"
        )
    else:
        assert (first.outcome, count_executions(count)) == ("fail", {"echo": 1})
        assert first.sent_at is None
        assert first.error is not None and first.error.startswith("the exchange was broken off")
        assert first.error.endswith("the call never reached the server")
