"""``sandbox_startup_ratio`` and ``sandbox_call_ratio``: what a sandbox (bubblewrap, no
network: docs/servers.md, "A sandbox") costs a local server, each the sandboxed server
÷ the same server unsandboxed, measured in the same round, alternately. The server is
the stdlib-only ``contained`` fixture, so what is timed is mostly what the sandbox adds.
Reported, with no target; where no sandbox can be made here the suite says why."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from ..runtime import open_supervisor
from ..testing.servers.contained import contained_server
from ..transports._sandbox import sandbox_problem
from ._alternate import alternate, blocks
from ._fixtures import _SERVER_TIMEOUT, BenchError
from ._suite import RoundFn, Suite

SANDBOX_STARTUP = "sandbox_startup_ratio"
SANDBOX_CALL = "sandbox_call_ratio"
#: A call round alternates blocks of this many calls between the two servers.
_CALL_BLOCK = 50
_WARM_CALLS = 50
_ECHO = {"text": "x"}


def _entry(sandboxed: bool) -> dict[str, object]:
    entry = contained_server(lazy=False, autoApprove=True)
    if sandboxed:
        entry["sandboxEnabled"] = True
    return entry


def _config(sandboxed: bool) -> dict[str, object]:
    return {"mcpServers": {"s": _entry(sandboxed)}}


async def _start_stop(sandboxed: bool, n: int) -> float:
    """Seconds, over ``n`` starts, from entering ``open_supervisor`` with the one server
    until it is connected (tools listed); its stop is not timed."""
    spent = 0.0
    for _ in range(n):
        start = time.perf_counter()
        async with open_supervisor(_config(sandboxed)) as sup:
            await sup.connect_all(_SERVER_TIMEOUT)
            spent += time.perf_counter() - start
    return spent


@asynccontextmanager
async def _open_sandbox() -> AsyncIterator[RoundFn]:
    """A supervisor with the fixture sandboxed and not, both connected for every call
    round; a startup round starts and stops supervisors of its own."""
    problem = sandbox_problem()
    if problem is not None:
        raise BenchError(f"no sandbox can be made here: {problem}")
    cfg = {
        "mcpServers": {
            "boxed": _entry(True),
            "bare": _entry(False),
        }
    }
    async with open_supervisor(cfg) as sup:
        await sup.connect_all(_SERVER_TIMEOUT)
        for _ in range(_WARM_CALLS):
            await sup.call("boxed_echo", _ECHO)
            await sup.call("bare_echo", _ECHO)
        parity = itertools.count()

        async def calls(name: str, n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                await sup.call(name, _ECHO)
            return time.perf_counter() - start

        async def boxed_calls(n: int) -> float:
            return await calls("boxed_echo", n)

        async def bare_calls(n: int) -> float:
            return await calls("bare_echo", n)

        async def boxed_starts(n: int) -> float:
            return await _start_stop(True, n)

        async def bare_starts(n: int) -> float:
            return await _start_stop(False, n)

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            flip = next(parity) % 2 == 1
            out = {}
            if SANDBOX_STARTUP in sizes:
                a, b = await alternate(
                    boxed_starts, bare_starts, blocks(sizes[SANDBOX_STARTUP], 1), flip
                )
                out[SANDBOX_STARTUP] = a / b
            if SANDBOX_CALL in sizes:
                pieces = blocks(sizes[SANDBOX_CALL], _CALL_BLOCK)
                a, b = await alternate(boxed_calls, bare_calls, pieces, flip)
                out[SANDBOX_CALL] = a / b
            return out

        yield round_


SANDBOX = Suite("sandbox", _open_sandbox, rounds=9, quick_rounds=3)
