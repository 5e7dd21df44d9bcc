"""The command line's start-up: ``mcp-supervisor --help`` as users run it, process start
included, beside a bare interpreter's start measured in the same rounds.

Both run as fresh processes of this interpreter with bytecode cached, as after an install
(in a temporary ``PYTHONPYCACHEPREFIX`` the suite fills as it opens, so the source tree is
not written to, even where ``PYTHONDONTWRITEBYTECODE`` is set).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import trio

from ._fixtures import BenchError
from ._suite import RoundFn, Suite

#: ``python -m supervisor --help``, ms
CLI_HELP = "cli_help_ms"
#: ``python -c pass``, ms: what the machine's interpreter start costs
CLI_BASELINE = "cli_help_baseline_ms"

HELP = ("-m", "supervisor", "--help")
BASELINE = ("-c", "pass")
#: a hang guard for one start, seconds
_START_TIMEOUT = 30.0


def _environment(cache: str) -> dict[str, str]:
    """This process's environment, with bytecode written to and read from ``cache``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": cache}


async def _start_ms(args: Sequence[str], env: Mapping[str, str]) -> float:
    """Wall time, ms, of one run of this interpreter with ``args``, spawn to exit."""
    start = time.perf_counter()
    with trio.fail_after(_START_TIMEOUT):
        done = await trio.run_process(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise BenchError(
            f"python {' '.join(args)} exited with {done.returncode}: " + " | ".join(tail)
        )
    return elapsed


async def start_figures(n: int, env: Mapping[str, str]) -> dict[str, float]:
    """One round: ``n`` starts of each, alternating ABBA; the median of each, ms."""
    times: dict[str, list[float]] = {CLI_HELP: [], CLI_BASELINE: []}
    runs = {CLI_HELP: HELP, CLI_BASELINE: BASELINE}
    for i in range(n):
        order = (CLI_HELP, CLI_BASELINE) if i % 2 == 0 else (CLI_BASELINE, CLI_HELP)
        for key in order:
            times[key].append(await _start_ms(runs[key], env))
    return {key: statistics.median(figures) for key, figures in times.items()}


@asynccontextmanager
async def _open_cli() -> AsyncIterator[RoundFn]:
    """A bytecode cache for the rounds, filled by one untimed start of each."""
    with tempfile.TemporaryDirectory(prefix="mcp-supervisor-bench-") as cache:
        env = _environment(cache)
        await start_figures(1, env)

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            return await start_figures(max(sizes.values()), env)

        yield round_


CLI = Suite("cli", _open_cli, rounds=5, quick_rounds=1)


async def cli_help_ms(n: int) -> float:
    """``mcp-supervisor --help`` wall time, ms, median of ``n`` fresh processes."""
    return await CLI.measure(CLI_HELP, n)
