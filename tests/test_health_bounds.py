"""Health's time bounds: a down remote server that comes back is reconnected to within a
try of its port, not after the rest of a long backoff delay (one whose port never closed is
left to its delay); a hung server is degraded, then down, within the 30 s the docs promise
with the default settings; and the window a server may go unheard from."""

from __future__ import annotations

import time

import pytest
import trio

from supervisor._serving import lifespan
from supervisor.faults import Injector
from supervisor.runtime import open_supervisor
from supervisor.testing.servers import make_server, start_http
from supervisor.transports._watch import RETURN_EVERY

from .probes import until

#: A reconnection delay far longer than the bound asserted: only a hurried restart meets it.
LONG = {"initial": 60, "max": 60, "maxAttempts": 100}


async def test_a_remote_server_back_on_its_port_is_reconnected_at_once() -> None:
    """Killed (its port closed), the server is down and its second try waits 60 s; once
    its port accepts again it is connected within a couple of port tries."""
    server = make_server("echo")
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, server)
        config = {
            "mcpServers": {
                "web": {"url": web.url, "type": "http", "approve": False, "reconnect": LONG}
            }
        }
        async with open_supervisor(config) as sup:
            await sup.connect_all()
            port = web.port
            await web.stop()
            # Down, its first try (at once) refused: the next waits out the long delay.
            await until(lambda: (sup.status()["web"].next_retry_at or 0) > time.time() + 30, 10)
            assert sup.status()["web"].status == "disconnected"
            back = await start_http(nursery, server, port=port)
            began = trio.current_time()
            await until(lambda: sup.status()["web"].status == "connected", 30)
            took = trio.current_time() - began
            assert took < 2 * RETURN_EVERY + 3, took  # not 60 s
            assert (await sup.call("web_echo", {"text": "hi"})).text == "hi"
            await back.stop()
            nursery.cancel_scope.cancel()


async def test_a_server_whose_port_never_closed_waits_out_its_delay() -> None:
    """A server that refuses its handshake while its port stays open (HTTP 503 to
    everything) is not hurried: what keeps it down is not its port."""

    async def unavailable(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"busy"})

    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, unavailable)
        config = {
            "mcpServers": {
                "web": {"url": web.url, "type": "http", "lazy": False, "reconnect": LONG}
            }
        }
        async with open_supervisor(config) as sup:
            # (the first try, and the one at once after it, fail: then the long wait)
            await until(lambda: (sup.status()["web"].next_retry_at or 0) > time.time() + 30, 20)
            tries = sup.status()["web"].error_count
            with trio.move_on_after(3 * RETURN_EVERY + 1):
                await until(lambda: sup.status()["web"].error_count > tries, 60)
            assert sup.status()["web"].error_count == tries  # still waiting its 60 s
        await web.stop()


# -- the default bounds, on trio's clock (in-process servers, whose faults the plan makes) --


def _probes_dropped() -> dict[str, object]:
    """A plan under which the server never answers a probe (of either protocol era)."""
    return {
        "rules": [
            {"when": {"method": method, "direction": "to_server"}, "do": "drop"}
            for method in ("ping", "server/discover", "tools/list")
        ]
    }


async def _times(sup: object, *kinds: str) -> dict[str, float]:
    """When (trio's clock) each of ``kinds`` is first published, once all are."""
    seen: dict[str, float] = {}
    with trio.fail_after(120):  # (on trio's mock clock in some tests: 120 s of it)
        return await _first_of(sup, kinds, seen)


async def _first_of(
    sup: object, kinds: tuple[str, ...], seen: dict[str, float]
) -> dict[str, float]:
    async with sup.subscribe(*kinds) as events:  # type: ignore[attr-defined]
        async for event in events:
            seen.setdefault(event.kind, trio.current_time())
            if len(seen) == len(kinds):
                return seen
    raise AssertionError("the events stopped")


async def test_a_hung_server_is_degraded_then_down_within_30_s_by_default(
    autojump_clock: object,
) -> None:
    """Default pingInterval 10 s, pingTimeout 10 s: silent from t=0 (connected), the
    first probe goes at 10 s and is given up at 20 s (degraded), the second at 30 s
    (down): within the 30 s the docs promise; and the status says so at each step."""
    from supervisor.testing.servers import make_server

    # Only the probes after the handshake are dropped: the listing at connect is answered.
    plan = _probes_dropped()
    for rule in plan["rules"]:  # type: ignore[index]
        rule["when"]["after_s"] = 1  # type: ignore[index]
    config = {"mcpServers": {}}
    async with open_supervisor(
        config, apps={"mem": make_server("echo")}, faults={"mem": plan}, injector=Injector()
    ) as sup:
        await sup.connect_all()
        start = trio.current_time()
        seen = await _times(sup, "mcp.health.stale", "mcp.health.down")
        assert seen["mcp.health.stale"] - start == pytest.approx(20, abs=0.5)
        assert seen["mcp.health.down"] - start == pytest.approx(30, abs=0.5)
        assert seen["mcp.health.down"] - start <= 30.5


async def test_the_window_is_31_s_by_default_and_none_without_probes() -> None:
    """The window a connected server may go unheard from: pingInterval + 2 × pingTimeout
    + 1 s (31 s by default); none when probes are off."""
    from supervisor.config import load_config
    from supervisor.server._managed import ServerHandle

    config = load_config({"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp"}}})
    assert ServerHandle(config.servers["a"], publish=lambda event: None).window() == 31
    config = load_config(
        {"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp", "pingInterval": 0}}}
    )
    assert ServerHandle(config.servers["a"], publish=lambda event: None).window() is None


async def test_a_proxy_answering_503_for_a_probe_counts_as_a_miss() -> None:
    """A probe answered with HTTP 502/503/504 (a proxy or balancer that cannot reach
    the server) is no proof of life: degraded, then down (found by probe) — while an
    MCP error answered to it (here: HTTP 500) is an answer."""
    from supervisor.testing.servers import make_server

    def plan(status: int) -> dict[str, object]:
        return {
            "rules": [
                {"when": {"method": m, "after_s": 1}, "do": {"http_status": status}}
                for m in ("ping", "server/discover", "tools/list")
            ]
        }

    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        fast = {"type": "http", "url": web.url, "pingInterval": 0.5}
        config = {
            "mcpServers": {
                "proxied": {**fast, "faults": plan(503)},
                "erring": {**fast, "faults": plan(500)},
            },
            "supervisor": {"pingTimeout": 2},
        }
        async with open_supervisor(config, injector=Injector()) as sup:
            await sup.connect_all()
            seen = await _times(sup, "mcp.health.stale", "mcp.health.down")
            assert seen["mcp.health.down"] >= seen["mcp.health.stale"]
            assert sup.status()["erring"].status == "connected"
            assert sup.status()["erring"].probes_missed == 0
            assert sup.status()["erring"].probes > 0
        await web.stop()
