"""Same command, same answer, gateway or not: every read command (``status``, ``tools``,
``tools --search``, ``call``, ``events``) is run through a running ``serve`` of its config
and with ``--no-gateway`` (servers of its own, started from the same config), and the two
outputs are compared — standard output and exit code, with only the parts that differ
by nature (pids, times, the spill file's name) replaced by a pattern, here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.gateway._local import local_socket
from supervisor.testing.servers import stdio_params

STEP = 90
TOKEN = "both-ways-token-0123456789"


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Path, dict[str, str]]]:
    """``serve --http`` of a config with two fixture servers (``echo``, ``rich``) in
    its own runtime directory: the config and the environment to reach it with."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(home), "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    servers = {}
    for name, kind, approve in (
        ("echo", "echo", True),
        ("rich", "rich", ["fail", "big_text", "image", "embedded", "structured_ok", "wipe"]),
    ):
        command, args = stdio_params(kind)  # type: ignore[arg-type]
        servers[name] = {"command": command, "args": args, "autoApprove": approve}
        servers[name]["initTimeout"] = 60
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    serve = subprocess.Popen(
        [*command, "--http", "127.0.0.1:0"], env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + STEP
        while not local_socket_in(home, config).exists():
            assert serve.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
        # Both servers connected, through the gateway (a call waits for its server).
        for tool, arguments in (("echo_echo", '{"text": "up"}'), ("rich_greet", "{}")):
            done = cli(env, "call", "--config", str(config), tool, arguments)
            assert done.returncode in (0, 2), done.stderr  # rich_greet is a prompt: exit 2
        yield config, env
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=STEP)
        finally:
            serve.kill()
            shutil.rmtree(home, ignore_errors=True)


def local_socket_in(home: Path, config: Path) -> Path:
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(home)
    try:
        return local_socket(config)
    finally:
        if before is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = before


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP,
        check=False,
    )


#: What differs by nature between two runs, and the pattern that stands for it.
VOLATILE = [
    (re.compile(r"mcp-supervisor-call-[0-9a-f]+/[\w.-]+"), "<spill file>"),
    (re.compile(r"\b(just now|\d+(\.\d+)?(ms|s|m|h) ago)\b"), "<when>"),
    (re.compile(r"pid \d+|\"pid\": \d+"), "<pid>"),
]


def same(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def both_ways(
    gateway: tuple[Path, dict[str, str]], *args: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``args`` through the gateway, then with ``--no-gateway``."""
    config, env = gateway
    through = cli(env, *args, "--config", str(config))
    own = cli(env, *args, "--config", str(config), "--no-gateway")
    return through, own


READS = [
    pytest.param(("tools",), id="tools"),
    pytest.param(("tools", "--json"), id="tools-json"),
    pytest.param(("tools", "--search", "note text", "--limit", "3"), id="tools-search"),
    pytest.param(("tools", "--search", "note", "--limit", "2", "--json"), id="tools-search-json"),
    pytest.param(("call", "echo_echo", '{"text": "hi"}'), id="call"),
    pytest.param(("call", "echo_add", '{"a": 2, "b": 3}', "--json"), id="call-json"),
    pytest.param(("call", "rich_big_text", '{"kib": 221}'), id="call-221k"),
    pytest.param(("call", "rich_big_text", '{"kib": 221}', "--json"), id="call-221k-json"),
    pytest.param(("call", "rich_image", "{}"), id="call-image"),
    pytest.param(("call", "rich_embedded", "{}", "--json"), id="call-embedded-json"),
    pytest.param(("call", "rich_structured_ok", "{}"), id="call-structured"),
    pytest.param(("call", "rich_fail", '{"message": "no such note"}', "--json"), id="tool-error"),
    pytest.param(("call", "echo_ech", "{}"), id="unknown-tool"),
    pytest.param(("call", "echo_add", '{"a": "x"}', "--json"), id="invalid-arguments"),
    pytest.param(("call", "rich_delete_note", '{"title": "t"}', "--json"), id="needs-approval"),
]


@pytest.mark.parametrize("args", READS)
def test_the_same_output_through_a_gateway_or_not(
    gateway: tuple[Path, dict[str, str]], args: tuple[str, ...]
) -> None:
    """The command prints the same (volatile parts aside) and exits alike, whether it
    asks the running gateway or starts the servers itself."""
    through, own = both_ways(gateway, *args)
    assert (through.returncode, same(through.stdout)) == (own.returncode, same(own.stdout)), (
        through.stderr,
        own.stderr,
    )
    assert through.stdout or through.returncode, through.stderr  # something was said


def test_status_is_the_same_table_and_document(gateway: tuple[Path, dict[str, str]]) -> None:
    """``status``: the same table; ``status --json``: the same document, but for each
    server's own figures (pid, times, calls, latencies)."""
    through, own = both_ways(gateway, "status")
    assert (through.returncode, same(through.stdout)) == (own.returncode, same(own.stdout))
    through, own = both_ways(gateway, "status", "--json")
    assert through.returncode == own.returncode == 0
    stable = ("server", "status", "type", "target", "tool_count", "protocol_version")

    def servers(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
        document = json.loads(done.stdout)
        return [{k: s.get(k) for k in stable} for s in document["servers"]]

    assert servers(through) == servers(own)
    assert json.loads(through.stdout).keys() == json.loads(own.stdout).keys()


async def test_events_are_the_same_lines(gateway: tuple[Path, dict[str, str]]) -> None:
    """``events``: JSON lines of the same events, each kind with the same fields — the
    servers' start without a gateway, a restart through it (``mcp.connected`` and
    ``mcp.local.spawned`` have the same keys either way)."""
    config, env = gateway

    async def watch(*extra: str, until: int, kill_echo: bool = False) -> list[dict[str, object]]:
        """The events an ``events`` process prints until ``until`` ``mcp.connected`` came;
        with ``kill_echo``, the gateway's ``echo`` server is killed (again, until the
        stream shows it coming back: the stream's opening cannot be seen from outside)."""
        command = [sys.executable, "-m", "supervisor", "events", "--config", str(config)]
        process = await trio.lowlevel.open_process(
            [*command, "--filter", "mcp.*", *extra], env=env, stdout=subprocess.PIPE
        )
        assert process.stdout is not None
        events: list[dict[str, object]] = []
        seen = trio.Event()
        try:
            async with trio.open_nursery() as nursery:

                async def read() -> None:
                    data = b""
                    async for chunk in process.stdout:  # type: ignore[union-attr]
                        data += chunk
                        *lines, data = data.split(b"\n")
                        events.extend(json.loads(line) for line in lines)
                        if sum(e["kind"] == "mcp.connected" for e in events) >= until:
                            seen.set()

                nursery.start_soon(read)
                with trio.fail_after(STEP):
                    while not seen.is_set():
                        if kill_echo:
                            done = cli(env, "status", "--config", str(config), "--json")
                            servers = json.loads(done.stdout)["servers"]
                            pid = next(s["pid"] for s in servers if s["server"] == "echo")
                            if pid:
                                os.kill(pid, signal.SIGKILL)
                        with trio.move_on_after(10):
                            await seen.wait()
                nursery.cancel_scope.cancel()
        finally:
            process.kill()
            await process.wait()
        return events

    own = await watch("--no-gateway", until=2)  # both servers start
    through = await watch(until=1, kill_echo=True)

    def keys(events: list[dict[str, object]], kind: str) -> set[str]:
        return {k for e in events if e["kind"] == kind for k in e}

    for kind in ("mcp.connected", "mcp.local.spawned", "mcp.connecting"):
        assert keys(through, kind) == keys(own, kind) != set(), kind
