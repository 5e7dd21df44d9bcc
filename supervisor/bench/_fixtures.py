"""The echo fixture servers the server benchmarks run against: their configuration, the
bare SDK client used as the baseline, and the checks that fail the bench (with
:class:`BenchError`) rather than report a figure for a broken setup."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from ..config._limits import DEFAULT_MAX_SERVERS
from ..runtime import SupervisorHandle
from ..server._status import ServerStatus
from ..testing.servers import stdio_params
from ..testing.servers._procs import stdio_server_parameters
from ..testing.servers.tiny import tiny_server
from ..tools import ToolResult


class BenchError(RuntimeError):
    """The benchmark could not measure: a fixture server did not start, answer or recover."""


#: The tool every call benchmark calls (the echo fixture's), and its arguments.
_ECHO_ARGS: dict[str, object] = {"text": "x"}
#: Bound on each wait for fixture servers (connecting, a crash being noticed, recovering),
#: so a broken setup fails the bench instead of hanging it.
_SERVER_TIMEOUT = 60.0


def _echo_config(names: Sequence[str], **settings: object) -> dict[str, object]:
    """A config with one eager stdio echo fixture per name (tools ``<name>_echo`` …),
    trusted: its calls need no approval, as the bare client's do not."""
    command, args = stdio_params("echo")
    servers = {
        # A slow or busy machine may take seconds to start Python: a late handshake is a
        # slower figure, not a failed bench.
        name: {
            "command": command,
            "args": list(args),
            "lazy": False,
            "approve": False,
            "initTimeout": 60,
        }
        for name in names
    }
    config: dict[str, object] = {"mcpServers": servers}
    if settings:
        config["supervisor"] = dict(settings)
    return config


def _server_names(n: int) -> list[str]:
    return [f"echo{i}" for i in range(1, n + 1)]


async def _connect_all(sup: SupervisorHandle) -> None:
    """Wait until every server is connected; raise :class:`BenchError` if one is not."""
    with trio.fail_after(_SERVER_TIMEOUT):
        await sup.connect_all()
    _check_connected(sup)


def _check_connected(sup: SupervisorHandle) -> None:
    down = {n: r.last_error for n, r in sup.status().items() if r.status != ServerStatus.CONNECTED}
    if down:
        raise BenchError(f"fixture servers did not connect: {down}")


@asynccontextmanager
async def _bare_client(params: StdioServerParameters | None = None) -> AsyncIterator[Client]:
    """The baseline: a bare SDK ``mcp.Client`` over the SDK's own stdio transport, to an
    echo fixture process (or ``params``' server), its stderr discarded. Leaving it stops
    the process."""
    if params is None:
        params = stdio_server_parameters("echo")
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - /dev/null never blocks
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport) as client:
            yield client


def _tiny_config(n: int) -> dict[str, object]:
    """``n`` eager stdio servers running the tiny stdlib-only fixture, default settings
    but for ``limits.maxServers``, raised to ``n`` where it is past the default 32."""
    config: dict[str, object] = {"mcpServers": {f"tiny{i}": tiny_server() for i in range(1, n + 1)}}
    if n > DEFAULT_MAX_SERVERS:
        config["supervisor"] = {"limits": {"maxServers": n}}
    return config


def _tiny_params() -> StdioServerParameters:
    """The tiny fixture as the bare client runs it: the same command line."""
    entry = tiny_server()
    args = entry["args"]
    assert isinstance(args, list)
    return StdioServerParameters(command=str(entry["command"]), args=args)


def _check_echo(result: object, via: str) -> None:
    """Check an echo answer: a supervisor ``ToolResult`` or the bare SDK's result."""
    if isinstance(result, ToolResult):
        text = result.text
    else:
        content = getattr(result, "content", None)
        text = getattr(content[0], "text", None) if content else None
    if getattr(result, "is_error", True) or text != _ECHO_ARGS["text"]:
        raise BenchError(f"the echo fixture answered {result!r} {via}")
