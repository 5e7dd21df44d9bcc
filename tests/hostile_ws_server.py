"""An MCP server over WebSocket (subprotocol ``mcp``, one JSON-RPC message a text frame)
that lists ``N`` tiny tools in one ``tools/list`` page, for the tests of what the
supervisor makes of a catalog built to cost a gigabyte.

Usage: ``python hostile_ws_server.py N``. Listens on 127.0.0.1 (a free port) and prints
its URL on stdout; prints ``page BYTES`` to stderr for each page it sends. It speaks the
handshake-era protocol by hand, as ``hostile_server.py`` does (whose messages it uses),
and answers ``ping``; anything else gets "method not found". Any number of connections,
one after another or at once, until it is killed.
"""

from __future__ import annotations

import json
import sys
from functools import partial

import trio
import trio_websocket
from hostile_server import NOT_FOUND, error, initialized, result, tool


async def serve(count: int, request: trio_websocket.WebSocketRequest) -> None:
    ws = await request.accept(subprotocol="mcp")
    try:
        while True:
            message = json.loads(await ws.get_message())
            if "id" not in message or "method" not in message:
                continue  # a notification, or an answer to a request of ours
            method = message["method"]
            if method == "initialize":
                reply = initialized(message)
            elif method == "tools/list":
                reply = result(message, {"tools": [tool(f"t{i}") for i in range(count)]})
            elif method == "ping":
                reply = result(message, {})
            else:
                reply = error(message, NOT_FOUND, f"method not found: {method}")
            text = json.dumps(reply, separators=(",", ":"))
            del reply
            if method == "tools/list":
                print(f"page {len(text)}", file=sys.stderr, flush=True)
            await ws.send_message(text)
    except trio_websocket.ConnectionClosed:
        pass


async def main(count: str) -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(
                trio_websocket.serve_websocket,
                partial(serve, int(count)),
                "127.0.0.1",
                0,
                None,
                max_message_size=64 * 1024 * 1024,
            )
        )
        print(f"ws://127.0.0.1:{server.port}/", flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
