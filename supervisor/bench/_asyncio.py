"""``asyncio_call_ratio``: a call from asyncio through :mod:`supervisor.asyncio` ÷ the
same call made by trio code in the same supervisor, same rounds.

The measuring runs in a process of its own (an asyncio program: the bench itself runs
under trio), started once for all rounds: one supervisor of one stdio echo fixture,
hosted by the asyncio loop. Asked for a round of ``n`` calls (a line on its standard
input), it times ``n`` sequential calls awaited from asyncio and ``n`` made by a trio
task of the supervisor's own run, in blocks of 25 alternating, and answers the ratio
(a line on its standard output).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio

from ._alternate import alternate, blocks
from ._fixtures import _ECHO_ARGS, _SERVER_TIMEOUT, BenchError, _echo_config
from ._suite import RoundFn, Suite

#: a call from asyncio through supervisor.asyncio ÷ the same from trio, same supervisor
ASYNCIO_RATIO = "asyncio_call_ratio"
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
    said = bytearray()

    async def line() -> bytes:
        with trio.fail_after(_SERVER_TIMEOUT * 10):
            while b"\n" not in said:
                chunk = await process.stdout.receive_some()  # type: ignore[union-attr]
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
            n = sizes.get(ASYNCIO_RATIO, 0)
            if not n:
                return {}
            await process.stdin.send_all(f"{n}\n".encode())  # type: ignore[union-attr]
            return {ASYNCIO_RATIO: float(await line())}

        yield round_
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(_SERVER_TIMEOUT) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()


ASYNCIO = Suite("asyncio", _open_asyncio, rounds=5, quick_rounds=1)


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

        await from_asyncio(_WARM_CALLS)
        await from_trio(_WARM_CALLS)
        print("ready", flush=True)
        flip = False
        while asked := (await reader.readline()).strip():
            ours, theirs = await alternate(
                from_asyncio, from_trio, blocks(int(asked), _BLOCK), flip
            )
            flip = not flip
            print(f"{ours / theirs:.6f}", flush=True)


if __name__ == "__main__":
    import asyncio

    asyncio.run(_serve_rounds())
