"""The web dashboard: HTTP rules, the live feed, the actions' security, ``serve``, and the
page itself in a real headless Chromium against real stdio fixture servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import h11
import pytest
import trio
import trio_websocket

from supervisor.dashboard import DashboardInfo, serve_dashboard
from supervisor.dashboard._address import parse_address
from supervisor.dashboard._strips import STATUS_STATES
from supervisor.errors import ToolArgumentsInvalid, ToolCallTimeout, ToolError
from supervisor.events._catalog import make_event
from supervisor.runtime import SupervisorHandle, open_supervisor
from supervisor.server import ServerStatus
from supervisor.testing.servers import open_oauth_server, stdio_params
from supervisor.timeline._draw import STATES

from .browser import (
    CHROMIUM_FLAGS,
    REQUIRE_BROWSER,
    chromium_or_skip,
    open_browser,
)
from .probes import until

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def stdio_echo(**extra: object) -> dict[str, object]:
    command, args = stdio_params("echo")
    return {"command": command, "args": args, "approve": False, **extra}


def config(*, lazy: bool = True, initial: float = 0.2) -> dict[str, object]:
    return {
        "mcpServers": {"notes": stdio_echo(lazy=lazy), "calc": stdio_echo(lazy=lazy)},
        "supervisor": {"backoff": {"local": {"initial": initial, "jitter": 0}}},
    }


async def start(
    nursery: trio.Nursery, sup: SupervisorHandle, host: str = "127.0.0.1"
) -> DashboardInfo:
    return await nursery.start(serve_dashboard, sup, host, 0)


# ------------------------------------------------------------------ a raw HTTP client


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> object:
        return json.loads(self.body)


async def http(
    info: DashboardInfo,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> Reply:
    """One request on a fresh connection; ``Host`` defaults to the dashboard's own."""
    sent = {"Host": f"127.0.0.1:{info.port}", **(headers or {})}
    if body:
        sent["Content-Length"] = str(len(body))
    conn = h11.Connection(h11.CLIENT)
    stream = await trio.open_tcp_stream("127.0.0.1", info.port)
    async with stream:
        data = conn.send(h11.Request(method=method, target=path, headers=list(sent.items())))
        if body:
            data += conn.send(h11.Data(data=body))
        data += conn.send(h11.EndOfMessage())
        await stream.send_all(data)
        return await _reply(conn, stream)


async def raw(info: DashboardInfo, data: bytes) -> bytes:
    """Send bytes as they are and end our side; return all the server answers."""
    stream = await trio.open_tcp_stream("127.0.0.1", info.port)
    async with stream:
        await stream.send_all(data)
        await stream.send_eof()
        received = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                received += chunk
        return received


async def _reply(conn: h11.Connection, stream: trio.SocketStream) -> Reply:
    status, headers, body = 0, {}, b""
    with trio.fail_after(30):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return Reply(status, headers, body)


def origin(info: DashboardInfo) -> dict[str, str]:
    return {"Origin": f"http://127.0.0.1:{info.port}"}


def bearer(info: DashboardInfo, scheme: str = "Bearer") -> dict[str, str]:
    """The header a script acts with: the dashboard's token as a bearer token."""
    return {"Authorization": f"{scheme} {info.token}"}


async def login(info: DashboardInfo) -> dict[str, str]:
    """What a browser sends once it has visited the login URL: the session cookie it was
    given, and the dashboard's own Origin."""
    reply = await http(info, "GET", info.login_url.removeprefix(info.url[:-1]))
    assert reply.status == 303 and reply.headers["location"] == "/", reply.body
    cookie = reply.headers["set-cookie"]
    attributes = [part.strip() for part in cookie.split(";")]
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes), cookie
    assert info.token not in cookie
    return {**origin(info), "Cookie": attributes[0]}


# ------------------------------------------------------------------ HTTP rules


async def test_the_page_holds_no_secret_and_has_security_headers_and_no_cors() -> None:
    """`/` and its assets hold no token (acting needs the login); every response has the
    security headers and no CORS header, even when asked from another origin."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        page = await http(info, "GET", "/", {"Origin": "http://evil.example"})
        assert page.status == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "<table" in page.body.decode() and info.token not in page.body.decode()
        assert len(info.token) >= 40 and info.token not in repr(info)
        for path, content_type in (("/app.js", "text/javascript"), ("/app.css", "text/css")):
            asset = await http(info, "GET", path)
            assert asset.status == 200 and asset.headers["content-type"].startswith(content_type)
            assert info.token not in asset.body.decode()
        for reply in (page, asset, await http(info, "GET", "/nope")):
            csp = reply.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp
            assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert reply.headers["x-content-type-options"] == "nosniff"
            assert reply.headers["referrer-policy"] == "no-referrer"
            assert reply.headers["cache-control"] == "no-store"
            assert not [h for h in reply.headers if h.startswith("access-control-")]
        preflight = await http(
            info,
            "OPTIONS",
            "/api/servers/notes/restart",
            {
                "Origin": "http://evil.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert preflight.status == 405
        assert not [h for h in preflight.headers if h.startswith("access-control-")]
        head = await http(info, "HEAD", "/")
        assert head.status == 200 and head.body == b""
        other = await start(nursery, sup)  # a token per dashboard
        assert other.token != info.token
        nursery.cancel_scope.cancel()


async def test_healthz_is_ok_while_connected_and_503_when_none_is() -> None:
    """`/healthz`: 200 and every server's status while connected; 503 once all are stopped."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        idle = await http(info, "GET", "/healthz")
        assert idle.status == 200
        assert idle.json() == {"status": "ok", "servers": {"notes": "idle", "calc": "idle"}}
        await sup.connect_all()
        reply = await http(info, "GET", "/healthz", {"Host": f"localhost:{info.port}"})
        assert reply.status == 200 and reply.headers["content-type"] == "application/json"
        assert reply.json() == {
            "status": "ok",
            "servers": {"notes": "connected", "calc": "connected"},
        }
        await sup.stop("calc")
        assert (await http(info, "GET", "/healthz")).json()["status"] == "degraded"
        await sup.stop("notes")
        down = await http(info, "GET", "/healthz")
        assert down.status == 503
        assert down.json() == {
            "status": "unavailable",
            "servers": {"notes": "stopped", "calc": "stopped"},
        }
        nursery.cancel_scope.cancel()


async def test_readyz_is_503_while_a_required_server_is_down() -> None:
    """`/readyz`, as the gateway's: 200 while the required server is up (another being
    stopped does not matter), 503 naming it once it is stopped."""
    settings = config()
    settings["mcpServers"]["calc"]["required"] = True  # type: ignore[index]
    async with open_supervisor(settings) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        await sup.stop("notes")
        ready = await http(info, "GET", "/readyz", {"Host": f"localhost:{info.port}"})
        assert (ready.status, ready.json()) == (200, {"status": "ready"})
        await sup.stop("calc")
        down = await http(info, "GET", "/readyz")
        assert down.status == 503
        assert down.json()["required_servers_down"] == {
            "calc": {"status": "stopped", "last_error": None}
        }
        nursery.cancel_scope.cancel()


async def test_healthz_lists_a_disabled_server_without_counting_it() -> None:
    """A disabled server is in `/healthz` as "disabled" and does not make it degraded."""
    settings = config()
    settings["mcpServers"]["off"] = {**stdio_echo(), "disabled": True}  # type: ignore[index]
    async with open_supervisor(settings) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        reply = await http(info, "GET", "/healthz")
        assert reply.status == 200
        assert reply.json() == {
            "status": "ok",
            "servers": {"notes": "connected", "calc": "connected", "off": "disabled"},
        }
        nursery.cancel_scope.cancel()


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-z_]+="[^"]*",?)*\})? (-?[0-9.e+-]+)$')


def parse_prometheus(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text exposition, keyed by name and labels; fails on
    a line that is not a comment or a sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            assert line == "" or re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* ", line), line
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        name_labels, value = line.rsplit(" ", 1)
        samples[name_labels] = float(value)
    return samples


async def test_metrics_are_prometheus_text() -> None:
    """`/metrics` parses as Prometheus text and says which servers are up, and when each
    was last heard from (the call's answer, at the latest)."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        await sup.call("notes_echo", {"text": "hi"})
        answered = time.time()
        reply = await http(info, "GET", "/metrics")
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples = parse_prometheus(reply.body.decode())
        up = {k: v for k, v in samples.items() if k.startswith("mcp_supervisor_server_up{")}
        assert len(up) == 2 and set(up.values()) == {1.0}, up
        calls = [v for k, v in samples.items() if "calls" in k and 'server="notes"' in k]
        assert sum(calls) >= 1, samples
        heard = samples['mcp_supervisor_server_last_heard_timestamp_seconds{server="notes"}']
        assert answered - 60 < heard <= answered + 1, (heard, answered)
        assert samples['mcp_supervisor_server_probes_missed_total{server="notes"}'] == 0
        nursery.cancel_scope.cancel()


async def test_actions_need_the_login_the_origin_and_post() -> None:
    """An action without the login (no cookie, a wrong one, a wrong bearer token, another
    scheme, the old page token header) is 401; with the cookie but from another origin or
    without an Origin, 403; by GET, 405; none changes anything. With the login cookie and
    the Origin it restarts the server; with the bearer token (any case of the scheme, no
    Origin needed) it stops one."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        cookie = await login(info)
        pid = sup.status()["calc"].pid
        path = "/api/servers/calc/restart"
        name = cookie["Cookie"].partition("=")[0]
        wrong = ("y" if info.token.startswith("x") else "x") + info.token[1:]  # one off
        refusals = [
            ("POST", origin(info), 401),
            ("POST", {**origin(info), "Authorization": f"Bearer {wrong}"}, 401),
            ("POST", {**origin(info), "Authorization": f"Basic {info.token}"}, 401),
            ("POST", {**origin(info), "Authorization": info.token}, 401),
            ("POST", {**origin(info), "Cookie": f"{name}=guess"}, 401),
            ("POST", {**origin(info), "Cookie": f"{name}={info.token}"}, 401),
            ("POST", {**origin(info), "X-Dashboard-Token": info.token}, 401),
            ("POST", {**cookie, "Authorization": "Bearer guess"}, 401),  # a wrong one decides
            ("POST", {"Cookie": cookie["Cookie"]}, 403),  # no Origin
            ("POST", {**cookie, "Origin": "http://evil.example"}, 403),
            ("POST", {**cookie, "Origin": "null"}, 403),
            ("POST", {**cookie, "Origin": f"http://localhost:{info.port}"}, 403),
            ("POST", {**cookie, "Origin": f"https://127.0.0.1:{info.port}"}, 403),
            ("POST", {**cookie, "Origin": f"http://127.0.0.1:{info.port + 1}"}, 403),
            ("POST", {**bearer(info), "Origin": "http://evil.example"}, 403),
            ("GET", {**cookie, **bearer(info)}, 405),
            ("PUT", {**cookie, **bearer(info)}, 405),
        ]
        for method, headers, status in refusals:
            reply = await http(info, method, path, headers)
            assert reply.status == status, (method, headers, reply.body)
            assert "error" in reply.json()  # type: ignore[operator]
            if status == 401:
                assert reply.headers["www-authenticate"].startswith("Bearer ")
                assert "/login?token=" in reply.json()["error"]  # type: ignore[index]
        record = sup.status()["calc"]
        assert (record.pid, record.status) == (pid, "connected")

        accepted = await http(info, "POST", path, cookie)
        assert accepted.status == 200, accepted.body
        answer = accepted.json()
        assert isinstance(answer, dict) and answer.pop("status") in (
            "disconnected",
            "connecting",
            "connected",
        )
        assert answer == {"ok": True, "server": "calc", "action": "restart"}
        await until(lambda: sup.status()["calc"].status == "connected", 20)
        assert sup.status()["calc"].pid != pid
        stopped = await http(info, "POST", "/api/servers/calc/stop", bearer(info, "bearer"))
        assert stopped.status == 200 and sup.status()["calc"].status == "stopped"
        unknown = await http(info, "POST", "/api/servers/nope/stop", bearer(info))
        assert unknown.status == 404 and "nope" in unknown.json()["error"]  # type: ignore[index]
        wrong = await http(info, "GET", "/login?token=guess")
        assert wrong.status == 403 and "set-cookie" not in wrong.headers
        assert (await http(info, "GET", "/login")).status == 403
        nursery.cancel_scope.cancel()


async def test_another_host_name_is_refused_so_dns_rebinding_gets_nothing() -> None:
    """A Host that is not an address of ours (a rebinding attacker's name) gets 421 for
    the page, the feed, the login, the actions, the metrics and the health; `localhost`
    is ours."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        evil = {"Host": f"evil.example:{info.port}", "Origin": f"http://evil.example:{info.port}"}
        paths = ["/", "/app.js", "/metrics", "/healthz", "/readyz", "/ws", "/login?token=x"]
        requests = [("GET", path) for path in paths] + [("POST", "/api/servers/notes/stop")]
        for method, path in requests:
            reply = await http(info, method, path, {**evil, **bearer(info)})
            assert reply.status == 421, (path, reply.status)
            assert info.token not in reply.body.decode()
        wrong_port = await http(info, "GET", "/", {"Host": f"127.0.0.1:{info.port + 1}"})
        assert wrong_port.status == 421
        own = await http(info, "GET", "/", {"Host": f"localhost:{info.port}"})
        assert own.status == 200
        assert sup.status()["notes"].status == "idle"
        nursery.cancel_scope.cancel()


async def test_unknown_paths_and_bad_requests_get_4xx_and_the_server_stays_up() -> None:
    """Unknown paths are 404; garbage, oversized heads and bodies, a request cut short
    and a bad WebSocket upgrade get 4xx (never a traceback); the next request is served."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        for path in ("/nope", "/api/servers", "/api/servers/notes/explode", "/app.js/x"):
            assert (await http(info, "GET", path)).status == 404, path
        assert (await http(info, "GET", "/ws")).status == 426
        assert (await http(info, "POST", "/")).status == 405
        garbage = await raw(info, b"\x00\x01 this is not HTTP\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400 ") and b"Traceback" not in garbage
        huge_head = await raw(info, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000)
        assert huge_head.startswith(b"HTTP/1.1 431 ")
        big_body = b"x" * (65 * 1024)
        too_big = await http(info, "POST", "/api/servers/notes/stop", bearer(info), big_body)
        assert too_big.status == 413 and sup.status()["notes"].status == "idle"
        bad_length = await raw(info, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        assert bad_length.startswith(b"HTTP/1.1 400 ")
        absolute = await raw(
            info, f"GET http://127.0.0.1:{info.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        )
        assert absolute.startswith(b"HTTP/1.1 400 ")
        cut = await raw(info, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        assert cut == b"" or cut.startswith(b"HTTP/1.1 400 ")
        no_key = await http(
            info,
            "GET",
            "/ws",
            {
                **origin(info),
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
            },
        )
        assert no_key.status == 400
        old_version = await http(
            info,
            "GET",
            "/ws",
            {
                **origin(info),
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "8",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            },
        )
        # Hypercorn refuses a handshake of another version itself: 400, not 426.
        assert old_version.status == 400 and info.token not in old_version.body.decode()
        # Keep-alive: two requests on one connection.
        pipelined = await raw(
            info,
            f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{info.port}\r\n\r\n"
            f"GET /nope HTTP/1.1\r\nHost: 127.0.0.1:{info.port}\r\n"
            "Connection: close\r\n\r\n".encode(),
        )
        assert pipelined.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 404 " in pipelined
        assert (await http(info, "GET", "/")).status == 200
        nursery.cancel_scope.cancel()


# ------------------------------------------------------------------ the feed


def open_feed(
    info: DashboardInfo, headers: dict[str, str]
) -> AbstractAsyncContextManager[trio_websocket.WebSocketConnection]:
    return trio_websocket.open_websocket(
        "127.0.0.1",
        info.port,
        "/ws",
        use_ssl=False,
        extra_headers=[(k.encode(), v.encode()) for k, v in headers.items()],
        max_message_size=64 * 2**20,
    )


async def test_feed_refuses_a_foreign_origin_and_serves_its_own() -> None:
    """The WebSocket upgrade is refused (403) from another origin or without an Origin
    (the login cookie does not change that); from the dashboard's own, or with the bearer
    token and no Origin, it opens with a hello naming every server."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        cookie = (await login(info))["Cookie"]
        for headers in (
            {"Origin": "http://evil.example"},
            {},
            {"Origin": "null"},
            {"Origin": "http://evil.example", "Cookie": cookie},
            {"Origin": "http://evil.example", **bearer(info)},
        ):
            with pytest.raises(trio_websocket.ConnectionRejected) as refused:
                async with open_feed(info, headers):
                    pass
            assert refused.value.status_code == 403, headers
            assert refused.value.body is None or info.token.encode() not in refused.value.body
        for headers in (origin(info), bearer(info)):
            async with open_feed(info, headers) as ws:
                hello = json.loads(await ws.get_message())
            assert hello["type"] == "hello"
            assert [s["server"] for s in hello["servers"]] == ["notes", "calc"]
            assert {s["status"] for s in hello["servers"]} == {"idle"}
        nursery.cancel_scope.cancel()


async def test_a_page_that_reads_slowly_loses_its_oldest_events_and_is_told() -> None:
    """Events published faster than a page reads are dropped oldest-first from that
    page's feed, each frame saying how many; the publisher never waits, and the newest
    event always arrives."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        count = 3000
        tail = ["x" * 10_000]  # 30 MB in all: more than the socket buffers hold
        async with open_feed(info, origin(info)) as ws:
            assert json.loads(await ws.get_message())["type"] == "hello"
            for i in range(count):  # synchronous: no checkpoint, the page reads nothing
                sup.bus.publish(
                    make_event("mcp.local.crashed", server=f"s{i}", exit_code=1, stderr_tail=tail)
                )
            received: list[str] = []
            dropped = 0
            with trio.fail_after(20):
                while f"s{count - 1}" not in received:
                    frame = json.loads(await ws.get_message())
                    assert len(frame["events"]) <= 256
                    received += [
                        e["server"] for e in frame["events"] if e["kind"] == "mcp.local.crashed"
                    ]
                    dropped += frame["dropped"]
        assert dropped > 0 and len(received) + dropped == count
        assert received == sorted(received, key=lambda s: int(s[1:]))  # in order
        nursery.cancel_scope.cancel()


BREAKOUT = "</script><script>alert(1)</script><!--"

_SNAPSHOT = re.compile(r'<script type="application/json" id="snapshot">(.*?)</script>', re.S)


def snapshot_of(page: str) -> dict[str, object]:
    """The state a page is served with: its JSON data block."""
    found = _SNAPSHOT.search(page)
    assert found, page[:500]
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def elements(node: object, tag: str) -> list[list[object]]:
    """Every element of *tag* in a drawing's JSON form (``[tag, attrs, children]``)."""
    if not isinstance(node, list):
        return []
    found = [node] if node[0] == tag else []
    for child in node[2]:
        found += elements(child, tag)
    return found


def bands(strip: object) -> list[str]:
    return [r[1]["data-state"] for r in elements(strip, "rect") if "data-state" in r[1]]  # type: ignore[index, operator]


async def test_the_page_is_served_with_its_state_and_the_feed_carries_the_strips() -> None:
    """The page embeds what the feed's hello says — every record, the recent events, a
    strip per server and their legend — with ``<`` escaped, so a server's text cannot end
    the data block; hello and each update carry the strips, a call's point among them."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        sup.bus.publish(
            make_event("mcp.error", server="notes", error=BREAKOUT, retry_in=None, attempt=1)
        )

        def reached(page: str) -> bool:  # the hub has the event
            return any(e.get("error") == BREAKOUT for e in snapshot_of(page)["events"])  # type: ignore[union-attr]

        with trio.fail_after(10):
            page = (await http(info, "GET", "/")).body.decode()
            while not reached(page):
                await trio.sleep(0.01)
                page = (await http(info, "GET", "/")).body.decode()
        assert BREAKOUT not in page and page.count("</script>") == 2  # app.js's, the block's
        data = snapshot_of(page)
        assert data["type"] == "hello" and data["window"] == 300
        assert [(r["server"], r["status"]) for r in data["servers"]] == [  # type: ignore[index, union-attr]
            ("notes", "connected"),
            ("calc", "connected"),
        ]
        assert list(data["strips"]) == ["notes", "calc"]  # type: ignore[arg-type]
        for strip in data["strips"].values():  # type: ignore[union-attr]
            assert strip[0] == "svg" and strip[1]["class"] == "tl"
            assert bands(strip)[-1] == "connected"
        assert data["legend"][0] == "div"  # type: ignore[index]
        css = await http(info, "GET", "/timeline.css")
        assert css.status == 200 and "svg.tl" in css.body.decode()

        async with open_feed(info, origin(info)) as ws:
            hello = json.loads(await ws.get_message())
            assert set(hello["strips"]) == {"notes", "calc"} and hello["legend"][0] == "div"
            await sup.call("notes_echo", {"text": "hi"})
            with trio.fail_after(10):
                while True:
                    update = json.loads(await ws.get_message())
                    assert update["type"] == "update" and "legend" not in update
                    points = elements(update["strips"]["notes"], "circle")
                    if points:
                        break
        assert [p[1]["class"] for p in points] == ["call ok"]  # type: ignore[index]
        assert elements(update["strips"]["calc"], "circle") == []
        nursery.cancel_scope.cancel()


def test_every_status_has_a_band_and_a_dot() -> None:
    """Each status is drawn deliberately on the page: a state band on the strips (an
    unverified server's its own, not connected's) and a dot colour in the table (only
    connected's green)."""
    assert set(STATUS_STATES) == set(ServerStatus)
    assert all(state in STATES for state in STATUS_STATES.values())
    assert STATUS_STATES[ServerStatus.UNVERIFIED] == "unverified"
    script = (ROOT / "supervisor" / "dashboard" / "static" / "app.js").read_text()
    found = re.search(r"const HEALTH = \{(.*?)\};", script, re.S)
    assert found is not None
    dots = dict(re.findall(r"(\w+): \"(\w+)\"", found.group(1)))
    assert set(dots) == {str(s) for s in ServerStatus}
    assert [s for s, colour in dots.items() if colour == "green"] == ["connected"]


def health_marks(strip: object) -> list[tuple[str, str]]:
    """A strip's health marks: (kind, title), in time order."""
    return [
        (m[1]["data-mark"], m[2][0][2][0])  # type: ignore[index]
        for m in elements(strip, "polygon")
        if "data-mark" in m[1]  # type: ignore[operator]
    ]


def probed_notes() -> dict[str, object]:
    """One eager echo server probed every 0.2 s of silence, restarted 0.2 s after a loss."""
    return {
        "mcpServers": {"notes": stdio_echo(lazy=False, pingInterval=0.2)},
        # Long enough that a loaded machine answers every probe before the SIGSTOP.
        "supervisor": {"pingTimeout": 2.0, "backoff": {"local": {"initial": 0.2, "jitter": 0}}},
    }


async def test_the_strips_mark_what_health_watching_found() -> None:
    """A server stopped with SIGSTOP misses a probe — a "stale" mark, its band
    degraded — then the next: "found down"; restarted, it is marked "recovered". Each
    mark is a titled triangle above the state lane, kept in the strip; the legend has
    the three."""
    settings = probed_notes()
    async with open_supervisor(settings) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        pid = sup.status()["notes"].pid
        assert pid is not None
        async with open_feed(info, origin(info)) as ws:
            hello = json.loads(await ws.get_message())
            assert health_marks(hello["strips"]["notes"]) == []
            legend = json.dumps(hello["legend"])
            assert all(label in legend for label in ("stale (degraded)", "found down", "recovered"))
            os.kill(pid, signal.SIGSTOP)
            states: set[str] = set()
            with trio.fail_after(60):
                while True:
                    strip = json.loads(await ws.get_message())["strips"]["notes"]
                    states.update(bands(strip))
                    marks = health_marks(strip)
                    if "recovered" in [kind for kind, _ in marks]:
                        break
        assert [kind for kind, _ in marks] == ["stale", "down", "recovered"], marks
        stale, down, recovered = (title for _, title in marks)
        assert re.match(r"stale, degraded: no answer to a \S+ probe within 2", stale)
        assert down.startswith("found down by its probe: ")
        assert re.fullmatch(r"recovered after \d+\.\d s, (just now|\d+s ago)", recovered)
        assert "degraded" in states
        shapes = [m for m in elements(strip, "polygon") if "data-mark" in m[1]]  # type: ignore[operator]
        assert [m[1]["fill"] for m in shapes] == ["#fb8f44", "#cf222e", "#2da44e"]  # type: ignore[index]
        assert sup.status()["notes"].pid != pid
        nursery.cancel_scope.cancel()


async def test_cancelling_the_dashboard_closes_its_feeds_with_1001_and_frees_the_port() -> None:
    """Cancelling `serve_dashboard` returns promptly, even with a page's feed and an idle
    keep-alive connection open: the feed is closed with 1001 (going away), the idle
    connection is closed, and the port no longer accepts connections."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        returned = trio.Event()

        async def run(task_status: trio.TaskStatus[DashboardInfo]) -> None:
            with scope:
                await serve_dashboard(sup, "127.0.0.1", 0, task_status=task_status)
            returned.set()

        info: DashboardInfo = await nursery.start(run)
        idle = await trio.open_tcp_stream("127.0.0.1", info.port)
        request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{info.port}\r\n\r\n"
        await idle.send_all(request.encode())
        answered = await idle.receive_some(65536)
        assert answered.startswith(b"HTTP/1.1 200 ")
        async with open_feed(info, origin(info)) as ws:
            assert json.loads(await ws.get_message())["type"] == "hello"
            with trio.fail_after(5):
                scope.cancel()
                await returned.wait()
                with pytest.raises(trio_websocket.ConnectionClosed) as closed:
                    while True:
                        await ws.get_message()
        assert closed.value.reason.code == 1001
        with trio.fail_after(5):
            while await idle.receive_some(65536):
                pass  # the rest of the answer, then the end of the connection
        await idle.aclose()
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", info.port)


# ------------------------------------------------------------------ the CLI


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9000", ("::1", 9000)),
        (":8080", ("127.0.0.1", 8080)),
        ("8080", ("127.0.0.1", 8080)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    """HOST:PORT, with IPv6 in brackets; the host defaults to 127.0.0.1."""
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty address"),
        ("localhost", "expected HOST:PORT"),
        ("::1:8080", "brackets"),
        ("[::1:8080", "missing ']'"),
        ("[::1]8080", "expected ':PORT'"),
        ("[nope]:80", "not an IPv6 address"),
        ("127.0.0.1:http", "must be a number"),
        ("127.0.0.1:70000", "must be a number"),
    ],
)
def test_bad_addresses_are_usage_errors(text: str, message: str, tmp_path: Path) -> None:
    """A malformed --dashboard is exit 2 with a message saying what is wrong."""
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_address(text)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config()))
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(path), "--dashboard", text],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


async def test_serve_dashboard_acts_only_with_its_login_until_interrupted(tmp_path: Path) -> None:
    """`serve --dashboard` connects the servers and prints the page's URL and its login URL
    (the only place the token is said) on stderr. The issue's attack, by a client that
    is no browser: it reads the page, then sends an action with everything the page holds
    and a forged Origin (401), and opens the feed with a forged Origin (it reads, and what
    it sends there acts on nothing); the bearer token from the login URL restarts a
    server, the cookie its visit sets stops one. Ctrl-C exits 130 leaving no server
    process, and the token is never logged."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config()))
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(path),
         "--dashboard", "127.0.0.1:0", "-v"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = b""
    try:
        with trio.fail_after(30):
            while not (match := re.search(rb"dashboard at (http://127\.0\.0\.1:(\d+)/)\n", stderr)):
                chunk = await process.stderr.receive_some(4096)
                assert chunk, stderr.decode()
                stderr += chunk
        url, port = match.group(1).decode(), int(match.group(2))
        page_only = DashboardInfo(url=url, host="127.0.0.1", port=port, token="")

        def connected(body: object) -> bool:
            return body == {"status": "ok", "servers": {"notes": "connected", "calc": "connected"}}

        reply = await http(page_only, "GET", "/healthz")
        with trio.fail_after(30):
            while not connected(reply.json()):
                await trio.sleep(0.05)
                reply = await http(page_only, "GET", "/healthz")
        pids = await server_pids(page_only)

        # The attacker: whatever the unauthenticated page holds, sent every way it could.
        page = (await http(page_only, "GET", "/")).body.decode()
        words = set(re.findall(r'(?:content|value|data-[a-z-]+)="([^"]*)"', page))
        forged = {"Origin": f"http://127.0.0.1:{port}"}
        for word in sorted(words):
            for header in ("X-Dashboard-Token", "Authorization", "Cookie"):
                value = f"Bearer {word}" if header == "Authorization" else word
                attack = await http(
                    page_only, "POST", "/api/servers/calc/restart", {**forged, header: value}
                )
                assert attack.status == 401, (header, word, attack.body)
        attack = await http(page_only, "POST", "/api/servers/calc/stop", forged)
        assert attack.status == 401 and "/login?token=" in attack.json()["error"]  # type: ignore[index]
        with pytest.raises(trio_websocket.ConnectionRejected) as refused:
            async with open_feed(page_only, {"Origin": "http://evil.example"}):
                pass
        assert refused.value.status_code == 403
        async with open_feed(page_only, forged) as ws:  # reading, as the page does
            assert json.loads(await ws.get_message())["type"] == "hello"
            for text in ("restart calc", '{"action": "stop", "server": "calc"}'):
                await ws.send_message(text)
            assert json.loads(await ws.get_message())["type"] == "update"
        assert await server_pids(page_only) == pids  # nothing acted

        # The user: the login URL, said once on stderr, right after the page's.
        with trio.fail_after(30):
            while not (login_line := re.search(rb"\n(.*login\?token=\S+)\n", stderr)):
                chunk = await process.stderr.receive_some(4096)
                assert chunk, stderr.decode()
                stderr += chunk
        login_url = (
            login_line.group(1)
            .decode()
            .removeprefix("mcp-supervisor: dashboard login (to restart and stop servers): ")
        )
        token = urllib.parse.unquote(login_url.partition("login?token=")[2])
        assert token not in page
        info = DashboardInfo(url=url, host="127.0.0.1", port=port, token=token)
        assert info.login_url == login_url
        # The bearer token for a script, the login URL for a browser.
        restarted = await http(info, "POST", "/api/servers/calc/restart", bearer(info))
        assert restarted.status == 200, restarted.body
        now = await server_pids(info)
        with trio.fail_after(30):
            while now["calc"] in (None, pids["calc"]):  # a new process, once connected
                await trio.sleep(0.05)
                now = await server_pids(info)
        assert now["notes"] == pids["notes"]
        stopped = await http(info, "POST", "/api/servers/notes/stop", await login(info))
        assert stopped.status == 200 and stopped.json()["status"] == "stopped"  # type: ignore[index]

        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            rest = b""
            while chunk := await process.stderr.receive_some(4096):
                rest += chunk
            assert await process.wait() == 130, (stderr + rest).decode()  # stopped by Ctrl-C
        assert b"Traceback" not in rest
        said = (stderr + rest).decode()
        assert said.count(token) == 1, said  # the login line, never a log line
        assert '"event": "dashboard action"' in said  # -v logs what was done, not the token
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)


async def server_pids(info: DashboardInfo) -> dict[str, int | None]:
    """Each server's pid, as the page shows it to anyone who reads it."""
    page = (await http(info, "GET", "/")).body.decode()
    return {s["server"]: s["pid"] for s in snapshot_of(page)["servers"]}  # type: ignore[index, union-attr]


# ------------------------------------------------------------------ real Chromium


@pytest.fixture
def chromium() -> str:
    """The Chromium to drive (see :func:`chromium_or_skip`), found before any server
    starts."""
    return chromium_or_skip()


@pytest.mark.parametrize("required", ["", "0", "1"])
def test_without_chromium_a_browser_test_skips_saying_how_to_install_it(
    required: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without Chromium a browser test is skipped with a reason naming the install command
    and $CHROMIUM; with $MCP_SUPERVISOR_REQUIRE_BROWSER set (CI) it fails instead."""
    monkeypatch.setenv(REQUIRE_BROWSER, required)
    missing = str(tmp_path / "no-chromium")
    outcome = pytest.fail.Exception if required == "1" else pytest.skip.Exception
    with pytest.raises(outcome) as raised:
        chromium_or_skip(missing)
    reason = str(raised.value)
    assert missing in reason and "apt-get install" in reason and "$CHROMIUM" in reason
    assert (REQUIRE_BROWSER in reason) == (required == "1")


def group_members(pgid: int) -> list[str]:
    """Live (not zombie) processes of process group *pgid*."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(f"{entry.name} {stat[: stat.rindex(')') + 1]}")
    return alive


def left_behind(pgid: int, profile: str) -> list[str]:
    """What a closed browser left: live processes of its group, its profile directory."""
    return group_members(pgid) + ([profile] if os.path.exists(profile) else [])


@pytest.fixture
async def supervised() -> AsyncIterator[tuple[SupervisorHandle, DashboardInfo]]:
    """Two stdio echo servers (restarted after 1 s) with the dashboard started first."""
    async with open_supervisor(config(initial=1.0)) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        yield sup, info
        nursery.cancel_scope.cancel()


_ROW = "document.querySelector('tr[data-server={name}]')"


def row_is(name: str, health: str) -> str:
    """A JS condition: the server's row, and its status dot, are shown in that colour."""
    row = _ROW.format(name=json.dumps(name))
    return (
        f"{row} && {row}.dataset.health === {json.dumps(health)} && "
        f"{row}.querySelector('.dot').dataset.health === {json.dumps(health)}"
    )


def cell(name: str, field: str) -> str:
    return f"{_ROW.format(name=json.dumps(name))}.querySelector('[data-field={field}]').textContent"


async def test_the_page_in_chromium_shows_crash_recovery_and_restarts(
    chromium: str, supervised: tuple[SupervisorHandle, DashboardInfo]
) -> None:
    """In headless Chromium the page lists both servers; before the login its Restart
    button is refused (401, saying how to log in); the login URL sets the cookie (which
    the page's script cannot read) and leaves the address bar; a server killed with
    SIGKILL turns red, then green again once restarted; the Restart button then restarts;
    the same request without the cookie is refused; no console error or CSP violation."""
    sup, info = supervised
    timings: dict[str, float] = {}
    began = time.monotonic()
    async with open_browser(chromium) as browser:
        timings["launch"] = time.monotonic() - began
        page = await browser.new_page()
        await page.navigate(info.url)
        await page.wait_for("document.body.dataset.feed === 'live'")
        await page.wait_for(f"{row_is('notes', 'green')} && {row_is('calc', 'green')}")
        timings["page live"] = time.monotonic() - began
        before = sup.status()["calc"].pid
        await page.click("button[data-action=restart][data-server=calc]")
        await page.wait_for(
            "document.getElementById('notice').textContent.includes('refused (HTTP 401)')"
        )
        refusal = await page.evaluate("document.getElementById('notice').textContent")
        assert "/login?token=" in refusal, refusal  # type: ignore[operator]
        assert sup.status()["calc"].pid == before and sup.status()["calc"].restarts == 0

        await page.navigate(info.login_url)
        await page.wait_for("document.body.dataset.feed === 'live'")
        assert await page.evaluate("location.href") == info.url  # the token is gone from it
        assert await page.evaluate("document.cookie") == ""  # HttpOnly
        await page.wait_for(f"{row_is('notes', 'green')} && {row_is('calc', 'green')}")
        names = await page.evaluate(
            "[...document.querySelectorAll('tr[data-server]')].map(r => r.dataset.server)"
        )
        assert names == ["notes", "calc"]
        assert await page.evaluate(cell("notes", "tools")) == "3"
        colour = await page.evaluate(
            "getComputedStyle(document.querySelector('tr[data-server=notes] .dot')).backgroundColor"
        )
        assert colour == "rgb(26, 127, 55)"  # green

        # A crash: red while the restart waits out its 1 s backoff, then green again.
        # The watchers are armed before the kill, so no state shown can be missed.
        await page.evaluate(
            f"""window.sawRed = new Promise((resolve) => {{
                const check = () => {{ if ({row_is("notes", "red")}) {{
                    observer.disconnect(); resolve(getComputedStyle(
                        document.querySelector('tr[data-server=notes] .dot')).backgroundColor);
                }} }};
                const observer = new MutationObserver(check);
                observer.observe(document, {{subtree: true, attributes: true, childList: true}});
            }}); true"""
        )
        pid = sup.status()["notes"].pid
        assert pid is not None
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(15):
            red = await page.evaluate("window.sawRed")
        assert red == "rgb(207, 34, 46)"
        timings["kill -> red"] = time.monotonic() - killed
        await page.wait_for(row_is("notes", "green"), timeout=20)
        timings["kill -> green"] = time.monotonic() - killed
        assert sup.status()["notes"].pid not in (None, pid)
        await page.wait_for(
            'document.querySelector(\'#timeline li[data-kind="mcp.local.crashed"]'
            "[data-server=notes]') && document.querySelector('#timeline "
            'li[data-kind="mcp.health.recovered"][data-server=notes]\')'
        )
        # One restart, or more when the machine is so loaded that the first one failed:
        # the page shows the server's own count.
        restarts = sup.status()["notes"].restarts
        assert restarts >= 1
        await page.wait_for(f"{cell('notes', 'restarts')} === '{restarts}'")

        # The Restart button, clicked with the mouse: the request carries the cookie.
        calc_pid = sup.status()["calc"].pid
        assert await page.evaluate(cell("calc", "restarts")) == "0"
        clicked = time.monotonic()
        await page.click("button[data-action=restart][data-server=calc]")
        await page.wait_for(
            "document.getElementById('notice').textContent.includes('calc: restart done')",
            timeout=20,
        )
        await page.wait_for(
            f"{row_is('calc', 'green')} && document.querySelector("
            "'#timeline li[data-kind=\"mcp.local.spawned\"][data-server=calc]')",
            timeout=20,
        )
        timings["restart button -> green"] = time.monotonic() - clicked
        await until(lambda: sup.status()["calc"].status == "connected", 20)
        new_pid = sup.status()["calc"].pid
        assert new_pid not in (None, calc_pid)
        spawned = await page.evaluate(
            '[...document.querySelectorAll(\'#timeline li[data-kind="mcp.local.spawned"]'
            "[data-server=calc]')].map(li => li.textContent)"
        )
        assert any(f"pid={new_pid}" in text for text in spawned), spawned  # type: ignore[union-attr]

        refused_401 = "error: Failed to load resource: the server responded with a status of 401"
        problems = [
            line for line in page.console if not line.startswith(("console.log", refused_401))
        ]
        assert problems == [], problems  # no CSP violation, no script error

        # From the page itself (right Origin) but without the cookie: refused.
        refused = await page.evaluate(
            """Promise.all([
                fetch('/api/servers/calc/restart', {method: 'POST', credentials: 'omit'}),
                fetch('/api/servers/calc/stop', {method: 'POST', credentials: 'omit',
                      headers: {'Authorization': 'Bearer guess'}}),
            ]).then(rs => Promise.all(rs.map(async r => [r.status, (await r.json()).error])))"""
        )
        assert [status for status, _ in refused] == [401, 401], refused  # type: ignore[union-attr]
        assert sup.status()["calc"].pid == new_pid and sup.status()["calc"].status == "connected"

        # Calls publish no event: the figures come with the feed's periodic refresh.
        for text in ("a", "b", "c"):
            await sup.call("notes_echo", {"text": text})
        await page.wait_for(f"{cell('notes', 'calls')} === '3 / 0'", timeout=10)

        await page.evaluate("document.querySelector('tr[data-server=notes]').click(); true")
        await page.wait_for(
            "document.querySelector('#filters [aria-selected=true]').dataset.filter === 'notes'"
        )
        shown = await page.evaluate(
            "[...document.querySelectorAll('#timeline li')].map(li => li.dataset.server)"
        )
        assert shown and set(shown) == {"notes"}  # type: ignore[arg-type]
        await page.evaluate("document.querySelector('#filters [data-filter=\"*\"]').click(); true")
        shot = await page.screenshot(ARTIFACTS / "dashboard.png")
        print(f"\ndashboard screenshot: {shot}")
        assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
        problems = [line for line in page.console if not line.startswith(refused_401)]
        assert problems == [], problems  # nothing but the refusals above
        pgid, profile = browser.pid, browser.profile
    timings["total"] = time.monotonic() - began
    assert left_behind(pgid, profile) == []
    print("chromium timings (s): " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))


#: A line a server writes on stderr (it ends up in its crash's reason): markup, were
#: it ever parsed.
STDERR_MARKUP = '<img src=x onerror="window.parsed=1">'


def stdio_fixture(kind: str, **options: object) -> dict[str, object]:
    command, args = stdio_params(kind, **options)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False}


_STRIP = "document.querySelector('.strip[data-server={name}]')"


def strip_band(name: str, state: str) -> str:
    """A JS condition: the last band of the server's strip is in *state*; its value is the
    colour it is drawn in."""
    strip = _STRIP.format(name=json.dumps(name))
    return (
        f"(() => {{ const bands = {strip} ? {strip}.querySelectorAll('rect.state') : []; "
        "const last = bands[bands.length - 1]; "
        f"return last && last.dataset.state === {json.dumps(state)} && "
        "getComputedStyle(last).fill; })()"
    )


def strip_point(name: str, selector: str) -> str:
    """A JS condition: the server's strip has a call point matching *selector*; its value
    is the point's colour."""
    strip = _STRIP.format(name=json.dumps(name))
    return (
        f"(() => {{ const p = {strip} && {strip}.querySelector({json.dumps(selector)}); "
        "return p && getComputedStyle(p).fill; })()"
    )


async def test_the_strips_in_chromium_turn_red_on_a_kill_and_show_each_call_by_outcome(
    chromium: str,
) -> None:
    """Each server has a strip: its last band turns red (disconnected) when its process is
    killed with SIGKILL and green again once it is back, with a restart tick; calls
    appear as points coloured by outcome — ok, a tool error, failed before sending, a
    timeout that may have run. A server's stderr text in a tick's title stays text. (The
    screenshot of docs/monitoring.md is this page, once the first kill is behind it.)"""
    settings = {
        "mcpServers": {
            "notes": stdio_fixture("echo"),
            "tools": stdio_fixture("rich"),
            "slow": stdio_fixture("slow", stderr_line=STDERR_MARKUP),
        },
        "supervisor": {"backoff": {"local": {"initial": 1.0, "jitter": 0}}},
    }
    async with open_supervisor(settings) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        async with open_browser(chromium) as browser:
            page = await browser.new_page()
            await page.navigate(info.url)
            await page.wait_for("document.body.dataset.feed === 'live'")
            names = await page.evaluate(
                "[...document.querySelectorAll('.strip')].map(s => s.dataset.server)"
            )
            assert names == ["notes", "tools", "slow"]
            green = await page.wait_for(strip_band("notes", "connected"))
            assert green == "rgb(45, 164, 78)"

            # A call of each outcome, each a point of its colour.
            await sup.call("notes_echo", {"text": "hi"})
            with pytest.raises(ToolError):
                await sup.call("tools_fail", {"message": "no"})
            with pytest.raises(ToolArgumentsInvalid):
                await sup.call("notes_echo", {"text": 1})
            with pytest.raises(ToolCallTimeout):
                await sup.call("slow_sleep", {"seconds": 30}, timeout=0.2)
            colours = [
                await page.wait_for(strip_point(name, selector))
                for name, selector in (
                    ("notes", "circle.call.ok"),
                    ("tools", "circle.call.tool-error"),
                    ("notes", "rect.call.fail"),
                    ("slow", "polygon.call.info"),
                )
            ]
            assert colours == [
                "rgb(26, 127, 55)",
                "rgb(9, 105, 218)",
                "rgb(188, 76, 0)",
                "rgb(130, 80, 223)",
            ]

            # A kill: the watcher is armed first, so the red band cannot be missed.
            await page.evaluate(
                f"""window.sawDown = new Promise((resolve) => {{
                    const check = () => {{ const fill = {strip_band("notes", "disconnected")};
                        if (fill) {{ observer.disconnect(); resolve(fill); }} }};
                    const observer = new MutationObserver(check);
                    observer.observe(document, {{subtree: true, childList: true}});
                }}); true"""
            )
            pid = sup.status()["notes"].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(15):
                red = await page.evaluate("window.sawDown")
            assert red == "rgb(207, 34, 46)"
            assert await page.wait_for(strip_band("notes", "connected"), timeout=30) == green
            strip = _STRIP.format(name=json.dumps("notes"))
            states = await page.evaluate(
                f"[...{strip}.querySelectorAll('rect.state')].map(r => r.dataset.state)"
            )
            assert isinstance(states, list) and "disconnected" in states, states
            down = len(states) - 1 - states[::-1].index("disconnected")
            assert states[-1] == "connected" and "connected" in states[:down], states
            await page.wait_for(f"{strip}.querySelector('line.restart')")
            await sup.call("notes_echo", {"text": "back"})
            await page.wait_for(f"{strip}.querySelectorAll('circle.call.ok').length >= 2")
            shot = await page.screenshot(ARTIFACTS / "dashboard-strips.png")
            print(f"\ndashboard strips screenshot: {shot}")

            # A server's own words (its last stderr line) in a restart's title: text.
            pid = sup.status()["slow"].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            strip = _STRIP.format(name=json.dumps("slow"))
            ticks = await page.wait_for(
                f"(() => {{ const t = [...{strip}.querySelectorAll('line.restart')]"
                ".map(t => t.textContent); return t.length && t; })()",
                timeout=30,
            )
            assert any(STDERR_MARKUP in t for t in ticks), ticks  # type: ignore[union-attr]
            assert await page.evaluate("document.querySelectorAll('img').length") == 0
            assert await page.evaluate("window.parsed === undefined")
            problems = [line for line in page.console if not line.startswith("console.log")]
            assert problems == [], problems
        nursery.cancel_scope.cancel()


async def test_the_page_in_chromium_says_when_each_server_was_last_heard_from(
    chromium: str,
) -> None:
    """Beside each strip's name, and on hovering its status, the page says when the
    server was last heard from and how its last probe went (method, milliseconds); a
    probe it missed is a mark on its strip, in its colour, and counted beside the name."""
    settings = probed_notes()
    async with open_supervisor(settings) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        await sup.connect_all()
        await until(lambda: sup.status()["notes"].last_probe_ms is not None, timeout=30)
        async with open_browser(chromium) as browser:
            page = await browser.new_page()
            await page.navigate(info.url)
            await page.wait_for("document.body.dataset.feed === 'live'")
            strip = _STRIP.format(name=json.dumps("notes"))
            row = _ROW.format(name=json.dumps("notes"))
            heard = await page.wait_for(
                f"(() => {{ const t = {strip} && {strip}.querySelector('h3 .heard').textContent;"
                " return /ms$/.test(t) && t; })()"
            )
            said = r"heard \d+s ago · (ping|server/discover) \d+(\.\d)? ms"
            assert isinstance(heard, str) and re.fullmatch(said, heard), heard
            hover = await page.evaluate(f"{row}.querySelector('.status-text').title")
            assert isinstance(hover, str) and re.fullmatch(said, hover), hover
            pid = sup.status()["notes"].pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            colour = await page.wait_for(
                f"(() => {{ const m = {strip}.querySelector('polygon.mark[data-mark=stale]');"
                " return m && getComputedStyle(m).fill; })()",
                timeout=30,
            )
            assert colour == "rgb(251, 143, 68)"
            await page.wait_for(
                f"/probes missed$/.test({strip}.querySelector('h3 .heard').textContent)",
                timeout=30,
            )
            problems = [line for line in page.console if not line.startswith("console.log")]
            assert problems == [], problems
        nursery.cancel_scope.cancel()


#: Replaces the page's WebSocket with one that never opens: the page has no feed.
NO_FEED = "window.WebSocket = class { constructor() {} close() {} };"


async def test_the_first_render_shows_the_state_the_page_was_served_with(
    chromium: str, supervised: tuple[SupervisorHandle, DashboardInfo]
) -> None:
    """Without any feed (its WebSocket never opens) the page shows what it was served
    with: every server green in the table, each strip's band green, the summary; and a
    screenshot-style load (``--dump-dom --virtual-time-budget``) never shows a page
    still waiting for its feed."""
    sup, info = supervised
    async with open_browser(chromium) as browser:
        page = await browser.new_page()
        await page.send("Page.addScriptToEvaluateOnNewDocument", {"source": NO_FEED})
        await page.navigate(info.url)
        await page.wait_for(f"{row_is('notes', 'green')} && {row_is('calc', 'green')}")
        for name in ("notes", "calc"):
            assert await page.evaluate(strip_band(name, "connected")) == "rgb(45, 164, 78)"
        summary = await page.evaluate("document.getElementById('summary').textContent")
        assert summary == "2 servers configured · 2 connected · 6 tools available"
        assert await page.evaluate("document.body.dataset.feed") == "snapshot"
        live = await page.evaluate("document.getElementById('live-text').textContent")
        assert isinstance(live, str) and live.startswith("as of ")
        problems = [line for line in page.console if not line.startswith("console.log")]
        assert problems == [], problems

    for _ in range(3):  # it was 2 in 5 before the page embedded its state
        with tempfile.TemporaryDirectory(prefix="mcp-supervisor-chromium-") as profile:
            dumped = await trio.run_process(
                [
                    chromium,
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={profile}",
                    "--dump-dom",
                    "--virtual-time-budget=2000",
                    info.url,
                ],
                capture_stdout=True,
                capture_stderr=True,
                start_new_session=True,
            )
        dom = dumped.stdout.decode()
        assert f'id="summary" class="summary">{summary}</p>' in dom, dom[:2000]
        assert dom.count('data-health="green"') >= 2


async def test_the_page_in_chromium_shows_a_server_waiting_for_a_login_then_connected(
    chromium: str, tmp_path: Path
) -> None:
    """A remote server waiting for an OAuth login is yellow, saying the command that logs
    it in, and its strip's band is "needs login"; once logged in it turns green with its
    tools. The page never holds a token,
    and shows no console error."""
    from .test_auth import SCOPES, Browser, stored
    from .test_auth import config as oauth_config

    async with (
        open_oauth_server(scopes_supported=SCOPES) as fx,
        open_supervisor(oauth_config(fx.url), auth_dir=tmp_path) as sup,
        trio.open_nursery() as nursery,
    ):
        info = await start(nursery, sup)
        await sup.connect_all()
        assert sup.status()["remote"].status == "needs_auth"
        async with open_browser(chromium) as browser:
            page = await browser.new_page()
            await page.navigate(info.url)
            await page.wait_for("document.body.dataset.feed === 'live'")
            await page.wait_for(row_is("remote", "yellow"))
            row = _ROW.format(name=json.dumps("remote"))
            shown = await page.evaluate(
                f"[{row}.querySelector('.status-text').textContent, "
                f"{row}.querySelector('.detail').textContent]"
            )
            assert shown == ["needs_auth", "needs login: mcp-supervisor auth login remote"]
            # Its strip says so too, though no event announced it: the status is sampled.
            waiting = await page.wait_for(strip_band("remote", "needs_auth"))
            assert waiting == "rgb(164, 117, 249)"

            await sup.login("remote", Browser())
            await page.wait_for(f"{row_is('remote', 'green')} && {cell('remote', 'tools')} !== '—'")
            await page.wait_for(strip_band("remote", "connected"))
            assert await page.evaluate(f"{row}.querySelector('.detail').textContent") == ""
            await page.wait_for(
                "document.querySelector('#timeline li[data-kind=\"mcp.auth.completed\"]')"
            )
            token = stored(tmp_path)["token"]
            text = await page.evaluate("document.documentElement.outerHTML")
            assert isinstance(text, str) and "remote" in text
            assert token["access_token"] not in text and token["refresh_token"] not in text
            problems = [line for line in page.console if not line.startswith("console.log")]
            assert problems == [], problems
        nursery.cancel_scope.cancel()


async def serve_foreign_page(*, task_status: trio.TaskStatus[int]) -> None:
    """Another origin: a plain page with no security headers, on its own port."""

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(65536)
            body = b"<!doctype html><title>elsewhere</title><p>another site</p>"
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(listeners[0].socket.getsockname()[1])


async def test_another_origin_in_chromium_cannot_read_the_token_or_act(
    chromium: str, supervised: tuple[SupervisorHandle, DashboardInfo]
) -> None:
    """A page of another origin, in a browser logged in to the dashboard: reading the
    dashboard fails, opening its feed fails, and its blind POSTs change nothing — though
    it is same-site (127.0.0.1, another port) and so the login cookie goes along."""
    sup, info = supervised
    before = {name: (r.pid, r.restarts) for name, r in sup.status().items()}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_foreign_page)
        async with open_browser(chromium) as browser:
            page = await browser.new_page()
            await page.navigate(info.login_url)
            await page.wait_for("document.body.dataset.feed === 'live'")
            await page.navigate(f"http://127.0.0.1:{port}/")
            base = f"http://127.0.0.1:{info.port}"
            outcome = await page.evaluate(
                f"""(async () => {{
                    const result = {{}};
                    try {{ const r = await fetch('{base}/'); result.read = await r.text(); }}
                    catch (e) {{ result.read = 'blocked'; }}
                    try {{ const r = await fetch('{base}/api/servers/calc/stop', {{method: 'POST',
                            headers: {{'Authorization': 'Bearer x'}}}}); result.act = r.status; }}
                    catch (e) {{ result.act = 'blocked'; }}
                    try {{ const r = await fetch('{base}/api/servers/calc/stop',
                            {{method: 'POST', mode: 'no-cors', body: 'x'}});
                          result.blind = r.type; }}
                    catch (e) {{ result.blind = 'blocked'; }}  // sent, answered 403, CORP-blocked
                    result.ws = await new Promise((resolve) => {{
                        const ws = new WebSocket('ws://127.0.0.1:{info.port}/ws');
                        ws.onopen = () => resolve('open');
                        ws.onclose = (e) => resolve('closed ' + e.code);
                    }});
                    return result;
                }})()"""
            )
        nursery.cancel_scope.cancel()
    assert outcome == {"read": "blocked", "act": "blocked", "blind": "blocked", "ws": "closed 1006"}
    after = {name: (r.pid, r.restarts) for name, r in sup.status().items()}
    assert after == before and {r.status for r in sup.status().values()} == {"connected"}


async def test_a_request_body_that_never_finishes_is_answered_408_and_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dashboard's requests have the body's time every server has (here 1 s): half
    a body, then nothing, is not held open."""
    from supervisor import _serving
    from supervisor.dashboard._server import IDLE_TIMEOUT

    assert (IDLE_TIMEOUT, _serving.BODY_TIMEOUT) == (30.0, 60.0)  # what monitoring.md says
    monkeypatch.setattr(_serving, "BODY_TIMEOUT", 1.0)
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info = await start(nursery, sup)
        stream = await trio.open_tcp_stream("127.0.0.1", info.port)
        async with stream:
            await stream.send_all(
                f"POST /api/servers/notes/stop HTTP/1.1\r\nHost: 127.0.0.1:{info.port}\r\n"
                "Content-Length: 10\r\n\r\nabc".encode()
            )
            received = b""
            with trio.fail_after(30):
                while chunk := await stream.receive_some(65536):
                    received += chunk
        assert received.startswith(b"HTTP/1.1 408 "), received
        assert sup.status()["notes"].status == "idle"
        nursery.cancel_scope.cancel()


async def test_the_strips_show_a_reload_and_its_servers() -> None:
    """A reload of the config, through the feed: the added server gets a strip, the
    removed one loses its own, and each server the reload added or changed is marked
    "config reloaded" (how, in its title); the event list gets the event."""
    notes, calc = stdio_echo(), stdio_echo()
    async with open_supervisor({"mcpServers": {"notes": notes, "calc": calc}}) as sup:
        async with trio.open_nursery() as nursery:
            info = await start(nursery, sup)
            await sup.connect_all()
            async with open_feed(info, origin(info)) as ws:
                hello = json.loads(await ws.get_message())
                assert set(hello["strips"]) == {"notes", "calc"}
                assert "config reloaded" in json.dumps(hello["legend"])
                servers = {"notes": {**notes, "timeout": 7}, "tasks": stdio_echo()}
                await sup.reconfigure({"mcpServers": servers})
                seen: list[str] = []
                with trio.fail_after(30):
                    while True:
                        update = json.loads(await ws.get_message())
                        seen += [e["kind"] for e in update.get("events", ())]
                        strips = update["strips"]
                        if "tasks" in strips and health_marks(strips["tasks"]):
                            break
            assert set(strips) == {"notes", "tasks"}
            assert health_marks(strips["notes"])[-1][1].startswith("config reloaded: changed")
            assert health_marks(strips["tasks"])[-1][1].startswith("config reloaded: added")
            assert "supervisor.config.reloaded" in seen
            nursery.cancel_scope.cancel()
