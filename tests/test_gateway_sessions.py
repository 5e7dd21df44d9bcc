"""The HTTP gateway against a client that abandons sessions, and the smaller holes of its
front: idle sessions expire, their number is bounded (the longest idle closed first, a
session in use never), and both show in /metrics; the bearer scheme in any case; the
probes answer only for the gateway's own Host on loopback; the read-only routes answer
GET only; a request head over 16 KiB is 431 however it arrives. A real gateway on
127.0.0.1, real HTTP clients and raw sockets."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import httpx2
import trio

from supervisor import open_supervisor
from supervisor.dashboard import serve_dashboard
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.testing.servers import make_server
from tests.test_replicas import INITIALIZE, LIST_TOOLS, start

TOKEN = "test-gateway-token-0123456789"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@asynccontextmanager
async def gateway(**options: object) -> AsyncIterator[HttpGatewayInfo]:
    """An echo server behind an in-process HTTP gateway on 127.0.0.1, with ``options``
    for :func:`serve_http`."""
    apps = {"e": make_server("echo")}
    async with open_supervisor({"mcpServers": {}}, apps=apps) as sup, trio.open_nursery() as n:
        gw = Gateway(sup)
        await n.start(gw.run)
        yield await n.start(partial(serve_http, gw, "127.0.0.1", 0, token=TOKEN, **options))
        n.cancel_scope.cancel()


async def open_session(http: httpx2.AsyncClient, info: HttpGatewayInfo) -> str:
    """Initialize a session and return its id (then walk away from it, as the attack did)."""
    opened = await http.post(info.url, json=INITIALIZE, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = await http.post(info.url, json=INITIALIZED, headers=in_session(session))
    assert done.status_code == 202, done.text
    return session


def in_session(session: str) -> dict[str, str]:
    return {**HEADERS, "Mcp-Session-Id": session}


async def metric(http: httpx2.AsyncClient, info: HttpGatewayInfo, name: str) -> float:
    text = (await http.get(info.url.removesuffix("/mcp") + "/metrics")).text
    found = re.search(rf"^mcp_supervisor_gateway_sessions{name} (\S+)$", text, re.M)
    assert found, text
    return float(found.group(1))


async def until_metric(
    http: httpx2.AsyncClient, info: HttpGatewayInfo, name: str, value: float
) -> None:
    """Wait (at most 30 s) until /metrics shows ``value`` for ``name``: the gateway's
    idle timer runs in its own tasks, with nothing a test could wait on but its effect."""
    with trio.fail_after(30):
        while True:
            if await metric(http, info, name) == value:
                return
            await trio.sleep(0.05)


async def test_abandoned_sessions_expire_and_one_in_use_does_not() -> None:
    """Sessions opened and left (no DELETE) are closed after --session-idle: /metrics counts
    them and their ids answer 404, so a returning client opens a new one. A session
    with its GET stream open is in use, and is kept past the idle time."""
    async with gateway(session_idle=0.5) as info, httpx2.AsyncClient(timeout=30) as http:
        listening = await open_session(http, info)
        async with http.stream("GET", info.url, headers=in_session(listening)) as stream:
            assert stream.status_code == 200
            left = [await open_session(http, info) for _ in range(3)]
            assert await metric(http, info, "") == 4
            await until_metric(http, info, "_expired_total", 3)
            assert await metric(http, info, "") == 1
            for session in left:
                gone = await http.post(info.url, json=LIST_TOOLS, headers=in_session(session))
                assert gone.status_code == 404 and "Session not found" in gone.text
            alive = await http.post(info.url, json=LIST_TOOLS, headers=in_session(listening))
            assert alive.status_code == 200 and "e_echo" in alive.text
        assert await metric(http, info, "_idle_timeout_seconds") == 0.5


async def test_the_session_count_is_bounded_the_longest_idle_closed_first() -> None:
    """50 sessions opened and abandoned against a bound of 20: never more than 20 open,
    the oldest closed first (404), the newest served; with every open session in use, a
    new one is refused with 503 and nothing in use is closed."""
    async with gateway(max_sessions=20) as info, httpx2.AsyncClient(timeout=30) as http:
        opened = [await open_session(http, info) for _ in range(50)]
        assert await metric(http, info, "") == 20
        assert await metric(http, info, "_evicted_total") == 30
        assert await metric(http, info, "_max") == 20
        oldest = await http.post(info.url, json=LIST_TOOLS, headers=in_session(opened[0]))
        assert oldest.status_code == 404
        newest = await http.post(info.url, json=LIST_TOOLS, headers=in_session(opened[-1]))
        assert newest.status_code == 200 and "e_echo" in newest.text
    async with gateway(max_sessions=2) as info, httpx2.AsyncClient(timeout=30) as http:
        one, two = [await open_session(http, info) for _ in range(2)]
        async with (
            http.stream("GET", info.url, headers=in_session(one)) as first,
            http.stream("GET", info.url, headers=in_session(two)) as second,
        ):
            assert first.status_code == second.status_code == 200
            refused = await http.post(info.url, json=INITIALIZE, headers=HEADERS)
            assert refused.status_code == 503 and "Too many open sessions" in refused.text
            assert await metric(http, info, "_refused_total") == 1
            assert await metric(http, info, "_evicted_total") == 0
            for session in (one, two):
                kept = await http.post(info.url, json=LIST_TOOLS, headers=in_session(session))
                assert kept.status_code == 200


async def test_the_bearer_scheme_is_case_insensitive() -> None:
    """RFC 7235: ``bearer`` and ``BEARER`` name the same scheme; another scheme with the
    right token, or the token alone, is still 401."""
    async with gateway() as info, httpx2.AsyncClient(timeout=30) as http:
        for scheme in ("bearer", "BEARER", "Bearer"):
            headers = {**HEADERS, "Authorization": f"{scheme} {TOKEN}"}
            answer = await http.post(info.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 200, (scheme, answer.text)
        for wrong in (f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}"):
            headers = {**HEADERS, "Authorization": wrong}
            answer = await http.post(info.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 401, wrong


async def test_probes_answer_only_for_their_host_and_read_only_routes_only_get() -> None:
    """On loopback a DNS-rebinding page (an attacker's name pointing at 127.0.0.1) reads
    neither /healthz nor /metrics (421), while the gateway's own names and addresses
    are served; POST, PUT or DELETE on a read-only route is 405 with ``Allow: GET``."""
    async with gateway() as info, httpx2.AsyncClient(timeout=30) as http:
        base = info.url.removesuffix("/mcp")
        for path in ("/healthz", "/readyz", "/metrics", "/status", "/tools", "/mcp"):
            for host in (f"evil.example:{info.port}", "rebound.example"):
                rebound = await http.get(base + path, headers={**HEADERS, "Host": host})
                assert rebound.status_code == 421, (path, host, rebound.text)
                assert "e_echo" not in rebound.text and '"e"' not in rebound.text
        # its own names and addresses, on any port: a balancer on this machine sends its own
        for host in (f"127.0.0.1:{info.port}", f"localhost:{info.port}", "127.0.0.1:8443"):
            served = await http.get(base + "/metrics", headers={"Host": host})
            assert served.status_code == 200 and "mcp_supervisor_server_up" in served.text
        # an HTTP/1.0 health check sends no Host (haproxy's does): no browser page, served
        probe = await raw(info.port, b"GET /readyz HTTP/1.0\r\n\r\n")
        assert probe.startswith(b"HTTP/1.1 200 "), probe[:200]
        for path in ("/metrics", "/healthz", "/readyz", "/status", "/tools", "/events"):
            for method in ("POST", "PUT", "DELETE"):
                answer = await http.request(method, base + path, headers=HEADERS)
                assert answer.status_code == 405, (method, path, answer.status_code)
                assert answer.headers["allow"] == "GET"


async def test_each_request_passes_host_route_method_origin_then_token_in_that_order() -> None:
    """The front's checks come in one order, whatever the route: an unknown path is 404
    and a wrong method 405 before any token is asked for (neither says more); a route
    behind the token refuses another origin (403) before it looks at the token, and a
    missing token (401) before its handler runs; the probes need no token."""
    async with gateway() as info, httpx2.AsyncClient(timeout=30) as http:
        base = info.url.removesuffix("/mcp")
        bare = {"Accept": "application/json"}
        unknown = await http.get(base + "/nowhere", headers=bare)
        assert unknown.status_code == 404 and "/mcp" in unknown.json()["error"]
        wrong = await http.post(base + "/status", headers=bare)
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET"
        assert wrong.json() == {"error": "/status answers GET only"}
        for path in ("/status", "/mcp"):
            cross = {**HEADERS, "Origin": "https://evil.example"}
            refused = await http.get(base + path, headers=cross)
            assert refused.status_code == 403, (path, refused.text)
            tokenless = await http.get(base + path, headers=bare)
            assert tokenless.status_code == 401 and "www-authenticate" in tokenless.headers
        assert (await http.get(base + "/healthz", headers=bare)).status_code == 200
        assert (await http.get(base + "/status", headers=HEADERS)).status_code == 200


async def raw(port: int, data: bytes) -> bytes:
    """Send ``data`` in one write, end our side, and return all the server answers."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        await stream.send_eof()
        received = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                received += chunk
        return received


def head(port: int, size: int) -> bytes:
    """A GET /healthz whose head, sent whole, is ``size`` bytes."""
    start = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: ".encode()
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


async def test_a_head_over_16_kib_is_431_even_when_it_arrives_in_one_read() -> None:
    """Heads of 17 KB to 65 KB sent in one write (which the HTTP server reads whole, and
    once parsed whatever their size) are 431 on the gateway and on the dashboard; a head
    just under 16 KiB is served; a body over 4 MiB to /mcp is 413."""
    async with gateway() as info:
        assert (await raw(info.port, head(info.port, 16_000))).startswith(b"HTTP/1.1 200 ")
        for size in (17_000, 40_000, 65_000):
            assert (await raw(info.port, head(info.port, size))).startswith(b"HTTP/1.1 431 ")
        async with httpx2.AsyncClient(timeout=30) as http:
            body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"a" * 2**22 + b'"}'
            big = await http.post(info.url, content=body, headers=HEADERS)
            assert big.status_code == 413, big.text
    async with open_supervisor({"mcpServers": {}}) as sup, trio.open_nursery() as nursery:
        dashboard = await nursery.start(serve_dashboard, sup, "127.0.0.1", 0)
        ok = await raw(dashboard.port, head(dashboard.port, 16_000))
        assert ok.startswith(b"HTTP/1.1 200 "), ok[:200]
        for size in (17_000, 40_000, 65_000):
            answer = await raw(dashboard.port, head(dashboard.port, size))
            assert answer.startswith(b"HTTP/1.1 431 "), (size, answer[:200])
        nursery.cancel_scope.cancel()


async def test_serve_takes_session_idle_and_max_sessions(tmp_path: Path) -> None:
    """``serve --http --session-idle S --max-sessions N``: /metrics shows both, and a
    session left alone expires after S; a value that is no positive number exits 2."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    serve = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    options = ["--http", "127.0.0.1:0", "--session-idle", "0.5", "--max-sessions", "7"]
    async with (
        trio.open_nursery() as nursery,
        start(nursery, "serve", serve + options, env=env) as child,
    ):
        url = (await child.wait_for(rb"gateway at (\S+)")).group(1).decode()
        info = HttpGatewayInfo(url=url, host="127.0.0.1", port=0, token=TOKEN)
        async with httpx2.AsyncClient(timeout=30) as http:
            assert await metric(http, info, "_max") == 7
            assert await metric(http, info, "_idle_timeout_seconds") == 0.5
            session = await open_session(http, info)
            await until_metric(http, info, "_expired_total", 1)
            gone = await http.post(url, json=LIST_TOOLS, headers=in_session(session))
            assert gone.status_code == 404
        nursery.cancel_scope.cancel()
    for bad in (["--session-idle", "0"], ["--session-idle", "inf"], ["--max-sessions", "0"]):
        with trio.fail_after(60):
            done = await trio.run_process(
                [*serve, "--http", "127.0.0.1:0", *bad], capture_stderr=True, check=False
            )
        assert done.returncode == 2 and b"not a positive" in done.stderr, (bad, done.stderr)


async def ask(app: object, path: str, headers: dict[str, str], method: str = "GET") -> int:
    """One request straight to an ASGI app; the status it answered."""
    statuses: list[int] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])  # type: ignore[arg-type]

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    await app(scope, receive, send)  # type: ignore[operator]
    return statuses[0]


async def test_beyond_loopback_anyone_reads_the_probes_and_only_the_token_acts() -> None:
    """Bound beyond loopback the gateway cannot know every name it is reached by, so the
    Host is not checked (what gateway.md's table says): /healthz, /readyz and /metrics
    answer any Host; /status, /tools and /mcp need the token whatever the Host; another
    Origin is 403 even with it. The front as serve_http builds it for such a host."""
    from supervisor.gateway._http import _Front

    async with open_supervisor({"mcpServers": {}}) as sup, trio.open_nursery() as nursery:
        gw = Gateway(sup)
        await nursery.start(gw.run)

        async def never(scope: object, receive: object, send: object) -> None:
            raise AssertionError("reached the MCP app without the token")

        front = _Front(never, gw, TOKEN, trio.Event(), listener=None)
        for path in ("/healthz", "/readyz", "/metrics"):
            assert await ask(front, path, {"Host": "anything.example:8000"}) == 200
        for path in ("/status", "/tools", "/mcp"):
            assert await ask(front, path, {"Host": "192.0.2.10:8000"}) == 401
            wrong = {"Host": "192.0.2.10:8000", "Authorization": "Bearer nope"}
            assert await ask(front, path, wrong) == 401
        token = {"Host": "gateway.example:8000", "Authorization": f"bearer {TOKEN}"}
        assert await ask(front, "/status", token) == 200
        assert await ask(front, "/status", {**token, "Origin": "http://evil.example"}) == 403
        nursery.cancel_scope.cancel()
