"""A call the dead server never read is sent again; one it read (even partly) is not.

``kill -9`` of a stdio server, then a call at once: the request goes into the pipe of a
process already killed but not yet gone, and nobody reads it. On Linux what is left
unread in a pipe can be counted from its write end, so the transport tells a request
whose bytes are all unread when the server is gone (never received: it goes to the next
incarnation like a queued call) from one the server read (it may have taken effect).
Every test runs real processes and counts executions in the server's own count file."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import mcp_types as types
import pytest
import trio
from mcp.shared.message import SessionMessage
from trio.testing import wait_all_tasks_blocked

from supervisor.actors import Backoff
from supervisor.server import CallMayHaveTakenEffect, ServerStatus
from supervisor.server._hook import open_servers
from supervisor.testing.servers import count_executions
from supervisor.testing.servers._procs import open_http_fixture
from supervisor.transports import _children
from supervisor.transports._receipts import Receipt, delivery
from supervisor.transports._stdio import StdioTransport

from .test_server import Recorder, Settings, managed, settings, wait_for

pytestmark = pytest.mark.skipif(
    not _children.LINUX, reason="unread bytes of a pipe are counted on Linux only"
)

#: Rounds of kill -9 then an immediate call (each restarts the server once), of a Node
#: server (which starts in a tenth of a second)...
ROUNDS = 50
#: ... and of the Python echo fixture (which takes about a second to start: its rounds
#: were a minute of the suite's).
PYTHON_ROUNDS = 20
#: Bound on the whole of one test's rounds, on a loaded 2-core machine.
ROUNDS_WAIT = 150.0
WAIT = 30.0


def _request(request_id: int, text: str) -> SessionMessage:
    params = {"name": "echo", "arguments": {"text": text}}
    return SessionMessage(
        types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call", params=params)
    )


def reading_child(child: str) -> tuple[StdioTransport, trio.Event]:
    """A transport to a Python ``child`` script, and the event set when it says ``read``
    on stderr (once it has read what it reads of its stdin)."""
    read = trio.Event()
    transport = StdioTransport(
        sys.executable,
        ["-c", child],
        on_stderr=lambda line: read.set() if line == "read" else None,
        kill_after=1.0,
    )
    return transport, read


@pytest.mark.parametrize("read_of_the_second", [0, 10])
async def test_only_requests_left_wholly_unread_in_the_pipe_were_never_received(
    read_of_the_second: int,
) -> None:
    """A child reads its stdin up to the first request's newline (and, in the second
    case, 10 bytes of the next), says so, and is killed: the first request stays
    delivered, so does a second it read part of; what it read nothing of was never
    received — its receipt is back to not delivered, so it may be withdrawn."""
    child = (
        "import os, sys\n"
        "while os.read(0, 1) != b'\\n':\n"
        "    pass\n"
        f"os.read(0, {read_of_the_second}) if {read_of_the_second} else None\n"
        "sys.stderr.write('read\\n'); sys.stderr.flush()\n"
        "import time; time.sleep(600)\n"
    )
    transport, read = reading_child(child)
    receipts = [Receipt(), Receipt(), Receipt()]

    async def send(receipt: Receipt, message: SessionMessage) -> None:
        delivery.set(receipt)
        await write.send(message)

    with trio.fail_after(WAIT):
        async with transport as (_, write), trio.open_nursery() as nursery:
            for number, receipt in enumerate(receipts, 1):
                receipt.delivered = False  # queued, as the server actor makes it
                nursery.start_soon(send, receipt, _request(number, f"request {number}"))
                await wait_all_tasks_blocked()
            assert [r.delivered for r in receipts] == [True, True, True]  # all in the pipe
            await read.wait()
            assert transport.pid is not None
            os.kill(transport.pid, signal.SIGKILL)
            await transport.closed.wait()
            first, second, third = receipts
            assert first.delivered is True and not first.withdraw()
            if read_of_the_second:
                assert second.delivered is True and not second.withdraw()
            else:
                assert second.delivered is False and second.withdraw()
            assert third.delivered is False and third.withdraw()
            await write.aclose()


@pytest.mark.parametrize("read_of_it", [0, 10])
async def test_a_request_bigger_than_the_pipe_was_never_received_only_if_wholly_unread(
    read_of_it: int,
) -> None:
    """A 1 MB request fills the pipe of a child that reads ``read_of_it`` bytes of it, and
    the child is killed with the rest still being written: the pipe refuses it half-way.
    Nothing of it read: never received. Ten bytes read: it stays delivered."""
    child = (
        "import os, sys, time\n"
        f"left = {read_of_it}\n"
        "while left:\n"
        "    left -= len(os.read(0, left))\n"
        "sys.stderr.write('read\\n'); sys.stderr.flush()\n"
        "time.sleep(600)\n"
    )
    transport, read = reading_child(child)
    big = Receipt()
    big.delivered = False
    with trio.fail_after(WAIT):
        async with transport as (_, write):
            delivery.set(big)
            await write.send(_request(1, "x" * 1_000_000))
            await read.wait()
            await wait_all_tasks_blocked()  # the writer waits for room in the full pipe
            assert big.delivered is True
            assert transport.pid is not None
            os.kill(transport.pid, signal.SIGKILL)
            await transport.closed.wait()
            assert big.delivered is (read_of_it > 0)
            await write.aclose()


def _rounds_settings(name: str, command: str, args: list[str], rounds: int = ROUNDS) -> Settings:
    # A restart per round: no backoff to wait out, and no giving up.
    return Settings(
        name=name,
        command=command,
        args=args,
        lazy=False,
        max_attempts=10 * rounds,
        backoff=Backoff(initial=0.0, maximum=0.0),
    )


async def _kill_then_call(
    server: object, tool: str, arguments: dict[str, object], rounds: int = ROUNDS
) -> list[str]:
    """``rounds`` times: wait for the server to be connected, kill -9 it, call ``tool``
    at once. Returns the answers' texts."""
    texts: list[str] = []
    with trio.fail_after(ROUNDS_WAIT):
        for _ in range(rounds):
            await wait_for(lambda: server.status() is ServerStatus.CONNECTED, ROUNDS_WAIT)  # type: ignore[attr-defined]
            pid = server.health.pid  # type: ignore[attr-defined]
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            result = await server.call_tool(tool, arguments, None)  # type: ignore[attr-defined]
            texts.append(result.content[0].text)
    return texts


async def test_a_call_right_after_kill_9_is_answered_and_runs_once(tmp_path: Path) -> None:
    """The Python echo fixture, ``PYTHON_ROUNDS`` times killed then called at once
    (``add``, neither read-only nor idempotent): every call answered by the next
    incarnation, each executed exactly once."""
    count = tmp_path / "count"
    rec = Recorder()
    config = settings("echo", "echo", count_file=count)
    rounds = PYTHON_ROUNDS
    echo = managed(_rounds_settings("echo", config.command, config.args, rounds), rec)
    async with open_servers([echo]):
        texts = await _kill_then_call(echo, "add", {"a": 2, "b": 3}, rounds)
    assert texts == ["5"] * rounds
    assert count_executions(count) == {"add": rounds}


#: A dependency-free MCP server for Node: line-delimited JSON-RPC over stdio, one tool
#: (``add``) that appends a line to the count file (argv[2]) before answering.
NODE_SERVER = r"""
const fs = require("fs");
const count = process.argv[2];
let buffer = "";
function send(message) { process.stdout.write(JSON.stringify(message) + "\n"); }
function handle(message) {
  if (message.id === undefined) return;
  const { id, method, params } = message;
  if (method === "initialize") {
    send({ jsonrpc: "2.0", id, result: {
      protocolVersion: params.protocolVersion, capabilities: { tools: {} },
      serverInfo: { name: "node-counter", version: "1.0.0" } } });
  } else if (method === "tools/list") {
    send({ jsonrpc: "2.0", id, result: { tools: [{ name: "add", inputSchema: {
      type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } }] } });
  } else if (method === "tools/call") {
    fs.appendFileSync(count, "add\n");
    const { a, b } = params.arguments;
    send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: String(a + b) }] } });
  } else if (method === "ping") {
    send({ jsonrpc: "2.0", id, result: {} });
  } else {
    send({ jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } });
  }
}
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let end;
  while ((end = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, end);
    buffer = buffer.slice(end + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")
async def test_a_call_right_after_kill_9_of_a_node_server_runs_once(tmp_path: Path) -> None:
    """The same against a real Node process (a small counting MCP server of its own)."""
    count = tmp_path / "count"
    script = tmp_path / "server.js"
    script.write_text(NODE_SERVER)
    node = shutil.which("node")
    assert node is not None
    server = managed(_rounds_settings("node", node, [str(script), str(count)]), Recorder())
    async with open_servers([server]):
        texts = await _kill_then_call(server, "add", {"a": 2, "b": 3})
    assert texts == ["5"] * ROUNDS
    assert count_executions(count) == {"add": ROUNDS}


async def test_a_call_the_server_read_before_kill_9_may_have_taken_effect(
    tmp_path: Path,
) -> None:
    """``hold`` records its execution, then sleeps: killed then, the call was read and
    ran — "may have taken effect", never sent again; the next call runs on the next
    incarnation, and ``hold`` ran once."""
    count = tmp_path / "count"
    config = settings("slow", "slow", count_file=count)
    slow = managed(_rounds_settings("slow", config.command, config.args), Recorder())
    async with open_servers([slow]):
        await wait_for(lambda: slow.status() is ServerStatus.CONNECTED, WAIT)
        pid = slow.health.pid
        assert pid is not None
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:

                async def kill_once_it_ran() -> None:
                    await wait_for(lambda: count_executions(count)["hold"] == 1, WAIT)
                    os.kill(pid, signal.SIGKILL)

                nursery.start_soon(kill_once_it_ran)
                with pytest.raises(CallMayHaveTakenEffect, match="may have taken effect"):
                    await slow.call_tool("hold", {"seconds": 600}, None)
            result = await slow.call_tool("add", {"a": 1, "b": 1}, None)
        assert result.content[0].text == "2" and slow.health.pid != pid
    assert count_executions(count) == {"hold": 1, "add": 1}


async def test_a_call_right_after_kill_9_of_an_http_server_is_not_may_have_taken_effect(
    tmp_path: Path,
) -> None:
    """Over Streamable HTTP: the server process killed (-9), a call made at once meets a
    refused connection — nothing written — so it waits for the server's return (started
    again on the same port) and is answered, executed once; never "may have taken
    effect"."""
    count = tmp_path / "count"
    async with open_http_fixture("echo", count_file=count) as first:
        url = first.url
        port = int(url.split(":")[2].split("/")[0])
        config = Settings(
            name="web",
            command="",
            args=[],
            type="http",
            url=url,
            lazy=False,
            max_attempts=1000,
            backoff=Backoff(initial=0.05, maximum=0.2),
        )
        web = managed(config, Recorder())
        async with open_servers([web]):
            await wait_for(lambda: web.status() is ServerStatus.CONNECTED, WAIT)
            assert (await web.call_tool("add", {"a": 1, "b": 1}, None)).content[0].text == "2"
            first.kill()
            await first.process.wait()
            with trio.fail_after(WAIT):
                async with trio.open_nursery() as nursery:
                    answers: list[str] = []

                    async def call() -> None:
                        result = await web.call_tool("add", {"a": 2, "b": 3}, None)
                        answers.append(result.content[0].text)

                    nursery.start_soon(call)
                    # The call has met the dead server before it comes back.
                    await wait_for(lambda: web.status() is not ServerStatus.CONNECTED, WAIT)
                    async with open_http_fixture("echo", port=port, count_file=count):
                        await wait_for(lambda: bool(answers), WAIT)
            assert answers == ["5"]
    assert count_executions(count) == {"add": 2}


#: A folder where ``@modelcontextprotocol/server-everything`` is installed (``npm install``).
EVERYTHING = "MCP_SUPERVISOR_SERVER_EVERYTHING"


def server_everything() -> Path | None:
    """The server's entry point under ``$MCP_SUPERVISOR_SERVER_EVERYTHING``, if it is
    installed there and ``node`` is on the path."""
    folder = os.environ.get(EVERYTHING)
    if not folder or shutil.which("node") is None:
        return None
    entry = Path(folder, "node_modules", "@modelcontextprotocol", "server-everything", "dist")
    return entry / "index.js" if (entry / "index.js").is_file() else None


@pytest.mark.skipif(
    server_everything() is None,
    reason=f"needs node and ${EVERYTHING}: a folder where "
    "@modelcontextprotocol/server-everything is installed",
)
async def test_a_call_right_after_kill_9_of_server_everything_is_answered() -> None:
    """The reference Node server (it counts nothing, so: every call answered)."""
    entry = server_everything()
    node = shutil.which("node")
    assert entry is not None and node is not None
    server = managed(_rounds_settings("everything", node, [str(entry), "stdio"]), Recorder())
    async with open_servers([server]):
        texts = await _kill_then_call(server, "echo", {"message": "hi"})
    assert texts == ["Echo: hi"] * ROUNDS
