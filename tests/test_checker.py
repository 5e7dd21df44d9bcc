"""The call history, the checker and the reports (``supervisor.faults``).

A real supervisor over real fixture servers records its calls — ok, a tool error, calls
refused before sending, a server that failed, a server killed with a call in flight, a
call cancelled once sent — and the checker finds nothing wrong with that run. Then the
checker's own tests: a duplicated execution, a lost reply, a call past its deadline,
restarts beyond the intensity, a catalog out of step, a process left behind and growing
resources are each reported (each test fails without the checker's logic for it). Last,
the HTML report in headless Chromium: one timeline per server.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from pathlib import Path

import attrs
import msgspec
import pytest
import trio
import trio.testing
from mcp import Client

from supervisor import (
    ApprovalRequired,
    CallMayHaveTakenEffect,
    ServerUnavailable,
    ToolArgumentsInvalid,
    ToolError,
    UnknownTool,
    open_supervisor,
)
from supervisor.actors import Intensity
from supervisor.errors import (
    ApprovalDenied,
    ServerRequestError,
    ToolCallTimeout,
    ToolOutputInvalid,
)
from supervisor.events._catalog import (
    ChildRestarted,
    Connected,
    Connecting,
    Disconnected,
    LocalCrashed,
)
from supervisor.faults import CallHistory, ResourceSampler, check, write_html, write_json
from supervisor.faults._checker import (
    ResourceSample,
    Verdict,
    leftover_processes,
    spawned_pids,
    timed_events,
)
from supervisor.faults._report import render_html, server_states
from supervisor.testing.servers import (
    count_executions,
    executions_by_call,
    make_server,
    stdio_params,
)
from supervisor.tools._outcome import CALL_ID_META, classify

from .browser import chromium_or_skip, open_browser

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


# -- one real run, shared by the tests that read it ---------------------------------------


@attrs.frozen
class Run:
    """What the scenario left: its history, count file, catalog sets and the pids."""

    history: CallHistory
    count_file: Path
    catalog: tuple[frozenset[str], frozenset[str]]
    killed_pid: int
    sampler: ResourceSampler


def fixture(kind: str, count_file: Path, **fields: object) -> dict[str, object]:
    command, args = stdio_params(kind, count_file=count_file)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **fields}


async def scenario(count_file: Path) -> Run:
    """Three servers — ``calc`` (rich), ``slow``, ``bad`` (exits at start, never
    restarted) — and a call of every outcome."""
    config = {
        "supervisor": {"backoff": {"local": {"initial": 0.1}}},
        "mcpServers": {
            "calc": fixture("rich", count_file),
            "slow": fixture("slow", count_file),
            "bad": fixture("exit-on-start", count_file, restart="temporary"),
        },
    }
    history = CallHistory()
    sampler = ResourceSampler()
    sampler.sample()
    async with open_supervisor(config, history=history) as sup:
        await sup.connect_all()
        sampler.sample()
        assert (await sup.call("calc_add", {"a": 1, "b": 2})).text == "3"
        with pytest.raises(ToolError):
            await sup.call("calc_fail", {"message": "no such note"})
        with pytest.raises(ToolArgumentsInvalid):
            await sup.call("calc_add", {"a": "one", "b": 2})
        with pytest.raises(UnknownTool):
            await sup.call("nothing_here")
        with pytest.raises(ApprovalRequired):
            await sup.call("calc_wipe")
        with pytest.raises(ServerUnavailable):
            await sup.call("bad_echo", {"text": "x"})

        # kill -9 with a call running: its first progress note proves it is executing.
        running = trio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            running.set()

        killed_pid = sup.status()["slow"].pid
        assert killed_pid is not None

        async def sleep_then_die() -> None:
            with pytest.raises(CallMayHaveTakenEffect):
                await sup.call("slow_sleep", {"seconds": 60, "steps": 600}, progress=progress)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleep_then_die)
            await running.wait()
            os.kill(killed_pid, signal.SIGKILL)
        assert (await sup.call("slow_echo", {"text": "back"})).text == "back"

        # Cancelled by its caller once sent (its first progress note says it runs).
        running = trio.Event()
        with trio.CancelScope() as scope:

            async def cancel_once_running() -> None:
                await running.wait()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_once_running)
                await sup.call("slow_sleep", {"seconds": 60, "steps": 600}, progress=progress)
        assert scope.cancelled_caught
        sampler.sample()

        await sup.tools()  # quiet: every server connected or failed, the catalog merged
        listed = frozenset(sup.catalog)
        offered = frozenset(
            f"{name}_{tool.name}"
            for name, view in sup.servers.items()
            if view.status() == "connected"
            for tool in view.tools
        )
    sampler.sample()
    return Run(history, count_file, (listed, offered), killed_pid, sampler)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The scenario, run once for the module (its own trio run)."""
    count_file = tmp_path_factory.mktemp("checker") / "executions"
    return trio.run(scenario, count_file)


def outcomes(history: CallHistory) -> list[tuple[str, str | None, str | None, bool]]:
    return [(c.tool, c.server, c.outcome, c.is_error) for c in history.calls]


# -- the history of a real run ------------------------------------------------------------


def test_every_call_is_recorded_once_with_its_outcome(run: Run) -> None:
    """ok (a tool error too: it ran), fail (refused before sending, unknown, a failed
    server), info (killed in flight, cancelled once sent): one record per call."""
    assert outcomes(run.history) == [
        ("calc_add", "calc", "ok", False),
        ("calc_fail", "calc", "ok", True),
        ("calc_add", "calc", "fail", False),
        ("nothing_here", None, "fail", False),
        ("calc_wipe", "calc", "fail", False),
        ("bad_echo", "bad", "fail", False),
        ("slow_sleep", "slow", "info", False),
        ("slow_echo", "slow", "ok", False),
        ("slow_sleep", "slow", "info", False),
    ]
    calls = run.history.calls
    assert len({c.call_id for c in calls}) == len(calls)
    assert all(c.ended_at is not None and c.ended_at >= c.invoked_at for c in calls)
    refused = [c for c in calls if c.outcome == "fail"]
    assert all(c.sent_at is None and c.deadline is None for c in refused)  # never handed over
    assert [c.error.partition(":")[0] for c in refused] == [  # type: ignore[union-attr]
        "ToolArgumentsInvalid",
        "UnknownTool",
        "ApprovalRequired",
        "ServerUnavailable",
    ]
    killed, cancelled = calls[6], calls[8]
    assert killed.error is not None and killed.error.startswith("CallMayHaveTakenEffect:")
    assert cancelled.error is not None and cancelled.error.startswith("Cancelled")
    assert all(c.sent_at is not None and c.deadline is not None for c in (killed, cancelled))
    assert calls[0].original == "add" and calls[0].deadline == pytest.approx(
        calls[0].sent_at + 30.0  # type: ignore[operator]
    )


def test_the_servers_count_executions_per_call_id(run: Run) -> None:
    """The call id reached the server in ``_meta``: the executions that were recorded
    (a fixture records before answering) are the answered calls', once each."""
    by_call = executions_by_call(run.count_file)
    calls = run.history.calls
    assert by_call == {calls[0].call_id: 1, calls[1].call_id: 1, calls[7].call_id: 1}
    assert count_executions(run.count_file) == {"add": 1, "fail": 1, "echo": 1}


def test_the_history_keeps_the_events_on_its_clock(run: Run) -> None:
    """Every event published meanwhile, in order, at trio times within the run."""
    history = run.history
    kinds = [(e.kind, getattr(e, "server", None)) for _, e in history.events]
    assert ("mcp.local.crashed", "slow") in kinds
    assert ("supervisor.child.restarted", None) in kinds
    times = [t for t, _ in history.events]
    assert times == sorted(times) and history.origin is not None
    assert times[0] >= history.origin and times[-1] >= max(c.ended_at for c in history.calls)  # type: ignore[type-var]
    assert run.killed_pid in spawned_pids(history.events)


def test_the_real_run_passes_every_check(run: Run) -> None:
    """Nothing lost or duplicated, no deadline outlived, restarts within the limit, the
    catalog the connected servers' tools, no server process left, resources bounded."""
    verdict = check(
        run.history,
        executions=executions_by_call(run.count_file),
        restart_limits={"*": Intensity(max_restarts=3, within_seconds=60)},
        catalog=run.catalog,
        processes=spawned_pids(run.history.events),
        resources=run.sampler,
        max_rss_growth_kb=512 * 1024,
        max_fd_growth=64,
    )
    assert verdict.ok, str(verdict)
    assert verdict.problems == []
    assert verdict.checked == [
        "calls",
        "deadlines",
        "executions",
        "restarts",
        "catalog",
        "processes",
        "resources",
    ]
    calc, slow, bad = (verdict.servers[name] for name in ("calc", "slow", "bad"))
    assert list(verdict.servers) == ["calc", "bad", "slow"]  # order of first call
    assert (calc.calls, calc.ok, calc.tool_errors, calc.failed, calc.indefinite) == (4, 2, 1, 2, 0)
    assert (slow.calls, slow.ok, slow.indefinite, slow.restarts) == (3, 1, 2, 1)
    assert (bad.calls, bad.failed, bad.restarts) == (1, 1, 0)
    assert verdict.unresolved is not None
    assert (verdict.unresolved.calls, verdict.unresolved.failed) == (1, 1)
    assert verdict.summary().startswith("OK: 9 calls to 3 servers: 3 ok (1 tool error), 4 failed")
    assert len(run.catalog[0]) > 5  # calc's and slow's tools


async def test_the_json_report_reads_back_to_the_same_verdict(run: Run, tmp_path: Path) -> None:
    executions = executions_by_call(run.count_file)
    verdict = check(run.history, executions=executions)
    path = write_json(tmp_path / "run.json", verdict, run.history)
    data = json.loads(path.read_text())
    assert data["verdict"]["ok"] is True and data["faults"] == []
    assert len(data["history"]["calls"]) == 9
    assert {"t", "kind", "ts"} <= set(data["history"]["events"][0])
    again = CallHistory.from_builtins(data["history"])
    assert again.calls == run.history.calls
    assert [(t, e) for t, e in again.events] == run.history.events
    assert check(again, executions=executions) == verdict
    assert json.loads(verdict.to_json()) == data["verdict"]
    assert again.invoke("calc_add").call_id not in {c.call_id for c in run.history.calls}


# -- classification -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "sent", "expected"),
    [
        (ToolError("x", tool="t", text="x"), True, ("ok", True)),
        (ToolOutputInvalid("t", []), True, ("ok", False)),
        (UnknownTool("no tool"), False, ("fail", False)),
        (ToolArgumentsInvalid("t", []), False, ("fail", False)),
        (ApprovalDenied("no", server="s", tool="t", reason="r"), False, ("fail", False)),
        (ApprovalRequired("no", server="s", tool="t", reason="r"), False, ("fail", False)),
        (ServerUnavailable("down", server="s"), True, ("fail", False)),
        (ServerRequestError("refused", server="s", code=-32602), True, ("fail", False)),
        (CallMayHaveTakenEffect.during("s", "t"), True, ("info", False)),
        (ToolCallTimeout("slow", server="s", tool="t", timeout=1.0), True, ("info", False)),
        (RuntimeError("a bug"), True, ("info", False)),
        (RuntimeError("a bug"), False, ("fail", False)),
        (ExceptionGroup("one", [ToolError("x", tool="t", text="x")]), True, ("ok", True)),
    ],
)
def test_each_error_has_its_outcome(error: Exception, sent: bool, expected: tuple) -> None:
    assert classify(error, sent=sent) == expected


def test_an_outcome_is_final() -> None:
    history = CallHistory(prefix="t", clock=iter(range(100)).__next__)
    record = history.invoke("a_b")
    history.info(record, "CallMayHaveTakenEffect: died")
    history.ok(record)  # a late second answer changes nothing
    assert (record.call_id, record.outcome, record.ended_at) == ("t-1", "info", 1)
    assert record.meta() == {CALL_ID_META: "t-1"}


# -- the checker's own tests: each finds what it must -------------------------------------


async def test_a_duplicated_execution_is_reported(tmp_path: Path) -> None:
    """A server that executes one call twice (the same call id sent twice, as a replaying
    proxy would) is caught through its count file; and so is a second line written into
    a real run's count file by hand."""
    count_file = tmp_path / "executions"
    history = CallHistory(prefix="dup")
    once, twice = history.invoke("e_echo", server="e"), history.invoke("e_echo", server="e")
    async with Client(make_server("echo", count_file=count_file)) as client:
        for record in (once, twice, twice):
            await client.call_tool("echo", {"text": "hi"}, meta=record.meta())
            history.ok(record)
    verdict = check(history, executions=executions_by_call(count_file))
    assert not verdict.ok
    assert verdict.servers["e"].duplicated == {"dup-2": 2}
    (problem,) = verdict.problems
    assert problem.startswith("call dup-2 (e_echo, invoked at ")
    assert problem.endswith("on server 'e' was executed 2 times: duplicated")
    # Without the executions there is nothing to go by.
    assert check(history).ok


def test_a_duplicate_written_into_a_real_count_file_is_reported(run: Run, tmp_path: Path) -> None:
    count_file = tmp_path / "executions"
    first = run.history.calls[0]
    count_file.write_text(run.count_file.read_text() + f"add\t{first.call_id}\n")
    verdict = check(run.history, executions=executions_by_call(count_file))
    assert not verdict.ok
    assert verdict.servers["calc"].duplicated == {first.call_id: 2}
    assert [p for p in verdict.problems if "duplicated" in p] == verdict.problems


def test_a_refused_call_that_ran_all_the_same_is_reported(run: Run) -> None:
    refused = run.history.calls[2]  # ToolArgumentsInvalid: never sent
    executions = {**executions_by_call(run.count_file), refused.call_id: 1}
    verdict = check(run.history, executions=executions)
    assert verdict.servers["calc"].executed_though_failed == [refused.call_id]
    (problem,) = verdict.problems
    assert "was reported as not executed (ToolArgumentsInvalid: " in problem
    assert problem.endswith("but was executed 1 time")


async def test_a_lost_reply_is_reported(autojump_clock: trio.testing.MockClock) -> None:
    """A call handed over whose answer never comes (the caller hangs, nothing records an
    outcome): in flight until its deadline (plus the slack), lost after it — and lost
    at the end of the run whatever its deadline."""
    history = CallHistory(prefix="l")
    history.start()
    answered = history.invoke("s_echo", server="s")
    history.sent(answered, deadline=history.now() + 5)

    async def hangs() -> None:
        record = history.invoke("s_echo", server="s")
        history.sent(record, deadline=history.now() + 5)
        await trio.sleep_forever()  # the reply was dropped

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hangs)
        await trio.sleep(1)
        history.ok(answered)
        assert check(history, now=trio.current_time()).ok  # still in time
        assert check(history, now=trio.current_time()).servers["s"].in_flight == 1
        await trio.sleep(5)  # past its deadline and the slack
        verdict = check(history, now=trio.current_time())
        nursery.cancel_scope.cancel()
    assert not verdict.ok
    assert verdict.servers["s"].lost == ["l-2"]
    assert verdict.problems == [
        "call l-2 (s_echo, invoked at 0.000 s) to server 's' was lost: no answer and no "
        "error by its deadline"
    ]
    over = check(history)  # the run is over: no outcome means lost
    assert over.servers["s"].lost == ["l-2"] and "by the end of the run" in over.problems[0]


async def test_a_call_that_outlived_its_deadline_is_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Answered 2 s after its deadline: reported; 0.2 s after it is within the slack."""
    history = CallHistory(prefix="d")
    history.start()
    late, close = history.invoke("s_a", server="s"), history.invoke("s_b", server="s")
    for record in (late, close):
        history.sent(record, deadline=history.now() + 1)
    await trio.sleep(1.2)
    history.ok(close)
    await trio.sleep(1.8)
    history.fail(late, "ServerRequestError: too late")
    verdict = check(history)
    assert verdict.servers["s"].late == ["d-1"]
    assert verdict.problems == [
        "call d-1 (s_a, invoked at 0.000 s) to server 's' outlived its deadline: it ended "
        "2.000 s after it (fail), more than the 0.5 s allowed"
    ]
    assert check(history, deadline_slack=2.5).ok


def restarts_at(*times: float, child: str = "s") -> list[tuple[float, ChildRestarted]]:
    return [
        (t, ChildRestarted(supervisor="servers", child=child, strategy="one_for_one",
                           restarts=n, reason="crashed"))
        for n, t in enumerate(times, 1)
    ]  # fmt: skip


def test_restarts_beyond_the_intensity_are_reported() -> None:
    """Counted in a sliding window, per child; ``"*"`` for any child not named."""
    history = CallHistory()
    events = restarts_at(0, 1, 2, 3) + restarts_at(0, 10, 20, 30, child="t")
    verdict = check(history, events=events, restart_limits={"*": (3, 5)})
    assert verdict.problems == [
        "'s' was restarted 4 times between 0.000 s and 3.000 s, more than its intensity "
        "allows (3 in 5 s)"
    ]
    assert verdict.servers == {}  # restarts of children that are not servers: notes
    assert "'s' was restarted 4 times" in verdict.notes
    assert check(history, events=events, restart_limits={"s": (4, 5), "t": (1, 5)}).ok
    unlimited = check(history, events=events, restart_limits=Intensity.unlimited())
    assert unlimited.ok
    assert not check(history, events=events, restart_limits=Intensity(3, math.inf)).ok


def test_a_catalog_out_of_step_is_reported() -> None:
    verdict = check(CallHistory(), catalog=({"a_x", "c_z"}, {"a_x", "b_y"}))
    assert verdict.problems == [
        "the catalog is not the union of the connected servers' tools once quiet: missing "
        "b_y; listing c_z, which no connected server offers"
    ]
    assert check(CallHistory(), catalog=({"a_x"}, ["a_x"])).ok


async def test_a_process_left_behind_is_reported() -> None:
    """A live child process is reported (by pid, name and command line); once it is gone
    — or a zombie not reaped yet — it is not; a check function may say instead."""
    script = "import sys; print('running', flush=True); sys.stdin.read()"
    process = await trio.lowlevel.open_process([sys.executable, "-c", script], stdin=-1, stdout=-1)
    try:
        assert process.stdout is not None
        with trio.fail_after(60):  # its command line is its own once it runs the script
            assert (await process.stdout.receive_some(100)).startswith(b"running")
        (left,) = leftover_processes([process.pid])
        assert left.startswith(f"pid {process.pid} (") and script in left
        verdict = check(CallHistory(), processes=[process.pid])
        # the state letter is read again and may change between the reads (S, R)
        (problem,) = verdict.problems
        state = re.compile(r", state \w\)")
        assert state.sub(", state ?)", problem) == state.sub(
            ", state ?)", f"a process was left behind: {left}"
        )
    finally:
        process.kill()
        await process.wait()
    assert leftover_processes([process.pid]) == []
    assert check(CallHistory(), processes=[process.pid]).ok
    assert not check(CallHistory(), processes=lambda: ["pid 1 (init)"]).ok


async def test_growing_resources_are_reported() -> None:
    """Open descriptors that grow after the warm-up are caught; the same samples pass a
    looser bound; memory is judged from the samples alike."""
    sampler = ResourceSampler()
    sampler.sample()  # warm-up
    sampler.sample()
    pipes = [os.pipe() for _ in range(10)]
    try:
        sampler.sample()
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
    rss, fds = sampler.growth()
    assert fds is not None and fds >= 20 and rss is not None
    verdict = check(CallHistory(), resources=sampler, max_fd_growth=5)
    (problem,) = verdict.problems
    assert problem.startswith(f"open file descriptors grew by {fds} over ")
    assert problem.endswith("after the warm-up, more than the 5 allowed")
    assert check(CallHistory(), resources=sampler, max_fd_growth=fds).ok

    fake = ResourceSampler(clock=lambda: 0.0)
    kib = [900, 100, 150, 5000]  # the warm-up sample, then a jump at the end
    fake.samples += [ResourceSample(t=t, rss_kb=kb, fds=9) for t, kb in enumerate(kib)]
    assert fake.growth() == (4900, 0)
    assert fake.check(max_rss_growth_kb=1000) == [
        "resident memory grew by 4900 KiB over 2.0 s after the warm-up, more than the "
        "1000 KiB allowed"
    ]
    assert "too few" in ResourceSampler().check(max_fd_growth=1)[0]


async def test_the_sampler_samples_on_trio_clock(autojump_clock: trio.testing.MockClock) -> None:
    sampler = ResourceSampler()
    async with trio.open_nursery() as nursery:
        await nursery.start(sampler.run, 1.0)
        await trio.sleep(3.5)
        nursery.cancel_scope.cancel()
    assert [s.t for s in sampler.samples] == [0.0, 1.0, 2.0, 3.0]
    assert all(s.rss_kb and s.fds for s in sampler.samples)


# -- the report ---------------------------------------------------------------------------


class Injected(msgspec.Struct, frozen=True):
    """The injected fault record's shape (the engine's own class is not needed here)."""

    seq: int
    t: float
    rule: int
    action: str
    direction: str | None
    method: str | None
    id: int | str | None
    tool: str | None
    server: str | None
    detail: str = ""


def faults_of(run: Run) -> list[object]:
    """Fault records placed where the run's events and calls were: the kill, a delayed
    answer and a garbage line (as structs and as dicts, both accepted)."""
    history = run.history
    origin = history.origin or 0.0
    crashed = next(
        t for t, e in history.events if isinstance(e, LocalCrashed) and e.server == "slow"
    )
    first = history.calls[0]
    return [
        Injected(seq=1, t=first.invoked_at - origin, rule=0, action="delay",
                 direction="to_client", method="tools/call", id=3, tool="add",
                 server="calc", detail="delay 5 ms"),
        {"seq": 2, "t": crashed - origin, "rule": 1, "action": "kill", "direction": None,
         "method": None, "id": None, "tool": "sleep", "server": "slow",
         "detail": "kill -9 <script>alert('x')</script>"},
        {"seq": 3, "t": crashed - origin + 0.05, "rule": 2, "action": "garbage_line",
         "direction": "to_client", "method": None, "id": None, "tool": None, "server": "slow",
         "detail": "not JSON & <b>bold</b>"},
    ]  # fmt: skip


async def test_the_html_report_in_chromium_has_a_timeline_per_server(
    run: Run, tmp_path: Path
) -> None:
    """Self-contained (no script, nothing fetched), escaped, readable: the verdict on
    top, one timeline per server with its state bands, its faults and its calls."""
    chromium = chromium_or_skip()
    faults = faults_of(run)
    verdict = check(run.history, executions=executions_by_call(run.count_file), faults=faults)
    page = write_html(tmp_path / "report.html", verdict, run.history, faults=faults)
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    async with open_browser(chromium, width=1280, height=900) as browser:
        tab = await browser.new_page()
        await tab.navigate(page.as_uri())
        await tab.wait_for("document.querySelector('footer')")
        shown = await tab.evaluate(
            """[...document.querySelectorAll('section.timeline')].map(s => ({
                server: s.dataset.server,
                states: [...s.querySelectorAll('rect.state')].map(r => r.dataset.state),
                faults: s.querySelectorAll('polygon.fault').length,
                calls: s.querySelectorAll('.call').length,
                restarts: s.querySelectorAll('line.restart').length,
                width: s.querySelector('svg').getBoundingClientRect().width,
            }))"""
        )
        assert [s["server"] for s in shown] == ["calc", "bad", "slow"]  # type: ignore[index]
        by = {s["server"]: s for s in shown}  # type: ignore[index]
        assert (by["calc"]["calls"], by["bad"]["calls"], by["slow"]["calls"]) == (4, 1, 3)
        assert (by["calc"]["faults"], by["bad"]["faults"], by["slow"]["faults"]) == (1, 0, 2)
        assert by["slow"]["restarts"] == 1
        assert {"connecting", "connected", "disconnected"} <= set(by["slow"]["states"])
        assert "failed" in by["bad"]["states"] and "connected" in by["calc"]["states"]
        assert all(s["width"] > 1000 for s in shown)  # type: ignore[index]
        assert await tab.evaluate("document.body.dataset.verdict") == "ok"
        assert await tab.evaluate("document.querySelectorAll('script').length") == 0
        assert await tab.evaluate(
            "document.querySelector('section.faults').textContent.includes(\"<script>\")"
        )
        assert await tab.evaluate("document.querySelectorAll('tr[data-server]').length") == 3
        shot = await tab.screenshot(ARTIFACTS / "faults-report.png")
        assert tab.console == [], tab.console
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
    print(f"\nfaults report screenshot: {shot}")


def test_a_failed_verdict_shows_its_problems_and_lost_calls() -> None:
    history = CallHistory(prefix="x", clock=iter([0.0, 1.0, 2.0, 3.0, 4.0]).__next__)
    history.start()
    lost = history.invoke("s_echo", server="s")
    history.sent(lost, deadline=2.0)
    verdict = check(history)
    assert isinstance(verdict, Verdict) and not verdict.ok
    page = render_html(verdict, history, title="run <1>")
    assert "<title>run &lt;1&gt;</title>" in page
    assert 'data-verdict="failed"' in page and "FAILED" in page
    assert page.count('class="call lost"') == 1
    assert "x-1 (s_echo, invoked at 1.000 s) to server &#x27;s&#x27; was lost" in page


def test_states_follow_the_events() -> None:
    """connecting → connected → down (crash) → connecting → connected → stopped."""
    events = [
        (1.0, Connecting(server="s", attempt=0, max_attempts=5)),
        (2.0, Connected(server="s", tool_count=1, connect_time=1.0)),
        (3.0, LocalCrashed(server="s", exit_code=-9)),
        (3.5, Connecting(server="s", attempt=1, max_attempts=5)),
        (4.0, Connected(server="s", tool_count=1, connect_time=0.5)),
        (5.0, Disconnected(server="s", reason="stopped", was_clean=True)),
        (5.0, Connected(server="other", tool_count=1, connect_time=0.5)),
    ]
    # Events as pairs, as dicts with their time, or by their unix time alone.
    history = CallHistory(clock=lambda: 100.0)
    history.start()
    assert history.origin_wall is not None
    placed = timed_events(
        [
            {"kind": "mcp.connecting", "server": "s", "t": 101.0},
            Connected(ts=history.origin_wall + 0.5, server="s", tool_count=1, connect_time=0.5),
            (100.25, Connecting(server="s", attempt=0, max_attempts=5)),
        ],
        history,
    )
    assert [(t, f["kind"]) for t, f in placed] == [
        (100.25, "mcp.connecting"),
        (pytest.approx(100.5), "mcp.connected"),
        (101.0, "mcp.connecting"),
    ]
    assert server_states(timed_events(events), "s", 0.0, 6.0) == [
        (0.0, 1.0, "idle"),
        (1.0, 2.0, "connecting"),
        (2.0, 3.0, "connected"),
        (3.0, 3.5, "disconnected"),
        (3.5, 4.0, "connecting"),
        (4.0, 5.0, "connected"),
        (5.0, 6.0, "stopped"),
    ]
