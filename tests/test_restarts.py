"""Restarts are decided by the tree alone; the config's tree settings do what they say."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import sys

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.actors import Backoff, GiveUp, Restart, SupervisorGaveUp
from supervisor.errors import ServerUnavailable, TransportError
from supervisor.events._catalog import Event
from supervisor.runtime import open_supervisor
from supervisor.server import ServerStatus
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import stdio_params
from supervisor.transports._remote import Remote

from .probes import until

# -- the one state machine: mcp.error says what the tree decided ---------------------------


@attrs.define
class Refusing:
    """What a server actor reads from its config; every connection attempt is refused."""

    name: str = "nope"
    type: str = "memory"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    lazy: bool = False
    timeout: float = 30.0
    init_timeout: float = 10.0
    ping_interval: float = 0.0
    max_attempts: int = 6
    backoff: Backoff = Backoff()
    restart: Restart = Restart.PERMANENT
    give_up: GiveUp = GiveUp.MARK_UNAVAILABLE
    shutdown_timeout: float = 10.0
    prefix: str = ""


class _Refused:
    async def __aenter__(self) -> object:
        raise TransportError("connection refused (by the test)")

    async def __aexit__(self, *exc: object) -> None:
        return None


class RefusedServer(ServerHandle):
    def transport(self) -> Remote:
        return Remote(_Refused())


class Timed:
    """Every event published, with trio's time; ``failed`` is set by the final mcp.error."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Event]] = []
        self.failed = trio.Event()

    def __call__(self, event: Event) -> None:
        self.seen.append((trio.current_time(), event))
        if event.kind == "mcp.error" and event.retry_in is None:  # type: ignore[attr-defined]
            self.failed.set()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    initial=st.sampled_from([0.5, 1.0, 3.0]),
    jitter=st.floats(0.05, 1.0),
)
def test_announced_retry_in_is_the_delay_the_tree_waited(
    seed: int, initial: float, jitter: float
) -> None:
    """With jittered backoff, every mcp.error's retry_in is exactly the time until the
    next connection attempt, and its attempt number is the tree's."""
    backoff = Backoff(initial=initial, maximum=20, jitter=jitter)

    async def main() -> Timed:
        timed = Timed()
        server = RefusedServer(Refusing(backoff=backoff), publish=timed)  # type: ignore[arg-type]
        async with open_servers([server], rng=random.Random(seed)):
            await timed.failed.wait()
            assert server.status() is ServerStatus.FAILED
            # The health record said what the tree decided: retry_attempt is its count.
            assert server.record().retry_attempt == 7
        return timed

    seen = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)).seen
    errors = [(t, e) for t, e in seen if e.kind == "mcp.error"]
    attempts = [t for t, e in seen if e.kind == "mcp.connecting"]
    assert [e.attempt for _, e in errors] == [1, 2, 3, 4, 5, 6, 7]
    assert errors[-1][1].retry_in is None
    assert len(attempts) == 7
    for (t_error, error), t_next in zip(errors, attempts[1:], strict=False):
        assert error.retry_in is not None
        assert t_next - t_error == pytest.approx(error.retry_in, abs=1e-9)
        # The first restart is at once; from the second, initial × 2^(n-2).
        plain = 0.0 if error.attempt == 1 else min(initial * 2 ** (error.attempt - 2), 20)
        assert plain * (1 - jitter) - 1e-9 <= error.retry_in <= plain + 1e-9


# -- the config's tree settings, end to end ----------------------------------------------------

EXITS = [sys.executable, "-m", "supervisor.testing.servers", "exit-on-start"]


def exiting(code: int = 3, **fields: object) -> dict[str, object]:
    server: dict[str, object] = {
        "command": EXITS[0],
        "args": [*EXITS[1:], "--exit-code", str(code)],
        "lazy": False,
        "initTimeout": 120,  # a loaded machine may take seconds to start Python
    }
    server.update(fields)
    return server


def fast(attempts: int) -> dict[str, object]:
    return {"local": {"initial": 0.01, "max": 0.01, "maxAttempts": attempts}}


async def test_the_roots_intensity_counts_every_servers_restarts() -> None:
    """supervisor.intensity 1 per 100 s: the second restart of any server makes the whole
    supervisor give up, although each server's own budget (10) is far from used."""
    config = {
        "mcpServers": {"a": exiting(), "b": exiting()},
        "supervisor": {"intensity": {"maxRestarts": 1, "withinSeconds": 100}, "backoff": fast(10)},
    }
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_supervisor(config) as sup:
            await trio.sleep_forever()
    assert "exceeded the supervisor's restart intensity (1 in 100 s)" in str(info.value)
    assert sum(r.restarts for r in sup.status().values()) <= 1  # no second restart


async def test_give_up_escalate_stops_the_whole_supervisor() -> None:
    """giveUp: escalate — running out of its attempts makes the supervisor give up."""
    config = {
        "mcpServers": {"bad": exiting(giveUp="escalate"), "other": exiting(0, lazy=True)},
        "supervisor": {"backoff": fast(2)},
    }
    with pytest.raises(SupervisorGaveUp) as info:
        async with open_supervisor(config):
            await trio.sleep_forever()
    assert info.value.child == "bad"
    assert "exceeded its own restart intensity (2 in a row)" in str(info.value)


async def test_give_up_mark_unavailable_is_the_default() -> None:
    """Without giveUp, a server out of attempts is failed alone; calls fail fast."""
    config = {"mcpServers": {"bad": exiting()}, "supervisor": {"backoff": fast(2)}}
    async with open_supervisor(config) as sup:
        await until(lambda: sup.status()["bad"].status == "failed", timeout=60)
        with pytest.raises(ServerUnavailable, match="after 3 attempts"):  # 1 + 2 retries
            await sup.call("bad_anything")
        assert sup.status()["bad"].next_retry_at is None


async def test_a_temporary_server_is_not_restarted_and_is_failed() -> None:
    """restart: temporary — the first crash is final: failed, with the reason."""
    config = {
        "mcpServers": {"once": exiting(restart="temporary")},
        "supervisor": {"backoff": fast(5)},
    }
    async with open_supervisor(config) as sup:
        await until(lambda: sup.status()["once"].status == "failed", timeout=60)
        record = sup.status()["once"]
        assert record.restarts == 0 and "exited with code 3" in (record.last_error or "")


async def test_a_transient_server_that_exits_cleanly_stays_stopped() -> None:
    """restart: transient — exit code 0 is a normal exit: stopped, not restarted; a
    permanent server exiting the same way is restarted."""
    config = {
        "mcpServers": {
            "done": exiting(0, restart="transient"),
            "again": exiting(0, maxRestarts=1),
        },
        "supervisor": {"backoff": fast(5)},
    }
    async with open_supervisor(config) as sup:
        await until(lambda: sup.status()["done"].status == "stopped", timeout=60)
        await until(lambda: sup.status()["again"].status == "failed", timeout=60)
        assert sup.status()["done"].restarts == 0
        assert sup.status()["again"].restarts == 1


async def test_shutdown_timeout_comes_from_the_config() -> None:
    """shutdownTimeout is the server's graceful-stop allowance in the tree."""
    config = {"mcpServers": {"s": exiting(shutdownTimeout=2.5, lazy=True)}}
    async with open_supervisor(config) as sup:
        assert sup._servers["s"].spec.shutdown_timeout == 2.5  # the tree's child spec


def test_the_stdio_stop_delays_are_injectable() -> None:
    """Tests need not wait the 2 s + 2 s of a forced stop: a server's transport takes the
    grace and kill delays it was given."""
    from supervisor.config import load_config

    config = load_config({"mcpServers": {"s": {"command": "true"}}}).servers["s"]
    server = ServerHandle(config, publish=lambda event: None, grace=0.1, kill_after=0.2)
    transport = server.transport()
    assert (transport.grace, transport.kill_after) == (0.1, 0.2)  # type: ignore[attr-defined]
    default = ServerHandle(config, publish=lambda event: None).transport()
    assert (default.grace, default.kill_after) == (2.0, 2.0)  # type: ignore[attr-defined]


# -- a restart counts as up once it can take calls ---------------------------------------------


async def test_a_restarted_server_serves_calls_before_its_resources_are_listed(
    tmp_path: pathlib.Path,
) -> None:
    """kill -9 of a server: the new process is shown connected and answers a call while its
    resource, template and prompt listings are still unanswered (held by the fixture); the
    lists of the process before are served meanwhile, and replaced once the new ones are in.
    (Its first connection lists them before it counts as connected.)"""
    hold = tmp_path / "hold"
    command, args = stdio_params("rich")
    server = {
        "command": command,
        "args": [*args, "--hold-lists", str(hold)],
        "approve": False,
        "lazy": False,
        "initTimeout": 120,  # a loaded machine may take seconds to start Python
        "timeout": 300,  # a held listing is not given up on while the test runs
    }
    config = {"mcpServers": {"rich": server}}

    def uris() -> set[str]:
        return {r.uri for r in sup.snapshot.resources}

    async with open_supervisor(config) as sup, sup.subscribe("mcp.connected") as connected:
        with trio.fail_after(120):
            await sup.connect_all()
            assert "notes://index" in uris()  # listed before it counted as connected
            # A resource only this process has: its successor does not list it.
            await sup.call("rich_add_note", {"title": "gone"})
            await until(lambda: "notes://gone" in uris(), timeout=60)
            first = sup.status()["rich"].pid
            assert first is not None
            connected.drain()
        hold.touch()
        os.kill(first, signal.SIGKILL)
        # Up well before the held listing could end (the server's timeout, 300 s).
        with trio.fail_after(60):
            await connected.receive()
            record = sup.status()["rich"]
            assert (record.status, record.restarts) == (ServerStatus.CONNECTED, 1)
            assert record.pid != first
            assert (await sup.call("rich_echo", {"text": "back"})).text == "back"
        assert "notes://gone" in uris()  # still the lists of the process before
        hold.unlink()
        await until(lambda: "notes://gone" not in uris(), timeout=60)
        assert "notes://index" in uris()
        assert {p.name for p in sup.snapshot.prompts} == {"rich_summarize", "rich_greet"}
