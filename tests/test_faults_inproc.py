"""Fault plans injected into supervised servers: the config's ``faults``, through the stdio,
in-memory and WebSocket transports, and the same seed giving the same run."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path

import attrs
import msgspec
import pytest
import structlog
import trio
import trio.testing
from structlog.testing import capture_logs

from supervisor import open_supervisor
from supervisor.actors import Backoff, GiveUp, Restart
from supervisor.config import ConfigError, load_config
from supervisor.config._plan import Plan
from supervisor.errors import (
    CallMayHaveTakenEffect,
    ServerRequestError,
    ToolCallTimeout,
    UnknownServer,
)
from supervisor.events._catalog import Event, to_builtins
from supervisor.faults import Injector, faults_json, load_plan
from supervisor.faults._inject._engine import Injected
from supervisor.server import ServerStatus
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, make_server, stdio_params
from supervisor.transports._ws import serve_websocket

from .probes import until

#: what injects the plans of the supervisors below
INJECTOR = Injector()

#: Restarts of a local server after 50 ms (the default waits a second).
FAST = {"backoff": {"local": {"initial": 0.05, "max": 0.05}}}
#: A bound on real-time waits: a hang fails the test, not the suite.
DEADLINE = 60


def stdio(
    kind: str, faults: object, *, count_file: Path | None = None, extra: tuple[str, ...] = ()
) -> dict[str, object]:
    """A config entry running fixture ``kind`` over stdio with the plan ``faults``."""
    command, args = stdio_params(kind, count_file=count_file)  # type: ignore[arg-type]
    return {
        "command": command,
        "args": [*args, *extra],
        "faults": faults,
        "initTimeout": DEADLINE,  # a loaded machine may take seconds to start Python
        "autoApprove": True,
    }


def config(entry: dict[str, object]) -> dict[str, object]:
    return {"mcpServers": {"fx": entry}, "supervisor": FAST}


@contextmanager
def info_logs() -> Iterator[list[dict[str, object]]]:
    """The lines logged at info and above, whatever level an earlier test configured."""
    before = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(**before)


# -- the config option -----------------------------------------------------------------


def test_faults_is_parsed_in_every_format_with_field_paths(tmp_path: Path) -> None:
    """``faults`` is read in the three formats, inline or from a file relative to the
    config's directory; its errors carry the field's path."""
    plan = {"seed": 7, "rules": [{"when": {"method": "tools/call", "nth": 3}, "do": "kill"}]}
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "kill.json").write_text(json.dumps(plan))
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {"a": {"command": "x", "faults": plan}},
                "mcp": {"b": {"type": "local", "command": ["x"], "faults": plan["rules"]}},
                "servers": {"c": {"command": "x", "faults": "plans/kill.json"}},
            }
        )
    )
    loaded = load_config(tmp_path / "mcp.json")
    expected = load_plan(plan)
    assert loaded.servers["a"].faults == expected
    assert loaded.servers["b"].faults == expected.with_seed(0)  # a bare list: seed 0
    from_file = loaded.servers["c"].faults
    assert from_file is not None and from_file.rules == expected.rules and from_file.seed == 7
    assert from_file.source == str(tmp_path / "plans" / "kill.json")
    assert load_config({"mcpServers": {"a": {"command": "x"}}}).servers["a"].faults is None


@pytest.mark.parametrize(
    ("faults", "path", "message"),
    [
        ([{"when": {"nth": 0}, "do": "kill"}], "rules[0].when.nth", "must be at least 1"),
        ({"rules": [{"do": "explode"}]}, "rules[0].do", 'unknown action "explode"'),
        ({"seed": "x", "rules": []}, "seed", "must be a whole number"),
        ({"rules": [{"when": {}}]}, "rules[0]", 'needs "do"'),
        ([{"when": {"method": "x"}, "do": {"http_status": 503}}], "rules[0].do", "only to HTTP"),
        ({"seed": 1}, "", 'a plan needs "rules"'),
        (3, "", "must be a path to a JSON fault plan"),
        ("missing.json", "", "cannot read the fault plan"),
    ],
)
def test_a_wrong_plan_is_a_config_error_at_its_path(
    tmp_path: Path, faults: object, path: str, message: str
) -> None:
    for section, entry in (
        ("mcpServers", {"command": "x"}),
        ("mcp", {"type": "local", "command": ["x"]}),
        ("servers", {"command": "x"}),
    ):
        with pytest.raises(ConfigError) as caught:
            load_config({section: {"calc": {**entry, "faults": faults}}}, project_root=tmp_path)
        (error,) = caught.value.errors
        field = f"{section}.calc.faults"
        assert error.path == (f"{field}.{path}" if path else field)
        assert message in error.message


def test_a_plan_file_with_a_wrong_rule_is_named(tmp_path: Path) -> None:
    """A problem inside a plan file says which file, at the rule's path."""
    (tmp_path / "bad.json").write_text(json.dumps([{"when": {"every": 0}, "do": "drop"}]))
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"calc": {"command": "x", "faults": "bad.json"}}})
    )
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "mcp.json")
    (error,) = caught.value.errors
    assert error.path == "mcpServers.calc.faults.rules[0].when.every"
    assert error.message == "must be at least 1 (in bad.json)"


def test_http_actions_are_accepted_for_http_servers_only() -> None:
    rule = [{"when": {"method": "tools/call"}, "do": {"http_status": 503}}]
    loaded = load_config({"mcpServers": {"web": {"url": "http://127.0.0.1:1/mcp", "faults": rule}}})
    assert loaded.servers["web"].faults is not None
    with pytest.raises(ConfigError, match=r"mcpServers\.ws\.faults\.rules\[0\]\.do: "):
        load_config({"mcpServers": {"ws": {"url": "ws://127.0.0.1:1/", "faults": rule}}})


async def test_open_supervisor_takes_plans_by_server_name() -> None:
    entry = stdio("echo", None)
    del entry["faults"]
    plan = [{"when": {"method": "tools/call"}, "do": {"error": {"code": -32001, "message": "x"}}}]
    with pytest.raises(UnknownServer):
        async with open_supervisor(config(entry), faults={"nope": plan}, injector=INJECTOR):
            pass
    with pytest.raises(ConfigError, match=r"^faults\.fx\.rules\[0\]\.when\.nth: must be at"):
        async with open_supervisor(
            config(entry), faults={"fx": [{"when": {"nth": 0}, "do": "kill"}]}, injector=INJECTOR
        ):
            pass
    async with open_supervisor(config(entry), faults={"fx": plan}, injector=INJECTOR) as sup:
        assert sup.config.servers["fx"].faults == load_plan(plan)
        assert sup.faults() == [] and sup.server("fx").faults() == []


async def test_a_plan_without_an_injector_is_a_config_error_saying_what_to_pass(
    tmp_path: Path,
) -> None:
    """The injector is the toolkit's, given from above: a supervisor opened (or
    reconfigured) with a plan and no injector is refused at the plan's field, saying what
    to pass; a disabled server's plan needs none, nor does a supervisor without plans,
    and one given an injector but no plan (as the command line's is) does not even
    import the engine."""
    said = "open_supervisor(config, injector=supervisor.faults.Injector())"
    entry = stdio("echo", [])
    with pytest.raises(ConfigError) as caught:
        async with open_supervisor(config(entry)):
            pass
    (error,) = caught.value.errors
    assert error.path == "mcpServers.fx.faults" and said in error.message
    del entry["faults"]
    with pytest.raises(ConfigError, match=r"^mcpServers\.fx\.faults: .*injector=supervisor"):
        async with open_supervisor(config(entry), faults={"fx": []}):
            pass
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"fx": {**entry, "disabled": True, "faults": []}}}))
    async with open_supervisor(path) as sup:
        assert sup.faults() == []
        path.write_text(json.dumps(config({**entry, "faults": []})))
        with pytest.raises(ConfigError, match=r"^mcpServers\.fx\.faults: a fault plan needs"):
            await sup.reconfigure()
        assert sup.config.servers["fx"].disabled  # refused: nothing changed
    path.write_text(json.dumps(config(entry)))  # no plan
    with trio.fail_after(DEADLINE):
        done = await trio.run_process(
            [sys.executable, "-c", NO_ENGINE, str(path)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == []


async def test_the_command_line_injects_a_config_s_plan(tmp_path: Path) -> None:
    """``mcp-supervisor call`` gives its supervisor the injector: the config's plan
    answers the call with its injected error (and a plan-less config calls through)."""
    refuse = [{"when": {"tool": "echo"}, "do": {"error": {"code": -32001, "message": "boom"}}}]
    path = tmp_path / "mcp.json"
    outcomes = []
    for plan in (refuse, []):
        path.write_text(json.dumps(config(stdio("echo", plan))))
        with trio.fail_after(DEADLINE):
            done = await trio.run_process(
                [sys.executable, "-m", "supervisor", "call", "--config", str(path)]
                + ["fx_echo", '{"text": "hi"}'],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        outcomes.append((done.returncode, "boom" in done.stderr.decode(), done.stdout.decode()))
    assert outcomes == [(1, True, ""), (0, False, "hi\n")]


# Opens a supervisor without plans, as the command line does (with an injector): which of
# the injector's modules that loads.
NO_ENGINE = """
import json, sys, trio
from supervisor import open_supervisor
from supervisor.faults import Injector

async def main():
    async with open_supervisor(sys.argv[1], injector=Injector()) as sup:
        await sup.connect_all()

trio.run(main)
injector = ["supervisor", "faults", "_inject"]
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[:3] == injector)))
"""


# -- stdio: the transport injects, the supervisor reacts as to the real thing -----------


async def test_kill_on_the_third_call_crashes_and_the_server_restarts(tmp_path: Path) -> None:
    """kill on the 3rd tools/call: calls 1-2 answered, call 3 may have taken effect (it
    never reached the server), the process was SIGKILLed and restarted, call 4 answered;
    ``nth`` counts across incarnations, so the kill happens once."""
    counts = tmp_path / "count"
    plan = {"seed": 1, "rules": [{"when": {"method": "tools/call", "nth": 3}, "do": "kill"}]}
    with info_logs() as logs:
        async with open_supervisor(
            config(stdio("echo", plan, count_file=counts)), injector=INJECTOR
        ) as sup:
            assert (await sup.call("fx_echo", {"text": "1"})).text == "1"
            assert (await sup.call("fx_echo", {"text": "2"})).text == "2"
            first_pid = sup.status()["fx"].pid
            with pytest.raises(CallMayHaveTakenEffect):
                await sup.call("fx_echo", {"text": "3"})
            assert (await sup.call("fx_echo", {"text": "4"})).text == "4"
            record = sup.status()["fx"]
            assert record.restarts == 1 and record.pid != first_pid
            assert "was killed by signal 9 (an injected fault: kill)" in str(record.last_error)
            (kill,) = sup.server("fx").faults()
            assert sup.faults() == [kill]
    assert (kill.rule, kill.action, kill.method, kill.tool, kill.server) == (
        0,
        "kill",
        "tools/call",
        "echo",
        "fx",
    )
    assert count_executions(counts)["echo"] == 3  # 1, 2 and 4
    (logged,) = [e for e in logs if e["event"] == "fault injected"]
    assert logged["log_level"] == "info"
    assert (logged["server"], logged["rule"], logged["action"], logged["method"]) == (
        "fx",
        0,
        "kill",
        "tools/call",
    )
    assert logged["id"] == kill.id


async def test_a_garbage_line_is_a_protocol_violation_and_a_restart() -> None:
    """An injected garbage line before an answer fails the connection as a real one does:
    the call may have taken effect, the server is restarted, last_error says why."""
    rule = {"when": {"method": "tools/call", "direction": "to_client", "times": 1}}
    plan = [{**rule, "do": "garbage_line"}]
    async with open_supervisor(config(stdio("echo", plan)), injector=INJECTOR) as sup:
        with pytest.raises(CallMayHaveTakenEffect):
            await sup.call("fx_echo", {"text": "1"})
        assert (await sup.call("fx_echo", {"text": "2"})).text == "2"
        record = sup.status()["fx"]
        assert record.restarts == 1
        assert "wrote a line to stdout that is not a JSON-RPC message" in str(record.last_error)
        assert "chaos: garbage line 1" in str(record.last_error)
        assert [f.action for f in sup.faults()] == ["garbage_line"]


async def test_a_hang_times_the_call_out_and_the_server_resumes() -> None:
    """hang_ms stops the process (SIGSTOP): a call with a timeout times out; the server is
    resumed (SIGCONT) and the next call is answered on the same connection."""
    plan = [{"when": {"method": "tools/call", "nth": 1}, "do": {"hang_ms": 800}}]
    async with open_supervisor(config(stdio("echo", plan)), injector=INJECTOR) as sup:
        await sup.connect_all()
        pid = sup.status()["fx"].pid
        with pytest.raises(ToolCallTimeout):
            await sup.call("fx_echo", {"text": "1"}, timeout=0.2)
        with trio.fail_after(DEADLINE):
            assert (await sup.call("fx_echo", {"text": "2"})).text == "2"
        assert sup.status()["fx"].pid == pid and sup.status()["fx"].restarts == 0
        (hang,) = sup.faults()
        assert (hang.action, hang.detail) == ("hang", "hang 800 ms")


async def test_a_stopped_server_is_resumed_to_shut_down() -> None:
    """A hang without end: leaving the block still shuts the server down promptly (it is
    resumed first, so stdin's end is seen, not the SIGKILL fallback)."""
    plan = [{"when": {"method": "tools/call"}, "do": "hang"}]
    with trio.fail_after(DEADLINE):
        async with open_supervisor(config(stdio("echo", plan)), injector=INJECTOR) as sup:
            await sup.connect_all()
            with pytest.raises(ToolCallTimeout):
                await sup.call("fx_echo", {"text": "1"}, timeout=0.2)
            server = sup._servers["fx"]
            transport = server.current.transport
        assert transport.returncode == 0  # it exited by itself once its stdin closed


async def test_list_changed_makes_the_supervisor_fetch_the_tools_again(tmp_path: Path) -> None:
    """An injected notifications/tools/list_changed reaches the supervisor's session,
    which lists the tools again (the fixture counts each fetch)."""
    counts = tmp_path / "count"
    plan = [
        {"when": {"method": "tools/call", "direction": "to_client", "nth": 1}, "do": "list_changed"}
    ]
    entry = stdio("big", plan, count_file=counts, extra=("--tools", "3"))
    async with open_supervisor(config(entry), injector=INJECTOR) as sup:
        await sup.connect_all()
        assert count_executions(counts)["tools/list"] == 1
        await sup.server("fx").call_tool("tool_0000", {"x": 1})
        await until(lambda: count_executions(counts)["tools/list"] == 2, DEADLINE)
        assert [f.action for f in sup.faults()] == ["list_changed"]


async def test_slow_start_delays_a_stdio_spawn() -> None:
    plan = [{"when": {"nth": 1}, "do": {"slow_start_ms": 300}}]
    async with open_supervisor(config(stdio("echo", plan)), injector=INJECTOR) as sup:
        await sup.connect_all()
        assert sup.status()["fx"].connect_time >= 0.3
        (slow,) = sup.faults()
        assert (slow.action, slow.direction, slow.method) == ("slow_start", None, None)


# -- in memory, on trio's mock clock ---------------------------------------------------


@attrs.define
class Memory:
    """What a server actor reads from its config, for an in-process server."""

    name: str
    app: object
    faults: Plan | None = None
    type: str = "memory"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    lazy: bool = True
    timeout: float = 30.0
    init_timeout: float = 10.0
    ping_interval: float = 0.0
    degraded_after: int = 3
    max_attempts: int = 5
    backoff: Backoff = Backoff(initial=0.5, maximum=2.0)
    restart: Restart = Restart.PERMANENT
    give_up: GiveUp = GiveUp.MARK_UNAVAILABLE
    shutdown_timeout: float = 10.0
    prefix: str = ""


@asynccontextmanager
async def memory(
    plan: object,
    *,
    count_file: Path | None = None,
    publish=lambda event: None,  # noqa: ANN001
) -> AsyncIterator[ServerHandle]:
    """An in-process echo server behind ``plan``, supervised."""
    app = make_server("echo", count_file=count_file)
    server = ServerHandle(Memory("mem", app, load_plan(plan)), publish=publish, injector=Injector())
    async with open_servers([server]):
        yield server


async def test_an_injected_error_answers_in_the_servers_place(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    counts = tmp_path / "count"
    error = {"error": {"code": -32042, "message": "refused by the plan"}}
    plan = [{"when": {"method": "tools/call", "tool": "add"}, "do": error}]
    async with memory(plan, count_file=counts) as server:
        with pytest.raises(ServerRequestError) as caught:
            await server.call_tool("add", {"a": 1, "b": 2}, None)
        assert caught.value.code == -32042 and "refused by the plan" in str(caught.value)
        assert (await server.call_tool("echo", {"text": "x"}, None)).content[0].text == "x"
        assert server.status() is ServerStatus.CONNECTED
    assert count_executions(counts) == {"echo": 1}  # add never ran


async def test_a_dropped_answer_is_a_timeout_not_a_hang(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    counts = tmp_path / "count"
    plan = [{"when": {"method": "tools/call", "direction": "to_client", "nth": 1}, "do": "drop"}]
    async with memory(plan, count_file=counts) as server:
        with pytest.raises(ToolCallTimeout):
            await server.call_tool("echo", {"text": "lost"}, 5.0)
        assert (await server.call_tool("echo", {"text": "x"}, 5.0)).content[0].text == "x"
    assert count_executions(counts)["echo"] == 2  # the first was executed, its answer lost


async def test_a_duplicated_request_is_executed_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    counts = tmp_path / "count"
    plan = [{"when": {"method": "tools/call", "direction": "to_server"}, "do": "duplicate"}]
    async with memory(plan, count_file=counts) as server:
        assert (await server.call_tool("add", {"a": 2, "b": 3}, None)).content[0].text == "5"
        assert server.status() is ServerStatus.CONNECTED
    assert count_executions(counts) == {"add": 2}


async def test_slow_start_delays_the_connection(autojump_clock: trio.testing.MockClock) -> None:
    plan = [{"when": {"nth": 1}, "do": {"slow_start_ms": 2500}}]
    async with memory(plan) as server:
        start = trio.current_time()
        await server.list_tools()
        assert trio.current_time() - start >= 2.5
        assert server.record().connect_time >= 2.5
        [slow] = server.faults()
        assert slow.detail == "start delayed 2500 ms"


async def test_an_in_memory_kill_loses_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    plan = [{"when": {"method": "tools/call", "nth": 2}, "do": "kill"}]
    async with memory(plan) as server:
        await server.call_tool("echo", {"text": "1"}, None)
        with pytest.raises(CallMayHaveTakenEffect):
            await server.call_tool("echo", {"text": "2"}, None)
        assert (await server.call_tool("echo", {"text": "3"}, None)).content[0].text == "3"
        assert server.record().restarts == 1
        assert server.record().last_error == (
            "the connection to MCP server 'mem' was lost (an injected fault: kill)"
        )


# -- WebSocket -------------------------------------------------------------------------


async def test_websocket_faults_garbage_survived_and_kill_reconnects() -> None:
    """Over WebSocket a garbage line is a bad frame (the session survives it, as with a
    real one); a kill loses the connection, and the supervisor reconnects."""
    plan = [
        {
            "when": {"method": "tools/call", "direction": "to_client", "nth": 1},
            "do": "garbage_line",
        },
        {"when": {"method": "tools/call", "nth": 2}, "do": "kill"},
    ]
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(serve_websocket, make_server("echo")))
        entry = {
            "url": url,
            "faults": plan,
            "autoApprove": True,
            "reconnect": {"initial": 0.05, "max": 0.05},
        }
        with trio.fail_after(DEADLINE):
            async with open_supervisor({"mcpServers": {"fx": entry}}, injector=INJECTOR) as sup:
                assert (await sup.call("fx_echo", {"text": "1"})).text == "1"
                with pytest.raises(CallMayHaveTakenEffect):
                    await sup.call("fx_echo", {"text": "2"})
                assert (await sup.call("fx_echo", {"text": "3"})).text == "3"
                assert sup.status()["fx"].restarts == 1
                assert [f.action for f in sup.faults()] == ["garbage_line", "kill"]
        nursery.cancel_scope.cancel()


# -- deterministic mode ----------------------------------------------------------------

#: Probabilistic rules, jittered delays, a kill and drops: every draw from the seed.
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


def _chaos_run(seed: int) -> tuple[bytes, bytes, list[str]]:
    """One run of a fixed workload against an in-process server behind the chaos plan:
    (every event, with its time since the start on trio's clock; the fault log; what
    each call returned)."""

    async def main() -> tuple[bytes, bytes, list[str]]:
        start = trio.current_time()
        seen: list[dict[str, object]] = []

        def publish(event: Event) -> None:
            record = to_builtins(event)
            record["ts"] = round(trio.current_time() - start, 6)  # not the wall clock
            seen.append(record)

        outcomes = []
        async with memory(load_plan(CHAOS, seed=seed), publish=publish) as server:
            for i in range(16):
                tool, args = ("add", {"a": i, "b": 1}) if i % 3 == 0 else ("echo", {"text": str(i)})
                try:
                    result = await server.call_tool(tool, args, 2.0)
                    outcomes.append(f"{i}:{result.content[0].text}")
                except Exception as exc:
                    outcomes.append(f"{i}:{type(exc).__name__}")
            log = faults_json(server.faults())
        return msgspec.json.encode(seen), log, outcomes

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_same_seed_gives_the_same_run_byte_for_byte() -> None:
    events, faults, outcomes = _chaos_run(seed=11)
    assert (events, faults, outcomes) == _chaos_run(seed=11)
    actions = {f.action for f in msgspec.json.decode(faults, type=list[Injected])}
    assert actions == {"kill", "drop", "delay", "duplicate"}  # the plan did all it can
    assert "CallMayHaveTakenEffect" in str(outcomes) and "ToolCallTimeout" in str(outcomes)
    assert b'"mcp.disconnected"' in events and b'"supervisor.child.restarted"' in events
    other = _chaos_run(seed=12)[1]
    assert other != faults


async def _stdio_faults(seed: int) -> list[dict[str, object]]:
    plan = {
        "seed": seed,
        "rules": [
            {
                "when": {"method": "tools/call", "direction": "to_server", "probability": 0.5},
                "do": {"delay_ms": 1, "jitter_ms": 20},
            },
            {
                "when": {"method": "tools/call", "tool": "add", "probability": 0.5},
                "do": {"error": {"code": -32001, "message": "unlucky"}},
            },
        ],
    }
    async with open_supervisor(config(stdio("echo", plan)), injector=INJECTOR) as sup:
        for i in range(10):
            try:
                await sup.call(
                    "fx_add" if i % 2 else "fx_echo", {"a": i, "b": 1} if i % 2 else {"text": "x"}
                )
            except ServerRequestError:
                pass
        log = json.loads(faults_json(sup.faults()))
    for fault in log:
        del fault["t"]  # real time
    return log


async def test_the_same_seed_gives_the_same_faults_from_a_stdio_server() -> None:
    first = await _stdio_faults(5)
    assert first == await _stdio_faults(5)
    assert {f["action"] for f in first} == {"delay", "error"}


def test_a_plan_path_with_a_control_character_keeps_one_error_a_line() -> None:
    """Found by the config fuzzer: a record separator in the plan's path split the
    message in two (``str.splitlines`` breaks at it); the path is quoted instead."""
    with pytest.raises(ConfigError) as failed:
        load_config({"mcpServers": {"a": {"command": "x", "faults": "0\x1e"}}})
    assert str(failed.value).splitlines() == [str(e) for e in failed.value.errors]
    assert '("0\\u001e")' in str(failed.value)
