"""The soak (``mcp-supervisor chaos soak``): many servers of mixed transports under a
random seeded fault plan, with continuous concurrent calls, judged by the checker.

:func:`run_soak` is ``mcp-supervisor chaos soak --servers N --duration S --seed K``. It
starts N fixture servers — stdio, Streamable HTTP (a process of its own), WebSocket and
legacy SSE, in that mix — each counting its executions per call, gives each a plan drawn
from the seed (kills, hangs, delays, drops, garbage, injected errors, spurious
notifications, duplicated and reordered answers, slow starts; for HTTP also error
statuses and expired sessions) whose rules all end at ``duration``, and keeps
``concurrency`` callers busy until then. Then the faults stop: every server must come
back and answer within ``recover_s``. The checker then demands no call lost, none executed
twice, none past its deadline, the catalog equal to the servers' tools, no process left
behind, and resident memory and open descriptors bounded. The JSON and HTML reports go to
``report_dir``.

Duplicated *requests* are not in the plans on purpose: a server that receives a call twice
executes it twice, which the checker would rightly report — the soak checks that the
supervisor never does that by itself.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from ..log import get_logger

__all__ = ["SoakOptions", "SoakResult", "random_plan", "run_soak"]

log = get_logger("supervisor.testing")

#: The supervisor's restart intensity in the soak (max restarts, within seconds), which the
#: checker holds every server's restarts to: faults cause restarts, but not a crash loop.
INTENSITY = (100, 10.0)

#: The transports of the servers, in turn.
MIX = ("stdio", "http", "stdio", "ws", "stdio", "http", "stdio", "sse")


@attrs.frozen
class SoakOptions:
    """What to soak: ``servers`` fixture servers for ``duration`` seconds under plans drawn
    from ``seed``, with ``concurrency`` callers whose calls time out after
    ``call_timeout`` s; ``recover_s`` for every server to answer again once the faults
    stop; reports written to ``report_dir`` (if given)."""

    servers: int = 8
    duration: float = 60.0
    seed: int = 0
    concurrency: int = 8
    call_timeout: float = 3.0
    recover_s: float = 60.0
    report_dir: Path | None = None
    #: how much resident memory and how many descriptors may grow after the warm-up
    max_rss_growth_kb: float = 64 * 1024
    max_fd_growth: int = 64


@attrs.define
class SoakResult:
    """The verdict (``supervisor.faults.Verdict``), the servers' transports, the calls
    made and faults injected, and where the reports are."""

    verdict: Any
    transports: dict[str, str]
    calls: int
    faults: int
    report_json: Path | None = None
    report_html: Path | None = None

    @property
    def ok(self) -> bool:
        return bool(self.verdict.ok)


def random_plan(rng: random.Random, transport: str, until_s: float) -> list[dict[str, object]]:
    """A fault plan for one server of ``transport``, drawn from ``rng``: a handful of the
    faults that transport can carry, all ending at ``until_s``."""
    calls = "tools/call"

    def when(**fields: object) -> dict[str, object]:
        return {"method": calls, "until_s": until_s, **fields}

    answers = {"direction": "to_client"}
    choices: list[dict[str, object]] = [
        {"when": when(probability=0.02, times=2), "do": "kill"},
        {
            "when": when(**answers, probability=0.2),
            "do": {"delay_ms": rng.choice([20, 50, 100]), "jitter_ms": 100},
        },
        {"when": when(**answers, probability=0.01, times=2), "do": "drop"},
        {
            "when": when(probability=0.03),
            "do": {"error": {"code": -32603, "message": "soak: injected error"}},
        },
        {"when": when(**answers, probability=0.03), "do": "list_changed"},
        {"when": when(**answers, probability=0.03), "do": "duplicate"},
        {"when": when(**answers, probability=0.02), "do": "reorder"},
    ]
    if transport == "stdio":
        choices += [
            {"when": when(probability=0.01, times=1), "do": {"hang_ms": 1500}},
            {"when": when(**answers, probability=0.02, times=1), "do": "garbage_line"},
            {"when": {"nth": 2, "until_s": until_s}, "do": {"slow_start_ms": 500}},
        ]
    if transport == "http":
        choices += [
            {"when": when(probability=0.02), "do": {"http_status": 503}},
            {"when": when(probability=0.02, times=1), "do": "expire_session"},
        ]
    if transport == "ws":
        choices += [{"when": when(probability=0.01, times=1), "do": {"hang_ms": 1500}}]
    rng.shuffle(choices)
    return choices[: rng.randint(3, len(choices))]


async def run_soak(
    options: SoakOptions, *, progress: Callable[[str], None] | None = None
) -> SoakResult:
    """Run the soak described by ``options``; see the module."""
    say = progress or (lambda _line: None)
    directory = Path(options.report_dir) if options.report_dir is not None else None
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mcp-soak-") as scratch:
        counts = directory if directory is not None else Path(scratch)
        return await _soak(options, counts, directory, say)


async def _soak(
    options: SoakOptions, counts: Path, directory: Path | None, say: Callable[[str], None]
) -> SoakResult:
    from ..faults import CallHistory, Injector, ResourceSampler, check, write_html, write_json
    from ..faults._checker import leftover_processes, spawned_pids
    from ..runtime import open_supervisor
    from ..transports._ws import serve_websocket
    from .servers import executions_by_call, make_server
    from .servers._procs import open_http_fixture

    rng = random.Random(f"soak:{options.seed}")
    history = CallHistory()
    sampler = ResourceSampler()
    transports: dict[str, str] = {}
    servers: dict[str, dict[str, object]] = {}
    async with AsyncExitStack() as stack, trio.open_nursery() as fixtures:
        for i in range(options.servers):
            transport = MIX[i % len(MIX)]
            name = f"{transport}{i}"
            count_file = counts / f"{name}.executions"
            count_file.unlink(missing_ok=True)
            entry: dict[str, object] = {"approve": False, "initTimeout": 120}
            if transport == "stdio":
                from .servers import stdio_params

                command, args = stdio_params("echo", count_file=count_file)
                entry.update(command=command, args=args)
            elif transport in ("http", "sse"):
                fixture = await stack.enter_async_context(
                    open_http_fixture(
                        "echo",
                        transport,
                        count_file=count_file,
                        start_timeout=120,
                    )
                )
                entry.update(type=transport, url=fixture.url)
            else:
                server = make_server("echo", count_file=count_file)
                url = await fixtures.start(partial(serve_websocket, server))
                entry.update(url=url)
            if transport != "sse":  # legacy SSE servers carry no fault plans
                entry["faults"] = {
                    "seed": rng.randrange(2**32),
                    "rules": random_plan(rng, transport, options.duration),
                }
            transports[name] = transport
            servers[name] = entry
        config = {
            "mcpServers": servers,
            "supervisor": {
                "backoff": {
                    "local": {"initial": 0.05, "max": 0.5, "maxAttempts": 1000},
                    "remote": {"initial": 0.05, "max": 0.5, "maxAttempts": 1000},
                },
                "intensity": {
                    "maxRestarts": INTENSITY[0],
                    "withinSeconds": INTENSITY[1],
                },
            },
        }
        say(f"soak: {options.servers} servers ({_mix(transports)}), seed {options.seed}")
        async with open_supervisor(config, history=history, injector=Injector()) as sup:
            await sup.connect_all()
            start = trio.current_time()
            async with trio.open_nursery() as load:
                load.start_soon(sampler.run, 1.0)
                stop = start + options.duration
                for worker in range(options.concurrency):
                    load.start_soon(_caller, sup, list(servers), worker, options, stop)
                await trio.sleep_until(stop)
                say(f"soak: faults over after {options.duration:g} s; waiting for recovery")
                unrecovered = await _recovered(sup, list(servers), options)
                sampler.sample()
                load.cancel_scope.cancel()
            tools = await sup.tools()
            listed = set(tools)
            offered = {f"{name}_{tool.name}" for name in servers for tool in sup.server(name).tools}
            faults = list(sup.faults())
        fixtures.cancel_scope.cancel()
    executions: dict[str, int] = {}
    for name in servers:
        executions.update(executions_by_call(counts / f"{name}.executions"))
    verdict = check(
        history,
        executions=executions,
        faults=faults,
        catalog=(listed, offered),
        restart_limits={"*": INTENSITY},
        processes=lambda: leftover_processes(spawned_pids(history.events)),
        resources=sampler,
        max_rss_growth_kb=options.max_rss_growth_kb,
        max_fd_growth=options.max_fd_growth,
        warmup=min(5, max(1, len(sampler.samples) // 4)),
    )
    if unrecovered:
        verdict.problems.append(unrecovered)
        verdict.ok = False
    result = SoakResult(
        verdict=verdict, transports=transports, calls=len(history.calls), faults=len(faults)
    )
    if directory is not None:
        result.report_json = directory / "soak.json"
        result.report_html = directory / "soak.html"
        write_json(result.report_json, verdict, history, faults=faults)
        write_html(
            result.report_html,
            verdict,
            history,
            faults=faults,
            title=f"mcp-supervisor soak, seed {options.seed}",
        )
    return result


async def _caller(
    sup: Any,
    names: list[str],
    worker: int,
    options: SoakOptions,
    stop: float,  # noqa: ANN401
) -> None:
    """Call the servers' ``echo`` in turn, from the seed, until ``stop``; every outcome is
    in the history (the errors a fault causes are expected, and recorded)."""
    from ..errors import SupervisorError

    rng = random.Random(f"soak:{options.seed}:caller:{worker}")
    n = 0
    while trio.current_time() < stop:
        name = rng.choice(names)
        n += 1
        text = f"{worker}-{n}"
        try:
            result = await sup.call(f"{name}_echo", {"text": text}, timeout=options.call_timeout)
        except SupervisorError:
            await trio.sleep(0.01)  # a down server fails fast: do not spin on it
            continue
        if result.text != text:
            raise AssertionError(f"{name} answered {result.text!r} to {text!r}")


async def _recovered(sup: Any, names: list[str], options: SoakOptions) -> str | None:  # noqa: ANN401
    """Once the faults stop, every server answers a call within ``recover_s``; else the
    problem, as a sentence."""
    from ..errors import SupervisorError

    back: set[str] = set()
    with trio.move_on_after(options.recover_s):
        for name in names:
            while True:
                try:
                    await sup.call(f"{name}_echo", {"text": "back"}, timeout=options.call_timeout)
                    back.add(name)
                    break
                except SupervisorError:
                    await trio.sleep(0.1)
        return None
    down = [f"{name} ({sup.status()[name].status.value})" for name in names if name not in back]
    return (
        f"no normal service {options.recover_s:g} s after the faults stopped: "
        f"{', '.join(down)} did not answer a call"
    )


def _mix(transports: dict[str, str]) -> str:
    counted: dict[str, int] = {}
    for transport in transports.values():
        counted[transport] = counted.get(transport, 0) + 1
    return ", ".join(f"{n} {t}" for t, n in counted.items())
