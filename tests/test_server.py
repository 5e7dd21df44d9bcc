"""Server actors against real fixture servers: lifecycle, restarts, health, cleanup."""

from __future__ import annotations

import os
import signal

import attrs
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from supervisor.actors import Backoff, GiveUp, Restart
from supervisor.events._catalog import Event
from supervisor.server import CallMayHaveTakenEffect, ServerStatus, ServerUnavailable
from supervisor.server._hook import open_servers
from supervisor.server._managed import ServerHandle
from supervisor.testing.servers import count_executions, stdio_params

from .probes import until


@attrs.define
class Settings:
    """The fields a server actor reads, as ``supervisor.config`` provides them."""

    name: str
    command: str
    args: list[str]
    type: str = "stdio"
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    secret_values: tuple[str, ...] = ()
    lazy: bool = True
    timeout: float = 30.0
    init_timeout: float = 10.0
    ping_interval: float = 300.0
    max_attempts: int = 5
    backoff: Backoff = Backoff(initial=0.2, maximum=1.0)
    restart: Restart = Restart.PERMANENT
    give_up: GiveUp = GiveUp.MARK_UNAVAILABLE
    shutdown_timeout: float = 10.0
    app: object = None  # the in-process server of a "memory" server
    prefix: str = ""


def settings(name: str, kind: str, **kw: object) -> Settings:
    fixture = {
        k: kw.pop(k)
        for k in ("crash_after", "count_file", "stderr_line", "garbage", "exit_code")
        if k in kw
    }
    command, args = stdio_params(kind, **fixture)  # type: ignore[arg-type]
    return Settings(name=name, command=command, args=args, **kw)  # type: ignore[arg-type]


class Recorder:
    """Every event published, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self, server: str | None = None) -> list[str]:
        return [
            e.kind for e in self.events if server is None or getattr(e, "server", None) == server
        ]


def managed(config: Settings, recorder: Recorder) -> ServerHandle:
    return ServerHandle(config, publish=recorder)


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_for(predicate, timeout: float = 20.0) -> None:  # noqa: ANN001
    await until(predicate, timeout)


async def test_stdio_server_connects_lazily_lists_and_calls() -> None:
    """Nothing starts until first needed; then it connects, lists tools and calls one."""
    rec = Recorder()
    echo = managed(settings("echo", "echo"), rec)
    async with open_servers([echo]):
        assert echo.status() is ServerStatus.IDLE and echo.health.pid is None
        result = await echo.call_tool("echo", {"text": "hello"}, None)
        assert result.content[0].text == "hello"
        assert {t.name for t in await echo.list_tools()} >= {"echo", "add", "count"}
        record = echo.record()
        assert record.status == "connected" and record.tool_count == len(echo.tools)
        assert record.calls_ok == 1 and record.pid == echo.health.pid
    assert rec.kinds("echo")[:3] == ["mcp.connecting", "mcp.local.spawned", "mcp.connected"]
    spawned = next(e for e in rec.events if e.kind == "mcp.local.spawned")
    assert spawned.pid == record.pid
    assert rec.kinds("echo")[-2:] == ["mcp.disconnected", "mcp.local.shutdown"]
    assert not alive(record.pid)


async def test_kill_9_then_the_next_call_succeeds() -> None:
    """kill -9 mid-session: crashed, connecting, connected, and the next call is answered."""
    rec = Recorder()
    echo = managed(settings("echo", "echo", lazy=False), rec)
    async with open_servers([echo]):
        await wait_for(lambda: echo.status() is ServerStatus.CONNECTED)
        first_pid = echo.health.pid
        assert first_pid is not None
        rec.events.clear()
        os.kill(first_pid, signal.SIGKILL)
        # "Next" call: once the death is known. (A call racing the kill itself may have
        # been written to the dying process's stdin: it fails as may-have-taken-effect.)
        await wait_for(lambda: "mcp.local.crashed" in rec.kinds())
        result = await echo.call_tool("echo", {"text": "after"}, None)
        assert result.content[0].text == "after"
        assert echo.health.pid != first_pid and echo.health.restarts == 1
    kinds = rec.kinds("echo")
    crashed = kinds.index("mcp.local.crashed")
    connecting = kinds.index("mcp.connecting", crashed)
    assert kinds.index("mcp.connected", connecting) > connecting
    crash = next(e for e in rec.events if e.kind == "mcp.local.crashed")
    assert crash.exit_code == -signal.SIGKILL
    assert any("ready" in line for line in crash.stderr_tail)


async def test_call_in_flight_at_a_crash_fails_and_is_not_resent(tmp_path) -> None:  # noqa: ANN001
    """A call the server ran before dying fails as may-have-taken-effect; never re-sent."""
    count = tmp_path / "count"
    rec = Recorder()
    crashy = managed(settings("crashy", "crash", crash_after=2, count_file=count), rec)
    async with open_servers([crashy]):
        assert (await crashy.call_tool("echo", {"text": "one"}, None)).content[0].text == "one"
        with pytest.raises(CallMayHaveTakenEffect, match="may have taken effect") as info:
            await crashy.call_tool("echo", {"text": "two"}, None)
        assert info.value.server == "crashy" and info.value.tool == "echo"
        # The next call goes to a fresh process (which will crash on its own 2nd call).
        assert (await crashy.call_tool("add", {"a": 1, "b": 2}, None)).content[0].text == "3"
    assert count_executions(count) == {"echo": 2, "add": 1}


async def test_calls_queued_during_a_restart_are_served() -> None:
    """Calls made while the server waits out its backoff are answered after the restart."""
    rec = Recorder()
    echo = managed(settings("echo", "echo", lazy=False, backoff=Backoff(initial=0.5)), rec)
    results: list[str] = []

    async def call(i: int) -> None:
        result = await echo.call_tool("echo", {"text": f"q{i}"}, None)
        results.append(result.content[0].text)

    async with open_servers([echo]):
        await wait_for(lambda: echo.status() is ServerStatus.CONNECTED)
        first = echo.health.pid
        os.kill(first, signal.SIGKILL)  # type: ignore[arg-type]
        # The first crash is restarted at once; the second in a row waits the backoff.
        await wait_for(
            lambda: echo.status() is ServerStatus.CONNECTED and echo.health.pid != first
        )
        os.kill(echo.health.pid, signal.SIGKILL)  # type: ignore[arg-type]
        await wait_for(lambda: echo.status() is ServerStatus.DISCONNECTED)
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(call, i)
    assert sorted(results) == [f"q{i}" for i in range(5)]


async def test_a_server_that_never_starts_fails_fast_after_its_attempts() -> None:
    """exit-on-start: after max_attempts restarts the server is failed; calls fail fast,
    saying how many tries it had (the first and the restarts), as its events count them."""
    rec = Recorder()
    broken = managed(
        settings(
            "jira",
            "exit-on-start",
            exit_code=3,
            max_attempts=2,
            lazy=False,
            backoff=Backoff(initial=0.05),
        ),
        rec,
    )
    echo = managed(settings("echo", "echo"), rec)
    async with open_servers([broken, echo]):
        await wait_for(lambda: broken.status() is ServerStatus.FAILED)
        with pytest.raises(ServerUnavailable) as info:
            await broken.call_tool("echo", {"text": "x"}, None)
        message = str(info.value)
        assert "MCP server 'jira' is unavailable after 3 attempts; last error:" in message
        assert "exited with code 3" in message
        # Its sibling never noticed.
        assert (await echo.call_tool("echo", {"text": "fine"}, None)).content[0].text == "fine"
        assert echo.health.restarts == 0
    errors = [e for e in rec.events if e.kind == "mcp.error" and e.server == "jira"]
    assert [e.attempt for e in errors] == [1, 2, 3]
    assert errors[-1].retry_in is None and errors[0].retry_in == 0  # the first: at once
    assert errors[1].retry_in == pytest.approx(0.05)
    # One numbering: each try is the attempt its failure is, from 1, the last of 1 + 2.
    tries = [e for e in rec.events if e.kind == "mcp.connecting" and e.server == "jira"]
    assert [(e.attempt, e.max_attempts) for e in tries] == [(1, 3), (2, 3), (3, 3)]
    # The tree's give-up follows the last mcp.error, which it caused.
    kinds = [e.kind for e in rec.events if getattr(e, "server", None) == "jira"
             or getattr(e, "child", None) == "jira"]
    assert kinds[-2:] == ["mcp.error", "supervisor.child.gave_up"]


async def test_initialize_never_answered_fails_within_init_timeout() -> None:
    """A server that never answers the handshake fails with a timeout naming initTimeout
    (not some longer deadline: the error says which)."""
    rec = Recorder()
    hung = managed(settings("hung", "hang-init", init_timeout=1.0, max_attempts=0, lazy=False), rec)
    async with open_servers([hung]):
        await wait_for(lambda: hung.status() is ServerStatus.FAILED)
        assert "did not complete the MCP handshake within 1.0 s (initTimeout)" in (
            hung.health.last_error or ""
        )


async def test_garbage_on_stdout_is_a_clear_error_and_the_tree_survives() -> None:
    """Non-JSON on stdout fails that server with an error saying so; others work on."""
    rec = Recorder()
    noisy = managed(settings("noisy", "garbage", max_attempts=0, lazy=False), rec)
    echo = managed(settings("echo", "echo"), rec)
    async with open_servers([noisy, echo]):
        await wait_for(lambda: noisy.status() is ServerStatus.FAILED)
        assert "wrote a line to stdout that is not a JSON-RPC message" in (
            noisy.health.last_error or ""
        )
        assert "must log to stderr" in (noisy.health.last_error or "")
        assert (await echo.call_tool("echo", {"text": "ok"}, None)).content[0].text == "ok"


@pytest.mark.parametrize("how", ["normal", "exception", "cancelled"])
async def test_no_process_is_left_behind(how: str) -> None:
    """However the tree ends — normally, by an exception, by cancellation — no server lives."""
    rec = Recorder()
    servers = [managed(settings(f"s{i}", "echo", lazy=False), rec) for i in range(3)]

    class Boom(Exception):
        pass

    pids: list[int] = []
    with trio.move_on_after(30) as scope:
        try:
            async with open_servers(servers):
                await wait_for(lambda: all(s.status() is ServerStatus.CONNECTED for s in servers))
                pids = [s.health.pid for s in servers]  # type: ignore[misc]
                if how == "exception":
                    raise Boom
                if how == "cancelled":
                    scope.cancel()
                    await trio.sleep_forever()
        except Boom:
            pass
    assert len(pids) == 3
    assert not any(alive(pid) for pid in pids)


class Answer(BaseModel):
    name: str


def elicitation_app() -> object:
    app = MCPServer("asks")

    @app.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("your name?", Answer)
        return f"{answer.action}:{getattr(answer, 'data', None)}"

    return app


async def test_server_requests_go_to_the_embedders_handlers() -> None:
    """A server's elicitation reaches the handler passed in; without one it gets an error."""
    import mcp_types as types

    from supervisor.server import ServerRequestError

    async def elicit(context: object, params: object) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "bob"})

    rec = Recorder()
    config = Settings(name="asks", command="", args=[], type="memory", app=elicitation_app())
    answered = ServerHandle(
        config, publish=rec, client_options={"mode": "legacy", "elicitation_callback": elicit}
    )
    bare = ServerHandle(
        attrs.evolve(config, name="bare"), publish=rec, client_options={"mode": "legacy"}
    )
    async with open_servers([answered, bare]):
        result = await answered.call_tool("ask", {}, None)
        assert result.content[0].text == "accept:name='bob'"
        with pytest.raises(ServerRequestError, match="Elicitation not supported"):
            await bare.call_tool("ask", {}, None)
        assert bare.health.restarts == 0


async def test_idempotent_tools_are_resent_only_with_the_opt_in(tmp_path) -> None:  # noqa: ANN001
    """With retry_idempotent, a read-only tool in flight at a crash is sent again."""
    count = tmp_path / "count"
    rec = Recorder()
    config = settings("c", "crash", crash_after=2, count_file=count)
    opted = ServerHandle(config, publish=rec, retry_idempotent=True)
    async with open_servers([opted]):
        await opted.call_tool("add", {"a": 1, "b": 1}, None)
        # echo is annotated read-only and idempotent: the crash is absorbed, it runs again.
        assert (await opted.call_tool("echo", {"text": "twice"}, None)).content[0].text == "twice"
    assert count_executions(count) == {"add": 1, "echo": 2}
    assert opted.health.restarts == 1


async def test_a_server_that_stops_answering_pings_is_restarted() -> None:
    """A stopped (SIGSTOP) server misses a probe (degraded), then the next (down):
    restarted, usable again."""
    rec = Recorder()
    config = settings("frozen", "echo", lazy=False, ping_interval=0.2)
    # Long enough that a loaded machine answers every ping before the SIGSTOP.
    frozen = ServerHandle(config, publish=rec, ping_timeout=2.0)
    async with open_servers([frozen]):
        await wait_for(lambda: frozen.status() is ServerStatus.CONNECTED)
        pid = frozen.health.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        await wait_for(lambda: "mcp.health.stale" in rec.kinds())
        assert frozen.status() is ServerStatus.DEGRADED  # one miss: slow is not dead
        await wait_for(lambda: "mcp.health.down" in rec.kinds())
        # Shown down at once, though stopping the hung process takes seconds.
        assert frozen.status() is ServerStatus.DISCONNECTED and alive(pid)
        assert (await frozen.call_tool("echo", {"text": "back"}, None)).content[0].text == "back"
        assert frozen.health.pid != pid and frozen.health.restarts == 1
    assert not alive(pid)
    stale = next(e for e in rec.events if e.kind == "mcp.health.stale")
    assert stale.last_ok is not None
    assert "within 2.0 s (pingTimeout)" in (stale.reason or "")
    down = next(e for e in rec.events if e.kind == "mcp.health.down")
    assert down.found_by == "probe"
    assert "answered neither of two probes" in (frozen.health.last_error or "")


async def test_pings_keep_a_healthy_connection() -> None:
    """Pings that are answered (ping, or discover on 2026-07-28) keep the connection."""
    rec = Recorder()
    config = settings("healthy", "echo", lazy=False, ping_interval=0.1)
    healthy = ServerHandle(config, publish=rec, ping_timeout=5)
    async with open_servers([healthy]):
        await wait_for(lambda: healthy.status() is ServerStatus.CONNECTED)
        first_ok = healthy.health.last_ok
        await wait_for(lambda: (healthy.health.last_ok or 0) > (first_ok or 0) + 0.25)
        assert healthy.health.restarts == 0 and "mcp.health.stale" not in rec.kinds()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_changed_tool_list_is_fetched_again(mode: str) -> None:
    """A server announcing a new tool (listen stream on 2026-07-28, the notification on
    handshake-era connections) gets its list re-fetched; the live catalog registers it."""
    from supervisor.registry._live import Registry

    rec = Recorder()
    registry = Registry(["changing"], publish=rec)
    changing = ServerHandle(
        settings("changing", "changing"),
        publish=rec,
        client_options={"mode": mode},
        report=registry.report,
    )
    changing.config.prefix = "changing"  # type: ignore[attr-defined]
    async with open_servers([changing]):
        await changing.call_tool("add_tool", {"name": "extra"}, None)
        await wait_for(lambda: "changing_extra" in registry.snapshot.current)
        assert changing.health.tool_count == len(changing.tools)
    registered = [e for e in rec.events if e.kind == "tools.registered"]
    assert "changing_echo" in registered[0].names
    assert registered[-1].server == "changing" and registered[-1].names == ["changing_extra"]
    # Stopped: the server withdrew its tools.
    assert rec.events[-1].kind == "tools.deregistered" and len(registry.snapshot.current) == 0
