"""What a hostile server sends is shown, never obeyed: its ``serverInfo``, tool
descriptions, results, error messages, stderr, resources, prompts and progress carry
terminal escapes (OSC 0 sets the window title, OSC 52 writes the clipboard, ``ESC[2J``
clears the screen, the C1 CSI and OSC do the same in one character, the bidirectional
overrides reorder the text), and every command that prints them — started on its own
servers, or asking a running ``serve`` — writes them as visible escapes (``\\x1b``,
``\\u202e``): no such byte reaches its stdout or stderr, or a terminal.

The servers are real processes (a script this module writes), the commands real
``python -m supervisor`` runs."""

from __future__ import annotations

import json
import os
import pty
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

from supervisor.gateway._local import local_socket

from .probes import rest_of_terminal

STEP = 90

#: The attack, in as few characters as a table's cell keeps: the window title, the
#: clipboard, a cleared screen, a C1 CSI and OSC, a right-to-left override, an isolate.
BAD = "\x1b]0;T\x07\x1b]52;c;QQ==\x07\x1b[2J\x9b1m\x9d0;t\x9c\u202eZ\u2066"
#: How it must be shown: each character written as its escape.
SHOWN = r"\x1b]0;T\x07\x1b]52;c;QQ==\x07\x1b[2J\x9b1m\x9d0;t\x9c\u202eZ\u2066"
#: How a JSON document carries it (its start).
JSON_SHOWN = r"\u001b]0;T\u0007\u001b]52;c;QQ==\u0007\u001b[2J\u009b1m"
#: What a terminal would obey: C0 controls but tab and line feed, DEL, C1, bidi — and
#: bytes that are not UTF-8 (decoded as lone surrogates), a C1 control to some terminals.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")

#: The hostile server: ``crash`` says BAD on stderr and exits 1; ``refuse`` answers every
#: request with a JSON-RPC error whose message is BAD; else an MCP server whose every
#: string carries it.
HOSTILE = f"""
import sys

BAD = {BAD!r}
if sys.argv[1:] == ["crash"]:
    print("stderr " + BAD, file=sys.stderr, flush=True)
    raise SystemExit(1)
if sys.argv[1:] == ["refuse"]:
    import json

    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:
            error = {{"code": -32603, "message": "refused " + BAD}}
            answer = {{"jsonrpc": "2.0", "id": message["id"], "error": error}}
            print(json.dumps(answer), flush=True)
    raise SystemExit(0)

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

app = MCPServer("s" + BAD, version="v\\x9b2J")


@app.tool(description="d" + BAD + "\\nmore " + BAD, title="t" + BAD)
def steal() -> str:
    return "r" + BAD + "\\nline2\\tcol"


@app.tool(description="fails")
def boom() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="e" + BAD)], isError=True)


@app.tool(description="a protocol error")
def rpc() -> str:
    raise MCPError(-32603, "x" + BAD)


@app.tool(description="reports progress")
async def prog(ctx: Context) -> str:
    await ctx.report_progress(1, 2, "p" + BAD)
    return "done"


@app.resource("notes://n", name="n", description="rd" + BAD, mime_type="text/plain")
def note() -> str:
    return "c" + BAD


@app.resource("notes://refused", name="refused", mime_type="text/plain")
def refused() -> str:
    raise MCPError(-32603, "rr" + BAD)


@app.prompt(name="pr", description="pd" + BAD)
def pr() -> str:
    return "pt" + BAD


app.run()
"""


def hostile_config(directory: Path, *, names: tuple[str, ...] = ("evil", "dead", "refuse")) -> Path:
    """A config of the hostile servers ``names`` (evil, dead, refuse) in ``directory``:
    ``dead`` crashes again every second or two for as long as it is restarted."""
    (directory / "h.py").write_text(HOSTILE)
    mode = {"evil": [], "dead": ["crash"], "refuse": ["refuse"]}
    servers = {
        name: {
            "command": sys.executable,
            "args": ["h.py", *mode[name]],
            "cwd": str(directory),
            "autoApprove": True,
            "maxRestarts": 100000,
        }
        for name in names
    }
    local = {"initial": 0.5, "max": 2, "maxAttempts": 100000}
    settings = {"initTimeout": 60, "backoff": {"local": local}}
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "supervisor": settings}))
    return path


def cli(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m supervisor ARGS``; its output decoded as it was written (no newline
    translation: a carriage return stays one)."""
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=STEP,
        check=False,
    )
    out, err = (data.decode("utf-8", "surrogateescape") for data in (done.stdout, done.stderr))
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def shown_not_obeyed(done: subprocess.CompletedProcess[str], *visible: str) -> None:
    """No character a terminal obeys in ``done``'s stdout or stderr; each of ``visible``
    (a server's string, as it must be shown) in one of them."""
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        found = RAW.search(text)
        assert found is None, f"{found.group()!r} reached {name}: {text!r}"
    for text in visible:
        assert text in done.stdout + done.stderr, (text, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    """A directory of the hostile config, and a runtime directory of its own (where
    ``serve`` puts its local socket)."""
    home = Path(tempfile.mkdtemp(prefix="mcps-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def env(home: Path) -> dict[str, str]:
    # tables as wide as a wide terminal, whatever the one running the tests (if any)
    return {**os.environ, "XDG_RUNTIME_DIR": str(home), "NO_COLOR": "1", "COLUMNS": "200"}


@pytest.fixture(scope="module")
def config(home: Path) -> Path:
    return hostile_config(home)


@pytest.fixture(scope="module")
def gateway(home: Path, config: Path, env: dict[str, str]) -> Iterator[None]:
    """``serve`` of the hostile config, running; the commands given ``config`` ask it."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(config),
         "--http", "127.0.0.1:0"],
        env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        socket = _local_socket(home, config)
        deadline = time.monotonic() + STEP
        while not socket.exists():
            assert serve.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
        done = cli(env, "call", "--config", str(config), "evil_steal")  # waits for evil
        assert done.returncode == 0, done.stderr
        yield
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=STEP)
        finally:
            serve.kill()


def _local_socket(home: Path, config: Path) -> Path:
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(home)
    try:
        return local_socket(config)
    finally:
        if before is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = before


#: Each command that prints what the servers sent, and how it must show it.
COMMANDS = [
    pytest.param(
        ("status",), ("s" + SHOWN, r"v\x9b2J", "refused " + SHOWN), id="status-serverInfo"
    ),
    pytest.param(("tools",), ("d" + SHOWN, "refused " + SHOWN), id="tools"),
    pytest.param(("tools", "--search", "steal"), ("d" + SHOWN,), id="tools-search"),
    pytest.param(("call", "evil_steal"), ("r" + SHOWN + "\nline2\tcol",), id="call-result"),
    pytest.param(("call", "evil_boom"), ("e" + SHOWN,), id="call-tool-error"),
    pytest.param(("call", "evil_rpc"), ("x" + SHOWN,), id="call-server-error"),
    pytest.param(("status", "--json"), (JSON_SHOWN,), id="status-json"),
    pytest.param(("tools", "--json"), ("d" + JSON_SHOWN,), id="tools-json"),
    pytest.param(("call", "evil_steal", "--json"), ("r" + JSON_SHOWN,), id="call-json"),
]
#: The commands that start their own servers only.
OWN_ONLY = [
    pytest.param(("resources",), ("rd" + SHOWN,), id="resources"),
    pytest.param(("read", "notes://n"), ("c" + SHOWN,), id="read"),
    pytest.param(("read", "notes://refused"), ("rr" + SHOWN,), id="read-refused"),
    pytest.param(("prompts",), ("pd" + SHOWN,), id="prompts"),
    pytest.param(("prompt", "evil_pr"), ("pt" + SHOWN,), id="prompt"),
]


@pytest.mark.parametrize(("args", "visible"), COMMANDS + OWN_ONLY)
def test_a_command_on_its_own_servers_shows_what_they_sent(
    config: Path, env: dict[str, str], args: tuple[str, ...], visible: tuple[str, ...]
) -> None:
    """Started on its own servers, the command shows every string they sent, escaped."""
    own = ("--no-gateway",) if args[0] in ("status", "tools", "call") else ()
    shown_not_obeyed(cli(env, *args, "--config", str(config), *own), *visible)


@pytest.mark.parametrize(("args", "visible"), COMMANDS)
def test_a_command_through_a_gateway_shows_what_the_servers_sent(
    gateway: None,
    config: Path,
    env: dict[str, str],
    args: tuple[str, ...],
    visible: tuple[str, ...],
) -> None:
    """Asking a running ``serve``, the command shows every string the servers sent,
    escaped — as it does on servers of its own. The ``refuse`` server's error is shown
    between its attempts (not while it connects again): the command is asked again,
    within a deadline, until it is."""
    deadline = time.monotonic() + STEP
    while True:
        done = cli(env, *args, "--config", str(config))
        shown_not_obeyed(done)  # every answer: nothing a terminal obeys
        if all(v in done.stdout + done.stderr for v in visible) or time.monotonic() > deadline:
            break
    shown_not_obeyed(done, *visible)


@pytest.mark.parametrize("through", [False, True], ids=["own", "gateway"])
def test_events_are_json_lines_without_escapes(
    request: pytest.FixtureRequest, config: Path, env: dict[str, str], through: bool
) -> None:
    """``events``: a crashed server's stderr in ``mcp.local.crashed`` is written with
    ``\\uXXXX`` escapes — the same JSON value, nothing a terminal obeys."""
    if through:
        request.getfixturevalue("gateway")
    own = () if through else ("--no-gateway",)
    command = [sys.executable, "-m", "supervisor", "events", "--config", str(config), *own]
    process = subprocess.Popen(
        [*command, "--filter", "mcp.local.crashed", "--duration", str(STEP)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        for line in process.stdout:  # dead crashes every second or two
            if json.loads(line)["server"] == "dead":
                break
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=STEP)
    text = line.decode("utf-8", "surrogateescape")
    said = stderr.decode("utf-8", "surrogateescape")
    assert RAW.search(text) is None and RAW.search(said) is None, (text, said)
    assert "\\u001b]0;T\\u0007" in text and "\\u009b1m" in text and "\\u202eZ" in text
    event = json.loads(text)
    assert event["kind"] == "mcp.local.crashed"
    assert event["stderr_tail"] == ["stderr " + BAD]  # the same value, escaped


def test_progress_on_a_terminal_is_shown_not_obeyed(config: Path, env: dict[str, str]) -> None:
    """A call's progress message, drawn on a terminal, shows the server's escapes: the
    only escape sequence reaching the terminal is the bar's own erase."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "call", "--config", str(config), "--no-gateway",
         "evil_prog"],
        env=env, stdin=subprocess.DEVNULL, stderr=terminal, stdout=subprocess.PIPE,
    )  # fmt: skip
    os.close(terminal)
    try:
        out, _ = process.communicate(timeout=STEP)
        shown = rest_of_terminal(controller).decode("utf-8", "surrogateescape")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    assert process.returncode == 0 and out == b"done\n"
    assert "p" + SHOWN[:40] in shown, shown  # the line is cut to the terminal's width
    assert RAW.search(shown.replace("\r\x1b[K", "").replace("\r\n", "\n")) is None, shown


def test_add_lists_the_new_servers_tools_escaped(tmp_path: Path, env: dict[str, str]) -> None:
    """``add`` connects the new server once and lists its tools: their descriptions
    escaped."""
    hostile_config(tmp_path, names=())
    target = tmp_path / "added.json"
    done = cli(env, "add", "evil", "--config", str(target), "--", sys.executable,
               str(tmp_path / "h.py"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown_not_obeyed(done, "d" + SHOWN)


def test_a_config_shown_by_check_list_and_the_trust_gate_is_escaped(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A config's command line is shown escaped — by ``check``, ``list``, and the trust
    gate refusing an untrusted ./.mcp.json — so that it cannot hide what it starts."""
    args = ["h.py", "\x1b[2K\rharmless", "\u202eZ"]
    config = {"mcpServers": {"x": {"command": sys.executable, "args": args}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(config))
    shown = r"'\x1b[2K\x0dharmless' '\u202eZ'"
    for command in ("check", "list"):
        shown_not_obeyed(cli(env, command, "--config", str(tmp_path / ".mcp.json")), shown)
    gate = cli(env, "tools", cwd=tmp_path)
    assert gate.returncode == 2
    shown_not_obeyed(gate, shown)
    from supervisor.cli._trust import launches
    from supervisor.config import load_config

    (line,) = launches(load_config(tmp_path / ".mcp.json"))  # what the question lists
    assert RAW.search(line) is None and line.endswith(shown), line


async def test_auth_status_shows_what_the_authorization_server_said_escaped(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """``auth status``: the issuer and scopes a hostile authorization server gave, as
    the login stored them, are shown escaped."""
    from mcp.shared.auth import OAuthToken

    from supervisor.auth._service import AuthService
    from supervisor.auth._store import AuthStore
    from supervisor.config import load_config

    path = tmp_path / "mcp.json"
    server = {"type": "http", "url": "http://127.0.0.1:9/mcp", "auth": {"callbackPort": 9}}
    path.write_text(json.dumps({"mcpServers": {"remote": server}}))
    config = load_config(path)
    service = AuthService(
        list(config.servers.values()),
        store=AuthStore(tmp_path / "auth"),
        publish=lambda event: None,
        remember=lambda *secrets: None,
        base_dir=tmp_path,
    )
    credentials = service.brokers["remote"].credentials
    credentials.issuer = "http://as.example/" + BAD
    token = OAuthToken(access_token="at-0123456789", scope="read s" + BAD, expires_in=3600)
    await credentials.set_tokens(token)
    done = cli({**env, "MCP_SUPERVISOR_AUTH_DIR": str(tmp_path / "auth")},
               "auth", "status", "--config", str(path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown_not_obeyed(done, "http://as.example/" + SHOWN, "read s" + SHOWN)
