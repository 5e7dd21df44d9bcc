"""Start-up at scale: few servers connect at once, in start order; restarts are jittered."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.config import load_config
from supervisor.config._model import Settings
from supervisor.errors import ConfigError
from supervisor.events._catalog import Event
from supervisor.faults import Injector
from supervisor.runtime import open_supervisor
from supervisor.server._startup import StartSlots
from supervisor.testing.servers import make_server
from supervisor.testing.servers.tiny import max_overlap, tiny_server

# -- the slots themselves ----------------------------------------------------------------


async def test_start_slots_are_served_in_the_order_the_turns_were_taken(
    autojump_clock: object,
) -> None:
    """Turns taken together hold a slot in the order they were taken, whatever order the
    scheduler runs their waiting tasks in, and never more than the limit at once."""
    slots = StartSlots(2)
    turns = [slots.turn() for _ in range(6)]
    order: list[int] = []
    holding = most = 0

    async def connect(i: int) -> None:
        nonlocal holding, most
        await turns[i].wait()
        order.append(i)
        holding += 1
        most = max(most, holding)
        await trio.sleep(1 + i / 10)  # no two release at the same moment
        holding -= 1
        turns[i].close()

    async with trio.open_nursery() as nursery:
        for i in reversed(range(6)):
            nursery.start_soon(connect, i)
    assert sorted(order[:2]) == [0, 1] and order[2:] == [2, 3, 4, 5]
    assert most == 2
    assert slots.statistics() == (0, 0)


def test_a_turn_given_up_while_waiting_leaves_the_queue() -> None:
    """Closing a turn that never got a slot lets the next one have it; closing twice is
    harmless."""
    slots = StartSlots(1)
    first, second, third = slots.turn(), slots.turn(), slots.turn()
    assert first.holding and not second.holding
    second.close()
    second.close()
    first.close()
    assert third.holding
    assert slots.statistics() == (1, 0)


# -- the config --------------------------------------------------------------------------


def test_startup_concurrency_defaults_to_4_and_rejects_0() -> None:
    """supervisor.startupConcurrency is 4 unless set; below 1 is an error naming the field."""
    assert Settings().startup_concurrency == 4
    config = load_config({"mcpServers": {}, "supervisor": {"startupConcurrency": 9}})
    assert config.settings.startup_concurrency == 9
    with pytest.raises(ConfigError, match=r"supervisor\.startupConcurrency"):
        load_config({"mcpServers": {}, "supervisor": {"startupConcurrency": 0}})


def test_restart_jitter_defaults_to_a_fifth() -> None:
    """Local and remote restart delays are jittered by 0.2 unless configured otherwise,
    in the settings and in every server built from them."""
    settings = Settings()
    assert settings.local_backoff.jitter == settings.remote_backoff.jitter == 0.2
    config = load_config(
        {"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://example.com/mcp"}}}
    )
    assert config.servers["a"].backoff.jitter == config.servers["b"].backoff.jitter == 0.2


# -- real processes, counted by the servers themselves ---------------------------------------


@pytest.mark.parametrize("limit", [None, 2], ids=["default", "two"])
async def test_at_most_the_startup_concurrency_servers_handshake_at_once(
    tmp_path: Path, limit: int | None
) -> None:
    """10 eager stdio servers start with at most 4 (or startupConcurrency) between spawn
    and their first listing at once, as the servers record it; one that cannot start
    hides no other server's tools."""
    log = tmp_path / "starts.log"
    servers: dict[str, object] = {f"s{i}": tiny_server(log=log) for i in range(10)}
    servers["broken"] = {"command": str(tmp_path / "missing"), "lazy": False}
    config: dict[str, object] = {"mcpServers": servers}
    if limit is not None:
        config["supervisor"] = {"startupConcurrency": limit}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        status = sup.status()
        tools = set(await sup.tools())
    assert status["broken"].status == "failed"
    assert all(status[f"s{i}"].status == "connected" for i in range(10))
    assert {f"s{i}_echo" for i in range(10)} <= tools
    assert log.read_text().count("end ") == 10
    assert max_overlap(log) <= (limit or 4)


async def test_64_cheap_servers_all_connect_with_default_settings() -> None:
    """64 eager stdio servers, default settings (but the 32-server limit, raised): every one
    connects, none restarts and none records an error."""
    config = {
        "mcpServers": {f"s{i}": tiny_server() for i in range(64)},
        "supervisor": {"limits": {"maxServers": 64}},
    }
    async with open_supervisor(config) as sup:
        with trio.fail_after(120):
            await sup.connect_all()
        status = sup.status()
        assert len(await sup.tools()) == 128
    assert sorted({r.status for r in status.values()}) == ["connected"]
    assert sum(r.restarts for r in status.values()) == 0
    assert sum(r.error_count for r in status.values()) == 0


# -- in process, on trio's mock clock ------------------------------------------------------


class Recorder:
    """Events of a subscription with the trio time they arrived (under the autojump
    clock: the time they were published)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Event]] = []
        self._arrived = trio.Event()

    async def run(self, events: object) -> None:
        async for event in events:  # type: ignore[attr-defined]
            self.seen.append((trio.current_time(), event))
            self._arrived.set()
            self._arrived = trio.Event()

    async def wait_for(self, kind: str, count: int) -> None:
        """Return once ``count`` events of ``kind`` arrived."""
        while len(self.times(kind)) < count:
            await self._arrived.wait()

    def times(self, kind: str, server: str | None = None) -> list[float]:
        return [
            t
            for t, e in self.seen
            if e.kind == kind and (server is None or getattr(e, "server", None) == server)
        ]


async def test_init_timeout_runs_from_the_start_slot(autojump_clock: object) -> None:
    """A server queued behind slow handshakes longer than its initTimeout is not timed
    out: its timeout starts when it gets its slot."""
    # Each takes 6 s to list its tools; one at a time, the last waits 12 s for its slot.
    slow = {"rules": [{"when": {"method": "tools/list", "nth": 1}, "do": {"delay_ms": 6000}}]}
    config = {"mcpServers": {}, "supervisor": {"startupConcurrency": 1, "initTimeout": 10}}
    apps = {name: make_server("echo") for name in ("a", "b", "c")}
    recorder = Recorder()
    async with (
        open_supervisor(
            config, apps=apps, faults=dict.fromkeys(apps, slow), injector=Injector()
        ) as sup,
        sup.subscribe("mcp.*") as events,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(recorder.run, events)
        await sup.connect_all()
        status = sup.status()
        nursery.cancel_scope.cancel()
    assert {r.status for r in status.values()} == {"connected"}
    assert not recorder.times("mcp.error")
    connected = sorted(recorder.times("mcp.connected"))
    assert connected == pytest.approx([6, 12, 18])  # the last waited 12 s > initTimeout
    # One at a time: each connected before the next began.
    connecting = sorted(recorder.times("mcp.connecting"))
    assert all(nxt >= done for nxt, done in zip(connecting[1:], connected, strict=False))


async def test_restart_delays_are_jittered_and_announced_as_waited(
    autojump_clock: object,
) -> None:
    """With the default jitter, each restart waits a delay within [0.8 d, d] of its
    backoff d; mcp.error's retry_in and the record's next_retry_at announce exactly the
    delay waited."""
    refuse = {"rules": [{"when": {"method": "tools/list", "times": 4}, "do": "kill"}]}
    apps = {"a": make_server("echo")}
    recorder = Recorder()
    announced: list[tuple[float, float]] = []  # (retry_in, next_retry_at - event ts)
    async with (
        open_supervisor(
            {"mcpServers": {}}, apps=apps, faults={"a": refuse}, injector=Injector()
        ) as sup,
        sup.subscribe("mcp.*") as events,
    ):
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for event in events:
                    recorder.seen.append((trio.current_time(), event))
                    if event.kind == "mcp.error":
                        record = sup.status()["a"]
                        if event.retry_in == 0:  # a first failure: restarted at once
                            continue  # (maybe already: no retry is pending any more)
                        assert record.next_retry_at is not None
                        announced.append((event.retry_in, record.next_retry_at - event.ts))

            nursery.start_soon(watch)
            await sup.connect_all()
            nursery.cancel_scope.cancel()
        assert sup.status()["a"].status == "connected"
    errors = [(t, e) for t, e in recorder.seen if e.kind == "mcp.error"]
    attempts = recorder.times("mcp.connecting")
    assert [e.attempt for _, e in errors] == [1, 2, 3, 4]
    delays = [e.retry_in for _, e in errors]
    for (t_error, error), t_next in zip(errors, attempts[1:], strict=True):
        plain = 0.0 if error.attempt == 1 else 2.0 ** (error.attempt - 2)  # 0, 1, 2, 4 s
        assert 0.8 * plain - 1e-9 <= error.retry_in <= plain + 1e-9
        assert t_next - t_error == pytest.approx(error.retry_in, abs=1e-9)
    assert delays[0] == 0.0  # the first restart is at once
    assert delays[1:] != [1.0, 2.0, 4.0]  # jittered, not the plain delays
    assert len(announced) == 3  # every delayed retry, as announced
    for retry_in, until in announced:
        assert until == pytest.approx(retry_in, abs=0.05)


async def test_a_burst_of_crashes_restarts_through_the_start_slots(autojump_clock: object) -> None:
    """Six servers that crash together come back at most startupConcurrency (2) at a time:
    each restart's handshake waits for a slot."""
    # Each server dies at its first call; its next connection's listing takes 1 s.
    plan = {
        "rules": [
            {"when": {"method": "tools/call", "nth": 1}, "do": "kill"},
            {"when": {"method": "tools/list", "nth": 2}, "do": {"delay_ms": 1000}},
        ]
    }
    names = [f"s{i}" for i in range(6)]
    apps = {name: make_server("echo") for name in names}
    config = {"mcpServers": {}, "supervisor": {"startupConcurrency": 2}}
    recorder = Recorder()
    async with (
        open_supervisor(
            config, apps=apps, faults=dict.fromkeys(names, plan), injector=Injector()
        ) as sup,
        sup.subscribe("mcp.*") as events,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(recorder.run, events)
        await sup.connect_all()
        began = trio.current_time()

        async def crash(name: str) -> None:
            try:
                await sup.call(f"{name}_echo", {"text": "x"})
            except Exception:
                pass  # the call died with its connection: expected

        async with trio.open_nursery() as calls:
            for name in names:
                calls.start_soon(crash, name)
        await recorder.wait_for("mcp.connected", 2 * len(names))
        status = sup.status()
        nursery.cancel_scope.cancel()
    assert {n: (r.restarts, r.status) for n, r in status.items()} == dict.fromkeys(
        names, (1, "connected")
    )
    # The restarted handshakes, as (start, end) intervals: at most 2 overlap.
    spans = []
    for name in names:
        start = recorder.times("mcp.connecting", name)
        end = recorder.times("mcp.connected", name)
        assert len(start) == len(end) == 2  # the first connection, then the restart's
        spans.append((start[1], end[1]))
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in points:
        now += step
        most = max(most, now)
    assert most == 2
    assert max(e for _, e in spans) - began >= 3 - 1e-9  # 6 slow handshakes, 2 at a time
