"""A server's handle, against real fixture servers: its health record is assembled one
way whichever path reads it, and the errors its requests fail with say the server's
state in its words (each said once, where the actor's error meets the server)."""

from __future__ import annotations

import re

import msgspec
import pytest

from supervisor.config import load_config
from supervisor.errors import RequestTimeout
from supervisor.runtime import open_supervisor
from supervisor.server import (
    CallMayHaveTakenEffect,
    ServerStatus,
    ServerUnavailable,
    ToolCallTimeout,
)
from supervisor.server._managed import disabled_record
from supervisor.testing.servers import stdio_params

from .probes import until


def stdio(kind: str, **kw: object) -> dict[str, object]:
    fixture = {k: kw.pop(k) for k in ("crash_after",) if k in kw}
    command, args = stdio_params(kind, **fixture)  # type: ignore[arg-type]
    return {"command": command, "args": args, "approve": False, **kw}


async def test_a_status_read_and_a_disabled_record_are_assembled_alike() -> None:
    """A server that never started reads the same whether it is enabled (its handle's
    record, from a status read) or disabled (the record made from its config alone): all
    but the status, and the attempts its config allows, which a disabled one is not
    given; once it ran, its record is what its health says."""
    entry = stdio("echo")
    config = load_config({"mcpServers": {"echo": entry, "off": {**entry, "disabled": True}}})
    async with open_supervisor(config) as sup:
        status = sup.status()
        assert status["echo"].status is ServerStatus.IDLE
        assert status["off"] == disabled_record(config.servers["off"])
        assert status["off"].status is ServerStatus.DISABLED
        idle = msgspec.structs.replace(
            status["echo"], server="off", status=ServerStatus.DISABLED, max_attempts=0
        )
        assert idle == status["off"]
        assert status["echo"].max_attempts == config.servers["echo"].max_attempts

        assert (await sup.call("echo_echo", {"text": "a"})).text == "a"
        record = sup.status()["echo"]
        assert (record.status, record.calls_ok, record.tool_count) == ("connected", 1, 3)
        assert record.pid is not None and record.family[0] == record.pid
        assert record.target is not None and record.target == status["off"].target


async def test_a_stopped_server_fails_its_requests_in_its_words() -> None:
    config = {"mcpServers": {"echo": stdio("echo")}}
    async with open_supervisor(config) as sup:
        assert (await sup.call("echo_echo", {"text": "a"})).text == "a"
        await sup.stop("echo")
        server = sup._servers["echo"]
        said = "MCP server 'echo' is stopped; restart it to use it again"
        with pytest.raises(ServerUnavailable) as info:
            await server.call_tool("echo", {"text": "x"})
        assert str(info.value) == said and info.value.server == "echo"
        assert info.value.__cause__ is None and info.value.__suppress_context__
        with pytest.raises(ServerUnavailable, match=f"^{re.escape(said)}$"):
            await server.read_resource("file:///nothing", 5)
        with pytest.raises(ServerUnavailable, match=f"^{re.escape(said)}$"):
            server.check_available()


async def test_a_misconfigured_server_fails_its_requests_naming_what_is_missing() -> None:
    config = load_config(
        {"mcpServers": {"bad": stdio("echo", env={"TOKEN": "${ABSENT_TOKEN_X}"})}}, environ={}
    )
    async with open_supervisor(config) as sup:
        server = sup._servers["bad"]
        for request in (
            lambda: server.call_tool("echo", {"text": "x"}),
            lambda: server.get_prompt("p", {}, 5),
        ):
            with pytest.raises(ServerUnavailable) as info:
                await request()
            assert re.fullmatch(
                r"MCP server 'bad' is not configured correctly: .*ABSENT_TOKEN_X.*",
                str(info.value),
            )


async def test_requests_to_a_server_that_never_answers_time_out_in_its_words() -> None:
    """A server stuck in its handshake: each request waits in the mailbox until its own
    timeout, and says which request it was."""
    config = {"mcpServers": {"stuck": stdio("hang-init", lazy=False)}}
    async with open_supervisor(config) as sup:
        server = sup._servers["stuck"]
        with pytest.raises(RequestTimeout) as read:
            await server.read_resource("file:///a", 0.5)
        assert str(read.value) == (
            "MCP server 'stuck' did not answer resource 'file:///a' within 0.5 s"
        )
        assert (read.value.request, read.value.timeout) == ("resource 'file:///a'", 0.5)
        assert read.value.__cause__ is None and read.value.__suppress_context__
        with pytest.raises(RequestTimeout, match=r"did not answer prompt 'p' within 0\.5 s$"):
            await server.get_prompt("p", {}, 0.5)
        with pytest.raises(ToolCallTimeout) as call:
            await server.call_tool("echo", {"text": "x"}, 0.5)
        assert str(call.value) == (
            "MCP server 'stuck' did not answer tool 'echo' within 0.5 s: it may have taken "
            "effect (it may still be running there) and was not retried"
        )
        assert (call.value.tool, call.value.timeout) == ("echo", 0.5)


async def test_a_server_its_config_does_not_restart_says_so_once_it_crashed() -> None:
    config = {"mcpServers": {"c": stdio("echo", crash_after=1, restartOnCrash=False)}}
    async with open_supervisor(config) as sup:
        server = sup._servers["c"]
        with pytest.raises(CallMayHaveTakenEffect):
            await server.call_tool("echo", {"text": "x"})  # its process ends on it
        await until(lambda: sup.status()["c"].status == "failed", 30)
        with pytest.raises(ServerUnavailable) as info:
            await server.call_tool("count", {})
        said = str(info.value)
        assert said.startswith(
            "MCP server 'c' failed and is not restarted: its config says restartOnCrash: "
            "false (or maxRestarts: 0); last error: "
        ), said
        assert said.endswith(". Fix the cause, then restart it (handle.restart('c'))"), said
        assert info.value.cli_message.endswith(
            ". Fix the cause, then run the command again: each run starts its servers afresh"
        )
        assert info.value.__cause__ is None and info.value.__suppress_context__
        await sup.restart("c")
        answer = await server.call_tool("count", {})
        assert not getattr(answer, "is_error", True)
