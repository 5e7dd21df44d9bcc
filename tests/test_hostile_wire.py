"""What a hostile server can do on the wire: its own error -32000 (the code the SDK uses for
"Connection closed") and a catalog page built to cost a gigabyte; real subprocess servers
(``tests/hostile_server.py``)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import mcp_types as types
import pytest
import trio

from supervisor.server import (
    CallMayHaveTakenEffect,
    ServerRequestError,
    ServerStatus,
    open_servers,
)

from .probes import until
from .test_server import Recorder, Settings, managed

HOSTILE = str(Path(__file__).with_name("hostile_server.py"))
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
