"""A small MCP server over Streamable HTTP that is expected to go away now and then.

Run it (in a checkout, ``python examples/servers/flaky.py`` does the same)::

    python -m supervisor.demo.servers.flaky --port 8765      # http://127.0.0.1:8765/mcp
    python -m supervisor.demo.servers.flaky --port 0         # any free port
    python -m supervisor.demo.servers.flaky --port 0 --fail-every 3

and point a config at its URL::

    {"mcpServers": {"flaky": {"type": "http", "url": "http://127.0.0.1:8765/mcp"}}}

Once it listens it prints one line on standard output, ``flaky: serving URL (pid N)``,
naming the port it bound (useful with ``--port 0``), so whoever starts it knows when to
connect. It listens on 127.0.0.1 unless ``--host`` says otherwise, and runs until it is
interrupted or killed — ``mcp-supervisor demo`` kills it and starts it again on the same
port to show a remote server's outage and the reconnection.

Tools (the state is per process: a restarted server starts counting again):

- ``fetch(key)`` — a made-up value for ``key``, naming the process that served it and the
  request's number; with ``--fail-every N`` every N-th fetch is a tool error
  (``isError``: "upstream timed out"), the way an unreliable backend fails;
- ``ping()`` — ``pong``, this process's pid and how long it has been up.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import sys
import time

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


def make_server(fail_every: int = 0) -> MCPServer:
    """The flaky server; with ``fail_every`` N > 0, every N-th ``fetch`` fails."""
    started = time.monotonic()
    fetches = itertools.count(1)
    server: MCPServer = MCPServer("flaky", log_level="WARNING")

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def fetch(key: str) -> str:
        """Fetch the current value of a key from the (unreliable) upstream."""
        number = next(fetches)
        if fail_every > 0 and number % fail_every == 0:
            raise ToolError(f"upstream timed out fetching {key!r} (request {number})")
        value = int.from_bytes(hashlib.sha256(key.encode()).digest()[:2], "big") % 1000
        return f"{key} = {value} (pid {os.getpid()}, request {number})"

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def ping() -> str:
        """Check that the server is up."""
        return f"pong from pid {os.getpid()}, up {time.monotonic() - started:.1f} s"

    return server


async def serve_flaky(host: str, port: int, fail_every: int) -> None:
    """Serve until cancelled; print the ``flaky: serving URL (pid N)`` line once bound."""
    app = make_server(fail_every).streamable_http_app(host=host)
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(serve, app, config)
        print(f"flaky: serving {binds[0]}/mcp (pid {os.getpid()})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An MCP server over Streamable HTTP.")
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port; 0 for any free one")
    parser.add_argument(
        "--fail-every", type=int, default=0, metavar="N", help="every N-th fetch fails"
    )
    args = parser.parse_args(argv)
    try:
        trio.run(serve_flaky, args.host, args.port, args.fail_every)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # the port is taken, say
        print(f"flaky: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
