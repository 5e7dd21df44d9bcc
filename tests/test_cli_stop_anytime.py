"""Every command, at every moment of its life — starting, connecting, waiting on its
server, printing — stops on SIGINT, SIGTERM and SIGHUP within its bound, exits ``128 +``
the signal, and leaves no process: each command run as a real process over
``tests/gated_server.py``, which says what it was asked and stops answering at the chosen
step."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys

import pytest

from .test_cli_signals import Cli, Ready, wait_until_gone, write_config

GATED = pathlib.Path(__file__).with_name("gated_server.py")
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def gated(log: pathlib.Path, hang_at: str | None = None, tools: int = 0) -> list[str]:
    """The command line of tests/gated_server.py, logging to ``log``."""
    line = [sys.executable, "-S", "-I", str(GATED), "--log", str(log), "--tools", str(tools)]
    return line + (["--hang-at", hang_at] if hang_at else [])


def logged(log: pathlib.Path, word: str) -> Ready:
    """Ready once the gated server has written ``word`` (a request's method) to ``log``."""

    def ready(cli: Cli) -> bool:
        lines = log.read_text().splitlines() if log.exists() else []
        return any(line.split(" ")[0] == word for line in lines)

    return ready


def pids_in(log: pathlib.Path) -> set[int]:
    """Every gated server process that started, by its log."""
    lines = log.read_text().splitlines() if log.exists() else []
    return {int(line.split(" ")[1]) for line in lines if line.startswith("start ")}


def handling_signals(cli: Cli) -> bool:
    """Whether the command handles SIGTERM and SIGHUP itself yet (``/proc``'s SigCgt):
    its earliest moment — before, the interpreter is still starting."""
    status = pathlib.Path(f"/proc/{cli.process.pid}/status").read_text()
    caught = int(next(v for k, _, v in (line.partition(":\t") for line in status.splitlines())
                      if k == "SigCgt"), 16)
    return all(caught >> (sig - 1) & 1 for sig in (signal.SIGTERM, signal.SIGHUP))


def pipe_full(cli: Cli) -> bool:
    """Whether the command's standard output pipe is full: its next write blocks."""
    import fcntl
    import termios

    raw = fcntl.ioctl(cli._stdout, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(raw, sys.byteorder) >= 65536


#: command -> (its arguments, the request its work waits on)
WORK: dict[str, tuple[tuple[str, ...], str]] = {
    "status": ((), "tools/list"),
    "tools": ((), "tools/list"),
    "call": (("g_echo", '{"text": "hi"}'), "tools/call"),
    "resources": ((), "resources/list"),
    "read": (("gated://note",), "resources/read"),
    "prompts": ((), "prompts/list"),
    "prompt": (("g_hello",), "prompts/get"),
    "events": ((), "tools/list"),
    "add": ((), "tools/list"),
    "serve": (("--http", "127.0.0.1:0"), "tools/list"),
    "chaos": ((), "tools/call"),
}
#: the moments a signal comes: as soon as the command handles signals (before, the
#: interpreter is starting: a signal then is the interpreter's), once the server process is
#: up but not answering the handshake, once the command's own request waits at the server,
#: and (``tools``, a big catalog) while the output waits for a reader
MOMENTS = ("start", "connecting", "working")
ANYTIME = [
    pytest.param(command, moment, sig, id=f"{command}-{moment}-{sig.name}")
    for i, command in enumerate(WORK)
    for j, moment in enumerate(MOMENTS)
    for sig in [STOPS[(i + j) % len(STOPS)]]  # each command and each moment gets all three
] + [pytest.param("tools", "printing", sig, id=f"tools-printing-{sig.name}") for sig in STOPS]


@pytest.mark.parametrize(("command", "moment", "sig"), ANYTIME)
def test_every_command_stops_at_any_moment(
    tmp_path: pathlib.Path, command: str, moment: str, sig: signal.Signals
) -> None:
    """SIGINT, SIGTERM or SIGHUP at any moment of a command's life — starting, connecting,
    waiting on its server, printing — ends it within its bound with ``128 +`` the signal
    (or, before Python has set its handlers, by the signal itself), no traceback, and no
    server process left."""
    args, work = WORK[command]
    log = tmp_path / "gated.log"
    hang_at = {"start": None, "connecting": "initialize", "working": work, "printing": None}[moment]
    server = gated(log, hang_at, tools=3000 if moment == "printing" else 0)
    env_home = {"XDG_RUNTIME_DIR": str(tmp_path)}  # no gateway of another test is found
    stdin = subprocess.DEVNULL
    if command == "add":
        config = str(tmp_path / "mcp.json")
        line = ["add", "g", "--config", config, *args, "--", *server]
    elif command == "chaos":
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"rules": []}))
        line, stdin = ["chaos", "--plan", str(plan), "--", *server], subprocess.PIPE
    else:
        entry = {"command": server[0], "args": server[1:], "approve": False}
        limits = {"limits": {"maxToolsPerServer": 5000}, "initTimeout": 60}
        config = write_config(tmp_path, {"g": entry}, supervisor=limits)
        line = [command, "--config", config, *args]
    cli = Cli(*line, stdin=stdin, env=env_home)
    try:
        if command == "chaos" and moment != "start":
            assert cli.process.stdin is not None
            for request in CHAOS_CLIENT:
                cli.process.stdin.write(json.dumps(request).encode() + b"\n")
            cli.process.stdin.flush()
        if moment == "start":
            cli.wait_until(handling_signals, "signal handlers")
        elif moment == "connecting":
            cli.wait_for(logged(log, "start"), "server process")
        elif moment == "working":
            cli.wait_for(logged(log, work), f"{work} at the server")
        else:
            cli.wait_until(pipe_full, "a full pipe")
        cli.process.send_signal(sig)
        code = cli.finish()
    finally:
        cli.kill()
    err = cli.err.decode()
    assert code == 128 + sig, err
    assert "Traceback" not in err, err
    assert wait_until_gone(pids_in(log)) == set()


#: what a client says to ``chaos``'s server: the handshake, then a tool call
CHAOS_CLIENT = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hi"}}},
]  # fmt: skip
