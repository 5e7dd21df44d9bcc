"""A running supervisor takes a new config (``SupervisorHandle.reconfigure``): added
servers start, removed ones drain and stop, replaced ones keep their mailbox, policy
changes apply in place, unchanged servers are not touched, a bad config changes nothing —
over real stdio fixture servers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from supervisor.errors import ConfigError, ServerUnavailable, UnknownTool
from supervisor.events._catalog import ConfigRejected, ConfigReloaded, Event
from supervisor.runtime import SupervisorHandle, open_supervisor
from supervisor.server import ServerStatus
from supervisor.testing.servers import count_executions, stdio_params

WAIT = 30  # seconds a step may take on a busy 2-core machine


def entry(kind: str = "echo", **extra: Any) -> dict[str, Any]:
    """A fixture server's entry, its calls approved unless ``approve`` says otherwise."""
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **extra}


def write(path: Path, servers: dict[str, Any], **settings: Any) -> Path:
    doc: dict[str, Any] = {"mcpServers": servers}
    if settings:
        doc["supervisor"] = settings
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def pid(sup: SupervisorHandle, name: str) -> int | None:
    return sup.status()[name].pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def collect(sup: SupervisorHandle, into: list[Event], *, task_status: Any) -> None:
    async with sup.subscribe("supervisor.config.*", "tools.*") as events:
        task_status.started()
        async for event in events:
            into.append(event)


async def test_an_added_server_starts_and_nothing_else_is_touched(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry()})
    seen: list[Event] = []
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup, trio.open_nursery() as nursery:
            await nursery.start(collect, sup, seen)
            await sup.tools()
            before = pid(sup, "a")
            incarnations = sup._servers["a"].incarnations
            write(tmp_path / "mcp.json", {"a": entry(), "b": entry()})

            change = await sup.reconfigure()

            assert change.added == ("b",) and not (change.removed or change.replaced)
            assert (await sup.call("b_echo", {"text": "new"})).text == "new"
            assert (await sup.call("a_echo", {"text": "old"})).text == "old"
            assert pid(sup, "a") == before  # the same process: not touched
            assert sup._servers["a"].incarnations == incarnations
            assert list(sup.servers) == ["a", "b"] and list(sup.status()) == ["a", "b"]
            assert sup.config.servers.keys() == {"a", "b"}
            assert [id for id, *_ in sup._tree.which_children()] == ["a", "b"]
            assert sup._tree.statistics().restarts == 0
            nursery.cancel_scope.cancel()
    reloaded = [e for e in seen if isinstance(e, ConfigReloaded)]
    assert len(reloaded) == 1 and reloaded[0].added == ["b"]
    registered = {n for e in seen if e.kind == "tools.registered" for n in e.names}  # type: ignore[attr-defined]
    assert {"b_echo", "b_add", "b_count"} <= registered


async def test_a_removed_server_finishes_its_calls_then_stops(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command, args = stdio_params("slow", count_file=runs)
    slow = {"command": command, "args": args, "approve": False}
    path = write(tmp_path / "mcp.json", {"a": entry(), "s": slow})
    seen: list[Event] = []
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup, trio.open_nursery() as nursery:
            await nursery.start(collect, sup, seen)
            await sup.tools()
            slow_pid = pid(sup, "s")
            assert slow_pid is not None
            answered: list[str] = []

            async def in_flight() -> None:
                answered.append((await sup.call("s_sleep", {"seconds": 1.0})).text)

            nursery.start_soon(in_flight)
            # The call reached the server (another process's file: nothing to wait on).
            while not count_executions(runs)["sleep"]:  # noqa: ASYNC110
                await trio.sleep(0.02)
            write(path, {"a": entry()})

            change = await sup.reconfigure()

            assert change.removed == ("s",)
            assert len(answered) == 1, answered  # the call in flight was answered
            assert not alive(slow_pid)  # stopped, and waited for: no process left behind
            with pytest.raises(UnknownTool, match="'s' was removed from the configuration"):
                await sup.call("s_echo", {"text": "x"})
            assert "removed" in (sup.departed("s") or "") and sup.departed("a") is None
            assert list(sup.status()) == ["a"] and "s" not in sup.servers
            assert [id for id, *_ in sup._tree.which_children()] == ["a"]
            assert not [name for name in sup.catalog if name.startswith("s_")]
            nursery.cancel_scope.cancel()
    deregistered = {n for e in seen if e.kind == "tools.deregistered" for n in e.names}  # type: ignore[attr-defined]
    assert "s_sleep" in deregistered


async def test_a_call_that_reaches_a_removed_server_says_why(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry(), "b": entry()})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            handle = sup._servers["b"]
            await sup.reconfigure({"mcpServers": {"a": entry()}})
            with pytest.raises(ServerUnavailable, match="removed from the configuration"):
                await handle.call_tool("echo", {"text": "x"}, None)


async def test_a_replaced_server_serves_the_calls_queued_meanwhile(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command, args = stdio_params("echo", count_file=runs)
    echo = {"command": command, "args": args, "approve": False}
    path = write(tmp_path / "mcp.json", {"a": entry(), "e": echo})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup, trio.open_nursery() as nursery:
            await sup.tools()
            old = pid(sup, "e")
            write(path, {"a": entry(), "e": {**echo, "env": {"N": "1"}}})
            answers: list[str] = []

            async def caller(i: int) -> None:
                answers.append((await sup.call("e_echo", {"text": str(i)})).text)

            replaced = trio.Event()

            async def reload() -> None:
                change = await sup.reconfigure()
                assert change.replaced == {"e": ("env",)}
                replaced.set()

            nursery.start_soon(reload)
            for i in range(20):  # calls made throughout the swap
                nursery.start_soon(caller, i)
                await trio.lowlevel.checkpoint()
            await replaced.wait()
            for i in range(20, 25):
                nursery.start_soon(caller, i)
        assert sorted(answers, key=int) == [str(i) for i in range(25)]  # none lost or failed
        assert count_executions(runs)["echo"] == 25  # none sent twice
    assert old is not None and not alive(old)


async def test_replacing_a_server_is_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"e": entry()}, intensity={"maxRestarts": 0})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            for n in range(3):  # more than the intensity allows restarts
                write(path, {"e": entry(env={"N": str(n)})}, intensity={"maxRestarts": 0})
                await sup.reconfigure()
                assert (await sup.call("e_echo", {"text": str(n)})).text == str(n)
            assert sup.status()["e"].restarts == 0
            assert sup._tree.statistics().restarts == 0


async def test_a_policy_change_applies_in_place(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry(), "b": entry()})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            pids = {name: pid(sup, name) for name in ("a", "b")}
            write(path, {"a": entry(prefix="alpha", timeout=7), "b": entry()})

            change = await sup.reconfigure()

            assert change.changed == {"a": ("prefix", "timeout")} and not change.replaced
            await sup._registry.settled()
            assert (await sup.call("alpha_echo", {"text": "x"})).text == "x"
            with pytest.raises(UnknownTool):
                await sup.call("a_echo", {"text": "x"})
            assert sup.servers["a"].config.timeout == 7  # type: ignore[attr-defined]
            assert {name: pid(sup, name) for name in ("a", "b")} == pids


async def test_an_approval_change_is_decided_again(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"r": entry("rich", autoApprove=["wipe"])})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            assert sup.approval_reason("r_wipe") is None
            write(path, {"r": entry("rich")})
            await sup.reconfigure()
            assert sup.approval_reason("r_wipe") is not None


async def test_disabling_and_enabling_a_server(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry(), "b": entry()})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            b_pid = pid(sup, "b")
            assert b_pid is not None
            write(path, {"a": entry(), "b": entry(disabled=True)})
            await sup.reconfigure()
            assert sup.status()["b"].status is ServerStatus.DISABLED
            assert "b" not in sup.servers
            assert not alive(b_pid)
            write(path, {"a": entry(), "b": entry()})
            await sup.reconfigure()
            assert (await sup.call("b_echo", {"text": "back"})).text == "back"


async def test_a_config_that_does_not_load_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry()})
    seen: list[Event] = []
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup, trio.open_nursery() as nursery:
            await nursery.start(collect, sup, seen)
            await sup.tools()
            running = sup.config
            path.write_text('{"mcpServers": {"a": ', encoding="utf-8")  # cut short
            with pytest.raises(ConfigError):
                await sup.reconfigure()
            write(path, {"a": entry(), "b": {**entry(), "env": {"K": "${NOT_SET_ANYWHERE}"}}})
            with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
                await sup.reconfigure()
            write(path, {"a": entry(), "b": {"command": 3}})
            with pytest.raises(ConfigError, match="mcpServers.b.command"):
                await sup.reconfigure()
            assert sup.config is running and list(sup.servers) == ["a"]
            assert (await sup.call("a_echo", {"text": "still"})).text == "still"
            nursery.cancel_scope.cancel()
    rejected = [e for e in seen if isinstance(e, ConfigRejected)]
    assert len(rejected) == 3 and "NOT_SET_ANYWHERE" in rejected[1].errors[0]
    assert not [e for e in seen if isinstance(e, ConfigReloaded)]


async def test_settings_change_live_and_a_restart_setting_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry()})
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            write(
                path,
                {"a": entry()},
                strategy="one_for_all",
                audit={"path": str(audit)},
                authDir=str(tmp_path / "auth"),
            )
            change = await sup.reconfigure()
            assert set(change.settings) == {"strategy", "audit"}
            assert change.needs_restart == ("auth_dir",)
            assert sup._tree.strategy.value == "one_for_all"
            await sup.call("a_echo", {"text": "audited"})
            assert "a_echo" in audit.read_text(encoding="utf-8")


async def test_an_unchanged_config_does_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"a": entry()})
    with trio.fail_after(WAIT):
        async with open_supervisor(path) as sup:
            await sup.tools()
            before = pid(sup, "a")
            change = await sup.reconfigure()
            assert change.empty
            assert pid(sup, "a") == before
