"""The gateway's memory per client session and per catalog tool: the resident set of real
``mcp-supervisor serve --http`` processes, read from ``/proc``, as sessions are opened on
one and beside one serving a large catalog.

Each round starts two fresh ``serve --http`` processes at once, each with two stdio
servers of the catalog fixture (:mod:`._catalog`) behind it: on one, each lists ``echo``
alone; on the other, ``echo`` and ``n`` tools of a typical shape (two servers, so that
the difference is twice as large beside the noise, and no server's own cost in it). A
warm-up client (handshake era, a session) lists every tool of each and calls ``echo``;
then each process's ``VmRSS`` is read. ``gateway_tool_kb`` is the difference ÷ the
``2n`` tools it is for. Then ``n`` more handshake-era clients open sessions on the
small gateway, each initialized, its ``GET`` stream open and one call made, all kept
open: ``gateway_session_kb`` is that process's growth ÷ ``n``. Fresh processes each
round, because one that already opened and closed sessions reuses the memory its
allocator kept from them (see :mod:`._memory`); the suite's opening runs one untimed
round, which fills the bytecode cache the processes start from.

:func:`open_sessions` and :func:`sessions_open` are what the tests check the sessions
are given back with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx2
import trio
from mcp import Client

from ._catalog import catalog_server
from ._cli import _environment
from ._fixtures import _ECHO_ARGS, _SERVER_TIMEOUT, BenchError, _check_echo
from ._gateway import _TOKEN_ENV, _client, _serve, _Served
from ._memory import process_rss_kb
from ._suite import RoundFn, Suite

#: KiB of the ``serve --http`` process per handshake-era session held open
GATEWAY_SESSION = "gateway_session_kb"
#: KiB of the ``serve --http`` process per tool of its catalog
GATEWAY_TOOL = "gateway_tool_kb"

#: the catalog fixture servers behind each gateway
_SERVERS = ("cat1", "cat2")
#: the tool every client calls (the first server's ``echo``)
_ECHO = "cat1_echo"
#: the warm-up round's sizes, as the suite opens: the small gateway alone, which imports
#: all the large one does (one process compiling the bytecode, not two at once)
_WARM_SIZES = {GATEWAY_SESSION: 2}


def _write_config(directory: Path, tools: int) -> str:
    """A gateway's config file in ``directory`` (its own, so that each gateway has its own
    local socket): a catalog fixture per name of :data:`_SERVERS`, each listing ``echo``
    and ``tools`` more."""
    directory.mkdir(exist_ok=True)
    path = directory / "mcp.json"
    settings = {"mcpServers": {name: catalog_server(tools) for name in _SERVERS}}
    path.write_text(json.dumps(settings), encoding="utf-8")
    return str(path)


async def _list_all(client: Client) -> int:
    """How many tools ``client``'s server lists, every page."""
    count, cursor = 0, None
    while True:
        listed = await client.list_tools(cursor=cursor)
        count += len(listed.tools)
        if not (cursor := listed.next_cursor):
            return count


@asynccontextmanager
async def open_sessions(url: str, token: str, n: int) -> AsyncIterator[Sequence[Client]]:
    """``n`` handshake-era SDK clients of the gateway at ``url``, each with a session
    initialized and one ``echo`` call made, opened one after the other and kept open in
    the block; leaving it closes them (each ``DELETE``\\ s its session)."""
    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(n):
            client = await stack.enter_async_context(_client(url, token, "legacy"))
            _check_echo(await client.call_tool(_ECHO, _ECHO_ARGS), "in a new session")
            clients.append(client)
        yield clients


async def sessions_open(url: str) -> int:
    """The sessions the gateway at ``url`` has open, as its ``/metrics`` says."""
    async with httpx2.AsyncClient(timeout=_SERVER_TIMEOUT) as http:
        text = (await http.get(url.removesuffix("/mcp") + "/metrics")).text
    found = re.search(r"^mcp_supervisor_gateway_sessions (\d+)$", text, re.MULTILINE)
    if found is None:
        raise BenchError(f"{url}: no session count in /metrics")
    return int(found[1])


@asynccontextmanager
async def _serving(configs: Sequence[str], env: Mapping[str, str]) -> AsyncIterator[list[_Served]]:
    """A ``serve --http`` process for each of ``configs``, started at once; all stopped
    on leaving."""
    stop = trio.Event()
    served: dict[int, _Served] = {}

    async def hold(config: str, task_status: trio.TaskStatus[_Served]) -> None:
        async with _serve(config, env) as one:
            task_status.started(one)
            await stop.wait()

    async def start(i: int, nursery: trio.Nursery) -> None:
        served[i] = await nursery.start(hold, configs[i])

    async with trio.open_nursery() as nursery:
        try:
            async with trio.open_nursery() as starting:
                for i in range(len(configs)):
                    starting.start_soon(start, i, nursery)
            yield [served[i] for i in range(len(configs))]
        finally:
            stop.set()


async def memory_figures(
    sizes: Mapping[str, int], one_config: str, many_config: str | None, env: Mapping[str, str]
) -> dict[str, float]:
    """One round (the module's docstring): fresh gateways, their RSS read after a warm-up
    client listed every tool and called ``echo``, then sessions opened on the small
    gateway; the large one (``many_config``) is started only for ``gateway_tool_kb``."""
    sessions = sizes.get(GATEWAY_SESSION, 0)
    tools = 0 if many_config is None else sizes.get(GATEWAY_TOOL, 0)
    token = env[_TOKEN_ENV]
    configs = [one_config] if many_config is None else [one_config, many_config]
    figures: dict[str, float] = {}
    with trio.fail_after(_SERVER_TIMEOUT * 2):
        async with _serving(configs, env) as served, AsyncExitStack() as stack:
            listed = []
            for gateway in served:
                client = await stack.enter_async_context(_client(gateway.url, token, "legacy"))
                listed.append(await _list_all(client))
                _check_echo(await client.call_tool(_ECHO, _ECHO_ARGS), "through the gateway")
            one = served[0]
            base = process_rss_kb(one.pid)
            if tools:
                more = tools * len(_SERVERS)
                if listed[1] - listed[0] != more:
                    raise BenchError(f"the gateways list {listed} tools, not {more} apart")
                figures[GATEWAY_TOOL] = (process_rss_kb(served[1].pid) - base) / more
            if sessions:
                async with open_sessions(one.url, token, sessions):
                    figures[GATEWAY_SESSION] = (process_rss_kb(one.pid) - base) / sessions
    return figures


@asynccontextmanager
async def _open_gateway_memory() -> AsyncIterator[RoundFn]:
    """The small gateway's config file, and the large one's for each number of tools a
    round asks for; the bytecode cache filled by one untimed round; nothing else kept."""
    # A short directory: the gateway's Unix socket path must fit in 108 bytes.
    work = tempfile.mkdtemp(prefix="mcps-mem-")
    try:
        env = _environment(os.path.join(work, "pycache")) | {
            "XDG_RUNTIME_DIR": os.path.join(work, "run"),
            _TOKEN_ENV: "bench-" + os.urandom(16).hex(),
        }
        one_config = _write_config(Path(work) / "one", 0)
        configs: dict[int, str] = {}

        def many_config(tools: int) -> str:
            if tools not in configs:
                configs[tools] = _write_config(Path(work) / f"many{tools}", tools)
            return configs[tools]

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            tools = sizes.get(GATEWAY_TOOL, 0)
            many = many_config(tools) if tools else None
            return await memory_figures(sizes, one_config, many, env)

        await round_(_WARM_SIZES)
        yield round_
    finally:
        shutil.rmtree(work, ignore_errors=True)


GATEWAY_MEMORY = Suite("gateway-memory", _open_gateway_memory, rounds=3, quick_rounds=1)
