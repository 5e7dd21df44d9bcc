"""How a command ends when it is told to: a signal stops its servers gracefully and exits
128 + the signal's number; a closed standard output ends it quietly with 141. Each test
runs the CLI as a real process over real fixture servers and checks ``/proc``."""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import trio

from supervisor.cli._common import run
from supervisor.testing.servers import stdio_params

from .probes import running

#: Generous: this machine may be busy, and connecting a server takes seconds then.
READY_TIMEOUT = 120
EXIT_TIMEOUT = 60
REAP_TIMEOUT = 10


def write_config(tmp_path: pathlib.Path, servers: dict[str, object], **top: object) -> str:
    path = tmp_path / "mcp.json"
    # A generous handshake bound: on a loaded machine (CI, two test workers) a fixture's
    # interpreter start can take more than the 10 s default; these tests are not about it.
    top.setdefault("supervisor", {"initTimeout": 60})
    path.write_text(json.dumps({"mcpServers": servers, **top}))
    return str(path)


def fixture(kind: str, *extra: str) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": [*args, *extra]}


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def wait_until_gone(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running after :data:`REAP_TIMEOUT` seconds."""
    deadline = time.monotonic() + REAP_TIMEOUT
    while (left := {pid for pid in pids if running(pid)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class Cli:
    """``mcp-supervisor ARGS`` as a child process whose output is read as it comes."""

    def __init__(
        self, *args: str, stdin: int = subprocess.DEVNULL, env: dict[str, str] | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "supervisor", *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else {**os.environ, **env},
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out = b""
        self.err = b""
        self._stdout = self.process.stdout.fileno()
        self._open = {self._stdout, self.process.stderr.fileno()}

    def _read(self, timeout: float) -> None:
        """Read what either pipe has, waiting at most ``timeout`` s for something."""
        ready, _, _ = select.select(list(self._open), [], [], timeout)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                self._open.discard(fd)
            elif fd == self._stdout:
                self.out += chunk
            else:
                self.err += chunk

    def wait_for(self, ready: Ready, what: str) -> None:
        """Read until ``ready(self)``; fail after :data:`READY_TIMEOUT` or at the end."""
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready(self):
            left = deadline - time.monotonic()
            assert left > 0 and self._open, f"no {what}:\n{self.out!r}\n{self.err.decode()}"
            self._read(min(left, 1.0))

    def wait_until(self, ready: Ready, what: str) -> None:
        """Read only stderr until ``ready(self)`` (standard output left to fill up); fail
        after :data:`READY_TIMEOUT`."""
        deadline = time.monotonic() + READY_TIMEOUT
        stderr = self._open - {self._stdout}
        while not ready(self):
            left = deadline - time.monotonic()
            assert left > 0, f"no {what}:\n{self.err.decode()}"
            for fd in select.select(list(stderr), [], [], min(left, 0.05))[0]:
                self.err += os.read(fd, 65536)

    def finish(self) -> int:
        """Read to the end of both pipes and return the exit code."""
        deadline = time.monotonic() + EXIT_TIMEOUT
        while self._open:
            left = deadline - time.monotonic()
            assert left > 0, f"still running:\n{self.err.decode()}"
            self._read(left)
        return self.process.wait(timeout=EXIT_TIMEOUT)

    def close_stdout(self) -> None:
        """Stop reading standard output and close it, as a reader that has had enough."""
        assert self.process.stdout is not None
        self._open.discard(self._stdout)
        self.process.stdout.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def connected(count: int) -> Ready:
    """Ready once ``-v``'s log on stderr has said ``connected`` ``count`` times."""
    return lambda cli: cli.err.count(b'"event": "connected"') >= count


def on_stderr(text: str) -> Ready:
    return lambda cli: text.encode() in cli.err


def on_stdout(text: str) -> Ready:
    return lambda cli: text.encode() in cli.out


def two_echo_servers(tmp_path: pathlib.Path) -> str:
    return write_config(tmp_path, {"one": fixture("echo"), "two": fixture("echo")})


Ready = Callable[[Cli], bool]

#: command name -> (the config, the arguments after it, when it is running, its servers)
CASES: dict[str, tuple[Callable[[pathlib.Path], str], tuple[str, ...], Ready, int]] = {
    "events": (two_echo_servers, ("-v",), connected(2), 2),
    "status-watch": (two_echo_servers, ("--watch", "--json", "-v"), connected(2), 2),
    "serve": (two_echo_servers, ("--dashboard", "127.0.0.1:0", "-v"), connected(2), 2),
    "serve-http": (two_echo_servers, ("--http", "127.0.0.1:0", "-v"), connected(2), 2),
    # the example servers: notes and calc over stdio, flaky over HTTP in its own process
    "demo": (lambda _: "", (), on_stdout("2. Calls across servers"), 3),
    "call-running": (
        lambda tmp_path: write_config(tmp_path, {"s": fixture("slow")}),
        ("s_sleep", '{"seconds": 600}', "--yes", "-v"),
        on_stderr("approved by --yes"),
        1,
    ),
    "call-connecting": (
        lambda tmp_path: write_config(tmp_path, {"h": fixture("hang-init")}),
        ("h_echo", "-vv"),
        on_stderr("received server/discover; never answering"),
        1,
    ),
}

SIGNALS = [pytest.param(name, signal.SIGTERM, id=f"{name}-SIGTERM") for name in CASES] + [
    pytest.param(name, sig, id=f"{name}-{sig.name}")
    for name in ("events", "call-connecting")
    for sig in (signal.SIGHUP, signal.SIGINT)
]


@pytest.mark.parametrize(("name", "sig"), SIGNALS)
def test_a_signal_stops_the_servers_then_exits_128_plus_its_number(
    tmp_path: pathlib.Path, name: str, sig: signal.Signals
) -> None:
    """SIGTERM, SIGHUP or SIGINT to a command whose servers are up (or starting): it says
    so on stderr, stops every server process it started, and exits 128 + the signal."""
    make_config, args, ready, count = CASES[name]
    command = name.split("-")[0]
    config = make_config(tmp_path)
    cli = Cli(command, *(("--config", config) if config else ()), *args)
    try:
        cli.wait_for(ready, "sign of the servers being up")
        servers = children(cli.process.pid)
        assert len(servers) == count, servers
        cli.process.send_signal(sig)
        code = cli.finish()
    finally:
        cli.kill()
    err = cli.err.decode()
    assert code == 128 + sig, err
    assert wait_until_gone(servers) == set()
    assert "Traceback" not in err
    stopped = {"SIGTERM": "terminated", "SIGHUP": "hung up", "SIGINT": "interrupted"}[sig.name]
    assert f"mcp-supervisor: {stopped}, stopping the servers" in err


@pytest.mark.parametrize("end", ["close stdin", "SIGTERM"])
def test_a_stdio_gateway_ends_with_its_client_or_a_signal(tmp_path: pathlib.Path, end: str) -> None:
    """``serve`` over stdio: the client closing standard input ends it with exit 0, a
    signal with 128 + its number; either way every server it started is gone."""
    config = two_echo_servers(tmp_path)
    cli = Cli("serve", "--config", config, "-v", stdin=subprocess.PIPE)
    try:
        cli.wait_for(connected(2), "sign of the servers being up")
        servers = children(cli.process.pid)
        assert len(servers) == 2, servers
        assert cli.process.stdin is not None
        if end == "close stdin":
            cli.process.stdin.close()
        else:
            cli.process.send_signal(signal.SIGTERM)
        code = cli.finish()
    finally:
        cli.kill()
    err = cli.err.decode()
    assert code == (0 if end == "close stdin" else 143), err
    assert wait_until_gone(servers) == set()
    assert "Traceback" not in err and cli.out == b""  # stdout is the protocol's alone


def test_a_second_signal_does_not_cut_the_stop_short(tmp_path: pathlib.Path) -> None:
    """A server slow to stop (it ignores SIGTERM and outlives its stdin) still gets its
    bounded stop when a second SIGTERM comes: no process is left behind, exit 143."""
    command, args = stdio_params("echo")
    script = " ".join([command, *args])
    stubborn = {"command": "sh", "args": ["-c", f"trap '' TERM; {script}; sleep 600"]}
    config = write_config(tmp_path, {"stubborn": stubborn})
    cli = Cli("events", "--config", config, "-v")
    try:
        cli.wait_for(connected(1), "connection")
        shell = children(cli.process.pid)
        assert len(shell) == 1, shell
        cli.process.send_signal(signal.SIGTERM)
        cli.wait_for(on_stderr("stopping the servers"), "first signal's note")
        cli.process.send_signal(signal.SIGTERM)
        code = cli.finish()
    finally:
        cli.kill()
    err = cli.err.decode()
    assert code == 143, err
    assert "mcp-supervisor: still stopping the servers" in err
    assert wait_until_gone(shell) == set()
    assert "Traceback" not in err


def test_a_closed_stdout_ends_the_command_quietly_with_141(tmp_path: pathlib.Path) -> None:
    """`tools | head -1`: once the reader has gone, the command exits 141 with nothing on
    stderr (no BrokenPipeError) and no server process left."""
    config = write_config(
        tmp_path,
        {"big": fixture("big", "--tools", "3000")},  # about 250 kB of table
        supervisor={"limits": {"maxToolsPerServer": 5000}, "initTimeout": 60},
    )
    cli = Cli("tools", "--config", config)
    try:
        cli.wait_for(lambda cli: b"\n" in cli.out, "first line")
        servers = children(cli.process.pid)
        cli.close_stdout()  # as `head -1` does once it has its line
        code = cli.finish()
    finally:
        cli.kill()
    assert cli.out.startswith(b"name ")
    assert code == 141, cli.err.decode()
    assert cli.err == b""
    assert wait_until_gone(servers) == set()


class TestRun:
    """_common.run, in this process: the command's own code, or 128 + a stopping signal."""

    def test_the_command_s_code_when_no_signal_came(self) -> None:
        """Without a signal, run returns what the command returned."""

        async def command() -> int:
            return 3

        assert run(command) == 3

    @pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=str)
    def test_a_signal_cancels_the_command(self, sig: signal.Signals) -> None:
        """A stopping signal cancels the command, whose cleanup runs; 128 + the signal."""
        cleaned: list[bool] = []

        async def command() -> int:
            os.kill(os.getpid(), sig)
            try:
                await trio.sleep_forever()
            finally:
                cleaned.append(True)

        assert run(command) == 128 + sig
        assert cleaned == [True]

    def test_an_error_while_stopping_keeps_the_signal_s_code(self) -> None:
        """An error raised by the stop a signal caused (a terminal gone with SIGHUP) does not
        turn the exit into a failure: 129."""

        async def command() -> int:
            os.kill(os.getpid(), signal.SIGHUP)
            try:
                await trio.sleep_forever()
            finally:
                raise OSError(5, "Input/output error")

        assert run(command) == 129

    @pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=str)
    def test_a_signal_as_the_command_ends_is_its_exit(
        self, sig: signal.Signals, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A signal that came as the command returned, with no checkpoint left for the
        watcher to take it (a print blocked on a full pipe, then done), is still the exit
        — not the signal's default action, which would end the process unannounced."""

        async def command() -> int:
            os.kill(os.getpid(), sig)  # handed to trio's receiver, never taken from it
            return 0

        assert run(command) == 128 + sig
        stopped = {"SIGTERM": "terminated", "SIGHUP": "hung up", "SIGINT": "interrupted"}
        assert capsys.readouterr().err == f"mcp-supervisor: {stopped[sig.name]}\n"

    def test_an_error_without_a_signal_is_raised_as_itself(self) -> None:
        """The command's error comes out as it was raised, not in an exception group."""

        async def command() -> int:
            raise ValueError("no")

        with pytest.raises(ValueError, match="^no$"):
            run(command)
