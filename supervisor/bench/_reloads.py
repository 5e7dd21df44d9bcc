"""Live reconfiguration (``SupervisorHandle.reconfigure``) against a supervisor running 32
cheap stdio servers: what adding one server costs beside starting it alone, and what
reloading does to the calls of the servers it leaves unchanged.

One supervisor runs the 32 tiny stdlib-only fixtures (those of ``startup_64_ratio``) for
every round. ``reload_ms`` times a reconfiguration adding a 33rd until that server is connected (its
tool is then called, untimed), ÷ entering ``open_supervisor`` with just that server (eager) until it
is connected, alternately (ABBA); the added server is removed again, untimed, before the
next. ``reload_p99_ratio`` is the 99th percentile latency of sequential echo calls to the
unchanged servers while that server is added and removed over and over, at the pace
``serve``'s file watch allows at most (:data:`PACE`), ÷ the same calls with no reload, the
two phases alternating from round to round.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio

from ..runtime import SupervisorHandle, open_supervisor
from ..testing.servers.tiny import tiny_server
from ._fixtures import _ECHO_ARGS, _SERVER_TIMEOUT, BenchError, _check_echo, _connect_all
from ._servers import _supervisor_start_stop
from ._suite import RoundFn, Suite

#: adding a server ÷ starting it alone
RELOAD = "reload_ms"
#: the addition, ms (reconfigure until the new server's tool answered)
RELOAD_ADD = "reload_add_ms"
#: the lone start, ms (open_supervisor with just that server until connected)
RELOAD_ALONE = "reload_alone_ms"
#: p99 of calls to unchanged servers during reloads ÷ without
RELOAD_P99 = "reload_p99_ratio"

#: the servers running throughout, and the one each reload adds or removes
RUNNING = 32
ADDED = f"tiny{RUNNING + 1}"
#: the added server's tool and the unchanged servers' tools
_ADDED_TOOL = f"{ADDED}_echo"
_UNCHANGED_TOOLS = [f"tiny{i}_echo" for i in range(1, RUNNING + 1)]
#: Untimed calls to each unchanged server once connected (first-use costs, caches).
_WARM_CALLS = 2
#: A reload phase goes on until at least this many reloads (adds and removes) have
#: ended while its calls were being made, however few calls it was asked for.
_MIN_RELOADS = 3
#: Seconds between two reloads of that phase: about the most often ``serve``'s watch of
#: its file applies one (it polls every 0.5 s and applies a change that stayed the same
#: for one more poll: 0.5 to 1 s after the last write), and far more often than a person
#: or a deployment changes a config.
PACE = 1.0


def _configs() -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    """The running config (32 tiny servers), the same with the added one, and that one
    alone. The first two share their settings (``maxServers`` 33), so a reload changes
    servers only. The servers are trusted: their calls need no approval."""
    entry = tiny_server() | {"approve": False}
    running = {f"tiny{i}": entry for i in range(1, RUNNING + 1)}
    settings = {"limits": {"maxServers": RUNNING + 1}}
    base: dict[str, object] = {"mcpServers": running, "supervisor": settings}
    added: dict[str, object] = {
        "mcpServers": running | {ADDED: entry},
        "supervisor": settings,
    }
    alone: dict[str, object] = {"mcpServers": {ADDED: entry}}
    return base, added, alone


def _p99(latencies: list[float]) -> float:
    """The 99th percentile of ``latencies`` (the nearest rank at or above it), seconds."""
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


class _Reloads:
    """The running supervisor's two configs, and reloads between them."""

    def __init__(
        self, sup: SupervisorHandle, base: Mapping[str, object], added: Mapping[str, object]
    ) -> None:
        self.sup = sup
        self.base = base
        self.added = added

    async def add(self) -> float:
        """Add the server; the seconds until it was connected (as a lone start is timed),
        then check its tool answers a call (untimed)."""
        start = time.perf_counter()
        change = await self.sup.reconfigure(self.added)
        await self.sup.connect_all()
        took = time.perf_counter() - start
        if change.added != (ADDED,) or change.removed or change.replaced or change.changed:
            raise BenchError(f"adding {ADDED} changed more than that: {change}")
        _check_echo(await self.sup.call(_ADDED_TOOL, _ECHO_ARGS), f"by the added {ADDED}")
        return took

    async def remove(self) -> None:
        """Remove the added server again (its process stopped when this returns)."""
        change = await self.sup.reconfigure(self.base)
        if change.removed != (ADDED,) or change.added or change.replaced or change.changed:
            raise BenchError(f"removing {ADDED} changed more than that: {change}")

    async def timed_add(self) -> float:
        """Seconds to add the server until it was connected; it is removed again after."""
        took = await self.add()
        await self.remove()
        return took

    async def calls(self, n: int, enough: trio.Event | None = None) -> list[float]:
        """The latency, seconds, of each of ``n`` sequential echo calls to the unchanged
        servers in turn (and more until ``enough`` is set, if given)."""
        latencies: list[float] = []
        tools = itertools.cycle(_UNCHANGED_TOOLS)
        while len(latencies) < n or (enough is not None and not enough.is_set()):
            tool = next(tools)
            start = time.perf_counter()
            result = await self.sup.call(tool, _ECHO_ARGS)
            latencies.append(time.perf_counter() - start)
            _check_echo(result, f"by {tool.removesuffix('_echo')}")
        return latencies

    async def calls_while_reloading(self, n: int) -> list[float]:
        """The latencies of :meth:`calls` made while the server is added and removed
        over and over, one reload every :data:`PACE` seconds: at least ``n``, and as
        many as it takes for :data:`_MIN_RELOADS` reloads to end while they are made.
        The reloads stop once the calls have (never in the middle of one); the server
        is left removed."""
        done = trio.Event()
        enough = trio.Event()
        reloads = 0
        latencies: list[float] = []

        async def reload_loop() -> None:
            nonlocal reloads
            present = False
            while not done.is_set():
                if present:
                    await self.remove()
                else:
                    await self.add()
                present = not present
                if not done.is_set():
                    reloads += 1
                    if reloads >= _MIN_RELOADS:
                        enough.set()
                    with trio.move_on_after(PACE):
                        await done.wait()
            if present:
                await self.remove()

        async def caller() -> None:
            latencies.extend(await self.calls(n, enough))
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reload_loop)
            nursery.start_soon(caller)
        if reloads < _MIN_RELOADS:
            raise BenchError(f"only {reloads} reloads ended during the calls")
        return latencies


@asynccontextmanager
async def _open_reload() -> AsyncIterator[RoundFn]:
    """The supervisor of the 32 tiny servers, connected and warm for every round, with one
    untimed addition and removal and one untimed lone start (first-use costs)."""
    base, added, alone = _configs()
    parity = itertools.count()
    async with open_supervisor(base) as sup:
        await _connect_all(sup)
        reloads = _Reloads(sup, base, added)
        with trio.fail_after(_SERVER_TIMEOUT):
            for _ in range(_WARM_CALLS):
                await reloads.calls(RUNNING)
            await reloads.timed_add()
        await _supervisor_start_stop(1, alone)

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            flip = next(parity) % 2 == 1
            figures: dict[str, float] = {}
            if n := max(sizes.get(k, 0) for k in (RELOAD, RELOAD_ADD, RELOAD_ALONE)):
                add = alone_s = 0.0
                for i in range(n):
                    with trio.fail_after(_SERVER_TIMEOUT):
                        if (i % 2 == 1) != flip:
                            alone_s += (await _supervisor_start_stop(1, alone))[0]
                            add += await reloads.timed_add()
                        else:
                            add += await reloads.timed_add()
                            alone_s += (await _supervisor_start_stop(1, alone))[0]
                figures[RELOAD] = add / alone_s
                figures[RELOAD_ADD] = add / n * 1000
                figures[RELOAD_ALONE] = alone_s / n * 1000
            if n := sizes.get(RELOAD_P99, 0):
                with trio.fail_after(_SERVER_TIMEOUT * 2):
                    if flip:
                        still = _p99(await reloads.calls(n))
                        reloading = _p99(await reloads.calls_while_reloading(n))
                    else:
                        reloading = _p99(await reloads.calls_while_reloading(n))
                        still = _p99(await reloads.calls(n))
                figures[RELOAD_P99] = reloading / still
            return figures

        yield round_


RELOADS = Suite("reload", _open_reload, rounds=5, quick_rounds=2)


async def reload_ms(n: int) -> float:
    """Adding a server to a supervisor running 32, until its tool answered, ÷ starting it
    alone, ``n`` of each alternately."""
    return await RELOADS.measure(RELOAD, n)


async def reload_p99_ratio(n: int) -> float:
    """p99 of ``n`` calls to unchanged servers while reloads happen ÷ without."""
    return await RELOADS.measure(RELOAD_P99, n)
