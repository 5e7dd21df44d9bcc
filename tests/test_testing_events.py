"""``capture_events``: a test waits for the events that matter instead of sleeping."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from supervisor.runtime import open_supervisor
from supervisor.testing import EventTimeout, capture_events
from supervisor.testing.servers import stdio_params


def echo() -> dict[str, object]:
    command, args = stdio_params("echo")
    return {"command": command, "args": args, "approve": False, "initTimeout": 120}


async def test_wait_for_returns_each_matching_event_once_in_order() -> None:
    config = {
        "mcpServers": {"a": echo()},
        "supervisor": {"backoff": {"local": {"initial": 0.01, "max": 0.01}}},
    }
    async with open_supervisor(config) as sup, capture_events(sup, "mcp.*") as events:
        await sup.connect_all()
        first = await events.wait_for("mcp.connected", server="a", timeout=120)
        pid = sup.status()["a"].pid
        os.kill(pid, signal.SIGKILL)
        crashed = await events.wait_for("mcp.local.crashed", server="a", timeout=120)
        second = await events.wait_for("mcp.connected", server="a", timeout=120)
        assert first is not second
        assert events.events.index(first) < events.events.index(crashed)
        assert events.events.index(crashed) < events.events.index(second)
        assert crashed.exit_code == -signal.SIGKILL
        assert events.matching("mcp.connected", server="a") == [first, second]
        assert "supervisor.child.restarted" not in events.kinds()  # not captured: mcp.* only


async def test_a_wait_that_times_out_says_what_came_instead(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_supervisor({"mcpServers": {}}) as sup, capture_events(sup) as events:
        with pytest.raises(EventTimeout, match=r"no event 'mcp.connected', server='x' within 3 s"):
            await events.wait_for("mcp.connected", server="x", timeout=3)
