"""A call is sent at most once, whichever door it takes: once ``call`` has handed it to a
gateway — its local socket or ``--connect URL`` — it is never sent another way. A
missing answer (the backing server stopped, the gateway killed or stopped, a connection
closed before the answer) is "may have taken effect", exit 1, and the command starts
no server of its own; it falls back to its own servers only when the gateway could not
be reached at all (nothing sent).

Every test counts executions in the backing server's count file (the CLI's own server,
had it started one, would write there too) and runs the real ``serve --http``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import attrs
import pytest
import trio

from supervisor.gateway._local import local_socket
from supervisor.testing.servers import count_executions, stdio_params
from tests.probes import close_after_the_request, stand_in_gateway
from tests.test_gateway_cli import (
    cli,
    runtime_dir,  # noqa: F401 - autouse: a runtime dir of its own
)
from tests.test_replicas import Child, start

TOKEN = "call-once-token-0123456789"
#: Seconds a step may take on a loaded machine (a server's start, a CLI run).
STEP = 90


@attrs.define
class Gateway:
    """A ``serve --http`` process over one counting ``slow`` fixture server."""

    child: Child
    config: Path
    counts: Path
    url: str = ""
    backing: int = 0

    @property
    def process(self) -> trio.Process:
        return self.child.process

    def executions(self, tool: str) -> int:
        return count_executions(self.counts)[tool]


def write_config(tmp_path: Path) -> tuple[Path, Path]:
    counts = tmp_path / "counts"
    command, args = stdio_params("slow", count_file=counts)
    server = {"command": command, "args": args, "autoApprove": True, "initTimeout": 60}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": server}}))
    return config, counts


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Gateway]:
    """``serve --config … --http 127.0.0.1:0`` until the block ends (then killed), its
    backing server connected and its pid known; any process left is killed."""
    config, counts = write_config(tmp_path)
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    command += ["--http", "127.0.0.1:0"]
    env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    backing = 0
    try:
        async with (
            trio.open_nursery() as nursery,
            start(nursery, "serve", command, env=env) as child,
        ):
            # said once it serves HTTP, its local socket already listening
            found = await child.wait_for(rb"gateway at (http://\S+/mcp)")
            gateway = Gateway(child, config, counts, url=found[1].decode())
            # A call waits for the server's first connection; then its pid is known.
            up = await cli("call", "--config", str(config), "echo_echo", '{"text": "up"}')
            assert (up.returncode, up.stdout) == (0, b"up\n"), up.stderr
            status = await cli("status", "--config", str(config), "--json")
            (record,) = json.loads(status.stdout)["servers"]
            assert record["status"] == "connected", status
            gateway.backing = backing = record["pid"]
            yield gateway
            nursery.cancel_scope.cancel()
    finally:
        if backing > 0:  # never 0: that would be this process's own group
            with suppress(ProcessLookupError):
                os.kill(backing, signal.SIGCONT)
                os.kill(backing, signal.SIGKILL)


def through(gateway: Gateway, door: str) -> tuple[list[str], dict[str, str]]:
    """The options and environment of a ``call`` that goes through ``door``."""
    env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    if door == "local":
        return ["--config", str(gateway.config)], env
    return ["--config", str(gateway.config), "--connect", gateway.url], env


def may_have_taken_effect(done: subprocess.CompletedProcess[bytes]) -> dict[str, object]:
    """The ``--json`` error of a call that may have taken effect (exit 1)."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert b"may have taken effect" in done.stderr, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["effect"] == "may have taken effect", error
    return error


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until ``condition()`` holds: another process is doing it."""
    with trio.fail_after(STEP):
        while True:  # another process: nothing to wait on but its effects
            if condition():
                return
            await trio.sleep(0.05)


@pytest.mark.parametrize("door", ["local", "connect"])
async def test_a_stopped_backing_server_times_out_once(tmp_path: Path, door: str) -> None:
    """SIGSTOP of the backing server, then ``call --timeout 2``: the gateway bounds the
    call by those 2 s (not its 30 s default) and answers "may have taken effect"; the
    CLI sends it no other way (no execution while the server is stopped, so none by a
    server of the CLI's own), and once the server runs again the call has run once."""
    async with serving(tmp_path) as gateway:
        options, env = through(gateway, door)
        os.kill(gateway.backing, signal.SIGSTOP)
        try:
            args = ["call", *options, "echo_add", '{"a": 2, "b": 3}', "--timeout", "2", "--json"]
            done = await cli(*args, env=env)
            error = may_have_taken_effect(done)
            assert error["type"] == "ToolCallTimeout" and error["server"] == "echo", error
            assert "within 2.0 s" in str(error["message"]), error
            assert gateway.executions("add") == 0  # nothing ran anywhere while stopped
        finally:
            os.kill(gateway.backing, signal.SIGCONT)
        # The server takes the request it was sent, once; the gateway serves on.
        done = await cli("call", *options, "echo_echo", '{"text": "after"}', env=env)
        assert (done.returncode, done.stdout) == (0, b"after\n"), done.stderr
        await until(lambda: gateway.executions("add") == 1, "the stopped call ran")
        assert gateway.executions("add") == 1


@pytest.mark.parametrize("door", ["local", "connect"])
async def test_a_gateway_killed_mid_call_is_not_replaced_by_the_cli(
    tmp_path: Path, door: str
) -> None:
    """kill -9 of the gateway while a call runs on its server (it has taken effect: the
    count file says so): the CLI says it may have taken effect, exit 1, at once, and
    sends it nowhere else — the call ran once."""
    async with serving(tmp_path) as gateway:
        options, env = through(gateway, door)
        args = ["call", *options, "echo_hold", '{"seconds": 600}', "--json"]
        async with trio.open_nursery() as nursery:
            outcome: list[subprocess.CompletedProcess[bytes]] = []

            async def call() -> None:
                outcome.append(await cli(*args, env=env))

            nursery.start_soon(call)
            await until(lambda: gateway.executions("hold") == 1, "the call reached the server")
            gateway.process.kill()
        may_have_taken_effect(outcome[0])
        assert gateway.executions("hold") == 1


@pytest.mark.parametrize("door", ["local", "connect"])
async def test_a_connection_closed_before_the_answer_is_not_retried(
    tmp_path: Path, door: str
) -> None:
    """A gateway that takes the request and closes the connection without an answer
    (here a bare socket in its place, on the config's local socket or at the URL): the
    call may have taken effect, and the CLI does not start its own server to send it
    again (the config's server would count the execution)."""
    config, counts = write_config(tmp_path)
    listener, options = await stand_in_gateway(door, config, local_socket(config))
    taken: list[bytes] = []
    with listener:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close_after_the_request, listener, b"tools/call", taken)
            env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
            done = await cli("call", *options, "echo_add", '{"a": 1, "b": 1}', "--json", env=env)
            nursery.cancel_scope.cancel()
    may_have_taken_effect(done)
    assert any(b"tools/call" in data for data in taken)
    assert count_executions(counts)["add"] == 0  # no server of the CLI's own ran it


async def test_a_stopped_gateway_is_waited_for_timeout_and_a_margin_only(tmp_path: Path) -> None:
    """SIGSTOP of the gateway itself: ``call --timeout 1`` gives up after the timeout
    and a small margin, saying the call may have taken effect; no server of the CLI's
    own runs it meanwhile, and the gateway, once continued, runs it at most once."""
    async with serving(tmp_path) as gateway:
        options, env = through(gateway, "local")
        os.kill(gateway.process.pid, signal.SIGSTOP)
        try:
            args = ["call", *options, "echo_add", '{"a": 4, "b": 4}', "--timeout", "1", "--json"]
            done = await cli(*args, env=env)
            error = may_have_taken_effect(done)
            assert error["type"] == "CallMayHaveTakenEffect", error
            assert "did not answer within 3 s" in str(error["message"]), error
            assert gateway.executions("add") == 0
        finally:
            os.kill(gateway.process.pid, signal.SIGCONT)
        done = await cli("call", *options, "echo_echo", '{"text": "on"}', env=env)
        assert (done.returncode, done.stdout) == (0, b"on\n"), done.stderr
        assert gateway.executions("add") <= 1


async def test_no_gateway_to_reach_means_the_cli_makes_the_call_itself(tmp_path: Path) -> None:
    """A socket file nobody listens on (a gateway killed long ago): nothing could be
    sent, so the CLI starts the server itself and the call runs once."""
    config, counts = write_config(tmp_path)
    path = local_socket(config)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays; connecting is refused
    done = await cli("call", "--config", str(config), "echo_add", '{"a": 1, "b": 2}')
    assert (done.returncode, done.stdout) == (0, b"3\n"), done.stderr
    assert count_executions(counts)["add"] == 1


async def test_connect_to_nothing_sends_nothing(tmp_path: Path) -> None:
    """``--connect`` to a port nobody listens on: exit 1, the call not sent (and no
    server of the CLI's own started for it)."""
    config, counts = write_config(tmp_path)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    done = await cli("call", "--config", str(config), "--connect", url, "echo_add", "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "GatewayUnreachable" and error["effect"] == "not executed", error
    assert count_executions(counts)["add"] == 0
