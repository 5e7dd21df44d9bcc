"""``asyncio_call_ratio``: a call from asyncio through :mod:`supervisor.asyncio` ÷ the
same call made by trio code in the same supervisor, same rounds; and, for each agent
framework installed, a call through its tool (:mod:`supervisor.frameworks`) ÷ the same
call awaited from asyncio (``*_tool_ratio``, informative).

The measuring runs in a process of its own (an asyncio program: the bench itself runs
under trio), started once for all rounds: one supervisor of one stdio echo fixture,
hosted by the asyncio loop. Asked for a round of ``n`` calls of some keys (a JSON line
on its standard input), it times, for each key, ``n`` sequential calls of each of its
two contenders in blocks of 25 alternating, and answers the ratios (a JSON line on its
standard output).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from ._alternate import alternate, blocks
from ._fixtures import _ECHO_ARGS, _SERVER_TIMEOUT, BenchError, _echo_config
from ._suite import RoundFn, Suite

#: a call from asyncio through supervisor.asyncio ÷ the same from trio, same supervisor
ASYNCIO_RATIO = "asyncio_call_ratio"
#: a call through a framework's tool ÷ the same call awaited from asyncio: by key, the
#: framework's module (measured where it is installed)
FRAMEWORK_RATIOS = {
    "langchain_tool_ratio": "langchain_core",
    "openai_agents_tool_ratio": "agents",
    "pydantic_ai_tool_ratio": "pydantic_ai",
}


def installed_frameworks() -> list[str]:
    """The keys of :data:`FRAMEWORK_RATIOS` whose framework is installed."""
    return [k for k, module in FRAMEWORK_RATIOS.items() if importlib.util.find_spec(module)]


_BLOCK = 25
_WARM_CALLS = 50


@asynccontextmanager
async def _open_asyncio() -> AsyncIterator[RoundFn]:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor.bench._asyncio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    said = bytearray()

    async def line() -> bytes:
        with trio.fail_after(_SERVER_TIMEOUT * 10):
            while b"\n" not in said:
                chunk = await stdout.receive_some()
                if not chunk:
                    raise BenchError("the asyncio bench process ended early")
                said.extend(chunk)
        head, _, rest = bytes(said).partition(b"\n")
        said[:] = rest
        return head

    try:
        if await line() != b"ready":
            raise BenchError("the asyncio bench process did not start")

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            asked = {key: n for key, n in sizes.items() if n and key in _KEYS}
            if not asked:
                return {}
            request = json.dumps(asked).encode() + b"\n"
            await stdin.send_all(request)
            return {key: float(ratio) for key, ratio in json.loads(await line()).items()}

        yield round_
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(_SERVER_TIMEOUT) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()


ASYNCIO = Suite("asyncio", _open_asyncio, rounds=9, quick_rounds=1)
_KEYS = {ASYNCIO_RATIO, *FRAMEWORK_RATIOS}


async def _serve_rounds() -> None:
    """The process's side: the supervisor on this asyncio loop, a round per line read
    (asyncio is imported here, in the measuring process only)."""
    import asyncio

    from ..asyncio import open_supervisor

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with open_supervisor(_echo_config(["echo"])) as sup:
        await sup.connect_all()
        handle = sup.trio_handle

        async def from_asyncio(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                await sup.call("echo_echo", _ECHO_ARGS)
            return time.perf_counter() - start

        async def on_trio(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                await handle.call("echo_echo", _ECHO_ARGS)
            return time.perf_counter() - start

        async def from_trio(n: int) -> float:
            return await sup._bridge.run(on_trio, n)  # timed inside the trio run

        contenders: dict[
            str, tuple[Callable[[int], Awaitable[float]], Callable[[int], Awaitable[float]]]
        ] = {ASYNCIO_RATIO: (from_asyncio, from_trio)}
        for key, tool in (await _framework_tools(sup)).items():
            contenders[key] = (_timer(tool), from_asyncio)
        for ours, theirs in contenders.values():
            await ours(_WARM_CALLS)
            await theirs(_WARM_CALLS)
        print("ready", flush=True)
        flip = False
        while asked := (await reader.readline()).strip():
            ratios = {}
            for key, n in json.loads(asked).items():
                ours, theirs = contenders[key]
                spent = await alternate(ours, theirs, blocks(n, _BLOCK), flip)
                ratios[key] = round(spent[0] / spent[1], 6)
            flip = not flip
            print(json.dumps(ratios), flush=True)


def _timer(call: Callable[[], Awaitable[object]]) -> Callable[[int], Awaitable[float]]:
    async def timed(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await call()
        return time.perf_counter() - start

    return timed


async def _framework_tools(sup: Any) -> dict[str, Callable[[], Awaitable[object]]]:
    """One echo call through each installed framework's tool, as an agent of it makes
    it: LangChain's ``StructuredTool.ainvoke`` of a tool call (a ``ToolMessage``), the
    Agents SDK's ``MCPServer.call_tool``, PydanticAI's ``toolset.call_tool``."""
    calls: dict[str, Callable[[], Awaitable[object]]] = {}
    installed = installed_frameworks()
    if "langchain_tool_ratio" in installed:
        from ..frameworks.langchain import SupervisorToolkit

        tools = {tool.name: tool for tool in await SupervisorToolkit(sup).aget_tools()}
        call = {"name": "echo_echo", "args": dict(_ECHO_ARGS), "id": "1", "type": "tool_call"}
        calls["langchain_tool_ratio"] = partial(tools["echo_echo"].ainvoke, call)
    if "openai_agents_tool_ratio" in installed:
        from ..frameworks.openai_agents import SupervisedMCPServer

        server = SupervisedMCPServer(sup)
        await server.list_tools()
        calls["openai_agents_tool_ratio"] = partial(server.call_tool, "echo_echo", _ECHO_ARGS)
    if "pydantic_ai_tool_ratio" in installed:
        from ..frameworks.pydantic_ai import SupervisorToolset

        toolset = SupervisorToolset(sup)
        call_tool = toolset.call_tool
        # the toolset reads neither the run context nor the tool: the bench times the call alone
        calls["pydantic_ai_tool_ratio"] = partial(call_tool, "echo_echo", _ECHO_ARGS, None, None)  # pyright: ignore[reportArgumentType]
    return calls


if __name__ == "__main__":
    import asyncio

    asyncio.run(_serve_rounds())
