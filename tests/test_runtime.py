"""open_supervisor end to end: real servers over stdio, HTTP, SSE and WebSocket."""

from __future__ import annotations

import io
import json
import socket

import msgspec
import pytest
import trio

from supervisor import log
from supervisor.events._catalog import encode
from supervisor.runtime import UnknownTool, open_supervisor
from supervisor.server import ServerUnavailable, ToolCallTimeout
from supervisor.testing.servers import make_server, start_http, stdio_params
from supervisor.transports._ws import serve_websocket

from .probes import until


def stdio(kind: str, **kw: object) -> dict[str, object]:
    fixture = {k: kw.pop(k) for k in ("crash_after", "count_file", "stderr_line") if k in kw}
    command, args = stdio_params(kind, **fixture)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **kw}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_status(sup, name: str, status: str, timeout: float = 20) -> None:  # noqa: ANN001
    await until(lambda: sup.status()[name].status == status, timeout)


async def in_flight(sup, name: str) -> None:  # noqa: ANN001
    """Wait until a call to server ``name`` is on its connection."""

    def on_it() -> bool:
        actor = sup._servers[name].current
        return actor is not None and actor.direct_calls.in_flight > 0

    await until(on_it, 20)


async def test_calls_go_to_the_right_server_by_merged_name() -> None:
    """github_echo goes to github's echo; an unknown prefix is a clear error."""
    config = {"mcpServers": {"github": stdio("echo"), "jira": stdio("echo", prefix="j")}}
    async with open_supervisor(config) as sup:
        assert (await sup.call("github_echo", {"text": "a"})).text == "a"
        assert (await sup.call("j_add", {"a": 2, "b": 3})).text == "5"
        with pytest.raises(UnknownTool, match="no tool named 'nope_echo'"):
            await sup.call("nope_echo", {"text": "x"})
        status = sup.status()
        assert status["github"].status == "connected" and status["jira"].tool_count == 3


async def test_missing_variable_fails_that_server_only() -> None:
    """A missing ${VAR} fails its server, naming the variable and never a value."""
    config = {
        "mcpServers": {
            "good": stdio("echo", env={"TOKEN": "${PRESENT_TOKEN}"}),
            "bad": stdio("echo", env={"TOKEN": "${ABSENT_TOKEN}", "OTHER": "${PRESENT_TOKEN}"}),
        }
    }
    from supervisor.config import load_config

    cfg = load_config(config, environ={"PRESENT_TOKEN": "value-that-is-secret-123"})
    async with open_supervisor(cfg) as sup:
        assert (await sup.call("good_echo", {"text": "ok"})).text == "ok"
        with pytest.raises(ServerUnavailable) as info:
            await sup.call("bad_echo", {"text": "x"})
        assert "ABSENT_TOKEN" in str(info.value)
        assert "value-that-is-secret-123" not in str(info.value)
        record = sup.status()["bad"]
        assert record.status == "failed" and "ABSENT_TOKEN" in (record.last_error or "")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_server_restarted_on_the_same_port_recovers(mode: str) -> None:
    """Stop an HTTP server, start it again on the same port: calls meanwhile succeed
    (a legacy session, unknown to the new server, is replaced by a new one)."""
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        config = {
            "mcpServers": {
                "web": {
                    "url": web.url,
                    "type": "http",
                    "approve": False,
                    "reconnect": {"initial": 0.1, "max": 0.2},
                }
            }
        }
        async with open_supervisor(config, mode=mode) as sup:
            assert (await sup.call("web_echo", {"text": "before"})).text == "before"
            await web.stop()
            results: list[str] = []

            async def call(i: int) -> None:
                result = await sup.call("web_echo", {"text": f"during{i}"}, timeout=20)
                results.append(result.text)

            async with trio.open_nursery() as calls:
                for i in range(3):
                    calls.start_soon(call, i)
                await wait_status(sup, "web", "disconnected")
                web = await start_http(nursery, make_server("echo"), port=web.port)
            assert sorted(results) == ["during0", "during1", "during2"]
            assert sup.status()["web"].status == "connected"
        await web.stop()


async def test_server_down_for_good_fails_after_its_attempts() -> None:
    """Nothing listening: failed after the configured attempts, fast failures, siblings fine."""
    url = f"http://127.0.0.1:{free_port()}/mcp"
    config = {
        "mcpServers": {
            "gone": {
                "url": url,
                "approve": False,
                "type": "http",
                "lazy": False,
                "reconnect": {"maxAttempts": 2, "initial": 0.05, "max": 0.1},
            },
            "echo": stdio("echo"),
        }
    }
    async with open_supervisor(config) as sup:
        await wait_status(sup, "gone", "failed")
        with trio.fail_after(30):  # a hang guard; waiting would end in a call timeout
            with pytest.raises(ServerUnavailable, match="unavailable after 3 attempts"):
                await sup.call("gone_echo", {"text": "x"})
        assert (await sup.call("echo_echo", {"text": "y"})).text == "y"
        assert sup.status()["echo"].restarts == 0


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            {"restartOnCrash": False},
            "is not restarted: its config says restartOnCrash: false (or maxRestarts: 0)",
        ),
        (
            {"maxRestarts": 0},
            "is not restarted: its config says restartOnCrash: false (or maxRestarts: 0)",
        ),
        ("remote", "is not reconnected: its config says reconnect: false (or maxAttempts: 0)"),
    ],
    ids=["restartOnCrash-false", "maxRestarts-0", "reconnect-false"],
)
async def test_a_server_its_config_does_not_restart_says_so(
    entry: dict[str, object] | str, said: str
) -> None:
    """A server whose config allows no restart fails at its first error; its calls say
    that, the last error and how to restart it — not 'unavailable after 0 attempts'."""
    if entry == "remote":
        url = f"http://127.0.0.1:{free_port()}/mcp"
        server = {"url": url, "type": "http", "approve": False, "reconnect": False}
    else:
        server = stdio("exit-on-start", **entry)  # type: ignore[arg-type]
    async with open_supervisor({"mcpServers": {"calc": {**server, "lazy": False}}}) as sup:
        await wait_status(sup, "calc", "failed")
        with trio.fail_after(30), pytest.raises(ServerUnavailable) as info:
            await sup.call("calc_echo", {"text": "x"})
    message = str(info.value)
    assert message.startswith(f"MCP server 'calc' failed and {said}; last error: ")
    assert "attempts" not in message
    assert ("exited with code" if entry != "remote" else "cannot connect") in message
    assert message.endswith("Fix the cause, then restart it (handle.restart('calc'))")
    cli = info.value.cli_message
    assert cli.endswith(
        "Fix the cause, then run the command again: each run starts its servers afresh"
    )


async def test_one_timeout_does_not_disturb_fifty_in_flight() -> None:
    """One call timing out on a connection leaves 50 others in flight on it untouched."""
    config = {"mcpServers": {"slow": stdio("slow")}}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        answers: list[str] = []

        async def ok(i: int) -> None:
            result = await sup.call("slow_sleep", {"seconds": 1.0}, timeout=30)
            answers.append(result.text)

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(ok, i)
            with pytest.raises(ToolCallTimeout, match="did not answer tool 'sleep' within 0.3 s"):
                await sup.call("slow_sleep", {"seconds": 30}, timeout=0.3)
        assert len(answers) == 50
        assert sup.status()["slow"].restarts == 0


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_sse_and_websocket_servers(transport: str) -> None:
    """Legacy SSE and WebSocket servers connect, list and call like the others."""
    async with trio.open_nursery() as nursery:
        if transport == "sse":
            server = await start_http(nursery, make_server("echo"), transport="sse")
            url, stop = server.url, server.stop
        else:
            url = await nursery.start(serve_websocket, make_server("echo"))
            stop = None
        config = {"mcpServers": {"remote": {"url": url, "type": transport, "approve": False}}}
        async with open_supervisor(config) as sup:
            assert (await sup.call("remote_add", {"a": 1, "b": 1})).text == "2"
            assert sup.status()["remote"].tool_count == 3
        if stop is not None:
            await stop()
        nursery.cancel_scope.cancel()


async def test_secrets_never_reach_logs_events_or_status() -> None:
    """A secret from env or headers appears in no log line, event or status output."""
    env_secret = "env-secret-0123456789abcdef"
    header_secret = "header-secret-9876543210zyx"
    stream = io.StringIO()
    log.configure_logging(level="debug", stream=stream, json=True, force=True)
    try:
        async with trio.open_nursery() as nursery:
            web = await start_http(nursery, make_server("echo"))
            config = {
                "mcpServers": {
                    "local": stdio(
                        "echo",
                        env={"API_TOKEN": env_secret},
                        stderr_line=f"starting with token {env_secret}",
                    ),
                    "web": {
                        "url": web.url,
                        "approve": False,
                        "type": "http",
                        "headers": {"Authorization": f"Bearer {header_secret}"},
                    },
                }
            }
            async with open_supervisor(config) as sup, sup.subscribe("*") as events:
                await sup.call("local_echo", {"text": "hi"})
                await sup.call("web_echo", {"text": "hi"})
                status = msgspec.json.encode(sup.status()).decode()
                await sup.stop("local")
                seen = b"".join(encode(e) for e in events.drain()).decode()
            await web.stop()
    finally:
        log.reset_logging()
    logs = stream.getvalue()
    assert "starting with token ***" in logs  # the stderr line was logged, redacted
    for text in (logs, status, seen):
        assert env_secret not in text and header_secret not in text
    json.loads(status)


async def test_a_forgotten_session_is_renewed_transparently() -> None:
    """Legacy Streamable HTTP: a server restarted behind the same URL no longer knows our
    session id; the next call gets a new session and succeeds, without a restart."""
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo"))
        config = {"mcpServers": {"web": {"url": web.url, "type": "http", "approve": False}}}
        async with open_supervisor(config, mode="legacy") as sup, sup.subscribe("mcp.*") as ev:
            assert (await sup.call("web_echo", {"text": "one"})).text == "one"
            await web.stop()
            web = await start_http(nursery, make_server("echo"), port=web.port)
            assert (await sup.call("web_echo", {"text": "two"})).text == "two"
            record = sup.status()["web"]
            assert record.restarts == 0 and record.status == "connected"
            kinds = [(e.kind, getattr(e, "reason", None)) for e in ev.drain()]
            assert ("mcp.disconnected", "session expired") in kinds
            assert kinds[-1][0] == "mcp.connected"
        await web.stop()


async def test_remote_server_falls_back_to_legacy_sse() -> None:
    """A `remote` URL whose first POST gets a 4xx is retried as a legacy SSE server; its
    record's type says so."""
    async with trio.open_nursery() as nursery:
        sse = await start_http(nursery, make_server("echo"), transport="sse")
        for entry in (
            {"url": sse.url, "approve": False},
            {"url": sse.url, "type": "remote", "approve": False},
        ):
            async with open_supervisor({"mcpServers": {"old": entry}}) as sup:
                assert (await sup.call("old_echo", {"text": "hi"})).text == "hi"
                record = sup.status()["old"]
                assert record.restarts == 0 and record.type == "sse"
                assert record.target == sse.url.split("?")[0]
        # An explicit http type never falls back: the 4xx is the error.
        explicit = {"url": sse.url, "type": "http", "reconnect": False, "approve": False}
        async with open_supervisor({"mcpServers": {"new": explicit}}) as sup:
            with pytest.raises(ServerUnavailable):
                await sup.call("new_echo", {"text": "hi"})
        await sse.stop()


async def test_stop_and_restart_a_server() -> None:
    """stop() fails its calls fast; restart() brings it back; a failed one too."""
    config = {"mcpServers": {"echo": stdio("echo"), "other": stdio("echo")}}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        pid = sup.status()["echo"].pid
        await sup.stop("echo")
        assert sup.status()["echo"].status == "stopped"
        with pytest.raises(ServerUnavailable, match="'echo' is stopped"):
            await sup.call("echo_echo", {"text": "x"})
        await sup.restart("echo")
        assert (await sup.call("echo_echo", {"text": "back"})).text == "back"
        assert sup.status()["echo"].pid != pid
        # restart() of a running server replaces its process.
        pid = sup.status()["other"].pid
        await sup.restart("other")
        assert (await sup.call("other_echo", {"text": "new"})).text == "new"
        assert sup.status()["other"].pid != pid
        from supervisor.errors import UnknownServer

        with pytest.raises(UnknownServer, match="no MCP server named 'nope'"):
            await sup.stop("nope")


async def test_a_dropped_websocket_connection_recovers() -> None:
    """The WebSocket server goes away and comes back on the same port: the drop is
    noticed at once (an mcp.error with the reason), and calls work again."""
    from urllib.parse import urlsplit

    async with trio.open_nursery() as nursery:

        async def serve(port: int, task_status: trio.TaskStatus[str]) -> None:
            with scope:
                await serve_websocket(make_server("echo"), port=port, task_status=task_status)

        scope = trio.CancelScope()
        url = await nursery.start(serve, 0)
        port = urlsplit(url).port
        config = {
            "mcpServers": {
                "ws": {"url": url, "approve": False, "reconnect": {"initial": 0.1, "max": 0.2}}
            }
        }
        async with open_supervisor(config) as sup, sup.subscribe("mcp.error") as errors:
            assert (await sup.call("ws_echo", {"text": "one"})).text == "one"
            scope.cancel()
            with trio.fail_after(10):
                first = await errors.receive()
            assert first.server == "ws" and first.error and first.retry_in is not None
            assert sup.status()["ws"].last_error == first.error
            scope = trio.CancelScope()
            await nursery.start(serve, port)
            result = await sup.call("ws_echo", {"text": "two"}, timeout=20)
            assert result.text == "two"
            assert sup.status()["ws"].restarts >= 1
        scope.cancel()


def fixture_children() -> list[int]:
    """Pids of this process's children that run a fixture server (from /proc)."""
    import os
    import pathlib

    found = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"supervisor.testing.servers" in cmdline:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize("how", ["normal", "exception", "cancelled"])
async def test_no_server_process_remains_after_open_supervisor(how: str) -> None:
    """However the block ends, no server process of ours is left in the process tree."""
    config = {"mcpServers": {f"s{i}": stdio("echo", lazy=False) for i in range(3)}}

    class Boom(Exception):
        pass

    seen: list[int] = []
    with trio.move_on_after(60) as scope:
        try:
            async with open_supervisor(config) as sup:
                await sup.connect_all()
                seen = fixture_children()
                assert len(seen) == 3
                if how == "exception":
                    raise Boom
                if how == "cancelled":
                    scope.cancel()
                    await trio.sleep_forever()
        except Boom:
            pass
    assert seen and fixture_children() == []


async def test_stopping_a_server_lets_calls_in_flight_finish() -> None:
    """stop() is graceful: a call already running is answered before the process stops."""
    config = {"mcpServers": {"slow": stdio("slow")}}
    async with open_supervisor(config) as sup:
        await sup.connect_all()
        answers: list[str] = []

        async def long_call() -> None:
            result = await sup.call("slow_sleep", {"seconds": 0.5})
            answers.append(result.text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            await in_flight(sup, "slow")
            await sup.stop("slow")
        assert answers == ["slept 0.5"]
        assert sup.status()["slow"].status == "stopped"


async def test_a_remote_server_dying_mid_call_fails_the_call_promptly(tmp_path) -> None:  # noqa: ANN001
    """An HTTP server that goes away while a call runs on it (its count file shows the
    call arrived): the call fails at once as may-have-taken-effect, rather than waiting
    for its timeout. (Gone before the request went out, the call waits for the server
    instead: test_a_call_to_a_remote_server_gone_before_it_was_sent_runs_once_it_is_back.)"""
    from supervisor.server import CallMayHaveTakenEffect
    from supervisor.testing.servers import count_executions

    counts = tmp_path / "counts"
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("slow", count_file=counts))
        config = {"mcpServers": {"web": {"url": web.url, "type": "http", "approve": False}}}
        async with open_supervisor(config) as sup:
            await sup.connect_all()

            async def stop_once_it_runs() -> None:
                await until(lambda: count_executions(counts)["hold"] == 1, 20)
                await web.stop()

            nursery.start_soon(stop_once_it_runs)
            with trio.fail_after(10), pytest.raises(CallMayHaveTakenEffect):
                await sup.call("web_hold", {"seconds": 30}, timeout=60)


async def test_a_remote_server_killed_mid_call_and_back_ran_the_call_once(tmp_path) -> None:  # noqa: ANN001
    """kill -9 of a Streamable HTTP server while a call runs on it, then the server again
    on the same port: the caller is told at once that the call may have taken effect,
    and nothing sends the request it had written again — neither the supervisor nor
    the HTTP client, on the restarted server's connections: it ran once."""
    from supervisor.server import CallMayHaveTakenEffect
    from supervisor.testing.servers import count_executions
    from supervisor.testing.servers._procs import open_http_fixture

    counts = tmp_path / "counts"
    reconnect = {"initial": 0.1, "max": 0.5, "maxAttempts": 100}  # a process to wait for
    async with open_http_fixture("slow", count_file=counts) as first:
        server = {"url": first.url, "type": "http", "approve": False, "reconnect": reconnect}
        async with open_supervisor({"mcpServers": {"web": server}}) as sup:
            await sup.connect_all()
            bound = trio.CancelScope()  # from the kill on: promptly, not at the timeout

            async def kill_once_it_runs() -> None:
                await until(lambda: count_executions(counts)["hold"] == 1, 60)
                first.kill()
                bound.deadline = trio.current_time() + 10

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_once_it_runs)
                with bound, pytest.raises(CallMayHaveTakenEffect):
                    await sup.call("web_hold", {"seconds": 600}, timeout=300)
            assert not bound.cancelled_caught, "the call was not failed within 10 s of the kill"
            port = int(first.url.rsplit(":", 1)[1].split("/", 1)[0])
            async with open_http_fixture("slow", port=port, count_file=counts):
                assert (await sup.call("web_add", {"a": 2, "b": 3}, timeout=120)).text == "5"
                assert sup.status()["web"].status == "connected"
    assert count_executions(counts) == {"hold": 1, "add": 1}


async def test_a_call_to_a_remote_server_gone_before_it_was_sent_runs_once_it_is_back(
    tmp_path,  # noqa: ANN001
) -> None:
    """A Streamable HTTP server stopped, then a call of a tool not safe to run twice: it
    cannot reach the server (its kept-alive connections are closed, a new one refused),
    so it is not failed as may-have-taken-effect but waits for the server, and runs once
    the server is back — once."""
    from supervisor.testing.servers import count_executions

    counts = tmp_path / "counts"
    async with trio.open_nursery() as nursery:
        web = await start_http(nursery, make_server("echo", count_file=counts))
        reconnect = {"initial": 0.1, "max": 0.2, "maxAttempts": 100}
        server = {"url": web.url, "type": "http", "approve": False, "reconnect": reconnect}
        async with open_supervisor({"mcpServers": {"web": server}}) as sup:
            assert (await sup.call("web_add", {"a": 1, "b": 1})).text == "2"
            await web.stop()
            results: list[str] = []

            async def call() -> None:
                results.append((await sup.call("web_add", {"a": 2, "b": 3}, timeout=60)).text)

            async with trio.open_nursery() as calls:
                calls.start_soon(call)
                await wait_status(sup, "web", "disconnected")
                assert results == []  # it waits for the server: never sent, not failed
                again = make_server("echo", count_file=counts)
                web = await start_http(nursery, again, port=web.port)
            assert results == ["5"]
        await web.stop()
    assert count_executions(counts) == {"add": 2}


async def test_the_live_catalog_names_routes_and_guards_calls(tmp_path) -> None:  # noqa: ANN001
    """Two unprefixed servers both offering echo: the later one's is echo_2 (with a
    tools.conflict event); calls route by the catalog; bad arguments never leave."""
    from supervisor.errors import ToolArgumentsInvalid
    from supervisor.testing.servers import count_executions

    first, second = tmp_path / "first", tmp_path / "second"
    config = {
        "mcpServers": {
            "one": stdio("echo", prefix="", count_file=first),
            "two": stdio("echo", prefix="", count_file=second),
        }
    }
    bus = __import__("supervisor").Bus()
    async with bus.subscribe("tools.*") as events, open_supervisor(config, bus=bus) as sup:
        await sup.connect_all()
        assert {"echo", "echo_2", "add", "add_2"} <= set(sup.catalog)
        assert sup.catalog["echo_2"].server == "two"
        assert (await sup.call("echo_2", {"text": "b"})).text == "b"
        assert (await sup.call("echo", {"text": "a"})).text == "a"
        with pytest.raises(ToolArgumentsInvalid, match=r"tool 'add_2': a: 'three' is not of type"):
            await sup.call("add_2", {"a": "three", "b": 1})
        assert [e.name for e in sup.search("echo", limit=2)] == ["echo", "echo_2"]
        seen = events.drain()
    kinds = [e.kind for e in seen]
    # Whichever connected first, config order decides the names in the end.
    last = {e.server: e.names for e in seen if e.kind == "tools.registered"}
    assert last == {"one": ["add", "count", "echo"], "two": ["add_2", "count_2", "echo_2"]}
    assert "tools.conflict" in kinds
    conflict = next(e for e in seen if e.kind == "tools.conflict" and e.name == "echo")
    assert conflict.servers == ["one", "two"]
    assert count_executions(first) == {"echo": 1}
    assert count_executions(second) == {"echo": 1}  # the invalid add never ran


async def test_restarts_count_the_tree_s_restarts_over_the_server_s_life() -> None:
    """``restarts`` (a Prometheus counter) is the tree's count of restarts after failures;
    a ``restart()`` by hand is not one and does not take the count back to 0, though the
    tree starts its own count over."""
    from supervisor.server import CallMayHaveTakenEffect

    config = {
        "supervisor": {"backoff": {"local": {"initial": 0.05, "max": 0.1}}},
        "mcpServers": {"c": stdio("crash")},
    }
    async with open_supervisor(config) as sup:
        for restarts in (1, 2):
            with pytest.raises(CallMayHaveTakenEffect):
                await sup.call("c_echo", {"text": "boom"})
            await until(lambda n=restarts: sup.status()["c"].restarts == n, 20)
            await wait_status(sup, "c", "connected")
        await sup.restart("c")
        await wait_status(sup, "c", "connected")
        assert sup.status()["c"].restarts == 2 and sup.metrics()["c"].restarts == 2
        with pytest.raises(CallMayHaveTakenEffect):
            await sup.call("c_echo", {"text": "boom"})
        await until(lambda: sup.status()["c"].restarts == 3, 20)
