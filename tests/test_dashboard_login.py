"""Who can read the dashboard and who can act, beyond the page itself: reading behind the
login (beyond loopback, or asked for), a host beyond loopback refused without a chosen
token, and the token the command line takes — each against a real listener or a real
``mcp-supervisor`` process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio_websocket

from supervisor.dashboard import DashboardInfo, serve_dashboard
from supervisor.runtime import open_supervisor

from .test_dashboard import bearer, config, http, login, open_feed, origin

TOKEN_ENV = "MCP_SUPERVISOR_DASHBOARD_TOKEN"
TOKEN = "a-chosen-dashboard-token-0123456789"

#: Every route that reads: none of them may answer before the login when reading needs it.
READS = ("/", "/app.js", "/app.css", "/timeline.css", "/metrics", "/healthz", "/readyz")


async def test_with_login_to_read_nothing_is_read_before_the_login() -> None:
    """`login_to_read=True` on 127.0.0.1: the page, its assets, the metrics, the health and
    the feed are 401 without the login (a forged Origin or a wrong token changes nothing);
    the login URL itself answers; with its cookie, or with the bearer token, all of them
    are read."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        info: DashboardInfo = await nursery.start(
            lambda task_status: serve_dashboard(
                sup, "127.0.0.1", 0, login_to_read=True, task_status=task_status
            )
        )
        assert info.login_to_read
        wrong = {"Authorization": "Bearer guess"}
        for path in READS:
            for headers in ({}, origin(info), wrong):
                reply = await http(info, "GET", path, headers)
                assert reply.status == 401, (path, headers, reply.status)
                assert b"servers" not in reply.body and b"notes" not in reply.body
        for headers in (origin(info), {**origin(info), **wrong}):
            with pytest.raises(trio_websocket.ConnectionRejected) as refused:
                async with open_feed(info, headers):
                    pass
            assert refused.value.status_code == 401
        cookie = await login(info)
        for headers in (cookie, bearer(info)):
            for path in READS:
                reply = await http(info, "GET", path, headers)
                assert reply.status == 200, (path, headers, reply.body)
            async with open_feed(info, headers) as ws:
                assert json.loads(await ws.get_message())["type"] == "hello"
        nursery.cancel_scope.cancel()


async def test_a_host_beyond_loopback_needs_a_chosen_token_and_then_guards_reading() -> None:
    """`serve_dashboard` on 0.0.0.0 without `token=` raises before it listens, saying to
    pass one; so does an unfit token. A host it cannot tell is loopback (a name: `127.1`
    binds 127.0.0.1, but is no loopback address as written) is treated as beyond it:
    with a token it serves, and reading needs the login."""
    async with open_supervisor(config()) as sup, trio.open_nursery() as nursery:
        for host in ("0.0.0.0", "::", "127.1", "192.0.2.1"):
            with pytest.raises(ValueError, match=r"beyond this machine.*pass token="):
                await nursery.start(serve_dashboard, sup, host, 0)
        for token, why in (("short", "at least 16"), ("with spaces in it, long", "ASCII")):
            with pytest.raises(ValueError, match=why):
                await nursery.start(
                    lambda task_status, t=token: serve_dashboard(
                        sup, "127.0.0.1", 0, token=t, task_status=task_status
                    )
                )
        info: DashboardInfo = await nursery.start(
            lambda task_status: serve_dashboard(
                sup, "127.1", 0, token=TOKEN, task_status=task_status
            )
        )
        assert info.login_to_read and info.token == TOKEN
        assert (await http(info, "GET", "/")).status == 401
        assert (await http(info, "GET", "/metrics")).status == 401
        assert (await http(info, "GET", "/", bearer(info))).status == 200
        nursery.cancel_scope.cancel()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def marked_config(tmp_path: Path) -> tuple[Path, Path]:
    """A config whose one server, if ever started, leaves a file behind."""
    marker = tmp_path / "started"
    code = f"open({str(marker)!r}, 'w').close()"
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"s": {"command": sys.executable, "args": ["-c", code]}}})
    )
    return path, marker


@pytest.mark.parametrize("command", ["serve", "status", "demo"])
def test_the_cli_refuses_a_dashboard_beyond_loopback_without_a_token(
    command: str, tmp_path: Path
) -> None:
    """`--dashboard 0.0.0.0:0` without a token: exit 2 before anything starts, saying what
    to set ($MCP_SUPERVISOR_DASHBOARD_TOKEN or --dashboard-token-file)."""
    path, marker = marked_config(tmp_path)
    config_args = () if command == "demo" else ("--config", str(path))
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", command, *config_args, "--dashboard", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"mcp-supervisor {command}: the dashboard would listen on 0.0.0.0, beyond this "
        "machine, and there reading and acting need a token you choose: set "
        f"${TOKEN_ENV} (or --dashboard-token-file F) to a secret of at least 16 "
        "characters, or listen on 127.0.0.1\n"
    )
    assert result.stdout == "" and not marker.exists()


def test_the_cli_refuses_an_unfit_or_unreadable_token(tmp_path: Path) -> None:
    """A token too short (in the variable or the file), a file that cannot be read, or
    --dashboard-token-file without --dashboard: exit 2, saying which and why."""
    path, marker = marked_config(tmp_path)
    serve = ("serve", "--config", str(path))
    short = tmp_path / "short"
    short.write_text("abc\n")
    cases = [
        ((*serve, "--dashboard", ":0"), {TOKEN_ENV: "abc"}, f"token in ${TOKEN_ENV} is refused"),
        ((*serve, "--dashboard", ":0", "--dashboard-token-file", str(short)), {},
         f"token in --dashboard-token-file {short} is refused: it has 3 characters"),
        ((*serve, "--dashboard", ":0", "--dashboard-token-file", str(tmp_path / "none")), {},
         "cannot read --dashboard-token-file"),
        ((*serve, "--dashboard-token-file", str(short)), {}, "add --dashboard HOST:PORT"),
    ]  # fmt: skip
    for args, env, message in cases:
        result = cli(*args, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not marker.exists()


async def test_serve_takes_the_token_from_a_file_and_never_says_it(tmp_path: Path) -> None:
    """With --dashboard-token-file the login line shows where the token is, not the token;
    that token (as bearer) acts, and it appears nowhere on stderr."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config()))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor", "serve", "--config", str(path),
         "--dashboard", "127.0.0.1:0", "--dashboard-token-file", str(token_file), "-v"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = b""
    try:
        with trio.fail_after(30):
            while b"login?token=TOKEN" not in stderr or not stderr.endswith(b"\n"):
                chunk = await process.stderr.receive_some(4096)
                assert chunk, stderr.decode()
                stderr += chunk
        match = re.search(rb"dashboard at (http://127\.0\.0\.1:(\d+)/)\n", stderr)
        assert match, stderr.decode()
        url, port = match.group(1).decode(), int(match.group(2))
        assert (
            f"mcp-supervisor: dashboard login (to restart and stop servers): {url}login?"
            f"token=TOKEN (TOKEN: the one in --dashboard-token-file {token_file})\n"
        ).encode() in stderr
        info = DashboardInfo(url=url, host="127.0.0.1", port=port, token=TOKEN)
        stopped = await http(info, "POST", "/api/servers/calc/stop", bearer(info))
        assert stopped.status == 200, stopped.body
        assert (await http(info, "POST", "/api/servers/notes/stop", origin(info))).status == 401
        process.terminate()
        with trio.fail_after(30):
            while chunk := await process.stderr.receive_some(4096):
                stderr += chunk
            assert await process.wait() == 143, stderr.decode()
        assert TOKEN.encode() not in stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
