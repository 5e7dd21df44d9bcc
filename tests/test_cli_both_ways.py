"""Same command, same answer, gateway or not: every read command (``status``, ``tools``,
``tools --search``, ``call``, ``events``, ``resources``, ``read``, ``prompts``,
``prompt``) is run through a running ``serve`` of its config and with ``--no-gateway``
(servers of its own, started from the same config), and the two outputs are compared —
standard output and exit code (and for a refusal its message), with only the parts that
differ by nature (pids, times, the spill file's name) replaced by a pattern, here.

Through the gateway, a read and a prompt are answered by the gateway's own server
processes (a server that keeps state shows the gateway's state) without the command
loading the MCP SDK or trio; and, as a call, a read handed to a gateway is never sent
another way: a lost answer is exit 1, and only a gateway that could not be reached lets
the command start the servers itself."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
import trio

from supervisor.gateway._local import GatewayClient, GatewayRequestError, local_socket
from supervisor.testing.servers import count_executions, make_server, stdio_params
from tests.probes import close_after_the_request, stand_in_gateway
from tests.test_cli_resources import TWO_IMAGES
from tests.test_gateway import TOKEN as GATEWAY_TOKEN
from tests.test_gateway import gateway_over_http
from tests.test_startup import HEAVY

STEP = 90
TOKEN = "both-ways-token-0123456789"


@contextmanager
def serving(servers: dict[str, dict[str, object]]) -> Iterator[tuple[Path, dict[str, str], str]]:
    """``serve --http 127.0.0.1:0`` of a config of ``servers`` in a runtime directory
    of its own: the config, the environment to reach it with, and its URL."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(home), "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    command = [sys.executable, "-m", "supervisor", "serve", "--config", str(config)]
    said = home / "serve.err"
    with said.open("wb") as stderr:
        serve = subprocess.Popen([*command, "--http", "127.0.0.1:0"], env=env, stderr=stderr)
    try:
        deadline = time.monotonic() + STEP
        # said once it serves HTTP, its local socket already listening
        while not (found := re.search(r"gateway at (http://\S+/mcp)", said.read_text())):
            assert serve.poll() is None and time.monotonic() < deadline, said.read_text()
            time.sleep(0.05)  # another process: nothing to wait on but what it writes
        assert local_socket_in(home, config).exists()
        yield config, env, found[1]
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=STEP)
        finally:
            serve.kill()
            shutil.rmtree(home, ignore_errors=True)


def fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "initTimeout": 60, **extra}


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Path, dict[str, str]]]:
    """``serve --http`` of a config with two fixture servers (``echo``, ``rich``) in
    its own runtime directory: the config and the environment to reach it with."""
    servers = {
        "echo": fixture("echo", autoApprove=True),
        "rich": fixture(
            "rich",
            autoApprove=["fail", "big_text", "image", "embedded", "structured_ok", "wipe"],
        ),
    }
    with serving(servers) as (config, env, _):
        # Both servers connected, through the gateway (a call waits for its server).
        for tool, arguments in (("echo_echo", '{"text": "up"}'), ("rich_greet", "{}")):
            done = cli(env, "call", "--config", str(config), tool, arguments)
            assert done.returncode in (0, 2), done.stderr  # rich_greet is a prompt: exit 2
        yield config, env


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
    pytest.param(("resources",), id="resources"),
    pytest.param(("resources", "--json"), id="resources-json"),
    pytest.param(("read", "notes://index"), id="read"),
    pytest.param(("read", "note://trio", "--json"), id="read-template-json"),
    pytest.param(("read", "notes://logo"), id="read-binary"),
    pytest.param(("read", "notes://logo", "--json"), id="read-binary-json"),
    pytest.param(("read", "note://trio", "--server", "rich"), id="read-server"),
    pytest.param(("read", "note://日本 x"), id="read-unicode-uri"),  # its Mcp-Name header
    pytest.param(("prompts",), id="prompts"),
    pytest.param(("prompts", "--json"), id="prompts-json"),
    pytest.param(("prompt", "rich_summarize", "title=trio"), id="prompt"),
    pytest.param(("prompt", "rich_greet", "--json"), id="prompt-json"),
]

#: Refusals and failures of read and prompt: the same exit code and message either way.
REFUSED = [
    pytest.param(("read", "nope://x"), 2, id="unknown-resource"),
    pytest.param(("read", "note://trio", "--server", "nosuch"), 2, id="unknown-server"),
    # routed by --server, not by the listings (where rich lists it): echo has no such thing
    pytest.param(("read", "notes://index", "--server", "echo"), 1, id="read-server-fails"),
    pytest.param(("prompt", "rich_sumarize", "title=trio"), 2, id="unknown-prompt"),
    pytest.param(("prompt", "rich_summarize"), 2, id="missing-argument"),
    pytest.param(("prompt", "rich_summarize", "title"), 2, id="not-name-value"),
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


@pytest.mark.parametrize(("args", "code"), REFUSED)
def test_a_refusal_is_the_same_through_a_gateway_or_not(
    gateway: tuple[Path, dict[str, str]], args: tuple[str, ...], code: int
) -> None:
    """An unknown resource, server or prompt, a missing argument (2) and a server's own
    error (1): nothing on stdout, the same exit code and the same message on stderr."""
    through, own = both_ways(gateway, *args)
    assert (through.returncode, through.stdout, through.stderr) == (code, "", own.stderr)
    assert own.returncode == code and not own.stdout, own.stderr
    assert through.stderr.startswith(f"mcp-supervisor {args[0]}: "), through.stderr


def test_read_commands_through_a_gateway_stay_light(gateway: tuple[Path, dict[str, str]]) -> None:
    """``resources``, ``read``, ``prompts`` and ``prompt`` answered by the gateway load
    neither the MCP SDK nor trio (nor the logging stack): what starting the servers would
    need — so the gateway answered each, with what the command prints without one."""
    config, env = gateway
    probe = (
        "import json, sys; from supervisor.cli import main;"
        "code = main(json.loads(sys.argv[2])); sys.stdout.flush();"
        "print(json.dumps([code, sorted({m.partition('.')[0] for m in sys.modules} & "
        "set(json.loads(sys.argv[1])))]), file=sys.stderr)"
    )
    for args in (
        ("resources",),
        ("read", "notes://index"),
        ("prompts", "--json"),
        ("prompt", "rich_summarize", "title=trio"),
    ):
        argv = [*args, "--config", str(config)]
        done = subprocess.run(
            [sys.executable, "-c", probe, json.dumps(HEAVY), json.dumps(argv)],
            capture_output=True,
            text=True,
            env=env,
            timeout=STEP,
            check=False,
        )
        code, loaded = json.loads(done.stderr.splitlines()[-1])
        own = cli(env, *argv, "--no-gateway")
        assert (code, loaded, done.stdout) == (0, [], own.stdout), (args, done.stderr)


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


#: The events whose fields ``events`` prints the same with a gateway as without.
KINDS = ("mcp.connected", "mcp.local.spawned", "mcp.connecting")


async def test_events_are_the_same_lines(gateway: tuple[Path, dict[str, str]]) -> None:
    """``events``: JSON lines of the same events, each kind with the same fields — the
    servers' start without a gateway, a restart through it (``mcp.connected`` and
    ``mcp.local.spawned`` have the same keys either way)."""
    config, env = gateway

    async def watch(*extra: str, until: int, kill_echo: bool = False) -> list[dict[str, object]]:
        """The events an ``events`` process prints until ``until`` ``mcp.connected`` came
        (and one of each kind compared); with ``kill_echo``, the gateway's ``echo`` server
        is killed (again, until the stream shows a whole restart: the stream's opening
        cannot be seen from outside, and a first crash restarts at once)."""
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
                        kinds = [e["kind"] for e in events]
                        if kinds.count("mcp.connected") >= until and set(KINDS) <= set(kinds):
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

    for kind in KINDS:
        assert keys(through, kind) == keys(own, kind) != set(), kind


# -- a server that keeps state, and a read sent once ------------------------------------------


@pytest.fixture(scope="module")
def stateful() -> Iterator[tuple[Path, dict[str, str], str, Path]]:
    """``serve --http`` of a config whose ``rich`` server keeps state (``add_note`` adds a
    resource and a line to ``notes://index``, allowed without asking) and counts its
    template reads in a count file, beside ``pictures``, whose prompt is two images: the
    config, environment, URL and count file."""
    counts = Path(tempfile.mkdtemp(prefix="mcps-counts-")) / "counts"
    command, args = stdio_params("rich", count_file=counts)
    server = {"command": command, "args": args, "initTimeout": 60, "autoApprove": ["add_note"]}
    pictures = counts.parent / "pictures.py"
    pictures.write_text(TWO_IMAGES)
    servers = {
        "rich": server,
        "pictures": {"command": sys.executable, "args": [str(pictures)], "initTimeout": 60},
    }
    try:
        with serving(servers) as (config, env, url):
            done = cli(env, "call", "--config", str(config), "rich_greet", "{}")
            assert done.returncode == 2, done.stderr  # up: a prompt, not a tool
            yield config, env, url, counts
    finally:
        shutil.rmtree(counts.parent, ignore_errors=True)


def test_a_read_through_the_gateway_shows_its_servers_state(
    stateful: tuple[Path, dict[str, str], str, Path],
) -> None:
    """A note added through the gateway is in what ``read``, ``resources`` and ``prompts``
    show through it — over its local socket and over ``--connect URL`` — since its own
    server process answers them; a command with ``--no-gateway`` starts a fresh one,
    which has none of it."""
    config, env, url, _ = stateful
    added = cli(env, "call", "--config", str(config), "rich_add_note", '{"title": "kept"}')
    assert (added.returncode, added.stdout) == (0, "added kept\n"), added.stderr
    other = config.parent / "elsewhere.json"  # any config: --connect names the gateway
    other.write_text('{"mcpServers": {}}')
    doors = {
        "local": ("--config", str(config)),
        "connect": ("--config", str(other), "--connect", url),
    }
    for door, options in doors.items():
        done = cli(env, "read", "notes://index", *options)
        assert (done.returncode, done.stdout) == (0, "hello\ntodo\nkept\n"), (door, done.stderr)
    own = cli(env, "read", "notes://index", "--config", str(config), "--no-gateway")
    assert (own.returncode, own.stdout) == (0, "hello\ntodo\n"), own.stderr
    # The gateway lists the new resource once its server's list_changed is taken in.
    deadline = time.monotonic() + STEP
    while True:
        listed = cli(env, "resources", "--json", *doors["connect"])
        uris = [r["uri"] for r in json.loads(listed.stdout)["resources"]]
        if "notes://kept" in uris or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # another process: nothing to wait on but its answer
    assert uris == ["notes://index", "notes://logo", "notes://kept"], listed.stderr
    kept = cli(env, "read", "notes://kept", *doors["local"])
    assert (kept.returncode, kept.stdout) == (0, "note kept\n"), kept.stderr
    own = cli(env, "resources", "--json", "--config", str(config), "--no-gateway")
    assert "notes://kept" not in [r["uri"] for r in json.loads(own.stdout)["resources"]]
    missing = cli(env, "read", "notes://kept", "--config", str(config), "--no-gateway")
    assert missing.returncode == 2 and "UnknownResource" in missing.stderr, missing.stderr


def test_read_and_prompt_timeouts_go_to_the_gateway(
    stateful: tuple[Path, dict[str, str], str, Path],
) -> None:
    """``read --timeout 2`` (and ``prompt --timeout 2``) of a server that is stopped
    (SIGSTOP): the gateway bounds the request by those 2 s (not the server's 30 s) and
    says so — exit 1, the server's ``RequestTimeout`` — and the command reads it no other
    way: nothing is read while the server is stopped, and once it runs again the held
    read is made at most once."""
    config, env, _, counts = stateful
    status = cli(env, "status", "--config", str(config), "--json")
    (record,) = [s for s in json.loads(status.stdout)["servers"] if s["server"] == "rich"]
    pid = record["pid"]
    assert pid > 0, record
    before = count_executions(counts)["note"]
    os.kill(pid, signal.SIGSTOP)
    try:
        done = cli(env, "read", "note://held", "--timeout", "2", "--config", str(config))
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.startswith("mcp-supervisor read: RequestTimeout: "), done.stderr
        args = ("prompt", "rich_summarize", "title=held", "--timeout", "2")
        done = cli(env, *args, "--config", str(config))
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.startswith("mcp-supervisor prompt: RequestTimeout: "), done.stderr
        assert count_executions(counts)["note"] == before  # nothing read anywhere meanwhile
    finally:
        os.kill(pid, signal.SIGCONT)
    after = cli(env, "read", "note://after", "--config", str(config))
    assert (after.returncode, after.stdout) == (0, "note after\n"), after.stderr
    # "after" was read (counted before its answer), the held read at most once
    assert before + 1 <= count_executions(counts)["note"] <= before + 2


def test_a_prompt_of_images_is_the_same_through_a_gateway_or_not(
    stateful: tuple[Path, dict[str, str], str, Path],
) -> None:
    """A prompt whose messages are images, not text: each printed as its content's JSON,
    as the SDK's model gives it (``mime_type``) — through the gateway, whose answer is
    MCP's JSON (``mimeType``), as without it."""
    config, env, _, _ = stateful
    for extra in ((), ("--json",)):
        through, own = both_ways((config, env), "prompt", "pictures_compare", *extra)
        assert (through.returncode, through.stdout) == (own.returncode, own.stdout), (
            through.stderr,
            own.stderr,
        )
        assert through.returncode == 0 and '"mime_type": "image/png"' in through.stdout


async def test_a_gateway_of_some_servers_lists_and_reads_only_theirs() -> None:
    """A gateway serving only ``n`` (``serve --servers n``): ``/resources`` and
    ``/prompts`` have only its resources, prompts and status; a read from ``n`` by name
    (``read --server n``) is made, one from ``e`` is refused as an unknown server by the
    gateway, not asked of ``e``."""
    apps = {"e": make_server("echo"), "n": make_server("rich")}
    async with gateway_over_http({"mcpServers": {}}, apps=apps, servers=["n"]) as (_, _, info):
        client = GatewayClient(url=info.url, token=GATEWAY_TOKEN)
        for route, key in (("/resources", "resources"), ("/prompts", "prompts")):
            document = await trio.to_thread.run_sync(client.get, route)
            assert [s["name"] for s in document["servers"]] == ["n"], document
            assert {entry["server"] for entry in document[key]} == {"n"}, document
        read = partial(client.request, "resources/read", {"uri": "notes://index"})
        got = await trio.to_thread.run_sync(partial(read, meta={"mcp-supervisor/server": "n"}))
        assert got["contents"][0]["text"] == "hello\ntodo\n"
        with pytest.raises(GatewayRequestError) as refused:
            await trio.to_thread.run_sync(partial(read, meta={"mcp-supervisor/server": "e"}))
        assert (refused.value.kind, refused.value.message) == (
            "UnknownServer",
            "not found: not served by this gateway",
        )


def counted_config(home: Path) -> tuple[Path, Path]:
    """A config of one ``rich`` server counting its template reads: it and its count file."""
    counts = home / "counts"
    command, args = stdio_params("rich", count_file=counts)
    config = home / "mcp.json"
    server = {"command": command, "args": args, "initTimeout": 60}
    config.write_text(json.dumps({"mcpServers": {"rich": server}}))
    return config, counts


@pytest.mark.parametrize("door", ["local", "connect"])
@pytest.mark.parametrize(
    ("args", "method"),
    [
        pytest.param(("read", "note://lost"), b"resources/read", id="read"),
        pytest.param(("prompt", "rich_summarize", "title=lost"), b"prompts/get", id="prompt"),
    ],
)
async def test_a_read_whose_answer_is_lost_is_not_sent_again(
    door: str, args: tuple[str, ...], method: bytes
) -> None:
    """A gateway that takes the request and closes the connection without an answer (a
    bare socket in its place, on the config's local socket or at the URL): exit 1, saying
    it was handed to the gateway and not sent again — the command starts no server of its
    own to send it (the config's server would count the read, or print the prompt)."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    try:
        config, counts = counted_config(home)
        env = {**os.environ, "XDG_RUNTIME_DIR": str(home), "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
        local = local_socket_in(home, config)
        listener, options = await stand_in_gateway(door, config, local)
        taken: list[bytes] = []
        with listener:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(close_after_the_request, listener, method, taken)
                with trio.fail_after(STEP):
                    done = await trio.run_process(
                        [sys.executable, "-m", "supervisor", *args, *options],
                        capture_stdout=True,
                        capture_stderr=True,
                        check=False,
                        env=env,
                    )
                nursery.cancel_scope.cancel()
        stderr = done.stderr.decode()
        assert (done.returncode, done.stdout) == (1, b""), stderr
        assert stderr.startswith(f"mcp-supervisor {args[0]}: GatewayNoAnswer: "), stderr
        assert "was handed to it" in stderr and "it was not sent again" in stderr, stderr
        # one request (finding the local socket opens a connection that sends nothing)
        assert [method in data for data in taken if data] == [True], taken
        assert count_executions(counts)["note"] == 0  # no server of the command's own read it
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def test_a_signal_while_the_gateway_has_the_read_ends_it_unsent_elsewhere() -> None:
    """SIGTERM while a gateway holds the read without answering (a bare socket on the
    config's local socket): exit 143, saying the signal stopped the wait and that the
    read was handed to the gateway and not sent again; no server of its own reads it."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    try:
        config, counts = counted_config(home)
        env = {**os.environ, "XDG_RUNTIME_DIR": str(home)}
        local = local_socket_in(home, config)
        listener, _ = await stand_in_gateway("local", config, local)
        arrived = trio.Event()
        held: list[trio.socket.SocketType] = []
        out, err = home / "out", home / "err"
        with listener, out.open("wb") as stdout, err.open("wb") as stderr:
            async with trio.open_nursery() as nursery:

                async def hold_the_request() -> None:
                    while True:
                        conn, _ = await listener.accept()
                        data = b""
                        while b"resources/read" not in data and (chunk := await conn.recv(65536)):
                            data += chunk
                        if b"resources/read" in data:
                            held.append(conn)  # open, unanswered
                            arrived.set()
                        else:
                            conn.close()  # finding the socket: a connection that sends nothing

                nursery.start_soon(hold_the_request)
                command = [sys.executable, "-m", "supervisor", "read", "note://held"]
                process = await trio.lowlevel.open_process(
                    [*command, "--config", str(config)], env=env, stdout=stdout, stderr=stderr
                )
                try:
                    with trio.fail_after(STEP):
                        await arrived.wait()
                        process.send_signal(signal.SIGTERM)
                        await process.wait()
                finally:
                    process.kill()
                nursery.cancel_scope.cancel()
        for conn in held:
            conn.close()
        said = err.read_text()
        assert (process.returncode, out.read_text()) == (128 + signal.SIGTERM, ""), said
        assert said.startswith("mcp-supervisor read: GatewayNoAnswer: SIGTERM stopped the wait")
        assert "the read of 'note://held' was handed to it" in said, said
        assert "it was not sent again" in said, said
        assert count_executions(counts)["note"] == 0
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_signal_that_lands_outside_the_wait_still_ends_it(tmp_path: Path) -> None:
    """The race CI met: a signal whose handler cannot run where it lands (just before the
    command's blocking read of the answer, or, as here for certain, in another thread)
    still ends the wait at once — not when an answer comes, which a gateway holding the
    request may never send. The stand-in gateway, once it has the request, signals its
    own thread: the main thread's wait is not interrupted by the signal, only woken."""
    import threading

    from supervisor.cli._remote import _Stopped, _stopped_by_signals

    path = tmp_path / "gateway.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    stopped = threading.Event()
    woken: list[bool] = []

    def gateway() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"resources/read" not in data and (chunk := conn.recv(65536)):
                data += chunk
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            woken.append(stopped.wait(STEP))  # else closing the connection ends the wait

    thread = threading.Thread(target=gateway)
    thread.start()
    client = GatewayClient(socket_path=path, timeout=None)
    try:
        with pytest.raises(_Stopped) as raised, _stopped_by_signals():
            client.request("resources/read", {"uri": "note://held"})
    finally:
        stopped.set()
        thread.join()
        listener.close()
    assert raised.value.code == 128 + signal.SIGTERM
    assert woken == [True]


def test_a_gateway_not_reached_sends_nothing() -> None:
    """A socket file nobody listens on (a gateway killed long ago): nothing could be
    sent, so ``read`` starts the server itself and reads once. ``--connect`` to a port
    nobody listens on: exit 1, not sent, no server of its own started."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    try:
        config, counts = counted_config(home)
        env = {**os.environ, "XDG_RUNTIME_DIR": str(home)}
        path = local_socket_in(home, config)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(str(path))
        dead.close()  # the file stays; connecting is refused
        done = cli(env, "read", "note://here", "--config", str(config))
        assert (done.returncode, done.stdout) == (0, "note here\n"), done.stderr
        assert count_executions(counts)["note"] == 1
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        done = cli(env, "read", "note://there", "--config", str(config), "--connect", url)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert "GatewayUnreachable" in done.stderr and "was not sent" in done.stderr
        assert count_executions(counts)["note"] == 1
    finally:
        shutil.rmtree(home, ignore_errors=True)
