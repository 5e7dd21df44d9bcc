"""The CLI's commands use a running gateway: ``call``, ``tools``, ``status`` and ``events``
ask the ``serve`` of the same config (its Unix socket) or ``--connect URL``, and start the
servers themselves only when there is none (or ``--no-gateway``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path

import pytest
import trio

from supervisor import open_supervisor
from supervisor.gateway import Gateway, serve_http
from supervisor.gateway._http import serve_local
from supervisor.gateway._local import GatewayClient, bind_local, local_socket
from supervisor.testing.servers import count_executions, make_server, stdio_params
from supervisor.tools._request import ToolCall
from tests.test_startup import HEAVY

TOKEN = "cli-gateway-token-0123456789"


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runtime directory of the test's own, short enough for a Unix socket's path."""
    path = Path(tempfile.mkdtemp(prefix="mcps-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("MCP_SUPERVISOR_GATEWAY_TOKEN", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_config(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def fixture(kind: str, **extra: object) -> dict[str, object]:
    command, args = stdio_params(kind)  # type: ignore[arg-type]
    return {"command": command, "args": args, "initTimeout": 60, **extra}


@asynccontextmanager
async def running_gateway(
    config: Path, *, apps: dict[str, object] | None = None, http: bool = False
) -> AsyncIterator[tuple[object, str | None]]:
    """What ``serve --config config`` runs, in this process: the supervisor, its gateway
    on the config's local socket (and over HTTP with ``http``: its URL is yielded)."""
    async with open_supervisor(str(config), apps=apps) as sup, trio.open_nursery() as nursery:
        gateway = Gateway(sup)
        await nursery.start(gateway.run)
        await sup.tools()
        assert await nursery.start(serve_local, gateway, str(config)) == local_socket(config)
        url = None
        if http:
            info = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=TOKEN))
            url = info.url
        yield sup, url
        nursery.cancel_scope.cancel()


async def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(120):
        return await trio.run_process(
            [sys.executable, "-m", "supervisor", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )


async def test_call_uses_the_running_gateway(tmp_path: Path) -> None:
    """``call`` through the gateway of its config: the result printed as ``call`` prints
    one, ``--json`` naming the server; the gateway's process served it (its execution
    count went up), and the CLI started no server of its own."""
    config = write_config(tmp_path, {"echo": fixture("echo", autoApprove=True, lazy=False)})
    async with running_gateway(config) as (sup, _):
        before = sup.metrics()["echo"].calls_ok  # type: ignore[attr-defined]
        done = await cli("call", "--config", str(config), "echo_echo", '{"text": "warm"}')
        assert (done.returncode, done.stdout) == (0, b"warm\n"), done.stderr
        done = await cli("call", "--config", str(config), "echo_add", '{"a": 2, "b": 3}', "--json")
        document = json.loads(done.stdout)
        assert document["server"] == "echo" and document["structured"] == {"result": 5}
        assert document["text"] == "5" and not document["is_error"]
        assert sup.metrics()["echo"].calls_ok == before + 2  # type: ignore[attr-defined]
        # and it loaded neither the MCP SDK nor trio nor the logging stack
        probe = (
            "import json, sys; from supervisor.cli import main;"
            "code = main(json.loads(sys.argv[2]));"
            "print(json.dumps([code, sorted({m.partition('.')[0] for m in sys.modules} & "
            "set(json.loads(sys.argv[1])))]), file=sys.stderr)"
        )
        argv = ["call", "--config", str(config), "echo_echo", '{"text": 1}']
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-c", probe, json.dumps(HEAVY), json.dumps(argv)],
                capture_stdout=True,
                capture_stderr=True,
            )
        code, loaded = json.loads(done.stderr.splitlines()[-1])
        assert (code, loaded) == (2, [])  # 2: the gateway refused the arguments


async def test_call_through_the_gateway_fails_as_a_call_would(tmp_path: Path) -> None:
    """Unknown tool and invalid arguments: exit 2, said on stderr; a tool's own error:
    exit 1 with its text; a tool needing approval: exit 2 saying how to allow it, as a
    call made here would (``--yes`` works through the local socket)."""
    config = write_config(tmp_path, {"asks": fixture("echo")})
    apps = {"notes": make_server("rich")}
    async with running_gateway(config, apps=apps):
        base = ("call", "--config", str(config))
        unknown = await cli(*base, "notes_ech", "{}")
        assert unknown.returncode == 2 and b"notes_echo" in unknown.stderr
        invalid = await cli(*base, "notes_echo", "{}")
        assert invalid.returncode == 2
        assert b"ToolArgumentsInvalid" in invalid.stderr and b"'text'" in invalid.stderr
        failed = await cli(*base, "notes_fail", '{"message": "no such note"}')
        assert failed.returncode == 1 and b"reported an error: no such note" in failed.stderr
        refused = await cli(*base, "asks_echo", '{"text": "x"}')
        # in the command line's terms: its --yes approves through the local socket
        assert refused.returncode == 2 and b"or run with --yes" in refused.stderr


async def test_tools_status_and_events_use_the_gateway(tmp_path: Path) -> None:
    """``tools`` lists the gateway's tools, ``status --json`` is its document (the pid of
    the gateway's server, not a new one), ``events`` streams its events."""
    config = write_config(tmp_path, {"echo": fixture("echo", autoApprove=True, lazy=False)})
    async with running_gateway(config) as (sup, _):
        listed = await cli("tools", "--config", str(config))
        assert listed.returncode == 0 and listed.stdout.splitlines()[1].startswith(b"echo_echo ")
        found = await cli("tools", "--config", str(config), "--search", "text UNCHANGED", "--json")
        assert [t["name"] for t in json.loads(found.stdout)["tools"]] == ["echo_echo"]
        status = await cli("status", "--config", str(config), "--json")
        assert status.returncode == 0, status.stderr
        records = {r["server"]: r for r in json.loads(status.stdout)["servers"]}
        assert records["echo"]["pid"] == sup.status()["echo"].pid  # type: ignore[attr-defined]
        command = ["events", "--config", str(config), "--filter", "mcp.*"]
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "supervisor", *command], stdout=subprocess.PIPE
        )
        assert process.stdout is not None
        seen = b""
        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:

                    async def restarts() -> None:  # events, until the stream is open
                        while True:
                            await sup.restart("echo")  # type: ignore[attr-defined]

                    nursery.start_soon(restarts)
                    while b"\n" not in seen:
                        seen += await process.stdout.receive_some()
                    nursery.cancel_scope.cancel()
        finally:
            process.kill()
            await process.wait()
            await process.stdout.aclose()
        first = json.loads(seen.splitlines()[0])
        assert first["kind"].startswith("mcp.") and first["server"] == "echo"


async def test_no_gateway_and_connect_choose_where_to_ask(tmp_path: Path) -> None:
    """``--no-gateway`` starts the servers itself (another pid); ``--connect URL`` asks a
    gateway over HTTP with the token from the environment, and a wrong token is a clear
    error (exit 1)."""
    config = write_config(tmp_path, {"echo": fixture("echo", autoApprove=True, lazy=False)})
    async with running_gateway(config, http=True) as (sup, url):
        assert url is not None
        own = await cli("status", "--config", str(config), "--json", "--no-gateway")
        (record,) = json.loads(own.stdout)["servers"]
        assert record["pid"] != sup.status()["echo"].pid  # type: ignore[attr-defined]
        env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
        other = tmp_path / "elsewhere.json"  # any config: --connect names the gateway
        other.write_text('{"mcpServers": {}}')
        done = await cli(
            "call", "--config", str(other), "--connect", url, "echo_echo", '{"text": "hi"}',
            env=env,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, b"hi\n"), done.stderr
        env["MCP_SUPERVISOR_GATEWAY_TOKEN"] = "wrong"
        denied = await cli("tools", "--config", str(other), "--connect", url, env=env)
        assert denied.returncode == 1 and b"HTTP 401" in denied.stderr


def test_a_dead_gateways_socket_is_replaced_and_a_live_one_kept(runtime_dir: Path) -> None:
    """The socket file of a gateway that was killed is taken over; while a gateway
    listens, a second one for the same config gets none (and the CLI finds the first)."""
    config = runtime_dir / "mcp.json"
    config.write_text("{}")
    path = local_socket(config)
    first = bind_local(path)
    assert first is not None and oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert bind_local(path) is None  # someone listens
    assert GatewayClient.find(str(config)) is not None
    first.close()  # killed: the file stays, nobody listens
    assert path.exists() and GatewayClient.find(str(config)) is None
    second = bind_local(path)
    assert second is not None
    second.close()


async def test_call_yes_approves_over_the_local_socket_only(tmp_path: Path) -> None:
    """``call --yes`` of a tool that needs approval: through the gateway's local socket
    it is approved (the audit log says ``cli --yes``) and runs; over ``--connect`` it
    approves nothing, and the refusal names every way out (exit 2, not sent)."""
    audit = tmp_path / "audit.jsonl"
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {"mcpServers": {"asks": fixture("echo")}, "supervisor": {"audit": {"path": str(audit)}}}
        )
    )
    async with running_gateway(path, http=True) as (sup, url):
        assert url is not None
        base = ("call", "--config", str(path), "asks_add", '{"a": 1, "b": 2}')
        refused = await cli(*base)
        assert refused.returncode == 2 and b"run with --yes" in refused.stderr, refused.stderr
        approved = await cli(*base, "--yes")
        assert (approved.returncode, approved.stdout) == (0, b"3\n"), approved.stderr
        env = {**os.environ, "MCP_SUPERVISOR_GATEWAY_TOKEN": TOKEN}
        remote = await cli(*base, "--yes", "--connect", url, env=env)
        assert remote.returncode == 2, remote.stderr
        for way_out in (b"autoApprove", b"start the gateway with --yes", b"--no-gateway --yes"):
            assert way_out in remote.stderr, remote.stderr
        assert sup.metrics()["asks"].calls_ok == 1  # type: ignore[attr-defined]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    decisions = [(line["outcome"], line["approval"]["by"]) for line in lines]
    assert decisions == [
        ("refused", "no callback"),
        ("ok", "cli --yes"),
        ("refused", "no callback"),
    ]


async def test_the_gateway_passes_a_large_result_on_whole_and_spills_nothing(
    tmp_path: Path,
) -> None:
    """A 221 KiB result through the gateway: the client gets all of it, and the
    gateway's supervisor writes no spill file (nobody would ever read or remove it)."""
    spill = tmp_path / "spill"
    async with open_supervisor(
        {"mcpServers": {}}, apps={"notes": make_server("rich")}, spill_dir=spill
    ) as sup:
        gateway = Gateway(sup)
        result = await gateway.call(ToolCall("notes_big_text", {"kib": 221}))
        text = "".join(block.text for block in result.content)  # type: ignore[union-attr]
        assert len(text.encode()) >= 221 * 1024 and not result.is_error
        # the supervisor's own callers still get a preview and a file
        own = await sup.call("notes_big_text", {"kib": 221})
        assert own.spilled_to is not None and own.spilled_to.parent == spill
    assert [p.name for p in spill.iterdir()] == [own.spilled_to.name]


async def _call_on_a_terminal(config: Path, answer: bytes) -> tuple[int, str, str]:
    """``call`` with stdin and stderr on a terminal, answering ``answer`` to its question
    (nothing: Ctrl-C): its exit code, stdout, and what the terminal showed."""
    import pty

    controller, terminal = pty.openpty()
    command = [sys.executable, "-m", "supervisor", "call", "--config", str(config)]
    process = await trio.lowlevel.open_process(
        [*command, "asks_echo", '{"text": "hi"}'],
        stdin=terminal,
        stderr=terminal,
        stdout=subprocess.PIPE,
    )
    os.close(terminal)
    shown, out = b"", b""
    assert process.stdout is not None
    with trio.fail_after(120):
        async with trio.lowlevel.FdStream(controller) as screen:
            while b"[y/N]" not in shown:
                chunk = await screen.receive_some()
                assert chunk, shown
                shown += chunk
            if answer:
                await screen.send_all(answer)
            else:  # Ctrl-C (the child has no controlling terminal to turn ^C into it)
                process.send_signal(signal.SIGINT)
            while chunk := await process.stdout.receive_some():
                out += chunk
            await process.wait()
            with suppress(OSError, trio.BrokenResourceError):  # its other end is gone
                while chunk := await screen.receive_some():
                    shown += chunk
    return process.returncode, out.decode(), shown.decode(errors="replace")


@pytest.mark.parametrize(("answer", "code"), [(b"y\n", 0), (b"n\n", 1), (b"", 130)])
async def test_call_on_a_terminal_is_asked_through_the_gateway(
    tmp_path: Path, answer: bytes, code: int
) -> None:
    """``call`` on a terminal, through a gateway, of a tool that needs approval: the
    gateway asks it (an input_required round trip) and it asks the person, as it would
    without a gateway — ``y`` runs the call once, anything else refuses it unsent, and
    Ctrl-C there ends the command (130) with nothing more sent."""
    counts = tmp_path / "counts"
    command, args = stdio_params("echo", count_file=counts)  # type: ignore[arg-type]
    config = write_config(tmp_path, {"asks": {"command": command, "args": args}})
    async with running_gateway(config):
        returncode, out, shown = await _call_on_a_terminal(config, answer)
    assert "Allow the tool 'echo' of the server 'asks' to run?" in shown
    assert '{"text": "hi"}' in shown
    assert returncode == code, shown
    if code == 0:
        assert out == "hi\n"
        assert count_executions(counts) == {"echo": 1}
    else:
        assert "ApprovalDenied" in shown and not counts.exists()
        if code == 130:
            assert "interrupted at the approval question" in shown
