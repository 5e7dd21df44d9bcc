"""Replicas behind a load balancer: two ``serve --http --stateless`` processes behind
Debian's haproxy, configured as docs/gateway.md shows (round robin, checks on
``/readyz``), used by plain ``mcp`` SDK clients of both protocol eras. Calls spread over
both; ``kill -9`` of one replica fails only the call it was running (as an error), and
the client carries on through the other. Every process started here is gone at the end.
And why ``--stateless``: a handshake-era session lives in the one replica that opened it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from functools import partial
from pathlib import Path

import attrs
import httpx2
import mcp_types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import HttpGatewayInfo
from supervisor.testing.servers import count_executions, make_server, stdio_params

TOKEN = "test-replica-token-0123456789"
#: Generous deadlines for a loaded machine; a normal run takes a few seconds.
START_TIMEOUT = 60
CALL_TIMEOUT = 20
EXIT_TIMEOUT = 20

DOCS = Path(__file__).parent.parent / "docs" / "gateway.md"
HAPROXY = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
needs_haproxy = pytest.mark.skipif(
    HAPROXY is None and os.environ.get("MCP_SUPERVISOR_REQUIRE_HAPROXY") != "1",
    reason="needs haproxy (apt-get install haproxy); "
    "set MCP_SUPERVISOR_REQUIRE_HAPROXY=1 to fail instead",
)


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
    return found


async def gone(pid: int) -> None:
    """Return once ``pid`` has exited (a pidfd: no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


class Child:
    """A subprocess whose standard error is read as it comes (so it never blocks on a
    full pipe) and kept, to wait for a line and to show on failure."""

    def __init__(self, process: trio.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.err = b""
        self.ended = False  # its standard error closed
        self._more = trio.Event()

    async def drain(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some():
            self.err += chunk
            self._more.set()
            self._more = trio.Event()
        self.ended = True
        self._more.set()

    async def wait_for(self, pattern: bytes) -> re.Match[bytes]:
        with trio.fail_after(START_TIMEOUT):
            while (found := re.search(pattern, self.err)) is None:
                assert not self.ended, f"{self.name} ended:\n{self.stderr}"
                await self._more.wait()
        return found

    @property
    def stderr(self) -> str:
        return self.err.decode(errors="replace")


@asynccontextmanager
async def start(
    nursery: trio.Nursery, name: str, command: list[str], **options: object
) -> AsyncIterator[Child]:
    """Run ``command``; on the way out, kill it if it still runs and reap it."""
    process = await trio.lowlevel.open_process(command, stderr=subprocess.PIPE, **options)
    child = Child(process, name)
    nursery.start_soon(child.drain)
    try:
        yield child
    finally:
        with trio.CancelScope(shield=True):
            with suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def start_replica(
    stack: AsyncExitStack, nursery: trio.Nursery, tmp_path: Path, name: str, *, token_file: bool
) -> Replica:
    """``serve --http 127.0.0.1:0 --stateless`` over one ``slow`` fixture server (echo and
    sleep) that counts its executions; the token from the environment, or from
    ``--token-file`` (as in the container) with ``token_file``."""
    counts = tmp_path / f"{name}.counts"
    command, args = stdio_params("slow", count_file=counts)
    server = {"command": command, "args": args, "autoApprove": True, "initTimeout": 60}
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps({"mcpServers": {"echo": server}}))
    serve = ["serve", "--config", str(config), "--http", "127.0.0.1:0", "--stateless"]
    env = {k: v for k, v in os.environ.items() if k != "MCP_SUPERVISOR_GATEWAY_TOKEN"}
    if token_file:
        (tmp_path / "token").write_text(TOKEN + "\n")
        serve += ["--token-file", str(tmp_path / "token")]
    else:
        env["MCP_SUPERVISOR_GATEWAY_TOKEN"] = TOKEN
    child = await stack.enter_async_context(
        start(nursery, name, [sys.executable, "-m", "supervisor", *serve], env=env)
    )
    return Replica(child, counts)


@attrs.define
class Replica:
    """A replica: its process, its backing server's count file, and once known its port
    and its backing server's pid."""

    child: Child
    counts: Path
    port: int = 0
    backing: int = 0

    def echoes(self) -> int:
        return count_executions(self.counts)["echo"]


def haproxy_config(fd: int, ports: list[int]) -> str:
    """docs/gateway.md's haproxy config (round robin, checks on /readyz, a refused
    connection redispatched), listening on ``fd``, over the replicas at ``ports``, each
    checked every 200 ms rather than 2 s."""
    (block,) = re.findall(r"```haproxy\n(.*?)```", DOCS.read_text(), re.S)
    lines = ["global", "    maxconn 100", ""]
    for line in block.splitlines():
        words = line.split()
        if words[:1] == ["bind"]:
            line = f"    bind fd@{fd}"
        elif words[:1] == ["default-server"]:
            line = line.replace("inter 2s", "inter 200ms")
            assert "inter 200ms" in line, line
        elif words[:1] == ["server"]:
            continue
        lines.append(line)
    lines += [f"    server r{i} 127.0.0.1:{port} check" for i, port in enumerate(ports)]
    config = "\n".join(lines) + "\n"
    assert f"bind fd@{fd}" in config and "balance roundrobin" in config, config
    return config


@asynccontextmanager
async def mcp_client(url: str, mode: str = "auto") -> AsyncIterator[Client]:
    """A plain SDK client with the token (``auto``: the 2026-07-28 protocol). Its HTTP
    timeout is long: a first call waits for the backing server to connect, which takes
    seconds on a busy machine; each test step has its own deadline."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(START_TIMEOUT)
    )
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode) as client:  # type: ignore[arg-type]
        yield client


def text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


@needs_haproxy
async def test_two_stateless_replicas_behind_haproxy_survive_a_kill_9(tmp_path: Path) -> None:
    """Calls through haproxy reach both replicas, from clients of both eras; ``kill -9`` of
    one while each runs a call: that call fails as an error (never a success), the other
    is answered, and every later call succeeds through the survivor, executed once. The
    killed replica's backing server exits on its own (its standard input closed); the
    rest stop when told; no process is left."""
    assert HAPROXY is not None, "haproxy is required here (MCP_SUPERVISOR_REQUIRE_HAPROXY=1)"
    replicas: list[Replica] = []
    try:
        async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
            for name, token_file in (("r0", False), ("r1", True)):
                replica = await start_replica(stack, nursery, tmp_path, name, token_file=token_file)
                replicas.append(replica)
            for replica in replicas:
                found = await replica.child.wait_for(rb"gateway at http://127\.0\.0\.1:(\d+)/mcp\n")
                replica.port = int(found[1])
                # Its server connected (a direct call waits for it), to know its pid.
                async with mcp_client(f"http://127.0.0.1:{replica.port}/mcp") as direct:
                    with trio.fail_after(START_TIMEOUT):
                        assert text(await direct.call_tool("echo_echo", {"text": "up"})) == "up"
                (replica.backing,) = children(replica.child.process.pid)
            with socket.socket() as front:  # haproxy's, bound here: no race for the port
                front.bind(("127.0.0.1", 0))
                front.listen(64)
                url = f"http://127.0.0.1:{front.getsockname()[1]}/mcp"
                config = tmp_path / "haproxy.cfg"
                config.write_text(haproxy_config(front.fileno(), [r.port for r in replicas]))
                command = [HAPROXY, "-f", str(config), "-db"]
                haproxy = await stack.enter_async_context(
                    start(nursery, "haproxy", command, pass_fds=[front.fileno()])
                )
            await calls_through(url, replicas, haproxy)
            # haproxy, then the survivor, stop when told; the survivor's server with it.
            for child in (haproxy, replicas[1].child):
                child.process.send_signal(signal.SIGTERM)
                with trio.fail_after(EXIT_TIMEOUT):
                    await child.process.wait()
            assert replicas[1].child.process.returncode == 143, replicas[1].child.stderr
            with trio.fail_after(EXIT_TIMEOUT):
                await gone(replicas[1].backing)
            nursery.cancel_scope.cancel()
    finally:
        for replica in replicas:
            if replica.backing:
                with suppress(ProcessLookupError):
                    os.kill(replica.backing, signal.SIGKILL)


async def calls_through(url: str, replicas: list[Replica], haproxy: Child) -> None:
    """The clients' side: 4 echoes of a handshake-era client and 16 of a 2026-07-28 one;
    two sleeps (one on each replica) and a kill -9 of replica 0 while both run; then 18
    echoes more."""
    async with mcp_client(url, mode="legacy") as legacy:  # no session: any replica answers
        for i in range(4):
            with trio.fail_after(CALL_TIMEOUT):
                assert text(await legacy.call_tool("echo_echo", {"text": f"h{i}"})) == f"h{i}"
    async with mcp_client(url) as client:
        with trio.fail_after(CALL_TIMEOUT):
            await client.list_tools()  # from here on, one call is one request
        before = [r.echoes() for r in replicas]
        for i in range(16):
            with trio.fail_after(CALL_TIMEOUT):
                assert text(await client.call_tool("echo_echo", {"text": f"a{i}"})) == f"a{i}"
        spread = [r.echoes() - n for r, n in zip(replicas, before, strict=True)]
        assert sum(spread) == 16 and all(spread), f"calls per replica: {spread}\n{haproxy.stderr}"

        # Two sleeps, the second sent once the first runs: round robin gives one to each.
        outcomes: list[object] = [None, None]
        running = [trio.Event(), trio.Event()]

        async def sleep(k: int) -> None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                running[k].set()

            try:
                with trio.fail_after(CALL_TIMEOUT):
                    outcomes[k] = await client.call_tool(
                        "echo_sleep", {"seconds": 1.0, "steps": 20}, progress_callback=progress
                    )
            except Exception as exc:  # noqa: BLE001 - the outcome is asserted below
                outcomes[k] = exc

        async with trio.open_nursery() as nursery:
            for k in range(2):
                nursery.start_soon(sleep, k)
                with trio.fail_after(CALL_TIMEOUT):
                    await running[k].wait()
            replicas[0].child.process.kill()  # kill -9 while each replica runs one call
            await replicas[0].child.process.wait()
        # The call on the killed replica is an error (its stream cut short), never a
        # success; the other is answered, by the survivor. (Whether the killed replica's
        # server finished its sleep is open: that call "may have taken effect".)
        failed = [o for o in outcomes if isinstance(o, MCPError)]
        answered = [o for o in outcomes if isinstance(o, mcp_types.CallToolResult)]
        assert len(failed) == 1 and len(answered) == 1, f"outcomes: {outcomes}"
        assert not answered[0].is_error and text(answered[0]) == "slept 1.0", outcomes
        assert count_executions(replicas[1].counts)["sleep"] == 1

        # The client carries on: every call succeeds, through the survivor, executed once.
        before = [r.echoes() for r in replicas]
        for i in range(18):
            with trio.fail_after(CALL_TIMEOUT):
                assert text(await client.call_tool("echo_echo", {"text": f"b{i}"})) == f"b{i}"
        assert [r.echoes() for r in replicas] == [before[0], before[1] + 18], before
    # The killed replica's server saw its standard input close, and exited on its own.
    with trio.fail_after(EXIT_TIMEOUT):
        await gone(replicas[0].backing)


# -- why --stateless: a session lives in one replica ---------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.mark.parametrize("stateless", [False, True], ids=["sessions", "stateless"])
async def test_a_handshake_era_session_lives_in_the_replica_that_opened_it(
    stateless: bool,
) -> None:
    """One gateway served at two addresses, each HTTP app with its own sessions as two
    replicas have: with sessions, the ``Mcp-Session-Id`` one gave out is unknown to the
    other (404: a load balancer would have to route by it); ``stateless`` gives out none,
    and the other answers the next request."""
    async with (
        open_supervisor({"mcpServers": {}}, apps={"e": make_server("echo")}) as sup,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup)
        await nursery.start(gateway.run)
        serve = partial(serve_http, gateway, token=TOKEN, stateless=stateless)
        one: HttpGatewayInfo = await nursery.start(serve)
        two: HttpGatewayInfo = await nursery.start(serve)
        async with httpx2.AsyncClient(headers=HEADERS) as http:
            opened = await http.post(one.url, json=INITIALIZE)
            assert opened.status_code == 200, opened.text
            session = opened.headers.get("mcp-session-id")
            headers = {} if session is None else {"Mcp-Session-Id": session}
            listed = await http.post(two.url, json=LIST_TOOLS, headers=headers)
            if stateless:
                assert session is None
                assert listed.status_code == 200 and "e_echo" in listed.text, listed.text
            else:
                assert session
                assert listed.status_code == 404 and "Session not found" in listed.text
        nursery.cancel_scope.cancel()


def test_the_docs_balancer_never_sends_a_call_twice() -> None:
    """docs/gateway.md's haproxy retries only what it could not send (``retry-on
    conn-failure``): no retry on an empty response, a timeout or a status, which would
    send a call a dying replica may have run to another one."""
    (block,) = re.findall(r"```haproxy\n(.*?)```", DOCS.read_text(), re.S)
    retry_on = [line.split("#")[0].split()[1:] for line in block.splitlines() if "retry-on" in line]
    assert retry_on == [["conn-failure"]], retry_on
    assert "do not add `non_idempotent`" in DOCS.read_text()  # nginx's own way to re-send
