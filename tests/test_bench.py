"""The bench keys measured against real fixture servers, on tiny sizes, and the machinery
that runs suites (shared resources, their own round counts, computed targets)."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from supervisor.bench import (
    _alternate,
    _inprocess,
    _memory,
    _registry,
    _reloads,
    _run,
    _servers,
    _suite,
)
from supervisor.runtime import open_supervisor


def _children() -> set[int]:
    """Pids of this process's live (non-zombie) child processes."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ")"
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if int(ppid) == me and state != "Z":
            found.add(int(entry.name))
    return found


async def _no_new_children(before: set[int]) -> set[int]:
    """Children started since ``before`` still alive after a grace period (ends early once
    they are all gone)."""
    with trio.move_on_after(30):
        while _children() - before:  # noqa: ASYNC110 - polling /proc, bounded
            await trio.sleep(0.05)
    return _children() - before


#: a tiny round's size for every key measured against processes (fixture servers, fresh
#: interpreters): the suites are checked here on these, not by running the whole bench
TINY = {
    "call_overhead_ratio_seq": 5,
    "call_overhead_ratio_concurrent": 5,
    "startup_8_ratio": 2,
    "shutdown_8_ratio": 2,
    "startup_64_ratio": 4,
    "startup_64_restarts": 4,
    "recovery_s": 1,
    "recovery_ratio": 1,
    "recovery_connect_s": 1,
    "reload_ms": 1,
    "reload_add_ms": 1,
    "reload_alone_ms": 1,
    "reload_p99_ratio": 20,
    "rss_per_server_kb": 2,
    "asyncio_call_ratio": 4,
    "langchain_tool_ratio": 4,
    "openai_agents_tool_ratio": 4,
    "pydantic_ai_tool_ratio": 4,
    "gateway_call_ratio": 4,
    "gateway_http_call_ratio": 4,
    "gateway_bare_http_ratio": 4,
    "gateway_http_throughput_ratio": 8,
    "gateway_http_cpu_per_call_ms": 8,
    "gateway_http_cpu_ratio": 8,
    "gateway_stateless_ratio": 4,
    "gateway_auth_call_us": 200,
    "gateway_throughput_50x200": 2,
    "gateway_throughput_50x200_p99_ms": 2,
    "gateway_rss_idle_mb": 1,
    "gateway_rss_mb": 8,
    "gateway_session_kb": 8,
    "gateway_tool_kb": 999,
    "cli_call_warm_ms": 1,
    "cli_help_ms": 1,
    "cli_help_baseline_ms": 1,
    "sandbox_startup_ratio": 1,
    "sandbox_call_ratio": 5,
}
PROCESS_SUITES = list(
    dict.fromkeys(
        m.suite
        for m in _registry.MEASUREMENTS
        if m.suite not in (None, _inprocess.MAILBOX, _inprocess.BUS)
    )
)


def test_every_key_is_measured_on_a_tiny_round_by_some_test() -> None:
    """Each key is in a suite run below on ``TINY`` sizes, in an in-process suite, or a
    plain in-process function (test_cli runs those): none goes unmeasured by the tests."""
    for m in _registry.MEASUREMENTS:
        if m.suite in PROCESS_SUITES:
            assert m.key in TINY, m.key
        else:
            assert m.suite in (None, _inprocess.MAILBOX, _inprocess.BUS), m.key


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("suite", PROCESS_SUITES, ids=lambda suite: suite.name)
async def test_a_process_suite_measures_each_key_on_a_tiny_round_and_leaves_no_process(
    suite: _suite.Suite,
) -> None:
    """Each suite that starts processes, opened once, measures one tiny round of all its
    keys: a positive finite figure each (a count whose target is 0, such as restarts, may
    be 0), and every process it started has exited once it is closed."""
    if suite.name == "sandbox" and os.environ.get("MCP_SUPERVISOR_REQUIRE_BWRAP") != "1":
        from supervisor.transports._sandbox import sandbox_problem

        if (problem := sandbox_problem()) is not None:
            pytest.skip(f"no sandbox here ({problem}); MCP_SUPERVISOR_REQUIRE_BWRAP=1 fails")
    members = [m for m in _registry.MEASUREMENTS if m.suite is suite]
    before = _children()
    with trio.fail_after(180):  # a hang guard: connecting may retry on a loaded machine
        async with suite.open() as round_:
            got = await round_({m.key: TINY[m.key] for m in members})
    for m in members:
        floor = 0 if m.target == "<= 0" else 1e-12
        assert floor <= got[m.key] < math.inf, m.key
    assert not await _no_new_children(before)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_recovery_restarts_at_once_and_includes_the_connect() -> None:
    """Each recovery round's crash is a first one, restarted with no delay; recovery_s
    starts at the kill, so it includes the restarted server's connect time
    (recovery_connect_s); recovery_ratio is recovery_s over the bare client's cold call.
    The new server is a child of ours (so the process check above sees them)."""
    before = _children()
    with trio.fail_after(120):  # a hang guard: connecting may retry on a loaded machine
        async with _servers.RECOVERIES.open() as round_:
            figures = await round_({_servers.RECOVERY: 1, _servers.RECOVERY_RATIO: 1})
            assert len(_children() - before) == 1
    assert _servers.recovery_restart_delay() == 0.0
    assert 0 < figures[_servers.RECOVERY_CONNECT] < figures[_servers.RECOVERY]
    assert 0 < figures[_servers.RECOVERY_RATIO] < math.inf


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_a_reload_round_times_an_addition_against_a_lone_start_and_leaves_the_32() -> None:
    """A reload round's reload_ms is the additions' time over the lone starts' (each
    figure the round's mean, ms); the added server is removed again after each, so the
    supervisor's 32 servers keep running, the same processes, and nothing else is left
    running once the suite closes."""
    before = _children()
    with trio.fail_after(120):  # a hang guard: connecting may retry on a loaded machine
        async with _reloads.RELOADS.open() as round_:
            running = _children() - before
            assert len(running) == _reloads.RUNNING
            figures = await round_({_reloads.RELOAD: 2, _reloads.RELOAD_P99: 10})
            assert _children() - before == running
    add, alone = figures[_reloads.RELOAD_ADD], figures[_reloads.RELOAD_ALONE]
    assert 0 < add < math.inf and 0 < alone < math.inf
    assert figures[_reloads.RELOAD] == pytest.approx(add / alone)
    assert 0 < figures[_reloads.RELOAD_P99] < math.inf
    assert not await _no_new_children(before)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_calls_while_reloading_span_an_addition_and_a_removal_at_least() -> None:
    """The calls of reload_p99_ratio's reload phase go on, however few were asked for,
    until an addition and a removal have ended meanwhile; the reloads never stop half way
    and leave the added server removed; the calls all went to the unchanged servers, whose
    processes are the same throughout."""
    done: list[str] = []

    class Logged(_reloads._Reloads):
        async def add(self) -> None:
            await super().add()
            done.append("add")

        async def remove(self) -> None:
            await super().remove()
            done.append("remove")

    base, added, _ = _reloads._configs()
    with trio.fail_after(120):  # a hang guard: connecting may retry on a loaded machine
        async with open_supervisor(base) as sup:
            await sup.connect_all()
            pids = {name: record.pid for name, record in sup.status().items()}
            latencies = await Logged(sup, base, added).calls_while_reloading(1)
            assert {name: record.pid for name, record in sup.status().items()} == pids
            assert sum(m.calls_ok for m in sup.metrics().values()) == len(latencies)
    assert len(latencies) > 1
    assert done[:2] == ["add", "remove"] and len(done) % 2 == 0
    assert done == ["add", "remove"] * (len(done) // 2)


def test_the_p99_is_the_nearest_rank_at_or_above_the_99th_percent() -> None:
    """``_p99`` of 1..100 is the 100th value (rank 99 counting from 0), of 1..1000 the
    991st; of a single latency, that one; the order given does not matter."""
    assert _reloads._p99([float(i) for i in range(100, 0, -1)]) == 100.0
    assert _reloads._p99([float(i) for i in range(1, 1001)]) == 991.0
    assert _reloads._p99([0.5]) == 0.5


def test_recovery_target_is_the_restart_delay_plus_one_and_a_half_connects() -> None:
    """The documented target: recovery_s ≤ restart delay (0) + 1.5 × connect, from the
    medians."""
    assert _servers._recovery_target({_servers.RECOVERY_CONNECT: 0.5}) == "<= 0.750"
    assert _servers._recovery_target({}) is None


def test_rounds_are_spread_evenly() -> None:
    """A suite with r of R rounds runs in r of them, spread out; R of R runs in each."""
    assert [i for i in range(15) if _run._due(i, 5, 15)] == [2, 5, 8, 11, 14]
    assert all(_run._due(i, 15, 15) for i in range(15))
    assert [i for i in range(5) if _run._due(i, 1, 5)] == [4]


async def test_run_bench_opens_a_suite_once_and_reports_each_member() -> None:
    """run_bench opens each suite once around all rounds, runs it its own number of rounds
    (interleaved with plain measurements), gives each member its median and computes a
    target from the medians where one is a function."""
    log: list[str] = []

    @asynccontextmanager
    async def open_fake() -> AsyncIterator[_suite.RoundFn]:
        log.append("open")
        figures = iter(range(1, 100))

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            log.append(f"round {dict(sizes)}")
            value = float(next(figures))
            return {"fake_a": value, "fake_b": value * 10, "ignored": 0.0}

        yield round_
        log.append("close")

    async def plain(n: int) -> float:
        log.append(f"plain {n}")
        return 7.0

    suite = _suite.Suite("fake", open_fake, rounds=9, quick_rounds=2)
    measurements = [
        _suite.Measurement("plain", plain, "<= 8", "x", 30, 30),
        suite.measurement("fake_a", target=None, unit="x", size=3, quick_size=2),
        suite.measurement(
            "fake_b",
            target=lambda medians: f"<= {medians['fake_a'] * 100:g}",
            unit="x",
            size=3,
            quick_size=2,
            note="b is ten times a",
        ),
    ]
    report = await _run.run_bench(quick=True, measurements=measurements)

    assert set(report) == {"plain", "fake_a", "fake_b", "meta", "targets"}
    assert log[0] == "plain 3"  # the plain measurement's warm-up
    assert log[1] == "open" and log[-1] == "close"
    rounds = [entry for entry in log if entry.startswith("round")]
    assert rounds == ["round {'fake_a': 2, 'fake_b': 2}"] * 2
    assert log.count("plain 30") == _suite.QUICK_ROUNDS
    assert (report["fake_a"], report["fake_b"]) == (1.5, 15.0)
    assert report["targets"] == {"plain": "<= 8", "fake_a": None, "fake_b": "<= 150"}
    meta = report["meta"]
    assert isinstance(meta, dict)
    assert meta["rounds_by_key"] == {"plain": _suite.QUICK_ROUNDS, "fake_a": 2, "fake_b": 2}
    assert meta["notes"] == {"fake_b": "b is ten times a"}
    table = _run.format_table(report, measurements)
    assert "<= 150" in table and "fake_b" in table


async def test_a_suite_member_runs_alone_as_a_measurement() -> None:
    """A member's ``run(n)`` opens its suite, measures one round of just that key at size
    n, and closes it again."""
    log: list[object] = []

    @asynccontextmanager
    async def open_fake() -> AsyncIterator[_suite.RoundFn]:
        log.append("open")

        async def round_(sizes: Mapping[str, int]) -> dict[str, float]:
            log.append(dict(sizes))
            return {"a": 1.0, "b": 2.0}

        yield round_
        log.append("close")

    suite = _suite.Suite("fake", open_fake, rounds=1, quick_rounds=1)
    b = suite.measurement("b", target=None, unit="x", size=5, quick_size=5)
    assert await b.run(4) == 2.0
    assert log == ["open", {"b": 4}, "close"]


def test_the_http_gateway_may_cost_at_most_a_third_more_than_a_bare_http_hop() -> None:
    """gateway_http_call_ratio ≤ 1.3 × gateway_bare_http_ratio of the same rounds."""
    from supervisor.bench import _gateway

    assert _gateway.http_call_target({_gateway.GATEWAY_FLOOR: 1.5}) == "<= 1.950"
    assert _gateway.http_call_target({}) is None


def test_every_registered_key_has_a_design_target_or_is_marked_informative() -> None:
    """The documented bench keys this suite measures carry their targets; the absolute in-process
    figures are informative, their ratios against raw trio carry the targets."""
    targets = {m.key: m.target for m in _registry.MEASUREMENTS}
    assert targets["mailbox_call_ratio"] == "<= 1.2"
    assert targets["bus_ratio"] == "<= 1.5"
    assert targets["mailbox_call_us"] is None
    assert targets["bus_events_per_s"] is None
    assert targets["call_overhead_ratio_seq"] == "<= 1.05"
    assert targets["call_overhead_ratio_concurrent"] == "<= 1.05"
    assert targets["startup_8_ratio"] == "<= 1.1"
    assert targets["startup_64_ratio"] == "<= 1.2"
    assert targets["startup_64_restarts"] == "<= 0"
    assert targets["shutdown_8_ratio"] == "<= 1.1"
    assert targets["rss_per_server_kb"] == "<= 300"
    assert callable(targets["recovery_s"])
    assert targets["recovery_ratio"] == "<= 1.5"
    assert targets["recovery_connect_s"] is None
    assert targets["reload_ms"] == "<= 1.2"
    assert targets["reload_add_ms"] is None
    assert targets["reload_alone_ms"] is None
    assert targets["reload_p99_ratio"] == "<= 1.1"
    assert targets["cli_help_ms"] == "<= 200"
    assert targets["cli_help_baseline_ms"] is None
    assert targets["asyncio_call_ratio"] == "<= 1.1"
    assert targets["gateway_call_ratio"] == "<= 1.3"
    assert callable(targets["gateway_http_call_ratio"])
    assert targets["gateway_bare_http_ratio"] is None
    assert targets["gateway_http_throughput_ratio"] is None
    assert targets["gateway_http_cpu_ratio"] == "<= 0.5"
    assert targets["gateway_http_cpu_per_call_ms"] is None
    assert targets["gateway_stateless_ratio"] == "<= 1.0"
    assert targets["gateway_throughput_50x200"] is None
    assert targets["gateway_throughput_50x200_p99_ms"] is None
    assert targets["cli_call_warm_ms"] == "<= 150"
    assert targets["gateway_rss_idle_mb"] is None
    assert targets["gateway_rss_mb"] is None
    assert targets["gateway_session_kb"] is None
    assert targets["gateway_tool_kb"] is None


async def _sessions_become(url: str, count: int) -> int:
    """The gateway's open sessions once they are ``count``, or after 30 s: another
    process's table, read from its ``/metrics`` (the SDK forgets a session just after it
    answers the ``DELETE``), with nothing to wait on but its answer."""
    from supervisor.bench._gateway_memory import sessions_open

    with trio.move_on_after(30):
        while await sessions_open(url) != count:  # noqa: ASYNC110 - another process, bounded
            await trio.sleep(0.02)
    return await sessions_open(url)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_a_gateway_gives_back_the_sessions_its_clients_close(tmp_path: Path) -> None:
    """The sessions of gateway_session_kb, closed, leave a real ``serve --http``'s session
    table as it was, and their memory is reused: three more batches as large, each opened
    and closed after the one before, grow the process by less, together, than the first
    did alone (a gateway that kept what a session holds would grow by as much each time)."""
    from supervisor.bench import _gateway, _gateway_memory

    config = _gateway_memory._write_config(tmp_path / "one", 0)
    token = "bench-test-" + os.urandom(8).hex()
    env = os.environ | {"XDG_RUNTIME_DIR": str(tmp_path / "run"), _gateway._TOKEN_ENV: token}
    before = _children()
    growth = []
    with trio.fail_after(180):  # a hang guard: starting may be slow on a loaded machine
        async with (
            _gateway._serve(config, env) as served,
            _gateway._client(served.url, token, "legacy") as warm,
        ):
            await warm.call_tool("cat1_echo", {"text": "x"})
            assert await _gateway_memory.sessions_open(served.url) == 1
            for _ in range(4):
                start = _memory.process_rss_kb(served.pid)
                async with _gateway_memory.open_sessions(served.url, token, 24):
                    assert await _gateway_memory.sessions_open(served.url) == 25
                assert await _sessions_become(served.url, 1) == 1
                growth.append(_memory.process_rss_kb(served.pid) - start)
    assert growth[0] > 0
    assert sum(growth[1:]) < growth[0], growth
    assert not await _no_new_children(before)


def test_rss_probe_usage() -> None:
    """The fresh-process RSS probe's entry point refuses anything but ``rss N``."""
    assert _memory._main(["rss", "0"]) == 2
    assert _memory._main([]) == 2


def _stub_timer(per_op: float, log: list[tuple[str, int]], name: str) -> _alternate.Timer:
    async def timer(n: int) -> float:
        log.append((name, n))
        return per_op * n

    return timer


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        pytest.param(
            _inprocess.mailbox_figures,
            {"mailbox_call_us": 3.0, "mailbox_call_ratio": 1.5},
            id="mailbox",
        ),
        pytest.param(
            _inprocess.bus_figures,
            {"bus_events_per_s": 1 / 3e-6, "bus_ratio": 1.5},
            id="bus",
        ),
    ],
)
async def test_an_in_process_round_times_ours_and_raw_alternately_and_divides(
    figures: _inprocess.Figures, expected: dict[str, float]
) -> None:
    """A round times both contenders on the same pieces of n, alternating ABBA (the other
    one first in the next round), and reports ours ÷ raw: ours at 3 µs per operation
    against raw at 2 µs gives 1.5 (for the bus, raw events/s ÷ ours), plus ours alone."""
    log: list[tuple[str, int]] = []
    round_ = _inprocess._contest(
        _stub_timer(3e-6, log, "ours"), _stub_timer(2e-6, log, "raw"), figures
    )
    got = await round_({key: 1000 for key in expected})
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value), key
    assert [name for name, _ in log] == ["ours", "raw", "raw", "ours"] * 2
    assert sum(n for name, n in log if name == "raw") == 1000
    assert sum(n for name, n in log if name == "ours") == 1000
    log.clear()
    await round_({key: 1000 for key in expected})
    assert [name for name, _ in log] == ["raw", "ours", "ours", "raw"] * 2


async def test_the_raw_request_reply_echoes_through_a_server_task() -> None:
    """The raw mailbox baseline really makes the round trip: each call's reply is its own
    message, as the echo actor's is."""
    with trio.fail_after(10):
        async with _inprocess._open_raw_echo() as call:
            assert [await call(i) for i in range(5)] == list(range(5))


async def test_the_raw_fan_out_delivers_every_event_to_every_reader() -> None:
    """The raw bus baseline returns only once all 10 readers got all n events, and fails
    if a reader's channel ends short."""
    with trio.fail_after(10):
        assert await _inprocess._raw_fanout_s(100) > 0
    with pytest.raises(RuntimeError, match="got 3 of 5"):
        send, receive = trio.open_memory_channel[object](5)
        for i in range(3):
            send.send_nowait(i)
        send.close()
        await _inprocess._consume(receive, 5)


@pytest.mark.parametrize(
    "suite",
    [pytest.param(_inprocess.MAILBOX, id="mailbox"), pytest.param(_inprocess.BUS, id="bus")],
)
async def test_an_in_process_suite_reports_ours_and_the_ratio(suite: _suite.Suite) -> None:
    """Each in-process suite, opened once, gives both its keys on tiny rounds: positive,
    finite figures (no speed asserted)."""
    keys = [m.key for m in _registry.MEASUREMENTS if m.suite is suite]
    assert len(keys) == 2
    with trio.fail_after(30):
        async with suite.open() as round_:
            for _ in range(2):
                got = await round_({key: 40 for key in keys})
                for key in keys:
                    assert 0 < got[key] < math.inf, key


def test_the_readme_lists_every_key_with_its_target() -> None:
    """README's Benchmarks table has a row per key, with its fixed target or ``—``."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    rows = {
        cells[0].strip("` "): cells[-1].strip()
        for line in section.splitlines()
        if line.startswith("| `")
        for cells in [line.strip("|").split(" | ")]
    }
    for m in _registry.MEASUREMENTS:
        assert m.key in rows, m.key
        if m.target is None:
            assert rows[m.key] == "—", m.key
        elif isinstance(m.target, str):
            op, number = m.target.split()
            assert rows[m.key] == f"{'≤' if op == '<=' else '≥'} {number}", m.key


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs schedstat")
def test_a_process_s_cpu_is_read_finer_than_a_clock_tick_and_over_its_threads() -> None:
    """The gateway's CPU per call is read from a few calls on a tiny round: a millisecond
    of work, a tenth of a clock tick, reads as that millisecond, not as 0 (which failed the
    tiny round above); and a thread's work counts for its process."""
    import threading
    import time

    from supervisor.bench._gateway import _cpu_seconds

    def work(seconds: float) -> None:
        until = time.thread_time() + seconds
        while time.thread_time() < until:
            pass

    before = _cpu_seconds(os.getpid())
    work(0.001)
    used = _cpu_seconds(os.getpid()) - before
    assert 0.0009 <= used < 0.5

    worked, done = threading.Event(), threading.Event()

    def in_a_thread() -> None:
        work(0.02)
        worked.set()
        done.wait()  # alive while it is read: a thread that has ended takes its time along

    before = _cpu_seconds(os.getpid())
    thread = threading.Thread(target=in_a_thread)
    thread.start()
    try:
        assert worked.wait(30)
        assert _cpu_seconds(os.getpid()) - before >= 0.02
    finally:
        done.set()
        thread.join()
