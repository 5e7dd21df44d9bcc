"""The memory key: client-side RSS per connected stdio server, measured in a fresh
process (``python -m supervisor.bench rss N``); and the reading of another process's RSS
(:func:`process_rss_kb`) that the gateway's memory keys take."""

from __future__ import annotations

import gc
import resource
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import trio

from ..runtime import open_supervisor
from ._fixtures import (
    _ECHO_ARGS,
    _SERVER_TIMEOUT,
    BenchError,
    _check_echo,
    _connect_all,
    _echo_config,
    _server_names,
)
from ._suite import RoundFn, Suite

#: The key measured in a fresh process.
RSS = "rss_per_server_kb"


def _status_rss_kb(pid: int | str) -> int | None:
    """The resident set size in KiB of the process ``pid`` (``"self"``: this one), its
    ``VmRSS`` in ``/proc`` (it goes down when memory is returned); ``None`` without."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def process_rss_kb(pid: int) -> int:
    """The resident set size in KiB of the process ``pid`` (``VmRSS``); raises
    :class:`BenchError` where ``/proc`` does not tell."""
    rss = _status_rss_kb(pid)
    if rss is None:
        raise BenchError(f"no VmRSS in /proc/{pid}/status: the process is gone, or no /proc")
    return rss


def _vm_rss_kb() -> int:
    """This process's resident set size in KiB (``VmRSS``). Without ``/proc``, the peak
    RSS from ``getrusage`` (which never goes down)."""
    rss = _status_rss_kb("self")
    if rss is not None:
        return rss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


async def _rss_growth_kb(n: int) -> float:
    """KiB of this process's RSS per stdio server connected (and called once), after one
    server already connected and called absorbed the one-time costs (lazy imports,
    first-use caches). Meaningful in a fresh process only: see :func:`rss_per_server_kb`."""
    async with open_supervisor(_echo_config(["warm"])) as warm:
        await _connect_all(warm)
        _check_echo(await warm.call("warm_echo", _ECHO_ARGS), "to the warm-up server")
        gc.collect()
        before = _vm_rss_kb()
        names = _server_names(n)
        async with open_supervisor(_echo_config(names)) as sup:
            await _connect_all(sup)
            for name in names:
                await sup.call(f"{name}_echo", _ECHO_ARGS)
            gc.collect()
            after = _vm_rss_kb()
    return (after - before) / n


async def rss_per_server_kb(n: int) -> float:
    """Client-side memory per connected stdio server: the VmRSS growth of a *fresh*
    Python process (running :func:`_rss_growth_kb`) per server, ``n`` servers.

    Only our process is measured — each server is a separate process, not counted. A fresh
    process, because in a process that already connected and closed servers (as the other
    benchmarks do) the allocator reuses the memory it kept from them, and the growth
    measured there is a few KiB whatever a server really costs.
    """
    command = [sys.executable, "-m", "supervisor.bench", "rss", str(n)]
    with trio.fail_after(_SERVER_TIMEOUT + 5 * n):
        done = await trio.run_process(
            command,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise BenchError(f"the RSS probe exited with {done.returncode}: " + " | ".join(tail))
    return float(done.stdout.split()[-1])


async def _rss_round(sizes: Mapping[str, int]) -> dict[str, float]:
    return {RSS: await rss_per_server_kb(max(sizes.values()))}


@asynccontextmanager
async def _open_memory() -> AsyncIterator[RoundFn]:
    """Nothing kept between rounds: each round is a fresh process."""
    yield _rss_round


MEMORY = Suite("memory", _open_memory, rounds=3, quick_rounds=1)


def _main(argv: Sequence[str]) -> int:
    """``python -m supervisor.bench rss N``: the fresh process :func:`rss_per_server_kb`
    runs; prints the KiB per server."""
    if len(argv) == 2 and argv[0] == "rss" and argv[1].isdigit() and int(argv[1]) > 0:
        figure = trio.run(_rss_growth_kb, int(argv[1]))
        print(f"{figure:.3f}")
        return 0
    print("usage: python -m supervisor.bench rss N", file=sys.stderr)
    return 2
