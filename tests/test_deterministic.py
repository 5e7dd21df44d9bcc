"""Deterministic runs: in-process servers (``open_supervisor(apps=...)``) behind seeded
fault plans on trio's mock clock give the same run, byte for byte, for the same seeds —
in this process or another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from supervisor import open_supervisor
from supervisor.config import ConfigError, ServerType, load_config
from supervisor.errors import UnknownServer
from supervisor.faults import CallHistory, Injector
from supervisor.monitor import status_table
from supervisor.testing import replay_log, run_deterministic
from supervisor.testing.servers import make_server
from supervisor.testing.servers._big import make_big

ROOT = Path(__file__).resolve().parent.parent

#: Probabilistic drops, jittered delays, a kill on each server's 5th call, duplicates.
CHAOS = {
    "rules": [
        {"when": {"method": "tools/call", "nth": 5}, "do": "kill"},
        {
            "when": {"method": "tools/call", "direction": "to_client", "probability": 0.3},
            "do": "drop",
        },
        {
            "when": {"method": "tools/call", "direction": "to_server", "probability": 0.5},
            "do": {"delay_ms": 200, "jitter_ms": 300},
        },
        {"when": {"method": "tools/call", "tool": "add", "probability": 0.4}, "do": "duplicate"},
    ]
}
#: No configured server; in-process ones restart after half a second.
CONFIG = {"mcpServers": {}, "supervisor": {"backoff": {"local": {"initial": 0.5, "max": 2}}}}


def _run(seed: int) -> tuple[bytes, list[str], dict[str, int]]:
    """A fixed workload — 24 calls of echo and add, alternating between two in-process
    servers — behind the chaos plan (seeds ``seed`` and ``seed + 1``): the run's log,
    what each call returned, each server's restarts."""

    async def main() -> tuple[bytes, list[str], dict[str, int]]:
        history = CallHistory()
        apps = {"a": make_server("echo"), "b": make_server("echo")}
        plans = {name: {**CHAOS, "seed": seed + i} for i, name in enumerate(apps)}
        outcomes = []
        async with open_supervisor(
            CONFIG, apps=apps, faults=plans, injector=Injector(), history=history
        ) as sup:
            for i in range(24):
                server = "ab"[i % 2]
                tool, args = ("add", {"a": i, "b": 1}) if i % 3 == 0 else ("echo", {"text": str(i)})
                try:
                    result = await sup.call(f"{server}_{tool}", args, timeout=2.0)
                    outcomes.append(f"{i}:{result.text}")
                except Exception as exc:
                    outcomes.append(f"{i}:{type(exc).__name__}")
            restarts = {name: record.restarts for name, record in sup.status().items()}
        return replay_log(history, sup.faults()), outcomes, restarts

    return run_deterministic(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_same_seed_gives_the_same_run_byte_for_byte() -> None:
    log, outcomes, restarts = _run(11)
    assert _run(11) == (log, outcomes, restarts)
    run = json.loads(log)
    assert {f["action"] for f in run["faults"]} == {"kill", "drop", "delay", "duplicate"}
    assert {f["server"] for f in run["faults"]} == {"a", "b"}
    assert restarts == {"a": 1, "b": 1}  # each killed once, and back
    kinds = [e["kind"] for e in run["events"]]
    assert kinds.count("supervisor.child.restarted") == 2
    assert "CallMayHaveTakenEffect" in str(outcomes) and "ToolCallTimeout" in str(outcomes)
    timed_out = [c for c in run["calls"] if "ToolCallTimeout" in (c["error"] or "")]
    assert timed_out and all(c["outcome"] == "info" for c in timed_out)
    assert all(c["ended_at"] == c["deadline"] for c in timed_out)  # to the microsecond
    # Every time is trio's, since the origin: no unix time is left.
    assert all(0 <= e["ts"] < 1000 for e in run["events"])
    assert [c["call_id"] for c in run["calls"]] == [str(n) for n in range(1, 25)]
    recovered = [e for e in run["events"] if e["kind"] == "mcp.health.recovered"]
    # The downtime is the restart delay on trio's clock, as announced: each server's
    # first crash is restarted at once (its backoff is for a second one in a row).
    retry_in = {e["server"]: e["retry_in"] for e in run["events"] if e["kind"] == "mcp.error"}
    assert {e["server"]: e["downtime"] for e in recovered} == retry_in
    assert all(e["downtime"] == 0 for e in recovered)
    assert _run(12)[0] != log


def test_another_process_replays_the_same_bytes() -> None:
    """What CI found replays on a laptop: a fresh interpreter, with another hash seed
    (so another order of sets and dicts of strings), gives the same bytes."""
    code = (
        "import sys; from tests.test_deterministic import _run; "
        "sys.stdout.buffer.write(_run(11)[0])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == _run(11)[0]


def test_run_deterministic_restores_trios_scheduler() -> None:
    from trio._core import _run as trio_run

    before = (trio_run._r.getstate(), trio_run._ALLOW_DETERMINISTIC_SCHEDULING)

    async def main() -> float:
        await trio.sleep(3600)  # no real time: the mock clock jumps
        return trio.current_time()

    assert run_deterministic(main) == 3600
    assert (trio_run._r.getstate(), trio_run._ALLOW_DETERMINISTIC_SCHEDULING) == before


# -- apps: in-process servers supervised like the configured ones -------------------------


async def test_apps_are_supervised_with_local_defaults(
    autojump_clock: trio.testing.MockClock,
) -> None:
    echo = make_server("echo")
    config = {
        "mcpServers": {"off": {"command": "never-run", "disabled": True}},
        "supervisor": {"requestTimeout": 7, "backoff": {"local": {"initial": 0.25}}},
    }
    apps = {"mem": echo, "low": make_big(tools=2).server}
    history = CallHistory()
    async with open_supervisor(config, apps=apps, history=history) as sup:
        assert list(sup.config.servers) == ["off", "mem", "low"]
        mem = sup.config.servers["mem"]
        assert (mem.type, mem.path, mem.prefix) == (ServerType.MEMORY, "apps.mem", "mem")
        assert mem.app is echo and mem.command is None and mem.url is None
        assert mem.timeout == 7 and mem.backoff.initial == 0.25
        assert mem.max_attempts == sup.config.settings.local_max_attempts
        assert (await sup.call("mem_echo", {"text": "hi"})).text == "hi"
        assert (await sup.call("low_tool_0001", {"x": 3})).text == "tool_0001 x=3"
        status = sup.status()
        assert list(status) == ["off", "mem", "low"]
        assert (status["mem"].type, status["mem"].target) == ("memory", "fixture-echo")
        assert (status["low"].status, status["low"].target) == ("connected", "fixture-big")
        assert "in-process · fixture-echo" in status_table(status, width=200)
        # A restart is a fresh session with the same object: its state is kept.
        await sup.call("mem_echo", {"text": "again"})
        await sup.restart("mem")
        assert (await sup.call("mem_count")).text == "2"
        connected = [e.server for _, e in history.events if e.kind == "mcp.connected"]
        assert connected.count("mem") == 2


async def test_an_app_named_like_a_configured_server_is_refused() -> None:
    config = {"mcpServers": {"calc": {"command": "x"}}}
    with pytest.raises(ConfigError) as caught:
        async with open_supervisor(config, apps={"calc": make_server("echo")}):
            pass
    (error,) = caught.value.errors
    assert error.path == "apps.calc"
    assert "the config has a server named 'calc' already (mcpServers.calc)" in error.message
    with pytest.raises(ConfigError, match=r"^apps\.a b: invalid server name"):
        async with open_supervisor(config, apps={"a b": make_server("echo")}):
            pass
    with pytest.raises(TypeError, match=r"^apps\.x: an in-process server must be"):
        async with open_supervisor(config, apps={"x": object()}):
            pass


async def test_faults_for_apps_are_checked_as_for_other_servers() -> None:
    config = {"mcpServers": {}}
    plan = [{"when": {"method": "tools/call"}, "do": {"http_status": 503}}]
    with pytest.raises(ConfigError, match=r"^faults\.mem\.rules\[0\]\.do: .*in-process server"):
        async with open_supervisor(
            config, apps={"mem": make_server("echo")}, faults={"mem": plan}, injector=Injector()
        ):
            pass
    with pytest.raises(UnknownServer, match="configured: mem"):
        async with open_supervisor(config, apps={"mem": make_server("echo")}, faults={"x": []}):
            pass


@pytest.mark.parametrize("section", ["mcpServers", "mcp", "servers"])
def test_a_config_file_cannot_say_type_memory(tmp_path: Path, section: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({section: {"mem": {"type": "memory", "command": "x"}}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (error,) = caught.value.errors
    assert error.path == f"{section}.mem.type"
    assert error.message.startswith('"memory" is not a transport for config files')
    assert "open_supervisor(apps=" in error.message
