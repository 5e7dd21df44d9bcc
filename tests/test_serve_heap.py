"""``serve`` moves its start-up heap out of the cyclic garbage collector's way
(:func:`gc.freeze`) before it serves, and collects what it makes afterwards as ever; and
over stdio it loads neither what only a team login needs (a JWT library) nor hypercorn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from supervisor.testing.servers import stdio_params

from .probes import own_state

#: Runs ``serve`` as ``python -m supervisor serve`` does, and writes at its exit what the
#: collector holds frozen, whether it still runs, and whether it collected a cycle made
#: after start-up (so made while serving: the gateway was serving when the client called).
_WRAPPER = """
import atexit, gc, json, sys
from supervisor.cli import main
def said():
    class Cycle:
        pass
    cycle = Cycle()
    cycle.me = cycle
    del cycle
    found = gc.collect()
    with open(sys.argv[1], "w") as out:
        loaded = sorted({"jwt", "hypercorn"} & {name.split(".")[0] for name in sys.modules})
        json.dump({"frozen": gc.get_freeze_count(), "enabled": gc.isenabled(), "found": found,
                   "loaded": loaded}, out)
atexit.register(said)
sys.exit(main(sys.argv[2:]))
"""


async def _served(tmp_path: Path) -> dict[str, Any]:
    """What the wrapper says at the exit of ``serve`` over stdio, once a client called
    through it (an echo server behind it, no team login)."""
    command, args = stdio_params("echo")
    config = tmp_path / "mcp.json"
    server = {"command": command, "args": args, "initTimeout": 60, "approve": False}
    config.write_text(json.dumps({"mcpServers": {"echo": server}}), encoding="utf-8")
    said = tmp_path / "heap.json"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", _WRAPPER, str(said), "serve", "--config", str(config)],
        env=own_state(),  # (the SDK gives a stdio server its default variables only)
    )
    with trio.fail_after(60):
        async with Client(stdio_client(params)) as client:
            result = await client.call_tool("echo_echo", {"text": "hi"})
            assert not result.is_error
    return json.loads(said.read_text(encoding="utf-8"))


async def test_serve_freezes_its_start_up_heap_and_collects_what_it_makes_later(
    tmp_path: Path,
) -> None:
    heap = await _served(tmp_path)
    # the start-up heap: the SDK, trio, pydantic's models, the config, the servers' state
    assert heap["frozen"] > 10_000
    assert heap["enabled"] and heap["found"] >= 2  # a later cycle is still collected


async def test_serve_over_stdio_loads_no_jwt_library_nor_hypercorn(tmp_path: Path) -> None:
    """The JWT library (and the parts of ``cryptography`` it brings) is for checking a
    team's tokens, hypercorn for the servers the gateway's own does not replace: a
    gateway over stdio with no team login — its local socket for the command line
    included, which the gateway's own HTTP server serves — loads neither."""
    assert (await _served(tmp_path))["loaded"] == []
